"""Static-drift hashes, the one definition of each: the NodePool hash the provisioner stamps and the
EC2NodeClass hash the AWS provider stamps; drift compares both.

EC2NodeClass hash:

Karpenter's AWS provider stamps ``karpenter.k8s.aws/ec2nodeclass-hash`` (+ ``-hash-version``) on each NodeClaim
it launches; a claim whose stamp differs from its EC2NodeClass's current hash *with the same version* is
drifted (``NodeClassDrift``). Both sides must compute it identically, so it lives here, in the API layer that
``nodewright.cloud`` (stamps it) and ``nodewright.disruption`` (compares it) already depend on -- neither of
those packages imports the other.

Changing the definition below changes every stamped hash; bump :data:`EC2NODECLASS_HASH_VERSION` with it so
existing claims are re-stamped rather than all replaced at once.

NodePool hash:

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

from nodewright.api import labels
from nodewright.api.ec2nodeclass import EC2NodeClass
from nodewright.api.manifests import parse_ec2nodeclass

#: Value stamped as ``karpenter.k8s.aws/ec2nodeclass-hash-version`` next to :func:`ec2nodeclass_hash`.
EC2NODECLASS_HASH_VERSION = "v1"

#: Spec fields left out of the hash: selectors drift through what they resolve to (AMI, subnet and security
#: group drift compare resolved ids), so re-tagging a subnet does not replace every node. Karpenter v1.14 also
#: leaves ``capacityReservationSelectorTerms`` and ``ipPrefixCount`` out (``hash:"ignore"``).
SELECTOR_FIELDS = ("subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms",
                   "capacityReservationSelectorTerms", "ipPrefixCount")


def ec2nodeclass_hash(nodeclass: EC2NodeClass | Mapping[str, Any]) -> str:
    """16 hex digits: SHA-256 of the EC2NodeClass ``spec`` (defaults filled, selector terms removed) as JSON with
    sorted keys.

    Args:
        nodeclass: the model, or a ``karpenter.k8s.aws/v1`` EC2NodeClass dict (parsed first, so a dict and its
            model hash the same).

    Raises:
        NodewrightValidationError: ``nodeclass`` is a dict that is not a valid EC2NodeClass.
    """
    model = nodeclass if isinstance(nodeclass, EC2NodeClass) else parse_ec2nodeclass(dict(nodeclass))
    spec = dict(model.spec.to_manifest())
    for selector in SELECTOR_FIELDS:
        spec.pop(selector, None)
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def ec2nodeclass_hash_annotations(nodeclass: EC2NodeClass | Mapping[str, Any]) -> dict[str, str]:
    """The annotations a NodeClaim launched from ``nodeclass`` carries: hash and hash version."""
    return {labels.EC2NODECLASS_HASH: ec2nodeclass_hash(nodeclass),
            labels.EC2NODECLASS_HASH_VERSION: EC2NODECLASS_HASH_VERSION}


def stamped_nodeclass_hash(annotations: Mapping[str, str]) -> str | None:
    """The EC2NodeClass hash a NodeClaim was stamped with, when it can be compared with
    :func:`ec2nodeclass_hash`: None when unstamped or stamped under another hash version (a NodeClaim Karpenter
    launched carries Karpenter's own hash and version: Karpenter's ``areStaticFieldsDrifted`` compares hashes only
    when the versions agree, so such a claim is never drifted for it). An unversioned stamp is compared."""
    stamped = annotations.get(labels.EC2NODECLASS_HASH)
    version = annotations.get(labels.EC2NODECLASS_HASH_VERSION)
    if not stamped or (version is not None and version != EC2NODECLASS_HASH_VERSION):
        return None
    return stamped


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
    return {labels.NODEPOOL_HASH: nodepool_hash(nodepool), labels.NODEPOOL_HASH_VERSION: NODEPOOL_HASH_VERSION}
