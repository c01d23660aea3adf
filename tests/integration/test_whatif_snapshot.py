"""``nodewright snapshot`` against the API emulator (127.0.0.1) with only the documented ClusterRole granted, then
``simulate --snapshot`` on what it wrote."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.kube.rest import RestClient
from nodewright.whatif.snapshot import KIND_OF, cluster_role, read_snapshot
from tests.integration.emulator import EmulatorThread
from tests.unit.whatif.cluster import cluster

SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


def kubeconfig(path: Path, url: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "e",
        "clusters": [{"name": "e", "cluster": {"server": url}}], "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "e", "context": {"cluster": "e", "user": "u"}}]}))
    return path


def load(rest: RestClient, objects: list[dict[str, Any]]) -> None:
    """Create each object, then write its status (the API server drops status on create)."""
    for obj in objects:
        kind = KIND_OF[obj["kind"]]
        body = copy.deepcopy(obj)
        for key in SERVER_FIELDS:
            body["metadata"].pop(key, None)
        ns = body["metadata"].get("namespace")
        rest.request("POST", kind.collection_path(ns), body=body, creating=True)
        if "status" in obj and obj["kind"] not in ("Namespace",):
            rest.request("PATCH", kind.object_path(body["metadata"]["name"], ns, "status"),
                         body={"status": obj["status"]}, content_type="application/merge-patch+json")


def test_snapshot_with_the_read_only_clusterrole_then_simulate(kube: EmulatorThread, rest: RestClient,
                                                               tmp_path: Path) -> None:
    load(rest, cluster())
    kube.emulator.rbac_rules = cluster_role()["rules"]
    out = tmp_path / "snap.json"
    config = kubeconfig(tmp_path / "kubeconfig", kube.url)
    result = CliRunner().invoke(cli, ["snapshot", "--kubeconfig", str(config), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"wrote {out}: 23 objects (1 NodePool, 1 EC2NodeClass, 4 NodeClaims, 4 Nodes, 9 Pods, 1 DaemonSet, "
        "1 PodDisruptionBudget, 2 Namespaces)"]
    assert kube.emulator.forbidden == []  # the ClusterRole of docs/whatif.md is enough
    snap = read_snapshot(out)
    assert {o["kind"] for o in snap.objects} == {"NodePool", "EC2NodeClass", "NodeClaim", "Node", "Pod", "DaemonSet",
                                                 "PodDisruptionBudget", "Namespace"}
    pod = next(o for o in snap.of_kind("Pod") if o["metadata"]["name"] == "db-0")
    assert pod["spec"]["nodeName"] == "ip-10-0-1-3" and pod["status"]["phase"] == "Running"
    result = CliRunner().invoke(cli, ["simulate", "--snapshot", str(out), "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = yaml.safe_load(result.output)
    assert [c["instance_type"] for c in doc["provisioning"]["nodeclaims"]] == ["c6a.2xlarge"]
    reasons = {n["node"]: n["reason"] for n in doc["disruption"]["nodes"]}
    assert reasons["ip-10-0-1-3"] == "pdb default/db prevents pod evictions"
    assert reasons["ip-10-0-1-4"] == "pod default/batch-0 has karpenter.sh/do-not-disrupt"
    # Just created by the emulator: consolidateAfter (1m) has not passed since.
    assert reasons["ip-10-0-1-1"] == "consolidateAfter (60s) has not elapsed since the last pod event"


def test_a_missing_rule_is_one_line_naming_the_resource(kube: EmulatorThread, tmp_path: Path) -> None:
    role = cluster_role()
    kube.emulator.rbac_rules = [r for r in role["rules"] if r["apiGroups"] != ["policy"]]
    out = tmp_path / "snap.yaml"
    result = CliRunner().invoke(cli, ["snapshot", "--kubeconfig", str(kubeconfig(tmp_path / "k", kube.url)),
                                      "-o", str(out)])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "error: --kubeconfig: list poddisruptionbudgets.policy is forbidden: bind the ClusterRole of docs/whatif.md "
        '(HTTP 403 Forbidden: poddisruptionbudgets.policy is forbidden: User '
        '"system:serviceaccount:kube-system:nodewright" cannot list resource "poddisruptionbudgets" in API group '
        '"policy" at the cluster scope)']
    assert not out.exists()


def test_explain_live_through_a_kubeconfig(kube: EmulatorThread, rest: RestClient, tmp_path: Path) -> None:
    load(rest, cluster())
    kube.emulator.rbac_rules = cluster_role()["rules"]
    result = CliRunner().invoke(cli, ["explain", "node", "ip-10-0-1-3", "--kubeconfig",
                                      str(kubeconfig(tmp_path / "k", kube.url))])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == "  not disrupted now: pdb default/db prevents pod evictions"
    assert kube.emulator.forbidden == []


def test_capacitybuffers_and_what_they_name_with_the_clusterrole(kube: EmulatorThread, rest: RestClient,
                                                                 tmp_path: Path) -> None:
    """The ClusterRole covers CapacityBuffers and their targets; only the PodTemplate a buffer names is kept."""
    template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "web", "namespace": "default"},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                    {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}}
    other = copy.deepcopy(template)
    other["metadata"]["name"] = "unused"
    buffer = {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
              "metadata": {"name": "headroom", "namespace": "default"},
              "spec": {"podTemplateRef": {"name": "web"}, "replicas": 2}}
    load(rest, [*cluster(), template, other, buffer])
    kube.emulator.rbac_rules = cluster_role()["rules"]
    out = tmp_path / "snap.json"
    result = CliRunner().invoke(cli, ["snapshot", "--kubeconfig", str(kubeconfig(tmp_path / "k", kube.url)),
                                      "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert kube.emulator.forbidden == []
    snap = read_snapshot(out)
    assert [o["metadata"]["name"] for o in snap.of_kind("CapacityBuffer")] == ["headroom"]
    assert [o["metadata"]["name"] for o in snap.of_kind("PodTemplate")] == ["web"]
