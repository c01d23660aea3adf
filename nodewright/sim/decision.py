"""``nodewright simulate -f FILE...``: one provisioning decision for a set of manifests, offline.

Reads multi-document YAML (NodePool of any version or Provisioner, EC2NodeClass/AWSNodeTemplate, Deployment,
StatefulSet, ReplicaSet, Job, CronJob (one run), Pod, DaemonSet, PodDisruptionBudget, Node with pods bound by
``spec.nodeName``), converts the Karpenter kinds to v1 through :mod:`nodewright.api`, loads the bundled EC2
catalog for the region and runs :func:`nodewright.scheduling.schedule` once.

The region is ``--region`` when given, else inferred from zone requirements of the NodePools or zone labels
of the Nodes (``ap-northeast-2a`` -> ``ap-northeast-2``), else ``us-east-1``.

The JSON output is the contract of DESIGN.md (``nodeclaims``, ``existing``, ``unschedulable``,
``total_price_per_hour``) plus ``region``, ``price_source`` and ``events`` (the log sentences).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from nodewright.api import labels as wk
from nodewright.api.manifests import parse_documents
from nodewright.cloud.catalog import catalog_price_source, load_instance_types, price_table
from nodewright.errors import NodewrightValidationError
from nodewright.pricing import PricingPolicy, Usage
from nodewright.pricing.report import add_effective_prices
from nodewright.scheduling import (
    ExistingNode,
    NodePoolSpec,
    Pod,
    SchedulingResult,
    daemonset_pod,
    node_from_manifest,
    nodepool_spec_from_model,
    pods_from_workload,
    schedule,
)
from nodewright.scheduling.pods import WORKLOAD_KINDS

DEFAULT_REGION = "us-east-1"
_ZONE = re.compile(r"^([a-z]{2}(?:-[a-z]+)+-\d+)[a-z]$")
#: Kinds read but not needed for a provisioning decision (accepted silently).
IGNORED_KINDS = frozenset({"PodDisruptionBudget", "EC2NodeClass", "Namespace", "Service", "ConfigMap", "Secret"})


def region_of_zone(zone: str) -> str | None:
    """``"ap-northeast-2a"`` -> ``"ap-northeast-2"``; None for anything else."""
    match = _ZONE.match(zone)
    return match.group(1) if match else None


def infer_region(nodepools: Sequence[NodePoolSpec], nodes: Sequence[ExistingNode]) -> str | None:
    """Region from the first zone found in NodePool requirements, then in node labels."""
    for np in nodepools:
        req = np.requirements.get(wk.ZONE)
        if req is not None and not req.complement:
            for zone in sorted(req.values):
                region = region_of_zone(zone)
                if region:
                    return region
    for node in nodes:
        region = node.labels.get(wk.REGION) or region_of_zone(node.labels.get(wk.ZONE, ""))
        if region:
            return region
    return None


def decide(documents: Sequence[Mapping[str, Any]], region: str | None = None,
           pricing: tuple[PricingPolicy, str] | None = None) -> dict[str, Any]:
    """Run one provisioning decision over ``documents`` and return the JSON-ready result.

    With ``pricing`` (a policy and a label naming it), the result adds effective prices beside the list prices
    (:func:`nodewright.pricing.report.add_effective_prices`); the decision itself is unchanged.

    Raises:
        NodewrightValidationError: an invalid document (path names it), no NodePool/Provisioner, or an unknown
            region.
    """
    objects = parse_documents([dict(d) for d in documents])
    if not objects.nodepools:
        raise NodewrightValidationError("", "no NodePool or Provisioner in the input: nothing could launch nodes")
    pending: list[Pod] = []
    bound: list[Pod] = []
    daemonsets: list[Pod] = []
    node_docs: list[Mapping[str, Any]] = []
    for index, doc in enumerate(objects.others):
        kind = doc.get("kind")
        try:
            if kind in WORKLOAD_KINDS:
                for pod in pods_from_workload(doc):
                    (bound if pod.node_name else pending).append(pod)
            elif kind == "DaemonSet":
                daemonsets.append(daemonset_pod(doc))
            elif kind == "Node":
                node_docs.append(doc)
            elif kind not in IGNORED_KINDS:
                raise NodewrightValidationError("kind", f"{kind!r} is not supported by simulate")
        except NodewrightValidationError as err:
            name = (doc.get("metadata") or {}).get("name", index)
            prefix = f"{kind}/{name}"
            raise NodewrightValidationError(f"{prefix}.{err.path}" if err.path else prefix, err.reason) from None
    nodes = [node_from_manifest(d, bound) for d in node_docs]
    pools = [nodepool_spec_from_model(np, daemonsets=daemonsets) for np in objects.nodepools]
    chosen = region or infer_region(pools, nodes) or DEFAULT_REGION
    instance_types = load_instance_types(chosen)
    result = schedule(pending, nodes, pools, {p.name: instance_types for p in pools}, daemonsets=daemonsets)
    source = catalog_price_source(chosen)
    if any(plan.capacity_type == "spot" for plan in result.new_nodeclaims):
        # Spot prices here are the catalog's model, not quotes: say so wherever a price is shown.
        source += "; spot prices modelled at 60-70% off on-demand per family"
    decision = to_json(result, chosen, source, pools)
    if pricing is not None:
        existing = [u for u in (Usage.from_labels(n.labels) for n in nodes) if u is not None]
        decision = add_effective_prices(decision, pricing[0], price_table(chosen), existing, pricing[1])
    return decision


def to_json(result: SchedulingResult, region: str, price_source: str,
            pools: Sequence[NodePoolSpec] = ()) -> dict[str, Any]:
    """The DESIGN.md decision contract for ``result``, plus nodewright's ``target_utilization``: per NodeClaim
    (its pool's) and per NodePool (``{"name": fraction}``, 1.0 = pack fully; see
    :mod:`nodewright.api.annotations`)."""
    targets = {p.name: p.target_utilization or 1.0 for p in pools}
    return {
        "region": region,
        "price_source": price_source,
        "target_utilization": dict(sorted(targets.items())),
        "nodeclaims": [
            {
                "nodepool": nc.nodepool,
                "target_utilization": targets.get(nc.nodepool, 1.0),
                "instance_type": nc.instance_type.name,
                "instance_types": [t.name for t in nc.instance_types],
                "capacity_type": nc.capacity_type,
                "zone": nc.zone,
                "arch": nc.arch,
                "price_per_hour": round(nc.price, 6),
                "labels": dict(sorted(nc.labels.items())),
                "taints": [t.to_dict() for t in nc.taints],
                "requests": dict(nc.requests),
                "pods": [p.key for p in nc.pods],
            }
            for nc in result.new_nodeclaims
        ],
        "existing": [{"node": name, "pods": [p.key for p in pods]} for name, pods in sorted(result.existing.items())],
        "unschedulable": [{"pod": key, "reason": reason} for key, reason in result.unschedulable.items()],
        "total_price_per_hour": round(result.total_price, 6),
        "events": [e.message for e in result.events],
    }


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def render_table(decision: Mapping[str, Any]) -> str:
    """What a person reads: one row per new node, the pods per node, $/h, and a summary line."""
    effective = "total_effective_price_per_hour" in decision  # with --pricing: a column beside list $/h
    rows = [("NODEPOOL", "TARGET", "INSTANCE TYPE", "CAPACITY", "ZONE", "ARCH", "PODS", "$/H")
            + (("EFFECTIVE $/H",) if effective else ())]
    for nc in decision["nodeclaims"]:
        rows.append(
            (
                nc["nodepool"],
                _percent(nc.get("target_utilization", 1.0)),
                nc["instance_type"],
                nc["capacity_type"],
                nc["zone"],
                nc["arch"],
                str(len(nc["pods"])),
                f"{nc['price_per_hour']:.4f}",
            )
            + ((f"{nc['effective_price_per_hour']:.4f}",) if effective else ())
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    for i, nc in enumerate(decision["nodeclaims"]):
        lines.append(f"node {i + 1} ({nc['instance_type']}): {', '.join(nc['pods'])}")
    for entry in decision["existing"]:
        lines.append(f"existing {entry['node']}: {', '.join(entry['pods'])}")
    for entry in decision["unschedulable"]:
        lines.append(f"unschedulable {entry['pod']}: {entry['reason']}")
    if decision.get("target_utilization"):
        lines.append("target utilization per NodePool: "
                     + ", ".join(f"{name} {_percent(v)}" for name, v in decision["target_utilization"].items()))
    placed = sum(len(nc["pods"]) for nc in decision["nodeclaims"])
    on_existing = sum(len(e["pods"]) for e in decision["existing"])
    lines.append(
        f"{len(decision['nodeclaims'])} new node(s) for {placed} pod(s), {on_existing} pod(s) on existing nodes, "
        f"{len(decision['unschedulable'])} unschedulable; total ${decision['total_price_per_hour']:.4f}/h "
        f"({decision['region']}, {decision['price_source']})"
    )
    if effective:
        lines.append(f"effective ${decision['total_effective_price_per_hour']:.4f}/h under {decision['pricing_policy']}")
    return "\n".join(lines)
