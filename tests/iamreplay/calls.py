"""From one AWS API call (operation + parameters, as botocore sends it) to the authorizations IAM performs.

Facts used (AWS Service Authorization Reference for EC2, IAM, SSM, SQS, EKS, Pricing; EC2 user guide "Grant
permission to tag resources during creation"; "Launch template" and "EC2 Fleet" IAM pages):

- ``ec2:Describe*`` have no resource-level permissions: resource ``*``, with ``aws:RequestedRegion``.
- ``CreateLaunchTemplate`` authorizes the new template with its ``aws:RequestTag``s/``aws:TagKeys``, and
  tagging on create (``ec2:CreateTags`` with ``ec2:CreateAction = CreateLaunchTemplate``).
- ``CreateFleet`` (type ``instant``) authorizes ``ec2:CreateFleet`` *and* ``ec2:RunInstances`` on every resource
  it creates -- the fleet, the instance and its volumes (tags from the request's ``TagSpecifications``), the
  network interface and the spot request (tags from the launch template's own ``TagSpecifications``) -- each with
  its request tags, plus ``ec2:CreateTags`` on create for each tagged one; and on every resource it references:
  the launch template (``aws:ResourceTag`` = the template's tags), its image, its security groups and the
  override subnets. Passing the template's instance profile needs ``iam:PassRole`` on the profile's role with
  ``iam:PassedToService = ec2.amazonaws.com``.
- ``TerminateInstances`` / ``DeleteLaunchTemplate`` authorize each target with its ``aws:ResourceTag``s.
- IAM instance-profile actions authorize ``instance-profile/<name>`` (``aws:RequestTag`` on create,
  ``aws:ResourceTag`` after); ``AddRoleToInstanceProfile`` also needs ``iam:PassRole`` on the role.
- SSM public parameters: ``arn:<partition>:ssm:<region>::parameter/aws/service/...`` (no account).
- SQS by queue ARN (the queue name from ``QueueName`` or the last segment of ``QueueUrl``); EKS
  ``DescribeCluster`` by cluster ARN; ``pricing:GetProducts`` on ``*``; ``sts:GetCallerIdentity`` needs nothing.

An operation without a mapping raises :class:`UnmappedCall`: a new AWS call must be taught here, so the replay
can never pass by not looking.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .evaluator import Request, merge, tag_context


class UnmappedCall(Exception):
    """The controller made a call this module cannot turn into IAM authorizations."""


class UnknownResource(Exception):
    """A call targets a resource the account does not hold, so its tags (and IAM's answer) are unknown."""


class AccountState(Protocol):
    """Read access to the (moto) account the call is made against, as it was before the call."""

    def ec2_tags(self, region: str, resource_id: str) -> dict[str, str] | None:
        """Tags of an EC2 resource (instance, volume, image, subnet, security group); None when absent."""

    def launch_template(self, region: str, name: str | None, template_id: str | None) -> LaunchTemplateFacts | None:
        """A launch template by name or id; None when absent."""

    def instance_profile(self, name: str) -> tuple[dict[str, str], list[str]] | None:
        """``(tags, role names)`` of an instance profile; None when absent."""


@dataclass(frozen=True)
class LaunchTemplateFacts:
    """What CreateFleet's authorization needs of a launch template."""

    id: str
    tags: Mapping[str, str]
    data: Mapping[str, Any]


@dataclass(frozen=True)
class Call:
    """One API call as sent: ``service`` (botocore signing name: ``ec2``, ``iam``...), ``operation``
    (``CreateFleet``), ``params``, ``region``, ``account``, ``partition``."""

    service: str
    operation: str
    params: Mapping[str, Any]
    region: str
    account: str
    partition: str = "aws"

    @property
    def name(self) -> str:
        return f"{self.service}:{self.operation}"

    def arn(self, service: str, resource: str, region: str | None = None, account: str | None = None) -> str:
        return (f"arn:{self.partition}:{service}:{self.region if region is None else region}:"
                f"{self.account if account is None else account}:{resource}")


def _tags(specs: Any, kind: str) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for s in specs or [] if s.get("ResourceType") == kind
            for t in s.get("Tags", [])}


def _region_context(call: Call) -> dict[str, tuple[str, ...]]:
    return {"aws:RequestedRegion": (call.region,)}


