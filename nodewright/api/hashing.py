"""The EC2NodeClass hash: the one definition the AWS provider stamps and drift compares.

Karpenter's AWS provider stamps ``karpenter.k8s.aws/ec2nodeclass-hash`` (+ ``-hash-version``) on each NodeClaim
it launches; a claim whose stamp differs from its EC2NodeClass's current hash *with the same version* is
drifted (``NodeClassDrift``). Both sides must compute it identically, so it lives here, in the API layer that
``nodewright.cloud`` (stamps it) and ``nodewright.disruption`` (compares it) already depend on -- neither of
those packages imports the other.

Changing the definition below changes every stamped hash; bump :data:`EC2NODECLASS_HASH_VERSION` with it so
existing claims are re-stamped rather than all replaced at once.
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
#: group drift compare resolved ids), so re-tagging a subnet does not replace every node.
SELECTOR_FIELDS = ("subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms")


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
