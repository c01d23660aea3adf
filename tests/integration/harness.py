"""The controller under test, run as in production (``runtime.build_runtime`` + ``runtime.serve``) in a thread,
plus the manifests and the "kubelet" steps the tests play (pods pending, a Node registering)."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client as k8s
from rbacreplay.recorder import CONTROLLER_TOKEN

from nodewright.api import labels as L
from nodewright.runtime import Runtime, build_runtime, serve
from nodewright.settings import Settings

from .awsmoto import CLUSTER, REGION, Account
from .emulator import EmulatorThread

T = TypeVar("T")
# CONTROLLER_TOKEN: the replicas' bearer token (the emulator's RBAC binds it; the RBAC replay judges its requests).
ENDPOINT = "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"
#: Cluster CA (base64 PEM) and service CIDR given as settings, so no eks:DescribeCluster call is needed.
CA_BUNDLE = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJJVEVTVAotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
SERVICE_CIDR = "10.100.0.0/16"


#: (what, seconds) measured by the tests, printed in the terminal summary (``tests/integration/conftest.py``).
TIMINGS: list[tuple[str, float]] = []


def record_timing(what: str, seconds: float) -> None:
    """Report a duration the suite measured (never asserted: timings only inform)."""
    TIMINGS.append((what, seconds))


def wait_for(predicate: Callable[[], T], timeout: float = 10.0, what: str = "condition", interval: float = 0.02) -> T:
    """Poll ``predicate`` until it returns something truthy (returned); AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def fast_settings(kubeconfig: str, **overrides: Any) -> Settings:
    """Production settings with test timings: 0.1 s batch idle, 2 s lease, 0.1 s reconcile, free ports; and the
    readiness hold off (``nomination_hold=False``): the emulator runs no kube-scheduler, so a held Node would wait
    ``HOLD_MAX`` (10 s after Ready) for pods that never bind. ``test_flows.py``'s hold test turns it on and binds the
    pods as kube-scheduler would."""
    base = Settings(cluster_name=CLUSTER, aws_region=REGION, cluster_endpoint=ENDPOINT, cluster_ca_bundle=CA_BUNDLE,
                    cluster_cidr=SERVICE_CIDR, batch_idle_duration=0.1, nomination_hold=False,
                    batch_max_duration=1.0, metrics_port=0, health_probe_port=0, lease_duration=2.0,
                    renew_deadline=1.5, retry_period=0.25, reconcile_period=0.1, kubeconfig=kubeconfig)
    return dataclasses.replace(base, **overrides)


class Replica:
    """One controller replica in a thread, built by the production wiring against the emulator and moto."""

    def __init__(self, kube: EmulatorThread | str, account: Account, identity: str, **settings: Any) -> None:
        """``kube``: the emulator, or the path of a kubeconfig for a real API server (the e2e suite)."""
        self._dir = tempfile.TemporaryDirectory(prefix="nodewright-it-")
        if isinstance(kube, str):
            kubeconfig = Path(kube)
        else:
            kubeconfig = Path(self._dir.name) / "kubeconfig"
            kubeconfig.write_text(kube.kubeconfig(CONTROLLER_TOKEN), encoding="utf-8")
        self.settings = fast_settings(str(kubeconfig), **settings)
        self.runtime: Runtime = build_runtime(self.settings, aws_clients=account.controller_clients(),
                                              host="127.0.0.1", identity=identity)
        self.thread = threading.Thread(target=serve, args=(self.runtime, 10.0), name=f"replica-{identity}",
                                       daemon=True)

    def start(self) -> Replica:
        self.thread.start()
        wait_for(lambda: self.runtime.endpoints and self.runtime.ready(), 10, "informers to sync")
        return self

    @property
    def is_leader(self) -> bool:
        return self.runtime.is_leader

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.runtime.metrics.value(name, labels) or 0.0

    def stop(self, release: bool = True) -> None:
        """Graceful stop (the Lease is released) or, with ``release=False``, a crash (the Lease is left)."""
        if not release and self.runtime.elector is not None:
            self.runtime.elector.release = lambda: None  # type: ignore[method-assign]
        self.runtime.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the replica did not stop"
        self._dir.cleanup()


# --- manifests ---------------------------------------------------------------------------------------------


def ec2nodeclass(name: str = "default") -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
            "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
                     "tags": {"team": "platform"}}}


