"""Opt-in: ``nodewright snapshot`` of a real API server, and the round trip -- what ``simulate --snapshot`` decides on
the file equals what the controllers decide on the live cluster at the same moment.

The cluster of ``tests/unit/whatif/cluster.py`` (Karpenter v1 objects; no DaemonSet and no owner references, so a
running kube-controller-manager has nothing to garbage-collect or add) is created through the administrator, its
statuses written as a kubelet and Karpenter would; the snapshot is taken as ``nodewright-reader``, a user the
server's RBAC judges, bound only to the ClusterRole of docs/whatif.md (``--kubeconfig`` user when
``NODEWRIGHT_E2E_KUBECONFIG`` names your own cluster). Then :func:`nodewright.whatif.dryrun.one_pass` runs twice:
over the snapshot restored in memory and over a :class:`~nodewright.kube.client.KubernetesCluster` (informers on
the real server), both with the clock at the snapshot's time; the provisioning and disruption documents must be
equal.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.kube import resources as r
from nodewright.kube.client import KubernetesCluster
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.rest import MERGE_PATCH, RestClient, load_api_client
from nodewright.whatif.dryrun import one_pass, restore, simulated
from nodewright.whatif.snapshot import KIND_OF, Snapshot, cluster_role, read_snapshot
from tests.unit.whatif.cluster import cluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]
CRD_DIR = Path(__file__).resolve().parents[2] / "helm" / "nodewright" / "crds"
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "ownerReferences")


def objects() -> list[dict[str, Any]]:
    out = []
    for obj in cluster():
        if obj["kind"] == "DaemonSet" or obj["metadata"]["name"].startswith("node-agent"):
            continue
        out.append(copy.deepcopy(obj))
    return out


def _apply_crds(rest: RestClient) -> None:
    import yaml

    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for file in sorted(CRD_DIR.glob("*.yaml")):
        doc = yaml.safe_load(file.read_text())
        try:
            current = rest.request("GET", f"{path}/{doc['metadata']['name']}")
            doc["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            rest.request("PUT", f"{path}/{doc['metadata']['name']}", body=doc)
        except NotFoundError:
            rest.request("POST", path, body=doc, creating=True)
    deadline = time.monotonic() + 30
    for file in sorted(CRD_DIR.glob("*.yaml")):
        name = yaml.safe_load(file.read_text())["metadata"]["name"]
        while not any(c.get("type") == "Established" and c.get("status") == "True"
                      for c in (rest.request("GET", f"{path}/{name}").get("status") or {}).get("conditions") or []):
            assert time.monotonic() < deadline, f"CRD {name} not Established"
            time.sleep(0.2)


def _delete(rest: RestClient, obj: dict[str, Any]) -> None:
    kind = KIND_OF[obj["kind"]]
    name, ns = obj["metadata"]["name"], obj["metadata"].get("namespace")
    try:
        rest.request("PATCH", kind.object_path(name, ns), body={"metadata": {"finalizers": None}},
                     content_type=MERGE_PATCH)
        rest.request("DELETE", kind.object_path(name, ns), {"gracePeriodSeconds": 0})
    except KubeError:
        pass


@pytest.fixture
def admin(e2e_kubeconfig: str) -> Iterator[RestClient]:
    rest = RestClient(load_api_client(e2e_kubeconfig))
    _apply_crds(rest)
    created = []
    try:
        for obj in objects():
            if obj["kind"] == "Namespace":
                continue  # default and kube-system exist
            kind = KIND_OF[obj["kind"]]
            body = copy.deepcopy(obj)
            for key in SERVER_FIELDS:
                body["metadata"].pop(key, None)
            ns = body["metadata"].get("namespace")
            rest.request("POST", kind.collection_path(ns), body={k: v for k, v in body.items() if k != "status"},
                         creating=True)
            created.append(obj)
            if "status" in obj:
                rest.request("PATCH", kind.object_path(body["metadata"]["name"], ns, "status"),
                             body={"status": obj["status"]}, content_type=MERGE_PATCH)
        yield rest
    finally:
        for claim in rest.request("GET", r.NODECLAIMS.collection_path()).get("items") or []:
            if (claim["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == "general":
                _delete(rest, {"kind": "NodeClaim", "metadata": claim["metadata"]})
        for obj in reversed(created):
            _delete(rest, obj)


def _reader_kubeconfig(request: pytest.FixtureRequest, rest: RestClient) -> str:
    """A kubeconfig of a user bound to the snapshot ClusterRole only (the control plane's nodewright-reader)."""
    mine = os.environ.get("NODEWRIGHT_E2E_KUBECONFIG")
    if mine:
        return mine
    plane = request.getfixturevalue("control_plane")
    role = cluster_role("nodewright-e2e-snapshot")
    base = "/apis/rbac.authorization.k8s.io/v1"
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "nodewright-e2e-snapshot"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "nodewright-e2e-snapshot"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "nodewright-reader"}]}
    for plural, doc in (("clusterroles", role), ("clusterrolebindings", binding)):
        try:
            rest.request("POST", f"{base}/{plural}", body=doc, creating=True)
        except KubeError as err:
            if err.status != 409:
                raise
    return str(plane.kubeconfig_for("nodewright-reader"))


