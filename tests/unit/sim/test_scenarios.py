"""Scenario replay end to end: exact summaries of small scenarios, the Cluster Autoscaler baseline, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.sim.runner import _driver as real_driver
from nodewright.sim.runner import run, run_scenario
from nodewright.sim.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "examples" / "scenarios"

POOL = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "team1"},
    "spec": {"template": {"metadata": {"labels": {"intent": "apps"}}, "spec": {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "team1"},
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                         {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                         {"key": "node.kubernetes.io/instance-type", "operator": "In",
                          "values": ["c5a.xlarge", "c5a.2xlarge"]}],
        "taints": [{"key": "team1", "effect": "NoSchedule"}]}},
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}},
}
NODECLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "team1"},
    "spec": {"role": "nodes", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]},
}


def inflate(replicas: int = 0) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "inflate"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "inflate"}}, "template": {
                "metadata": {"labels": {"app": "inflate"}},
                "spec": {"nodeSelector": {"intent": "apps"},
                         "tolerations": [{"key": "team1", "operator": "Exists"}],
                         "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                        "whenUnsatisfiable": "DoNotSchedule",
                                                        "labelSelector": {"matchLabels": {"app": "inflate"}}}],
                         "containers": [{"name": "c", "image": "pause",
                                         "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]}}}}


def four_pods(**spec: Any) -> dict[str, Any]:
    """4 pods of 1 vCPU spread over two zones: scale up at 60 s, down at 600 s, constant 30 s launch latency."""
    return {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "four-pods"},
            "spec": {"duration": "20m", "zones": ["us-east-1a", "us-east-1b"], "seed": 1,
                     "launchLatency": {"p50": "30s", "p90": "30s"}, "podStartDelay": "5s",
                     "manifests": [POOL, NODECLASS, inflate()],
                     "events": [{"at": "1m", "scale": {"deployment": "inflate", "replicas": 4}},
                                {"at": "10m", "scale": {"deployment": "inflate", "replicas": 0}}],
                     "baseline": {"clusterAutoscaler": {
                         "launchLatency": {"p50": "2m", "p90": "2m"},
                         "nodeGroups": [{"name": "team1", "nodePool": "team1", "instanceType": "c5a.xlarge",
                                         "labels": {"intent": "apps"},
                                         "taints": [{"key": "team1", "effect": "NoSchedule"}]}]}},
                     **spec}}


@pytest.fixture(scope="module")
def four_pod_result() -> dict[str, Any]:
    return run_scenario(parse_scenario(four_pods()), baseline="cluster-autoscaler")


def _at(timeline: list[dict[str, Any]], t: float) -> dict[str, Any]:
    return next(e for e in timeline if e["t"] == t)


def test_four_pods_two_nodes_at_launch_latency_then_zero_after_consolidate_after(four_pod_result) -> None:
    summary = four_pod_result["summary"]
    # Pods appear at 60 s, the batch closes at 61 s, two c5a.xlarge (one per zone) are Ready 30 s later; the pods are
    # bound when the node lifecycle controller lifts the not-ready taint, 11 ms after Ready.
    assert summary["first_node_ready_s"] == 91.0
    assert summary["pod_schedule_latency_p50_s"] == 31.011
    assert summary["pod_schedule_latency_max_s"] == 31.011
    assert summary["pods_scheduled"] == 4
    assert summary["max_nodes"] == 2
    assert summary["nodes_launched"] == 2
    assert summary["final_nodes"] == 0
    assert summary["unscheduled_pods_at_end"] == 0
    assert summary["disruptions_by_reason"] == {"Empty": 2}
    timeline = four_pod_result["timeline"]
    assert _at(timeline, 80.0)["nodes"] == 0  # registered at 61 + 22 s
    assert _at(timeline, 100.0)["nodes_by_pool"] == {"team1": 2}
    assert _at(timeline, 100.0)["running_pods"] == 4
    assert _at(timeline, 100.0)["cost_per_hour"] == pytest.approx(2 * 0.154)
    # Scale-in at 600 s: both nodes are empty; consolidateAfter 30 s, the 15 s validation, one command at a time.
    assert _at(timeline, 630.0)["nodes"] == 2
    removal = [e["t"] for e in timeline if e["nodes"] == 0 and e["t"] > 600][0]
    assert 640.0 <= removal <= 700.0
    # Billed: two c5a.xlarge ($0.154/h) from 61 s until they were terminated.
    assert summary["cost_usd"] == pytest.approx(summary["node_hours"] * 0.154, rel=1e-3)


def test_cluster_autoscaler_is_slower_to_the_first_node_by_its_latency_difference(four_pod_result) -> None:
    ours, theirs = four_pod_result["summary"], four_pod_result["baseline"]["summary"]
    # Same pending pods at 60 s; CA scans every 10 s and its ASG takes 120 s instead of 30 s.
    assert theirs["first_node_ready_s"] == 60.0 + 120.0  # the scan at t=60 s sees the pods marked Unschedulable
    assert theirs["first_node_ready_s"] - ours["first_node_ready_s"] == pytest.approx(120.0 - 30.0, abs=10.0)
    assert theirs["max_nodes"] == 2  # least-waste: 2 c5a.xlarge hold 4 x 1 vCPU
    assert theirs["pod_schedule_latency_p50_s"] == 120.011  # bound at the not-ready taint's lift
    # Scale-down: utilisation 0 after 600 s, unneeded for 10 minutes: removed at the scan after 1200 s.
    assert theirs["disruptions_by_reason"] == {"Empty": 2}
    assert theirs["final_nodes"] == 0
    assert theirs["cost_usd"] > ours["cost_usd"]


def test_runs_are_deterministic_for_a_seed() -> None:
    scenario = parse_scenario(four_pods(launchLatency={"p50": "20s", "p90": "40s", "min": "5s"}))
    first, second = run(scenario, seed=5), run(scenario, seed=5)
    assert first.summary == second.summary
    assert [s.to_dict() for s in first.timeline] == [s.to_dict() for s in second.timeline]
    other = run(scenario, seed=6)  # other launch latencies drawn
    assert (first.summary["first_node_ready_s"], other.summary["first_node_ready_s"]) == (66.0, 78.0)


def test_spot_interruption_drains_and_replaces_with_two_minute_warning() -> None:
    spot_pool = json.loads(json.dumps(POOL))
    reqs = spot_pool["spec"]["template"]["spec"]["requirements"]
    reqs[0]["values"] = ["spot"]
    spot_pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "10m"}
    doc = four_pods(manifests=[spot_pool, NODECLASS, inflate(2)],
                    events=[{"at": "5m", "interruptSpot": {"count": 1}}])
    result = run(parse_scenario(doc), seed=1)
    summary = result.summary
    # The warning at 300 s drains the node at once (its instance is terminated before the 2 minutes are up) and
    # launches a replacement; the evicted pod lands on the surviving node first (the only zone with a node),
    # so the replacement ends up empty and goes after consolidateAfter (10 min).
    assert summary["disruptions_by_reason"] == {"Empty": 1, "Interrupted": 1}
    assert summary["nodes_launched"] == 3
    # 2 replicas bound, one evicted by the drain, its replacement bound: 3 pods bound in all.
    assert (summary["pods_scheduled"], summary["pods_evicted"], summary["pods_lost_with_node"]) == (3, 1, 0)
    assert summary["unscheduled_pods_at_end"] == 0
    at_warning_end = next(s for s in result.timeline if s.t == 300.0 + 120.0)
    assert at_warning_end.running_pods == 2 and at_warning_end.pending_pods == 0


def test_shipped_team_spread_scenario_matches_the_field_report() -> None:
    """What the scenario's header comment says it does (it said "two nodes" after the re-pack made it four)."""
    scenario = parse_scenario_file(SCENARIOS / "team-spread.yaml")
    instances: list[Any] = []

    def keep(world: Any, driver: Any) -> tuple[Any, Any]:
        instances.append(world.ec2.instances)
        return world, driver

    with patch("nodewright.sim.runner._driver", lambda *a, **k: keep(*real_driver(*a, **k))):
        result = run_scenario(scenario)
    summary = result["summary"]
    # Four t3a.micro, two per zone (the topology re-pack; greedy gave two t3a.xlarge), not one bin-packed node.
    launched = sorted((i.instance_type.name, i.offering.zone) for i in instances[0].values())
    assert launched == [("t3a.micro", "us-east-1a")] * 2 + [("t3a.micro", "us-east-1b")] * 2
    # Emptied at 10m, gone one at a time (the default 10% budget) once consolidateAfter 30s has passed.
    assert sorted(i.terminated_at - scenario.start for i in instances[0].values()) == [647.0, 677.0, 707.0, 737.0]
    assert summary["max_nodes"] == 4
    assert summary["pods_scheduled"] == 4
    assert summary["final_nodes"] == 0
    assert summary["disruptions_by_reason"] == {"Empty": 4}
    peak = max(result["timeline"], key=lambda e: e["nodes"])
    assert peak["nodes_by_pool"] == {"team1": 4}


