"""Text rendering of a scenario run: the side-by-side summary table of ``nodewright simulate --scenario``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: (summary key, row label, format) in display order.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("pod_schedule_latency_p50_s", "pod schedule latency p50 (s)", "{:.1f}"),
    ("pod_schedule_latency_p95_s", "pod schedule latency p95 (s)", "{:.1f}"),
    ("pod_schedule_latency_max_s", "pod schedule latency max (s)", "{:.1f}"),
    ("first_node_registered_s", "first node registered at (s)", "{:.0f}"),
    ("first_node_ready_s", "first node Ready at (s)", "{:.0f}"),
    ("pods_scheduled", "pods bound (all, incl. Job pods, replacements)", "{:d}"),
    ("pods_evicted", "pods evicted (drain, scale-down)", "{:d}"),
    ("pods_lost_with_node", "pods lost with their node (no drain)", "{:d}"),
    ("max_nodes", "max nodes", "{:d}"),
    ("final_nodes", "final nodes", "{:d}"),
    ("nodes_launched", "nodes launched", "{:d}"),
    ("node_hours", "node-hours", "{:.2f}"),
    ("cost_usd", "cost (USD)", "${:.2f}"),
    ("unscheduled_pods_at_end", "unscheduled pods at end", "{:d}"),
    ("disruptions_by_reason", "disruptions", ""),
    # Did kube-scheduler follow the plan (nodewright only; sim/plans.py, issue 25)?
    ("plan_kept", "plan kept", ""),
    ("extra_nodes", "extra nodes (for re-planned pods)", "{:d}"),
    ("extra_node_cost_usd", "$ over the plan (extra nodes)", "${:.2f}"),
)

#: Rows shown only when the run had a PricingPolicy (``simulate --scenario --pricing``).
PRICING_ROWS: tuple[tuple[str, str, str], ...] = (
    ("effective_cost_usd", "effective cost (USD, PricingPolicy)", "${:.2f}"),
)


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    return fmt.format(value) if fmt else str(value)


def _minutes(seconds: float) -> str:
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    return f"{seconds / 60:g}m"


def targets_text(targets: Mapping[str, float]) -> str:
    """``{"low-spot": 1.0, "service": 0.8}`` -> ``"low-spot 100%, service 80%"``."""
    return ", ".join(f"{name} {value * 100:g}%" for name, value in targets.items())


def render_table(result: Mapping[str, Any]) -> str:
    """The summary of ``result`` (a :func:`nodewright.sim.runner.run_scenario` document) as a text table,
    nodewright and the baseline side by side, with the saving when a baseline ran."""
    columns = [("nodewright", result["summary"])]
    baseline = result.get("baseline")
    if baseline:
        columns.append((baseline["autoscaler"], baseline["summary"]))
    title = f"scenario {result['scenario']} ({_minutes(float(result['duration_s']))} simulated, seed {result['seed']})"
    shown = [extra for row in ROWS for extra in (row, *(PRICING_ROWS if row[0] == "cost_usd" else ()))
             if extra in ROWS or extra[0] in result["summary"]]
    rows = [[label] + [_cell(summary.get(key), fmt) for _, summary in columns] for key, label, fmt in shown]
    header = [title] + [name for name, _ in columns]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True)))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    if result.get("target_utilization"):
        lines.append(f"target utilization per NodePool: {targets_text(result['target_utilization'])}")
    for node, reason in (result["summary"].get("disruptions_blocked") or {}).items():
        lines.append(f"disruption blocked: node {node}: {reason}")
    if result["summary"].get("repair_reboots"):
        lines.append(f"node repair: rebooted {result['summary']['repair_reboots']} instance(s) (RebootForRepair)")
    if result["summary"].get("repair_blocked"):
        lines.append(f"node repair blocked (more than 20% of the nodes unhealthy): "
                     f"{', '.join(result['summary']['repair_blocked'])}")
    buffer = result["summary"].get("capacity_buffer")
    if buffer:
        lines.append(buffer_line(buffer))
    if baseline:
        ours, theirs = result["summary"], baseline["summary"]
        if theirs.get("cost_usd"):
            saving = 1 - ours["cost_usd"] / theirs["cost_usd"]
            lines.append(f"cost: nodewright ${ours['cost_usd']:.2f} vs {baseline['autoscaler']} "
                         f"${theirs['cost_usd']:.2f} ({abs(saving):.0%} {'less' if saving >= 0 else 'more'})")
        if ours.get("first_node_ready_s") is not None and theirs.get("first_node_ready_s") is not None:
            lines.append(f"first node Ready: {ours['first_node_ready_s']:.0f}s vs {theirs['first_node_ready_s']:.0f}s")
    return "\n".join(lines)


def buffer_line(block: Mapping[str, Any]) -> str:
    """The ``capacity_buffer`` summary block (:func:`nodewright.sim.runner.buffer_report`) as one line."""
    pending, rate = block["pod_pending_seconds"], block["cost_per_hour_usd"]
    p95 = block["pod_wait_p95_s"]
    return (f"capacity buffers ({', '.join(block['buffers'])}): pods waited {pending['with']:.0f}s in all with them "
            f"vs {pending['without']:.0f}s without (p95 {_cell(p95['with'], '{:.1f}')}s vs "
            f"{_cell(p95['without'], '{:.1f}')}s); ${rate['with']:.4f}/h vs ${rate['without']:.4f}/h "
            f"(the headroom costs ${rate['buffer']:.4f}/h)")
