"""CreateFleet launches: request shape, capacity-error fallback, exhaustion, denials (botocore Stubber, since
moto's create_fleet uses only the first override and never returns Errors)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from aws.conftest import REGION
from nodewright.cloud.aws.instances import (
    FleetCandidate,
    InstanceProvider,
    LaunchRequest,
    fleet_request,
    idempotency_token,
)
from nodewright.cloud.provider import AuthorizationError, InsufficientCapacityError
from nodewright.cloud.unavailable import UnavailableOfferings

LT = "nodewright/demo/0123456789abcdef"
SUBNETS = {"us-east-1a": "subnet-0aaa", "us-east-1b": "subnet-0bbb"}


def _candidates(capacity_type: str = "on-demand") -> list[FleetCandidate]:
    prices = {"c5.large": 0.085, "m5.large": 0.096}
    return [FleetCandidate(t, z, s, capacity_type, p, LT) for t, p in prices.items() for z, s in SUBNETS.items()]


def _overrides(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"LaunchTemplateSpecification": {"LaunchTemplateName": LT, "Version": "$Latest"},
             "Overrides": [{"InstanceType": t, "SubnetId": SUBNETS[z]} for t, z in pairs]}]


def _expect_fleet(capacity_type: str, pairs: list[tuple[str, str]], attempt: int) -> dict[str, Any]:
    return {"Type": "instant", "TargetCapacitySpecification": {"TotalTargetCapacity": 1,
                                                               "DefaultTargetCapacityType": capacity_type},
            "LaunchTemplateConfigs": _overrides(*pairs), "TagSpecifications": ANY,
            "ClientToken": idempotency_token("uid-1", attempt),
            ("SpotOptions" if capacity_type == "spot" else "OnDemandOptions"): ANY}


def _fleet_error(instance_type: str, zone: str, code: str, message: str = "") -> dict[str, Any]:
    return {"LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": {"LaunchTemplateName": LT, "Version": "1"},
                                           "Overrides": {"InstanceType": instance_type, "SubnetId": SUBNETS[zone]}},
            "Lifecycle": "on-demand", "ErrorCode": code, "ErrorMessage": message or f"{code} for {instance_type}"}


def _instance(instance_id: str, instance_type: str, zone: str) -> dict[str, Any]:
    return {"Reservations": [{"Instances": [{
        "InstanceId": instance_id, "InstanceType": instance_type, "Placement": {"AvailabilityZone": zone},
        "State": {"Name": "pending", "Code": 0}, "ImageId": "ami-0123", "SubnetId": SUBNETS[zone],
        "LaunchTime": dt.datetime(2026, 7, 20, tzinfo=dt.UTC),
        "Tags": [{"Key": "karpenter.sh/nodeclaim", "Value": "default-x7k2p"}]}]}]}


@pytest.fixture
def ec2(aws_env: None) -> tuple[Any, Stubber]:
    client = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(client)
    stubber.add_response("describe_instances", {"Reservations": []})  # no instance launched before (no crash)
    return client, stubber


def _provider(client: Any, now: list[float]) -> tuple[InstanceProvider, UnavailableOfferings]:
    unavailable = UnavailableOfferings(clock=lambda: now[0])
    return InstanceProvider(client, "demo", unavailable), unavailable


def test_fleet_request_document() -> None:
    request = fleet_request(_candidates("spot")[:1], "spot", {"karpenter.sh/nodeclaim": "nc"}, "tok")
    assert request == {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
        "LaunchTemplateConfigs": _overrides(("c5.large", "us-east-1a")),
        "TagSpecifications": [{"ResourceType": k, "Tags": [{"Key": "karpenter.sh/nodeclaim", "Value": "nc"}]}
                              for k in ("instance", "volume", "fleet")],
        "ClientToken": "tok", "SpotOptions": {"AllocationStrategy": "price-capacity-optimized"}}
    many = [FleetCandidate(f"m5.{i}xlarge", "us-east-1a", "subnet-0aaa", "on-demand", 1.0, LT) for i in range(80)]
    on_demand = fleet_request(many, "on-demand", {}, "tok")
    assert len(on_demand["LaunchTemplateConfigs"][0]["Overrides"]) == 60
    assert on_demand["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}


def test_idempotency_token_is_stable_and_bounded() -> None:
    assert idempotency_token("uid-1", 0) == idempotency_token("uid-1", 0)
    assert idempotency_token("uid-1", 0) != idempotency_token("uid-1", 1)
    assert len(idempotency_token("uid-1", 0)) <= 64


def _stub_ice_then_launch(stubber: Stubber) -> None:
    """CreateFleet answers ICE for c5.large in us-east-1a, then launches i-0abc (c5.large, us-east-1b) from the
    remaining three offerings; the stubber is activated."""
    all_pairs = [("c5.large", "us-east-1a"), ("c5.large", "us-east-1b"), ("m5.large", "us-east-1a"),
                 ("m5.large", "us-east-1b")]
    stubber.add_response("create_fleet", {"FleetId": "fleet-1", "Errors": [
        _fleet_error("c5.large", "us-east-1a", "InsufficientInstanceCapacity")], "Instances": []},
        _expect_fleet("on-demand", all_pairs, 0))
    stubber.add_response("create_fleet", {"FleetId": "fleet-2", "Errors": [], "Instances": [{
        "InstanceIds": ["i-0abc"], "InstanceType": "c5.large", "Lifecycle": "on-demand"}]},
        _expect_fleet("on-demand", all_pairs[1:], 1))
    stubber.add_response("describe_instances", _instance("i-0abc", "c5.large", "us-east-1b"),
                         {"InstanceIds": ["i-0abc"]})
    stubber.activate()


def test_ice_marks_offering_and_retries_with_the_rest(ec2: tuple[Any, Stubber]) -> None:
    client, stubber = ec2
    now = [0.0]
    _stub_ice_then_launch(stubber)
    provider, unavailable = _provider(client, now)
    instance = provider.launch(LaunchRequest("default-x7k2p", "uid-1", _candidates()))
    stubber.assert_no_pending_responses()
    assert (instance.id, instance.instance_type, instance.zone) == ("i-0abc", "c5.large", "us-east-1b")
    assert unavailable.is_unavailable("c5.large", "us-east-1a", "on-demand")
    now[0] = 179.9
    assert unavailable.is_unavailable("c5.large", "us-east-1a", "on-demand")
    now[0] = 180.0  # Karpenter's 3-minute window is over
    assert not unavailable.is_unavailable("c5.large", "us-east-1a", "on-demand")


def test_ice_beside_a_launched_instance_reaches_the_unavailable_offerings(ec2: tuple[Any, Stubber]) -> None:
    """One answer with an instance *and* capacity errors (EC2 Fleet tried overrides in turn): the errors mark
    their offerings unavailable, so the next launch leaves them out of its request (issue 32, item 3)."""
    client, stubber = ec2
    now = [0.0]
    all_pairs = [("c5.large", "us-east-1a"), ("c5.large", "us-east-1b"), ("m5.large", "us-east-1a"),
                 ("m5.large", "us-east-1b")]
    stubber.add_response("create_fleet", {"FleetId": "fleet-1", "Errors": [
        _fleet_error("c5.large", "us-east-1a", "InsufficientInstanceCapacity"),
        _fleet_error("c5.large", "us-east-1b", "InsufficientInstanceCapacity"),
        _fleet_error("m5.large", "us-east-1a", "InvalidParameterValue")], "Instances": [{
            "InstanceIds": ["i-0abc"], "InstanceType": "m5.large", "Lifecycle": "on-demand"}]},
        _expect_fleet("on-demand", all_pairs, 0))
    stubber.add_response("describe_instances", _instance("i-0abc", "m5.large", "us-east-1b"),
                         {"InstanceIds": ["i-0abc"]})
    stubber.add_response("describe_instances", {"Reservations": []})  # the second nodeclaim: nothing launched yet
    stubber.add_response("create_fleet", {"FleetId": "fleet-2", "Errors": [], "Instances": [{
        "InstanceIds": ["i-0def"], "InstanceType": "m5.large", "Lifecycle": "on-demand"}]},
        {**_expect_fleet("on-demand", all_pairs[2:], 0), "ClientToken": idempotency_token("uid-2", 0)})
    stubber.add_response("describe_instances", _instance("i-0def", "m5.large", "us-east-1a"),
                         {"InstanceIds": ["i-0def"]})
    stubber.activate()
    provider, unavailable = _provider(client, now)
    first = provider.launch(LaunchRequest("default-x7k2p", "uid-1", _candidates()))
    assert (first.id, first.instance_type) == ("i-0abc", "m5.large")
    assert unavailable.is_unavailable("c5.large", "us-east-1a", "on-demand")
    assert unavailable.is_unavailable("c5.large", "us-east-1b", "on-demand")
    assert not unavailable.is_unavailable("m5.large", "us-east-1a", "on-demand")  # not a capacity error
    second = provider.launch(LaunchRequest("default-b9q4z", "uid-2", _candidates()))
    stubber.assert_no_pending_responses()
    assert second.id == "i-0def"


def test_all_offerings_exhausted_fails_with_every_reason(ec2: tuple[Any, Stubber]) -> None:
    client, stubber = ec2
    stubber.add_response("create_fleet", {"Errors": [
        _fleet_error("c5.large", "us-east-1a", "InsufficientInstanceCapacity"),
        _fleet_error("c5.large", "us-east-1b", "Unsupported"),
        _fleet_error("m5.large", "us-east-1a", "InsufficientInstanceCapacity")], "Instances": []})
    stubber.add_response("create_fleet", {"Errors": [
        _fleet_error("m5.large", "us-east-1b", "VcpuLimitExceeded")], "Instances": []},
        _expect_fleet("on-demand", [("m5.large", "us-east-1b")], 1))
    stubber.activate()
    provider, unavailable = _provider(client, [0.0])
    with pytest.raises(InsufficientCapacityError) as caught:
        provider.launch(LaunchRequest("default-x7k2p", "uid-1", _candidates()))
    assert [(r.instance_type, r.zone, r.error_code) for r in caught.value.reasons] == [
        ("c5.large", "us-east-1a", "InsufficientInstanceCapacity"), ("c5.large", "us-east-1b", "Unsupported"),
        ("m5.large", "us-east-1a", "InsufficientInstanceCapacity"), ("m5.large", "us-east-1b", "VcpuLimitExceeded")]
    assert str(caught.value).startswith("all 4 offerings for nodeclaim default-x7k2p are unavailable (c5.large/")
    assert unavailable.is_unavailable("m5.large", "us-east-1c", "on-demand")  # vCPU quota is regional


def test_spot_limit_falls_back_to_on_demand(ec2: tuple[Any, Stubber]) -> None:
    client, stubber = ec2
    candidates = [*_candidates("spot"), *_candidates("on-demand")]
    stubber.add_response("create_fleet", {"Errors": [
        {**_fleet_error("c5.large", "us-east-1a", "MaxSpotInstanceCountExceeded"), "Lifecycle": "spot"}],
        "Instances": []})
    stubber.add_response("create_fleet", {"Instances": [{"InstanceIds": ["i-0od"], "InstanceType": "c5.large",
                                                          "Lifecycle": "on-demand"}]},
                         _expect_fleet("on-demand", [("c5.large", "us-east-1a"), ("c5.large", "us-east-1b"),
                                                     ("m5.large", "us-east-1a"), ("m5.large", "us-east-1b")], 1))
    stubber.add_response("describe_instances", _instance("i-0od", "c5.large", "us-east-1a"))
    stubber.activate()
    provider, unavailable = _provider(client, [0.0])
    assert provider.launch(LaunchRequest("default-x7k2p", "uid-1", candidates)).id == "i-0od"
    assert unavailable.is_unavailable("m6g.large", "us-east-1c", "spot")  # the account-wide spot limit


def test_fleet_passrole_error_is_an_authorization_error(ec2: tuple[Any, Stubber]) -> None:
    client, stubber = ec2
    message = ("You are not authorized to perform this operation. User: arn:aws:sts::111122223333:assumed-role/"
               "KarpenterControllerRole-demo/1732 is not authorized to perform: iam:PassRole on resource: "
               "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo")
    stubber.add_response("create_fleet", {"Errors": [_fleet_error("c5.large", "us-east-1a", "UnauthorizedOperation",
                                                                   message)], "Instances": []})
    stubber.activate()
    provider, unavailable = _provider(client, [0.0])
    with pytest.raises(AuthorizationError) as caught:
        provider.launch(LaunchRequest("default-x7k2p", "uid-1", _candidates()))
    assert str(caught.value) == (
        "the controller role arn:aws:iam::111122223333:role/KarpenterControllerRole-demo may not iam:PassRole on "
        "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo: add iam:PassRole for that role with condition "
        "iam:PassedToService=ec2.amazonaws.com")
    assert not unavailable.is_unavailable("c5.large", "us-east-1a", "on-demand")  # not a capacity problem


def test_existing_instance_for_the_nodeclaim_is_returned_without_a_fleet(aws_env: None) -> None:
    client = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(client)
    stubber.add_response("describe_instances", _instance("i-0old", "m5.large", "us-east-1b"))
    stubber.activate()  # no create_fleet response queued: calling it would fail the test
    provider, _ = _provider(client, [0.0])
    assert provider.launch(LaunchRequest("default-x7k2p", "uid-1", _candidates())).id == "i-0old"


def _effective(candidates: list[FleetCandidate], prices: dict[tuple[str, str], float]) -> list[FleetCandidate]:
    """``candidates`` with a PricingPolicy's marginal prices, by (instance type, capacity type)."""
    import dataclasses

    return [dataclasses.replace(c, effective_price=prices[(c.instance_type, c.capacity_type)]) for c in candidates]


