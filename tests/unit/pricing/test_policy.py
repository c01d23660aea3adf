"""PricingPolicy documents: the shipped example loads; every bad field is named with its reason."""

from pathlib import Path
from typing import Any

import pytest

from nodewright.errors import NodewrightValidationError
from nodewright.pricing import load_pricing_policy, parse_pricing_policy

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pricing" / "savings-plan.yaml"


def doc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "nodewright.io/v1alpha1", "kind": "PricingPolicy", "metadata": {"name": "p"},
            "spec": spec}


def test_example_policy_loads() -> None:
    policy = load_pricing_policy(EXAMPLE)
    (plan,) = policy.spec.savings_plans
    assert (plan.type, plan.family, plan.region, plan.commitment_usd_per_hour, plan.discount(plan.family or "",
            "us-east-1")) == ("EC2Instance", "m6i", "us-east-1", 0.2304, 0.4)
    assert [(ri.instance_type, ri.zone, ri.region, ri.count) for ri in policy.spec.reserved_instances] == [
        ("m5.large", "us-east-1a", None, 2), ("c6i.xlarge", None, "us-east-1", 1)]
    assert policy.discount_for("c6i.large", "us-east-1", "on-demand") is policy.spec.discounts[0]
    assert policy.discount_for("c6i.large", "us-east-1", "spot") is None


def test_compute_plan_rate_most_specific_wins() -> None:
    policy = parse_pricing_policy(doc(savingsPlans=[{
        "type": "Compute", "commitmentUsdPerHour": 1, "discountPercent": 20,
        "rates": [{"region": "eu-west-1", "discountPercent": 15}, {"family": "c6i", "discountPercent": 30},
                  {"family": "c6i", "region": "eu-west-1", "discountPercent": 27}]}]))
    plan = policy.spec.savings_plans[0]
    assert [plan.discount(f, r) for f, r in [("m6i", "us-east-1"), ("m6i", "eu-west-1"), ("c6i", "us-east-1"),
                                             ("c6i", "eu-west-1")]] == [0.2, 0.15, 0.3, 0.27]
    assert plan.covers("r7g", "ap-south-1")


