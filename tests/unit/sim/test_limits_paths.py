"""NodePool ``limits`` within one batch (issue 26, item 1), through the entry points a user runs: ``simulate -f``
(the provisioning controller's first batch), the provisioner's NodeClaims and log line, and scenario replay.

The rule (Karpenter ``filterByRemainingResources`` + ``subtractMax``): what the pool owns plus, per new NodeClaim,
the largest of its candidate types never exceeds the limits. nodewright narrows candidates where that leaves room
for the rest of the batch (``nvidia.com/gpu: 8``, two 1-GPU pods: 2 x g6.2xlarge, not 1 x g6.12xlarge)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.kube import resources as r
from nodewright.quantities import parse_resource_list
from nodewright.sim.decision import decide_in_cluster
from nodewright.sim.runner import run
from nodewright.sim.scenario import parse_scenario

NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "nodes", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
}
M_ON_DEMAND = [{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m"]},
               {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
G6_ON_DEMAND = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g6"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
GIB = 2**30


def nodepool(name: str, limits: dict[str, str], requirements: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"limits": limits, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": requirements}}}}


def deployment(replicas: int, requests: dict[str, str], name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}}}}


def cpu_pool(cpu: str) -> dict[str, Any]:
    return nodepool("general", {"cpu": cpu, "memory": "64Gi"}, M_ON_DEMAND)


def simulate(tmp_path: Path, docs: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """``simulate -f`` as JSON, and the event lines the table output prints to stderr."""
    path = tmp_path / "in.yaml"
    path.write_text("\n---\n".join(json.dumps(d) for d in docs))
    out = CliRunner().invoke(cli, ["simulate", "-f", str(path), "-o", "json"])
    assert out.exit_code == 0, out.stderr
    table = CliRunner().invoke(cli, ["simulate", "-f", str(path)])
    return json.loads(out.stdout), table.stderr


def launched_at_most(claims: list[dict[str, Any]]) -> dict[str, int]:
    """Per resource, the sum over NodeClaims of the largest capacity among their candidate types."""
    from nodewright.cloud.catalog import load_instance_types
    capacity = {it.name: it.capacity for it in load_instance_types("us-east-1")}
    total: dict[str, int] = {}
    for claim in claims:
        for name in ("cpu", "memory", "nvidia.com/gpu"):
            total[name] = total.get(name, 0) + max(capacity[t].get(name, 0) for t in claim["instance_types"])
    return total


def test_simulate_keeps_a_16_vcpu_limit(tmp_path: Path) -> None:
    """The issue's reproduction: before the fix m6g.4xlarge + m6g.2xlarge = 24 vCPU were launched."""
    decision, stderr = simulate(tmp_path, [cpu_pool("16"), NODECLASS, deployment(20, {"cpu": "2", "memory": "4Gi"})])
    claims = decision["nodeclaims"]
    assert [(c["instance_type"], len(c["pods"])) for c in claims] == [("m6g.4xlarge", 7)]
    assert len(decision["unschedulable"]) == 13
    most = launched_at_most(claims)
    assert most["cpu"] <= 16000 and most["memory"] <= 64 * GIB
    assert ("limits of nodepool general changed the plan: limits {cpu: 16, memory: 64Gi}, owned {cpu: 0, memory: 0}, "
            "this batch launches at most {cpu: 16, memory: 60620Mi}; 13 pod(s) left pending") in stderr


@pytest.mark.parametrize(("cpu", "most"), [("12", 12000), ("20", 20000), ("32", 32000)])
def test_simulate_never_launches_past_the_cpu_limit(tmp_path: Path, cpu: str, most: int) -> None:
    """Caps of 12, 20 and 32 vCPU launched 16, 32 and 48 before the fix."""
    decision, _ = simulate(tmp_path, [nodepool("general", {"cpu": cpu}, M_ON_DEMAND), NODECLASS,
                                      deployment(20, {"cpu": "2", "memory": "4Gi"})])
    assert decision["nodeclaims"]
    assert launched_at_most(decision["nodeclaims"])["cpu"] <= most


