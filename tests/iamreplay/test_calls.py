"""Calls -> authorizations, judged against the stacks' real policies: CreateFleet authorizes every resource it
creates and references; the tags the controller sent before this change are denied, with a message naming the
call, the resource and the statement; the role assumption of both identity modes is allowed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nodewright.cloud.aws.tags import instance_tags, resource_tags

from .calls import Call, LaunchTemplateFacts, UnknownResource, UnmappedCall, authorizations
from .evaluator import evaluate
from .policy import IDENTITY_MODES, Binding, controller_documents
from .recorder import Recorder, denial_message

B = Binding()
LT_TAGS = resource_tags("demo", "general", "default", {"team": "payments"})


class FakeAccount:
    """A launch template, an instance profile holding the node role, and one instance."""

    def __init__(self, lt_tags: dict[str, str], **data: Any) -> None:
        self.lt_tags = lt_tags
        self.data = data

    def ec2_tags(self, region: str, resource_id: str) -> dict[str, str] | None:
        return {"i-1": instance_tags("demo", "general", "default", "general-abc")}.get(resource_id, {}) \
            if resource_id != "i-gone" else None

    def launch_template(self, region: str, name: str | None, template_id: str | None) -> LaunchTemplateFacts | None:
        specs = [{"ResourceType": k, "Tags": [{"Key": a, "Value": b} for a, b in self.lt_tags.items()]}
                 for k in ("network-interface", "spot-instances-request")]
        data = {"ImageId": "ami-1", "SecurityGroupIds": ["sg-1"], "IamInstanceProfile": {"Name": "demo_0123"},
                "TagSpecifications": specs, **self.data}
        return LaunchTemplateFacts("lt-1", self.lt_tags, data) if name == "nodewright/demo/abc" else None

    def instance_profile(self, name: str) -> tuple[dict[str, str], list[str]] | None:
        return ({}, [B.node_role]) if name == "demo_0123" else None

    def placement_group_name(self, region: str, group_id: str) -> str | None:
        return {"pg-0abc": "ml-cluster"}.get(group_id)


def _fleet(capacity_type: str = "spot") -> Call:
    tags = [{"Key": k, "Value": v} for k, v in instance_tags("demo", "general", "default", "general-abc").items()]
    return Call("ec2", "CreateFleet", {
        "Type": "instant", "TargetCapacitySpecification": {"TotalTargetCapacity": 1,
                                                           "DefaultTargetCapacityType": capacity_type},
        "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": {"LaunchTemplateName": "nodewright/demo/abc",
                                                                   "Version": "$Latest"},
                                   "Overrides": [{"InstanceType": "m5.large", "SubnetId": "subnet-1"}]}],
        "TagSpecifications": [{"ResourceType": k, "Tags": tags} for k in ("instance", "volume", "fleet")]},
        B.region, B.account)


def _judge(call: Call, account: Any) -> dict[str, list[str]]:
    """mode -> denial messages."""
    out: dict[str, list[str]] = {}
    for mode in IDENTITY_MODES:
        permissions, _ = controller_documents(mode, B)
        out[mode] = [denial_message(mode, r, d, "t") for r in authorizations(call, account)
                     if not (d := evaluate(permissions, r)).allowed]
    return out


def test_create_fleet_authorizes_every_created_and_referenced_resource():
    requests = authorizations(_fleet(), FakeAccount(LT_TAGS))
    arn = "arn:aws:ec2:us-east-1:123456789012:"
    assert sorted({(r.action, r.resource) for r in requests}) == sorted(
        {(a, f"{arn}{kind}") for a in ("ec2:CreateFleet", "ec2:RunInstances") for kind in (
            "launch-template/lt-1", "security-group/sg-1", "subnet/subnet-1", "fleet/*", "instance/*", "volume/*",
            "network-interface/*", "spot-instances-request/*")}
        | {(a, "arn:aws:ec2:us-east-1::image/ami-1") for a in ("ec2:CreateFleet", "ec2:RunInstances")}
        | {("ec2:CreateTags", f"{arn}{kind}/*") for kind in ("fleet", "instance", "volume", "network-interface",
                                                              "spot-instances-request")}
        | {("iam:PassRole", "arn:aws:iam::123456789012:role/KarpenterNodeRole-demo")})
    on_demand = {r.resource.rsplit(":", 1)[1] for r in authorizations(_fleet("on-demand"), FakeAccount(LT_TAGS))}
    assert "spot-instances-request/*" not in on_demand
    assert _judge(_fleet(), FakeAccount(LT_TAGS)) == {"irsa": [], "pod-identity": []}


def test_the_tags_sent_before_this_change_are_denied_naming_call_resource_and_statement():
    old = {"team": "payments", "karpenter.k8s.aws/cluster": "demo", "karpenter.k8s.aws/ec2nodeclass": "default"}
    denials = _judge(_fleet(), FakeAccount(old))["irsa"]
    assert denials[0] == (
        "IAM replay DENIED [irsa] ec2:CreateFleet by ec2:CreateFleet referencing launch-template on "
        "arn:aws:ec2:us-east-1:123456789012:launch-template/lt-1: expected "
        "demo-nodewright-controller-node-lifecycle/AllowScopedEC2LaunchTemplateAccessActions to allow it, but "
        "condition not met: StringEquals aws:ResourceTag/kubernetes.io/cluster/demo ['owned'] (request: absent); "
        "StringLike aws:ResourceTag/karpenter.sh/nodepool ['*'] (request: absent) (in t)")
    denied = {d.split(" on ", 1)[1].split(": expected")[0].rsplit(":", 1)[1] for d in denials}
    assert denied == {"launch-template/lt-1", "network-interface/*", "spot-instances-request/*"}
    create = Call("ec2", "CreateLaunchTemplate", {"LaunchTemplateName": "x", "LaunchTemplateData": {},
                                                  "TagSpecifications": [{"ResourceType": "launch-template", "Tags": [
                                                      {"Key": k, "Value": v} for k, v in old.items()]}]},
                  B.region, B.account)
    assert "AllowScopedEC2InstanceActionsWithTags" in _judge(create, FakeAccount(old))["pod-identity"][0]


@pytest.mark.parametrize("operation", ["TerminateInstances", "RebootInstances"])
def test_terminate_and_reboot_need_the_ownership_tags_and_unknown_targets_are_not_guessed(operation):
    call = Call("ec2", operation, {"InstanceIds": ["i-1"]}, B.region, B.account)
    assert [r.action for r in authorizations(call, FakeAccount(LT_TAGS))] == [f"ec2:{operation}"]
    assert _judge(call, FakeAccount(LT_TAGS)) == {"irsa": [], "pod-identity": []}
    # an instance without this cluster's tags (another cluster's, a hand-made one) is denied
    foreign = Call("ec2", operation, {"InstanceIds": ["i-2"]}, B.region, B.account)
    assert all(len(d) == 1 and "condition not met" in d[0] for d in _judge(foreign, FakeAccount(LT_TAGS)).values())
    with pytest.raises(UnknownResource):
        authorizations(Call("ec2", operation, {"InstanceIds": ["i-gone"]}, B.region, B.account),
                       FakeAccount(LT_TAGS))
    with pytest.raises(UnmappedCall, match="ec2:StopInstances"):
        authorizations(Call("ec2", "StopInstances", {}, B.region, B.account), FakeAccount(LT_TAGS))


def test_instance_profile_creation_and_role_passing_are_allowed_with_karpenters_tags():
    from nodewright.cloud.aws.tags import instance_profile_tags

    tags = [{"Key": k, "Value": v} for k, v in instance_profile_tags("demo", B.region, "default").items()]
    create = Call("iam", "CreateInstanceProfile", {"InstanceProfileName": "demo_0123", "Tags": tags}, "", B.account)
    assert _judge(create, FakeAccount(LT_TAGS)) == {"irsa": [], "pod-identity": []}
    untagged = Call("iam", "CreateInstanceProfile", {"InstanceProfileName": "demo_0123"}, "", B.account)
    assert "AllowScopedInstanceProfileCreationActions" in _judge(untagged, FakeAccount(LT_TAGS))["irsa"][0]


def test_both_identity_modes_let_the_controller_assume_its_role():
    recorder = Recorder()
    recorder.begin("role assumption")
    tally = recorder.end()
    assert recorder.total.evaluated == 3 and recorder.total.denials == [] and tally.calls == 0

ARN = "arn:aws:ec2:us-east-1:123456789012:"
RESERVED = {"CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": "cr-0a1"}}}
PLACED = {"Placement": {"GroupId": "pg-0abc"}}


def _without_reservations_and_placement_groups(mode: str) -> dict[str, Any]:
    """The synthesized documents with the launch statement as it was before #27 (no capacity-reservation/*,
    no placement-group/*): what the replay must catch."""
    permissions, _ = controller_documents(mode, B)
    old = copy.deepcopy(permissions)
    for document in old.values():
        for statement in document["Statement"]:
            if statement.get("Sid") == "AllowScopedEC2InstanceAccessActions":
                statement["Resource"] = [r for r in statement["Resource"]
                                         if "capacity-reservation" not in r and "placement-group" not in r]
    return old


@pytest.mark.parametrize("data", [RESERVED, PLACED], ids=["capacity-reservation", "placement-group"])
def test_reserved_and_placed_launches_are_allowed_and_were_denied_by_the_old_statement(data: dict[str, Any]):
    requests = authorizations(_fleet("on-demand"), FakeAccount(LT_TAGS, **data))
    kind, ident = ("capacity-reservation", "cr-0a1") if data is RESERVED else ("placement-group", "ml-cluster")
    referenced = sorted({r.action for r in requests if r.resource == f"{ARN}{kind}/{ident}"})
    assert referenced == ["ec2:CreateFleet", "ec2:RunInstances"]
    assert _judge(_fleet("on-demand"), FakeAccount(LT_TAGS, **data)) == {"irsa": [], "pod-identity": []}
    for mode in IDENTITY_MODES:
        old = _without_reservations_and_placement_groups(mode)
        denials = [denial_message(mode, r, d, "t") for r in requests if not (d := evaluate(old, r)).allowed]
        assert denials == [
            f"IAM replay DENIED [{mode}] {action} by ec2:CreateFleet referencing {kind} on {ARN}{kind}/{ident}: "
            f"expected demo-nodewright-controller-node-lifecycle/AllowScopedEC2InstanceAccessActions to allow it, "
            f"but its Resource ['arn:aws:ec2:us-east-1::image/*', 'arn:aws:ec2:us-east-1::snapshot/*', "
            f"'arn:aws:ec2:us-east-1:*:security-group/*', 'arn:aws:ec2:us-east-1:*:subnet/*'] does not match "
            f"(in t)" for action in ("ec2:CreateFleet", "ec2:RunInstances")]


def test_every_referenced_resource_comes_from_the_request_and_its_template():
    data = {"KeyName": "ops", "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {
        "VolumeSize": 20, "SnapshotId": "snap-1"}}], "NetworkInterfaces": [{"DeviceIndex": 0, "Groups": ["sg-2"]}],
        **RESERVED, **PLACED}
    resources = {r.resource for r in authorizations(_fleet("spot"), FakeAccount(LT_TAGS, **data))
                 if r.action == "ec2:RunInstances"}
    assert resources == {
        "arn:aws:ec2:us-east-1::image/ami-1", "arn:aws:ec2:us-east-1::snapshot/snap-1",
        *(f"{ARN}{k}" for k in ("launch-template/lt-1", "security-group/sg-1", "security-group/sg-2",
                                "subnet/subnet-1", "key-pair/ops", "capacity-reservation/cr-0a1",
                                "placement-group/ml-cluster", "fleet/*", "instance/*", "volume/*",
                                "network-interface/*", "spot-instances-request/*"))}
    run = Call("ec2", "RunInstances", {"MinCount": 1, "MaxCount": 1, "SubnetId": "subnet-9",
                                       "LaunchTemplate": {"LaunchTemplateName": "nodewright/demo/abc"}},
               B.region, B.account)
    assert {r.resource.rsplit(":", 1)[1] for r in authorizations(run, FakeAccount(LT_TAGS, **RESERVED))} == {
        "launch-template/lt-1", "image/ami-1", "security-group/sg-1", "subnet/subnet-9",
        "capacity-reservation/cr-0a1", "instance/*", "volume/*", "network-interface/*",
        "role/KarpenterNodeRole-demo"}


@pytest.mark.parametrize(("data", "field"), [
    ({"LicenseSpecifications": [{"LicenseConfigurationArn": "arn:x"}]}, "LicenseSpecifications"),
    ({"SecurityGroups": ["default"]}, "SecurityGroups"),
    ({"BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"KmsKeyId": "k"}}]}, "KmsKeyId"),
    ({"CapacityReservationSpecification": {"CapacityReservationTarget": {
        "CapacityReservationResourceGroupArn": "arn:g"}}}, "CapacityReservationResourceGroupArn"),
    ({"Placement": {"HostId": "h-1"}}, "HostId"),
])
def test_a_request_shape_the_replay_cannot_map_fails(data: dict[str, Any], field: str):
    with pytest.raises(UnmappedCall, match=field):
        authorizations(_fleet(), FakeAccount(LT_TAGS, **data))


def test_the_replay_judges_the_synthesized_documents_not_the_policy_function():
    permissions, trust = controller_documents("pod-identity", B)
    assert sorted(permissions) == [f"demo-nodewright-controller-{part}" for part in (
        "eks-integration", "iam-integration", "interruption", "node-lifecycle", "resource-discovery")]
    assert permissions["demo-nodewright-controller-eks-integration"]["Statement"][0]["Resource"] == B.cluster_arn
    assert trust["Statement"][0]["Condition"] == {"StringEquals": {
        "aws:RequestTag/eks-cluster-arn": B.cluster_arn, "aws:RequestTag/kubernetes-namespace": "kube-system",
        "aws:RequestTag/kubernetes-service-account": "nodewright"}}
