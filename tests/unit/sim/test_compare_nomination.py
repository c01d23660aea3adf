"""``simulate --scenario examples/scenarios/team-spread.yaml --compare-nomination`` (issue 25): the same seed with
nomination, with nomination and the readiness hold, with the hold alone, and with neither, through the simulated
kube-scheduler. Exact values of the deterministic simulation."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.sim.compare import NOMINATION_RUNS, compare_nomination, render_nomination_comparison
from nodewright.sim.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "examples" / "scenarios" / "team-spread.yaml"


@pytest.fixture(scope="module")
def doc() -> dict:
    return compare_nomination(load_scenario(str(SCENARIO)))


def test_the_hold_keeps_the_plan_with_or_without_nomination(doc) -> None:
    runs = {(r["nominate_pods"], r["nomination_hold"]): r["summary"] for r in doc["runs"]}
    assert list(runs) == [(nominate, hold) for nominate, hold, _ in NOMINATION_RUNS]
    kept = {key: (s["plan_kept"], s["replanned_pods"]) for key, s in runs.items()}
    assert kept == {(True, False): ("4 of 4 pods", 0), (True, True): ("4 of 4 pods", 0),
                    (False, True): ("4 of 4 pods", 0), (False, False): ("2 of 4 pods", 1)}
    # The same instances and bill: the hold only decides where kube-scheduler may put the planned pods.
    assert {s["cost_usd"] for s in runs.values()} == {0.0066}
    assert {s["nodes_launched"] for s in runs.values()} == {4}


def test_the_table_has_a_column_per_run(doc) -> None:
    header = render_nomination_comparison(doc).splitlines()[0]
    positions = [header.index(name) for _, _, name in NOMINATION_RUNS]
    assert positions == sorted(positions)


def test_the_cli_prints_the_comparison() -> None:
    result = CliRunner().invoke(cli, ["simulate", "--scenario", str(SCENARIO), "--compare-nomination"])
    assert result.exit_code == 0, result.output
    assert "with nomination and the hold" in result.output and "the hold alone" in result.output
