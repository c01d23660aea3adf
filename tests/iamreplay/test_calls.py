"""Calls -> authorizations, judged against the stacks' real policies: CreateFleet authorizes every resource it
creates and references; the tags the controller sent before this change are denied, with a message naming the
call, the resource and the statement; the role assumption of both identity modes is allowed."""

from __future__ import annotations

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

    def __init__(self, lt_tags: dict[str, str]) -> None:
        self.lt_tags = lt_tags

    def ec2_tags(self, region: str, resource_id: str) -> dict[str, str] | None:
        return {"i-1": instance_tags("demo", "general", "default", "general-abc")}.get(resource_id, {}) \
            if resource_id != "i-gone" else None

    def launch_template(self, region: str, name: str | None, template_id: str | None) -> LaunchTemplateFacts | None:
        specs = [{"ResourceType": k, "Tags": [{"Key": a, "Value": b} for a, b in self.lt_tags.items()]}
                 for k in ("network-interface", "spot-instances-request")]
        data = {"ImageId": "ami-1", "SecurityGroupIds": ["sg-1"], "IamInstanceProfile": {"Name": "demo_0123"},
                "TagSpecifications": specs}
        return LaunchTemplateFacts("lt-1", self.lt_tags, data) if name == "nodewright/demo/abc" else None

    def instance_profile(self, name: str) -> tuple[dict[str, str], list[str]] | None:
        return ({}, [B.node_role]) if name == "demo_0123" else None


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
        "IAM replay DENIED [irsa] ec2:CreateFleet by ec2:CreateFleet on "
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


def test_terminate_needs_the_ownership_tags_and_unknown_targets_are_not_guessed():
    terminate = Call("ec2", "TerminateInstances", {"InstanceIds": ["i-1"]}, B.region, B.account)
    assert _judge(terminate, FakeAccount(LT_TAGS)) == {"irsa": [], "pod-identity": []}
    with pytest.raises(UnknownResource):
        authorizations(Call("ec2", "TerminateInstances", {"InstanceIds": ["i-gone"]}, B.region, B.account),
                       FakeAccount(LT_TAGS))
    with pytest.raises(UnmappedCall, match="ec2:RebootInstances"):
        authorizations(Call("ec2", "RebootInstances", {}, B.region, B.account), FakeAccount(LT_TAGS))


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
    _, trust = controller_documents("pod-identity", B)
    condition = trust["Statement"][0]["Condition"]
    assert condition["ArnLike"] == {"aws:SourceArn": "arn:aws:eks:us-east-1:123456789012:podidentityassociation/demo/*"}
