"""A NodeClaim Karpenter launched carries Karpenter's EC2NodeClass hash and hash version: never compared with
nodewright's hash (Karpenter ``areStaticFieldsDrifted`` compares only under the same version)."""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.api.hashing import EC2NODECLASS_HASH_VERSION, stamped_nodeclass_hash
from nodewright.api.manifests import parse_nodeclaim
from nodewright.cloud.provider import DRIFT_NODECLASS
from nodewright.whatif.dryrun import restore
from tests.unit.whatif.cluster import NOW, cluster


def test_stamps_of_another_version_are_not_compared() -> None:
    assert stamped_nodeclass_hash({L.EC2NODECLASS_HASH: "12345", L.EC2NODECLASS_HASH_VERSION: "v4"}) is None
    assert stamped_nodeclass_hash({L.EC2NODECLASS_HASH: "12345",
                                   L.EC2NODECLASS_HASH_VERSION: EC2NODECLASS_HASH_VERSION}) == "12345"
    assert stamped_nodeclass_hash({L.EC2NODECLASS_HASH: "12345"}) == "12345"  # unversioned: compared
    assert stamped_nodeclass_hash({}) is None


def test_simulated_provider_drifts_only_our_own_stamps() -> None:
    objects = cluster()
    loaded = restore(objects, NOW)
    claim = next(o for o in objects if o["kind"] == "NodeClaim")
    assert loaded.ctx.cloud.is_drifted(parse_nodeclaim(claim)) is None  # Karpenter's v4 stamp
    ours = {**claim, "metadata": {**claim["metadata"], "annotations": {
        L.EC2NODECLASS_HASH: "0000", L.EC2NODECLASS_HASH_VERSION: EC2NODECLASS_HASH_VERSION}}}
    assert loaded.ctx.cloud.is_drifted(parse_nodeclaim(ours)) == DRIFT_NODECLASS
