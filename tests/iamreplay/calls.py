"""From one AWS API call (operation + parameters, as botocore sends it) to the authorizations IAM performs.

Facts used (AWS Service Authorization Reference for EC2, IAM, SSM, SQS, EKS, Pricing -- for EC2 "Actions,
resources, and condition keys for Amazon EC2", https://docs.aws.amazon.com/service-authorization/latest/reference/
list_amazonec2.html, rows ``RunInstances`` and ``CreateFleet`` and the resource-type table for ARN formats; EC2 user
guide "Grant permission to tag resources during creation"; "Launch template" and "EC2 Fleet" IAM pages):

- ``ec2:Describe*`` have no resource-level permissions: resource ``*``, with ``aws:RequestedRegion``.
- ``CreateLaunchTemplate`` authorizes the new template with its ``aws:RequestTag``s/``aws:TagKeys``, and
  tagging on create (``ec2:CreateTags`` with ``ec2:CreateAction = CreateLaunchTemplate``).
- ``CreateFleet`` (type ``instant``) and ``RunInstances``: every resource is derived from the request and its
  launch template, following the Service Authorization Reference rows of those two actions (see the comment
  above :data:`LAUNCH_FIELDS_MAPPED`): CreateFleet authorizes ``ec2:CreateFleet`` *and* ``ec2:RunInstances`` on
  each. Created: the fleet, instances and volumes (request ``TagSpecifications``), network interfaces and spot
  requests (the template's ``TagSpecifications``), each with its ``aws:RequestTag``s plus ``ec2:CreateTags`` on
  create. Referenced (``aws:ResourceTag`` = its tags where the account knows them): the launch template, the
  image (and each override's), block-device snapshots, security groups (``SecurityGroupIds`` and each
  interface's ``Groups``), subnets (overrides, ``SubnetId``, interfaces), existing network interfaces, the
  placement group (by name), the capacity reservation (``CapacityReservationTarget``) and the key pair; the
  instance profile's roles need ``iam:PassRole`` with ``iam:PassedToService = ec2.amazonaws.com``. Every field
  of the request and the template must be known (mapped, or listed as naming no resource): anything else --
  ``SecurityGroups`` by name, ``LicenseSpecifications``, a KMS key, a capacity-reservation resource group --
  raises :class:`UnmappedCall`, which fails the test that made the call.
- ``TerminateInstances`` / ``RebootInstances`` / ``DeleteLaunchTemplate`` authorize each target with its
  ``aws:ResourceTag``s.
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

    def placement_group_name(self, region: str, group_id: str) -> str | None:
        """The name of placement group ``pg-...`` (its ARN uses the name); None when unknown."""


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


def _referenced(call: Call, actions: tuple[str, ...], arn: str, tags: Mapping[str, str] | None,
                what: str = "") -> list[Request]:
    context = merge(_region_context(call), tag_context("aws:ResourceTag", tags or {}))
    return [Request(action, arn, context, call=f"{call.name}{what}") for action in actions]


# --- launches: RunInstances and CreateFleet -------------------------------------------------------------------
#
# Source: AWS Service Authorization Reference, "Actions, resources, and condition keys for Amazon EC2"
# (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html), rows ``RunInstances``
# and ``CreateFleet``: RunInstances authorizes image*, instance*, network-interface*, security-group*, subnet*,
# volume*, and when the request (or its launch template) uses them capacity-reservation, elastic-gpu,
# elastic-inference, key-pair, launch-template, license-configuration, placement-group, snapshot and
# spot-instances-request; CreateFleet authorizes fleet* and every resource its RunInstances would. ARN formats
# from the same page's resource-type table (``image``/``snapshot`` have no account; ``placement-group/<name>``,
# ``key-pair/<name>``).

#: Launch fields (RunInstances parameters / LaunchTemplateData keys) that name no resource IAM authorizes.
LAUNCH_FIELDS_WITHOUT_RESOURCES = frozenset({
    "UserData", "MetadataOptions", "Monitoring", "CpuOptions", "InstanceType", "EbsOptimized",
    "DisableApiTermination", "DisableApiStop", "InstanceInitiatedShutdownBehavior", "PrivateDnsNameOptions",
    "MaintenanceOptions", "HibernationOptions", "EnclaveOptions", "CreditSpecification", "MinCount", "MaxCount",
    "ClientToken", "DryRun", "NetworkPerformanceOptions", "OperatorRequest"})
#: Launch fields mapped below to the resources they reference or create.
LAUNCH_FIELDS_MAPPED = frozenset({
    "ImageId", "BlockDeviceMappings", "SecurityGroupIds", "NetworkInterfaces", "SubnetId", "Placement",
    "CapacityReservationSpecification", "IamInstanceProfile", "KeyName", "TagSpecifications",
    "InstanceMarketOptions", "LaunchTemplate"})
#: CreateFleet parameters that name no resource (besides those mapped: LaunchTemplateConfigs, TagSpecifications).
FLEET_FIELDS_WITHOUT_RESOURCES = frozenset({
    "Type", "TargetCapacitySpecification", "ClientToken", "SpotOptions", "ExcessCapacityTerminationPolicy",
    "ReplaceUnhealthyInstances", "TerminateInstancesWithExpiration", "ValidFrom", "ValidUntil", "Context",
    "DryRun"})
_FLEET_OVERRIDE_FIELDS = frozenset({"InstanceType", "SubnetId", "AvailabilityZone", "Priority", "WeightedCapacity",
                                    "MaxPrice", "ImageId", "Placement", "InstanceRequirements"})
_PLACEMENT_WITHOUT_RESOURCES = frozenset({"AvailabilityZone", "AvailabilityZoneId", "Tenancy", "Affinity",
                                          "PartitionNumber", "SpreadDomain"})
_EBS_WITHOUT_RESOURCES = frozenset({"VolumeSize", "VolumeType", "Encrypted", "DeleteOnTermination", "Iops",
                                    "Throughput", "VolumeInitializationRate"})
_NIC_WITHOUT_RESOURCES = frozenset({
    "DeviceIndex", "NetworkCardIndex", "InterfaceType", "AssociatePublicIpAddress", "Ipv4PrefixCount",
    "Ipv6PrefixCount", "Ipv6AddressCount", "ConnectionTrackingSpecification", "DeleteOnTermination",
    "Description", "PrivateIpAddress", "SecondaryPrivateIpAddressCount", "AssociateCarrierIpAddress",
    "EnaSrdSpecification", "PrimaryIpv6"})


def _unmapped(call: Call, where: str, fields: Any, known: frozenset[str]) -> None:
    unknown = sorted(set(fields) - known)
    if unknown:
        raise UnmappedCall(f"{call.name}: {where} field(s) {unknown} are not mapped to the resources IAM "
                           f"authorizes; teach tests/iamreplay/calls.py (AWS Service Authorization Reference, "
                           f"{call.operation})")


def _launch_references(call: Call, state: AccountState, actions: tuple[str, ...], data: Mapping[str, Any],
                       where: str) -> tuple[list[Request], list[str]]:
    """The authorizations of the resources a launch's ``data`` (RunInstances parameters, or a launch template's
    data with a fleet override applied) references, and the created kinds it adds (``network-interface`` is
    always created unless every interface is an existing one).

    Raises:
        UnmappedCall: a field, or a shape of a field, this module does not map (``where`` names the source).
    """
    _unmapped(call, where, data, LAUNCH_FIELDS_WITHOUT_RESOURCES | LAUNCH_FIELDS_MAPPED)
    requests: list[Request] = []

    def ec2(kind: str, ident: str, account: str | None = None, tags: Mapping[str, str] | None = None,
            lookup: bool = True) -> None:
        found = state.ec2_tags(call.region, ident) if lookup and tags is None else tags
        requests.extend(_referenced(call, actions, call.arn("ec2", f"{kind}/{ident}", account=account), found,
                                    f" referencing {kind}"))

    if data.get("ImageId"):
        ec2("image", data["ImageId"], account="")
    for mapping in data.get("BlockDeviceMappings") or []:
        ebs = mapping.get("Ebs") or {}
        _unmapped(call, f"{where} BlockDeviceMappings[].Ebs", ebs, _EBS_WITHOUT_RESOURCES | {"SnapshotId"})
        if ebs.get("SnapshotId"):
            ec2("snapshot", ebs["SnapshotId"], account="")
        _unmapped(call, f"{where} BlockDeviceMappings[]", mapping, frozenset({"DeviceName", "Ebs", "NoDevice",
                                                                               "VirtualName"}))
    for group in data.get("SecurityGroupIds") or []:
        ec2("security-group", group)
    if data.get("SubnetId"):
        ec2("subnet", data["SubnetId"])
    created = ["network-interface"]
    interfaces = data.get("NetworkInterfaces") or []
    for nic in interfaces:
        _unmapped(call, f"{where} NetworkInterfaces[]", nic,
                  _NIC_WITHOUT_RESOURCES | {"Groups", "SubnetId", "NetworkInterfaceId"})
        for group in nic.get("Groups") or []:
            ec2("security-group", group)
        if nic.get("SubnetId"):
            ec2("subnet", nic["SubnetId"])
        if nic.get("NetworkInterfaceId"):
            ec2("network-interface", nic["NetworkInterfaceId"])
    if interfaces and all(nic.get("NetworkInterfaceId") for nic in interfaces):
        created = []
    placement = data.get("Placement") or {}
    _unmapped(call, f"{where} Placement", placement, _PLACEMENT_WITHOUT_RESOURCES | {"GroupName", "GroupId"})
    if placement.get("GroupName") or placement.get("GroupId"):
        name = placement.get("GroupName") or state.placement_group_name(call.region, placement["GroupId"])
        if name is None:
            raise UnknownResource(f"placement group {placement['GroupId']}")
        ec2("placement-group", name, lookup=False, tags={})
    reservation = data.get("CapacityReservationSpecification") or {}
    _unmapped(call, f"{where} CapacityReservationSpecification", reservation,
              frozenset({"CapacityReservationPreference", "CapacityReservationTarget"}))
    target = reservation.get("CapacityReservationTarget") or {}
    _unmapped(call, f"{where} CapacityReservationTarget", target, frozenset({"CapacityReservationId"}))
    if target.get("CapacityReservationId"):
        ec2("capacity-reservation", target["CapacityReservationId"], lookup=False, tags={})
    if data.get("KeyName"):
        ec2("key-pair", data["KeyName"], lookup=False, tags={})
    market = data.get("InstanceMarketOptions") or {}
    if market.get("MarketType") not in (None, "spot"):
        raise UnmappedCall(f"{call.name}: {where} InstanceMarketOptions.MarketType {market['MarketType']!r} is "
                           f"not mapped")
    if market.get("MarketType") == "spot":
        created.append("spot-instances-request")
    profile = data.get("IamInstanceProfile") or {}
    _unmapped(call, f"{where} IamInstanceProfile", profile, frozenset({"Name", "Arn"}))
    name = profile.get("Name") or str(profile.get("Arn", "")).rsplit("/", 1)[-1]
    if name:
        found = state.instance_profile(name)
        if found is None:
            raise UnknownResource(f"instance profile {name}")
        for role in found[1]:
            requests.append(Request("iam:PassRole", call.arn("iam", f"role/{role}", region=""),
                                    {"iam:PassedToService": ("ec2.amazonaws.com",)},
                                    call=f"{call.name} passing the instance profile's role"))
    return requests, created


def _created(call: Call, actions: tuple[str, ...], kinds: list[str], specs: list[Any]) -> list[Request]:
    """Authorizations of the resources a launch creates, each with the request tags the specifications give it
    (later specifications win), and tag-on-create (``ec2:CreateTags`` with ``ec2:CreateAction``) when tagged."""
    requests: list[Request] = []
    for kind in dict.fromkeys(kinds):
        tags: dict[str, str] = {}
        for spec in specs:
            tags.update(_tags(spec, kind))
        arn = call.arn("ec2", f"{kind}/*")
        context = merge(_region_context(call), tag_context("aws:RequestTag", tags))
        requests += [Request(action, arn, context, call=f"{call.name} creating {kind}") for action in actions]
        if tags:
            requests.append(Request("ec2:CreateTags", arn,
                                    merge(context, {"ec2:CreateAction": (call.operation,)}),
                                    call=f"{call.name} tagging {kind}"))
    return requests


def _template(call: Call, state: AccountState, spec: Mapping[str, Any]) -> LaunchTemplateFacts:
    _unmapped(call, "LaunchTemplateSpecification", spec, frozenset({"LaunchTemplateName", "LaunchTemplateId",
                                                                    "Version"}))
    if spec.get("Version") not in (None, "$Latest", "$Default"):
        raise UnmappedCall(f"{call.name}: launch template Version {spec['Version']!r} (only $Latest/$Default are "
                           f"read from the account)")
    template = state.launch_template(call.region, spec.get("LaunchTemplateName"), spec.get("LaunchTemplateId"))
    if template is None:
        raise UnknownResource(f"launch template {dict(spec)}")
    return template


def _dedupe(requests: list[Request]) -> list[Request]:
    seen: dict[tuple[Any, ...], Request] = {}
    for r in requests:
        seen.setdefault((r.action, r.resource, tuple(sorted(r.context.items())), r.call), r)
    return list(seen.values())


def _create_fleet(call: Call, state: AccountState) -> list[Request]:
    """CreateFleet (``instant``): the fleet, plus everything each launch template config's RunInstances would
    authorize (template data with the override applied), for ``ec2:CreateFleet`` and ``ec2:RunInstances``."""
    actions = ("ec2:CreateFleet", "ec2:RunInstances")
    params = call.params
    _unmapped(call, "request", params, FLEET_FIELDS_WITHOUT_RESOURCES | {"LaunchTemplateConfigs",
                                                                         "TagSpecifications", "OnDemandOptions"})
    on_demand = params.get("OnDemandOptions") or {}
    _unmapped(call, "OnDemandOptions", on_demand, frozenset({"AllocationStrategy", "SingleInstanceType",
                                                             "SingleAvailabilityZone", "MinTargetCapacity",
                                                             "MaxTotalPrice"}))
    if params.get("Type", "maintain") != "instant":
        raise UnmappedCall(f"{call.name}: fleet Type {params.get('Type', 'maintain')!r} is not mapped (instant only)")
    requests: list[Request] = []
    kinds = ["fleet", "instance", "volume"]
    template_specs: list[Any] = []
    for config in params.get("LaunchTemplateConfigs", []):
        _unmapped(call, "LaunchTemplateConfigs[]", config, frozenset({"LaunchTemplateSpecification", "Overrides"}))
        template = _template(call, state, config.get("LaunchTemplateSpecification", {}))
        requests += _referenced(call, actions, call.arn("ec2", f"launch-template/{template.id}"), template.tags,
                                " referencing launch-template")
        template_specs += list(template.data.get("TagSpecifications") or [])
        for override in config.get("Overrides") or [{}]:
            _unmapped(call, "Overrides[]", override, _FLEET_OVERRIDE_FIELDS - {"InstanceRequirements"})
            data = dict(template.data)
            data.update({k: v for k, v in override.items() if k in ("ImageId", "SubnetId")})
            if override.get("Placement"):
                data["Placement"] = {**(data.get("Placement") or {}), **override["Placement"]}
            refs, created = _launch_references(call, state, actions, data,
                                               f"launch template {template.id} (with override)")
            requests += refs
            kinds += created
    spot = params.get("TargetCapacitySpecification", {}).get("DefaultTargetCapacityType") == "spot"
    if spot:
        kinds.append("spot-instances-request")
    requests += _created(call, actions, kinds, [template_specs, params.get("TagSpecifications")])
    return _dedupe(requests)


def _run_instances(call: Call, state: AccountState) -> list[Request]:
    """RunInstances: the request's own fields over its launch template's (the request wins), referenced and
    created resources for ``ec2:RunInstances``. The controller launches with CreateFleet; this mapping keeps the
    replay honest should it ever call RunInstances, and is exercised by the replay's own tests."""
    actions = ("ec2:RunInstances",)
    params = dict(call.params)
    requests: list[Request] = []
    data: dict[str, Any] = {}
    specs: list[Any] = []
    if params.get("LaunchTemplate"):
        template = _template(call, state, params["LaunchTemplate"])
        requests += _referenced(call, actions, call.arn("ec2", f"launch-template/{template.id}"), template.tags,
                                " referencing launch-template")
        data.update(template.data)
        specs.append(template.data.get("TagSpecifications"))
    data.update({k: v for k, v in params.items() if k != "LaunchTemplate"})
    refs, created = _launch_references(call, state, actions, data, "request")
    specs.append(params.get("TagSpecifications"))
    return _dedupe(requests + refs + _created(call, actions, ["instance", "volume", *created], specs))


def _instances(call: Call, state: AccountState) -> list[Request]:
    """``TerminateInstances`` / ``RebootInstances``: the action on each instance, with its tags."""
    requests = []
    for instance in call.params.get("InstanceIds", []):
        tags = state.ec2_tags(call.region, instance)
        if tags is None:
            raise UnknownResource(f"instance {instance}")
        requests += _referenced(call, (call.name,), call.arn("ec2", f"instance/{instance}"), tags)
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
        "DescribeCapacityReservations", "DescribeImages", "DescribeInstances", "DescribeInstanceTypeOfferings",
        "DescribeInstanceTypes", "DescribeLaunchTemplates", "DescribeSecurityGroups", "DescribeSpotPriceHistory",
        "DescribeSubnets")},
    "ec2:CreateLaunchTemplate": _create_launch_template,
    "ec2:CreateFleet": _create_fleet,
    "ec2:RunInstances": _run_instances,
    "ec2:TerminateInstances": _instances,
    "ec2:RebootInstances": _instances,
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
