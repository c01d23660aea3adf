"""EC2NodeClass status controller against the in-memory cluster and a fake status source: exact status documents,
write on change only, refresh period, backoff, validation, and the NodePool status that reflects it."""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api.ec2nodeclass import EC2NodeClass
from nodewright.cloud.provider import LaunchError
from nodewright.controllers.common import Context
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.controllers.nodeclass import NodeClassController, NodeClassStatusSource
from nodewright.controllers.nodepool_status import NodePoolStatusController
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import format_time
from nodewright.metrics import Metrics

from .conftest import NODECLASS
from .fakes import FakeClock, FakeCloudProvider

SUBNETS = [{"id": "subnet-0a", "zone": "us-east-1a", "zoneID": "use1-az1"},
           {"id": "subnet-0b", "zone": "us-east-1b", "zoneID": "use1-az2"}]
GROUPS = [{"id": "sg-0123", "name": "nodes"}]
AMIS = [{"id": "ami-0x86", "name": "amazon-eks-node-al2023-x86_64-standard-1.31-v20250715",
         "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]
PROFILE = "demo_4f1c2a9e0b7d3c55"
READY = {"subnets": SUBNETS, "securityGroups": GROUPS, "amis": AMIS, "instanceProfile": PROFILE,
         "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": ""}]}
DENIED = ("the controller role arn:aws:iam::111122223333:role/nodewright may not iam:PassRole on "
          "arn:aws:iam::111122223333:role/KarpenterNodeRole: add iam:PassRole for that role with condition "
          "iam:PassedToService=ec2.amazonaws.com")
NOT_READY = {"conditions": [{"type": "Ready", "status": "False", "reason": "Unauthorized", "message": DENIED}]}


