"""Tables a person reads for ``simulate --snapshot`` (the JSON is :func:`nodewright.whatif.dryrun.dry_run`'s)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodewright.sim.decision import render_table as render_provisioning


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart (first row: the header)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def render_dry_run(result: Mapping[str, Any]) -> str:
    """The provisioning decision, then each disruption method's move and every node's fate."""
    snap, disruption = result["snapshot"], result["disruption"]
    fleet = result["fleet"]
    when = snap["time"] + ("" if snap["time_known"] else " (no snapshot time: now)")
    lines = [f"snapshot {snap['source']}: {snap['nodes']} node(s), {snap['pods']} pod(s), taken {when}; "
             f"fleet ${fleet['price_per_hour']:.4f}/h"
             + (f" (effective ${fleet['effective_price_per_hour']:.4f}/h)" if "effective_price_per_hour" in fleet
                else "")
             # Nodes no NodeClaim owns are neither priced in the fleet nor disruption candidates: say so by the $.
             + (f" for {fleet['nodes']} node(s) with a NodeClaim ({snap['nodes'] - fleet['nodes']} without one: not "
                "priced, never disrupted)" if snap["nodes"] > fleet["nodes"] else ""), "", "PROVISIONING (pending pods)", render_provisioning(result["provisioning"]), "",
             f"DISRUPTION (dry run at {disruption['now']}; methods in Karpenter's order, the first with a move acts)"]
    effective = any(m["decision"] and "effective_savings_per_hour" in m["decision"] for m in disruption["methods"])
    rows = [("METHOD", "ACTS", "DECISION", "NODES", "REPLACEMENTS", "EVICTS", "SAVES $/H")
            + (("EFFECTIVE $/H",) if effective else ())]
    for m in disruption["methods"]:
        d = m["decision"]
        if d is None:
            rows.append((m["method"], "", "none", "", "", "", "") + (("",) if effective else ()))
            continue
        rows.append((m["method"], "yes" if disruption["acts"] == m["method"] else "", d["decision"],
                     ",".join(c["node"] for c in d["candidates"]),
                     ",".join(p["instance_type"] for p in d["replacements"]) or "-", str(len(d["evicted_pods"])),
                     _money(d["savings_per_hour"]))
                    + ((_money(d.get("effective_savings_per_hour")),) if effective else ()))
    lines += table(rows)
    for m in disruption["methods"]:
        d = m["decision"]
        if d is not None:
            lines.append(f"{m['method']}: {d['message']}"
                         + (f"; evicts {', '.join(d['evicted_pods'])}" if d["evicted_pods"] else "")
                         + (f"; re-places {d['buffer_pods']} CapacityBuffer virtual pod(s)" if d.get("buffer_pods")
                            else ""))
        for sentence in m["skipped"]:
            lines.append(f"{m['method']}: skipped {sentence}")
    if disruption["expiration"] is not None:
        lines.append(f"expiration (forceful, not budgeted): {disruption['expiration']['message']}")
    lines.append("")
    node_rows = [("NODE", "NODEPOOL", "INSTANCE TYPE", "PODS", "$/H", "DISRUPTED BY / WHY NOT")]
    for n in disruption["nodes"]:
        pods = str(n["pods"]) + (f" +{n['buffer_pods']} buffer" if n.get("buffer_pods") else "")
        node_rows.append((n["node"], n["nodepool"], n["instance_type"], pods, _money(n["price_per_hour"]),
                          n["disrupted_by"] or n["reason"]))
    lines += table(node_rows)
    return "\n".join(lines)
