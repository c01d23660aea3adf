"""Cluster facts for node bootstrap (endpoint, CA bundle, service CIDR): settings first, eks:DescribeCluster for the
rest; Stubber for exact AWS answers and denials, moto's EKS for the real request/response round trip."""

from __future__ import annotations

import base64
import logging
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from aws.conftest import CLUSTER, REGION, Cluster, nodeclaim, nodeclass, stubbed_pricing
from nodewright.cloud.aws.clients import AWSClients, ClientSettings
from nodewright.cloud.aws.cluster import (
    ClusterDiscoveryError,
    ClusterFacts,
    configured_facts,
    describe_cluster,
    resolve_cluster_facts,
    service_cidr_of,
)
from nodewright.cloud.aws.provider import AWSCloudProvider, AWSProviderSettings
from nodewright.cloud.provider import AuthorizationError
from nodewright.errors import NodewrightValidationError
from nodewright.settings import load_settings

ENDPOINT = "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com"
PEM = "-----BEGIN CERTIFICATE-----\nMIIBtestCERT\n-----END CERTIFICATE-----"
CA = base64.b64encode((PEM + "\n").encode()).decode()
HINT = ("or set CLUSTER_ENDPOINT, CLUSTER_CA_BUNDLE and CLUSTER_CIDR (chart values settings.clusterEndpoint, "
        "settings.clusterCABundle, settings.clusterCIDR)")