class FakeNodeClassCloud(FakeCloudProvider):
    """The fake cloud plus ``nodeclass_status``: answers (or raises) what the test queued, records the calls."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.answer: dict[str, object] | Exception = copy.deepcopy(READY)
        self.calls: list[tuple[str, str | None]] = []

    def nodeclass_status(self, nodeclass: EC2NodeClass) -> dict[str, object]:
        self.calls.append((nodeclass.name, nodeclass.spec.role))
        if isinstance(self.answer, Exception):
            raise self.answer
        return copy.deepcopy(self.answer)


def setup(cluster: InMemoryCluster, clock: FakeClock) -> tuple[NodeClassController, FakeNodeClassCloud, Context]:
    cloud = FakeNodeClassCloud(clock)
    ctx = Context(cluster, cloud, clock, Metrics(), "demo")
    return NodeClassController(ctx, period=60.0), cloud, ctx


def status(cluster: InMemoryCluster, name: str = "default") -> dict[str, Any]:
    doc = cluster.get(r.EC2NODECLASSES, name)
    assert doc is not None
    return doc.get("status") or {}


def test_ready_status_is_written_with_conditions_stamped(cluster: InMemoryCluster, clock: FakeClock) -> None:
    controller, cloud, _ = setup(cluster, clock)
    assert isinstance(cloud, NodeClassStatusSource)
    controller.reconcile()
    assert cloud.calls == [("default", "KarpenterNodeRole")]
    assert status(cluster) == {
        "subnets": SUBNETS, "securityGroups": GROUPS, "amis": AMIS, "instanceProfile": PROFILE,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                        "lastTransitionTime": "2026-07-20T12:00:00Z", "observedGeneration": 1}]}
    assert controller.patched == ["default"]
    assert [(e["reason"], e["type"], e["kind"], e["name"]) for e in cluster.events] == [
        ("NodeClassReady", "Normal", "EC2NodeClass", "default")]


def test_unchanged_status_is_not_rewritten_and_refresh_waits_for_the_period(
        cluster: InMemoryCluster, clock: FakeClock) -> None:
    controller, cloud, _ = setup(cluster, clock)
    controller.reconcile()
    version = cluster.get(r.EC2NODECLASSES, "default")["metadata"]["resourceVersion"]
    clock.advance(59)
    controller.reconcile()
    assert len(cloud.calls) == 1  # not due yet
    clock.advance(1)
    controller.reconcile()
    assert len(cloud.calls) == 2  # due: resolved again, same answer
    assert controller.patched == ["default"]  # ... and nothing written
    assert cluster.get(r.EC2NODECLASSES, "default")["metadata"]["resourceVersion"] == version


def test_spec_change_resolves_at_once_and_updates_observed_generation(
        cluster: InMemoryCluster, clock: FakeClock) -> None:
    controller, cloud, _ = setup(cluster, clock)
    controller.reconcile()
    clock.advance(5)
    cluster.patch(r.EC2NODECLASSES, "default", {"spec": {"role": "OtherNodeRole"}})
    controller.reconcile()
    assert cloud.calls == [("default", "KarpenterNodeRole"), ("default", "OtherNodeRole")]
    ready = status(cluster)["conditions"][0]
    assert ready["observedGeneration"] == 2
    assert ready["lastTransitionTime"] == "2026-07-20T12:00:00Z"  # Ready did not flip


def test_not_ready_removes_resolved_fields_and_nodepool_reports_why(
        cluster: InMemoryCluster, clock: FakeClock) -> None:
    controller, cloud, ctx = setup(cluster, clock)
    pools = NodePoolStatusController(ctx)
    controller.reconcile()
    pools.reconcile(force=True)
    assert {c["type"]: c["status"] for c in cluster.get(r.NODEPOOLS, "general")["status"]["conditions"]}[
        "Ready"] == "True"

    clock.advance(60)
    cloud.answer = copy.deepcopy(NOT_READY)
    controller.reconcile()
    assert status(cluster) == {"conditions": [{
        "type": "Ready", "status": "False", "reason": "Unauthorized", "message": DENIED,
        "lastTransitionTime": format_time(clock()), "observedGeneration": 1}]}
    assert (cluster.events[-1]["reason"], cluster.events[-1]["type"], cluster.events[-1]["message"]) == (
        "Unauthorized", "Warning", DENIED)

    pools.reconcile(force=True)
    conditions = {c["type"]: c for c in cluster.get(r.NODEPOOLS, "general")["status"]["conditions"]}
    expected = f"EC2NodeClass 'default' is not ready: {DENIED}"
    assert (conditions["Ready"]["status"], conditions["Ready"]["reason"], conditions["Ready"]["message"]) == (
        "False", "NodeClassNotReady", expected)
    assert (conditions["NodeClassReady"]["status"], conditions["NodeClassReady"]["message"]) == ("False", expected)

    clock.advance(60)
    cloud.answer = copy.deepcopy(READY)
    controller.reconcile()
    pools.reconcile(force=True)
    assert status(cluster)["subnets"] == SUBNETS
    assert status(cluster)["conditions"][0]["lastTransitionTime"] == format_time(clock())
    assert {c["type"]: c["status"] for c in cluster.get(r.NODEPOOLS, "general")["status"]["conditions"]}[
        "Ready"] == "True"


def test_transient_failure_keeps_status_and_backs_off(cluster: InMemoryCluster, clock: FakeClock) -> None:
    controller, cloud, ctx = setup(cluster, clock)
    cloud.answer = LaunchError("ec2:DescribeSubnets failed: RequestLimitExceeded: Request limit exceeded.")
    controller.reconcile()
    assert status(cluster) == {}
    assert ctx.metrics.value("karpenter_cloudprovider_errors_total", {
        "controller": "nodeclass", "method": "NodeClassStatus", "provider": "fake", "error": "LaunchError"}) == 1
    clock.advance(4)
    controller.reconcile()
    assert len(cloud.calls) == 1  # backing off 5 s
    clock.advance(1)
    controller.reconcile()
    assert len(cloud.calls) == 2  # retried; failed again: next delay 10 s
    clock.advance(9)
    cloud.answer = copy.deepcopy(READY)
    controller.reconcile()
    assert len(cloud.calls) == 2
    clock.advance(1)
    controller.reconcile()
    assert status(cluster)["instanceProfile"] == PROFILE


def test_invalid_nodeclass_is_not_ready_without_asking_the_cloud(cluster: InMemoryCluster, clock: FakeClock) -> None:
    controller, cloud, _ = setup(cluster, clock)
    invalid = copy.deepcopy(NODECLASS)
    invalid["metadata"]["name"] = "broken"
    invalid["spec"]["instanceProfile"] = "KarpenterNodeInstanceProfile"  # and spec.role: exactly one allowed
    cluster.create(r.EC2NODECLASSES, invalid)
    controller.reconcile()
    assert cloud.calls == [("default", "KarpenterNodeRole")]
    ready = status(cluster, "broken")["conditions"][0]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False", "ValidationFailed", "spec.role: must specify exactly one of ['role', 'instanceProfile']")


def test_cloud_without_nodeclass_status_leaves_nodeclasses_alone(
        cluster: InMemoryCluster, clock: FakeClock, ctx: Context) -> None:
    controller = NodeClassController(ctx)
    assert controller.source is None and not isinstance(ctx.cloud, NodeClassStatusSource)
    controller.reconcile()
    assert status(cluster) == {} and controller.patched == []


def test_deleting_and_deleted_nodeclasses_are_skipped_and_forgotten(
        cluster: InMemoryCluster, clock: FakeClock) -> None:
    controller, cloud, _ = setup(cluster, clock)
    controller.reconcile()
    cluster.patch(r.EC2NODECLASSES, "default", {"metadata": {"finalizers": ["example.com/hold"]}})
    cluster.delete(r.EC2NODECLASSES, "default")
    clock.advance(120)
    controller.reconcile()
    assert len(cloud.calls) == 1  # deleting: not resolved again
    cluster.patch(r.EC2NODECLASSES, "default", {"metadata": {"finalizers": []}})
    controller.reconcile()
    assert cluster.get(r.EC2NODECLASSES, "default") is None and controller._seen == {}


def test_controller_manager_runs_it_before_nodepool_status(cluster: InMemoryCluster, clock: FakeClock) -> None:
    cloud = FakeNodeClassCloud(clock)
    cloud.answer = copy.deepcopy(NOT_READY)
    manager = ControllerManager(Context(cluster, cloud, clock, Metrics(), "demo"), ControllerOptions())
    manager.step()
    assert status(cluster)["conditions"][0]["reason"] == "Unauthorized"
    pool = {c["type"]: c for c in cluster.get(r.NODEPOOLS, "general")["status"]["conditions"]}
    assert (pool["Ready"]["status"], pool["Ready"]["reason"]) == ("False", "NodeClassNotReady")


def test_failed_status_write_backs_off_instead_of_retrying_every_step(
        cluster: InMemoryCluster, clock: FakeClock, monkeypatch: Any) -> None:
    from nodewright.kube.errors import KubeError

    controller, cloud, _ = setup(cluster, clock)
    writes: list[str] = []

    def refuse(kind: Any, name: str, status: Any, namespace: Any = None) -> Any:
        writes.append(name)
        raise KubeError("500 Internal Server Error")

    monkeypatch.setattr(cluster, "patch_status", refuse)
    controller.reconcile()
    clock.advance(1)
    controller.reconcile()
    assert writes == ["default"] and len(cloud.calls) == 1  # waiting 5 s
    monkeypatch.undo()
    clock.advance(4)
    controller.reconcile()
    assert status(cluster)["instanceProfile"] == PROFILE and len(cloud.calls) == 2


class CleaningCloud(FakeNodeClassCloud):
    """Also owns per-class resources: records :meth:`delete_nodeclass_resources` (or raises what was queued)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.cleaned: list[str] = []
        self.fail: Exception | None = None

    def delete_nodeclass_resources(self, nodeclass: str) -> None:
        if self.fail is not None:
            raise self.fail
        self.cleaned.append(nodeclass)


