"""Provisioning decides on effective marginal prices when a PricingPolicy is given (docs/pricing.md): the
cheapest fit and the spot vs on-demand choice, each NodeClaim priced on top of the fleet and those before it."""

from pathlib import Path
from typing import Any

import yaml

from nodewright.pricing import load_pricing_policy
from nodewright.sim.decision import decide

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "pricing" / "savings-plan.yaml"


def _docs(replicas: int, requirements: str) -> list[dict[str, Any]]:
    """A NodePool in us-east-1a with ``requirements`` (YAML flow list items) and ``replicas`` pods of
    1500m/3Gi, one per node (hostname anti-affinity)."""
    text = f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: general}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}}
{requirements}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api}}
spec:
  replicas: {replicas}
  template:
    metadata: {{labels: {{app: api}}}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {{topologyKey: kubernetes.io/hostname, labelSelector: {{matchLabels: {{app: api}}}}}}
      containers: [{{name: c, resources: {{requests: {{cpu: 1500m, memory: 3Gi}}}}}}]
"""
    return list(yaml.safe_load_all(text))


ON_DEMAND = "        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}"
M6I_LARGE_ANY_CAPACITY = (
    "        - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}\n"
    "        - {key: node.kubernetes.io/instance-type, operator: In, values: [m6i.large]}")


def _with_policy(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return decide(docs, pricing=(load_pricing_policy(EXAMPLE), "example"))


def _choice(decision: dict[str, Any]) -> list[tuple[str, str]]:
    return [(nc["instance_type"], nc["capacity_type"]) for nc in decision["nodeclaims"]]


def test_six_pods_use_the_reserved_instances_and_savings_plan_instead_of_the_list_cheapest() -> None:
    docs = _docs(6, ON_DEMAND)
    listed = decide(docs)
    assert _choice(listed) == [("t4g.medium", "on-demand")] * 6
    assert listed["total_price_per_hour"] == 0.2016

    chosen = _with_policy(docs)
    # The regional c6i.xlarge RI (8 units = two c6i.large), the two zonal m5.large RIs, then the m6i Savings
    # Plan's commitment: among offerings that all cost $0 more, the ones using the least commitment first.
    assert _choice(chosen) == [("c6i.large", "on-demand")] * 2 + [("m5.large", "on-demand")] * 2 + [
        ("m6i.large", "on-demand")] * 2
    assert [nc["effective_price_per_hour"] for nc in chosen["nodeclaims"]] == [0.0] * 6
    assert chosen["total_effective_price_per_hour"] == 0.0
    assert chosen["total_price_per_hour"] == 0.554  # more at list price, nothing more paid

    # What the list-price choice would cost under the same policy: six t4g.medium at 5% off.
    assert _with_policy_report(listed) == 0.191520


def _with_policy_report(decision: dict[str, Any]) -> float:
    from nodewright.cloud.catalog import price_table
    from nodewright.pricing.report import add_effective_prices

    priced = add_effective_prices(decision, load_pricing_policy(EXAMPLE), price_table("us-east-1"), [], "example")
    return float(priced["total_effective_price_per_hour"])


def test_on_demand_under_the_savings_plan_beats_spot_until_the_commitment_runs_out() -> None:
    docs = _docs(6, M6I_LARGE_ANY_CAPACITY)
    assert _choice(decide(docs)) == [("m6i.large", "spot")] * 6  # list prices: spot whenever allowed

    chosen = _with_policy(docs)
    # $0.2304/h of m6i at 40% off covers four m6i.large (0.096 x 0.6 = 0.0576 each): $0 more each. The fifth
    # on-demand would cost 0.096 - 5% = 0.0912, spot costs less: spot again.
    assert _choice(chosen) == [("m6i.large", "on-demand")] * 4 + [("m6i.large", "spot")] * 2
    spot = chosen["nodeclaims"][-1]["price_per_hour"]
    assert spot < 0.0912
    assert [nc["effective_price_per_hour"] for nc in chosen["nodeclaims"]] == [0.0] * 4 + [spot] * 2
    assert chosen["total_effective_price_per_hour"] == round(2 * spot, 6)


def test_without_a_commitment_left_for_it_spot_stays_the_choice() -> None:
    docs = _docs(1, M6I_LARGE_ANY_CAPACITY.replace("m6i.large", "r6i.large"))
    assert _choice(_with_policy(docs)) == _choice(decide(docs)) == [("r6i.large", "spot")]


def test_run_gives_the_provisioner_the_policy_file_reread_when_it_changes(tmp_path: Path) -> None:
    from nodewright.kube.memory import InMemoryCluster
    from nodewright.runtime import Runtime
    from nodewright.settings import load_settings

    path = tmp_path / "policy.yaml"
    path.write_text(EXAMPLE.read_text())
    settings = load_settings({"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1",
                              "NODEWRIGHT_PRICING_POLICY": str(path)})
    runtime = Runtime(InMemoryCluster(lambda: 0.0), object(), settings)  # type: ignore[arg-type]
    current = runtime.manager.provisioner.pricing_policy
    assert current is not None
    policy = current()
    assert policy is not None and policy.spec.savings_plans[0].commitment_usd_per_hour == 0.2304
    path.write_text(EXAMPLE.read_text().replace("commitmentUsdPerHour: 0.2304", "commitmentUsdPerHour: 1.5"))
    policy = current()
    assert policy is not None and policy.spec.savings_plans[0].commitment_usd_per_hour == 1.5


def test_without_a_policy_run_decides_on_list_prices() -> None:
    from nodewright.kube.memory import InMemoryCluster
    from nodewright.runtime import Runtime
    from nodewright.settings import load_settings

    settings = load_settings({"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1"})
    runtime = Runtime(InMemoryCluster(lambda: 0.0), object(), settings)  # type: ignore[arg-type]
    assert runtime.manager.provisioner.pricing_policy is None


class _LaunchingCloud:
    """A cloud provider stand-in exposing the AWS provider's ``launch_pricing`` hook."""

    launch_pricing = None


def test_run_prices_the_fleet_request_on_top_of_the_running_nodes(tmp_path: Path) -> None:
    from nodewright.cloud.catalog import load_instance_types
    from nodewright.kube import resources as r
    from nodewright.kube.memory import InMemoryCluster
    from nodewright.runtime import Runtime
    from nodewright.settings import load_settings

    cluster = InMemoryCluster(lambda: 0.0)
    labels = {"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
              "karpenter.sh/capacity-type": "on-demand"}
    cluster.create(r.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": labels}})
    # A launched NodeClaim whose Node has not registered yet counts too; one with a Node is that Node; one not
    # launched yet (the claim being launched, its labels naming the planned offering) does not.
    cluster.create(r.NODECLAIMS, {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                                  "metadata": {"name": "c1", "labels": labels}, "spec": {},
                                  "status": {"providerID": "aws:///us-east-1a/i-00000000000000001"}})
    cluster.create(r.NODECLAIMS, {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                                  "metadata": {"name": "c2", "labels": labels}, "spec": {}})
    cluster.create(r.NODECLAIMS, {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                                  "metadata": {"name": "c0", "labels": labels}, "spec": {},
                                  "status": {"nodeName": "n1"}})
    settings = load_settings({"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1",
                              "NODEWRIGHT_PRICING_POLICY": str(EXAMPLE)})
    cloud = _LaunchingCloud()
    Runtime(cluster, cloud, settings)  # type: ignore[arg-type]
    assert cloud.launch_pricing is not None
    types = load_instance_types("us-east-1", zones=["us-east-1a"])
    pricing = cloud.launch_pricing(types)
    m5 = next(t for t in types if t.name == "m5.large")
    offering = next(o for o in m5.offerings if o.capacity_type == "on-demand")
    # Both zonal m5.large RIs are used (the Node and the unregistered NodeClaim): list 0.096 less 5%.
    assert pricing.price("m5.large", offering) == 0.0912
    m6i = next(t for t in types if t.name == "m6i.large")
    assert pricing.price("m6i.large", next(o for o in m6i.offerings if o.capacity_type == "on-demand")) == 0.0


def test_scenario_with_the_policy_launches_what_the_commitments_cover() -> None:
    from nodewright.sim.runner import run
    from nodewright.sim.scenario import load_scenario

    scenario = load_scenario(EXAMPLE.parents[1] / "scenarios" / "team-spread.yaml")  # 4 x 1 vCPU, 2 zones, 20 min
    policy = load_pricing_policy(EXAMPLE)
    listed = run(scenario).summary
    chosen = run(scenario, pricing=policy).summary
    # List prices: four t3a.micro for ~10 minutes, $0.0066 (under the policy, $0.1231 with its commitments).
    assert listed["cost_usd"] == 0.0066
    assert run(scenario, pricing=None).summary == listed
    # Deciding on effective prices: an m6i.xlarge (the Savings Plan) and a c6i.xlarge (the regional RI) hold
    # the pods at no extra cost -- only the commitments are paid: (0.2304 + 2 x 0.06) $/h x 20 min = $0.1168.
    assert chosen["effective_cost_usd"] == 0.1168
    assert chosen["cost_usd"] > listed["cost_usd"]