def test_effective_prices_send_on_demand_prioritized_in_their_order(ec2: tuple[Any, Stubber]) -> None:
    client, stubber = ec2
    # An idle m5.large RI: m5.large costs $0 more, c5.large its list 0.085 less 5% -- the reverse of list order.
    on_demand = _effective(_candidates(), {("m5.large", "on-demand"): 0.0, ("c5.large", "on-demand"): 0.08075})
    # Spot is cheaper at list price (0.03) but costs more than the RI-covered m5.large: on-demand is launched.
    spot = _effective(_candidates("spot"), {("m5.large", "spot"): 0.03, ("c5.large", "spot"): 0.03})
    order = [("m5.large", "us-east-1a"), ("m5.large", "us-east-1b"), ("c5.large", "us-east-1a"),
             ("c5.large", "us-east-1b")]
    expected = {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"},
        "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": {"LaunchTemplateName": LT, "Version": "$Latest"},
                                   "Overrides": [{"InstanceType": t, "SubnetId": SUBNETS[z], "Priority": float(i)}
                                                 for i, (t, z) in enumerate(order)]}],
        "TagSpecifications": ANY, "ClientToken": idempotency_token("uid-1", 0),
        "OnDemandOptions": {"AllocationStrategy": "prioritized"},
    }
    stubber.add_response("create_fleet", {"FleetId": "fleet-1", "Errors": [], "Instances": [{
        "InstanceIds": ["i-0abc"], "InstanceType": "m5.large", "Lifecycle": "on-demand"}]}, expected)
    stubber.add_response("describe_instances", _instance("i-0abc", "m5.large", "us-east-1a"),
                         {"InstanceIds": ["i-0abc"]})
    stubber.activate()
    provider, _ = _provider(client, [0.0])
    instance = provider.launch(LaunchRequest("default-x7k2p", "uid-1", [*spot, *on_demand]))
    stubber.assert_no_pending_responses()
    assert (instance.instance_type, instance.zone) == ("m5.large", "us-east-1a")


