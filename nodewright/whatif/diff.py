"""``nodewright diff --base DIR --head DIR``: what a change to NodePools/EC2NodeClasses does, before it merges.

Each revision's NodePools and EC2NodeClasses (every ``*.yaml``/``*.yml``/``*.json`` under DIR, any Karpenter version,
converted to v1 by :mod:`nodewright.api`; other kinds are ignored) replace the snapshot's: **all** NodePools (a
GitOps repository holds every pool), and the EC2NodeClasses of the same names (classes the directory lacks stay
as snapshotted). A replaced object keeps the snapshot's ``status`` (resolved AMIs/subnets, Ready), as it would
right after ``kubectl apply``. Then, per revision, on the same snapshot:

- **drift**: the disruption controller's view of the revision (:func:`nodewright.disruption.drift_reason`:
  requirements no longer met, stamped hashes) plus, because Karpenter compares its *own* stamped hashes, every node
  of a NodePool whose hash (:func:`nodewright.api.hashing.nodepool_hash`) changes between base and head
  (``NodePoolDrifted``) and of an EC2NodeClass whose hash changes (``NodeClassDrift``) or whose
  ``amiSelectorTerms`` change (``AMIDrift``: a new AMI, resolved only in the cluster); nodes whose NodePool is gone
  are deleted with it (Karpenter's NodePool deletion cascades to its NodeClaims). "Triggered" = drifted under head
  and not under base;
- **steady state**: those nodes leave (deleting, so the provisioner places their pods again, as Karpenter launches
  replacements while they drain) and :func:`nodewright.sim.decision.first_batch` runs the provisioner over the
  pending pods and theirs: the fleet is the nodes kept plus the NodeClaims launched. $/h list (and effective, with
  ``--pricing``: the fleet's bill under the PricingPolicy), nodes, instance types, pods left pending;
- **blockers**: a drifted node with a pod under a PodDisruptionBudget allowing no disruption, or with
  ``karpenter.sh/do-not-disrupt``, waits (Karpenter's drift candidates skip it) -- counted as replaced (it is, once
  the blocker clears) and shown with what it waits for;
- **pace**: drifted nodes are replaced at most as many at a time as each NodePool's ``Drifted`` budget allows now
  (:func:`nodewright.disruption.budgets.budget_mapping`), so ``ceil(nodes / allowed)`` rounds.

With ``--scenario`` instead of ``--snapshot``, the scenario is replayed twice (its NodePools/EC2NodeClasses
replaced the same way): $/h is the run's cost per simulated hour, plus evictions per day and pod wait (p50/p95).

Gates (:func:`check_gates`): ``--max-cost-increase 5%`` (head $/h over base $/h, list prices, or effective with
``--pricing``) and ``--max-evictions N`` (pods evicted by the drift the change triggers).

Honesty: a ``--base`` that is not what the snapshot runs is one warning line (:func:`base_mismatch`, also the
JSON's ``warnings``); a NodePool that cannot launch is named once per revision below the table (``not_ready``,
:func:`nodewright.whatif.dryrun.launch_batch`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from nodewright.api.hashing import ec2nodeclass_hash, nodepool_hash
from nodewright.api.manifests import load_manifest_files, parse_documents
from nodewright.cloud.catalog import price_table
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.termination import Terminator
from nodewright.disruption import drift_reason
from nodewright.disruption.budgets import UNLIMITED, budget_mapping
from nodewright.disruption.candidates import base_problem
from nodewright.disruption.model import REASON_DRIFTED
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import Obj, meta, name_of
from nodewright.pricing import PricingEngine, PricingPolicy, Usage
from nodewright.review import review_documents
from nodewright.sim.decision import not_ready_lines
from nodewright.state.cluster import snapshot as read_state
from nodewright.whatif.dryrun import launch_batch, restore
from nodewright.whatif.render import table
from nodewright.whatif.snapshot import KIND_OF, Snapshot, now_utc, read_snapshot

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
log = logging.getLogger("nodewright.whatif")


@dataclasses.dataclass(frozen=True)
class Revision:
    """One directory's NodePools and EC2NodeClasses (v1 manifests) by name."""

    path: str
    nodepools: dict[str, Obj]
    nodeclasses: dict[str, Obj]