def stubbed_eks() -> tuple[Any, Stubber]:
    client = boto3.client("eks", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    stubber = Stubber(client)
    stubber.activate()
    return client, stubber


def clients_with(eks: Any) -> AWSClients:
    return AWSClients(ClientSettings(REGION), overrides={"eks": eks})


def cluster_answer(network: dict[str, str], status: str = "ACTIVE", endpoint: str = ENDPOINT,
                   ca: str = CA) -> dict[str, Any]:
    cluster: dict[str, Any] = {"name": CLUSTER, "status": status, "kubernetesNetworkConfig": network}
    if endpoint:
        cluster["endpoint"] = endpoint
    if ca:
        cluster["certificateAuthority"] = {"data": ca}
    return {"cluster": cluster}


def test_describe_cluster_reads_endpoint_ca_and_ipv4_service_cidr() -> None:
    eks, stubber = stubbed_eks()
    stubber.add_response("describe_cluster", cluster_answer(
        {"serviceIpv4Cidr": "10.100.0.0/16", "ipFamily": "ipv4"}), {"name": CLUSTER})
    assert describe_cluster(eks, CLUSTER, REGION) == ClusterFacts(ENDPOINT, CA, "10.100.0.0/16")
    stubber.assert_no_pending_responses()


def test_ipv6_cluster_uses_the_ipv6_service_cidr() -> None:
    assert service_cidr_of({"ipFamily": "ipv6", "serviceIpv4Cidr": "172.20.0.0/16",
                            "serviceIpv6Cidr": "fd30:1c53:5f8a::/108"}) == "fd30:1c53:5f8a::/108"
    assert service_cidr_of({"serviceIpv6Cidr": "fd30:1c53:5f8a::/108"}) == "fd30:1c53:5f8a::/108"
    assert service_cidr_of({"serviceIpv4Cidr": "172.20.0.0/16", "serviceIpv6Cidr": "fd30::/108"}) == "172.20.0.0/16"
    assert service_cidr_of({}) == ""


def test_fully_configured_facts_make_no_aws_call() -> None:
    eks, stubber = stubbed_eks()  # no responses queued: any call would raise
    configured = configured_facts(ENDPOINT, CA, "10.100.0.0/16")
    assert resolve_cluster_facts(clients_with(eks), CLUSTER, configured) is configured


def test_configured_values_win_and_describe_cluster_fills_the_rest() -> None:
    eks, stubber = stubbed_eks()
    stubber.add_response("describe_cluster", cluster_answer(
        {"serviceIpv4Cidr": "172.20.0.0/16"}, endpoint="https://discovered.example"), {"name": CLUSTER})
    configured = configured_facts(ENDPOINT, "", "10.100.0.0/16")
    assert resolve_cluster_facts(clients_with(eks), CLUSTER, configured) == ClusterFacts(ENDPOINT, CA, "10.100.0.0/16")
    stubber.assert_no_pending_responses()


def test_denied_describe_cluster_is_one_actionable_sentence(caplog: pytest.LogCaptureFixture) -> None:
    eks, stubber = stubbed_eks()
    stubber.add_client_error(
        "describe_cluster", service_error_code="AccessDeniedException", http_status_code=403,
        service_message="User: arn:aws:sts::111122223333:assumed-role/nodewright/botocore-session-1 is not "
                        "authorized to perform: eks:DescribeCluster on resource: "
                        "arn:aws:eks:us-east-1:111122223333:cluster/demo")
    with caplog.at_level(logging.ERROR, logger="nodewright.cloud.aws.cluster"), \
            pytest.raises(AuthorizationError) as raised:
        resolve_cluster_facts(clients_with(eks), CLUSTER, configured_facts(ENDPOINT))
    sentence = ("the controller role arn:aws:iam::111122223333:role/nodewright may not eks:DescribeCluster on "
                "arn:aws:eks:us-east-1:111122223333:cluster/demo: add eks:DescribeCluster on that resource to the "
                f"controller role's policy; {HINT}")
    assert str(raised.value) == sentence
    err = raised.value
    assert (err.action, err.resource, err.principal, err.code, err.retryable) == (
        "eks:DescribeCluster", "arn:aws:eks:us-east-1:111122223333:cluster/demo",
        "arn:aws:iam::111122223333:role/nodewright", "AccessDeniedException", False)
    assert [r.getMessage() for r in caplog.records] == [sentence]


def test_missing_cluster_names_cluster_region_and_fix() -> None:
    eks, stubber = stubbed_eks()
    stubber.add_client_error("describe_cluster", service_error_code="ResourceNotFoundException",
                             service_message="No cluster found for name: demo.", http_status_code=404)
    with pytest.raises(ClusterDiscoveryError) as raised:
        resolve_cluster_facts(clients_with(eks), CLUSTER, ClusterFacts())
    assert str(raised.value) == f"EKS cluster 'demo' not found in us-east-1: check CLUSTER_NAME and AWS_REGION, {HINT}"


def test_other_aws_failures_carry_code_and_message() -> None:
    eks, stubber = stubbed_eks()
    stubber.add_client_error("describe_cluster", service_error_code="ServerException",
                             service_message="internal failure", http_status_code=500)
    with pytest.raises(ClusterDiscoveryError) as raised:
        describe_cluster(eks, CLUSTER, REGION)
    assert str(raised.value) == f"eks:DescribeCluster 'demo' in us-east-1 failed: ServerException: internal failure; {HINT}"


def test_creating_cluster_without_endpoint_or_ca_is_an_error() -> None:
    eks, stubber = stubbed_eks()
    stubber.add_response("describe_cluster", cluster_answer({"serviceIpv4Cidr": "10.100.0.0/16"}, status="CREATING",
                                                            endpoint="", ca=""), {"name": CLUSTER})
    with pytest.raises(ClusterDiscoveryError) as raised:
        resolve_cluster_facts(clients_with(eks), CLUSTER, ClusterFacts())
    assert str(raised.value) == (f"eks:DescribeCluster 'demo' in us-east-1 returned no endpoint, ca_bundle "
                                 f"(is the cluster ACTIVE?); {HINT}")


def test_configured_values_are_validated_and_normalised() -> None:
    facts = configured_facts(ENDPOINT + "/", PEM, "10.100.7.9/16")
    assert facts == ClusterFacts(ENDPOINT, CA, "10.100.0.0/16")  # PEM encoded, host bits cleared, slash dropped
    assert configured_facts("", CA[:20] + "\n" + CA[20:], "").ca_bundle == CA  # wrapped base64 is unwrapped
    assert configured_facts("", "", "fd30:1c53:5f8a:0:0:0:0:0/108").service_cidr == "fd30:1c53:5f8a::/108"
    with pytest.raises(NodewrightValidationError, match=r"^CLUSTER_CA_BUNDLE: is neither a PEM certificate"):
        configured_facts(ca_bundle="not base64!")
    with pytest.raises(NodewrightValidationError, match=r"^CLUSTER_CA_BUNDLE: decodes from base64 but holds no PEM"):
        configured_facts(ca_bundle=base64.b64encode(b"CA-DATA").decode())
    with pytest.raises(NodewrightValidationError, match=r"^CLUSTER_CIDR: '10.100.0.0/33' is not a CIDR"):
        configured_facts(service_cidr="10.100.0.0/33")
    with pytest.raises(NodewrightValidationError, match=r"^CLUSTER_ENDPOINT: 'http://api' must be an https:// URL"):
        configured_facts(endpoint="http://api")


def test_settings_read_ca_bundle_and_cidr_from_karpenter_style_env() -> None:
    settings = load_settings({"CLUSTER_NAME": CLUSTER, "AWS_REGION": REGION, "CLUSTER_CA_BUNDLE": CA,
                              "CLUSTER_CIDR": "10.100.0.0/16"})
    assert (settings.cluster_ca_bundle, settings.cluster_cidr) == (CA, "10.100.0.0/16")
    flagged = load_settings({"CLUSTER_NAME": CLUSTER, "AWS_REGION": REGION, "CLUSTER_CIDR": "10.1.0.0/16"},
                            {"cluster_cidr": "10.2.0.0/16"})
    assert flagged.cluster_cidr == "10.2.0.0/16"  # a flag wins over its environment variable


def test_moto_eks_round_trip_feeds_the_nodeadm_node_config(cluster: Cluster) -> None:
    eks = boto3.client("eks", region_name=REGION)
    eks.create_cluster(name=CLUSTER, roleArn=cluster.role_arn,
                       resourcesVpcConfig={"subnetIds": list(cluster.subnets.values())},
                       kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"})
    described = eks.describe_cluster(name=CLUSTER)["cluster"]
    clients = AWSClients(ClientSettings(REGION))
    facts = resolve_cluster_facts(clients, CLUSTER, ClusterFacts())
    assert facts == ClusterFacts(described["endpoint"], described["certificateAuthority"]["data"], "10.100.0.0/16")

    # The resolved facts reach the AL2023 userData exactly as runtime.build_runtime wires them.
    pricing, _ = stubbed_pricing()
    settings = AWSProviderSettings(CLUSTER, facts.endpoint, REGION, "1.31", ca_bundle=facts.ca_bundle,
                                   cluster_cidr=facts.service_cidr, instance_type_patterns=("c5.large",))
    provider = AWSCloudProvider(settings, AWSClients(ClientSettings(REGION), overrides={"pricing": pricing}),
                                {"default": nodeclass()}.get)
    provider.create(nodeclaim(types=("c5.large",)))
    ec2 = boto3.client("ec2", region_name=REGION)
    template = ec2.describe_launch_templates()["LaunchTemplates"][0]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    user_data = base64.b64decode(data["UserData"]).decode()
    assert f"apiServerEndpoint: {facts.endpoint}\n" in user_data
    assert f"certificateAuthority: {facts.ca_bundle}\n" in user_data
    assert "cidr: 10.100.0.0/16\n" in user_data