def test_without_effective_prices_on_demand_stays_lowest_price() -> None:
    request = fleet_request(_candidates(), "on-demand", {}, "tok")
    assert request["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert all("Priority" not in o for c in request["LaunchTemplateConfigs"] for o in c["Overrides"])


def test_effective_spot_cheaper_than_on_demand_keeps_spot() -> None:
    from nodewright.cloud.aws.instances import launch_capacity_type

    candidates = _effective(_candidates() + _candidates("spot"), {
        ("m5.large", "on-demand"): 0.0912, ("c5.large", "on-demand"): 0.08075,
        ("m5.large", "spot"): 0.03, ("c5.large", "spot"): 0.028})
    assert launch_capacity_type(candidates) == "spot"
    request = fleet_request([c for c in candidates if c.capacity_type == "spot"], "spot", {}, "tok")
    assert request["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}


def test_each_failed_offering_is_counted_by_zone_zone_id_capacity_type_and_code(ec2: tuple[Any, Stubber]) -> None:
    """karpenter_cloudprovider_instance_launch_failures_total (Karpenter AWS main): one per failed offering of a
    fleet answer, the zone ID resolved from the subnets."""
    from nodewright.metrics import Metrics

    client, stubber = ec2
    _stub_ice_then_launch(stubber)
    provider = InstanceProvider(client, "demo", UnavailableOfferings(clock=lambda: 0.0),
                                zone_ids=lambda: {"us-east-1a": "use1-az1"})
    provider.metrics = Metrics()
    provider.launch(LaunchRequest("default-x7k2p", "uid-1", _candidates()))
    assert provider.metrics.value("karpenter_cloudprovider_instance_launch_failures_total", {
        "zone": "us-east-1a", "zone_id": "use1-az1", "capacity_type": "on-demand",
        "reason": "InsufficientInstanceCapacity"}) == 1.0
