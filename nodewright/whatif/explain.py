"""``nodewright explain pod|node|nodepool NAME``: one readable screen about one object of a snapshot.

Everything shown comes from :func:`nodewright.whatif.dryrun.dry_run` (the provisioner's batch and the disruption
controller's methods on the snapshot), so ``explain`` never disagrees with ``simulate --snapshot``:

- **pod**: where it runs; when pending, where the provisioner's batch puts it (an existing node, or a new NodeClaim:
  type, zone, $/h) or the scheduler's reason it fits nowhere, then -- for a pod that fits nowhere, with several
  NodePools -- each NodePool alone, with the scheduler's reason for that pool (Karpenter's "incompatible with nodepool ..." sentences),
  or why the pool launches nothing at all (:func:`nodewright.whatif.dryrun.not_ready_nodepools`);
- **node**: its NodePool, type, price, pods, and whether a disruption method would take it now (which, and the
  move) or why not (PDB, do-not-disrupt, budget, consolidateAfter, no cheaper replacement, ...);
- **nodepool**: its nodes, types, $/h (list and effective), why it cannot launch (when so: its EC2NodeClass is not
  in the snapshot, it is not Ready, ...), limits against what it holds, disruption policy and the budgets allowed
  now per reason, and the pending pods the batch would launch into it.

Errors: a name not in the snapshot is a :class:`~nodewright.errors.NodewrightValidationError` naming what exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import meta
from nodewright.pricing import PricingPolicy
from nodewright.whatif.dryrun import dry_run
from nodewright.whatif.snapshot import Snapshot


def _find(snap: Snapshot, kind: str, name: str) -> dict[str, Any]:
    namespace, _, short = name.rpartition("/")
    for obj in snap.of_kind(kind):
        m = meta(obj)
        if m.get("name") == short and (kind != "Pod" or (m.get("namespace") or "default") == (namespace or "default")):
            return obj
    known = sorted(f"{meta(o).get('namespace')}/{meta(o).get('name')}" if kind == "Pod" else str(meta(o).get("name"))
                   for o in snap.of_kind(kind))
    hint = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
    raise NodewrightValidationError(name, f"no {kind} {name!r} in {snap.source} ({len(known)} {kind}{'' if len(known) == 1 else 's'}: {hint or 'none'})")


def explain(snap: Snapshot, what: str, name: str, region: str | None = None,
            pricing: tuple[PricingPolicy, str] | None = None) -> str:
    """The screen for ``what`` (``pod``, ``node`` or ``nodepool``) named ``name`` (see module docstring).

    Raises:
        NodewrightValidationError: no such object, or see :func:`nodewright.whatif.dryrun.dry_run`.
    """
    kind = {"pod": "Pod", "node": "Node", "nodepool": "NodePool"}[what]
    obj = _find(snap, kind, name)
    result = dry_run(snap, region, pricing, explain=frozenset({name}) if what == "node" else frozenset())
    if what == "pod":
        return _pod(snap, obj, result, region)
    if what == "node":
        return _node(obj, result)
    return _nodepool(obj, result)


def _pod(snap: Snapshot, obj: dict[str, Any], result: Mapping[str, Any], region: str | None) -> str:
    m = meta(obj)
    key = f"{m.get('namespace') or 'default'}/{m.get('name')}"
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    lines = [f"Pod {key}: phase {status.get('phase', 'Unknown')}"]
    if spec.get("nodeName"):
        node = next((n for n in result["disruption"]["nodes"] if n["node"] == spec["nodeName"]), None)
        lines.append(f"  bound to node {spec['nodeName']}"
                     + (f" (nodepool {node['nodepool']}, {node['instance_type']})" if node else " (not managed by a NodePool)"))
        if node is not None:
            lines.append(f"  that node: {node['disrupted_by'] and 'disrupted by ' + node['disrupted_by'] or node['reason']}")
        return "\n".join(lines)
    prov = result["provisioning"]
    for entry in prov["existing"]:
        if key in entry["pods"]:
            lines.append(f"  pending; the provisioner's batch fits it on existing node {entry['node']} "
                         "(kube-scheduler binds it there; no new node)")
            return "\n".join(lines)
    for claim in prov["nodeclaims"]:
        if key in claim["pods"]:
            lines.append(f"  pending; the provisioner launches a NodeClaim for it: nodepool {claim['nodepool']}, "
                         f"{claim['instance_type']} {claim['capacity_type']} in {claim['zone']}, "
                         f"${claim['price_per_hour']:.4f}/h ({len(claim['pods'])} pod(s) on it)")
            return "\n".join(lines)
    reason = next((u["reason"] for u in prov["unschedulable"] if u["pod"] == key), None)
    pools = snap.of_kind("NodePool")
    not_ready = prov.get("not_ready") or {}
    stuck = bool(pools) and all(meta(p).get("name") in not_ready for p in pools)
    lines.append(f"  pending and unschedulable: {reason or 'not provisionable (not marked Unschedulable by kube-scheduler)'}"
                 + ("; no NodePool can launch (why, per NodePool, below)" if stuck and reason else ""))
    for pool in pools if len(pools) > 1 or not_ready else []:
        if meta(pool).get("name") in not_ready:  # launches nothing, alone or not: say why instead
            lines.append(f"  nodepool {meta(pool).get('name')}: cannot launch: {not_ready[meta(pool).get('name')]}")
            continue
        others = [o for o in snap.objects if o.get("kind") != "NodePool" or o is pool]
        alone = dry_run(Snapshot(others, snap.time, snap.karpenter_version, snap.version, snap.source), region)
        why = next((u["reason"] for u in alone["provisioning"]["unschedulable"] if u["pod"] == key), None)
        lines.append(f"  nodepool {meta(pool).get('name')}: {why or 'would fit on its own (another pod of the batch took the room)'}")
    return "\n".join(lines)


def _node(obj: dict[str, Any], result: Mapping[str, Any]) -> str:
    name = str(meta(obj).get("name"))
    node = next((n for n in result["disruption"]["nodes"] if n["node"] == name), None)
    if node is None:
        return (f"Node {name}: not managed by a NodePool (no NodeClaim): a destination for moved pods, never a "
                "disruption candidate")
    lines = [f"Node {name}: nodepool {node['nodepool']}, {node['instance_type']} {node['capacity_type']} in "
             f"{node['zone']}, ${node['price_per_hour']:.4f}/h, {node['pods']} pod(s) that would move"
             + (f", room held for {node['buffer_pods']} CapacityBuffer virtual pod(s)" if node.get("buffer_pods")
                else "")]
    if node["disrupted_by"]:
        for m in result["disruption"]["methods"]:
            d = m["decision"]
            if m["method"] == node["disrupted_by"] and d is not None:
                acts = result["disruption"]["acts"] == m["method"]
                lines.append(f"  disruption candidate: {m['method']} would {'act now' if acts else 'take it, after the method acting this pass'}: "
                             f"{d['message']}")
                if d["evicted_pods"]:
                    lines.append(f"  evicts: {', '.join(d['evicted_pods'])}")
    else:
        lines.append(f"  not disrupted now: {node['reason']}")
    budgets = result["disruption"]["budgets"].get(node["nodepool"], {})
    lines.append("  budget allows now: " + ", ".join(f"{reason} {n if n < 1 << 29 else 'unlimited'}"
                                                    for reason, n in budgets.items()))
    return "\n".join(lines)


def _nodepool(obj: dict[str, Any], result: Mapping[str, Any]) -> str:
    name = str(meta(obj).get("name"))
    spec = obj.get("spec") or {}
    nodes = [n for n in result["disruption"]["nodes"] if n["nodepool"] == name]
    types: dict[str, int] = {}
    for n in nodes:
        types[n["instance_type"]] = types.get(n["instance_type"], 0) + 1
    price = sum(n["price_per_hour"] for n in nodes)
    disruption = spec.get("disruption") or {}
    # Nodes labelled with the pool that no NodeClaim owns: counted, but neither priced nor disruption candidates.
    unowned = (result["disruption"].get("unmanaged_by_nodepool") or {}).get(name, 0)
    lines = [f"NodePool {name}: {len(nodes) + unowned} node(s)"
             + (f" ({unowned} without a NodeClaim: not priced, never disrupted)" if unowned else "")
             + f", ${price:.4f}/h list"
             + (", " + ", ".join(f"{c} x {t}" for t, c in sorted(types.items())) if types else "")]
    if "effective_price_per_hour" in result["fleet"] and result["fleet"]["price_per_hour"]:
        share = price / result["fleet"]["price_per_hour"] * result["fleet"]["effective_price_per_hour"]
        lines.append(f"  effective ${share:.4f}/h (its share of the fleet's effective bill)")
    why = (result["provisioning"].get("not_ready") or {}).get(name)
    if why is not None:
        lines.append(f"  cannot launch: {why}")
    limits = spec.get("limits") or {}
    used = (obj.get("status") or {}).get("resources") or {}
    lines.append("  limits: " + (", ".join(f"{k} {used.get(k, '0')} of {v}" for k, v in limits.items()) or "none"))
    lines.append(f"  disruption: consolidationPolicy {disruption.get('consolidationPolicy', 'WhenEmptyOrUnderutilized')}, "
                 f"consolidateAfter {disruption.get('consolidateAfter', '0s')}, budgets "
                 + ", ".join(str(b.get("nodes")) + (f" ({b['schedule']} for {b.get('duration')})" if b.get("schedule") else "")
                             for b in disruption.get("budgets") or [{"nodes": "10%"}]))
    budgets = result["disruption"]["budgets"].get(name, {})
    lines.append("  allowed now: " + (", ".join(f"{reason} {n if n < 1 << 29 else 'unlimited'}"
                                               for reason, n in budgets.items()) or "-"))
    launches = [c for c in result["provisioning"]["nodeclaims"] if c["nodepool"] == name]
    if launches:
        lines.append(f"  pending pods launch {len(launches)} NodeClaim(s) here: "
                     + ", ".join(f"{c['instance_type']} ${c['price_per_hour']:.4f}/h" for c in launches))
    taken = sum(1 for n in nodes if n["disrupted_by"])
    lines.append(f"  disruption now: {taken} of its node(s) would be disrupted by some method")
    return "\n".join(lines)
