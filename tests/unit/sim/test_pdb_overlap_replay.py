"""Scenario replay: a pod two PodDisruptionBudgets select is never evicted for consolidation, and the replay says
why (issue #26 item 2). 4 pods of 1.5 vCPU on two c5a.xlarge, scaled to 2 at 10 min: with one budget
(``maxUnavailable: 1``) consolidation drains one node (2 evictions, ``Underutilized``); with two budgets over the
same pods the Eviction API would refuse every eviction, so no node is consolidated and the summary carries each
node's ``DisruptionBlocked`` reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from nodewright.cli import cli

from .test_scenarios import NODECLASS, POOL, four_pods, inflate


def _pdb(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "inflate"}}}}


def _scenario(tmp_path: Path, pdbs: list[dict[str, Any]]) -> Path:
    pool = copy.deepcopy(POOL)
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"}
    pool["spec"]["template"]["spec"]["requirements"][2]["values"] = ["c5a.xlarge"]
    workload = inflate()
    pod = workload["spec"]["template"]["spec"]
    del pod["topologySpreadConstraints"]
    pod["containers"][0]["resources"]["requests"]["cpu"] = "1500m"
    doc = four_pods(manifests=[pool, NODECLASS, workload, *pdbs],
                    events=[{"at": "1m", "scale": {"deployment": "inflate", "replicas": 4}},
                            {"at": "10m", "scale": {"deployment": "inflate", "replicas": 2}}])
    del doc["spec"]["baseline"]
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _summary(path: Path) -> dict[str, Any]:
    done = CliRunner().invoke(cli, ["simulate", "--scenario", str(path), "--output", "json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["summary"]


def test_one_budget_lets_consolidation_drain(tmp_path: Path) -> None:
    summary = _summary(_scenario(tmp_path, [_pdb("web")]))
    assert (summary["pods_evicted"], summary["disruptions_by_reason"]) == (2, {"Underutilized": 1})
    assert "disruptions_blocked" not in summary


def test_two_budgets_over_the_same_pods_block_consolidation_with_the_reason(tmp_path: Path) -> None:
    path = _scenario(tmp_path, [_pdb("web"), _pdb("team")])
    summary = _summary(path)
    assert summary["pods_evicted"] == 0
    assert "Underutilized" not in summary["disruptions_by_reason"]
    reason = ("is selected by more than one PodDisruptionBudget (default/team, default/web): the Eviction API "
              "refuses to evict it")
    assert summary["disruptions_blocked"] == {
        "ip-10-0-0-5.ec2.internal": f"pod default/inflate-0 {reason}",
        "ip-10-0-0-6.ec2.internal": f"pod default/inflate-2 {reason}",
    }
    table = CliRunner().invoke(cli, ["simulate", "--scenario", str(path)]).stdout
    assert f"disruption blocked: node ip-10-0-0-5.ec2.internal: pod default/inflate-0 {reason}" in table.splitlines()