def _ec2_read(call: Call, state: AccountState) -> list[Request]:
    return [Request(f"ec2:{call.operation}", "*", _region_context(call), call=call.name)]


def _create_launch_template(call: Call, state: AccountState) -> list[Request]:
    tags = _tags(call.params.get("TagSpecifications"), "launch-template")
    arn = call.arn("ec2", f"launch-template/{call.params['LaunchTemplateName']}")
    context = merge(_region_context(call), tag_context("aws:RequestTag", tags))
    requests = [Request("ec2:CreateLaunchTemplate", arn, context, call=call.name)]
    if tags:
        requests.append(Request("ec2:CreateTags", arn, merge(context, {"ec2:CreateAction": ("CreateLaunchTemplate",)}),
                                call=call.name))
    return requests


def _referenced(call: Call, actions: tuple[str, ...], arn: str, tags: Mapping[str, str] | None) -> list[Request]:
    context = merge(_region_context(call), tag_context("aws:ResourceTag", tags or {}))
    return [Request(action, arn, context, call=call.name) for action in actions]


def _create_fleet(call: Call, state: AccountState) -> list[Request]:
    actions = ("ec2:CreateFleet", "ec2:RunInstances")
    requests: list[Request] = []
    fleet_specs = call.params.get("TagSpecifications")
    spot = call.params.get("TargetCapacitySpecification", {}).get("DefaultTargetCapacityType") == "spot"
    templates = []
    for config in call.params.get("LaunchTemplateConfigs", []):
        spec = config.get("LaunchTemplateSpecification", {})
        template = state.launch_template(call.region, spec.get("LaunchTemplateName"), spec.get("LaunchTemplateId"))
        if template is None:
            raise UnknownResource(f"launch template {spec}")
        templates.append(template)
        requests += _referenced(call, actions, call.arn("ec2", f"launch-template/{template.id}"), template.tags)
        image = template.data.get("ImageId")
        if image:
            requests += _referenced(call, actions, call.arn("ec2", f"image/{image}", account=""),
                                    state.ec2_tags(call.region, image))
        groups = list(template.data.get("SecurityGroupIds") or [])
        groups += [g for ni in template.data.get("NetworkInterfaces") or [] for g in ni.get("Groups", [])]
        for group in groups:
            requests += _referenced(call, actions, call.arn("ec2", f"security-group/{group}"),
                                    state.ec2_tags(call.region, group))
        for override in config.get("Overrides", []):
            if override.get("SubnetId"):
                requests += _referenced(call, actions, call.arn("ec2", f"subnet/{override['SubnetId']}"),
                                        state.ec2_tags(call.region, override["SubnetId"]))
        profile = (template.data.get("IamInstanceProfile") or {}).get("Name")
        if profile:
            found = state.instance_profile(profile)
            if found is None:
                raise UnknownResource(f"instance profile {profile}")
            for role in found[1]:
                requests.append(Request("iam:PassRole", call.arn("iam", f"role/{role}", region=""),
                                        {"iam:PassedToService": ("ec2.amazonaws.com",)}, call=call.name))
    created: dict[str, dict[str, str]] = {kind: _tags(fleet_specs, kind) for kind in ("fleet", "instance", "volume")}
    template_specs = [s for t in templates for s in t.data.get("TagSpecifications") or []]
    created["network-interface"] = _tags(template_specs, "network-interface")
    if spot:
        created["spot-instances-request"] = _tags(template_specs, "spot-instances-request")
    for kind, tags in created.items():
        arn = call.arn("ec2", f"{kind}/*")
        context = merge(_region_context(call), tag_context("aws:RequestTag", tags))
        requests += [Request(action, arn, context, call=f"{call.name} creating {kind}") for action in actions]
        if tags:
            requests.append(Request("ec2:CreateTags", arn, merge(context, {"ec2:CreateAction": ("CreateFleet",)}),
                                    call=f"{call.name} tagging {kind}"))
    return requests


def _terminate(call: Call, state: AccountState) -> list[Request]:
    requests = []
    for instance in call.params.get("InstanceIds", []):
        tags = state.ec2_tags(call.region, instance)
        if tags is None:
            raise UnknownResource(f"instance {instance}")
        requests += _referenced(call, ("ec2:TerminateInstances",), call.arn("ec2", f"instance/{instance}"), tags)
    return requests


