"""Target utilization in the CLI: warnings on malformed annotations (simulate, convert), the setting in simulate's
output, and the measured comparison of 1.0 vs 0.75 on the field reports' scenarios (real numbers of the run)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.errors import NodewrightValidationError
from nodewright.sim.compare import compare_target_utilization, parse_targets, render_comparison
from nodewright.sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "examples" / "scenarios"
POOLS = SCENARIOS / "manifests" / "priority-pools.yaml"
WANT = 'want a number in (0, 1] like "0.8", or a percentage in (0%, 100%] like "80%"'
FALLBACK = "using the default for that annotation (target-utilization: pack fully), as the controller would"

SERVICE_PODS = """apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 3
  template:
    spec:
      nodeSelector: {priority: service}
      tolerations: [{key: nodewright.io/priority, operator: Equal, value: service, effect: NoSchedule}]
      containers: [{name: c, resources: {requests: {cpu: "1", memory: 2Gi}}}]
"""


def _pools_with(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(POOLS.read_text().replace('nodewright.io/target-utilization: "0.8"',
                                              f'nodewright.io/target-utilization: "{value}"'))
    return path


def test_simulate_shows_the_target_per_nodeclaim_and_pool(tmp_path: Path) -> None:
    (tmp_path / "api.yaml").write_text(SERVICE_PODS)
    out = CliRunner().invoke(cli, ["simulate", "-f", str(POOLS), "-f", str(tmp_path / "api.yaml"), "-o", "json"])
    assert out.exit_code == 0, out.output
    decision = json.loads(out.stdout)
    assert decision["target_utilization"] == {"low-spot": 1.0, "platform": 1.0, "service": 0.8}
    assert [(nc["nodepool"], nc["target_utilization"], nc["instance_type"]) for nc in decision["nodeclaims"]] == [
        ("service", 0.8, "m7g.xlarge")]
    table = CliRunner().invoke(cli, ["simulate", "-f", str(POOLS), "-f", str(tmp_path / "api.yaml")]).stdout
    assert table.splitlines()[1].split()[:3] == ["service", "80%", "m7g.xlarge"]
    assert "target utilization per NodePool: low-spot 100%, platform 100%, service 80%" in table


@pytest.mark.parametrize("value", ["0", "1.5", "abc", "", "120%"])
def test_simulate_warns_once_and_packs_fully(tmp_path: Path, value: str) -> None:
    (tmp_path / "api.yaml").write_text(SERVICE_PODS)
    pools = _pools_with(tmp_path, value)
    out = CliRunner().invoke(cli, ["simulate", "-f", str(pools), "-f", str(tmp_path / "api.yaml"), "-o", "json"])
    assert out.exit_code == 0, out.output
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f'warning: {pools}#documents[5]: NodePool service: metadata.annotations'
                        f'[nodewright.io/target-utilization]: "{value}" is not accepted; {WANT}; {FALLBACK}']
    decision = json.loads(out.stdout)
    assert decision["target_utilization"]["service"] == 1.0
    # Full packing: 3 x (1 vCPU, 2Gi) fit a c7g.xlarge; at 0.8 (above) memory needs an m7g.xlarge.
    assert [nc["instance_type"] for nc in decision["nodeclaims"]] == ["c7g.xlarge"]


def test_convert_warns_on_the_same_input(tmp_path: Path) -> None:
    pools = _pools_with(tmp_path, "abc")
    out = CliRunner().invoke(cli, ["convert", "-f", str(pools)])
    assert out.exit_code == 0, out.output
    assert out.stderr.splitlines() == [
        f'warning: {pools}#documents[5]: NodePool service: metadata.annotations[nodewright.io/target-utilization]: '
        f'"abc" is not accepted; {WANT}; {FALLBACK}']
    assert 'nodewright.io/target-utilization: abc' in out.stdout  # passed through unchanged


def test_compare_option_errors_are_one_line() -> None:
    with pytest.raises(NodewrightValidationError, match='"1.5" is not accepted'):
        parse_targets("1.0,1.5")
    assert parse_targets("1.0, 75%") == ["1.0", "75%"]
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(SCENARIOS / "load-test.yaml"),
                                   "--compare-target-utilization", "1.0,0.75", "--baseline", "cluster-autoscaler"])
    assert out.exit_code == 2
    assert out.stderr.strip() == "error: --compare-target-utilization: cannot be combined with --baseline, --plot or --pricing"


def _headline(doc: dict) -> dict[str, tuple]:
    keys = ("node_replacements", "pods_evicted", "pod_schedule_latency_p95_s", "cost_usd", "nodes_launched",
            "max_nodes", "node_hours", "disruptions_by_reason")
    return {run["target_utilization"]: tuple(run["summary"][k] for k in keys) for run in doc["runs"]}


def _readme_rows(scenario: str) -> dict[str, tuple]:
    """README's target-utilization table for ``scenario``: target -> (replacements, evicted, p95, cost, launched,
    node-hours) as printed."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(rf"^\| {re.escape(scenario)} \([^)]*\) \| ([\d.]+) \| (.*) \|$", readme, re.M)
    return {target: tuple(cell.strip() for cell in cells.split("|")) for target, cells in rows}


