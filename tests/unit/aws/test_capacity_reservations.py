"""Capacity reservations on the AWS provider: DescribeCapacityReservations per selector term (botocore Stubber:
moto implements no capacity reservations), reserved offerings at on-demand / 10^7, a launch that targets the
reservation in its launch template and fleet, then on-demand once it is full."""

from __future__ import annotations

import datetime as dt
from typing import Any

import boto3
from botocore.stub import Stubber

from aws.conftest import REGION, Cluster, make_provider, nodeclaim, nodeclass, stubbed_pricing
from nodewright.api import labels
from nodewright.api.ec2nodeclass import CapacityReservationSelectorTerm
from nodewright.cloud.aws.capacityreservations import CapacityReservationProvider, describe_arguments
from nodewright.cloud.reservations import RESERVED_PRICE_DIVISOR

RESERVATION = {
    "CapacityReservationId": "cr-0123456789abcdef0", "OwnerId": "123456789012", "InstanceType": "m5.large",
    "InstancePlatform": "Linux/UNIX", "AvailabilityZone": "us-east-1b", "Tenancy": "default",
    "TotalInstanceCount": 1, "AvailableInstanceCount": 1, "State": "active", "InstanceMatchCriteria": "targeted",
    "EndDate": dt.datetime(2026, 12, 24, tzinfo=dt.UTC), "ReservationType": "default"}


def _term(**kw: Any) -> CapacityReservationSelectorTerm:
    return CapacityReservationSelectorTerm.model_validate(kw)


def test_each_term_becomes_one_describe_call() -> None:
    active = {"Name": "state", "Values": ["active"]}
    assert describe_arguments(_term(id="cr-0123456789abcdef0")) == {
        "CapacityReservationIds": ["cr-0123456789abcdef0"], "Filters": [active]}
    assert describe_arguments(_term(tags={"team": "ml", "gpu": "*"}, ownerID="123456789012",
                                    instanceMatchCriteria="targeted")) == {"Filters": [
        {"Name": "tag-key", "Values": ["gpu"]}, {"Name": "tag:team", "Values": ["ml"]},
        {"Name": "owner-id", "Values": ["123456789012"]},
        {"Name": "instance-match-criteria", "Values": ["targeted"]}, active]}


def test_resolve_ors_terms_and_drops_inactive_reservations(aws_env: None) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    expired = {**RESERVATION, "CapacityReservationId": "cr-0fedcba9876543210", "State": "expired"}
    stubber.add_response("describe_capacity_reservations", {"CapacityReservations": [RESERVATION]},
                         describe_arguments(_term(id="cr-0123456789abcdef0")))
    stubber.add_response("describe_capacity_reservations", {"CapacityReservations": [expired, RESERVATION]},
                         describe_arguments(_term(tags={"team": "ml"})))
    stubber.activate()
    found = CapacityReservationProvider(ec2).resolve([_term(id="cr-0123456789abcdef0"), _term(tags={"team": "ml"})])
    stubber.assert_no_pending_responses()
    assert [(r.id, r.instance_type, r.zone, r.available, r.match_criteria) for r in found] == [
        ("cr-0123456789abcdef0", "m5.large", "us-east-1b", 1, "targeted")]
    assert found[0].status() == {
        "id": "cr-0123456789abcdef0", "instanceType": "m5.large", "availabilityZone": "us-east-1b",
        "ownerID": "123456789012", "instanceMatchCriteria": "targeted", "reservationType": "default",
        "state": "active", "endTime": "2026-12-24T00:00:00+00:00"}


