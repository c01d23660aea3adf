"""Pure building blocks of the stacks: subnet plan, Helm values, Kubernetes manifests."""

from __future__ import annotations

import ipaddress

import kubernetes_validate
import pytest

from stacks.addons import IRSA_ANNOTATION, nodewright_values
from stacks.network import subnet_cidrs
from stacks.settings import load_settings
from stacks.workloads import (
    deployment_manifest,
    namespace_manifest,
    pod_disruption_budget_manifest,
    scaled_object_manifest,
)


def test_subnet_plan_for_the_default_vpc():
    assert subnet_cidrs("10.0.0.0/16", 3) == (
        ["10.0.0.0/18", "10.0.64.0/18", "10.0.128.0/18"],
        ["10.0.192.0/20", "10.0.208.0/20", "10.0.224.0/20"],
    )


@pytest.mark.parametrize(("cidr", "zones", "private_prefix", "public_prefix"), [
    ("10.0.0.0/16", 2, 18, 19),
    ("172.16.0.0/20", 3, 22, 24),
    ("10.8.0.0/22", 4, 25, 27),
])
def test_subnets_are_disjoint_inside_the_vpc(cidr, zones, private_prefix, public_prefix):
    private, public = subnet_cidrs(cidr, zones)
    nets = [ipaddress.IPv4Network(c) for c in private + public]
    assert len(private) == len(public) == zones
    assert {n.prefixlen for n in nets[:zones]} == {private_prefix}
    assert {n.prefixlen for n in nets[zones:]} == {public_prefix}
    vpc = ipaddress.IPv4Network(cidr)
    assert all(n.subnet_of(vpc) for n in nets)
    assert not any(a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1:])


def test_helm_values_follow_the_chart_contract():
    values = nodewright_values(load_settings({"image": {"digest": "sha256:" + "a" * 64}}),
                               cluster_endpoint="https://api", queue_name="q", controller_role_arn="arn:role",
                               node_role_name="node-role")
    assert values == {
        "settings": {"clusterName": "nodewright", "clusterEndpoint": "https://api", "interruptionQueue": "q",
                     "awsRegion": "ap-northeast-2"},
        "serviceAccount": {"name": "nodewright", "annotations": {IRSA_ANNOTATION: "arn:role"}},
        "nodeRole": "node-role",
        "image": {"repository": "nodewright", "tag": "0.1.0", "digest": "sha256:" + "a" * 64},
    }


def test_pod_identity_values_carry_no_irsa_annotation():
    values = nodewright_values(load_settings({"identity_mode": "pod-identity"}), cluster_endpoint="e",
                               queue_name="q", controller_role_arn="arn:role", node_role_name="n")
    assert values["serviceAccount"] == {"name": "nodewright", "annotations": {}}


def test_scaled_object_has_the_cron_and_cpu_triggers():
    scaled = scaled_object_manifest(load_settings().workload)
    assert scaled["apiVersion"] == "keda.sh/v1alpha1"
    assert scaled["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "storefront"}
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (2, 30)
    cron, cpu = scaled["spec"]["triggers"]
    assert cron == {"type": "cron", "name": "daily-event",
                    "metadata": {"timezone": "Asia/Seoul", "start": "50 19 * * *", "end": "30 21 * * *",
                                 "desiredReplicas": "12"}}
    assert cpu == {"type": "cpu", "name": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}


def test_sample_service_targets_the_service_nodepool_and_tolerates_its_taint():
    spec = deployment_manifest(load_settings().workload)["spec"]
    pod = spec["template"]["spec"]
    assert "replicas" not in spec  # KEDA's HPA owns it
    assert pod["nodeSelector"] == {"karpenter.sh/nodepool": "service"}
    assert pod["tolerations"] == [{"key": "nodewright.io/priority", "operator": "Equal", "value": "service",
                                   "effect": "NoSchedule"}]
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}


@pytest.mark.parametrize("build", [namespace_manifest, deployment_manifest, pod_disruption_budget_manifest])
def test_kubernetes_manifests_validate_against_the_api_schema(build):
    kubernetes_validate.validate(build(load_settings().workload), "1.34", strict=True)
