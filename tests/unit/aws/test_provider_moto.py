"""End-to-end provider behaviour against moto: launch, tags, get/list, terminate, drift, instance types."""

from __future__ import annotations

import boto3
import pytest

from aws.conftest import CLUSTER, REGION, Cluster, nodeclaim
from nodewright.api import labels
from nodewright.cloud.aws.provider import AWSCloudProvider
from nodewright.cloud.provider import CloudProvider, NodeClaimNotFoundError, parse_provider_id


def _instance(instance_id: str) -> dict:
    ec2 = boto3.client("ec2", region_name=REGION)
    return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def test_provider_satisfies_protocol(provider: AWSCloudProvider) -> None:
    assert isinstance(provider, CloudProvider)


def test_create_launches_cheapest_type_with_tags_and_labels(provider: AWSCloudProvider, cluster: Cluster) -> None:
    launched = provider.create(nodeclaim())
    zone, instance_id = parse_provider_id(launched.status.provider_id)
    raw = _instance(instance_id)
    # moto launches the first override; overrides are cheapest first: c5.large at 0.085 $/h.
    assert raw["InstanceType"] == "c5.large"
    assert zone == "us-east-1a"  # the zone whose subnet has the most free IPs wins the tie on price
    assert raw["SubnetId"] == cluster.subnets["us-east-1a"]
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert tags == {"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": CLUSTER,
                    "karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": "default-x7k2p",
                    "karpenter.k8s.aws/ec2nodeclass": "default", "Name": "default/default-x7k2p"}
    got = launched.metadata.labels
    assert got[labels.INSTANCE_TYPE] == "c5.large" and got[labels.ZONE] == "us-east-1a"
    assert got[labels.CAPACITY_TYPE] == "on-demand" and got[labels.REGION] == REGION
    assert got[labels.ARCH] == "amd64" and got["team"] == "payments"
    assert launched.status.image_id == cluster.ami_amd64
    assert launched.status.capacity["cpu"] == "2"
    assert launched.status.allocatable["cpu"] == "1930m"  # 2000m minus EKS kube-reserved 70m
    assert launched.metadata.annotations[labels.EC2NODECLASS_HASH]


def test_launch_template_carries_nodeadm_userdata_and_imds_defaults(provider: AWSCloudProvider) -> None:
    import base64

    provider.create(nodeclaim())
    ec2 = boto3.client("ec2", region_name=REGION)
    templates = ec2.describe_launch_templates()["LaunchTemplates"]
    # One template per max-pods group: c5.large/m5.large run 29 pods, m5.xlarge 58 (ENI limits).
    assert len(templates) == 2 and all(t["LaunchTemplateName"].startswith("nodewright/demo/") for t in templates)
    max_pods = []
    for template in templates:
        data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
            "LaunchTemplateVersions"][0]["LaunchTemplateData"]
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
        text = base64.b64decode(data["UserData"]).decode()
        assert "--node-labels=karpenter.sh/nodepool=default,team=payments" in text
        assert "- key: dedicated\n        value: payments\n        effect: NoSchedule" in text
        max_pods.append(int(text.split("maxPods: ")[1].split("\n")[0]))
    assert sorted(max_pods) == [29, 58]


def test_every_created_resource_carries_karpenters_tags(provider: AWSCloudProvider) -> None:
    """Launch template, its network interfaces and spot requests, the fleet, instance, volumes and the instance
    profile carry the tags Karpenter v1 sets (and the controller policy requires), plus the class's own tags."""
    from aws.conftest import nodeclass

    provider._nodeclasses = {"default": nodeclass(tags={"team": "payments"})}.get
    sent: list[dict] = []
    provider.instances._ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: sent.append(params))
    provider.create(nodeclaim(types=("c5.large",), capacity_types=("spot",)))
    base = {"team": "payments", "kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": "demo",
            "karpenter.sh/nodepool": "default", "karpenter.k8s.aws/ec2nodeclass": "default"}
    ec2 = boto3.client("ec2", region_name=REGION)
    (template,) = ec2.describe_launch_templates()["LaunchTemplates"]
    assert {t["Key"]: t["Value"] for t in template["Tags"]} == base
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    by_kind = {s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]} for s in data["TagSpecifications"]}
    by_kind.pop("launch-template", None)  # moto echoes the template's own tags into its data
    assert by_kind == {"network-interface": base, "spot-instances-request": base}
    instance = {**base, "karpenter.sh/nodeclaim": "default-x7k2p", "Name": "default/default-x7k2p"}
    assert {s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]} for s in sent[0]["TagSpecifications"]} == {
        "instance": instance, "volume": instance, "fleet": instance}
    iam = boto3.client("iam", region_name=REGION)
    (listed,) = iam.list_instance_profiles()["InstanceProfiles"]
    tags = iam.get_instance_profile(InstanceProfileName=listed["InstanceProfileName"])["InstanceProfile"]["Tags"]
    assert {t["Key"]: t["Value"] for t in tags} == {
        "team": "payments", "kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": "demo",
        "karpenter.k8s.aws/ec2nodeclass": "default", "topology.kubernetes.io/region": REGION}


