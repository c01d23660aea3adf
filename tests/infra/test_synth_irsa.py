"""The default app (IRSA, private endpoint, local state), synthesized once for this module.

``CdkTesting.to_have_resource_with_properties`` checks resources stack by stack; JSON assertions on
the synthesized documents check the wiring across stacks, following each cross-stack reference
back to the expression in the producing stack.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from cdktn import Testing as CdkTesting

from .conftest import ROOT, Synth, policy_of, statement, synthesize

pytestmark = pytest.mark.infra

CLUSTER = "nodewright"


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(tmp_path_factory.mktemp("irsa"))


def test_every_stack_lands_in_its_own_directory_with_dependencies(synth):
    manifest = json.loads((synth.outdir / "manifest.json").read_text())
    assert {name: sorted(stack["dependencies"]) for name, stack in manifest["stacks"].items()} == {
        "network": [], "interruption": [], "cluster": ["network"], "identity": ["cluster", "interruption"],
        "addons": ["cluster", "identity", "interruption"], "workloads": ["addons", "cluster"]}
    for name in manifest["stacks"]:
        assert (synth.outdir / "stacks" / name / "cdk.tf.json").is_file()


# --- network ---------------------------------------------------------------------------------------
def test_private_subnets_and_node_security_group_carry_the_discovery_tag(synth):
    subnets = synth.resources("network", "aws_subnet")
    private = {name: s for name, s in subnets.items() if name.startswith("private_")}
    public = {name: s for name, s in subnets.items() if name.startswith("public_")}
    assert [(s["cidr_block"], s["availability_zone"], s["tags"]["karpenter.sh/discovery"])
            for s in private.values()] == [
        ("10.0.0.0/18", "ap-northeast-2a", CLUSTER), ("10.0.64.0/18", "ap-northeast-2b", CLUSTER),
        ("10.0.128.0/18", "ap-northeast-2c", CLUSTER)]
    assert all("karpenter.sh/discovery" not in s["tags"] for s in public.values())
    assert all(s["map_public_ip_on_launch"] is False for s in public.values())
    sg = synth.resource("network", "aws_security_group", "node_sg")
    assert sg["tags"]["karpenter.sh/discovery"] == CLUSTER


def test_private_subnets_route_through_one_nat_gateway_per_zone(synth):
    routes = synth.resources("network", "aws_route")
    assert {name: r.get("nat_gateway_id") for name, r in routes.items() if name.startswith("private_")} == {
        f"private_{i}_default_route": f"${{aws_nat_gateway.nat_{i}.id}}" for i in range(3)}
    assert len(synth.resources("network", "aws_nat_gateway")) == 3


def test_vpc_flow_logs_go_to_an_encrypted_log_group_with_retention(synth):
    assert CdkTesting.to_have_resource_with_properties(synth.text["network"], "aws_flow_log", {
        "traffic_type": "ALL", "log_destination": "${aws_cloudwatch_log_group.flow_logs_group.arn}",
        "vpc_id": "${aws_vpc.vpc.id}"})
    assert CdkTesting.to_have_resource_with_properties(synth.text["network"], "aws_cloudwatch_log_group", {
        "name": f"/aws/vpc/{CLUSTER}/flow-logs", "retention_in_days": 365,
        "kms_key_id": "${aws_kms_key.flow_logs.arn}"})
    assert CdkTesting.to_have_resource_with_properties(synth.text["network"], "aws_kms_key", {
        "enable_key_rotation": True})


# --- cluster ---------------------------------------------------------------------------------------
def test_cluster_encrypts_secrets_logs_everything_and_keeps_the_endpoint_private(synth):
    assert CdkTesting.to_have_resource_with_properties(synth.text["cluster"], "aws_eks_cluster", {
        "name": CLUSTER, "version": "1.34",
        "enabled_cluster_log_types": ["api", "audit", "authenticator", "controllerManager", "scheduler"],
        "encryption_config": {"resources": ["secrets"],
                              "provider": {"key_arn": "${aws_kms_key.eks_secrets.arn}"}},
        "access_config": {"authentication_mode": "API"},
        "vpc_config": {"endpoint_private_access": True, "endpoint_public_access": False}})
    cluster = synth.resource("cluster", "aws_eks_cluster", "cluster")
    assert "public_access_cidrs" not in cluster["vpc_config"]
    assert "aws_cloudwatch_log_group.control_plane_logs" in cluster["depends_on"]
    keys = synth.resources("cluster", "aws_kms_key")
    assert {name: k["enable_key_rotation"] for name, k in keys.items()} == {"eks_secrets": True, "eks_logs": True}
    logs = synth.resource("cluster", "aws_cloudwatch_log_group", "control_plane_logs")
    assert (logs["name"], logs["retention_in_days"]) == (f"/aws/eks/{CLUSTER}/cluster", 365)


def test_cluster_subnets_come_from_the_network_stack(synth):
    cluster = synth.resource("cluster", "aws_eks_cluster", "cluster")
    produced = [synth.resolve(ref) for ref in cluster["vpc_config"]["subnet_ids"]]
    assert produced == [("network", f"${{aws_subnet.private_{i}.id}}") for i in range(3)]
    assert [synth.resolve(ref) for ref in cluster["vpc_config"]["security_group_ids"]] == [
        ("network", "${aws_security_group.node_sg.id}")]


def test_standard_addons_without_pod_identity_agent_in_irsa_mode(synth):
    addons = synth.resources("cluster", "aws_eks_addon")
    assert sorted(a["addon_name"] for a in addons.values()) == ["coredns", "kube-proxy", "vpc-cni"]
    assert addons["addon_coredns"]["depends_on"] == ["aws_eks_node_group.system_nodes"]


def test_system_node_group_is_small_on_demand_and_tainted(synth):
    assert CdkTesting.to_have_resource_with_properties(synth.text["cluster"], "aws_eks_node_group", {
        "capacity_type": "ON_DEMAND", "node_group_name": "system",
        "scaling_config": {"desired_size": 2, "min_size": 2, "max_size": 3},
        "taint": [{"key": "CriticalAddonsOnly", "value": "true", "effect": "NO_SCHEDULE"}]})
    template = synth.resource("cluster", "aws_launch_template", "system_nodes_lt")
    assert template["metadata_options"] == {"http_endpoint": "enabled", "http_tokens": "required",
                                            "http_put_response_hop_limit": 1}


# --- identity ----------------------------------------------------------------------------------------
def test_trust_policy_names_exactly_the_controller_service_account(synth):
    role = synth.resource("identity", "aws_iam_role", "controller_role")
    (stmt,) = policy_of(role, "assume_role_policy")["Statement"]
    assert stmt["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert stmt["Principal"] == {"Federated": "${aws_iam_openid_connect_provider.oidc_provider.arn}"}
    assert stmt["Condition"] == {"StringEquals": {
        "${local.oidc_issuer_host}:sub": "system:serviceaccount:kube-system:nodewright",
        "${local.oidc_issuer_host}:aud": "sts.amazonaws.com"}}
    issuer_ref = synth.docs["identity"]["locals"]["oidc_issuer_host"]
    assert issuer_ref.startswith("${replace(data.terraform_remote_state.cross-stack-reference-input-cluster.")
    provider = synth.resource("identity", "aws_iam_openid_connect_provider", "oidc_provider")
    assert provider["client_id_list"] == ["sts.amazonaws.com"]
    assert synth.resolve(provider["url"]) == ("cluster", "${aws_eks_cluster.cluster.identity[0].oidc[0].issuer}")


def test_pass_role_is_scoped_to_the_node_role_with_the_ec2_condition(synth):
    policy = policy_of(synth.resource("identity", "aws_iam_policy", "controller_iam_integration_policy"))
    passing = [s for s in policy["Statement"] if "iam:PassRole" in str(s["Action"])]
    assert passing == [{"Sid": "AllowPassingInstanceRole", "Effect": "Allow", "Action": "iam:PassRole",
                        "Resource": "${aws_iam_role.node_role.arn}",
                        "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}}]
    node_role = synth.resource("identity", "aws_iam_role", "node_role")
    assert node_role["name"] == "nodewright-nodewright-node"
    assert policy_of(node_role, "assume_role_policy")["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_controller_policy_references_the_real_queue_and_cluster(synth):
    def part(name: str) -> dict:
        return policy_of(synth.resource("identity", "aws_iam_policy", f"controller_{name}_policy"))

    queue = statement(part("interruption"), "AllowInterruptionQueueActions")["Resource"]
    assert synth.resolve(queue) == ("interruption", "${aws_sqs_queue.queue.arn}")
    cluster = statement(part("eks_integration"), "AllowAPIServerEndpointDiscovery")["Resource"]
    assert synth.resolve(cluster) == ("cluster", "${aws_eks_cluster.cluster.arn}")


def test_controller_permissions_are_karpenters_five_managed_policies_all_attached(synth):
    """The synthesized documents are exactly :func:`stacks.policies.controller_policies` of the stack's
    references (so the IAM replay, which renders that function, evaluates what the stacks ship)."""
    from stacks import policies

    managed = synth.resources("identity", "aws_iam_policy")
    assert sorted(managed) == sorted(f"controller_{p.replace('-', '_')}_policy" for p in policies.CONTROLLER_POLICY_PARTS)
    assert {c["name"] for c in managed.values()} == {
        f"nodewright-nodewright-controller-{p}" for p in policies.CONTROLLER_POLICY_PARTS}
    attachments = synth.resources("identity", "aws_iam_role_policy_attachment")
    attached = {a["policy_arn"] for a in attachments.values() if a["role"] == "${aws_iam_role.controller_role.name}"}
    assert attached == {f"${{aws_iam_policy.{name}.arn}}" for name in managed}
    queue = statement(policy_of(managed["controller_interruption_policy"]), "AllowInterruptionQueueActions")
    cluster = statement(policy_of(managed["controller_eks_integration_policy"]), "AllowAPIServerEndpointDiscovery")
    ctx = policies.ControllerPolicyContext(
        partition="${data.aws_partition.partition.partition}",
        account_id="${data.aws_caller_identity.caller.account_id}", region="ap-northeast-2",
        cluster_name="nodewright", cluster_arn=cluster["Resource"], queue_arn=queue["Resource"],
        node_role_arn="${aws_iam_role.node_role.arn}")
    expected = policies.controller_policies(ctx)
    assert {p: policy_of(managed[f"controller_{p.replace('-', '_')}_policy"]) for p in expected} == expected


def test_instance_profile_and_access_entry_use_the_node_role(synth):
    profile = synth.resource("identity", "aws_iam_instance_profile", "node_instance_profile")
    assert profile["role"] == "${aws_iam_role.node_role.name}"
    entry = synth.resource("identity", "aws_eks_access_entry", "node_access_entry")
    assert (entry["principal_arn"], entry["type"]) == ("${aws_iam_role.node_role.arn}", "EC2_LINUX")
    assert synth.resolve(entry["cluster_name"]) == ("cluster", "${aws_eks_cluster.cluster.name}")
    attached = sorted(a["policy_arn"].rsplit("/", 1)[1]
                      for name, a in synth.resources("identity", "aws_iam_role_policy_attachment").items()
                      if name.startswith("node_role_"))
    assert attached == ["AmazonEC2ContainerRegistryPullOnly", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
                        "AmazonSSMManagedInstanceCore"]
    assert synth.resources("identity", "aws_eks_pod_identity_association") == {}


# --- interruption ------------------------------------------------------------------------------------
def test_queue_is_encrypted_short_lived_and_fed_by_five_rules(synth):
    assert CdkTesting.to_have_resource_with_properties(synth.text["interruption"], "aws_sqs_queue", {
        "name": "nodewright-nodewright-interruption", "message_retention_seconds": 300,
        "sqs_managed_sse_enabled": True})
    rules = synth.resources("interruption", "aws_cloudwatch_event_rule")
    patterns = sorted((json.loads(r["event_pattern"])["source"][0], json.loads(r["event_pattern"])["detail-type"][0])
                      for r in rules.values())
    assert patterns == [("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
                        ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
                        ("aws.ec2", "EC2 Instance State-change Notification"),
                        ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
                        ("aws.health", "AWS Health Event")]
    assert all(len(r["name"]) <= 64 for r in rules.values())
    targets = synth.resources("interruption", "aws_cloudwatch_event_target")
    assert sorted(t["rule"] for t in targets.values()) == sorted(f"${{aws_cloudwatch_event_rule.{n}.name}}"
                                                                 for n in rules)
    assert {t["arn"] for t in targets.values()} == {"${aws_sqs_queue.queue.arn}"}


def test_queue_policy_allows_the_rules_and_denies_non_tls(synth):
    policy = policy_of(synth.resource("interruption", "aws_sqs_queue_policy", "queue_policy"))
    allow = statement(policy, "AllowEventBridgeInterruptionRules")
    assert sorted(allow["Condition"]["ArnEquals"]["aws:SourceArn"]) == sorted(
        f"${{aws_cloudwatch_event_rule.{n}.arn}}" for n in synth.resources("interruption", "aws_cloudwatch_event_rule"))
    assert statement(policy, "DenyNonTLSAccess")["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


# --- addons ------------------------------------------------------------------------------------------
def _nodewright_values(synth: Synth) -> dict:
    release = synth.resource("addons", "helm_release", "nodewright")
    (values,) = release["values"]
    return json.loads(values)


def test_helm_values_are_wired_from_the_other_stacks(synth):
    values = _nodewright_values(synth)
    assert values["settings"]["clusterName"] == CLUSTER
    assert synth.resolve(values["settings"]["interruptionQueue"]) == ("interruption", "${aws_sqs_queue.queue.name}")
    assert synth.resource("interruption", "aws_sqs_queue", "queue")["name"] == synth.settings.interruption_queue_name
    assert synth.resolve(values["settings"]["clusterEndpoint"]) == ("cluster", "${aws_eks_cluster.cluster.endpoint}")
    assert synth.resolve(values["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"]) == (
        "identity", "${aws_iam_role.controller_role.arn}")
    assert synth.resolve(values["nodeRole"]) == ("identity", "${aws_iam_role.node_role.name}")
    assert values["serviceAccount"]["name"] == "nodewright"
    assert values["image"] == {"repository": "nodewright", "tag": "0.1.0", "digest": ""}


def test_helm_values_satisfy_the_chart_schema_once_terraform_interpolates_them(synth):
    # What each producing expression evaluates to on apply (names are the settings' names).
    applied = {
        "${aws_eks_cluster.cluster.endpoint}": "https://0123456789ABCDEF.gr7.ap-northeast-2.eks.amazonaws.com",
        "${aws_sqs_queue.queue.name}": synth.settings.interruption_queue_name,
        "${aws_iam_role.controller_role.arn}": f"arn:aws:iam::111122223333:role/{synth.settings.controller_role_name}",
        "${aws_iam_role.node_role.name}": synth.settings.node_role_name,
    }
    text = synth.resource("addons", "helm_release", "nodewright")["values"][0]
    for ref in re.findall(r"\$\{data\.terraform_remote_state\.[^}]+\}", text):
        text = text.replace(ref, applied[synth.resolve(ref)[1]])
    schema = json.loads((ROOT / "helm" / "nodewright" / "values.schema.json").read_text())
    jsonschema.validate(json.loads(text), schema)


def test_releases_install_the_local_chart_and_pinned_keda(synth):
    release = synth.resource("addons", "helm_release", "nodewright")
    assert release["namespace"] == "kube-system"
    chart_dir = synth.outdir / "stacks" / "addons" / release["chart"]
    assert (chart_dir / "Chart.yaml").read_text() == (ROOT / "helm" / "nodewright" / "Chart.yaml").read_text()
    assert CdkTesting.to_have_resource_with_properties(synth.text["addons"], "helm_release", {
        "name": "keda", "chart": "keda", "repository": "https://kedacore.github.io/charts", "version": "2.21.1",
        "namespace": "keda", "create_namespace": True, "depends_on": ["helm_release.nodewright"]})
    helm = synth.docs["addons"]["provider"]["helm"][0]["kubernetes"]
    assert helm["exec"]["args"] == ["eks", "get-token", "--cluster-name", CLUSTER, "--region", "ap-northeast-2",
                                    "--output", "json"]
    assert synth.resolve(helm["host"]) == ("cluster", "${aws_eks_cluster.cluster.endpoint}")
    assert "aws" not in synth.docs["addons"]["provider"]


# --- workloads ---------------------------------------------------------------------------------------
def test_scaled_object_cron_trigger_in_the_synthesized_stack(synth):
    manifest = synth.resource("workloads", "kubernetes_manifest", "scaled_object")["manifest"]
    assert (manifest["apiVersion"], manifest["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    cron = next(t for t in manifest["spec"]["triggers"] if t["type"] == "cron")
    assert cron["metadata"] == {"timezone": "Asia/Seoul", "start": "50 19 * * *", "end": "30 21 * * *",
                                "desiredReplicas": "12"}
    assert [t["type"] for t in manifest["spec"]["triggers"]] == ["cron", "cpu"]
    deployment = synth.resource("workloads", "kubernetes_manifest", "deployment")["manifest"]
    assert manifest["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"] == "storefront"
    assert synth.resources("workloads", "kubernetes_manifest").keys() == {"namespace", "deployment", "pdb",
                                                                          "scaled_object"}


def test_outputs_name_cluster_roles_and_queue(synth):
    def outputs(stack):
        return {k: v["value"] for k, v in synth.docs[stack]["output"].items() if not k.startswith("cross-stack")}
    assert outputs("cluster")["cluster_endpoint"] == "${aws_eks_cluster.cluster.endpoint}"
    assert outputs("cluster")["cluster_name"] == "${aws_eks_cluster.cluster.name}"
    assert outputs("identity")["controller_role_arn"] == "${aws_iam_role.controller_role.arn}"
    assert outputs("identity")["node_role_arn"] == "${aws_iam_role.node_role.arn}"
    assert outputs("interruption")["queue_name"] == "${aws_sqs_queue.queue.name}"


def test_default_state_is_local(synth):
    for name in synth.docs:
        backend = synth.docs[name]["terraform"]["backend"]
        assert list(backend) == ["local"]
        assert Path(backend["local"]["path"]).name == f"terraform.{name}.tfstate"


def test_synthesized_stacks_name_no_absolute_local_path(synth):
    """Issue #26 item 11: the state of each stack and every cross-stack lookup is a path relative to the stack's
    directory (cdktf.out/stacks/<stack>, where terraform runs), so stacks synthesized in CI apply elsewhere."""
    for path in sorted(synth.outdir.glob("stacks/*/cdk.tf.json")):
        doc = json.loads(path.read_text())
        stack = path.parent.name
        assert doc["terraform"]["backend"] == {"local": {"path": f"../../../terraform.{stack}.tfstate"}}
        for lookup in doc.get("data", {}).get("terraform_remote_state", {}).values():
            producer = lookup["config"]["path"].rsplit("terraform.", 1)[1].removesuffix(".tfstate")
            assert lookup["backend"] == "local"
            assert lookup["config"] == {"path": f"../../../terraform.{producer}.tfstate"}
            # Resolved from the consumer's directory, it is the file the producer writes.
            assert (path.parent / lookup["config"]["path"]).resolve() == (
                path.parent.parent / producer / f"../../../terraform.{producer}.tfstate").resolve()
        assert str(Path.cwd()) not in path.read_text() and str(synth.outdir) not in path.read_text()
