"""NodePools and EC2NodeClasses from values: the three priority pools, and pools changed by users."""

from __future__ import annotations

import pytest
from chart_helpers import find, one, render_chart

pytestmark = pytest.mark.chart

ARM64 = {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}
SPOT = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
ON_DEMAND = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}


def _gen(value: str) -> dict:
    return {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": [value]}


def _category(*values: str) -> dict:
    return {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": list(values)}


def _cpu(*values: str) -> dict:
    return {"key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": list(values)}


def _template(pool: dict) -> dict:
    return pool["spec"]["template"]


def test_the_three_priority_pools_exist(rendered):
    pools = find(rendered["minimal"], "NodePool")
    assert [p["metadata"]["name"] for p in pools] == ["low-spot", "platform", "service"]
    assert all(p["apiVersion"] == "karpenter.sh/v1" for p in pools)


def test_low_spot_pool(rendered):
    pool = one(rendered["minimal"], "NodePool", "low-spot")
    template = _template(pool)
    assert template["spec"]["requirements"] == [ARM64, SPOT, _category("m", "r"), _cpu("8"), _gen("5")]
    assert template["spec"]["taints"] == [{"key": "nodewright.io/priority", "value": "low", "effect": "NoSchedule"}]
    assert template["metadata"]["labels"] == {"priority": "low"}
    assert template["spec"]["expireAfter"] == "168h"
    assert template["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "low-spot"}
    assert pool["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "15m",
                                          "budgets": [{"nodes": "10%"}]}
    assert pool["spec"]["limits"] == {"cpu": "1000", "memory": "1000Gi"}
    assert pool["spec"]["weight"] == 30


def test_platform_pool_is_untainted(rendered):
    pool = one(rendered["minimal"], "NodePool", "platform")
    template = _template(pool)
    assert template["spec"]["requirements"] == [ARM64, ON_DEMAND, _category("m", "r"), _cpu("4", "8"), _gen("6")]
    # Public charts without tolerations must land here: no taints, no startup taints.
    assert "taints" not in template["spec"] and "startupTaints" not in template["spec"]
    assert template["metadata"]["labels"] == {"priority": "platform"}
    assert pool["spec"]["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    assert pool["spec"]["limits"] == {"cpu": "200", "memory": "800Gi"}
    assert pool["spec"]["weight"] == 10


def test_service_pool(rendered):
    pool = one(rendered["minimal"], "NodePool", "service")
    template = _template(pool)
    assert template["spec"]["requirements"] == [ARM64, ON_DEMAND, _category("m", "c", "r"), _gen("6")]
    assert template["spec"]["taints"] == [{"key": "nodewright.io/priority", "value": "service", "effect": "NoSchedule"}]
    assert template["metadata"]["labels"] == {"priority": "service"}
    assert pool["metadata"]["annotations"] == {"nodewright.io/target-utilization": "0.8"}
    assert pool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "10m",
        # No disruption at all on weekdays 09:00-18:00 (UTC cron), 10% of nodes otherwise.
        "budgets": [{"nodes": "10%"}, {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "9h"}],
    }
    assert pool["spec"]["limits"] == {"cpu": "500", "memory": "2000Gi"}


def test_production_overrides_the_service_budget_for_seoul_business_hours(rendered):
    pool = one(rendered["production"], "NodePool", "service")
    assert pool["spec"]["disruption"]["budgets"] == [
        {"nodes": "10%"}, {"nodes": "0", "schedule": "0 0 * * mon-fri", "duration": "9h"}
    ]
    assert pool["spec"]["limits"] == {"cpu": "800", "memory": "3200Gi"}
    # Untouched keys keep their defaults (helm merges maps).
    assert _template(pool)["spec"]["taints"][0]["value"] == "service"


def test_spot_pools_are_tainted_and_every_pool_has_limits(rendered):
    for variant, docs in rendered.items():
        for pool in find(docs, "NodePool"):
            assert {"cpu", "memory"} <= set(pool["spec"]["limits"]), (variant, pool["metadata"]["name"])
            spot = any(r["key"] == "karpenter.sh/capacity-type" and "spot" in r.get("values", [])
                       for r in _template(pool)["spec"]["requirements"])
            if spot:
                assert any(t["effect"] == "NoSchedule" for t in _template(pool)["spec"].get("taints", []))


def test_ec2nodeclasses_for_the_default_pools(rendered):
    classes = find(rendered["minimal"], "EC2NodeClass")
    assert [c["metadata"]["name"] for c in classes] == ["low-spot", "platform", "service"]
    discovery = [{"tags": {"karpenter.sh/discovery": "nodewright"}}]
    for node_class in classes:
        assert node_class["apiVersion"] == "karpenter.k8s.aws/v1"
        assert node_class["spec"] == {
            "role": "nodewright-nodewright-node",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": discovery,
            "securityGroupSelectorTerms": discovery,
            "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                                "httpPutResponseHopLimit": 1, "httpTokens": "required"},
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {
                "volumeSize": "50Gi", "volumeType": "gp3", "encrypted": True, "deleteOnTermination": True}}],
        }


def test_node_role_falls_back_to_the_stacks_naming(render):
    docs = render("nodeRole=", variant="minimal")
    assert {c["spec"]["role"] for c in find(docs, "EC2NodeClass")} == {"nodewright-nodewright-node"}
    docs = render("nodeRole=", "settings.clusterName=blue", variant="minimal")
    assert {c["spec"]["role"] for c in find(docs, "EC2NodeClass")} == {"blue-nodewright-node"}


def test_tags_from_defaults_reach_every_class(rendered):
    for node_class in find(rendered["production"], "EC2NodeClass"):
        assert node_class["spec"]["tags"] == {"team": "platform", "cost-center": "4711"}
        assert node_class["spec"]["role"] == "prod-apne2-nodewright-node"


def test_bottlerocket_classes(rendered):
    for node_class in find(rendered["bottlerocket"], "EC2NodeClass"):
        spec = node_class["spec"]
        assert spec["amiSelectorTerms"] == [{"alias": "bottlerocket@latest"}]
        assert spec["userData"] == ('[settings.kubernetes]\nkube-api-qps = 30\n'
                                    '[settings.kubernetes.eviction-hard]\n"memory.available" = "10%"\n')
        assert [(b["deviceName"], b["ebs"]["volumeSize"], b.get("rootVolume")) for b in spec["blockDeviceMappings"]] == [
            ("/dev/xvda", "4Gi", None), ("/dev/xvdb", "40Gi", True)]
        assert spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "eksworkshop"}}]


