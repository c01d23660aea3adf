"""Node repair in scenario replay: ``nodeUnhealthy`` events, the NodeRepair / RebootForRepair gates read from the
environment as ``nodewright run`` reads them, and what the summary says (examples/scenarios/node-repair.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from nodewright.errors import NodewrightValidationError
from nodewright.sim.render import render_table
from nodewright.sim.runner import run_scenario
from nodewright.sim.scenario import load_scenario, parse_scenario

SCENARIO = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "node-repair.yaml"


def _run(monkeypatch: pytest.MonkeyPatch, gates: str = "", aws_gates: str = "",
         events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    monkeypatch.setenv("FEATURE_GATES", gates)
    monkeypatch.setenv("AWS_FEATURE_GATES", aws_gates)
    if events is None:
        return run_scenario(load_scenario(SCENARIO))
    doc = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    doc["spec"]["events"] = events
    return run_scenario(parse_scenario(doc))


def test_the_unhealthy_node_is_replaced_and_the_safety_limit_holds_the_three(monkeypatch) -> None:
    result = _run(monkeypatch, "NodeRepair=true")
    summary = result["summary"]
    assert summary["disruptions_by_reason"] == {"Unhealthy": 1}
    assert (summary["nodes_launched"], summary["final_nodes"], summary["unscheduled_pods_at_end"]) == (11, 10, 0)
    assert len(summary["repair_blocked"]) == 3 and "repair_reboots" not in summary
    text = render_table(result)
    assert "disruptions                                       Unhealthy 1" in text
    assert "node repair blocked (more than 20% of the nodes unhealthy): " in text


def test_gate_off_repairs_nothing(monkeypatch) -> None:
    summary = _run(monkeypatch)["summary"]
    assert summary["disruptions_by_reason"] == {} and summary["nodes_launched"] == 10
    assert "repair_blocked" not in summary and "repair_reboots" not in summary


def test_reboot_for_repair_keeps_a_node_that_recovers_and_replaces_one_that_does_not(monkeypatch) -> None:
    recovers = {"at": "5m", "nodeUnhealthy": {"condition": "Ready", "status": "Unknown", "recoverOnReboot": True}}
    summary = _run(monkeypatch, "NodeRepair=true", "RebootForRepair=true", [recovers])["summary"]
    assert (summary["repair_reboots"], summary["disruptions_by_reason"], summary["nodes_launched"]) == (1, {}, 10)
    stays = {"at": "5m", "nodeUnhealthy": {"condition": "Ready", "status": "Unknown"}}
    summary = _run(monkeypatch, "NodeRepair=true", "RebootForRepair=true", [stays])["summary"]
    # rebooted at 35m, still unhealthy at 65m: replaced
    assert (summary["repair_reboots"], summary["disruptions_by_reason"], summary["nodes_launched"]) == (
        1, {"Unhealthy": 1}, 11)


@pytest.mark.parametrize(("event", "message"), [
    ({"status": False}, "spec.events[0].nodeUnhealthy.status: must be False, Unknown or True, got False (quote it"),
    ({"count": 0}, "spec.events[0].nodeUnhealthy.count"),
    ({"condition": ""}, "spec.events[0].nodeUnhealthy.condition: must be a non-empty string"),
    ({"recoverOnReboot": "yes"}, "spec.events[0].nodeUnhealthy.recoverOnReboot: must be true or false"),
])
def test_bad_node_unhealthy_events_name_the_field(event, message) -> None:
    doc = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    doc["spec"]["events"] = [{"at": "5m", "nodeUnhealthy": event}]
    with pytest.raises(NodewrightValidationError) as err:
        parse_scenario(doc)
    assert str(err.value).startswith(message)
