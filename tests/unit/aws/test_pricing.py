"""Prices: Pricing API parsing (stubbed), spot history reduction, fallback to the bundled table."""

from __future__ import annotations

import datetime as dt
import logging

import boto3
import pytest
from botocore.stub import Stubber

from aws.conftest import LIVE_PRICES, REGION, price_list_entry, stubbed_pricing
from nodewright.cloud.aws.pricing import (
    PricingProvider,
    latest_spot_prices,
    on_demand_filters,
    parse_price_list,
)
from nodewright.cloud.prices import modelled_spot_price
from nodewright.metrics import Metrics

NOW = dt.datetime(2026, 7, 20, 12, 0, tzinfo=dt.UTC)


def _ec2_with_spot(history: list[dict]) -> tuple[object, Stubber]:
    ec2 = boto3.client("ec2", region_name=REGION)
    stubber = Stubber(ec2)
    stubber.add_response("describe_spot_price_history", {"SpotPriceHistory": history},
                         {"ProductDescriptions": ["Linux/UNIX"], "StartTime": NOW})
    stubber.activate()
    return ec2, stubber


def _gauge(provider: PricingProvider, kind: str) -> float | None:
    """``nodewright_pricing_fallback{kind}`` as a controller's own registry exports it (not the global one)."""
    metrics = Metrics()
    metrics.observe_pricing(provider)
    assert b"nodewright_pricing_fallback" in metrics.render()
    return metrics.value("nodewright_pricing_fallback", {"kind": kind})


def test_get_products_filters_and_parsing() -> None:
    assert on_demand_filters("ap-northeast-2")[0] == {"Type": "TERM_MATCH", "Field": "regionCode",
                                                      "Value": "ap-northeast-2"}
    assert parse_price_list([price_list_entry("m5.large", 0.096), price_list_entry("m5.large", 0.5),
                             price_list_entry("c5.large", 0.0)]) == {"m5.large": 0.096}


def test_latest_spot_price_per_type_and_zone() -> None:
    history = [
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.0400", "Timestamp": NOW},
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.0350",
         "Timestamp": NOW - dt.timedelta(hours=1)},
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1b", "SpotPrice": "0.0370", "Timestamp": NOW},
    ]
    assert latest_spot_prices(history) == {("m5.large", "us-east-1a"): 0.04, ("m5.large", "us-east-1b"): 0.037}


def test_live_prices_win_and_clear_the_fallback_gauge(aws_env: None) -> None:
    pricing, pricing_stub = stubbed_pricing()
    ec2, ec2_stub = _ec2_with_spot([{"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a",
                                     "SpotPrice": "0.0351", "Timestamp": NOW}])
    provider = PricingProvider(pricing, ec2, REGION, now=lambda: NOW)
    provider.refresh()
    pricing_stub.assert_no_pending_responses()
    ec2_stub.assert_no_pending_responses()
    assert provider.on_demand_price("c5.large") == LIVE_PRICES["c5.large"]
    assert provider.spot_price("m5.large", "us-east-1a") == 0.0351
    assert provider.spot_price("m5.large", "us-east-1b") == modelled_spot_price("m5.large", 0.096)
    assert not provider.on_demand_fallback and _gauge(provider, "on-demand") == 0.0 and _gauge(provider, "spot") == 0.0


def test_pricing_failure_falls_back_to_bundled_table_with_log_and_metric(
        aws_env: None, caplog: pytest.LogCaptureFixture) -> None:
    pricing, _ = stubbed_pricing(fail=True)
    ec2, _ = _ec2_with_spot([])
    provider = PricingProvider(pricing, ec2, REGION, now=lambda: NOW)
    with caplog.at_level(logging.WARNING, logger="nodewright.cloud.aws.pricing"):
        provider.refresh()
    # Bundled "AWS Price List API, us-east-1 Linux on-demand, 2026-07-20" table.
    assert provider.on_demand_price("m5.large") == 0.096
    assert provider.on_demand_fallback and provider.spot_fallback
    assert _gauge(provider, "on-demand") == 1.0 and _gauge(provider, "spot") == 1.0
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("using fallback on-demand prices from bundled us-east-1 on-demand prices")
               and "ThrottlingException" in m for m in messages)
    assert any(m.startswith("using fallback spot prices") for m in messages)


def test_isolated_vpc_never_calls_the_pricing_api(aws_env: None) -> None:
    # Karpenter's ISOLATED_VPC: the Pricing API has no VPC endpoint; the stub has no responses queued, so
    # any GetProducts call would fail the refresh with a StubResponseError instead of returning.
    pricing = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(pricing)
    stub.activate()
    ec2, _ = _ec2_with_spot([{"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a",
                              "SpotPrice": "0.0351", "Timestamp": NOW}])
    provider = PricingProvider(pricing, ec2, REGION, now=lambda: NOW, isolated_vpc=True)
    provider.refresh()
    stub.assert_no_pending_responses()
    assert provider.on_demand_price("m5.large") == 0.096  # the bundled us-east-1 table
    assert provider.spot_price("m5.large", "us-east-1a") == 0.0351  # EC2 has a VPC endpoint: still live
    assert _gauge(provider, "on-demand") == 1.0 and _gauge(provider, "spot") == 0.0


def test_refresh_respects_periods(aws_env: None) -> None:
    now = [0.0]
    pricing, pricing_stub = stubbed_pricing()
    ec2, _ = _ec2_with_spot([{"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a",
                              "SpotPrice": "0.0351", "Timestamp": NOW}])
    provider = PricingProvider(pricing, ec2, REGION, clock=lambda: now[0], now=lambda: NOW)
    provider.refresh()
    now[0] = 299.0
    provider.refresh()  # nothing due: a stub with no pending response would raise if called
    pricing_stub.assert_no_pending_responses()
    assert provider.version == 2


def test_an_unparsable_answer_falls_back_like_any_failure(aws_env: None) -> None:
    """Issue 32 item 4: botocore's ResponseParserError (a 5xx body it cannot parse) is neither a ClientError nor a
    BotoCoreError; it escaped the refresh, and so the launch that asked for prices, instead of falling back."""
    from botocore.parsers import ResponseParserError

    def unparsable(**_: object) -> None:
        raise ResponseParserError("Unable to parse response (not well-formed), invalid XML received")

    pricing = boto3.client("pricing", region_name="us-east-1")
    ec2 = boto3.client("ec2", region_name=REGION)
    pricing.meta.events.register_first("before-call.pricing.GetProducts", unparsable)
    ec2.meta.events.register_first("before-call.ec2.DescribeSpotPriceHistory", unparsable)
    provider = PricingProvider(pricing, ec2, REGION, now=lambda: NOW)
    provider.refresh()
    assert provider.on_demand_fallback and provider.spot_fallback
    assert provider.on_demand_price("m5.large") == 0.096
