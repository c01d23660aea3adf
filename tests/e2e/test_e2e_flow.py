"""Opt-in full flow against a real API server: ``NODEWRIGHT_E2E_KUBECONFIG``, else the control plane of ``controlplane.py``.

What it needs: a kube-apiserver (with etcd) the kubeconfig administers; no scheduler, controller-manager or
kubelet (the tests play them). It installs the CRDs from ``helm/nodewright/crds`` (create or replace, then waits
for ``Established``), starts moto on 127.0.0.1 as EC2/SSM/IAM/SQS/EKS, and runs the controller through the
production wiring (``runtime.build_runtime`` + ``runtime.serve``) in a thread. Nodes are registered by the test
the way a kubelet would (providerID, labels, the ``karpenter.sh/unregistered`` taint, then ``Ready``); pods are
bound by the test as kube-scheduler would; a deleted pod stays ``Terminating`` until the test, as its kubelet,
removes it.

The controller uses ``NODEWRIGHT_E2E_CONTROLLER_KUBECONFIG`` when set: a user bound to the chart's ClusterRole
and Role (rendered with ``controller.bindPods=true``) instead of the administrator, so the server's RBAC and
admission plugins (e.g. OwnerReferencesPermissionEnforcement) judge the controller's own requests.

Every object a test creates carries this run's suffix and is removed afterwards (finalizers stripped), so the
suite can run again against the same server.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration.awsmoto import Account, MotoServer, fresh_account
from integration.harness import (
    Replica,
    condition,
    ec2nodeclass,
    nodepool,
    pending_pod,
    register_node,
    run_pod,
    wait_for,
)
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from nodewright.api import labels as L

CONTROLLER_KUBECONFIG = os.environ.get("NODEWRIGHT_E2E_CONTROLLER_KUBECONFIG")
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]
CRD_DIR = Path(__file__).resolve().parents[2] / "helm" / "nodewright" / "crds"
RUN = uuid.uuid4().hex[:6]
KARPENTER = ("karpenter.sh", "v1")
AWS = ("karpenter.k8s.aws", "v1")


# --- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api_client(e2e_kubeconfig: str) -> Iterator[k8s.ApiClient]:
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=e2e_kubeconfig, client_configuration=configuration)
    with k8s.ApiClient(configuration) as client:
        yield client


@pytest.fixture(scope="module")
def core(api_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def custom(api_client: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client)


@pytest.fixture(scope="module")
def server_version(api_client: k8s.ApiClient) -> str:
    info = k8s.VersionApi(api_client).get_code()
    return f"{info.major}.{str(info.minor).rstrip('+')}"


@pytest.fixture(scope="module")
def crds(api_client: k8s.ApiClient) -> list[str]:
    """Install (create or replace) our CRDs and wait until the server serves them."""
    ext = k8s.ApiextensionsV1Api(api_client)
    names = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        name = doc["metadata"]["name"]
        try:
            current = ext.read_custom_resource_definition(name)
            doc["metadata"]["resourceVersion"] = current.metadata.resource_version
            ext.replace_custom_resource_definition(name, doc)
        except ApiException as err:
            if err.status != 404:
                raise
            ext.create_custom_resource_definition(doc)
        names.append(name)

    def established(name: str) -> bool:
        conditions = ext.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    for name in names:
        wait_for(lambda n=name: established(n), 30, f"CRD {name} Established", interval=0.2)
    return names


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoServer]:
    server = MotoServer().start()
    yield server
    server.stop()


@pytest.fixture
def account(moto_server: MotoServer, server_version: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    """A seeded moto account, its AMI alias parameters for the server's Kubernetes version."""
    with fresh_account(moto_server, monkeypatch.setenv, server_version) as account:
        yield account