@pytest.mark.parametrize(("spec", "message"), [
    ({"savingsPlans": [{"type": "EC2Instance", "commitmentUsdPerHour": 1, "discountPercent": 40,
                        "region": "us-east-1"}]},
     "spec.savingsPlans[0].family: an EC2Instance Savings Plan covers one family: set family, e.g. 'm6i'"),
    ({"savingsPlans": [{"type": "EC2Instance", "commitmentUsdPerHour": 1, "discountPercent": 40, "family": "m6i"}]},
     "spec.savingsPlans[0].region: an EC2Instance Savings Plan covers one region: set region, e.g. 'us-east-1'"),
    ({"savingsPlans": [{"type": "Compute", "commitmentUsdPerHour": 1, "discountPercent": 20, "family": "m6i"}]},
     "spec.savingsPlans[0].family: a Compute Savings Plan applies to every family and region: use rates for a "
     "family's or region's discount"),
    ({"savingsPlans": [{"type": "Compute", "commitmentUsdPerHour": 0, "discountPercent": 20}]},
     "spec.savingsPlans[0].commitmentUsdPerHour: Input should be greater than 0, got 0"),
    ({"savingsPlans": [{"type": "Compute", "commitmentUsdPerHour": 1, "discountPercent": 100}]},
     "spec.savingsPlans[0].discountPercent: Input should be less than 100, got 100"),
    ({"savingsPlans": [{"type": "Compute", "commitmentUsdPerHour": 1, "discountPercent": 20,
                        "rates": [{"discountPercent": 30}]}]},
     "spec.savingsPlans[0].rates[0]: a rate names a family, a region or both (the plan's discountPercent is the "
     "default)"),
    ({"savingsPlans": [{"type": "Reserved", "commitmentUsdPerHour": 1, "discountPercent": 20}]},
     "spec.savingsPlans[0].type: Input should be 'Compute' or 'EC2Instance', got 'Reserved'"),
    ({"reservedInstances": [{"instanceType": "m5.large", "count": 2}]},
     "spec.reservedInstances[0]: set zone (a zonal RI, e.g. 'us-east-1a') or region (a regional RI, e.g. "
     "'us-east-1')"),
    ({"reservedInstances": [{"instanceType": "m5.large", "count": 0, "zone": "us-east-1a"}]},
     "spec.reservedInstances[0].count: Input should be greater than or equal to 1, got 0"),
    ({"reservedInstances": [{"instanceType": "m5", "count": 1, "zone": "us-east-1a"}]},
     "spec.reservedInstances[0].instanceType: 'm5' is not a valid instanceType, e.g. 'm6i.large'"),
    ({"reservedInstances": [{"instanceType": "m5.large", "count": 1, "zone": "us-west-2a", "region": "us-east-1"}]},
     "spec.reservedInstances[0].zone: 'us-west-2a' is not in region 'us-east-1'"),
    ({"discounts": [{"match": {"family": "m5"}}]},
     "spec.discounts[0]: set exactly one of percent (e.g. 10) or usdPerHour (e.g. 0.01)"),
    ({"discounts": [{"match": {"family": "m5", "instanceType": "c5.large"}, "percent": 5}]},
     "spec.discounts[0].match.instanceType: 'c5.large' is not of family 'm5': set one or the other"),
    ({"discounts": [{"match": {"capacityType": "reserved"}, "percent": 5}]},
     "spec.discounts[0].match.capacityType: Input should be 'on-demand' or 'spot', got 'reserved'"),
    ({"discounts": [{"match": {"region": "us-east"}, "percent": 5}]},
     "spec.discounts[0].match.region: 'us-east' is not a valid region, e.g. 'us-east-1'"),
    ({"discounts": [{"percent": 5, "amount": 3}]}, "spec.discounts[0].amount: unknown field"),
])
def test_invalid_fields_are_named(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(NodewrightValidationError) as info:
        parse_pricing_policy(doc(**spec))
    assert str(info.value) == message


def test_wrong_kind_and_version() -> None:
    with pytest.raises(NodewrightValidationError, match=r"^kind: Input should be 'PricingPolicy', got 'NodePool'$"):
        parse_pricing_policy({**doc(), "kind": "NodePool"})
    with pytest.raises(NodewrightValidationError, match=r"^apiVersion: required field is missing$"):
        parse_pricing_policy({"kind": "PricingPolicy"})


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(NodewrightValidationError, match="nope.yaml: cannot read the pricing policy"):
        load_pricing_policy(missing)
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec: [\n")
    with pytest.raises(NodewrightValidationError, match="bad.yaml: not valid YAML"):
        load_pricing_policy(bad)
    two = tmp_path / "two.yaml"
    two.write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(NodewrightValidationError, match="two.yaml: expected one PricingPolicy document, found 2"):
        load_pricing_policy(two)
    field = tmp_path / "field.yaml"
    field.write_text("apiVersion: nodewright.io/v1alpha1\nkind: PricingPolicy\nspec:\n  discounts:\n"
                     "    - {percent: 120}\n")
    with pytest.raises(NodewrightValidationError) as info:
        load_pricing_policy(field)
    assert str(info.value) == (f"{field} (PricingPolicy): spec.discounts[0].percent: Input should be less than 100, "
                               "got 120")


POLICY_V1 = """apiVersion: nodewright.io/v1alpha1
kind: PricingPolicy
spec:
  savingsPlans: [{type: Compute, commitmentUsdPerHour: 1, discountPercent: 20}]
"""


def test_policy_file_reloads_on_change_and_keeps_the_last_good_version(tmp_path: Path, caplog) -> None:
    import os

    from nodewright.pricing.policy import PolicyFile

    caplog.set_level("INFO", logger="nodewright.pricing")
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY_V1)
    source = PolicyFile(path)
    assert source.current().spec.savings_plans[0].commitment_usd_per_hour == 1.0

    def write(text: str, mtime: int) -> None:
        path.write_text(text)
        os.utime(path, ns=(mtime, mtime))  # a distinct mtime even on coarse filesystem clocks

    write(POLICY_V1.replace("commitmentUsdPerHour: 1", "commitmentUsdPerHour: 2"), 2_000_000_000)
    assert source.current().spec.savings_plans[0].commitment_usd_per_hour == 2.0 and source.error is None
    write(POLICY_V1.replace("type: Compute", "type: Whatever"), 3_000_000_000)
    assert source.current().spec.savings_plans[0].commitment_usd_per_hour == 2.0  # the last good one
    assert source.error == (f"{path} (PricingPolicy): spec.savingsPlans[0].type: Input should be 'Compute' or "
                            "'EC2Instance', got 'Whatever'")
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "nodewright.pricing"] == [
        ("INFO", f"pricing policy reloaded from {path}"),
        ("ERROR", f"pricing policy not reloaded, the last valid one stays in force: {source.error}")]
    assert source.current().spec.savings_plans[0].commitment_usd_per_hour == 2.0  # unchanged file: no new line
    assert len([r for r in caplog.records if r.name == "nodewright.pricing"]) == 2
    path.unlink()
    assert source.current().spec.savings_plans[0].commitment_usd_per_hour == 2.0
    write(POLICY_V1, 4_000_000_000)
    assert source.current().spec.savings_plans[0].commitment_usd_per_hour == 1.0 and source.error is None