def nodepool(name: str = "general", types: tuple[str, ...] = ("c5.large", "m5.large", "m5.xlarge"),
             nodeclass: str = "default", **template_spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": {"team": "web"}}, "spec": {
                "requirements": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                                 {"key": L.INSTANCE_TYPE, "operator": "In", "values": list(types)}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": nodeclass},
                **template_spec}},
                "limits": {"cpu": "100"}}}


def apply_pool(custom: k8s.CustomObjectsApi, **nodepool_args: Any) -> None:
    """Create the ``default`` EC2NodeClass and a NodePool through the official client."""
    custom.create_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", ec2nodeclass())
    custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", nodepool(**nodepool_args))


def pending_pod(core: k8s.CoreV1Api, name: str, cpu: str = "500m", memory: str = "512Mi",
                labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
                grace: int | None = None) -> None:
    """Create a pod (``grace``: its terminationGracePeriodSeconds) and mark it unschedulable, as kube-scheduler
    does when no node fits."""
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": "web"}, "annotations": annotations or {}},
        "spec": spec})
    core.patch_namespaced_pod_status(name, "default", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/0 nodes are available"}]}})


def run_pod(core: k8s.CoreV1Api, name: str, node: str) -> None:
    """What kube-scheduler and the kubelet do: bind (if needed), then report Running and Ready."""
    pod = core.read_namespaced_pod(name, "default")
    if not pod.spec.node_name:
        core.create_namespaced_binding("default", k8s.V1Binding(
            metadata=k8s.V1ObjectMeta(name=name), target=k8s.V1ObjectReference(kind="Node", name=node)),
            _preload_content=False)
    core.patch_namespaced_pod_status(name, "default", {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}})


def register_node(core: k8s.CoreV1Api, claim: dict[str, Any], ready: bool = True) -> str:
    """What the kubelet does on a new instance: create the Node with the instance's providerID, the NodePool's
    labels and the ``karpenter.sh/unregistered`` taint from the bootstrap, then report Ready."""
    status = claim["status"]
    # The instance ID names the Node (EC2's resource-name hostnames): unique per instance and the same in every
    # process. (An earlier ``hash(providerID) % 250`` is salted per process and gave two instances one name in
    # 1 of 250 pairs: the second Node's create got 409 forever and its pods stayed pending.)
    name = f"{str(status['providerID']).rsplit('/', 1)[-1]}.ec2.internal"
    labels = {k: v for k, v in claim["metadata"]["labels"].items()}
    labels.update({L.HOSTNAME: name, "kubernetes.io/os": "linux"})
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                      "spec": {"providerID": status["providerID"], "taints": [
                          {"key": L.UNREGISTERED_TAINT_KEY, "effect": L.UNREGISTERED_TAINT_EFFECT}]}})
    core.patch_node_status(name, {"status": {
        "capacity": status["capacity"], "allocatable": status["allocatable"],
        "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}]}})
    return name


def condition(obj: dict[str, Any] | None, type_: str) -> str | None:
    """The status (``"True"``/``"False"``) of condition ``type_`` on ``obj``, None when absent."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return str(cond.get("status"))
    return None


def chart_rbac_rules(*without: tuple[str, str]) -> list[dict[str, Any]]:
    """The rules of the chart's ClusterRole and Role (the minimal variant, ``controller.bindPods: true``) as
    ``helm template`` renders them, minus the ``(apiGroup, resource)`` pairs in ``without``.

    Skips the test when helm is not installed (``make setup``)."""
    chart_tests = Path(__file__).resolve().parents[1] / "chart" / "chart_helpers.py"
    spec = importlib.util.spec_from_file_location("chart_helpers", chart_tests)
    assert spec and spec.loader
    helpers = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("chart_helpers", helpers)
    spec.loader.exec_module(helpers)
    render = helpers.render_chart
    try:
        render.helm_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    docs = render.documents(render.render(render.variants()["minimal"], include_crds=False,
                                          set_values=["controller.bindPods=true"]))
    rules = [rule for doc in docs if doc["kind"] in ("ClusterRole", "Role") for rule in doc["rules"]]
    out = []
    for rule in rules:
        resources = [res for res in rule["resources"]
                     if not any((group, res) in without for group in rule["apiGroups"])]
        if resources:
            out.append({**rule, "resources": resources})
    return out