@pytest.fixture
def world(crds: list[str], core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi) -> Iterator[dict[str, str]]:
    """Names for this test (suffixed with the run id) and the cleanup of everything made under them."""
    suffix = f"{RUN}-{uuid.uuid4().hex[:4]}"
    names = {"pool": f"e2e-{suffix}", "class": f"e2e-{suffix}", "lease": f"nodewright-e2e-{suffix}",
             "pod": f"e2e-{suffix}"}
    try:
        core.read_namespaced_service_account("default", "default")
    except ApiException as err:  # no kube-controller-manager: the pod admission needs the default account
        if err.status != 404:
            raise
        core.create_namespaced_service_account("default", {"metadata": {"name": "default"}})
    yield names
    _cleanup(core, custom, names)


def _strip_and_delete(read: Any, patch: Any, delete: Any) -> None:
    try:
        if read().get("metadata", {}).get("finalizers"):
            patch({"metadata": {"finalizers": None}})
        delete()
    except ApiException as err:
        if err.status != 404:
            raise


def _cleanup(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, names: dict[str, str]) -> None:
    for pod in core.list_namespaced_pod("default").items:
        if pod.metadata.name.startswith(names["pod"]):
            try:
                core.delete_namespaced_pod(pod.metadata.name, "default", grace_period_seconds=0)
            except ApiException as err:
                if err.status != 404:
                    raise
    for claim in custom.list_cluster_custom_object(*KARPENTER, "nodeclaims")["items"]:
        if claim["metadata"].get("labels", {}).get(L.NODEPOOL) != names["pool"]:
            continue
        node_name = (claim.get("status") or {}).get("nodeName")
        if node_name:
            _strip_and_delete(lambda n=node_name: {"metadata": {"finalizers": core.read_node(n).metadata.finalizers}},
                              lambda body, n=node_name: core.patch_node(n, body),
                              lambda n=node_name: core.delete_node(n))
        claim_name = claim["metadata"]["name"]
        _strip_and_delete(lambda c=claim_name: custom.get_cluster_custom_object(*KARPENTER, "nodeclaims", c),
                          lambda body, c=claim_name: custom.patch_cluster_custom_object(*KARPENTER, "nodeclaims", c,
                                                                                        body),
                          lambda c=claim_name: custom.delete_cluster_custom_object(*KARPENTER, "nodeclaims", c))
    for group, plural, name in ((KARPENTER[0], "nodepools", names["pool"]), (AWS[0], "ec2nodeclasses", names["class"])):
        _strip_and_delete(lambda g=group, p=plural, n=name: custom.get_cluster_custom_object(g, "v1", p, n),
                          lambda body, g=group, p=plural, n=name: custom.patch_cluster_custom_object(g, "v1", p, n,
                                                                                                     body),
                          lambda g=group, p=plural, n=name: custom.delete_cluster_custom_object(g, "v1", p, n))
    try:
        k8s.CoordinationV1Api(core.api_client).delete_namespaced_lease(names["lease"], "kube-system")
    except ApiException as err:
        if err.status != 404:
            raise


@pytest.fixture
def controller(account: Account, world: dict[str, str], e2e_kubeconfig: str) -> Iterator[Any]:
    """A function starting one controller replica on the real API server (stopped after the test)."""
    started: list[Replica] = []

    def start(**settings: Any) -> Replica:
        replica = Replica(CONTROLLER_KUBECONFIG or e2e_kubeconfig, account, f"e2e-{RUN}", leader_election_name=world["lease"], **settings)
        started.append(replica.start())
        return replica

    yield start
    for replica in started:
        if replica.thread.is_alive():
            replica.stop()


# --- helpers -------------------------------------------------------------------------------------------------


def apply(custom: k8s.CustomObjectsApi, world: dict[str, str], **template_spec: Any) -> None:
    custom.create_cluster_custom_object(*AWS, "ec2nodeclasses", ec2nodeclass(world["class"]))
    custom.create_cluster_custom_object(*KARPENTER, "nodepools",
                                        nodepool(world["pool"], nodeclass=world["class"], **template_spec))


def our_claims(custom: k8s.CustomObjectsApi, world: dict[str, str]) -> list[dict[str, Any]]:
    items = custom.list_cluster_custom_object(*KARPENTER, "nodeclaims")["items"]
    return [c for c in items if c["metadata"].get("labels", {}).get(L.NODEPOOL) == world["pool"]]