def test_policy_file_must_be_valid_at_start(tmp_path: Path) -> None:
    from nodewright.pricing.policy import PolicyFile

    with pytest.raises(NodewrightValidationError, match="cannot read the pricing policy"):
        PolicyFile(tmp_path / "missing.yaml")


def test_controller_setting_validates_the_policy_at_start(tmp_path: Path) -> None:
    from nodewright.settings import load_settings

    env = {"CLUSTER_NAME": "c", "AWS_REGION": "us-east-1"}
    assert load_settings(env).pricing_policy == ""
    good = tmp_path / "good.yaml"
    good.write_text(POLICY_V1)
    assert load_settings({**env, "NODEWRIGHT_PRICING_POLICY": str(good)}).pricing_policy == str(good)
    bad = tmp_path / "bad.yaml"
    bad.write_text(POLICY_V1.replace("discountPercent: 20", "discountPercent: 200"))
    with pytest.raises(NodewrightValidationError) as info:
        load_settings(env, {"pricing_policy": str(bad)})
    assert str(info.value) == (f"{bad} (PricingPolicy): spec.savingsPlans[0].discountPercent: Input should be less "
                               "than 100, got 200")


def test_policy_file_follows_a_configmap_mount_update(tmp_path: Path) -> None:
    """The kubelet's layout for a ConfigMap volume (its AtomicWriter): the key is a symlink through ``..data`` to a
    timestamped directory, and an update writes a new directory and swaps ``..data`` with one rename. The file's
    own path never changes; what it resolves to does."""
    import os

    from nodewright.pricing.policy import PolicyFile

    def publish(version: str, text: str) -> None:
        payload = tmp_path / f"..{version}"
        payload.mkdir()
        (payload / "pricing-policy.yaml").write_text(text)
        os.symlink(payload.name, tmp_path / "..data_tmp")
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")

    publish("2026_12_01_16_00_00.1", POLICY_V1)
    os.symlink("..data/pricing-policy.yaml", tmp_path / "pricing-policy.yaml")
    source = PolicyFile(tmp_path / "pricing-policy.yaml")
    assert source.current().spec.savings_plans[0].commitment_usd_per_hour == 1.0
    publish("2026_12_01_16_01_00.2", POLICY_V1.replace("commitmentUsdPerHour: 1", "commitmentUsdPerHour: 3"))
    assert source.current().spec.savings_plans[0].commitment_usd_per_hour == 3.0 and source.error is None
