"""Karpenter v1.14 fields: accepted with Karpenter's shapes, rejected with Karpenter's rules (field path + reason).

Shapes and rules from aws/karpenter-provider-aws ``pkg/apis/v1/ec2nodeclass.go`` and kubernetes-sigs/karpenter
``pkg/apis/v1/nodepool.go`` (kubebuilder markers and XValidation rules).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nodewright.api import parse_documents
from nodewright.api.hashing import ec2nodeclass_hash
from nodewright.api.manifests import parse_ec2nodeclass, parse_nodepool
from nodewright.errors import NodewrightValidationError
from tests.unit.api.helpers import ec2nodeclass, nodepool


def _full_nodeclass() -> dict[str, Any]:
    doc = ec2nodeclass()
    doc["spec"].update({
        "capacityReservationSelectorTerms": [{"id": "cr-0123456789abcdef0"},
                                             {"tags": {"team": "ml"}, "ownerID": "123456789012",
                                              "instanceMatchCriteria": "targeted"}],
        "placementGroupSelector": {"name": "ml-cluster"},
        "ipPrefixCount": 2,
        "networkInterfaces": [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                              {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"}],
        "connectionTracking": {"tcpEstablishedTimeout": 3600, "udpStreamTimeout": 120, "udpTimeout": 30},
        "cpuOptions": {"nestedVirtualization": "enabled"},
    })
    return doc


def test_v114_nodeclass_fields_round_trip() -> None:
    doc = _full_nodeclass()
    model = parse_ec2nodeclass(doc)
    assert model.spec.placement_group_selector is not None and model.spec.placement_group_selector.name == "ml-cluster"
    assert model.spec.ip_prefix_count == 2
    assert model.spec.connection_tracking is not None and model.spec.connection_tracking.udp_timeout == 30
    assert model.to_manifest()["spec"]["capacityReservationSelectorTerms"] == doc["spec"]["capacityReservationSelectorTerms"]
    assert model.to_manifest()["spec"]["networkInterfaces"] == doc["spec"]["networkInterfaces"]
    assert model.to_manifest()["spec"]["cpuOptions"] == {"nestedVirtualization": "enabled"}


def test_hash_ignores_reservations_and_prefix_count_like_karpenter() -> None:
    """Karpenter tags both ``hash:"ignore"``: changing them must not drift nodes; the placement group does."""
    base = _full_nodeclass()
    other = _full_nodeclass()
    other["spec"]["capacityReservationSelectorTerms"] = [{"id": "cr-0fffffffffffffff0"}]
    other["spec"]["ipPrefixCount"] = 5
    assert ec2nodeclass_hash(base) == ec2nodeclass_hash(other)
    other["spec"]["placementGroupSelector"] = {"id": "pg-0123456789abcdef0"}
    assert ec2nodeclass_hash(base) != ec2nodeclass_hash(other)


@pytest.mark.parametrize("alias,family", [("windows2025@latest", "Windows2025"), ("al2023@v20260701", "AL2023")])
def test_aliases_including_windows2025(alias: str, family: str) -> None:
    doc = ec2nodeclass()
    doc["spec"]["amiSelectorTerms"] = [{"alias": alias}]
    assert parse_ec2nodeclass(doc).spec.resolved_ami_family == family


def test_custom_family_with_an_alias_stays_custom() -> None:
    """The provider's examples/v1/custom-family-with-alias.yaml: the alias picks the AMI, user data is the user's."""
    doc = ec2nodeclass()
    doc["spec"]["amiFamily"] = "Custom"
    doc["spec"]["amiSelectorTerms"] = [{"alias": "al2023@latest"}]
    assert parse_ec2nodeclass(doc).spec.resolved_ami_family == "Custom"


NodeClassMutation = Callable[[dict[str, Any]], None]
_INVALID_NODECLASS: list[tuple[str, NodeClassMutation, str]] = [
    ("reservation-id-with-tags",
     lambda s: s.__setitem__("capacityReservationSelectorTerms", [{"id": "cr-1", "tags": {"a": "b"}}]),
     "spec.capacityReservationSelectorTerms[0].id: 'id' is mutually exclusive, cannot be set along with other "
     "fields in a capacity reservation selector term"),
    ("reservation-empty-term", lambda s: s.__setitem__("capacityReservationSelectorTerms", [{"ownerID": "123456789012"}]),
     "spec.capacityReservationSelectorTerms[0]: expected at least one of 'tags', 'id' or 'instanceMatchCriteria'"),
    ("reservation-bad-owner", lambda s: s.__setitem__("capacityReservationSelectorTerms",
                                                      [{"tags": {"a": "b"}, "ownerID": "self"}]),
     "spec.capacityReservationSelectorTerms[0].ownerID: String should match pattern '^[0-9]{12}$', got 'self'"),
    ("placement-both", lambda s: s.__setitem__("placementGroupSelector", {"name": "a", "id": "pg-1"}),
     "spec.placementGroupSelector.id: 'name' and 'id' are mutually exclusive"),
    ("placement-bad-id", lambda s: s.__setitem__("placementGroupSelector", {"id": "cluster-1"}),
     "spec.placementGroupSelector.id: String should match pattern '^pg-[0-9a-z]+$', got 'cluster-1'"),
    ("negative-prefixes", lambda s: s.__setitem__("ipPrefixCount", -1),
     "spec.ipPrefixCount: Input should be greater than or equal to 0, got -1"),
    ("no-primary-interface", lambda s: s.__setitem__(
        "networkInterfaces", [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "efa-only"}]),
     "spec.networkInterfaces: networkInterfaces must include a primary interface with interfaceType='interface' "
     "at networkCardIndex 0, deviceIndex 0"),
    ("duplicate-interface", lambda s: s.__setitem__("networkInterfaces", [
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]),
     "spec.networkInterfaces[1]: duplicate networkCardIndex/deviceIndex pair (0, 0)"),
    ("two-efa-on-one-card", lambda s: s.__setitem__("networkInterfaces", [
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
        {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "efa-only"}]),
     "spec.networkInterfaces[2]: at most one efa-only interface per network card (1)"),
    ("conntrack-udp-too-long", lambda s: s.__setitem__("connectionTracking", {"udpTimeout": 61}),
     "spec.connectionTracking.udpTimeout: Input should be less than or equal to 60, got 61"),
    ("conntrack-empty", lambda s: s.__setitem__("connectionTracking", {}),
     "spec.connectionTracking: at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"),
    ("cpu-options-bad", lambda s: s.__setitem__("cpuOptions", {"nestedVirtualization": "on"}),
     "spec.cpuOptions.nestedVirtualization: Input should be 'enabled' or 'disabled', got 'on'"),
    ("windows-pinned", lambda s: s.__setitem__("amiSelectorTerms", [{"alias": "windows2025@v1"}]),
     "spec.amiSelectorTerms[0].alias: Windows aliases only support 'latest', got 'windows2025@v1'"),
]


@pytest.mark.parametrize("mutate,message", [(m, e) for _, m, e in _INVALID_NODECLASS],
                         ids=[i for i, _, _ in _INVALID_NODECLASS])
def test_invalid_v114_nodeclass_fields(mutate: NodeClassMutation, message: str) -> None:
    doc = ec2nodeclass()
    mutate(doc["spec"])
    with pytest.raises(NodewrightValidationError) as info:
        parse_ec2nodeclass(doc)
    assert str(info.value) == message


def test_static_and_balanced_nodepools() -> None:
    doc = nodepool()
    doc["spec"].pop("weight")
    doc["spec"]["replicas"] = 3
    doc["spec"]["limits"] = {"nodes": "5"}
    doc["spec"]["disruption"]["consolidationPolicy"] = "Balanced"
    model = parse_nodepool(doc)
    assert (model.spec.replicas, model.spec.disruption.consolidation_policy) == (3, "Balanced")


@pytest.mark.parametrize("change,message", [
    ({"limits": {"cpu": "10"}}, "spec.limits.cpu: only 'limits.nodes' is supported on static NodePools (replicas set)"),
    ({"limits": {"nodes": "5"}, "weight": 10}, "spec.weight: 'weight' is not supported on static NodePools (replicas set)"),
    ({"limits": {}, "replicas": -1}, "spec.replicas: Input should be greater than or equal to 0, got -1"),
])
def test_static_nodepool_rules(change: dict[str, Any], message: str) -> None:
    doc = nodepool()
    doc["spec"].pop("weight")
    doc["spec"]["replicas"] = 2
    doc["spec"].update(change)
    with pytest.raises(NodewrightValidationError) as info:
        parse_nodepool(doc)
    assert str(info.value) == message


def test_every_problem_of_every_document_is_reported() -> None:
    pool = nodepool()
    pool["spec"]["weight"] = 0
    pool["spec"]["limits"] = {"cpu": "-4"}
    pool["spec"]["template"]["spec"]["expireAfter"] = "soon"
    pool["spec"]["disruption"]["consolidationPolicy"] = "Sometimes"
    cls = ec2nodeclass()
    cls["spec"]["ipPrefixCount"] = -2
    with pytest.raises(NodewrightValidationError) as info:
        parse_documents([cls, pool])
    assert [str(p) for p in info.value.problems] == [
        "documents[0].spec.ipPrefixCount: Input should be greater than or equal to 0, got -2 (in EC2NodeClass 'default')",
        "documents[1].spec.template.spec.expireAfter: 'soon' is not a duration: use e.g. '30s', '15m', '720h', or "
        "'Never' (in NodePool 'general')",
        "documents[1].spec.disruption.consolidationPolicy: Input should be 'WhenEmpty', 'WhenEmptyOrUnderutilized' "
        "or 'Balanced', got 'Sometimes' (in NodePool 'general')",
        "documents[1].spec.weight: Input should be greater than or equal to 1, got 0 (in NodePool 'general')",
    ]


def test_limit_quantities_are_checked_in_the_model() -> None:
    """Before, a negative limit passed the model and failed later without naming the NodePool or file."""
    for value, reason in (("-4", "'-4' is negative"), ("1Ei", None)):
        doc = nodepool()
        doc["spec"]["limits"] = {"memory": value}
        if reason is None:
            assert parse_nodepool(doc).spec.limits == {"memory": "1Ei"}
            continue
        with pytest.raises(NodewrightValidationError) as info:
            parse_nodepool(doc)
        assert str(info.value) == f"spec.limits.memory: {reason}"


def test_v114_manifests_satisfy_the_generated_crd_schemas() -> None:
    """The CRDs nodewright installs accept what Karpenter v1.14 accepts: its examples and the new fields."""
    import jsonschema
    import yaml

    from tests.unit.api.test_api_crds import _schema

    examples = Path(__file__).resolve().parents[2] / "fixtures" / "karpenter-examples-v1"
    checked = 0
    for path in sorted(examples.glob("*.yaml")):
        if path.name == "windows-custom-userdata.yaml":  # rejected by Karpenter's own CRD (nodeClassRef.group)
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] in ("NodePool", "EC2NodeClass"):
                jsonschema.validate(doc, _schema(doc["kind"]))
                checked += 1
    assert checked == 43  # 21 files, multiple-arch.yaml has two NodePools
    jsonschema.validate(_full_nodeclass(), _schema("EC2NodeClass"))
    static = nodepool()
    static["spec"].update({"replicas": 3, "limits": {"nodes": "3"}})
    static["spec"]["disruption"]["consolidationPolicy"] = "Balanced"
    jsonschema.validate(static, _schema("NodePool"))


def test_kubelet_is_an_open_map_but_registerwithtaints_is_karpenters() -> None:
    doc = ec2nodeclass()
    doc["spec"]["kubelet"] = {"maxPods": 58, "shutdownGracePeriod": "30s", "containerLogMaxSize": "50Mi"}
    kubelet = parse_ec2nodeclass(doc).spec.kubelet
    assert kubelet is not None and kubelet.max_pods == 58
    assert kubelet.model_extra == {"shutdownGracePeriod": "30s", "containerLogMaxSize": "50Mi"}
    assert parse_ec2nodeclass(doc).to_manifest()["spec"]["kubelet"] == doc["spec"]["kubelet"]
    doc["spec"]["kubelet"]["registerWithTaints"] = []
    with pytest.raises(NodewrightValidationError) as info:
        parse_ec2nodeclass(doc)
    assert str(info.value) == ("spec.kubelet.registerWithTaints: can't be set: Karpenter sets it from the NodeClaim's "
                               "taints so the node registers unschedulable until it is ready")
