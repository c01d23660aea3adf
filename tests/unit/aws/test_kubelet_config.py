"""EC2NodeClass ``spec.kubelet`` reaches the node, and Karpenter v1.15's kubelet CEL expressions (``NodeClassCEL``).

Before this change only ``maxPods`` and ``clusterDNS`` reached the launched node: ``kubeReserved``,
``systemReserved``, eviction thresholds and the extended fields changed what the scheduler counted as allocatable,
while the kubelet ran with the AMI's defaults.
"""

from __future__ import annotations

import base64
import dataclasses

import boto3
import pytest

from aws.conftest import REGION, make_provider, nodeclaim, nodeclass, stubbed_pricing
from nodewright.cloud import kubeletexpr
from nodewright.cloud.aws import userdata
from nodewright.cloud.aws.provider import AWSCloudProvider
from nodewright.cloud.catalog import instance_type_records, load_instance_types
from nodewright.cloud.kubeletexpr import KubeletExpressionError, TypeVars
from nodewright.cloud.overhead import KubeletSettings
from nodewright.cloud.provider import NodeClassNotReadyError
from nodewright.errors import NodewrightValidationError
from nodewright.settings import AwsFeatureGates, load_settings, parse_aws_feature_gates

MIB = 1024 * 1024
M5_LARGE = TypeVars("m5.large", vcpus=2, memory_mib=8192, default_enis=3, ips_per_eni=10, max_pods=29)


# --- expressions --------------------------------------------------------------------------------------------


def test_expressions_of_karpenters_docs_evaluate_with_its_rounding() -> None:
    assert kubeletexpr.evaluate("kubelet.maxPods", "((default_enis - 1) * (ips_per_eni - 1)) + 2", M5_LARGE) == 20
    assert kubeletexpr.evaluate("kubelet.maxPods", "min(110, max_pods)", M5_LARGE) == 29
    assert kubeletexpr.resolve_reserved("kubeReserved", {"cpu": "max(60, vcpus * 30)", "memory": "11 * max_pods + 255",
                                                         "ephemeral-storage": "1Gi", "pid": "vcpus * 1000"},
                                        M5_LARGE) == {"cpu": "60m", "memory": "576Mi",  # 574 -> up to 16 Mi
                                                      "ephemeral-storage": "1Gi", "pid": "2000"}
    assert kubeletexpr.resolve_reserved("systemReserved", {"cpu": "vcpus * 10 + 1", "memory": "memory_mib / 64",
                                                           "ephemeral-storage": "vcpus > 1 ? 2.7 : 1"},
                                        M5_LARGE) == {"cpu": "30m", "memory": "128Mi", "ephemeral-storage": "2Gi"}


@pytest.mark.parametrize(("expression", "reason", "says"), [
    ("vcpus +", "KubeletExpressionInvalid", "does not compile"),
    ("vcpu * 2", "KubeletExpressionInvalid", "unknown variable(s) vcpu"),
    ("vcpus > 2", "KubeletExpressionInvalid", "must return int or double, not bool"),
    ("instance_type", "KubeletExpressionInvalid", "must return int or double, not str"),
    ("vcpus - 4", "KubeletExpressionEvalFailed", "returns -2 on m5.large; it must not be negative"),
    ("1.0 / 0.0", "KubeletExpressionEvalFailed", "returns inf on m5.large"),
])
def test_a_bad_expression_names_the_field_and_karpenters_reason(expression: str, reason: str, says: str) -> None:
    with pytest.raises(KubeletExpressionError) as info:
        kubeletexpr.evaluate("kubelet.kubeReserved.cpu", expression, M5_LARGE)
    assert info.value.reason == reason
    assert str(info.value).startswith(f"kubelet.kubeReserved.cpu: expression {expression!r}")
    assert says in str(info.value)


def test_catalog_types_get_their_own_values() -> None:
    """One class, a heterogeneous fleet: maxPods and the reservations follow each type."""
    static = {t.name: t for t in load_instance_types(REGION)}
    dynamic = {t.name: t for t in load_instance_types(
        REGION, max_pods="min(20, max_pods)",
        kube_reserved={"cpu": "max(60, vcpus * 30)", "memory": "11 * max_pods + 255"})}
    assert static["m5.large"].capacity["pods"] == 29 and static["m5.4xlarge"].capacity["pods"] == 234
    assert dynamic["m5.large"].capacity["pods"] == 20 and dynamic["m5.4xlarge"].capacity["pods"] == 20
    assert dynamic["m5.large"].overhead.kube_reserved["cpu"] == 60
    assert dynamic["m5.4xlarge"].overhead.kube_reserved["cpu"] == 480
    assert dynamic["m5.4xlarge"].overhead.kube_reserved["memory"] == 480 * MIB  # 11 x 20 + 255 = 475 -> 480 Mi
    assert static["m5.4xlarge"].overhead.kube_reserved["cpu"] == 110


