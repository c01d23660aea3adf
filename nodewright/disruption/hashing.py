"""Static-drift hashes: what a NodeClaim was created from, stamped on it, compared on every pass.

Karpenter stamps ``karpenter.sh/nodepool-hash`` (and ``karpenter.sh/nodepool-hash-version``) on each NodeClaim
when it creates it, and the AWS provider stamps ``karpenter.k8s.aws/ec2nodeclass-hash`` (+ version). A claim
whose stamp differs from the current hash *with the same version* is drifted; a different version means the
hash definition changed (an upgrade, or a claim stamped by Karpenter itself) and the claim is re-stamped rather
than replaced, so an upgrade never replaces a whole fleet (Karpenter's ``nodepool/hash`` controller does the
same).

NodePool hash inputs (the fields that change what a node *is*): template labels and annotations, taints,
startupTaints, nodeClassRef, expireAfter, terminationGracePeriod. Not weight, limits or disruption (they
change nothing on a running node). Lists of taints are hashed as sets. ``requirements`` are an input to drift
but not to the hash: like Karpenter v1 they drift a node only when its labels no longer satisfy them (see
:mod:`nodewright.disruption.drift`), so widening a requirement (one more zone, one more type) replaces nothing.

The hash version strings are nodewright's own (``nodewright-v1``): our hash is not Karpenter's
``hashstructure`` value, so a claim stamped by Karpenter carries another version and is re-stamped, not drifted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from nodewright.api import labels as wk

# The EC2NodeClass hash has one definition, in the API layer, shared with the AWS provider that stamps it.
from nodewright.api.hashing import EC2NODECLASS_HASH_VERSION, ec2nodeclass_hash

__all__ = ["EC2NODECLASS_HASH_VERSION", "NODEPOOL_HASH_VERSION", "ec2nodeclass_hash", "nodepool_hash",
           "nodepool_hash_annotations", "nodepool_hash_inputs"]

NODEPOOL_HASH_VERSION = "nodewright-v1"


def _manifest(obj: Any) -> Mapping[str, Any]:
    return obj.to_manifest() if hasattr(obj, "to_manifest") else obj


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _as_set(items: Any) -> list[Any]:
    """A list hashed as a set: order and duplicates do not matter."""
    return sorted({json.dumps(i, sort_keys=True) for i in items or []})


def nodepool_hash_inputs(nodepool: Any) -> dict[str, Any]:
    """The fields of a NodePool (model or ``karpenter.sh/v1`` dict) that :func:`nodepool_hash` covers."""
    spec = _manifest(nodepool).get("spec") or {}
    template = spec.get("template") or {}
    tmeta = template.get("metadata") or {}
    tspec = template.get("spec") or {}
    return {
        "labels": dict(tmeta.get("labels") or {}),
        "annotations": dict(tmeta.get("annotations") or {}),
        "taints": _as_set(tspec.get("taints")),
        "startupTaints": _as_set(tspec.get("startupTaints")),
        "nodeClassRef": dict(tspec.get("nodeClassRef") or {}),
        "expireAfter": tspec.get("expireAfter", "720h"),
        "terminationGracePeriod": tspec.get("terminationGracePeriod"),
    }


def nodepool_hash(nodepool: Any) -> str:
    """16 hex digits of SHA-256 over :func:`nodepool_hash_inputs` (stable across dict order and taint order)."""
    return _digest(nodepool_hash_inputs(nodepool))


def nodepool_hash_annotations(nodepool: Any) -> dict[str, str]:
    """The annotations a new NodeClaim of ``nodepool`` carries: hash and hash version."""
    return {wk.NODEPOOL_HASH: nodepool_hash(nodepool), wk.NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}