def launched(custom: k8s.CustomObjectsApi, world: dict[str, str]) -> dict[str, Any]:
    return wait_for(lambda: next((c for c in our_claims(custom, world)
                                  if condition(c, L.CONDITION_LAUNCHED) == "True"), None), 60, "a launched NodeClaim",
                    interval=0.2)


def claim_named(custom: k8s.CustomObjectsApi, name: str) -> dict[str, Any] | None:
    try:
        return dict(custom.get_cluster_custom_object(*KARPENTER, "nodeclaims", name))
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def join(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, claim: dict[str, Any]) -> str:
    """Register a Node for ``claim`` as its kubelet would, then, once nodewright registered it, do what
    kube-controller-manager's node lifecycle controller does for a Ready node: remove the
    ``node.kubernetes.io/not-ready`` taint the API server's TaintNodesByCondition admission added at creation
    (nodewright, like Karpenter, waits for it to go before it initializes the node)."""
    node_name = register_node(core, claim)
    name = claim["metadata"]["name"]
    wait_for(lambda: condition(claim_named(custom, name), L.CONDITION_REGISTERED) == "True", 30, "registration",
             interval=0.2)
    taints = [t for t in core.read_node(node_name).spec.taints or [] if t.key != "node.kubernetes.io/not-ready"]
    core.patch_node(node_name, {"spec": {"taints": [{"key": t.key, "value": t.value, "effect": t.effect}
                                                    for t in taints]}})
    return node_name


def instance_state(account: Account, claim: dict[str, Any]) -> str:
    instance_id = claim["status"]["providerID"].rsplit("/", 1)[-1]
    return str(next(i for i in account.instances() if i["InstanceId"] == instance_id)["State"]["Name"])


# --- tests ---------------------------------------------------------------------------------------------------