def _as_printed(doc: dict) -> dict[str, tuple]:
    """The measured headline as README's table prints it (issue #26 item 10: the table went stale)."""
    out = {}
    for target, (repl, evicted, p95, cost, launched, _max, hours, _reasons) in _headline(doc).items():
        out[target] = (str(repl), str(evicted), f"{p95:.1f} s", f"${cost:.2f}", str(launched), f"{hours:.2f}")
    return out


def test_load_test_scenario_1_0_vs_0_75() -> None:
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(SCENARIOS / "load-test.yaml"),
                                   "--compare-target-utilization", "1.0,0.75", "-o", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert (doc["scenario"], doc["seed"], doc["compare"]) == ("load-test", 7, "target-utilization")
    assert _headline(doc) == {
        # kube-scheduler modelled with its default scoring and nomination (issue 25).
        "1.0": (6, 3, 57.011, 0.7603, 10, 9, 5.8225, {"Empty": 4, "Interrupted": 1, "Underutilized": 2}),
        "0.75": (5, 0, 57.011, 0.7494, 9, 8, 5.4008, {"Empty": 5, "Interrupted": 1}),
    }
    assert render_comparison(doc).splitlines()[:6] == [
        "scenario load-test (50m, seed 7): target utilization    1.0   0.75",
        "----------------------------------------------------  -----  -----",
        "node replacements (Empty + Underutilized)                 6      5",
        "pods evicted                                              3      0",
        "pod wait p95 (s)                                       57.0   57.0",
        "cost (USD)                                            $0.76  $0.75",
    ]
    assert _readme_rows("load-test") == _as_printed(doc)


def test_priority_pools_scenario_1_0_vs_0_75() -> None:
    doc = compare_target_utilization(load_scenario(SCENARIOS / "priority-pools.yaml"), ["1.0", "0.75"])
    assert _headline(doc) == {
        # The controller's defaults: nomination and the readiness hold (issue 25).
        "1.0": (9, 7, 22.663, 3.6188, 18, 13, 31.8646, {"Empty": 5, "Interrupted": 1, "Underutilized": 4}),
        "0.75": (6, 3, 23.215, 4.1048, 16, 16, 38.658, {"Empty": 6, "Interrupted": 1}),
    }
    assert _readme_rows("priority-pools") == _as_printed(doc)


def test_make_demo_runs_the_comparison_on_both_scenarios() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo", ROOT / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    compared = [argv[argv.index("--scenario") + 1] for _, argv in demo.steps()
                if "--compare-target-utilization" in argv]
    assert compared == ["examples/scenarios/load-test.yaml", "examples/scenarios/priority-pools.yaml"]


def test_scenario_manifests_are_warned_about_too(tmp_path: Path) -> None:
    (tmp_path / "manifests").mkdir()
    _pools_with(tmp_path / "manifests", "0")
    (tmp_path / "manifests" / "pools.yaml").rename(tmp_path / "manifests" / "priority-pools.yaml")
    scenario = (SCENARIOS / "load-test.yaml").read_text().split("  events:")[0].replace("duration: 50m", "duration: 1m")
    (tmp_path / "s.yaml").write_text(scenario)
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(tmp_path / "s.yaml")])
    assert out.exit_code == 0, out.output
    assert [line for line in out.stderr.splitlines() if line.startswith("warning:")] == [
        f'warning: {tmp_path / "s.yaml"}: spec.manifests documents[5]: NodePool service: metadata.annotations'
        f'[nodewright.io/target-utilization]: "0" is not accepted; {WANT}; {FALLBACK}']