def test_termination_finalizer_waits_for_nodeclaims_then_cleans_up_and_releases(
        cluster: InMemoryCluster, clock: FakeClock) -> None:
    from nodewright.api import labels as L

    cloud = CleaningCloud(clock)
    controller = NodeClassController(Context(cluster, cloud, clock, Metrics(), "demo"), period=60.0)
    controller.reconcile()
    doc = cluster.get(r.EC2NODECLASSES, "default")
    assert doc is not None and doc["metadata"]["finalizers"] == [L.AWS_TERMINATION_FINALIZER]
    cluster.create(r.NODECLAIMS, {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                                  "metadata": {"name": "general-a"}, "spec": {
                                      "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                       "name": "default"}, "requirements": []}})
    cluster.delete(r.EC2NODECLASSES, "default")
    controller.reconcile()
    controller.reconcile()
    assert cloud.cleaned == [] and cluster.get(r.EC2NODECLASSES, "default") is not None
    waiting = [e["message"] for e in cluster.events if e["reason"] == "WaitingOnNodeClaimTermination"]
    assert waiting == ["Waiting on NodeClaim termination for general-a"]  # once, not every pass
    cluster.delete(r.NODECLAIMS, "general-a")
    cloud.fail = LaunchError("DeleteLaunchTemplate: throttled")
    controller.reconcile()
    assert cluster.get(r.EC2NODECLASSES, "default") is not None  # kept; retried after the backoff
    cloud.fail = None
    controller.reconcile()
    assert cloud.cleaned == []  # still backing off
    clock.advance(5.0)
    controller.reconcile()
    assert cloud.cleaned == ["default"] and controller.finalized == ["default"]
    assert cluster.get(r.EC2NODECLASSES, "default") is None
