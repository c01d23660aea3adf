"""Bundled on-demand prices, the region fallback flag, the spot model and spot price files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nodewright.cloud.prices import (
    load_spot_prices,
    modelled_spot_price,
    on_demand_prices,
    spot_discount,
)
from nodewright.errors import NodewrightValidationError


def test_us_east_1_on_demand_prices_are_the_bundled_facts() -> None:
    table = on_demand_prices("us-east-1")
    assert table.fallback is False
    assert table.on_demand_price("m5.large") == 0.096
    assert table.on_demand_price("t3.large") == 0.0832
    assert table.on_demand_price("no-such.type") is None
    assert len(table.on_demand) == 1367
    assert "AWS Price List API, us-east-1 Linux on-demand, 2026-07-20" in table.source


def test_other_region_falls_back_to_us_east_1_and_says_so() -> None:
    table = on_demand_prices("ap-northeast-2")
    assert table.fallback is True
    assert table.on_demand_price("m5.large") == 0.096
    assert table.source.endswith("us-east-1 prices stand in for ap-northeast-2")


def test_spot_model_is_60_to_70_percent_off_per_family_and_deterministic() -> None:
    assert spot_discount("m5") == pytest.approx(0.63980, abs=1e-5)
    for family in ("m5", "t3", "c5", "m6g", "g4dn", "r7i"):
        assert 0.60 <= spot_discount(family) <= 0.70
    # Same family, same discount: sizes scale linearly.
    assert modelled_spot_price("m5.xlarge", 0.192) == pytest.approx(
        2 * modelled_spot_price("m5.large", 0.096), abs=2e-6
    )
    table = on_demand_prices("us-east-1")
    spot = table.spot_price("m5.large", "us-east-1a")
    assert spot == 0.034579
    assert spot == table.spot_price("m5.large", "us-east-1f")
    assert spot is not None and spot < table.on_demand["m5.large"]
    assert table.spot_price("no-such.type", "us-east-1a") is None


def test_spot_csv_replaces_model_per_type_and_zone(tmp_path: Path) -> None:
    path = tmp_path / "spot.csv"
    path.write_text(
        "region,instance_type,zone,spot_usd_per_hour\n"
        "us-east-1,m5.large,us-east-1a,0.0301\n"
        "us-east-1,m5.large,,0.0333\n"
        "eu-west-1,m5.large,eu-west-1a,0.9\n"
    )
    assert load_spot_prices(path, "us-east-1") == {"m5.large": {"us-east-1a": 0.0301, "": 0.0333}}


def test_spot_json_both_shapes(tmp_path: Path) -> None:
    path = tmp_path / "spot.json"
    path.write_text(json.dumps({"m5.large": 0.03, "t3.large": {"us-east-1b": 0.025}}))
    assert load_spot_prices(path) == {"m5.large": {"": 0.03}, "t3.large": {"us-east-1b": 0.025}}


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("bad.json", "{not json", "invalid JSON"),
        ("bad2.json", '{"m5.large": "cheap"}', "not a number"),
        ("bad.csv", "instance_type,price\nm5.large,abc\n", "spot_usd_per_hour"),
    ],
)
def test_bad_spot_files_are_validation_errors(tmp_path: Path, name: str, content: str, match: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(NodewrightValidationError, match=match):
        load_spot_prices(path)


def test_missing_spot_file(tmp_path: Path) -> None:
    with pytest.raises(NodewrightValidationError, match="not found"):
        load_spot_prices(tmp_path / "nope.csv")