# --- the node gets what was counted -------------------------------------------------------------------------

KUBELET = {"maxPods": 40, "podsPerCore": 8, "kubeReserved": {"cpu": "200m", "memory": "1Gi"},
           "systemReserved": {"memory": "300Mi"}, "evictionHard": {"memory.available": "5%"},
           "evictionSoft": {"memory.available": "10%"}, "evictionSoftGracePeriod": {"memory.available": "1m0s"},
           "evictionMaxPodGracePeriod": 30, "imageGCHighThresholdPercent": 80, "imageGCLowThresholdPercent": 60,
           "cpuCFSQuota": False}


def _options(**kubelet: object) -> userdata.BootstrapOptions:
    return userdata.BootstrapOptions(cluster_name="demo", cluster_endpoint="https://example", max_pods=40,
                                     kubelet=kubelet)


def test_al2_passes_every_mapped_field_as_kubelet_flags() -> None:
    config = {k: v for k, v in KUBELET.items() if k != "maxPods"}
    text = userdata.al2_user_data(_options(**config))
    assert ("--max-pods=40 --pods-per-core=8 --system-reserved=memory=300Mi --kube-reserved=cpu=200m,memory=1Gi "
            "--eviction-hard=memory.available<5% --eviction-soft=memory.available<10% "
            "--eviction-soft-grace-period=memory.available=1m0s --eviction-max-pod-grace-period=30 "
            "--image-gc-high-threshold=80 --image-gc-low-threshold=60 --cpu-cfs-quota=false") in text


def test_bottlerocket_sets_its_kubernetes_settings() -> None:
    config = {k: v for k, v in KUBELET.items() if k not in ("maxPods", "podsPerCore")}
    text = userdata.bottlerocket_user_data(_options(**config))
    for line in ('max-pods = 40', 'eviction-max-pod-grace-period = 30', 'image-gc-high-threshold-percent = "80"',
                 'image-gc-low-threshold-percent = "60"', 'cpu-cfs-quota-enforced = false',
                 '[settings.kubernetes.kube-reserved]\ncpu = "200m"\nmemory = "1Gi"',
                 '[settings.kubernetes.eviction-hard]\n"memory.available" = "5%"'):
        assert line in text, line


def test_unsupported_fields_per_family() -> None:
    assert userdata.unsupported_kubelet_fields("AL2023", {"registryPullQPS": 10}) == []
    assert userdata.unsupported_kubelet_fields("Custom", {"registryPullQPS": 10}) == []
    assert userdata.unsupported_kubelet_fields("Bottlerocket", {"registryPullQPS": 10, "podsPerCore": 4,
                                                                "clusterDNS": ["10.0.0.10", "10.0.0.11"]}) == [
        "kubelet.registryPullQPS: not supported on Bottlerocket (only AL2023 applies fields beyond clusterDNS, "
        "maxPods, podsPerCore, systemReserved, kubeReserved, evictionHard, evictionSoft, evictionSoftGracePeriod, "
        "evictionMaxPodGracePeriod, imageGCHighThresholdPercent, imageGCLowThresholdPercent, cpuCFSQuota)",
        "kubelet.podsPerCore: Bottlerocket does not apply podsPerCore",
        "kubelet.clusterDNS: Bottlerocket takes one address, got 2"]


