"""Issue 14, "capacity already there" and "storage and resources" (plus RuntimeClass and DRA): each rule holds on
the three paths alike -- ``simulate -f`` (``decide``), the controller's provisioner (``ControllerManager.step``)
and scenario replay.

The instance types and numbers are the bundled catalog's (us-east-1): m5.large 2 vCPU / 8 GiB (1930m allocatable
cpu), m5.xlarge 4 vCPU, g4dn.xlarge one NVIDIA T4, c5d.2xlarge one 200 GB NVMe disk.
"""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.catalog import load_instance_types
from nodewright.quantities import format_resource_list
from nodewright.sim.runner import run
from nodewright.sim.scenario import parse_scenario

from .test_one_path import _controller, _scenario_first_batch, _simulate_f

REGION = "us-east-1"
ZONE = "us-east-1a"
STARTUP = {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}


def _nodeclass(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "node-role",
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}], **spec}}


def _pool(types: list[str], **template: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": L.INSTANCE_TYPE, "operator": "In", "values": types},
                                 {"key": L.ZONE, "operator": "In", "values": [ZONE]},
                                 {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
                **template}}}}


def _pod(name: str, requests: dict[str, str], *, limits: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": resources}], **spec}}


def _deployment(replicas: int, requests: dict[str, str], *, limits: dict[str, str] | None = None,
                **spec: Any) -> dict[str, Any]:
    pod = _pod("x", requests, limits=limits, **spec)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "app"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "app"}},
                     "template": {"metadata": {"labels": {"app": "app"}}, "spec": pod["spec"]}}}


def _registering_node(instance_type: str, taints: list[dict[str, str]], **status: Any) -> dict[str, Any]:
    """A Node Karpenter launched that registered but has not initialized (Ready=False, no initialized label)."""
    it = next(t for t in load_instance_types(REGION, zones=[ZONE]) if t.name == instance_type)
    labels = {**{k: str(v) for k, v in it.labels.items()}, L.INSTANCE_TYPE: instance_type, L.ZONE: ZONE,
              L.CAPACITY_TYPE: "on-demand", L.NODEPOOL: "default", L.REGISTERED: "true", L.HOSTNAME: "booting"}
    resources = format_resource_list(it.allocatable())
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "booting", "labels": labels},
            "spec": {"providerID": f"aws:///{ZONE}/i-0123456789abcdef0",
                     "taints": [{"key": L.NOT_READY_TAINT_KEY, "effect": "NoSchedule"}, *taints]},
            "status": {"capacity": {**resources, **status}, "allocatable": {**resources, **status},
                       "conditions": [{"type": "Ready", "status": "False"}]}}


def _scenario(manifests: list[dict[str, Any]], events: list[dict[str, Any]], latency: str = "30s") -> Any:
    return parse_scenario({"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "cap"},
                           "spec": {"duration": "6m", "region": REGION, "zones": [ZONE], "seed": 1,
                                    "launchLatency": {"p50": latency, "p90": latency}, "podStartDelay": "5s",
                                    "manifests": copy.deepcopy(manifests), "events": events}})


def _types(claims: list[dict[str, Any]]) -> list[list[str]]:
    return [next(r["values"] for r in c["spec"]["requirements"] if r["key"] == L.INSTANCE_TYPE) for c in claims]


# --- a registering node's startup taints -------------------------------------------------------------------


def test_startup_tainted_registering_node_takes_the_pod_on_every_path() -> None:
    """Only the NodePool's startup taint (and not-ready) block the booting m5.xlarge: the pod counts as going
    there, nothing launches. The same Node under a pool that does not declare the taint gets a new node."""
    node = _registering_node("m5.xlarge", [STARTUP])
    docs = [_nodeclass(), _pool(["m5.xlarge"], startupTaints=[STARTUP]), node, _pod("p", {"cpu": "1"})]
    decision, claims = _simulate_f(docs)
    assert decision["existing"] == [{"node": "booting", "pods": ["default/p"]}] and claims == []
    assert _controller(docs) == []
    undeclared = [_nodeclass(), _pool(["m5.xlarge"]), node, _pod("p", {"cpu": "1"})]
    assert len(_simulate_f(undeclared)[1]) == 1 and len(_controller(undeclared)) == 1


def test_startup_tainted_node_in_scenario_replay_is_not_doubled() -> None:
    """Launch latency 200 s: the node registers at 150 s (startup taint on) and is Ready at 200 s. The second
    replica arrives at 170 s, while only the startup and not-ready taints block the node: one node in all."""
    manifests = [_nodeclass(), _pool(["m5.xlarge"], startupTaints=[STARTUP]), _deployment(0, {"cpu": "100m"})]
    events = [{"at": "10s", "scale": {"deployment": "app", "replicas": 1}},
              {"at": "170s", "scale": {"deployment": "app", "replicas": 2}}]
    summary = run(_scenario(manifests, events, "200s")).summary
    assert summary["nodes_launched"] == 1 and summary["unscheduled_pods_at_end"] == 0