def test_launch_targets_the_reservation_then_falls_back_to_on_demand(cluster: Cluster) -> None:
    pricing, _ = stubbed_pricing()
    provider = make_provider({"default": nodeclass(
        capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}])}, pricing)
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    stubber.add_response("describe_capacity_reservations", {"CapacityReservations": [RESERVATION]})
    stubber.activate()
    provider.capacity_reservations._ec2 = ec2
    sent: list[dict] = []
    provider.instances._ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet", lambda params, **_: sent.append(params))

    types = {it.name: it for it in provider.get_instance_types(_pool())}
    reserved = [o for o in types["m5.large"].offerings if o.capacity_type == "reserved"]
    assert [(o.zone, o.reservation_id, o.price) for o in reserved] == [
        ("us-east-1b", "cr-0123456789abcdef0", 0.096 / RESERVED_PRICE_DIVISOR)]

    first = provider.create(nodeclaim("default-a", capacity_types=("reserved", "on-demand")))
    assert first.metadata.labels is not None
    assert (first.metadata.labels[labels.CAPACITY_TYPE], first.metadata.labels[labels.ZONE],
            first.metadata.labels[labels.CAPACITY_RESERVATION_ID]) == ("reserved", "us-east-1b", "cr-0123456789abcdef0")
    fleet = sent[0]
    assert fleet["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    ((config,),) = [fleet["LaunchTemplateConfigs"]]
    assert config["Overrides"] == [{"InstanceType": "m5.large", "SubnetId": cluster.subnets["us-east-1b"]}]
    name = config["LaunchTemplateSpecification"]["LaunchTemplateName"]
    data = ec2_data(name)
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}}

    # The only instance of the reservation is taken (until the next describe): the next claim goes on-demand.
    second = provider.create(nodeclaim("default-b", capacity_types=("reserved", "on-demand")))
    assert second.metadata.labels is not None
    assert second.metadata.labels[labels.CAPACITY_TYPE] == "on-demand"
    assert labels.CAPACITY_RESERVATION_ID not in second.metadata.labels
    assert "CapacityReservationSpecification" not in ec2_data(
        sent[1]["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"])
    assert provider.nodeclass_status(provider._nodeclass("default"))["capacityReservations"][0]["id"] == \
        "cr-0123456789abcdef0"


def ec2_data(name: str) -> dict[str, Any]:
    ec2 = boto3.client("ec2", region_name=REGION)
    (template,) = ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"]
    data: dict[str, Any] = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])[
        "LaunchTemplateVersions"][0]["LaunchTemplateData"]
    return data


def _pool() -> Any:
    from nodewright.api.nodepool import NodePool

    return NodePool.model_validate({"metadata": {"name": "default"}, "spec": {"template": {"spec": {
        "requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                             "name": "default"}}}}})


def test_reserved_capacity_gate_off_ignores_the_terms_with_one_warning(cluster: Cluster, caplog: Any) -> None:
    """ReservedCapacity=false (Karpenter's gate): no DescribeCapacityReservations (the stub has no response, so a
    call would fail), no reserved offering, an on-demand launch with no reservation target, no status entry, and
    one warning line however often the class is resolved."""
    pricing, _ = stubbed_pricing()
    provider = make_provider({"default": nodeclass(
        capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}])}, pricing, reserved_capacity=False)
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    stubber.activate()
    provider.capacity_reservations._ec2 = ec2
    types = {it.name: it for it in provider.get_instance_types(_pool())}
    assert {o.capacity_type for o in types["m5.large"].offerings} == {"on-demand", "spot"}
    launched = provider.create(nodeclaim("default-a", capacity_types=("reserved", "on-demand")))
    assert launched.metadata.labels is not None
    assert launched.metadata.labels[labels.CAPACITY_TYPE] == "on-demand"
    assert labels.CAPACITY_RESERVATION_ID not in launched.metadata.labels
    assert "capacityReservations" not in provider.nodeclass_status(provider._nodeclass("default"))
    warnings = [r.getMessage() for r in caplog.records if "ReservedCapacity" in r.getMessage()]
    assert warnings == ["EC2NodeClass default: capacityReservationSelectorTerms ignored, the ReservedCapacity "
                        "feature gate is off (FEATURE_GATES ReservedCapacity=true to use reservations)"]
