"""``operator_nodeclaim_status_condition_transition_seconds``: how long a NodeClaim condition held a status.

Karpenter records this through operator-pkg's status controller: when a condition's status changes, it
observes ``new lastTransitionTime - old lastTransitionTime`` labelled with the condition ``type``, the
``status`` being left and the ``to_status`` reached. Karpenter initialises the lifecycle conditions
(Launched, Registered, Initialized and their root Ready) to ``Unknown`` when a NodeClaim is created; ours
are written only when they first resolve, so a missing lifecycle condition counts as ``Unknown`` since the
NodeClaim's ``creationTimestamp``. ``type="Ready", status="Unknown"`` is then creation-to-ready latency, the
capacity dashboard's "Node launch-to-ready latency" panel.

Called by the controllers right where they write NodeClaim conditions; costs one dict per transition.

:func:`status_rows` gives operator-pkg's current-status gauges their rows (the NodeClaims' conditions now, with
the same rule for lifecycle conditions not written yet), exported at scrape time by
:class:`nodewright.metrics.NodeClaimStatusCollector`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nodewright.api import labels as L
from nodewright.kube.objects import meta, parse_time
from nodewright.metrics import Metrics

#: Conditions Karpenter initialises to Unknown at creation (a NodeClaim's lifecycle condition set).
LIFECYCLE_CONDITIONS = frozenset({L.CONDITION_LAUNCHED, L.CONDITION_REGISTERED, L.CONDITION_INITIALIZED,
                                  L.CONDITION_READY})


def observe_condition_transitions(
    metrics: Metrics, claim: Mapping[str, Any], new_conditions: Iterable[Mapping[str, Any]]
) -> int:
    """Observe every status change between ``claim``'s stored conditions and ``new_conditions``.

    Args:
        metrics: where to observe (``operator_nodeclaim_status_condition_transition_seconds``).
        claim: the NodeClaim as it was before the write (its ``status.conditions`` are the old ones).
        new_conditions: the conditions list that was just written (``lastTransitionTime`` RFC 3339).

    Returns:
        How many transitions were observed. Conditions whose times cannot be parsed are skipped.
    """
    old = {c.get("type"): c for c in (claim.get("status") or {}).get("conditions") or []}
    created = parse_time(meta(claim).get("creationTimestamp"))
    observed = 0
    for cond in new_conditions:
        type_ = str(cond.get("type"))
        before = old.get(type_)
        if before is None:
            if type_ not in LIFECYCLE_CONDITIONS:
                continue  # operator-pkg observes only conditions it had seen before
            status, since = "Unknown", created
        else:
            status, since = str(before.get("status")), parse_time(before.get("lastTransitionTime"))
        to_status = str(cond.get("status"))
        at = parse_time(cond.get("lastTransitionTime"))
        if status == to_status or since is None or at is None:
            continue
        metrics.nodeclaim_condition_transition.labels(type_, status, to_status).observe(max(0.0, at - since))
        observed += 1
    return observed


def status_rows(claims: Iterable[Mapping[str, Any]]) -> tuple[list[tuple[str, str, str, str, float]],
                                                                list[tuple[str, float]]]:
    """``(conditions, terminating)`` of :class:`nodewright.metrics.NodeClaimStatusCollector` for ``claims``:
    ``(name, type, status, reason, since)`` per condition (a lifecycle condition not written yet is
    ``Unknown`` since ``creationTimestamp``, as Karpenter initialises it), and ``(name, deletionTimestamp)`` per
    deleting NodeClaim; epoch seconds, unparseable times left out."""
    conditions: list[tuple[str, str, str, str, float]] = []
    terminating: list[tuple[str, float]] = []
    for claim in claims:
        name = str(meta(claim).get("name") or "")
        created = parse_time(meta(claim).get("creationTimestamp"))
        seen = set()
        for cond in (claim.get("status") or {}).get("conditions") or []:
            type_ = str(cond.get("type") or "")
            seen.add(type_)
            since = parse_time(cond.get("lastTransitionTime"))
            if since is None:
                since = created
            if type_ and since is not None:
                conditions.append((name, type_, str(cond.get("status") or "Unknown"), str(cond.get("reason") or ""),
                                   since))
        if created is not None:
            conditions.extend((name, type_, "Unknown", "", created)
                              for type_ in sorted(LIFECYCLE_CONDITIONS - seen))
        deleted = parse_time(meta(claim).get("deletionTimestamp"))
        if deleted is not None:
            terminating.append((name, deleted))
    return conditions, terminating