def _snapshot_as(kubeconfig: str, out: Path) -> Snapshot:
    """``nodewright snapshot`` as the reader identity, retried for up to 30 s (RBAC bindings take effect within a
    moment); the file it wrote, read back."""
    deadline = time.monotonic() + 30
    while True:
        result = CliRunner().invoke(cli, ["snapshot", "--kubeconfig", kubeconfig, "-o", str(out)])
        if result.exit_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result.exit_code == 0, result.output
    return read_snapshot(out)


def test_snapshot_round_trips_to_the_controllers_decisions(admin: RestClient, request: pytest.FixtureRequest,
                                                           tmp_path: Path) -> None:
    reader = _reader_kubeconfig(request, admin)
    snap = _snapshot_as(reader, tmp_path / "snap.yaml")
    mine = {(o["kind"], o["metadata"]["name"]) for o in snap.objects}
    assert {("NodePool", "general"), ("EC2NodeClass", "default"), ("Node", "ip-10-0-1-3"), ("Pod", "big"),
            ("NodeClaim", "general-00001"), ("PodDisruptionBudget", "db")} <= mine
    assert snap.time is not None
    now = snap.time

    offline = one_pass(restore(snap.objects, now))

    stop = threading.Event()
    live = KubernetesCluster(admin, time.time)
    live.start(stop)
    try:
        assert live.wait_for_sync(60)
        online = one_pass(simulated(live, now))
    finally:
        stop.set()
    provisioning_off, disruption_off, created_off = offline
    provisioning_on, disruption_on, created_on = online
    assert provisioning_on == provisioning_off
    assert disruption_on == disruption_off
    assert len(created_on) == len(created_off)
    # And what they decide, on our nodes:
    reasons = {n["node"]: n["reason"] for n in disruption_on["nodes"]}
    assert reasons["ip-10-0-1-3"] == "pdb default/db prevents pod evictions"
    assert reasons["ip-10-0-1-4"] == "pod default/batch-0 has karpenter.sh/do-not-disrupt"
    assert [c["instance_type"] for c in provisioning_on["nodeclaims"] if "default/big" in c["pods"]] == ["c6a.2xlarge"]


def test_capacitybuffer_round_trips_under_the_gate(admin: RestClient, request: pytest.FixtureRequest,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CapacityBuffer and its PodTemplate on the real server: the snapshot carries both (as nodewright-reader),
    and with ``FEATURE_GATES=CapacityBuffer=true`` the dry run on the file equals the one on the live cluster
    (informers on the buffer kinds too, as the controller under the gate); the virtual pods are in the batch."""
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "e2e-headroom", "namespace": "default"},
                "template": {"metadata": {"labels": {"app": "headroom"}}, "spec": {"containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}
    buffer = {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
              "metadata": {"name": "e2e-headroom", "namespace": "default"},
              "spec": {"podTemplateRef": {"name": "e2e-headroom"}, "replicas": 3}}
    extra = [template, buffer]
    try:
        for obj in extra:
            admin.request("POST", KIND_OF[obj["kind"]].collection_path("default"), body=obj, creating=True)
        reader = _reader_kubeconfig(request, admin)
        snap = _snapshot_as(reader, tmp_path / "snap.json")
        assert [o["metadata"]["name"] for o in snap.of_kind("CapacityBuffer")] == ["e2e-headroom"]
        assert [o["metadata"]["name"] for o in snap.of_kind("PodTemplate")] == ["e2e-headroom"]
        assert snap.time is not None
        monkeypatch.setenv("FEATURE_GATES", "CapacityBuffer=true")
        offline = one_pass(restore(snap.objects, snap.time))
        stop = threading.Event()
        live = KubernetesCluster(admin, time.time, kinds=(*r.WATCHED, *r.BUFFER_WATCHED))
        live.start(stop)
        try:
            assert live.wait_for_sync(60)
            online = one_pass(simulated(live, snap.time))
        finally:
            stop.set()
        assert online[0] == offline[0] and online[1] == offline[1]
        placed = [p for e in offline[0]["existing"] for p in e["pods"]] + [
            p for c in offline[0]["nodeclaims"] for p in c["pods"]]
        assert sorted(p for p in placed if "capacity-buffer" in p) == [
            f"default/capacity-buffer-e2e-headroom-{i}" for i in (1, 2, 3)]
    finally:
        for obj in reversed(extra):
            _delete(admin, obj)