def load_revision(directory: str) -> Revision:
    """Every NodePool/EC2NodeClass (any Karpenter version, converted to v1) in the manifest files under
    ``directory`` (recursive, sorted).

    Raises:
        NodewrightValidationError: unreadable files, bad YAML, invalid Karpenter fields (``file#documents[j]...``),
            no manifest file at all.
    """
    root = Path(directory)
    files = sorted(str(p) for p in root.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    if not files:
        raise NodewrightValidationError(directory, "no *.yaml, *.yml or *.json manifest files")
    loaded = load_manifest_files(files)
    try:
        objects = parse_documents(loaded.docs)
    except NodewrightValidationError as err:
        raise loaded.locate(err) from None
    return Revision(directory, {p.name: p.to_manifest() for p in objects.nodepools},
                    {c.name: c.to_manifest() for c in objects.ec2nodeclasses})


def apply_revision(objects: Sequence[Obj], revision: Revision) -> list[Obj]:
    """The snapshot's objects with ``revision``'s NodePools (all) and EC2NodeClasses (same names) in place; a
    replaced object keeps the snapshot's ``status`` and ``metadata`` server fields (see module docstring)."""
    live = {(o.get("kind"), name_of(o)): o for o in objects if o.get("kind") in ("NodePool", "EC2NodeClass")}
    out = [o for o in objects if o.get("kind") != "NodePool"
           and not (o.get("kind") == "EC2NodeClass" and name_of(o) in revision.nodeclasses)]
    for kind, docs in (("NodePool", revision.nodepools), ("EC2NodeClass", revision.nodeclasses)):
        for name, doc in docs.items():
            before = live.get((kind, name))
            merged = dict(doc)
            if before is not None:
                m = meta(before)
                merged["metadata"] = {**{k: m[k] for k in ("uid", "creationTimestamp", "finalizers") if k in m},
                                      **meta(doc)}
                if "status" in before:
                    merged["status"] = before["status"]
            out.append(merged)
    return out


def base_mismatch(base: Revision, snap: Snapshot) -> str | None:
    """One sentence when ``--base`` is not what the snapshotted cluster runs, else None. ``--base`` is the revision
    the cluster is meant to run: it replaces the snapshot's NodePools (all) and same-named EC2NodeClasses, so that
    the BASE column is the cluster as it is and "triggered" is what head adds. It matches when it has the
    snapshot's NodePools, no NodePool or EC2NodeClass the snapshot lacks, and each same-named object's ``spec``
    equals the snapshot's, both read through the same model (defaults filled, so a server-defaulted field is no
    difference). The sentence names what differs: NodePools only in the snapshot (their nodes are deleted in both
    columns), only in ``--base``, objects whose spec differs (the first differing fields), or -- no NodePool name
    in common -- a snapshot of another cluster, or a redacted one (``--redact`` hashes the names)."""
    live = parse_documents([o for o in snap.objects if o.get("kind") in ("NodePool", "EC2NodeClass")])
    pools = {p.name: p.to_manifest().get("spec") or {} for p in live.nodepools}
    classes = {c.name: c.to_manifest().get("spec") or {} for c in live.ec2nodeclasses}
    parts: list[str] = []
    if pools and base.nodepools and not set(pools) & set(base.nodepools):
        parts.append(f"it shares no NodePool with the snapshot (snapshot: {', '.join(sorted(pools))}; --base: "
                     f"{', '.join(sorted(base.nodepools))}): "
                     + ("the snapshot is redacted (--redact hashes names), take one without --redact for diff"
                        if snap.redacted else "is the snapshot of another cluster?"))
    else:
        if set(pools) - set(base.nodepools):
            parts.append(f"NodePools only in the snapshot: {', '.join(sorted(set(pools) - set(base.nodepools)))} "
                         "(their nodes are deleted in both columns)")
        if set(base.nodepools) - set(pools):
            parts.append(f"NodePools only in --base: {', '.join(sorted(set(base.nodepools) - set(pools)))}")
        parts.extend(_differ("NodePools", pools, base.nodepools))
    if set(base.nodeclasses) - set(classes):
        parts.append(f"EC2NodeClasses only in --base: {', '.join(sorted(set(base.nodeclasses) - set(classes)))}")
    parts.extend(_differ("EC2NodeClasses", classes, base.nodeclasses))
    if not parts:
        return None
    return (f"--base {base.path} does not match the snapshot {snap.source}: {'; '.join(parts)}; so the BASE column "
            "is not the cluster as it runs, and what is 'triggered' is counted from it")


def _differ(kind: str, live: Mapping[str, Any], revision: Mapping[str, Obj]) -> list[str]:
    """``["<kind> not as in the snapshot: general (spec.limits, ...)"]`` for the same-named objects whose spec
    differs, or []."""
    changed = []
    for name in sorted(set(live) & set(revision)):
        paths = _paths(live[name], revision[name].get("spec") or {}, "spec")
        if paths:
            changed.append(f"{name} ({', '.join(paths[:3])}{', ...' if len(paths) > 3 else ''})")
    return [f"{kind} not as in the snapshot: {', '.join(changed)}"] if changed else []


def _paths(a: Any, b: Any, path: str, depth: int = 4) -> list[str]:
    """The paths where ``a`` and ``b`` differ (mappings walked ``depth`` levels deep; lists compared whole)."""
    if a == b:
        return []
    if not (isinstance(a, dict) and isinstance(b, dict)) or depth == 0:
        return [path]
    return [p for key in sorted(set(a) | set(b)) for p in _paths(a.get(key), b.get(key), f"{path}.{key}", depth - 1)]


def _hash_changes(base: Revision, head: Revision) -> tuple[dict[str, str], dict[str, str]]:
    """(NodePool -> drift reason, EC2NodeClass -> drift reason) for objects in both revisions that changed."""
    def safe(fn: Any, doc: Obj) -> str:
        try:
            return str(fn(doc))
        except NodewrightValidationError:
            return ""

    pools = {n: "NodePoolDrifted" for n, doc in head.nodepools.items()
             if n in base.nodepools and safe(nodepool_hash, doc) != safe(nodepool_hash, base.nodepools[n])}
    classes: dict[str, str] = {}
    for n, doc in head.nodeclasses.items():
        old = base.nodeclasses.get(n)
        if old is None:
            continue
        if (doc.get("spec") or {}).get("amiSelectorTerms") != (old.get("spec") or {}).get("amiSelectorTerms"):
            classes[n] = "AMIDrift"
        elif safe(ec2nodeclass_hash, doc) != safe(ec2nodeclass_hash, old):
            classes[n] = "NodeClassDrift"
    return pools, classes


def evaluate(objects: Sequence[Obj], now: float, region: str | None, policy: PricingPolicy | None,
             extra_drift: Mapping[str, Mapping[str, str]] | None = None,
             source: str = "the snapshot") -> dict[str, Any]:
    """One revision on one snapshot: drift per node, then the steady state (see module docstring).

    ``extra_drift``: ``{"nodepools": {name: reason}, "nodeclasses": {name: reason}}`` hash changes found by
    comparing the revisions. ``not_ready`` in the result: NodePool -> why it cannot launch
    (:func:`nodewright.whatif.dryrun.launch_batch`, as ``simulate --snapshot`` names them: once, ``source`` saying
    where its EC2NodeClass was looked for).
    """
    loaded = restore(objects, now, region)
    ctx = loaded.ctx
    state = read_state(loaded.cluster)
    view = DisruptionController(ctx, Terminator(ctx)).view(state, now)
    extra = extra_drift or {}
    pools_changed, classes_changed = extra.get("nodepools", {}), extra.get("nodeclasses", {})
    drifted: dict[str, dict[str, Any]] = {}
    for node in view.nodes:
        if node.deleting:
            continue
        if node.nodepool not in state.nodepools:
            why: str | None = "NodePool removed"
        else:
            why = (drift_reason(node, view) or pools_changed.get(node.nodepool)
                   or classes_changed.get(node.nodeclass))
        if why is not None:
            blocker = (base_problem(node, view.pools, view.pdbs, REASON_DRIFTED)
                       if node.nodepool in view.pools else None)
            drifted[node.name] = {"nodepool": node.nodepool, "reason": why, "pods": sorted(p.key for p in node.pods),
                                  "price": node.price, "waits_for": blocker}
    allowed = budget_mapping(view.pools, view.nodes, REASON_DRIFTED, now)
    kept_usage = [Usage.from_labels(n.labels) for n in view.nodes if n.name not in drifted and not n.deleting]
    kept = [n for n in view.nodes if n.name not in drifted and not n.deleting]
    kept_unmanaged = view.unmanaged
    for name in drifted:
        doc = loaded.cluster.get(KIND_OF["Node"], name)
        if doc is not None:
            if not meta(doc).get("finalizers"):
                loaded.cluster.patch(KIND_OF["Node"], name, {"metadata": {"finalizers": ["whatif.nodewright.io/hold"]}})
            loaded.cluster.delete(KIND_OF["Node"], name)
    result, not_ready = launch_batch(loaded, policy, source)
    types: dict[str, int] = {}
    for n in kept:
        types[n.instance_type] = types.get(n.instance_type, 0) + 1
    for plan in result.new_nodeclaims:
        types[plan.instance_type.name] = types.get(plan.instance_type.name, 0) + 1
    # A kept node whose type the head's NodePool no longer allows (a narrowed requirement that does not drift it,
    # e.g. a label the node lacks) has no price in the head's view; it still bills its list price.
    lister = PricingEngine(PricingPolicy.model_validate({"apiVersion": "nodewright.io/v1alpha1", "kind": "PricingPolicy"}),
                           price_table(loaded.region))
    price = sum(n.price or _list_price(lister, n.labels) for n in kept) + sum(p.price for p in result.new_nodeclaims)
    out: dict[str, Any] = {
        "price_per_hour": round(price, 6),
        "nodes": len(kept) + len(result.new_nodeclaims) + len(kept_unmanaged),
        "instance_types": dict(sorted(types.items())),
        "pending_pods": sorted(result.unschedulable),
        "new_nodeclaims": len(result.new_nodeclaims),
        "drifted": drifted,
        "drift_budget": {name: (None if n >= UNLIMITED else n) for name, n in sorted(allowed.items())},
        "not_ready": not_ready,
    }
    if policy is not None:
        engine = PricingEngine(policy, price_table(loaded.region))
        fleet = [u for u in kept_usage if u is not None]
        fleet += [Usage(p.instance_type.name, p.zone, p.capacity_type) for p in result.new_nodeclaims]
        out["effective_price_per_hour"] = round(engine.bill(fleet).total_usd_per_hour, 6)
    return out


def _list_price(engine: PricingEngine, labels: Mapping[str, str]) -> float:
    """List USD/hour of a node from its labels (type, zone, capacity type); 0 when unknown."""
    usage = Usage.from_labels(labels)
    return (engine.list_price(usage) or 0.0) if usage is not None else 0.0


def _pace(drifted: Mapping[str, Mapping[str, Any]], budget: Mapping[str, int | None],
          not_ready: Collection[str] = ()) -> tuple[int, str]:
    """(rounds, sentence): replacing ``drifted`` nodes under each NodePool's Drifted budget; a NodePool of
    ``not_ready`` (it cannot launch) has no budget, but is not deleted either."""
    per_pool: dict[str, int] = {}
    for entry in drifted.values():
        per_pool[entry["nodepool"]] = per_pool.get(entry["nodepool"], 0) + 1
    rounds, parts = 0, []
    for pool, count in sorted(per_pool.items()):
        allowed = budget.get(pool)
        if pool in not_ready and pool not in budget:
            parts.append(f"{pool}: {count} with no replacement (the NodePool cannot launch)")
            continue
        if pool not in budget:
            parts.append(f"{pool}: {count} deleted with the NodePool")
            continue
        if allowed == 0:
            parts.append(f"{pool}: {count} blocked now (Drifted budget 0)")
            continue
        n = 1 if allowed is None else math.ceil(count / allowed)
        rounds = max(rounds, n)
        parts.append(f"{pool}: {count} at most {'all' if allowed is None else allowed} at a time ({n} round(s))")
    return rounds, "; ".join(parts)


def diff(base: str, head: str, *, snapshot: str | None = None, scenario: str | None = None,
         region: str | None = None, pricing: tuple[PricingPolicy, str] | None = None) -> dict[str, Any]:
    """Both revisions evaluated (see module docstring): ``{"base": {...}, "head": {...}, "change": {...}}``.

    Raises:
        NodewrightValidationError: neither or both of ``snapshot``/``scenario``; invalid manifests or snapshot.
    """
    if (snapshot is None) == (scenario is None):
        raise NodewrightValidationError("--snapshot", "give exactly one of --snapshot FILE or --scenario FILE")
    base_rev, head_rev = load_revision(base), load_revision(head)
    policy = pricing[0] if pricing else None
    if scenario is not None:
        return _diff_scenario(scenario, base_rev, head_rev, policy)
    assert snapshot is not None
    snap = read_snapshot(snapshot)
    for finding in snap.findings:  # fields the simulation ignores, as simulate --snapshot warns
        log.warning("%s", finding.line())
    mismatch = base_mismatch(base_rev, snap)
    if mismatch is not None:
        log.warning("warning: %s", mismatch)
    now = snap.time if snap.time is not None else now_utc()
    pools, classes = _hash_changes(base_rev, head_rev)
    before = evaluate(apply_revision(snap.objects, base_rev), now, region, policy,
                      source=f"the snapshot or {base}")
    after = evaluate(apply_revision(snap.objects, head_rev), now, region, policy,
                     {"nodepools": pools, "nodeclasses": classes}, source=f"the snapshot or {head}")
    triggered = {n: e for n, e in after["drifted"].items() if n not in before["drifted"]}
    rounds, pace = _pace(triggered, after["drift_budget"], after["not_ready"])
    change: dict[str, Any] = {
        "price_per_hour": round(after["price_per_hour"] - before["price_per_hour"], 6),
        "price_percent": _percent(before["price_per_hour"], after["price_per_hour"]),
        "nodes": after["nodes"] - before["nodes"],
        "pending_pods": len(after["pending_pods"]) - len(before["pending_pods"]),
        "nodes_replaced": len(triggered),
        "nodes_waiting": sum(1 for e in triggered.values() if e["waits_for"]),
        "pods_evicted": sum(len(e["pods"]) for e in triggered.values()),
        "drift_reasons": dict(sorted(_count(e["reason"] for e in triggered.values()).items())),
        "rounds": rounds,
        "pace": pace,
    }
    if policy is not None:
        change["effective_price_per_hour"] = round(after["effective_price_per_hour"]
                                                   - before["effective_price_per_hour"], 6)
        change["effective_price_percent"] = _percent(before["effective_price_per_hour"],
                                                     after["effective_price_per_hour"])
    return {"evaluated_on": {"snapshot": snapshot}, "base": {"path": base, **before},
            "head": {"path": head, **after}, "change": change, "triggered": triggered,
            "warnings": [] if mismatch is None else [mismatch]}


def _diff_scenario(path: str, base: Revision, head: Revision, policy: PricingPolicy | None) -> dict[str, Any]:
    from nodewright.sim.runner import run
    from nodewright.sim.scenario import load_scenario

    scenario = load_scenario(path)
    for finding in scenario.findings:  # unknown fields of its manifests, as simulate --scenario warns
        log.warning("%s", finding.line())
    out: dict[str, Any] = {"evaluated_on": {"scenario": path}}
    for label, rev in (("base", base), ("head", head)):
        manifests = [d for d in scenario.manifests if not (d.get("kind") == "NodePool"
                     or (d.get("kind") == "EC2NodeClass" and name_of(d) in rev.nodeclasses))]
        manifests += [*rev.nodepools.values(), *rev.nodeclasses.values()]
        # NodePools that launch nothing in the replay (their EC2NodeClass is in neither the scenario nor DIR), as
        # simulate -f finds them (nodewright.review): named once below the table, not left to a silent $0/h.
        not_ready = review_documents(manifests, parse_documents(manifests), for_simulate=False, default_class=False).not_ready
        summary = run(dataclasses.replace(scenario, manifests=manifests), pricing=policy).summary
        hours = scenario.duration / 3600.0
        evicted = summary.get("pods_evicted", 0)
        entry = {"path": rev.path, "price_per_hour": round(summary["cost_usd"] / hours, 6) if hours else 0.0,
                 "nodes": summary.get("final_nodes", 0), "max_nodes": summary.get("max_nodes", 0),
                 "pending_pods": summary.get("unscheduled_pods_at_end", 0),
                 "evictions_per_day": round(evicted * 24 / hours, 3) if hours else 0.0,
                 "pods_evicted": evicted,
                 "pod_wait_p50_s": summary.get("pod_schedule_latency_p50_s"),
                 "pod_wait_p95_s": summary.get("pod_schedule_latency_p95_s"),
                 "disruptions_by_reason": summary.get("disruptions_by_reason", {}),
                 "not_ready": dict(sorted(not_ready.items()))}
        if policy is not None and "effective_cost_usd" in summary and hours:
            entry["effective_price_per_hour"] = round(summary["effective_cost_usd"] / hours, 6)
        out[label] = entry
    b, h = out["base"], out["head"]
    out["change"] = {"price_per_hour": round(h["price_per_hour"] - b["price_per_hour"], 6),
                     "price_percent": _percent(b["price_per_hour"], h["price_per_hour"]),
                     "nodes": h["nodes"] - b["nodes"], "pending_pods": h["pending_pods"] - b["pending_pods"],
                     "pods_evicted": h["pods_evicted"] - b["pods_evicted"]}
    if "effective_price_per_hour" in h and "effective_price_per_hour" in b:
        out["change"]["effective_price_percent"] = _percent(b["effective_price_per_hour"],
                                                            h["effective_price_per_hour"])
    return out


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _percent(before: float, after: float) -> float | None:
    if before == 0:
        return None if after else 0.0
    return round((after - before) / before * 100, 2)


def parse_percent(text: str) -> float:
    """``"5%"`` (or ``"5"``) -> 5.0.

    Raises:
        NodewrightValidationError: not a non-negative number with an optional ``%``.
    """
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = -1.0
    if value < 0 or math.isnan(value):
        raise NodewrightValidationError("--max-cost-increase", f"expected a percentage like 5%, got {text!r}")
    return value


def check_gates(result: Mapping[str, Any], max_cost_increase: float | None, max_evictions: int | None) -> list[str]:
    """One sentence per exceeded gate (empty: the change passes). The cost gate reads the effective percentage
    when ``--pricing`` gave one, else the list percentage; a base of $0/h growing counts as infinite."""
    failures = []
    change = result["change"]
    if max_cost_increase is not None:
        percent = change.get("effective_price_percent", change["price_percent"])
        if percent is None or percent > max_cost_increase:
            shown = "from $0/h" if percent is None else f"{percent:+.2f}%"
            failures.append(f"$/h changes {shown}, more than --max-cost-increase {max_cost_increase:g}%")
    if max_evictions is not None and change["pods_evicted"] > max_evictions:
        failures.append(f"{change['pods_evicted']} pod(s) evicted, more than --max-evictions {max_evictions}")
    return failures


def _types(entry: Mapping[str, Any]) -> str:
    return ", ".join(f"{n} x {t}" for t, n in entry.get("instance_types", {}).items()) or "-"


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _signed(value: Any, percent: Any = None, money: bool = False) -> str:
    if value is None:
        return "-"
    text = f"{value:+.4f}" if money else f"{value:+d}" if isinstance(value, int) else f"{value:+}"
    return text + (f" ({percent:+.2f}%)" if isinstance(percent, int | float) else "")


def rows(result: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(metric, base, head, change) rows of the comparison, shared by the table and the Markdown."""
    b, h, c = result["base"], result["head"], result["change"]
    out = [("$/h (list)", _fmt(b["price_per_hour"]), _fmt(h["price_per_hour"]),
            _signed(c["price_per_hour"], c["price_percent"], money=True))]
    if "effective_price_per_hour" in h:
        out.append(("$/h (effective)", _fmt(b["effective_price_per_hour"]), _fmt(h["effective_price_per_hour"]),
                    _signed(round(h["effective_price_per_hour"] - b["effective_price_per_hour"], 6),
                            c.get("effective_price_percent"), money=True)))
    out.append(("nodes", str(b["nodes"]), str(h["nodes"]), _signed(c["nodes"])))
    pending_b = b["pending_pods"] if isinstance(b["pending_pods"], int) else len(b["pending_pods"])
    pending_h = h["pending_pods"] if isinstance(h["pending_pods"], int) else len(h["pending_pods"])
    out.append(("pods pending", str(pending_b), str(pending_h), _signed(c["pending_pods"])))
    if "instance_types" in h:
        out.append(("instance types", _types(b), _types(h), ""))
        waiting = f"; {c['nodes_waiting']} wait for a PDB or do-not-disrupt pod" if c["nodes_waiting"] else ""
        out.append(("drift: nodes replaced", "", str(c["nodes_replaced"]),
                    ", ".join(f"{n} {r}" for r, n in c["drift_reasons"].items()) + waiting))
        out.append(("drift: pods evicted", "", str(c["pods_evicted"]), ""))
        out.append(("drift: pace", "", f"{c['rounds']} round(s)", c["pace"]))
    else:
        out.append(("pods evicted", str(b["pods_evicted"]), str(h["pods_evicted"]), _signed(c["pods_evicted"])))
        out.append(("evictions per day", _fmt(b["evictions_per_day"]), _fmt(h["evictions_per_day"]), ""))
        out.append(("pod wait p50 / p95 (s)", f"{_fmt(b['pod_wait_p50_s'])} / {_fmt(b['pod_wait_p95_s'])}",
                    f"{_fmt(h['pod_wait_p50_s'])} / {_fmt(h['pod_wait_p95_s'])}", ""))
    return out


def render_diff(result: Mapping[str, Any], output: str = "table") -> str:
    """``table``, ``markdown`` (a pull-request comment) or ``json``."""
    if output == "json":
        return json.dumps(result, indent=2)
    body = rows(result)
    on = result["evaluated_on"]
    where = f"snapshot `{Path(on['snapshot']).name}`" if "snapshot" in on else f"scenario `{Path(on['scenario']).name}`"
    if output == "markdown":
        lines = ["### nodewright diff", "", f"NodePools/EC2NodeClasses `{result['base']['path']}` -> "
                 f"`{result['head']['path']}`, evaluated on {where}.", "",
                 *(f"> **warning**: {w}\n" for w in result.get("warnings") or []),
                 "| | base | head | change |", "|---|---|---|---|"]
        lines += [f"| {m} | {b} | {h} | {c} |" for m, b, h, c in body]
        triggered = result.get("triggered") or {}
        if triggered:
            lines += ["", "<details><summary>nodes replaced by drift</summary>", "",
                      "| node | nodepool | reason | pods evicted | waits for |", "|---|---|---|---|---|"]
            lines += [f"| {n} | {e['nodepool']} | {e['reason']} | {len(e['pods'])} | {e['waits_for'] or '-'} |"
                      for n, e in sorted(triggered.items())]
            lines += ["", "</details>"]
        notes = _notes(result)
        return "\n".join(lines + (["", *(f"- {line}" for line in notes)] if notes else []))
    return "\n".join([f"{result['base']['path']} -> {result['head']['path']} on {where.replace('`', '')}",
                      *table([("", "BASE", "HEAD", "CHANGE"), *body]), *_notes(result)])


def _notes(result: Mapping[str, Any]) -> list[str]:
    """The lines below the table: per revision, each NodePool that cannot launch, once, with why
    (:func:`nodewright.sim.decision.not_ready_lines`, as ``simulate --snapshot`` says it)."""
    return [f"{label}: {line}" for label in ("base", "head")
            for line in not_ready_lines(result[label].get("not_ready") or {})]
