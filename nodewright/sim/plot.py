"""The PNG of ``nodewright simulate --scenario ... --plot FILE``: nodes by pool, pending pods and $/h over time.

Panels sharing the time axis (minutes): nodes per pool (registered Node objects, as ``nodes_by_pool``), pending
pods, cost per hour. nodewright is drawn solid, the baseline dashed, so the two runs read on the same axes. The
scenario's events are thin grey vertical lines across every panel, labelled at the top. A pool whose node count
never exceeds 1 gets a half-height panel. Cost counts an instance from its launch call (booting instances
included, for both runs alike; see ``nodewright.cloud.simulated.ec2``). matplotlib runs headless (``Agg``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import MaxNLocator  # noqa: E402

_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_NODEWRIGHT = "#1f4e9c"
_BASELINE = "#c0392b"


def _series(timeline: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    return [e["t"] / 60.0 for e in timeline], [float(e[key]) for e in timeline]


def _pools(runs: Sequence[tuple[str, Sequence[Mapping[str, Any]]]]) -> list[str]:
    names: set[str] = set()
    for _, timeline in runs:
        for entry in timeline:
            names.update(k for k, v in entry["nodes_by_pool"].items() if v)
    return sorted(names)


def _pool_height(runs: Sequence[tuple[str, Sequence[Mapping[str, Any]], Any]], pool: str) -> float:
    """Relative panel height: half for a pool that only ever has 0 or 1 node."""
    peak = max((e["nodes_by_pool"].get(pool, 0) for _, timeline, _ in runs for e in timeline), default=0)
    return 0.5 if peak <= 1 else 1.0


def _mark_events(events: Sequence[Mapping[str, Any]], axes: Sequence[Any]) -> None:
    """Thin vertical lines at each event (minutes) on every panel; short labels at the top of the first."""
    for i, event in enumerate(events):
        x = float(event["t"]) / 60.0
        for ax in axes:
            ax.axvline(x, color="#888888", linewidth=0.7, linestyle=":", zorder=0)
        # Labels sit just above the top panel, staggered in two rows so close events stay readable.
        axes[0].annotate(str(event.get("label", event.get("kind", ""))), xy=(x, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(2, 2 + 9 * (i % 2)), textcoords="offset points", fontsize=7, color="#555555",
                         annotation_clip=False)


def write_plot(result: Mapping[str, Any], path: str | Path) -> Path:
    """Draw ``result`` (a :func:`nodewright.sim.runner.run_scenario` document) to ``path`` (PNG); returns it.

    Raises:
        OSError: the file cannot be written (the parent directory must exist: none is created).
    """
    out = Path(path)
    runs: list[tuple[str, Sequence[Mapping[str, Any]], Mapping[str, Any]]] = [
        ("nodewright", result["timeline"], result["summary"])]
    if result.get("baseline"):
        base = result["baseline"]
        runs.append((base["autoscaler"], base["timeline"], base["summary"]))
    styles = ["-", "--"]
    colors = (_NODEWRIGHT, _BASELINE)
    pools = _pools([(name, timeline) for name, timeline, _ in runs]) or [""]
    # One nodes panel per pool (up to 4; beyond that one panel with a line per pool and run).
    per_pool = len(pools) <= 4
    node_panels = len(pools) if per_pool else 1
    ratios = [_pool_height(runs, pool) for pool in pools] if per_pool else [1.0]
    fig, axes = plt.subplots(node_panels + 2, 1, figsize=(11, 2.1 * sum(ratios) + 4.9), sharex=True,
                             gridspec_kw={"height_ratios": [*ratios, 1.1, 1.1]})
    node_axes, ax_pending, ax_cost = list(axes[:node_panels]), axes[node_panels], axes[node_panels + 1]
    for i, pool in enumerate(pools):
        ax = node_axes[i] if per_pool else node_axes[0]
        for (name, timeline, _), style, color in zip(runs, styles, colors, strict=False):
            xs = [e["t"] / 60.0 for e in timeline]
            ys = [e["nodes_by_pool"].get(pool, 0) for e in timeline]
            line_color = color if per_pool else _COLORS[i % len(_COLORS)]
            label = name if per_pool else f"{pool or '(no pool)'} - {name}"
            ax.step(xs, ys, where="post", linestyle=style, color=line_color, linewidth=1.8, label=label)
        if per_pool:
            ax.set_ylabel(f"{pool or '(no pool)'}\nnodes")
    for (name, timeline, summary), style, color in zip(runs, styles, colors, strict=False):
        xs, pending = _series(timeline, "pending_pods")
        ax_pending.step(xs, pending, where="post", linestyle=style, color=color, linewidth=1.8,
                        label=f"{name} (p95 wait {summary.get('pod_schedule_latency_p95_s') or 0:.0f}s)")
        xs, cost = _series(timeline, "cost_per_hour")
        ax_cost.step(xs, cost, where="post", linestyle=style, color=color, linewidth=1.8,
                     label=f"{name} (total ${summary.get('cost_usd', 0):.2f}, incl. launching instances)")
    vs = f" vs {runs[1][0]} (dashed)" if len(runs) > 1 else ""
    node_axes[0].set_title(f"{result.get('scenario', 'scenario')}: nodewright (solid){vs} -- nodes by pool, "
                           "pending pods, cost", pad=24 if result.get("events") else 6)
    # The legend goes on the tallest nodes panel, where it hides the least.
    legend_ax = node_axes[ratios.index(max(ratios))] if per_pool else node_axes[0]
    legend_ax.legend(loc="upper right", fontsize=8, frameon=False, ncol=1 if per_pool else 2)
    if not per_pool:
        node_axes[0].set_ylabel("nodes")
    ax_pending.set_ylabel("pending pods")
    ax_pending.legend(loc="upper right", fontsize=8, frameon=False)
    ax_cost.set_ylabel("$ / hour\n(from launch)")
    ax_cost.set_xlabel("simulated time (minutes)")
    ax_cost.legend(loc="upper right", fontsize=8, frameon=False)
    for ax in [*node_axes, ax_pending, ax_cost]:
        ax.grid(True, alpha=0.3)
        ax.set_ylim(0, max(1.0, ax.get_ylim()[1]) * 1.12)  # headroom: a line at the maximum stays visible
    for ax in [*node_axes, ax_pending]:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=4))
    _mark_events(result.get("events") or [], [*node_axes, ax_pending, ax_cost])
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
