"""The chart's Grafana dashboards and the controller cannot drift apart: every metric a dashboard query reads
is registered by :class:`nodewright.metrics.Metrics`, and every label a query filters or groups on is one of
that metric's labels.

Reads the dashboard JSON files straight from ``helm/nodewright/dashboards/`` (no helm needed); PromQL references
come from ``promql_refs.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from promql_refs import (
    DASHBOARDS,
    MetricRef,
    dashboard_queries,
    grafana_to_promql,
    metric_refs,
    problems,
    registered_series,
    template_refs,
    value_selectors,
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


def test_value_selectors_keep_the_literal_values_a_query_filters_on() -> None:
    """What tests/integration/test_prometheus.py asks a real Prometheus for: a renamed label value (``Empty`` ->
    ``empty``) in a dashboard or alert selects nothing there."""
    assert value_selectors('sum by (reason) (increase(karpenter_nodeclaims_disrupted_total{reason="Empty",'
                           'nodepool=~"$nodepool", capacity_type!="spot"}[$__rate_interval]))'
                           ' / on (nodepool) group_left karpenter_nodepools_limit{resource_type=~"cpu|memory"}') == [
        'karpenter_nodeclaims_disrupted_total{reason="Empty"}', 'karpenter_nodepools_limit{resource_type=~"cpu|memory"}']
    assert value_selectors('histogram_quantile(0.9, sum by (le) (rate(operator_nodeclaim_status_condition_transition'
                           '_seconds_bucket{type="Ready",status="Unknown"}[5m])))') == [
        'operator_nodeclaim_status_condition_transition_seconds_bucket{type="Ready",status="Unknown"}']
    assert value_selectors('sum(nodewright_leader) < 1') == []
    assert value_selectors('x{error!="InsufficientCapacityError",nodepool=~"${nodepool}"}') == []


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


def test_karpenters_four_dashboards_and_cost() -> None:
    assert [p.name for p in DASHBOARDS] == ["nodewright-allocation.json", "nodewright-capacity.json",
                                            "nodewright-controllers.json", "nodewright-cost.json",
                                            "nodewright-performance.json"]
    assert len({json.loads(p.read_text())["uid"] for p in DASHBOARDS}) == 5


def test_generated_dashboards_are_up_to_date() -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "build_dashboards.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_every_dashboard_query_reads_registered_metrics_and_labels(path: Path) -> None:
    series = registered_series()
    queries = dashboard_queries(json.loads(path.read_text()))
    assert len(queries) >= 12
    failures, names = [], set()
    for where, query, is_template in queries:
        refs = template_refs(query) if is_template else metric_refs(query)
        assert refs, f"{where}: no metric found in {query!r}"
        names |= {r.name for r in refs}
        failures += [f"{where}: {p}" for p in problems(refs, series)]
    assert failures == []


def test_the_capacity_dashboard_reads_what_it_was_written_for() -> None:
    names = {r.name for _, query, template in dashboard_queries(json.loads(DASHBOARDS[1].read_text()))
             for r in (template_refs(query) if template else metric_refs(query))}
    assert {"karpenter_nodes_allocatable", "karpenter_pods_startup_duration_seconds_sum",
            "karpenter_pods_startup_duration_seconds_count",
            "operator_nodeclaim_status_condition_transition_seconds_bucket"} <= names


def test_every_panel_query_parses_in_prometheus(tmp_path: Path) -> None:
    """promtool's parser (the real PromQL one) reads every panel's query, Grafana's variables substituted; each
    query is one recording rule of a throwaway rule file."""
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    if not Path(promtool).exists():
        pytest.skip("promtool is not installed (Debian package 'prometheus'; make setup installs it)")
    rules, count = [], 0
    for path in DASHBOARDS:
        for where, query, template in dashboard_queries(json.loads(path.read_text())):
            if template and query.strip().startswith("label_values("):
                continue  # Grafana's function, not PromQL (its metric is checked above)
            rules.append({"record": f"dashboard:query_{count}", "expr": grafana_to_promql(query),
                          "labels": {"where": f"{path.name} {where}"}})
            count += 1
    file = tmp_path / "dashboards.rules.yaml"
    file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    done = subprocess.run([promtool, "check", "rules", str(file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {count} rules found" in done.stdout and count >= 80
