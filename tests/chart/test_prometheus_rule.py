"""The chart's PrometheusRule: off by default (as the ServiceMonitor), and when on exactly the groups of
``rules/nodewright-alerts.yaml`` (the file promtool tests), with the runbook URL prefix from values."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from chart_helpers import find, one

pytestmark = pytest.mark.chart

RULES = yaml.safe_load((Path(__file__).resolve().parents[2] / "helm" / "nodewright" / "rules"
                        / "nodewright-alerts.yaml").read_text())


def test_off_by_default(rendered) -> None:
    for docs in rendered.values():
        assert find(docs, "PrometheusRule") == []


def test_on_it_carries_every_alert_of_the_rules_file(render) -> None:
    rule = one(render("prometheusRule.enabled=true", "prometheusRule.additionalLabels.release=kps"),
               "PrometheusRule", "nodewright")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "kube-system" and rule["metadata"]["labels"]["release"] == "kps"
    assert rule["spec"]["groups"] == RULES["groups"]


def test_runbook_base_url_prefixes_every_runbook(render) -> None:
    rule = one(render("prometheusRule.enabled=true", "prometheusRule.runbookBaseURL=https://example.com/nw/"),
               "PrometheusRule", "nodewright")
    urls = [r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert len(urls) == 13
    assert urls[0] == "https://example.com/nw/docs/alerts.md#nodewrightcloudprovidererrors"
    assert all(u.startswith("https://example.com/nw/docs/alerts.md#nodewright") for u in urls)
