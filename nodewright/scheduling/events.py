"""Karpenter's sentences about a scheduling decision, as :class:`~nodewright.scheduling.result.SchedulingEvent`.

:func:`nodewright.scheduling.schedule` returns these in :attr:`SchedulingResult.events` and logs nothing; the
provisioner logs them once (``nodewright.controllers.provisioning``) and ``nodewright simulate -f`` prints them.
The wording follows Karpenter's provisioner and scheduler log lines ("Found N provisionable pod(s)",
"Computed N new node(s) will fit N pod(s)", "Launching node with N pods requesting {...} from types ...",
"N out of M instance types were excluded because they would breach limits", "Relaxing soft constraints for pod
since it previously failed to schedule, removing: ...").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from nodewright.quantities import format_resources
from nodewright.scheduling.nodepools import NodePoolSpec, launched_capacity, reaches_limits
from nodewright.scheduling.result import NodeClaimPlan, SchedulingEvent, SchedulingResult

#: Candidate types named in a "Launching node" sentence; the rest are counted.
SHOWN_TYPES = 5


def found(pods: int) -> SchedulingEvent:
    """The batch's size, first of a decision's events."""
    return SchedulingEvent(f"Found {pods} provisionable pod(s)")


def relaxing(removed: str, pod: str) -> SchedulingEvent:
    """One preference of ``pod`` (``namespace/name``) relaxed; ``removed`` says which ("removing: ...")."""
    return SchedulingEvent(
        f"Relaxing soft constraints for pod since it previously failed to schedule, {removed}", fields={"pod": pod}
    )


def limits_excluded(excluded: int, total: int, nodepool: str) -> SchedulingEvent:
    """``excluded`` of a NodePool's ``total`` compatible types would breach what remains of its limits."""
    return SchedulingEvent(
        f"{excluded} out of {total} instance types were excluded because they would breach limits",
        fields={"nodepool": nodepool},
    )


def limits_changed(spec: NodePoolSpec, result: SchedulingResult, narrowed: int,
                   moved: Mapping[str, int] | None = None) -> SchedulingEvent | None:
    """One line when ``spec``'s limits changed the plan (nodewright's addition): pods left pending because of
    them, ``narrowed`` NodeClaims whose instance types were narrowed to leave room for the rest of the batch, or
    pods the limits turned away that other NodePools launch for (``moved``: NodePool -> pods). It quotes the
    limits, what the pool owns and the most the batch's NodeClaims may launch (each at its largest candidate
    type). None when the limits changed nothing, and when they only narrowed NodeClaims of a plan far from them
    (:func:`~nodewright.scheduling.nodepools.reaches_limits`: the unlimited plan is the same, e.g. ``cpu: 64`` and 6
    vCPU launched)."""
    if spec.limits is None:
        return None
    marker = f'exceed limits for nodepool: "{spec.name}"'
    waiting = sum(marker in reason for reason in result.unschedulable.values())
    if not waiting and not moved and not (narrowed and reaches_limits(spec, result.new_nodeclaims)):
        return None
    launched = launched_capacity(spec, result.new_nodeclaims)
    owned = {k: spec.usage.get(k, 0) for k in spec.limits}
    parts = [f"limits {format_resources(spec.limits)}, owned {format_resources(owned)}, "
             f"this batch launches at most {format_resources(launched)}"]
    if narrowed:
        parts.append(f"{narrowed} NodeClaim(s) narrowed to smaller instance types to leave room for the rest of the batch")
    if moved:
        pools = ", ".join(f"{name} ({count})" for name, count in sorted(moved.items()))
        parts.append(f"{sum(moved.values())} pod(s) launched in other NodePools instead: {pools}")
    if waiting:
        parts.append(f"{waiting} pod(s) left pending")
    return SchedulingEvent(f"limits of nodepool {spec.name} changed the plan: " + "; ".join(parts),
                           fields={"nodepool": spec.name})


def launching(plan: NodeClaimPlan) -> SchedulingEvent:
    """One new NodeClaim: its pods, requests (daemonset overhead included) and the first candidate types."""
    names = [t.name for t in plan.instance_types]
    shown = ", ".join(names[:SHOWN_TYPES])
    if len(names) > SHOWN_TYPES:
        shown += f" and {len(names) - SHOWN_TYPES} other(s)"
    return SchedulingEvent(
        f"Launching node with {len(plan.pods)} pods requesting {format_resources(plan.requests)} from types {shown}",
        fields={
            "nodepool": plan.nodepool,
            "instance_type": plan.instance_type.name,
            "zone": plan.zone,
            "capacity_type": plan.capacity_type,
            "price": plan.price,
        },
    )


def outcome(result: SchedulingResult, existing: Iterable[tuple[bool, int]] = ()) -> list[SchedulingEvent]:
    """The closing sentences of a decision: NodeClaims to create, unready and initialized existing nodes used
    (``existing``: (initialized, pods placed) per node that takes pods), one "Launching node" per new NodeClaim
    and one error per pod that cannot be placed."""
    out: list[SchedulingEvent] = []
    plans = result.new_nodeclaims
    if plans:
        out.append(SchedulingEvent(f"Computed {len(plans)} new node(s) will fit {sum(len(p.pods) for p in plans)} pod(s)"))
    used = list(existing)
    for initialized, kind in ((False, "unready"), (True, "existing")):
        counts = [pods for ready, pods in used if ready is initialized]
        if counts:
            out.append(SchedulingEvent(f"Computed {len(counts)} {kind} node(s) will fit {sum(counts)} pod(s)"))
    out.extend(launching(plan) for plan in plans)
    for key, reason in result.unschedulable.items():
        out.append(SchedulingEvent(f"Could not schedule pod {key}, {reason}", "ERROR", {"pod": key}))
    return out