def _templates() -> list[str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    texts = []
    for template in ec2.describe_launch_templates()["LaunchTemplates"]:
        data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"]
        texts.append(base64.b64decode(data["UserData"]).decode())
    return texts


def _cel_provider(cluster: object, enabled: bool = True, **kubelet: object) -> AWSCloudProvider:
    provider = make_provider({"default": nodeclass(kubelet=kubelet)}, stubbed_pricing()[0])
    provider.settings = dataclasses.replace(provider.settings, node_class_cel=enabled)
    return provider


def test_al2023_launch_template_carries_the_kubelet_config_the_scheduler_counted(cluster: object) -> None:
    provider = _cel_provider(cluster, kubeReserved={"cpu": "250m"}, registryPullQPS=10,
                             evictionHard={"memory.available": "200Mi"})
    launched = provider.create(nodeclaim(types=("c5.large",)))
    (text,) = _templates()
    assert ("    config:\n      kubeReserved:\n        cpu: 250m\n      evictionHard:\n        memory.available: 200Mi\n"
            "      registryPullQPS: 10\n      maxPods: 29\n") in text
    assert launched.status.allocatable["cpu"] == "1750m"  # 2000m - the 250m the kubelet is told to reserve


def test_expressions_are_resolved_per_launched_type_into_its_own_template(cluster: object) -> None:
    provider = _cel_provider(cluster, maxPods="min(20, max_pods)", kubeReserved={"cpu": "max(60, vcpus * 30)"})
    assert provider.nodeclass_status(nodeclass())["conditions"][0]["status"] == "True"  # type: ignore[index]
    provider.create(nodeclaim(types=("c5.large",)))
    provider.create(nodeclaim(name="default-big01", types=("m5.xlarge",)))
    texts = sorted(_templates())
    assert len(texts) == 2
    assert [("maxPods: 20" in t, "cpu: 60m" in t, "cpu: 120m" in t) for t in texts] in (
        [(True, True, False), (True, False, True)], [(True, False, True), (True, True, False)])


@pytest.mark.parametrize(("kubelet", "enabled", "reason", "says"), [
    ({"maxPods": "min(20, max_pods)"}, False, "KubeletExpressionsDisabled",
     "kubelet.maxPods use CEL expressions, which need the AWS feature gate NodeClassCEL"),
    ({"kubeReserved": {"cpu": "vcpus *"}}, True, "KubeletExpressionInvalid",
     "kubelet.kubeReserved.cpu: expression 'vcpus *' does not compile"),
    ({"systemReserved": {"memory": "memory_mib - 8193"}}, True, "KubeletExpressionEvalFailed",
     "kubelet.systemReserved.memory: expression 'memory_mib - 8193' returns"),
])
def test_a_class_whose_kubelet_cannot_work_is_not_ready_with_karpenters_reason(
        cluster: object, kubelet: dict, enabled: bool, reason: str, says: str) -> None:
    provider = _cel_provider(cluster, enabled, **kubelet)
    (ready,) = provider.nodeclass_status(nodeclass(kubelet=kubelet))["conditions"]  # type: ignore[misc]
    assert (ready["status"], ready["reason"]) == ("False", reason)
    assert ready["message"].startswith("EC2NodeClass 'default': ") and says in ready["message"]
    with pytest.raises(NodeClassNotReadyError):  # and nothing launches from it
        provider.create(nodeclaim(types=("c5.large",)))


def test_bottlerocket_class_with_an_al2023_only_field_is_not_ready(cluster: object) -> None:
    provider = make_provider({}, stubbed_pricing()[0])
    spec = nodeclass(alias="bottlerocket@latest", kubelet={"registryPullQPS": 10})
    (ready,) = provider.nodeclass_status(spec)["conditions"]  # type: ignore[misc]
    assert (ready["status"], ready["reason"]) == ("False", "UnsupportedKubeletConfiguration")
    assert "kubelet.registryPullQPS: not supported on Bottlerocket" in ready["message"]


# --- settings -----------------------------------------------------------------------------------------------


def test_aws_feature_gates_setting() -> None:
    assert load_settings({"CLUSTER_NAME": "demo", "AWS_REGION": REGION}).aws_feature_gates == AwsFeatureGates()
    assert load_settings({"CLUSTER_NAME": "demo", "AWS_REGION": REGION,
                          "AWS_FEATURE_GATES": "NodeClassCEL=true"}).aws_feature_gates.node_class_cel
    with pytest.raises(NodewrightValidationError) as info:
        parse_aws_feature_gates("NodeRepair=true")
    assert str(info.value) == "AWS_FEATURE_GATES: unknown feature gate 'NodeRepair'; known gates: NodeClassCEL, RebootForRepair"


def test_settings_without_expressions_are_returned_unchanged() -> None:
    settings = KubeletSettings(max_pods=30, kube_reserved={"cpu": "100m"})
    assert settings.for_type(instance_type_records()["m5.large"]) is settings


# --- simulate -----------------------------------------------------------------------------------------------


def test_simulate_evaluates_expressions_per_type_and_says_run_needs_the_gate(tmp_path: object) -> None:
    """maxPods ``min(4, max_pods)`` on an m5 pool: 8 pods need two m5.large, where without it one would do."""
    from pathlib import Path

    from click.testing import CliRunner

    from nodewright.cli import cli

    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "kubelet-cel.yaml"
    out = CliRunner().invoke(cli, ["simulate", "-f", str(fixture)])
    assert out.exit_code == 0, out.output
    assert out.output.count("m5.large       on-demand") == 2
    assert "2 new node(s) for 8 pod(s)" in out.output and "total $0.1920/h" in out.output
    assert ("kubelet-cel.yaml#documents[0].spec.kubelet.maxPods: a CEL expression: simulate evaluates it per instance "
            "type; nodewright run needs the AWS feature gate NodeClassCEL=true") in out.output
    bad = Path(str(tmp_path)) / "bad.yaml"
    bad.write_text(fixture.read_text().replace("min(4, max_pods)", "min(4, max_podz)"))
    out = CliRunner().invoke(cli, ["simulate", "-f", str(bad)])
    assert ("kubelet.maxPods: expression 'min(4, max_podz)' names unknown variable(s) max_podz; available: "
            "instance_type, vcpus, memory_mib, default_enis, ips_per_eni, max_pods") in out.output
    assert "Traceback" not in out.output
