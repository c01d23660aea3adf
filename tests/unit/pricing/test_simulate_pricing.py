"""``nodewright simulate --pricing FILE``: effective prices beside list prices in the decision."""

import json
from pathlib import Path

from click.testing import CliRunner

from nodewright.cli import cli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pricing" / "savings-plan.yaml"

# Three pods of 1500m on m6i.large only (one per node), in us-east-1a, next to one full m6i.large node.
MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 3
  template:
    metadata: {labels: {app: api}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: 1500m, memory: 1Gi}}}]
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-0-1
  labels:
    node.kubernetes.io/instance-type: m6i.large
    topology.kubernetes.io/zone: us-east-1a
    karpenter.sh/capacity-type: on-demand
    kubernetes.io/arch: amd64
status: {allocatable: {cpu: 100m, memory: 1Gi, pods: "29"}}
"""

# Two zonal RIs (the existing node takes one) and an EC2 Instance Savings Plan worth half an m6i.large-hour
# (0.096 x 0.6 / 2 = 0.0288).
POLICY = """
apiVersion: nodewright.io/v1alpha1
kind: PricingPolicy
metadata: {name: test}
spec:
  reservedInstances: [{instanceType: m6i.large, zone: us-east-1a, count: 2}]
  savingsPlans:
    - {type: EC2Instance, family: m6i, region: us-east-1, commitmentUsdPerHour: 0.0288, discountPercent: 40}
"""


def _run(tmp_path: Path, policy: str | Path, *extra: str) -> tuple[int, str, str]:
    manifests = tmp_path / "in.yaml"
    manifests.write_text(MANIFESTS)
    if isinstance(policy, str):
        (tmp_path / "policy.yaml").write_text(policy)
        policy = tmp_path / "policy.yaml"
    out = CliRunner().invoke(cli, ["simulate", "-f", str(manifests), "--pricing", str(policy), *extra])
    return out.exit_code, out.stdout, out.stderr


def test_json_has_effective_prices_beside_list_prices(tmp_path: Path) -> None:
    code, stdout, stderr = _run(tmp_path, POLICY, "-o", "json")
    assert code == 0, stderr
    decision = json.loads(stdout)
    claims = decision["nodeclaims"]
    assert [(nc["instance_type"], nc["zone"], nc["price_per_hour"]) for nc in claims] == [
        ("m6i.large", "us-east-1a", 0.096)] * 3
    # second RI -> 0; the Savings Plan covers half an hour -> 0.048; nothing left -> on-demand 0.096
    assert [nc["effective_price_per_hour"] for nc in claims] == [0.0, 0.048, 0.096]
    assert (decision["total_price_per_hour"], decision["total_effective_price_per_hour"]) == (0.288, 0.144)
    assert decision["pricing_policy"] == f"PricingPolicy test ({tmp_path / 'policy.yaml'})"
    keys = list(decision)
    assert keys[keys.index("total_price_per_hour") + 1] == "total_effective_price_per_hour"


def test_example_policy_covers_the_three_nodes_with_its_savings_plan(tmp_path: Path) -> None:
    code, stdout, stderr = _run(tmp_path, EXAMPLE, "-o", "json")
    assert code == 0, stderr
    decision = json.loads(stdout)
    # 0.2304/h of m6i at 40% = four m6i.large-hours: the existing node and the three new ones.
    assert [nc["effective_price_per_hour"] for nc in decision["nodeclaims"]] == [0.0, 0.0, 0.0]
    assert decision["total_effective_price_per_hour"] == 0.0


def test_table_shows_an_effective_column(tmp_path: Path) -> None:
    code, stdout, stderr = _run(tmp_path, POLICY)
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].split()[-3:] == ["$/H", "EFFECTIVE", "$/H"]
    assert [line.split()[-2:] for line in lines[1:4]] == [["0.0960", "0.0000"], ["0.0960", "0.0480"],
                                                          ["0.0960", "0.0960"]]
    assert lines[-1] == f"effective $0.1440/h under PricingPolicy test ({tmp_path / 'policy.yaml'})"


def test_bad_policy_exits_2_with_one_line(tmp_path: Path) -> None:
    code, stdout, stderr = _run(tmp_path, POLICY.replace("count: 2", "count: -1"))
    assert code == 2 and stdout == ""
    assert stderr == (f"error: {tmp_path / 'policy.yaml'} (PricingPolicy): spec.reservedInstances[0].count: "
                      "Input should be greater than or equal to 1, got -1\n")


def test_pricing_is_refused_with_target_utilization_comparison(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(SCENARIO), "--compare-target-utilization",
                                   "1.0,0.8", "--pricing", str(tmp_path / "policy.yaml")])
    assert out.exit_code == 2
    assert out.stderr == ("error: --compare-target-utilization: cannot be combined with --baseline, --plot or "
                          "--pricing\n")


def test_without_pricing_the_decision_is_unchanged(tmp_path: Path) -> None:
    manifests = tmp_path / "in.yaml"
    manifests.write_text(MANIFESTS)
    out = CliRunner().invoke(cli, ["simulate", "-f", str(manifests), "-o", "json"])
    decision = json.loads(out.stdout)
    assert "total_effective_price_per_hour" not in decision
    assert all("effective_price_per_hour" not in nc for nc in decision["nodeclaims"])


SCENARIO = Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "team-spread.yaml"  # 20 min


def _scenario(tmp_path: Path, spec: str) -> dict:
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"apiVersion: nodewright.io/v1alpha1\nkind: PricingPolicy\nspec: {spec}\n")
    out = CliRunner().invoke(cli, ["simulate", "--scenario", str(SCENARIO), "--pricing", str(policy),
                                   "--baseline", "cluster-autoscaler", "-o", "json"])
    assert out.exit_code == 0, out.stderr
    return json.loads(out.stdout)


def test_scenario_summary_adds_the_effective_cost(tmp_path: Path) -> None:
    # A 50% discount on everything halves what both autoscalers pay.
    doc = _scenario(tmp_path, "{discounts: [{percent: 50}]}")
    for summary in (doc["summary"], doc["baseline"]["summary"]):
        assert summary["cost_usd"] > 0
        assert abs(summary["effective_cost_usd"] - summary["cost_usd"] / 2) <= 1e-4


def test_scenario_commitment_is_paid_for_the_whole_run(tmp_path: Path) -> None:
    # $1/h committed at 0% discount, more than the team-spread nodes use: 20 minutes cost $1/3 whatever runs.
    doc = _scenario(tmp_path, "{savingsPlans: [{type: Compute, commitmentUsdPerHour: 1, discountPercent: 0}]}")
    assert doc["summary"]["effective_cost_usd"] == doc["baseline"]["summary"]["effective_cost_usd"] == 0.3333


def test_scenario_table_shows_the_effective_row_only_with_a_policy(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    with_policy = CliRunner().invoke(cli, ["simulate", "--scenario", str(SCENARIO), "--pricing",
                                           str(tmp_path / "policy.yaml")])
    without = CliRunner().invoke(cli, ["simulate", "--scenario", str(SCENARIO)])
    assert with_policy.exit_code == without.exit_code == 0
    rows = [line.split("  ")[0] for line in with_policy.stdout.splitlines()]
    assert rows[rows.index("cost (USD)") + 1] == "effective cost (USD, PricingPolicy)"
    assert "effective cost" not in without.stdout
