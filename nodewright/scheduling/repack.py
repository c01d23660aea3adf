"""Rules for re-packing the NodeClaims of topology-constrained pods (nodewright's addition to Karpenter).

Pods with topology constraints are placed one at a time, Karpenter-style: a NodeClaim keeps absorbing pods
while some instance type still fits them, so it can end up on one large type where several small ones cost
less (four 1-vCPU pods spread over two zones get two ``xlarge`` nodes instead of four ``micro`` ones). Once
every constrained pod is placed, the scheduler re-packs those NodeClaims with the cost packer
(:func:`nodewright.scheduling.packing.pack`) and keeps the result only when it is strictly cheaper. This module
says which re-packs keep every constraint satisfied:

- **Splitting** one NodeClaim's pods over several NodeClaims with the *same requirements*: every topology key
  but the hostname is pinned to one domain by those requirements when a group counts the pods (see
  ``_claim_topology`` in the scheduler), so zone / capacity-type spread counts, minDomains and zone (anti-)
  affinity are unchanged. Per-hostname counts only go down, and kube-scheduler's (and Karpenter's) hostname
  spread minimum is 0, so hostname spread and hostname anti-affinity can only get better. Host ports: a subset
  of conflict-free pods is conflict-free. A required or preferred **hostname pod affinity** is the exception:
  its owner must stay on the node of the pods it selects, so a NodeClaim holding such an owner is never split
  (see :func:`keeps_together`).
- **Merging** NodeClaims (re-packing the union of their pods) moves pods next to pods they were not next to,
  so it is only allowed for NodeClaims whose pods no hostname constraint involves (neither owned, nor counted
  by another pod's group, nor avoided by another pod's anti-affinity: :func:`hostname_bound`), whose
  requirements are identical (same pool, same pinned domains) and whose host ports are unambiguous (each
  (protocol, port) becomes a one-per-node resource, as for the free pods).

Limits, minValues, target utilization and the cap on new NodeClaims are checked by the scheduler when it
builds the new NodeClaims (the same checks a new NodeClaim gets); any failure keeps the original NodeClaims.
"""

from __future__ import annotations

from collections.abc import Iterable

from nodewright.api import labels as wk
from nodewright.scheduling.classes import PodClass
from nodewright.scheduling.requirements import Requirements

#: Relative tolerance when comparing plan prices: a re-pack must save more than this to be kept.
PRICE_EPSILON = 1e-9


def keeps_together(cls: PodClass) -> bool:
    """True when a pod of ``cls`` has a hostname pod affinity (required or preferred): the NodeClaim holding
    it may not be split, since its owner must share the node of the pods it selects."""
    aff = cls.rep.affinity
    if any(t.topology_key == wk.HOSTNAME for t in aff.pod_affinity_required):
        return True
    return any(w.term.topology_key == wk.HOSTNAME for w in aff.pod_affinity_preferred)


def hostname_bound(cls: PodClass) -> bool:
    """True when some hostname constraint involves pods of ``cls``: its own spread or (anti-)affinity on the
    hostname (required or preferred, relaxed or not), or a hostname group of other pods that counts or avoids
    it. Such pods may be split apart but never moved next to other pods."""
    pod = cls.rep
    if any(t.topology_key == wk.HOSTNAME for t in pod.topology_spread):
        return True
    aff = pod.affinity
    for term in (*aff.pod_affinity_required, *aff.pod_anti_affinity_required):
        if term.topology_key == wk.HOSTNAME:
            return True
    for wterm in (*aff.pod_affinity_preferred, *aff.pod_anti_affinity_preferred):
        if wterm.term.topology_key == wk.HOSTNAME:
            return True
    return any(g.key == wk.HOSTNAME for g in (*cls.owned, *cls.selecting, *cls.inverse))


def domains_pinned(classes: Iterable[PodClass], reqs: Requirements) -> bool:
    """True when every non-hostname topology key counted for ``classes`` is pinned to one value by ``reqs``
    (the scheduler pins them at placement; checked again so a re-pack never moves a counted pod between
    domains)."""
    for cls in classes:
        for g in (*cls.owned, *cls.selecting):
            if g.key == wk.HOSTNAME:
                continue
            req = reqs.get(g.key)
            if req is None or req.complement or len(req.values) != 1:
                return False
    return True
