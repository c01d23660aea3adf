"""CSI volume attach limits of new NodeClaims (Karpenter v1.15's instance volume attach limits; its source was not
available here, so this is our rule, docs/karpenter-compatibility.md).

Existing nodes carry their CSINode counts (:attr:`~nodewright.scheduling.nodes.ExistingNode.volume_limits`,
:meth:`~nodewright.scheduling.existingnode.ExistingNodeState.exceeds_volume_limits`). A new NodeClaim has no CSINode
yet: each of its instance types says how many volumes a fresh node of that type attaches per CSI driver
(:attr:`~nodewright.cloud.instancetype.InstanceType.volume_limits`, e.g. ``ebs.csi.aws.com`` from EC2's
``MaximumEbsAttachments``). A pod joins a NodeClaim only on the types whose limits take the distinct claims of the
NodeClaim's pods plus its own (a claim several pods share counts once; a driver the type sets no limit for is
unbounded). Pods with CSI volumes never take the cost packer's bulk paths (``PodClass.is_free``,
``NodeClaim.fill``, the topology re-pack), which do not count claims.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nodewright.scheduling.nodeclaimtemplate import TypeInfo

if TYPE_CHECKING:
    from nodewright.scheduling.nodeclaim import NodeClaim
    from nodewright.scheduling.preferences import PodClass


def has_volumes(cls: PodClass) -> bool:
    """Whether a pending pod of ``cls`` attaches CSI volumes (it must then join NodeClaims one by one)."""
    return any(p.volumes for p in cls.pods)


def attach_limited(claim: NodeClaim, cls: PodClass, types: list[TypeInfo] | None) -> tuple[list[TypeInfo] | None, bool]:
    """The instance types ``claim`` keeps if the next pod of ``cls`` joins it, under the types' attach limits.

    Args:
        types: the candidate types so far (None: ``claim.types`` unchanged).

    Returns:
        ``(types, True)`` unchanged when the pod has no CSI volume or every candidate takes its claims; ``(kept,
        True)`` when some do and one of them fits the summed requests; ``(None, False)`` when none does.
    """
    if not cls.pods or not cls.pods[-1].volumes:
        return types, True
    current = claim.types if types is None else types
    claims: dict[str, set[str]] = {}
    for pod in (*claim.pods, cls.pods[-1]):
        for driver, name in pod.volumes:
            claims.setdefault(driver, set()).add(name)
    kept = [t for t in current if all(len(c) <= t.it.volume_limits.get(d, len(c)) for d, c in claims.items())]
    if len(kept) == len(current):
        return types, True
    need = [a + b for a, b in zip(claim.need, cls.vec, strict=True)]
    if not any(t.fits(need) for t in kept):
        return None, False
    return kept, True