def test_pools_switched_off_changed_and_added(rendered):
    docs = rendered["custom-pools"]
    assert [p["metadata"]["name"] for p in find(docs, "NodePool")] == ["platform", "service", "team1"]
    # team1 reuses the platform class, so only platform and service get classes of their own.
    assert [c["metadata"]["name"] for c in find(docs, "EC2NodeClass")] == ["platform", "service"]
    team1 = one(docs, "NodePool", "team1")
    assert _template(team1) == {
        "metadata": {"labels": {"intent": "apps"}},
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "platform"},
            "requirements": [ON_DEMAND, {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            "taints": [{"key": "team1", "effect": "NoSchedule"}],
            "expireAfter": "720h",
        },
    }
    assert team1["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s",
                                           "budgets": [{"nodes": "10%"}]}
    assert "weight" not in team1["spec"]
    assert team1["metadata"]["annotations"] == {"nodewright.io/target-utilization": "75%"}
    platform = one(docs, "NodePool", "platform")
    assert platform["spec"]["limits"] == {"cpu": "64", "memory": "256Gi"}
    platform_class = one(docs, "EC2NodeClass", "platform")["spec"]
    # The pool's nodeClass overrides lists and keeps the defaults it does not mention.
    assert platform_class["subnetSelectorTerms"] == [
        {"tags": {"karpenter.sh/discovery": "eksworkshop", "kubernetes.io/role/internal-elb": "1"}}]
    assert platform_class["securityGroupSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "eksworkshop"}}]
    assert platform_class["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "100Gi"
    assert one(docs, "EC2NodeClass", "service")["spec"]["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "50Gi"


def test_unconfigured_chart_renders_no_pools(rendered):
    # Without settings.clusterName there is nothing to discover subnets by: no pools, no classes.
    assert find(rendered["default"], "NodePool") == []
    assert find(rendered["default"], "EC2NodeClass") == []


def test_added_pool_is_on_without_enabled_and_needs_requirements_and_limits(helm, render):
    docs = render("nodePools.batch.requirements[0].key=karpenter.sh/capacity-type",
                  "nodePools.batch.requirements[0].operator=Exists",
                  "nodePools.batch.limits.cpu=16", "nodePools.batch.limits.memory=64Gi")
    batch = one(docs, "NodePool", "batch")
    assert _template(batch)["spec"]["requirements"] == [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}]
    assert batch["spec"]["limits"] == {"cpu": 16, "memory": "64Gi"}
    assert one(docs, "EC2NodeClass", "batch")["spec"]["role"] == "nodewright-nodewright-node"
    with pytest.raises(render_chart.HelmError, match="nodePools.batch.limits is required"):
        render("nodePools.batch.requirements[0].key=karpenter.sh/capacity-type",
               "nodePools.batch.requirements[0].operator=Exists")
    with pytest.raises(render_chart.HelmError, match="nodePools.batch.requirements is required"):
        render("nodePools.batch.limits.cpu=16")


def test_target_utilization_values_render_the_annotation(render):
    tu = "nodewright.io/target-utilization"
    docs = render("nodePools.platform.targetUtilization=0.75", "nodePools.low-spot.targetUtilization=80%")
    assert one(docs, "NodePool", "platform")["metadata"]["annotations"] == {tu: "0.75"}
    assert one(docs, "NodePool", "low-spot")["metadata"]["annotations"] == {tu: "80%"}
    assert one(docs, "NodePool", "service")["metadata"]["annotations"] == {tu: "0.8"}  # the default
    docs = render("nodePools.service.targetUtilization=null")
    assert "annotations" not in one(docs, "NodePool", "service")["metadata"]
    with pytest.raises(render_chart.HelmError, match=r"nodePools.service: set targetUtilization or annotations"):
        render("nodePools.service.annotations.nodewright\\.io/target-utilization=0.5")