# --- an extended resource the kubelet has not reported yet -------------------------------------------------

GPU = {"nvidia.com/gpu": "1"}


def test_registering_gpu_node_counts_its_launched_gpu_on_every_path() -> None:
    """The booting g4dn.xlarge reports 0 GPUs until its device plugin runs; its launched capacity (1 T4)
    counts, so the GPU pod goes there."""
    node = _registering_node("g4dn.xlarge", [], **{"nvidia.com/gpu": "0"})
    docs = [_nodeclass(), _pool(["g4dn.xlarge"]), node, _pod("p", {"cpu": "100m"}, limits=GPU)]
    decision, claims = _simulate_f(docs)
    assert decision["existing"] == [{"node": "booting", "pods": ["default/p"]}] and claims == []
    assert _controller(docs) == []


def test_gpu_pod_in_scenario_replay_waits_for_the_booting_gpu_node() -> None:
    """Scenario nodes register with 0 GPUs (the device plugin reports them at Ready, 200 s after launch). The
    first pod takes one of the 4 GPUs of a g4dn.12xlarge; a second one-GPU pod arriving at 170 s, while the node
    boots, counts on the 3 left: one node in all."""
    manifests = [_nodeclass(), _pool(["g4dn.12xlarge"]), _deployment(0, {"cpu": "100m"}, limits=GPU)]
    events = [{"at": "10s", "scale": {"deployment": "app", "replicas": 1}},
              {"at": "170s", "scale": {"deployment": "app", "replicas": 2}}]
    summary = run(_scenario(manifests, events, "200s")).summary
    assert summary["nodes_launched"] == 1 and summary["unscheduled_pods_at_end"] == 0


# --- ephemeral storage from the EC2NodeClass ---------------------------------------------------------------

ROOT_100GI = [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}]


def test_root_volume_sets_ephemeral_storage_on_every_path() -> None:
    """A 100Gi root volume gives an m5.large 89Gi of ephemeral storage (100 - 1 kube-reserved - 10 eviction):
    a 50Gi pod gets one on every path; with the default 20Gi volume it is unschedulable."""
    docs = [_nodeclass(blockDeviceMappings=ROOT_100GI), _pool(["m5.large"]),
            _deployment(1, {"cpu": "100m", "ephemeral-storage": "50Gi"})]
    decision, claims = _simulate_f(docs)
    assert [c["instance_type"] for c in decision["nodeclaims"]] == ["m5.large"]
    assert claims == _controller(docs) == _scenario_first_batch(docs)
    assert _types(claims) == [["m5.large"]]
    default = [_nodeclass(), *docs[1:]]
    assert _simulate_f(default)[1] == [] and _controller(default) == [] and _scenario_first_batch(default) == []


def test_instance_store_raid0_sets_ephemeral_storage_on_every_path() -> None:
    """``instanceStorePolicy: RAID0``: a c5d.2xlarge's 200 GB NVMe disk is its ephemeral storage (178.9e9
    bytes allocatable), enough for a 150Gi pod (161e9 bytes)."""
    docs = [_nodeclass(instanceStorePolicy="RAID0"), _pool(["c5d.2xlarge"]),
            _deployment(1, {"cpu": "100m", "ephemeral-storage": "150Gi"})]
    decision, claims = _simulate_f(docs)
    assert [c["instance_type"] for c in decision["nodeclaims"]] == ["c5d.2xlarge"]
    assert claims == _controller(docs) == _scenario_first_batch(docs) and len(claims) == 1


# --- kubelet reservations ----------------------------------------------------------------------------------


def test_kube_reserved_applies_on_every_path() -> None:
    """kubeReserved cpu 3 leaves m5.large nothing and m5.xlarge 1 vCPU: a 1.5-vCPU pod needs m5.2xlarge."""
    docs = [_nodeclass(kubelet={"kubeReserved": {"cpu": "3"}}), _pool(["m5.large", "m5.xlarge", "m5.2xlarge"]),
            _deployment(1, {"cpu": "1500m"})]
    decision, claims = _simulate_f(docs)
    assert [c["instance_type"] for c in decision["nodeclaims"]] == ["m5.2xlarge"]
    assert claims == _controller(docs) == _scenario_first_batch(docs)
    assert _types(claims) == [["m5.2xlarge"]]


def test_system_reserved_and_eviction_hard_apply_on_every_path() -> None:
    """systemReserved 2Gi plus evictionHard memory.available 2Gi leave an m5.large 3.5Gi: a 4Gi pod needs m5.xlarge."""
    docs = [_nodeclass(kubelet={"systemReserved": {"memory": "2Gi"}, "evictionHard": {"memory.available": "2Gi"}}),
            _pool(["m5.large", "m5.xlarge"]), _deployment(1, {"cpu": "100m", "memory": "4Gi"})]
    decision, claims = _simulate_f(docs)
    assert [c["instance_type"] for c in decision["nodeclaims"]] == ["m5.xlarge"]
    assert claims == _controller(docs) == _scenario_first_batch(docs)


