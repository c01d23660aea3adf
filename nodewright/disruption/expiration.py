"""Expiration: NodeClaims older than ``expireAfter`` are replaced, forcefully.

Karpenter v1 moved expiration out of the graceful methods: an expired NodeClaim is deleted regardless of
disruption budgets, ``karpenter.sh/do-not-disrupt`` and PodDisruptionBudgets; its drain is bounded by the
NodeClaim's ``terminationGracePeriod`` (the termination controller enforces it). The replacement capacity comes
from the provisioner, which treats the pods of a deleting node as pending and launches for them while the node
drains.
"""

from __future__ import annotations

from nodewright.disruption.model import EXPIRATION, REASON_EXPIRED, ClusterView, Decision, Node


def is_expired(node: Node, now: float) -> bool:
    """``now - created >= expireAfter`` (never for ``expireAfter: Never``)."""
    return node.expire_after is not None and now - node.created >= node.expire_after


def expiration(view: ClusterView, now: float) -> Decision | None:
    """Every expired NodeClaim not already being deleted, oldest first (None when none)."""
    expired = sorted((n for n in view.nodes if not n.deleting and is_expired(n, now)), key=lambda n: (n.created, n.name))
    if not expired:
        return None
    return Decision(EXPIRATION, REASON_EXPIRED, expired, evaluated=len(expired))


def validate_expiration(decision: Decision, nodes: list[Node], now: float) -> Decision | None:
    """Expiration re-checked: every candidate still expired and not already leaving."""
    return decision if all(is_expired(n, now) and not n.deleting for n in nodes) else None
