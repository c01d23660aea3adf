"""Nothing the controller creates in AWS outlives what needs it (issue #27 item 3), end to end in moto.

Classes and pools are created, changed (a class's tags, a pool's labels) and deleted through the API while the
controller launches; afterwards moto holds 0 launch templates and 0 instance profiles of the cluster. The
EC2NodeClass termination finalizer (``karpenter.k8s.aws/termination``) waits for the class's NodeClaims, then
deletes its instance profile and launch templates; the launch-template garbage collection deletes the templates of
a deleted NodePool and those a changed class or pool stopped using.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from nodewright.api import labels as L

from .awsmoto import CLUSTER, Account
from .emulator import EmulatorThread
from .harness import Replica, condition, ec2nodeclass, nodepool, pending_pod, wait_for

OWNED = {"Name": f"tag:kubernetes.io/cluster/{CLUSTER}", "Values": ["owned"]}


@pytest.fixture
def replica(kube: EmulatorThread, account: Account) -> Iterator[Replica]:
    started = Replica(kube, account, "a").start()
    yield started
    if started.thread.is_alive():
        started.stop()


def templates(account: Account) -> list[dict[str, Any]]:
    """This cluster's launch templates in moto: ``[{name, nodeclass, nodepool}]``, by name."""
    found = account.client("ec2").describe_launch_templates(Filters=[OWNED])["LaunchTemplates"]
    return sorted(({"name": t["LaunchTemplateName"], **{k.split("/")[-1]: t_["Value"] for t_ in t.get("Tags", [])
                                                         for k in [t_["Key"]]
                                                         if k in (L.TAG_EC2NODECLASS, L.TAG_NODEPOOL)}}
                   for t in found), key=lambda t: t["name"])


def profiles(account: Account) -> list[str]:
    """Names of the instance profiles tagged for this cluster."""
    out = []
    for profile in account.client("iam").list_instance_profiles()["InstanceProfiles"]:
        tags = {t["Key"]: t["Value"] for t in profile.get("Tags", [])}
        if tags.get(f"kubernetes.io/cluster/{CLUSTER}") == "owned":
            out.append(profile["InstanceProfileName"])
    return sorted(out)


def launched(kube: EmulatorThread, pool: str, count: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        claims = [c for c in kube.emulator.snapshot("nodeclaims")
                  if c["metadata"]["labels"].get(L.NODEPOOL) == pool and condition(c, L.CONDITION_LAUNCHED) == "True"]
        return claims if len(claims) >= count else None

    return wait_for(ready, 15, f"{count} launched NodeClaim(s) of {pool}")


@pytest.mark.timeout(180)  # a hang guard: four launches, two deletions and their waits (the suite's default is 30 s)
def test_classes_and_pools_created_changed_and_deleted_leave_no_launch_template_or_instance_profile(
        kube, account, replica, core, custom) -> None:
    manager = replica.runtime.manager
    cloud = replica.runtime.cloud
    later = [0.0]  # seconds added to the launch-template provider's clock: "this much later", without sleeping
    cloud.launch_templates._clock = lambda: time.monotonic() + later[0]
    manager.launch_template_gc.period = 0.1
    group = ("karpenter.k8s.aws", "v1", "ec2nodeclasses")
    custom.create_cluster_custom_object(*group, ec2nodeclass("default"))
    custom.create_cluster_custom_object(*group, ec2nodeclass("batch"))
    custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", nodepool("general"))
    custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", nodepool(
        "jobs", nodeclass="batch", taints=[{"key": "jobs", "effect": "NoSchedule"}]))
    pending_pod(core, "web-0")
    launched(kube, "general", 1)
    wait_for(lambda: all(L.AWS_TERMINATION_FINALIZER in (kube.emulator.peek("ec2nodeclasses", n) or {}).get(
        "metadata", {}).get("finalizers", []) for n in ("default", "batch")), 10, "the classes' finalizers")
    first = templates(account)  # one per (AMI, max pods) of the fleet's candidates: c5.large 29, m5.* 29/58
    assert {(t["ec2nodeclass"], t["nodepool"]) for t in first} == {("default", "general")} and len(first) == 2
    wait_for(lambda: len(profiles(account)) == 2, 10, "one managed instance profile per class")

    # A change of the class (its tags) makes a new template; the old one, unused for the TTL, is collected.
    custom.patch_cluster_custom_object(*group, "default", {"spec": {"tags": {"team": "data"}}})
    later[0] += cloud.launch_templates.ttl + 1
    wait_for(lambda: templates(account) == [], 10, "the changed class's old launch template to be collected")
    pending_pod(core, "web-1", cpu="1500m")
    launched(kube, "general", 2)
    second = templates(account)
    assert {(t["ec2nodeclass"], t["nodepool"]) for t in second} == {("default", "general")}
    assert not {t["name"] for t in second} & {t["name"] for t in first}

    # A change of the pool (its template labels, which the userData carries) likewise: new template, old collected.
    custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "general",
                                       {"spec": {"template": {"metadata": {"labels": {"team": "shop"}}}}})
    later[0] += cloud.launch_templates.ttl + 1
    wait_for(lambda: templates(account) == [], 10, "the changed pool's old launch template to be collected")
    pending_pod(core, "web-2", cpu="1500m")
    launched(kube, "general", 3)
    third = templates(account)
    assert {(t["ec2nodeclass"], t["nodepool"]) for t in third} == {("default", "general")}
    assert not {t["name"] for t in third} & {t["name"] for t in first + second}

    # A deleted NodePool's templates are needed by no one: collected at once.
    core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job-0"}, "spec": {
        "tolerations": [{"key": "jobs", "operator": "Exists"}], "nodeSelector": {L.NODEPOOL: "jobs"},
        "containers": [{"name": "a", "image": "x", "resources": {"requests": {"cpu": "500m"}}}]}})
    core.patch_namespaced_pod_status("job-0", "default", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    launched(kube, "jobs", 1)
    assert {t["nodepool"] for t in templates(account)} == {"general", "jobs"}
    custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodepools", "jobs")
    wait_for(lambda: {t["nodepool"] for t in templates(account)} == {"general"}, 10,
             "the deleted NodePool's launch template to be collected")

    # Deleting the classes waits for their NodeClaims, then deletes their profiles and templates.
    for pod in ("web-0", "web-1", "web-2", "job-0"):
        core.delete_namespaced_pod(pod, "default", grace_period_seconds=0)
    custom.delete_cluster_custom_object(*group, "default")
    custom.delete_cluster_custom_object(*group, "batch")
    wait_for(lambda: any(e.get("reason") == "WaitingOnNodeClaimTermination"
                         for e in kube.emulator.snapshot("events")), 10, "a waiting event")
    assert kube.emulator.peek("ec2nodeclasses", "default") and kube.emulator.peek("ec2nodeclasses", "batch")
    assert len(profiles(account)) == 2
    for claim in kube.emulator.snapshot("nodeclaims"):
        custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", claim["metadata"]["name"])
    wait_for(lambda: not kube.emulator.snapshot("ec2nodeclasses"), 20, "both classes to be released")
    assert templates(account) == [] and profiles(account) == []
    assert sorted(manager.nodeclass.finalized) == ["batch", "default"]
