"""The chart's alert rules against Prometheus's own tools: ``promtool check rules`` parses them and ``promtool test
rules`` runs ``nodewright-alerts.test.yaml`` (each alert fires on its series, with its labels and annotations, and
stays quiet beside them). Every alert has a test case, a runbook section in docs/alerts.md, and reads only
metrics the controller exports. promtool comes from Debian's ``prometheus`` package (``make setup``)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from chart.promql_refs import metric_refs, problems, registered_series  # tests/chart/promql_refs.py

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "helm" / "nodewright" / "rules" / "nodewright-alerts.yaml"
TESTS = Path(__file__).with_name("nodewright-alerts.test.yaml")
RUNBOOKS = ROOT / "docs" / "alerts.md"


def promtool() -> str:
    found = shutil.which("promtool") or ("/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)
    if found is None:
        pytest.skip("promtool is not installed (Debian package 'prometheus'; make setup installs it)")
    return found


def alerts() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_promtool_unit_tests_pass() -> None:
    done = subprocess.run([promtool(), "test", "rules", TESTS.name], cwd=TESTS.parent, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_is_tested_documented_and_reads_exported_metrics() -> None:
    series = registered_series()

    tested = {case["alertname"] for test in yaml.safe_load(TESTS.read_text())["tests"]
              for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    runbooks = RUNBOOKS.read_text()
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names)) >= 12
    for rule in alerts():
        name = rule["alert"]
        assert name in tested, f"{name}: no promtool case fires it"
        assert rule["annotations"]["runbook_url"] == f"docs/alerts.md#{name.lower()}"
        assert re.search(rf"^## {name}$", runbooks, re.M), f"{name}: no runbook section in docs/alerts.md"
        assert rule["labels"]["severity"] in ("info", "warning", "critical")
        refs = metric_refs(rule["expr"])
        assert refs and problems(refs, series) == [], (name, problems(refs, series))
