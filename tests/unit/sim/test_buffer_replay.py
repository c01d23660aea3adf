"""Scenario replay of a CapacityBuffer (``examples/scenarios/capacity-buffer.yaml``): the gate turns on for a
scenario that declares one, the headroom is held and refilled, and the summary compares the same run without it
(pod wait bought, $/h paid). Exact values: runs are deterministic for a seed."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nodewright.sim.render import render_table
from nodewright.sim.runner import NODEWRIGHT, run, run_scenario
from nodewright.sim.scenario import capacity_buffers, load_scenario

SCENARIO = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "capacity-buffer.yaml"


def test_the_replay_reports_the_pod_wait_the_buffer_buys_and_its_price() -> None:
    scenario = load_scenario(SCENARIO)
    assert capacity_buffers(scenario) == ["default/web-headroom"]
    doc = run_scenario(scenario)
    block = doc["summary"]["capacity_buffer"]
    assert block == {
        "buffers": ["default/web-headroom"],
        "pod_pending_seconds": {"with": 40.022, "without": 326.143, "saved": 286.121},
        "pod_wait_p50_s": {"with": 0.0, "without": 22.011},
        "pod_wait_p95_s": {"with": 20.011, "without": 31.011},
        "cost_per_hour_usd": {"with": 0.775, "without": 0.529, "buffer": 0.246},
    }
    # Every burst after the first node lands in buffered room at once: only the first two pods waited (20 s each,
    # for the first node, t=0, and the 11 ms until its not-ready taint came off).
    assert doc["summary"]["pod_pending_seconds"] == 40.022
    assert doc["summary"]["unscheduled_pods_at_end"] == 0
    assert render_table(doc).splitlines()[-1] == (
        "capacity buffers (default/web-headroom): pods waited 40s in all with them vs 326s without (p95 20.0s vs "
        "31.0s); $0.7750/h vs $0.5290/h (the headroom costs $0.2460/h)")


def test_the_buffer_keeps_its_room_through_consolidation() -> None:
    scenario = load_scenario(SCENARIO)
    quiet = dataclasses.replace(scenario, events=[], duration=20 * 60.0)  # 2 replicas + 4 buffered, for 20 minutes
    held = run(quiet, NODEWRIGHT)
    bare = run(quiet, NODEWRIGHT, capacity_buffer=False)
    # 2 + 4 buffered x 1 vCPU: an m5.2xlarge with the buffer, an m5.xlarge without. Consolidation would replace
    # the m5.2xlarge by the m5.xlarge the two real pods need; the buffer's virtual pods must fit, so it stays.
    # (Without the guard the same 20 minutes launched 19 nodes and disrupted 17: consolidation against refills.)
    assert held.launches == {"m5.2xlarge on-demand": 1} and bare.launches == {"m5.xlarge on-demand": 1}
    assert held.summary["final_nodes"] == 1 and held.summary["disruptions_by_reason"] == {}
    assert (held.summary["cost_usd"], bare.summary["cost_usd"]) == (0.1279, 0.0639)