def parse_scenario_file(path: Path) -> Any:
    from nodewright.sim.scenario import load_scenario

    return load_scenario(path)


def test_cli_scenario_table_json_and_plot(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    import yaml

    scenario.write_text(yaml.safe_dump(four_pods(
        duration="3m", events=[{"at": "1m", "scale": {"deployment": "inflate", "replicas": 4}}])))
    runner = CliRunner()
    (tmp_path / "out").mkdir()  # --plot writes only into an existing directory
    table = runner.invoke(cli, ["simulate", "--scenario", str(scenario), "--baseline", "cluster-autoscaler",
                                "--plot", str(tmp_path / "out" / "p.png")])
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split()[-2:] == ["nodewright", "cluster-autoscaler"]
    assert any(line.startswith("first node Ready at (s)") and line.split()[-2:] == ["91", "180"] for line in lines)
    png = (tmp_path / "out" / "p.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    out = runner.invoke(cli, ["simulate", "--scenario", str(scenario), "--output", "json"])
    assert out.exit_code == 0
    doc = json.loads(out.stdout)
    assert set(doc) >= {"timeline", "summary", "scenario", "seed"}
    assert "baseline" not in doc
    assert doc["timeline"][0] == {"t": 0.0, "pending_pods": 0, "running_pods": 0, "nodes": 0, "ready_nodes": 0,
                                  "nodes_by_pool": {}, "cost_per_hour": 0.0, "cpu_utilization": 0.0}
    assert doc["events"] == [{"t": 60.0, "kind": "scale", "label": "scale inflate -> 4"}]
    assert "wall_seconds" not in doc
    assert len(doc["timeline"]) == 19  # every 10 s from 0 to 180 s
    assert set(doc["summary"]) >= {"pod_schedule_latency_p50_s", "pod_schedule_latency_p95_s",
                                   "pod_schedule_latency_max_s", "max_nodes", "final_nodes", "node_hours",
                                   "cost_usd", "unscheduled_pods_at_end", "disruptions_by_reason"}


def test_cli_rejects_an_invalid_scenario_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    import yaml

    bad.write_text(yaml.safe_dump(four_pods(events=[{"at": "1m", "scale": {"deployment": "nope", "replicas": 1}}])))
    result = CliRunner().invoke(cli, ["simulate", "--scenario", str(bad)])
    assert result.exit_code == 2
    assert "no workload named 'nope'" in result.stderr


@pytest.mark.parametrize("which", ["nodewright", "cluster-autoscaler"])
def test_first_node_times_agree_with_the_timeline(four_pod_result, which: str) -> None:
    run_doc = four_pod_result if which == "nodewright" else four_pod_result["baseline"]
    summary, timeline = run_doc["summary"], run_doc["timeline"]
    # Registered at 75% of the launch latency (30 s ours, 120 s theirs), Ready at 100%.
    expected = {"nodewright": (83.0, 91.0), "cluster-autoscaler": (150.0, 180.0)}[which]
    assert (summary["first_node_registered_s"], summary["first_node_ready_s"]) == expected
    # The first sample showing a node / a Ready node is the first sample at or after those instants.
    first_node = next(e["t"] for e in timeline if e["nodes"] > 0)
    first_ready = next(e["t"] for e in timeline if e["ready_nodes"] > 0)
    assert first_node == next(e["t"] for e in timeline if e["t"] >= summary["first_node_registered_s"])
    assert first_ready == next(e["t"] for e in timeline if e["t"] >= summary["first_node_ready_s"])
    assert all(e["ready_nodes"] <= e["nodes"] for e in timeline)


def test_pods_bound_counts_every_pod_once_including_replacements(four_pod_result) -> None:
    # Cluster Autoscaler's scale-down of an underutilised node evicts its pod; the replacement is bound too.
    spot_free = four_pods(manifests=[POOL, NODECLASS, inflate(2)], events=[])
    theirs = run_scenario(parse_scenario(spot_free), baseline="cluster-autoscaler")["baseline"]["summary"]
    assert (theirs["pods_scheduled"], theirs["pods_evicted"], theirs["disruptions_by_reason"]) == (
        3, 1, {"Underutilized": 1})
    assert four_pod_result["summary"]["pods_evicted"] == 0 and four_pod_result["summary"]["pods_scheduled"] == 4


def test_same_seed_gives_byte_identical_json(tmp_path: Path) -> None:
    import yaml

    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(four_pods(
        duration="4m", events=[{"at": "1m", "scale": {"deployment": "inflate", "replicas": 4}}])))
    args = ["simulate", "--scenario", str(scenario), "--baseline", "cluster-autoscaler", "--output", "json"]
    first, second = CliRunner().invoke(cli, args), CliRunner().invoke(cli, args)
    assert first.exit_code == 0 and second.exit_code == 0
    assert first.stdout == second.stdout
    assert "wall_seconds" not in first.stdout
    assert "simulated 4 min in" in first.stderr  # the real time taken goes to stderr


def test_static_nodepool_keeps_its_replicas_and_hosts_pending_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    """A static NodePool (spec.replicas: 2, Karpenter v1.14; FEATURE_GATES StaticCapacity=true) is launched at the
    start, takes the 4 pods when they appear, launches nothing more for them, and is not consolidated when they go
    (WhenEmpty, 30 s)."""
    monkeypatch.setenv("FEATURE_GATES", "StaticCapacity=true")
    static = json.loads(json.dumps(POOL))
    static["metadata"]["name"] = "fixed"
    static["spec"]["replicas"] = 2
    static["spec"]["limits"] = {"nodes": "3"}
    workload = inflate()
    del workload["spec"]["template"]["spec"]["topologySpreadConstraints"]
    result = run(parse_scenario(four_pods(manifests=[static, NODECLASS, workload])), seed=1)
    summary = result.summary
    assert summary["nodes_launched"] == 2 and summary["max_nodes"] == 2
    assert summary["final_nodes"] == 2  # empty after 600 s, never consolidated
    assert summary["disruptions_by_reason"] == {}
    assert (summary["pods_scheduled"], summary["unscheduled_pods_at_end"]) == (4, 0)
    assert next(s for s in result.timeline if s.t == 100.0).nodes_by_pool == {"fixed": 2}
    # Launched at 0 s, Ready at 30 s (the scenario's launch latency): the pods of 60 s bind at once.
    assert (summary["first_node_ready_s"], summary["pod_schedule_latency_max_s"]) == (30.0, 0.0)
    assert summary["cost_usd"] == pytest.approx(2 * 0.154 * 20 / 60, rel=1e-3)  # two c5a.xlarge for 20 min