def _delete_launch_template(call: Call, state: AccountState) -> list[Request]:
    template = state.launch_template(call.region, call.params.get("LaunchTemplateName"),
                                     call.params.get("LaunchTemplateId"))
    if template is None:
        raise UnknownResource(f"launch template {dict(call.params)}")
    return _referenced(call, ("ec2:DeleteLaunchTemplate",), call.arn("ec2", f"launch-template/{template.id}"),
                       template.tags)


def _profile_arn(call: Call) -> str:
    return call.arn("iam", f"instance-profile/{call.params['InstanceProfileName']}", region="")


def _iam_profile(call: Call, state: AccountState) -> list[Request]:
    action = f"iam:{call.operation}"
    if call.operation == "CreateInstanceProfile":
        tags = {t["Key"]: t.get("Value", "") for t in call.params.get("Tags", [])}
        return [Request(action, _profile_arn(call), tag_context("aws:RequestTag", tags), call=call.name)]
    found = state.instance_profile(call.params["InstanceProfileName"])
    if found is None and call.operation != "GetInstanceProfile":
        raise UnknownResource(f"instance profile {call.params['InstanceProfileName']}")
    context = tag_context("aws:ResourceTag", found[0]) if found else {}
    requests = [Request(action, _profile_arn(call), context, call=call.name)]
    if call.operation == "AddRoleToInstanceProfile":
        requests.append(Request("iam:PassRole", call.arn("iam", f"role/{call.params['RoleName']}", region=""),
                                {"iam:PassedToService": ("ec2.amazonaws.com",)}, call=call.name))
    return requests


def _ssm_parameter(call: Call, state: AccountState) -> list[Request]:
    name = call.params["Name"]
    account = "" if name.startswith("/aws/service/") else None
    return [Request("ssm:GetParameter", call.arn("ssm", f"parameter{name}", account=account), call=call.name)]


def _sqs(call: Call, state: AccountState) -> list[Request]:
    name = call.params.get("QueueName") or str(call.params.get("QueueUrl", "")).rstrip("/").rsplit("/", 1)[-1]
    return [Request(f"sqs:{call.operation}", call.arn("sqs", name), call=call.name)]


def _eks_cluster(call: Call, state: AccountState) -> list[Request]:
    return [Request("eks:DescribeCluster", call.arn("eks", f"cluster/{call.params['name']}"), call=call.name)]


def _unscoped(call: Call, state: AccountState) -> list[Request]:
    return [Request(call.name, "*", call=call.name)]


def _nothing(call: Call, state: AccountState) -> list[Request]:
    return []


MAPPINGS: dict[str, Callable[[Call, AccountState], list[Request]]] = {
    **{f"ec2:{op}": _ec2_read for op in (
        "DescribeAvailabilityZones", "DescribeCapacityReservations", "DescribeImages", "DescribeInstances", "DescribeInstanceTypeOfferings",
        "DescribeInstanceTypes", "DescribeLaunchTemplates", "DescribeSecurityGroups", "DescribeSpotPriceHistory",
        "DescribeSubnets")},
    "ec2:CreateLaunchTemplate": _create_launch_template,
    "ec2:CreateFleet": _create_fleet,
    "ec2:TerminateInstances": _terminate,
    "ec2:DeleteLaunchTemplate": _delete_launch_template,
    **{f"iam:{op}": _iam_profile for op in (
        "GetInstanceProfile", "CreateInstanceProfile", "AddRoleToInstanceProfile",
        "RemoveRoleFromInstanceProfile", "DeleteInstanceProfile", "TagInstanceProfile")},
    "ssm:GetParameter": _ssm_parameter,
    **{f"sqs:{op}": _sqs for op in ("GetQueueUrl", "ReceiveMessage", "DeleteMessage")},
    "eks:DescribeCluster": _eks_cluster,
    "pricing:GetProducts": _unscoped,
    "sts:GetCallerIdentity": _nothing,
}


def authorizations(call: Call, state: AccountState) -> list[Request]:
    """Every IAM authorization ``call`` needs.

    Raises:
        UnmappedCall: the operation is not in :data:`MAPPINGS`.
        UnknownResource: a target resource is not in the account (its tags cannot be known).
    """
    mapping = MAPPINGS.get(call.name)
    if mapping is None:
        raise UnmappedCall(f"no IAM mapping for {call.name}: teach tests/iamreplay/calls.py which "
                           f"authorizations it needs")
    return mapping(call, state)