def test_retry_of_same_nodeclaim_never_launches_twice(provider: AWSCloudProvider) -> None:
    first = provider.create(nodeclaim())
    second = provider.create(nodeclaim())
    assert first.status.provider_id == second.status.provider_id
    assert len(provider.instances.list_instances()) == 1


def test_get_list_and_idempotent_delete(provider: AWSCloudProvider) -> None:
    launched = provider.create(nodeclaim())
    view = provider.get(launched.status.provider_id)
    assert view.metadata.name == "default-x7k2p" and view.nodepool == "default"
    assert [c.metadata.name for c in provider.list()] == ["default-x7k2p"]
    provider.delete(launched)
    assert _instance(parse_provider_id(launched.status.provider_id)[1])["State"]["Name"] == "terminated"
    with pytest.raises(NodeClaimNotFoundError):
        provider.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        provider.get(launched.status.provider_id)
    assert provider.list() == []


def test_reboot_for_repair_calls_reboot_instances_on_the_claims_instance(provider: AWSCloudProvider) -> None:
    """Node repair with RebootForRepair: one ``ec2:RebootInstances`` on the instance, which keeps running (the IAM
    replay judges this call against the stacks' AllowScopedInstanceReboot)."""
    from nodewright.cloud.aws.repair import AWS_REPAIR_POLICIES
    from nodewright.cloud.provider import Rebooter, RepairPolicySource

    assert isinstance(provider, Rebooter) and isinstance(provider, RepairPolicySource)
    assert [(p.condition_type, p.condition_status, p.toleration_seconds) for p in provider.repair_policies()] == [
        ("Ready", "False", 1800.0), ("Ready", "Unknown", 1800.0), ("AcceleratedHardwareReady", "False", 600.0),
        ("StorageReady", "False", 1800.0), ("NetworkingReady", "False", 1800.0), ("KernelReady", "False", 1800.0),
        ("ContainerRuntimeReady", "False", 1800.0)]
    assert tuple(provider.repair_policies()) == AWS_REPAIR_POLICIES
    launched = provider.create(nodeclaim())
    instance_id = parse_provider_id(launched.status.provider_id)[1]
    sent: list[dict] = []
    provider.instances._ec2.meta.events.register("provide-client-params.ec2.RebootInstances",
                                                  lambda params, **_: sent.append(params))
    provider.reboot(launched)
    assert [p["InstanceIds"] for p in sent] == [[instance_id]]
    assert _instance(instance_id)["State"]["Name"] == "running"
    provider.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        provider.reboot(launched)
    assert len(sent) == 1  # a terminated instance is not rebooted


