"""Scenario replay with a NodeOverlay (gate on): the overlay's price steers the launches, the bill stays the EC2
list price (Karpenter: overlays change decisions, not billing)."""

from __future__ import annotations

import pytest

from nodewright.sim.runner import run_scenario
from nodewright.sim.scenario import parse_scenario

from .test_scenarios import four_pods

#: c5a.xlarge at $1/h in the decisions: one c5a.2xlarge ($0.308/h listed) per zone is cheaper.
OVERLAY = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "c5a-xlarge"},
           "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                      "values": ["c5a.xlarge"]}], "price": "1"}}


def _replay(monkeypatch: pytest.MonkeyPatch, gate: str) -> dict:
    monkeypatch.setenv("FEATURE_GATES", f"NodeOverlay={gate}")
    scenario = four_pods()
    scenario["spec"]["manifests"] = [*scenario["spec"]["manifests"], OVERLAY]
    return run_scenario(parse_scenario(scenario))


def test_overlay_steers_replay_launches_and_billing_stays_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    off = _replay(monkeypatch, "false")
    on = _replay(monkeypatch, "true")
    at = {r["t"]: r for r in on["timeline"]}
    assert next(r for r in off["timeline"] if r["t"] == 100.0)["cost_per_hour"] == pytest.approx(2 * 0.154)
    assert at[100.0]["nodes_by_pool"] == {"team1": 2}
    assert at[100.0]["cost_per_hour"] == pytest.approx(2 * 0.308)  # two c5a.2xlarge, billed at list price
    assert on["summary"]["pods_scheduled"] == 4 and on["summary"]["unscheduled_pods_at_end"] == 0
