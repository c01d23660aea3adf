"""The single EC2NodeClass hash definition (``nodewright.api.hashing``), stamped by the AWS provider and compared
by drift."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from nodewright.api import labels
from nodewright.api.hashing import EC2NODECLASS_HASH_VERSION, ec2nodeclass_hash, ec2nodeclass_hash_annotations
from nodewright.api.manifests import parse_ec2nodeclass
from nodewright.errors import NodewrightValidationError

NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
             "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]},
}


def test_hash_is_sha256_of_the_defaulted_spec_without_selectors() -> None:
    # Pinned: every NodeClaim already launched carries this value; changing the definition would drift them all.
    expected_json = ('{"metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", '
                     '"httpPutResponseHopLimit": 1, "httpTokens": "required"}, "role": "KarpenterNodeRole-demo"}')
    assert ec2nodeclass_hash(NODECLASS) == hashlib.sha256(expected_json.encode()).hexdigest()[:16]
    assert ec2nodeclass_hash(NODECLASS) == "da8080255e4672ba"


def test_dict_and_model_hash_the_same() -> None:
    assert ec2nodeclass_hash(parse_ec2nodeclass(copy.deepcopy(NODECLASS))) == ec2nodeclass_hash(NODECLASS)


def test_spec_changes_change_the_hash_but_selectors_do_not() -> None:
    user_data = copy.deepcopy(NODECLASS)
    user_data["spec"]["userData"] = "echo hi"
    assert ec2nodeclass_hash(user_data) != ec2nodeclass_hash(NODECLASS)
    selectors = copy.deepcopy(NODECLASS)
    selectors["spec"]["subnetSelectorTerms"] = [{"id": "subnet-123"}]
    selectors["spec"]["securityGroupSelectorTerms"] = [{"name": "nodes"}]
    selectors["spec"]["amiSelectorTerms"] = [{"alias": "al2023@v20250715"}]
    assert ec2nodeclass_hash(selectors) == ec2nodeclass_hash(NODECLASS)


def test_annotations_carry_hash_and_version() -> None:
    assert ec2nodeclass_hash_annotations(NODECLASS) == {
        labels.EC2NODECLASS_HASH: "da8080255e4672ba", labels.EC2NODECLASS_HASH_VERSION: EC2NODECLASS_HASH_VERSION}
    assert EC2NODECLASS_HASH_VERSION == "v1"


def test_invalid_dict_raises_validation_error() -> None:
    broken = copy.deepcopy(NODECLASS)
    del broken["spec"]["role"]
    with pytest.raises(NodewrightValidationError):
        ec2nodeclass_hash(broken)


def test_instance_store_policy_changes_the_hash() -> None:
    # Karpenter v1 hashes instanceStorePolicy too (ec2nodeclass_hash_test "InstanceStorePolicy"): turning RAID0
    # on or off drifts the class's nodes, whose storage layout is set at boot.
    raid0 = copy.deepcopy(NODECLASS)
    raid0["spec"]["instanceStorePolicy"] = "RAID0"
    assert ec2nodeclass_hash(raid0) != ec2nodeclass_hash(NODECLASS)
