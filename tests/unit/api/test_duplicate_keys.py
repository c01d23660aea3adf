"""A mapping with the same key twice is refused, as kubectl refuses it ("mapping key ... already defined"): YAML
alone keeps the later value silently, e.g. two manifests pasted together without ``---`` (a first-day trial found
``simulate -f`` taking such a file without a word). One loader (``api.manifests.SAFE_LOADER``) reads what users
write: manifests, the PricingPolicy and ``SCHEDULER_CONFIG``."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nodewright.api.manifests import load_manifests
from nodewright.cli import cli
from nodewright.errors import NodewrightValidationError
from nodewright.pricing.policy import load_pricing_policy
from nodewright.state.defaultspread import parse_scheduler_config

POOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  limits:
    cpu: "16"
  limits:
    cpu: "1000"
"""


def test_simulate_refuses_a_nodepool_with_a_key_twice(tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(POOL)
    done = CliRunner().invoke(cli, ["simulate", "-f", str(path)])
    assert done.exit_code == 2, done.output
    assert done.stderr.splitlines() == [
        f"error: {path}#documents[0]: invalid YAML at line 13 of the document: mapping key 'limits' already "
        "defined (the later value would silently win)"]


def test_merge_keys_and_nested_mappings_still_load() -> None:
    assert load_manifests("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\nn: {a: {a: 1}}\n") == [
        {"base": {"x": 1, "y": 2}, "d": {"x": 3, "y": 2}, "n": {"a": {"a": 1}}}]
    with pytest.raises(NodewrightValidationError, match="mapping key 'a' already defined"):
        load_manifests("n:\n  m: {a: 1, a: 2}\n")


def test_pricing_policy_and_scheduler_config_refuse_a_key_twice(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: nodewright.io/v1alpha1\nkind: PricingPolicy\nkind: PricingPolicy\n")
    with pytest.raises(NodewrightValidationError, match="already defined"):
        load_pricing_policy(policy)
    with pytest.raises(NodewrightValidationError, match="already defined"):
        parse_scheduler_config("defaultingType: List\ndefaultingType: System\n")
