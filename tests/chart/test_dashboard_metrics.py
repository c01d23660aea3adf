"""The chart's Grafana dashboards and the controller cannot drift apart: every metric a dashboard query reads
is registered by :class:`nodewright.metrics.Metrics`, and every label a query filters or groups on is one of
that metric's labels.

Reads the dashboard JSON files straight from ``helm/nodewright/dashboards/`` (no helm needed); PromQL references
come from ``promql_refs.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from promql_refs import (
    DASHBOARDS,
    MetricRef,
    dashboard_queries,
    metric_refs,
    problems,
    registered_series,
    template_refs,
)


# --- the parser itself --------------------------------------------------------------------------------------


def test_parser_reads_selectors_groupings_and_functions() -> None:
    refs = metric_refs('sum by (nodepool, resource_type) (karpenter_nodepools_usage{resource_type=~"cpu|memory",'
                       'nodepool=~"$nodepool"}) / sum(karpenter_nodepools_limit{nodepool="a"}) by (resource_type)')
    assert [(r.name, sorted(r.labels)) for r in refs] == [
        ("karpenter_nodepools_usage", ["nodepool", "resource_type"]),
        ("karpenter_nodepools_limit", ["nodepool", "resource_type"]),
    ]
    refs = metric_refs('histogram_quantile(0.9, sum by (le) (rate(operator_nodeclaim_status_condition_transition'
                       '_seconds_bucket{type="Ready",status="Unknown"}[$__rate_interval])))')
    assert [(r.name, sorted(r.labels)) for r in refs] == [
        ("operator_nodeclaim_status_condition_transition_seconds_bucket", ["le", "status", "type"])]
    assert [r.name for r in metric_refs("-sum(increase(karpenter_nodes_terminated_total[5m])) or vector(0)")] == [
        "karpenter_nodes_terminated_total"]
    assert [(r.name, r.labels) for r in template_refs("label_values(karpenter_nodepools_limit, nodepool)")] == [
        ("karpenter_nodepools_limit", {"nodepool"})]


def test_checker_reports_unknown_metrics_and_labels() -> None:
    series = registered_series()
    refs = metric_refs('count by (instance_colour) (karpenter_nodeclaims_terminated_total{nodepool="a"})'
                       ' + sum(rate(karpenter_pods_startup_seconds_bucket[5m]))')
    assert problems(refs, series) == [
        "karpenter_nodeclaims_terminated_total: no label(s) ['instance_colour'] (has ['capacity_type', 'nodepool', "
        "'zone'])",
        "karpenter_pods_startup_seconds_bucket: metric karpenter_pods_startup_seconds is not registered by "
        "nodewright.metrics",
    ]
    # _bucket only exists for histograms; le only on _bucket.
    assert problems([MetricRef("karpenter_nodepools_usage_bucket")], series) != []
    assert problems([MetricRef("karpenter_pods_startup_duration_seconds_sum", {"le"})], series) != []


# --- the dashboards -----------------------------------------------------------------------------------------


def test_there_is_a_dashboard() -> None:
    assert [p.name for p in DASHBOARDS] == ["nodewright-capacity.json"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_dashboard_query_reads_registered_metrics_and_labels(path: Path) -> None:
    series = registered_series()
    queries = dashboard_queries(json.loads(path.read_text()))
    assert len(queries) >= 20
    failures, names = [], set()
    for where, query, is_template in queries:
        refs = template_refs(query) if is_template else metric_refs(query)
        assert refs, f"{where}: no metric found in {query!r}"
        names |= {r.name for r in refs}
        failures += [f"{where}: {p}" for p in problems(refs, series)]
    assert failures == []
    # The dashboard reads the three metrics this test was written for.
    assert {"karpenter_nodes_allocatable", "karpenter_pods_startup_duration_seconds_sum",
            "karpenter_pods_startup_duration_seconds_count",
            "operator_nodeclaim_status_condition_transition_seconds_bucket"} <= names
