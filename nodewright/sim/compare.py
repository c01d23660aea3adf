"""``nodewright simulate --scenario FILE --compare-target-utilization 1.0,0.75``: the same scenario, run once per
target utilization, side by side. Also ``--pricing POLICY --compare-pricing``: decided on list prices vs on
effective prices, both billed under the policy (:func:`compare_pricing`).

Each run sets ``nodewright.io/target-utilization`` on *every* NodePool of the scenario to the value (replacing
what the manifests say; ``1``/``100%`` = pack fully, exactly as without the annotation), with the same seed, so
the runs differ only in the packing target. The comparison reports what the field report asked about: churn
(node replacements: NodeClaims consolidation removed or replaced, i.e. disruptions for ``Empty`` and
``Underutilized``; pods evicted), pod wait (schedule latency p95) and dollars, plus nodes launched and
node-hours.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from nodewright.api.annotations import RULES, TARGET_UTILIZATION
from nodewright.errors import NodewrightValidationError
from nodewright.pricing import PricingPolicy
from nodewright.sim.render import targets_text
from nodewright.sim.runner import NODEWRIGHT, Progress, pool_targets, run
from nodewright.sim.scenario import Scenario

OPTION = "--compare-target-utilization"
#: Disruption reasons counted as node replacements (consolidation churn; not interruptions, drift, expiry).
CHURN_REASONS = ("Empty", "Underutilized")


def parse_targets(text: str) -> list[str]:
    """``"1.0,0.75"`` -> ``["1.0", "0.75"]``, each an accepted ``nodewright.io/target-utilization`` value.

    Raises:
        NodewrightValidationError: fewer than one value, or a value the annotation would not accept.
    """
    values = [v.strip() for v in text.split(",")]
    rule = RULES[TARGET_UTILIZATION]
    for value in values:
        if not rule.matches(value):
            raise NodewrightValidationError(OPTION, f'"{value}" is not accepted; want a comma-separated list, each '
                                                    f"{rule.accepted}")
    if len(set(values)) != len(values):
        raise NodewrightValidationError(OPTION, f"{text!r} repeats a value")
    return values


def with_target_utilization(scenario: Scenario, value: str) -> Scenario:
    """A copy of ``scenario`` whose every NodePool carries ``nodewright.io/target-utilization: value``."""
    manifests = []
    for doc in scenario.manifests:
        if doc.get("kind") == "NodePool":
            doc = copy.deepcopy(doc)
            meta = doc.setdefault("metadata", {})
            meta["annotations"] = {**(meta.get("annotations") or {}), TARGET_UTILIZATION: value}
        manifests.append(doc)
    return dataclasses.replace(scenario, manifests=manifests)


def node_replacements(summary: Mapping[str, Any]) -> int:
    """NodeClaims consolidation removed or replaced (:data:`CHURN_REASONS`) in a run summary."""
    by_reason = summary.get("disruptions_by_reason") or {}
    return sum(int(by_reason.get(reason, 0)) for reason in CHURN_REASONS)


def compare_target_utilization(scenario: Scenario, targets: Sequence[str], seed: int | None = None,
                               progress: Progress | None = None) -> dict[str, Any]:
    """Run ``scenario`` once per target utilization (see module docstring).

    Returns:
        ``{"scenario", "seed", "duration_s", "compare": "target-utilization", "runs": [{"target_utilization":
        "0.75", "summary": {...run summary..., "node_replacements": n}}]}``; deterministic for a seed.
    """
    used_seed = scenario.seed if seed is None else seed
    runs = []
    for value in targets:
        result = run(with_target_utilization(scenario, value), NODEWRIGHT, used_seed, progress)
        summary = {**result.summary, "node_replacements": node_replacements(result.summary)}
        runs.append({"target_utilization": value, "summary": summary})
    return {"scenario": scenario.name, "seed": used_seed, "duration_s": scenario.duration,
            "compare": "target-utilization", "scenario_target_utilization": pool_targets(scenario), "runs": runs}


#: (summary key, row label, format) of the comparison table.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("node_replacements", "node replacements (Empty + Underutilized)", "{:d}"),
    ("pods_evicted", "pods evicted", "{:d}"),
    ("pod_schedule_latency_p95_s", "pod wait p95 (s)", "{:.1f}"),
    ("cost_usd", "cost (USD)", "${:.2f}"),
    ("nodes_launched", "nodes launched", "{:d}"),
    ("max_nodes", "max nodes", "{:d}"),
    ("node_hours", "node-hours", "{:.2f}"),
    ("unscheduled_pods_at_end", "unscheduled pods at end", "{:d}"),
)


def render_comparison(doc: Mapping[str, Any]) -> str:
    """The comparison as a text table, one column per target utilization."""
    minutes = float(doc["duration_s"]) / 60
    title = f"scenario {doc['scenario']} ({minutes:g}m, seed {doc['seed']}): target utilization"
    header = [title] + [str(r["target_utilization"]) for r in doc["runs"]]
    table = _table(header, _summary_rows(doc["runs"], ROWS))
    own = doc.get("scenario_target_utilization")
    if own:  # each column sets every NodePool to its value: a plain replay uses the scenario's own targets
        table += (f"\nevery NodePool set to each column's target; the scenario's own (a plain replay): "
                  f"{targets_text(own)}")
    return table


def _summary_rows(runs: Sequence[Mapping[str, Any]], spec: Sequence[tuple[str, str, str]]) -> list[list[str]]:
    """One row per (summary key, label, format) of ``spec``, one cell per run ("-" when the key is missing)."""
    return [[label] + ["-" if r["summary"].get(key) is None else fmt.format(r["summary"][key]) for r in runs]
            for key, label, fmt in spec]


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned first column, right-aligned others, a dashed rule under the header."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


# --- simulate --scenario FILE --pricing POLICY --compare-pricing -------------------------------------------------

PRICING_OPTION = "--compare-pricing"


def compare_pricing(scenario: Scenario, policy: PricingPolicy, policy_name: str, seed: int | None = None,
                    progress: Progress | None = None) -> dict[str, Any]:
    """Run ``scenario`` twice with the same seed: nodewright deciding on list prices, then on effective prices
    under ``policy`` (docs/pricing.md). Both runs are billed under ``policy`` (the account pays its Savings Plans
    and RIs either way), so ``effective_cost_usd`` is what each set of decisions really costs, beside
    ``cost_usd`` at list prices.

    Returns:
        ``{"scenario", "seed", "duration_s", "compare": "pricing", "pricing_policy": policy_name, "runs":
        [{"decided_on": "list" | "effective", "summary": {...run summary..., "effective_cost_usd"},
        "launches": {"<type> <capacity type>": count}}]}``; deterministic for a seed.
    """
    used_seed = scenario.seed if seed is None else seed
    runs = []
    for decided_on, pricing in (("list", None), ("effective", policy)):
        result = run(scenario, NODEWRIGHT, used_seed, progress, pricing, billing=policy)
        runs.append({"decided_on": decided_on, "summary": result.summary, "launches": result.launches})
    return {"scenario": scenario.name, "seed": used_seed, "duration_s": scenario.duration, "compare": "pricing",
            "pricing_policy": policy_name, "runs": runs}


#: (summary key, row label, format) of the pricing comparison table.
PRICING_ROWS: tuple[tuple[str, str, str], ...] = (
    ("cost_usd", "paid at list prices (USD)", "${:.4f}"),
    ("effective_cost_usd", "paid under the policy (USD)", "${:.4f}"),
    ("nodes_launched", "nodes launched", "{:d}"),
    ("node_hours", "node-hours", "{:.2f}"),
    ("pod_schedule_latency_p95_s", "pod wait p95 (s)", "{:.1f}"),
    ("unscheduled_pods_at_end", "unscheduled pods at end", "{:d}"),
)


def render_pricing_comparison(doc: Mapping[str, Any]) -> str:
    """The pricing comparison as a text table: one column per run, the dollars first, then what was launched."""
    minutes = float(doc["duration_s"]) / 60
    title = f"scenario {doc['scenario']} ({minutes:g}m, seed {doc['seed']})"
    header = [title] + [f"decided on {r['decided_on']} prices" for r in doc["runs"]]
    rows = _summary_rows(doc["runs"], PRICING_ROWS)
    offerings = sorted({k for r in doc["runs"] for k in r["launches"]})
    rows += [[f"launched {k}"] + [str(r["launches"].get(k, 0)) for r in doc["runs"]] for k in offerings]
    return f"{_table(header, rows)}\nbilled under {doc['pricing_policy']} (both runs)"


# --- simulate --scenario FILE --compare-nomination (issue 25) ----------------------------------------------------

NOMINATION_OPTION = "--compare-nomination"


#: The runs of ``--compare-nomination``: (nominate_pods, nomination_hold) and the column's title.
NOMINATION_RUNS: tuple[tuple[bool, bool, str], ...] = (
    (True, False, "with nomination"),
    (True, True, "with nomination and the hold"),
    (False, True, "the hold alone"),
    (False, False, "without nomination"),
)


def compare_nomination(scenario: Scenario, seed: int | None = None, progress: Progress | None = None,
                       pricing: PricingPolicy | None = None) -> dict[str, Any]:
    """Run ``scenario`` four times with the same seed (:data:`NOMINATION_RUNS`): nodewright publishing its plan as
    ``status.nominatedNodeName`` (``NOMINATE_PODS=true``), with and without the readiness hold
    (``NOMINATION_HOLD``: the planned pods pinned to their held Node by a toleration), the hold alone, and neither.
    The simulated kube-scheduler (:mod:`nodewright.sim.kubescheduler`) scores nodes as the default profile does and
    tries a nominated node first, so the runs show what each buys: pods placed as planned, pods re-planned, extra
    nodes and their dollars (:mod:`nodewright.sim.plans`).

    Returns:
        ``{"scenario", "seed", "duration_s", "compare": "nomination", "runs": [{"nominate_pods": bool,
        "nomination_hold": bool, "summary": {...run summary...}}]}``; deterministic for a seed.
    """
    used_seed = scenario.seed if seed is None else seed
    runs = []
    for nominate, hold, _ in NOMINATION_RUNS:
        result = run(scenario, NODEWRIGHT, used_seed, progress, pricing, nominate_pods=nominate,
                     nomination_hold=hold)
        runs.append({"nominate_pods": nominate, "nomination_hold": hold, "summary": result.summary})
    return {"scenario": scenario.name, "seed": used_seed, "duration_s": scenario.duration, "compare": "nomination",
            "runs": runs}


#: (summary key, row label, format) of the nomination comparison table.
NOMINATION_ROWS: tuple[tuple[str, str, str], ...] = (
    ("plan_kept", "plan kept", "{}"),
    ("replanned_pods", "pods re-planned", "{:d}"),
    ("extra_nodes", "extra nodes", "{:d}"),
    ("extra_node_cost_usd", "$ over the plan (extra nodes)", "${:.4f}"),
    ("nodes_launched", "nodes launched", "{:d}"),
    ("cost_usd", "cost (USD)", "${:.4f}"),
    ("pod_schedule_latency_p95_s", "pod wait p95 (s)", "{:.1f}"),
    ("unscheduled_pods_at_end", "unscheduled pods at end", "{:d}"),
)


def render_nomination_comparison(doc: Mapping[str, Any]) -> str:
    """The nomination comparison as a text table, one column per run of :data:`NOMINATION_RUNS`."""
    minutes = float(doc["duration_s"]) / 60
    title = f"scenario {doc['scenario']} ({minutes:g}m, seed {doc['seed']})"
    titles = {(nominate, hold): name for nominate, hold, name in NOMINATION_RUNS}
    header = [title] + [titles[(r["nominate_pods"], r.get("nomination_hold", False))] for r in doc["runs"]]
    return _table(header, _summary_rows(doc["runs"], NOMINATION_ROWS))