def test_simulate_narrows_gpu_candidates_instead_of_one_big_node(tmp_path: Path) -> None:
    """``nvidia.com/gpu: 8`` and two 1-GPU pods: reserving the largest candidate (an 8-GPU type) of the first
    NodeClaim left no room for the second, so both pods shared a g6.12xlarge ($4.60/h). Narrowing the first
    NodeClaim's candidates to types of at most 7 GPUs leaves room: 2 x g6.2xlarge ($1.96/h), the plan without the
    limit. The plan uses 2 of the 8 GPUs, so no limits line: the narrowing changed no node the plan launches."""
    decision, stderr = simulate(tmp_path, [
        nodepool("gpu", {"nvidia.com/gpu": "8"}, G6_ON_DEMAND), NODECLASS,
        deployment(2, {"cpu": "6", "memory": "16Gi", "nvidia.com/gpu": "1"})])
    claims = decision["nodeclaims"]
    assert [c["instance_type"] for c in claims] == ["g6.2xlarge", "g6.2xlarge"]
    assert sum(c["price_per_hour"] for c in claims) == pytest.approx(1.9552)
    assert launched_at_most(claims)["nvidia.com/gpu"] <= 8
    assert "limits of nodepool" not in stderr
    assert not [e for e in decision["events"] if e.startswith("limits of nodepool")]


def test_provisioner_counts_what_the_pool_owns_and_logs_the_change(caplog: pytest.LogCaptureFixture) -> None:
    """The provisioning controller (``simulate``'s first batch): a Node the pool already owns (m6g.2xlarge, 8 vCPU)
    counts against a 16-vCPU limit, so the NodeClaims it creates take at most 8 vCPU more."""
    owned = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "owned", "labels": {
        "karpenter.sh/nodepool": "general", "node.kubernetes.io/instance-type": "m6g.2xlarge",
        "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
        "kubernetes.io/arch": "arm64", "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true"}},
        "spec": {}, "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "58"},
                               "allocatable": {"cpu": "100m", "memory": "100Mi", "pods": "58"},
                               "conditions": [{"type": "Ready", "status": "True"}]}}
    caplog.set_level(logging.INFO)
    _, cluster = decide_in_cluster([cpu_pool("16"), NODECLASS, owned, deployment(20, {"cpu": "2", "memory": "4Gi"})],
                                   region="us-east-1")
    created = cluster.list(r.NODECLAIMS)
    assert created
    types = [next(q["values"] for q in c["spec"]["requirements"] if q["key"] == "node.kubernetes.io/instance-type")
             for c in created]
    from nodewright.cloud.catalog import load_instance_types
    capacity = {it.name: it.capacity for it in load_instance_types("us-east-1")}
    assert sum(max(capacity[t]["cpu"] for t in names) for names in types) <= 16000 - 8000
    lines = [rec.getMessage() for rec in caplog.records if rec.getMessage().startswith("limits of nodepool general")]
    assert lines == [lines[0]] and "owned {cpu: 8, memory: 32Gi}" in lines[0]
    assert parse_resource_list(created[0]["spec"]["resources"]["requests"])["cpu"] <= 8000


def test_scenario_replay_never_holds_an_over_limit_fleet() -> None:
    """Replay: 20 pods under a 16-vCPU limit get one m6g.4xlarge for the whole run (before the fix the replay
    kept m6g.4xlarge + m6g.2xlarge = 24 vCPU)."""
    scenario = parse_scenario({
        "apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "limits"},
        "spec": {"duration": "10m", "zones": ["us-east-1a"], "seed": 1,
                 "launchLatency": {"p50": "30s", "p90": "30s"},
                 "manifests": [cpu_pool("16"), NODECLASS, deployment(0, {"cpu": "2", "memory": "4Gi"})],
                 "events": [{"at": "1m", "scale": {"deployment": "web", "replicas": 20}}]}})
    result = run(scenario)
    assert result.launches == {"m6g.4xlarge on-demand": 1}
    assert max(s.to_dict()["nodes"] for s in result.timeline) == 1