# --- RuntimeClass ------------------------------------------------------------------------------------------

KATA = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
        "overhead": {"podFixed": {"cpu": "1", "memory": "1Gi"}}}


def test_runtime_class_overhead_on_every_path() -> None:
    """1.5 vCPU + the class's 1 vCPU overhead does not fit an m5.large (1930m): an m5.xlarge on every path."""
    docs = [_nodeclass(), _pool(["m5.large", "m5.xlarge"]), KATA,
            _deployment(1, {"cpu": "1500m", "memory": "1Gi"}, runtimeClassName="kata")]
    decision, claims = _simulate_f(docs)
    (plan,) = decision["nodeclaims"]
    assert plan["instance_type"] == "m5.xlarge" and plan["requests"]["cpu"] == 2500
    assert plan["requests"]["memory"] == 2 * 2**30
    assert claims == _controller(docs) == _scenario_first_batch(docs)
    assert claims[0]["spec"]["resources"]["requests"]["cpu"] == "2500m"


def test_runtime_class_daemonset_overhead_counts() -> None:
    """A DaemonSet whose template names the class reserves 0.5 + 1 vCPU on each new node: with a 1-vCPU pod,
    an m5.large (1930m) is too small."""
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
              "metadata": {"labels": {"app": "agent"}},
              "spec": {"runtimeClassName": "kata",
                       "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m"}}}]}}}}
    docs = [_nodeclass(), _pool(["m5.large", "m5.xlarge"]), KATA, ds, _deployment(1, {"cpu": "1"})]
    decision, claims = _simulate_f(docs)
    assert [c["instance_type"] for c in decision["nodeclaims"]] == ["m5.xlarge"]
    assert claims == _controller(docs)


# --- DRA ---------------------------------------------------------------------------------------------------


def test_dra_pod_launches_nothing_on_every_path() -> None:
    """Karpenter v1.14 (IGNORE_DRA_REQUESTS=true) refuses pods with resource claims: no node on any path, and
    ``simulate -f`` says why."""
    claim = {"resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]}
    docs = [_nodeclass(), _pool(["m5.large"]), _deployment(1, {"cpu": "100m"}, **claim)]
    decision, claims = _simulate_f(docs)
    assert claims == [] and _controller(docs) == [] and _scenario_first_batch(docs) == []
    (entry,) = decision["unschedulable"]
    assert "Dynamic Resource Allocation" in entry["reason"]


def test_runtime_class_scheduling_steers_the_pod() -> None:
    """RuntimeClass ``scheduling``: its nodeSelector (arm64) joins the pod's, its toleration lets the pod onto a
    tainted pool."""
    gvisor = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"},
              "handler": "runsc", "scheduling": {"nodeSelector": {L.ARCH: "arm64"},
                                                 "tolerations": [{"key": "sandbox", "operator": "Exists"}]}}
    pool = _pool(["m5.large", "m6g.large"], taints=[{"key": "sandbox", "effect": "NoSchedule"}])
    docs = [_nodeclass(), pool, gvisor, _deployment(1, {"cpu": "100m"}, runtimeClassName="gvisor")]
    decision, claims = _simulate_f(docs)
    assert [c["instance_type"] for c in decision["nodeclaims"]] == ["m6g.large"]
    assert claims == _controller(docs)


def test_runtime_class_conflicting_node_selector_is_refused(caplog: Any) -> None:
    """The admission plugin refuses a pod whose nodeSelector contradicts its RuntimeClass: nothing launches and
    the log line names the field."""
    gvisor = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"},
              "handler": "runsc", "scheduling": {"nodeSelector": {L.ARCH: "arm64"}}}
    docs = [_nodeclass(), _pool(["m5.large", "m6g.large"]), gvisor,
            _deployment(1, {"cpu": "100m"}, runtimeClassName="gvisor", nodeSelector={L.ARCH: "amd64"})]
    with caplog.at_level("WARNING"):
        decision, claims = _simulate_f(docs)
    assert claims == [] and decision["nodeclaims"] == []
    assert any("spec.nodeSelector.kubernetes.io/arch" in r.getMessage() for r in caplog.records)


def test_missing_runtime_class_is_named_in_one_warning(caplog: Any) -> None:
    docs = [_nodeclass(), _pool(["m5.large"]), _deployment(2, {"cpu": "100m"}, runtimeClassName="kata")]
    with caplog.at_level("WARNING"):
        decision, _ = _simulate_f(docs)
    lines = [r.getMessage() for r in caplog.records if "RuntimeClass" in r.getMessage()]
    assert lines == ["RuntimeClass 'kata' not in the input: 2 pod(s) name it (default/app-0, default/app-1), "
                     "read without its overhead"]
    assert len(decision["nodeclaims"]) == 1