def test_get_instance_types_limits_zones_and_needs_a_fitting_ami(provider: AWSCloudProvider) -> None:
    from nodewright.api.nodepool import NodePool

    pool = NodePool.model_validate({"metadata": {"name": "default"}, "spec": {"template": {"spec": {
        "requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                             "name": "default"}}}}})
    types = {it.name: it for it in provider.get_instance_types(pool)}
    assert {o.zone for it in types.values() for o in it.offerings} == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert types["m5.large"].cheapest_offering(capacity_types=["on-demand"]).price == 0.096
    assert "m6g.large" in types  # arm64 AMI published
    assert not any(int(it.labels.get(labels.INSTANCE_GPU_COUNT, "0")) for it in types.values())  # no nvidia AMI


def test_ami_drift_when_the_alias_moves(provider: AWSCloudProvider, cluster: Cluster) -> None:
    from aws.conftest import AL2023_X86, put_public_parameter

    launched = provider.create(nodeclaim())
    assert provider.is_drifted(launched) is None
    put_public_parameter(AL2023_X86, cluster.ami_arm64)  # a "newer" image for the same parameter
    provider.amis._cache.clear()
    assert provider.is_drifted(launched) == "AMIDrift"


def test_nodeclass_drift_on_spec_change(provider: AWSCloudProvider) -> None:
    from aws.conftest import nodeclass

    launched = provider.create(nodeclaim())
    provider._nodeclasses = {"default": nodeclass(tags={"team": "payments"})}.get
    assert provider.is_drifted(launched) == "NodeClassDrift"


def test_nodeclass_status_lists_resolved_ids(provider: AWSCloudProvider, cluster: Cluster) -> None:
    from aws.conftest import nodeclass

    status = provider.resolve_nodeclass(nodeclass()).status()
    assert [s["id"] for s in status["subnets"]] == [cluster.subnets[z] for z in ("us-east-1a", "us-east-1b",
                                                                                  "us-east-1c")]
    assert [s["zone"] for s in status["subnets"]] == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert status["securityGroups"] == [{"id": cluster.security_group, "name": "nodes"}]
    assert sorted(a["id"] for a in status["amis"]) == sorted([cluster.ami_amd64, cluster.ami_arm64])
    assert status["instanceProfile"].startswith("demo_")


def test_instances_without_nodeclaim_are_reported_after_grace(provider: AWSCloudProvider) -> None:
    import datetime as dt

    launched = provider.create(nodeclaim())
    instance_id = parse_provider_id(launched.status.provider_id)[1]
    started = provider.instances.get(instance_id).launch_time
    assert provider.instances.leaked({instance_id}, started + dt.timedelta(minutes=5)) == []
    assert provider.instances.leaked(set(), started + dt.timedelta(seconds=10)) == []  # inside the 30 s grace
    assert [i.id for i in provider.instances.leaked(set(), started + dt.timedelta(seconds=31))] == [instance_id]


def test_raid0_nodeclass_launches_from_its_own_template_whose_nodeconfig_builds_the_array(
        provider: AWSCloudProvider) -> None:
    """``instanceStorePolicy: RAID0`` reaches the launched node (nodeadm ``localStorage.strategy``), and the
    template name (a hash of what boots) differs from the same class without it."""
    import base64

    from aws.conftest import nodeclass

    ec2 = boto3.client("ec2", region_name=REGION)

    def templates() -> dict[str, str]:
        found = {}
        for template in ec2.describe_launch_templates()["LaunchTemplates"]:
            data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
                "LaunchTemplateVersions"][0]["LaunchTemplateData"]
            found[template["LaunchTemplateName"]] = base64.b64decode(data["UserData"]).decode()
        return found

    provider.create(nodeclaim(types=("c5.large",)))
    plain = templates()
    provider._nodeclasses = {"default": nodeclass(instanceStorePolicy="RAID0")}.get
    provider.create(nodeclaim(name="default-r4id0", types=("c5.large",)))
    raid = {name: text for name, text in templates().items() if name not in plain}
    assert len(plain) == 1 and len(raid) == 1
    (plain_text,) = plain.values()
    (raid_text,) = raid.values()
    assert "localStorage" not in plain_text
    assert "  instance:\n    localStorage:\n      strategy: RAID0\n" in raid_text


@pytest.mark.parametrize("error", ["read-timeout", "connection", "unparsable-5xx"])
def test_botocore_errors_other_than_client_error_are_retryable_and_the_retry_launches_once(
        provider: AWSCloudProvider, error: str) -> None:
    """Issue 32 item 4: a timeout, a dropped connection or a 5xx body botocore cannot parse is a retryable
    TransientCloudError naming the call; the retry (same ClientToken, same nodeclaim tag) launches one instance."""
    from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
    from botocore.parsers import ResponseParserError

    from nodewright.cloud.provider import TransientCloudError

    raised = {"read-timeout": ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com/"),
              "connection": EndpointConnectionError(endpoint_url="https://ec2.us-east-1.amazonaws.com/"),
              "unparsable-5xx": ResponseParserError("Unable to parse response (not well-formed), invalid XML")}[error]
    ec2 = provider.instances._ec2

    def fail(**_: object) -> None:
        raise raised

    ec2.meta.events.register_first("before-call.ec2.CreateFleet", fail, unique_id="fault")
    try:
        with pytest.raises(TransientCloudError) as caught:
            provider.create(nodeclaim())
        assert caught.value.retryable
        assert str(caught.value).startswith(f"Create failed: {type(raised).__name__}: ")
    finally:
        ec2.meta.events.unregister("before-call.ec2.CreateFleet", unique_id="fault")
    provider.create(nodeclaim())
    assert len(provider.instances.list_instances()) == 1


@pytest.mark.parametrize("call", ["garbage_collect_launch_templates", "delete_nodeclass_resources"])
def test_a_read_timeout_listing_launch_templates_is_a_retryable_cloud_error(provider: AWSCloudProvider,
                                                                            call: str) -> None:
    """Issue 32 item 4 at the two cleanup calls (launch-template GC, the EC2NodeClass finalizer): botocore's
    ReadTimeoutError escaped them, so the manager printed "controller launchtemplate.garbagecollection failed"
    with a traceback every pass instead of the controllers' CloudProviderError path."""
    from botocore.exceptions import ReadTimeoutError

    from nodewright.cloud.provider import TransientCloudError

    ec2 = provider.launch_templates._ec2

    def fail(**_: object) -> None:
        raise ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com/")

    ec2.meta.events.register_first("before-call.ec2.DescribeLaunchTemplates", fail, unique_id="fault")
    try:
        with pytest.raises(TransientCloudError) as caught:
            getattr(provider, call)({} if call == "garbage_collect_launch_templates" else "default")
        assert caught.value.retryable and "ReadTimeoutError" in str(caught.value)
    finally:
        ec2.meta.events.unregister("before-call.ec2.DescribeLaunchTemplates", unique_id="fault")