def test_simulate_loop_narrows_an_open_nodeclaim_for_an_anti_affine_pod(tmp_path: Path) -> None:
    """Pods placed one by one (required hostname anti-affinity): the first NodeClaim reserves its largest option
    (8 GPUs), so Karpenter leaves the second pod pending. nodewright narrows the first NodeClaim to 1-GPU types and
    opens a second one: both pods run, within ``nvidia.com/gpu: 8`` (2 of 8 used: no limits line)."""
    web = deployment(2, {"cpu": "6", "memory": "16Gi", "nvidia.com/gpu": "1"})
    web["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    decision, stderr = simulate(tmp_path, [nodepool("gpu", {"nvidia.com/gpu": "8"}, G6_ON_DEMAND), NODECLASS, web])
    claims = decision["nodeclaims"]
    assert not decision["unschedulable"]
    assert [c["instance_type"] for c in claims] == ["g6.2xlarge", "g6.2xlarge"]
    assert launched_at_most(claims)["nvidia.com/gpu"] <= 8
    assert "limits of nodepool" not in stderr


def test_simulate_says_when_limits_send_pods_to_another_nodepool(tmp_path: Path) -> None:
    """A capped pool (weight 50, 16 vCPU) and an uncapped overflow pool: the limits change the plan even though
    every pod runs (13 of the 20 launch in 'overflow'), and the line says so."""
    reserved = nodepool("reserved", {"cpu": "16"}, M_ON_DEMAND)
    reserved["spec"]["weight"] = 50
    decision, stderr = simulate(tmp_path, [reserved, nodepool("overflow", {}, M_ON_DEMAND), NODECLASS,
                                           deployment(20, {"cpu": "2", "memory": "4Gi"})])
    assert not decision["unschedulable"]
    pods = {pool: sum(len(c["pods"]) for c in decision["nodeclaims"] if c["nodepool"] == pool)
            for pool in ("reserved", "overflow")}
    assert pods == {"reserved": 7, "overflow": 13}
    assert launched_at_most([c for c in decision["nodeclaims"] if c["nodepool"] == "reserved"])["cpu"] <= 16000
    assert ("limits of nodepool reserved changed the plan: limits {cpu: 16}, owned {cpu: 0}, this batch launches "
            "at most {cpu: 16}; 13 pod(s) launched in other NodePools instead: overflow (13)") in stderr
    assert "limits of nodepool overflow" not in stderr


@pytest.mark.parametrize(("cpu", "line"), [
    ("64", None),  # 6 of 64 vCPU launched: the narrowing changed nothing the plan launches
    ("6", "limits of nodepool general changed the plan: limits {cpu: 6}, owned {cpu: 0}, this batch launches at "
          "most {cpu: 6}; 1 NodeClaim(s) narrowed to smaller instance types to leave room for the rest of the batch"),
])
def test_simulate_names_limits_only_when_they_bind_or_the_plan_reaches_them(tmp_path: Path, cpu: str,
                                                                             line: str | None) -> None:
    """Three 1.5-vCPU pods in m6g: the first NodeClaim's candidates (m6g.large .. m6g.16xlarge, 64 vCPU) are
    narrowed so a second one fits. Under ``cpu: 64`` the plan (m6g.large + m6g.xlarge, 6 vCPU) is the plan without
    limits and far from them: simulate printed "limits of nodepool general changed the plan" all the same. Under
    ``cpu: 6`` the same plan leaves no room for another such node: the line stays, on stderr and in "events"."""
    family = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m6g"]},
              {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    web = deployment(3, {"cpu": "1500m", "memory": "2Gi"})
    decision, stderr = simulate(tmp_path, [nodepool("general", {"cpu": cpu}, family), NODECLASS, web])
    unlimited, _ = simulate(tmp_path, [nodepool("general", {}, family), NODECLASS, web])
    types = sorted(c["instance_type"] for c in decision["nodeclaims"])
    assert types == ["m6g.large", "m6g.xlarge"] == sorted(c["instance_type"] for c in unlimited["nodeclaims"])
    limits_lines = [e for e in decision["events"] if e.startswith("limits of nodepool")]
    assert limits_lines == ([] if line is None else [line])
    assert "Computed 2 new node(s) will fit 3 pod(s)" in stderr
    if line is None:
        assert "limits of nodepool" not in stderr
    else:  # the lines held behind it are logged on, in their order
        assert stderr.index(line) < stderr.index("Computed 2 new node(s) will fit 3 pod(s)")
