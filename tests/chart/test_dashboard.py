"""The capacity dashboard ConfigMap: Grafana sidecar label, panels users know from Karpenter's
capacity dashboard, and queries over Karpenter's metric names plus nodewright's cost metric."""

from __future__ import annotations

import json
import re

import pytest
from chart_helpers import one

pytestmark = pytest.mark.chart

# Metric names as Karpenter v1 exposes them (karpenter.sh/docs/reference/metrics), plus ours.
KNOWN_METRICS = {
    "karpenter_nodes_allocatable",
    "karpenter_nodes_created_total",
    "karpenter_nodes_terminated_total",
    "karpenter_pods_state",
    "karpenter_pods_startup_duration_seconds_sum",
    "karpenter_pods_startup_duration_seconds_count",
    "karpenter_nodepools_usage",
    "karpenter_nodepools_limit",
    "karpenter_nodeclaims_created_total",
    "karpenter_nodeclaims_disrupted_total",
    "karpenter_voluntary_disruption_decisions_total",
    "operator_nodeclaim_status_condition_transition_seconds_bucket",
    "nodewright_nodepool_cost_per_hour_usd",
}
PROMQL_WORDS = {"sum", "count", "by", "rate", "increase", "histogram_quantile", "le", "label_values"}


@pytest.fixture(scope="module")
def dashboard(rendered):
    cm = one(rendered["minimal"], "ConfigMap", "nodewright-capacity-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "kube-system"
    assert list(cm["data"]) == ["nodewright-capacity.json"]
    return json.loads(cm["data"]["nodewright-capacity.json"])


def _exprs(dashboard):
    return {p["title"]: [t["expr"] for t in p["targets"]] for p in dashboard["panels"]}


def _metrics(expr: str) -> set[str]:
    # Identifiers followed by { or ( or [ that are not PromQL functions/keywords.
    names = set(re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?=[{[])", expr))
    return names - PROMQL_WORDS


def test_panels_users_know_from_karpenter(dashboard):
    assert dashboard["uid"] == "nodewright-capacity"
    titles = set(_exprs(dashboard))
    assert {
        "Nodes by NodePool", "Nodes by instance type", "Nodes by capacity type", "Pending pods",
        "Node launch-to-ready latency", "Disruptions by reason", "Cost per NodePool ($/h)",
        "NodePool usage vs limits",
    } <= titles
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)) == 16


def test_queries_use_karpenter_metric_names(dashboard):
    used = set()
    for title, exprs in _exprs(dashboard).items():
        for expr in exprs:
            metrics = _metrics(expr)
            assert metrics, f"{title}: no metric in {expr}"
            assert metrics <= KNOWN_METRICS, f"{title}: unknown metric(s) {metrics - KNOWN_METRICS}"
            used |= metrics
    assert used == KNOWN_METRICS


def test_key_queries(dashboard):
    exprs = _exprs(dashboard)
    assert exprs["Nodes by NodePool"] == [
        'count by (nodepool) (karpenter_nodes_allocatable{resource_type="cpu",nodepool=~"$nodepool"})']
    assert exprs["Nodes by capacity type"] == [
        'count by (capacity_type) (karpenter_nodes_allocatable{resource_type="cpu",nodepool=~"$nodepool"})']
    assert exprs["Cost per NodePool ($/h)"] == [  # list prices; effective under a PricingPolicy (docs/pricing.md)
        'sum by (nodepool) (nodewright_nodepool_cost_per_hour_usd{price="list",nodepool=~"$nodepool"})',
        'sum by (nodepool) (nodewright_nodepool_cost_per_hour_usd{price="effective",nodepool=~"$nodepool"})']
    assert exprs["Cost ($/h)"] == ['sum(nodewright_nodepool_cost_per_hour_usd{price="list",nodepool=~"$nodepool"})']
    assert exprs["NodePool usage vs limits"] == [
        'sum by (nodepool, resource_type) (karpenter_nodepools_usage{resource_type=~"cpu|memory",nodepool=~"$nodepool"})'
        ' / sum by (nodepool, resource_type) (karpenter_nodepools_limit{resource_type=~"cpu|memory",nodepool=~"$nodepool"})']
    assert 'type="Ready",status="Unknown"' in exprs["Node launch-to-ready latency"][1]
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in dashboard["panels"]}
    assert units["Cost per NodePool ($/h)"] == "currencyUSD"
    assert units["Node launch-to-ready latency"] == "s"
    assert units["NodePool usage vs limits"] == "percentunit"


def test_template_variables(dashboard):
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["nodepool"]["definition"] == "label_values(karpenter_nodepools_usage, nodepool)"
    assert variables["nodepool"]["includeAll"] is True


def test_dashboard_can_be_switched_off_or_moved(rendered, render):
    assert one(rendered["production"], "ConfigMap", "nodewright-capacity-dashboard")["metadata"]["namespace"] == "monitoring"
    assert [d for d in render("dashboard.enabled=false") if d["kind"] == "ConfigMap"] == []


def test_one_configmap_per_dashboard(rendered):
    maps = {d["metadata"]["name"]: d for d in rendered["minimal"] if d["kind"] == "ConfigMap"
            and d["metadata"].get("labels", {}).get("grafana_dashboard") == "1"}
    assert sorted(maps) == [f"nodewright-{n}-dashboard" for n in
                            ("allocation", "capacity", "controllers", "cost", "performance")]
    assert list(maps["nodewright-cost-dashboard"]["data"]) == ["nodewright-cost.json"]
    assert json.loads(maps["nodewright-cost-dashboard"]["data"]["nodewright-cost.json"])["uid"] == "nodewright-cost"