def test_the_api_server_rejects_with_our_crds_what_the_models_reject(custom: k8s.CustomObjectsApi,
                                                                     world: dict[str, str]) -> None:
    bad_class = ec2nodeclass(world["class"])
    bad_class["spec"]["amiSelectorTerms"] = [{"alias": "ubuntu@latest"}]
    with pytest.raises(ApiException) as err:
        custom.create_cluster_custom_object(*AWS, "ec2nodeclasses", bad_class)
    assert err.value.status == 422
    assert "family is not supported" in err.value.body
    bad_pool = nodepool(world["pool"], nodeclass=world["class"])
    bad_pool["spec"]["disruption"] = {"budgets": [{"nodes": "0", "schedule": "61 * * * *", "duration": "1h"}]}
    with pytest.raises(ApiException) as err:
        custom.create_cluster_custom_object(*KARPENTER, "nodepools", bad_pool)
    assert err.value.status == 422
    assert "schedule must be a 5-field cron expression" in err.value.body
    # NodeOverlay (karpenter.sh/v1alpha1): the CRD (its CEL rules within the server's cost budget) refuses what the
    # model refuses, and stores a valid one.
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": world["pool"]},
               "spec": {"weight": 10, "price": "0.5", "capacity": {"smarter-devices/fuse": "1"},
                        "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["a"]},
                                         {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]}]}}
    for change, message in (({"priceAdjustment": "+10%"}, "cannot set both 'price' and 'priceAdjustment'"),
                            ({"capacity": {"cpu": "1"}}, "invalid resource restricted"),
                            ({"requirements": [{"key": "karpenter.sh/other", "operator": "Exists"}]},
                             'label domain \\"karpenter.sh\\" is restricted')):
        with pytest.raises(ApiException) as err:
            custom.create_cluster_custom_object("karpenter.sh", "v1alpha1", "nodeoverlays",
                                                {**overlay, "spec": {**overlay["spec"], **change}})
        assert err.value.status == 422 and message in err.value.body, err.value.body
    custom.create_cluster_custom_object("karpenter.sh", "v1alpha1", "nodeoverlays", overlay)
    custom.delete_cluster_custom_object("karpenter.sh", "v1alpha1", "nodeoverlays", world["pool"])
    apply(custom, world)  # the valid ones pass, defaults applied by the server
    stored = custom.get_cluster_custom_object(*KARPENTER, "nodepools", world["pool"])
    assert stored["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"


def test_launch_register_ready_then_drain_waits_for_the_evicted_pod(controller: Any, account: Account,
                                                                    core: k8s.CoreV1Api,
                                                                    custom: k8s.CustomObjectsApi,
                                                                    world: dict[str, str]) -> None:
    replica = controller()
    apply(custom, world)
    pod = f"{world['pod']}-web"
    pending_pod(core, pod, grace=120)
    claim = launched(custom, world)
    name = claim["metadata"]["name"]
    assert instance_state(account, claim) in ("pending", "running")
    node_name = join(core, custom, claim)
    ready = wait_for(lambda: (c := claim_named(custom, name)) and condition(c, L.CONDITION_READY) == "True" and c,
                     30, "the NodeClaim Ready", interval=0.2)
    assert [condition(ready, t) for t in ("Launched", "Registered", "Initialized")] == ["True"] * 3
    node = core.read_node(node_name)
    assert node.metadata.finalizers == [L.TERMINATION_FINALIZER] and not node.spec.taints
    assert [(o.kind, o.block_owner_deletion) for o in node.metadata.owner_references] == [("NodeClaim", True)]
    run_pod(core, pod, node_name)
    custom.delete_cluster_custom_object(*KARPENTER, "nodeclaims", name)
    wait_for(lambda: core.read_namespaced_pod(pod, "default").metadata.deletion_timestamp, 30,
             "the eviction", interval=0.2)
    target = replica.runtime.steps + 30
    wait_for(lambda: replica.runtime.steps >= target, 60, "thirty passes while the pod terminates")
    assert instance_state(account, claim) == "running"
    tainted = core.read_node(node_name)
    assert any(t.key == L.DISRUPTED_TAINT_KEY for t in tainted.spec.taints or [])
    core.delete_namespaced_pod(pod, "default", grace_period_seconds=0)  # the kubelet: containers exited
    wait_for(lambda: claim_named(custom, name) is None, 60, "the NodeClaim to be gone", interval=0.2)
    assert instance_state(account, claim) in ("shutting-down", "terminated")
    with pytest.raises(ApiException) as err:
        core.read_node(node_name)
    assert err.value.status == 404


def test_bind_mode_binds_through_pods_binding(controller: Any, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi,
                                              world: dict[str, str]) -> None:
    controller(bind_pods=True)
    apply(custom, world)
    pod = f"{world['pod']}-bound"
    pending_pod(core, pod)
    node_name = register_node(core, launched(custom, world))
    wait_for(lambda: core.read_namespaced_pod(pod, "default").spec.node_name == node_name, 30, "the binding",
             interval=0.2)


def test_drifted_condition_follows_the_nodepool(controller: Any, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi,
                                                world: dict[str, str]) -> None:
    controller()
    apply(custom, world)
    pending_pod(core, f"{world['pod']}-drift")
    claim = launched(custom, world)
    name = claim["metadata"]["name"]
    join(core, custom, claim)
    wait_for(lambda: condition(claim_named(custom, name), L.CONDITION_READY) == "True", 30, "Ready", interval=0.2)
    change = {"spec": {"template": {"metadata": {"labels": {"team": "data"}}}}}
    custom.patch_cluster_custom_object(*KARPENTER, "nodepools", world["pool"], change)
    wait_for(lambda: condition(claim_named(custom, name), L.CONDITION_DRIFTED) == "True", 30, "Drifted=True",
             interval=0.2)
    drifted = claim_named(custom, name) or {}
    reason = next(c["reason"] for c in drifted["status"]["conditions"] if c["type"] == L.CONDITION_DRIFTED)
    assert reason == "NodePoolDrifted"
    change = {"spec": {"template": {"metadata": {"labels": {"team": "web"}}}}}
    custom.patch_cluster_custom_object(*KARPENTER, "nodepools", world["pool"], change)
    wait_for(lambda: condition(claim_named(custom, name), L.CONDITION_DRIFTED) is None, 30, "Drifted removed",
             interval=0.2)
