"""A real Prometheus (Debian's ``/usr/bin/prometheus``) scraping a running controller during an integration run.

The controller runs as in production (``Replica``: the emulator as API server, moto as AWS) and launches a node
for pending pods; Prometheus, started on 127.0.0.1 with a free port and a temporary directory, scrapes its
``/metrics`` every second and evaluates the chart's alert rules (``rules/nodewright-alerts.yaml``). Then the run
creates and deletes hundreds of pods and nodes, and the test asserts, through Prometheus's HTTP API:

* every alert rule evaluates without error, and the NodePool-near-limit rule goes pending on real data;
* the dashboards' queries succeed and return series (those that cannot have data in this run are named);
* no family's series count grows with the churn: per family it stays under :data:`SERIES_BOUND` while
  hundreds of objects come and go, and falls back to its pre-churn count when they are gone.

Skipped, with the reason, when prometheus is not installed (``make setup`` installs it as root).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart.promql_refs import dashboard_queries, grafana_to_promql  # tests/chart/promql_refs.py
from kubernetes import client as k8s

from nodewright.api import labels as L
from nodewright.kube import resources as r

from .awsmoto import Account
from .emulator import EmulatorThread
from .harness import (
    Replica,
    apply_pool,
    condition,
    pending_pod,
    record_timing,
    register_node,
    run_pod,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "helm" / "nodewright" / "rules" / "nodewright-alerts.yaml"
DASHBOARDS = sorted((ROOT / "helm" / "nodewright" / "dashboards").glob("*.json"))
#: Series any one family may have at any moment of the run (the churn brings 30 nodes and 60 pods at a time;
#: a family keyed by pod or node that kept deleted objects would pass this within two rounds).
SERIES_BOUND = 300
ROUNDS, NODES_PER_ROUND, PODS_PER_ROUND = 3, 30, 60
#: Panels that must have data after one provisioning flow and the churn.
KEY_PANELS = {
    "Nodes by NodePool", "Nodes by instance type", "Nodes by capacity type", "Cost per NodePool ($/h)",
    "NodePool usage vs limits", "NodeClaims created by reason", "Reconciliations per minute",
    "Controller reconciliation latency [$controller]", "Controller reconciliation rate",
    "Scheduling simulation duration", "Cloud provider calls", "Leader replicas", "Cluster state synced",
    "List $/h", "$/h per NodePool, list and effective", "CPU requests vs allocatable by NodePool",
    "Idle $/h by NodePool (cpu)", "$/h per allocatable vCPU", "Cost by NodePool", "Nodes created and terminated",
    "Cluster utilization", "Pods by phase and NodePool", "Cheapest available offerings", "Build",
}
#: Panels that have no data in this run, and why (no interruption queue, no PricingPolicy, no disruption, ...).
EXPECTED_EMPTY = {
    "Interruption messages", "Interruption handling delay",  # no interruption queue configured
    "Effective $/h", "Saved by the policy",  # no PricingPolicy: no price="effective" series
    "Disruption evaluation duration",  # a disruption pass needs consolidatable nodes, after consolidateAfter
    "Eviction requests", "Node termination latency", "NodeClaim termination latency",  # nothing is drained
    "Disruptions by reason", "Disruption decisions (24h)",
    "Pod startup latency", "Pod startup (created to running)",  # no pod observed from Pending to Running yet
    "Cloud provider errors",  # every call succeeds
    "Pods waiting", "Oldest undecided pod", "Pending pods",  # nothing pending at query time
    "Reconciliation errors",  # no controller pass failed
    "Scheduling decision latency",
    "Bind duration",  # the provisioner does not bind (bindPods off)
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Prometheus:
    """``/usr/bin/prometheus`` on 127.0.0.1 scraping ``target`` each second, with the chart's alert rules."""

    def __init__(self, binary: str, target: str, workdir: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {"global": {"scrape_interval": "2s", "evaluation_interval": "1s", "scrape_timeout": "2s"},
                  "rule_files": [str(RULES)],
                  "scrape_configs": [{"job_name": "nodewright", "static_configs": [{"targets": [target]}]}]}
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = workdir / "prometheus.log"
        with open(self.log, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={workdir / 'prometheus.yml'}", f"--storage.tsdb.path={workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h",
                 "--log.level=warn", "--web.enable-lifecycle"],
                stdout=log, stderr=subprocess.STDOUT)

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    def query(self, expr: str) -> list[dict[str, Any]]:
        doc = self.api("/api/v1/query", query=expr)
        assert doc["status"] == "success", (expr, doc)
        return list(doc["data"]["result"])

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            assert self.process.poll() is None, self.log.read_text()
            return False

    def scrape_health(self) -> str:
        """``up`` and the last scrape's duration and sample count (for failure messages)."""
        values = {name: self.query(f'{name}{{job="nodewright"}}') for name in
                  ("up", "scrape_duration_seconds", "scrape_samples_scraped")}
        return ", ".join(f"{k}={v[0]['value'][1] if v else '-'}" for k, v in values.items())

    def series_per_family(self) -> dict[str, int]:
        return {r["metric"]["__name__"]: int(float(r["value"][1]))
                for r in self.query('count by (__name__) ({job="nodewright"})')}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)


@pytest.fixture
def prometheus_binary() -> str:
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if found is None:
        pytest.skip("prometheus is not installed (Debian package 'prometheus'; make setup installs it as root)")
    return found


@pytest.fixture
def replica(kube: EmulatorThread, account: Account) -> Iterator[Replica]:
    started = Replica(kube, account, "prom").start()
    yield started
    started.stop()


def churn_node(core: k8s.CoreV1Api, i: int) -> str:
    """A node nodewright did not launch (no NodePool label), Ready, with an instance type and zone; tainted, so
    consolidation cannot move the real node's pods onto it (its own pods are bound by name)."""
    name = f"churn-{i}.ec2.internal"
    types = ("m5.large", "c5.xlarge", "r5.large", "t3.medium")
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        L.INSTANCE_TYPE: types[i % 4], L.ZONE: f"us-east-1{'abc'[i % 3]}", L.CAPACITY_TYPE: "on-demand",
        L.HOSTNAME: name}}, "spec": {"taints": [{"key": "example.com/churn", "effect": "NoSchedule"}]}})
    core.patch_node_status(name, {"status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                                             "allocatable": {"cpu": "2", "memory": "7Gi", "pods": "29"},
                                             "conditions": [{"type": "Ready", "status": "True"}]}})
    return name


def churn_pod(core: k8s.CoreV1Api, i: int, node: str) -> None:
    core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"churn-{i}"},
                                           "spec": {"nodeName": node, "containers": [{
                                               "name": "app", "image": "nginx",
                                               "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})


@pytest.mark.timeout(900)
def test_prometheus_scrapes_the_controller_evaluates_alerts_and_cardinality_stays_bounded(
        prometheus_binary: str, kube: EmulatorThread, account: Account, replica: Replica, core: k8s.CoreV1Api,
        custom: k8s.CustomObjectsApi, tmp_path: Path) -> None:
    metrics_port = replica.runtime.endpoints[0].port
    prometheus = Prometheus(prometheus_binary, f"127.0.0.1:{metrics_port}", tmp_path)
    try:
        wait_for(prometheus.ready, 60, "Prometheus to be ready", interval=0.2)
        # A real provisioning flow: pods pending, a NodeClaim launched, its node registered, the pods running.
        apply_pool(custom, types=("m5.large",))
        custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "general",
                                           {"spec": {"limits": {"cpu": "2"}}})
        for i in range(2):
            pending_pod(core, f"web-{i}")
        claim = wait_for(lambda: next((c for c in kube.emulator.snapshot("nodeclaims")
                                       if condition(c, L.CONDITION_LAUNCHED) == "True"), None), 20, "a launched NodeClaim")
        node_name = register_node(core, claim)
        for i in range(2):
            run_pod(core, f"web-{i}", node_name)
        wait_for(lambda: prometheus.query('karpenter_nodepools_usage{nodepool="general",resource_type="cpu"} == 2'),
                 30, "NodePool usage scraped")
        wait_for(lambda: prometheus.query(f'karpenter_nodes_allocatable{{node_name="{node_name}"}}'), 30,
                 "the node's series")
        baseline = prometheus.series_per_family()
        assert baseline["karpenter_build_info"] == 1 and baseline["nodewright_leader"] == 1

        # Churn: hundreds of nodes and pods come and go; per-family series stay bounded and leave with them.
        started, peak = time.monotonic(), dict(baseline)
        for round_ in range(ROUNDS):
            nodes = [churn_node(core, round_ * NODES_PER_ROUND + i) for i in range(NODES_PER_ROUND)]
            for i in range(PODS_PER_ROUND):
                churn_pod(core, round_ * PODS_PER_ROUND + i, nodes[i % NODES_PER_ROUND])
            try:
                wait_for(lambda: prometheus.series_per_family().get("karpenter_pods_state", 0)
                         >= baseline["karpenter_pods_state"] + PODS_PER_ROUND, 60, f"round {round_}'s pods scraped",
                         interval=0.5)
            except AssertionError as err:
                raise AssertionError(f"{err} ({prometheus.scrape_health()}; pods_state series "
                                     f"{prometheus.series_per_family().get('karpenter_pods_state')}; "
                                     f"pods {len(kube.emulator.snapshot('pods'))}, "
                                     f"phases {sorted({str((p.get('status') or {}).get('phase')) for p in kube.emulator.snapshot('pods')})}, "
                                     f"cache {len(replica.runtime.cluster.list(r.PODS))})") from None
            for family, count in prometheus.series_per_family().items():
                peak[family] = max(peak.get(family, 0), count)
            for i in range(PODS_PER_ROUND):
                core.delete_namespaced_pod(f"churn-{round_ * PODS_PER_ROUND + i}", "default", grace_period_seconds=0)
            for name in nodes:
                core.delete_node(name)
            wait_for(lambda: prometheus.series_per_family().get("karpenter_pods_state", 0)
                     <= baseline["karpenter_pods_state"], 60, f"round {round_}'s pods gone", interval=0.5)
        record_timing(f"prometheus churn: {ROUNDS * (NODES_PER_ROUND + PODS_PER_ROUND)} objects created and deleted",
                      time.monotonic() - started)
        largest = sorted(peak.items(), key=lambda kv: -kv[1])[:4]
        record_timing("prometheus series per family, peak (baseline): " + ", ".join(
            f"{family} {count} ({baseline.get(family, 0)})" for family, count in largest), 0.0)
        over = {family: count for family, count in peak.items() if count > SERIES_BOUND}
        assert over == {}, f"families over {SERIES_BOUND} series: {over}"
        assert peak["karpenter_pods_state"] >= baseline["karpenter_pods_state"] + PODS_PER_ROUND
        assert peak["karpenter_nodes_allocatable"] >= 3 * NODES_PER_ROUND  # cpu, memory and pods of each node
        after = wait_for(lambda: (s := prometheus.series_per_family())
                         and s.get("karpenter_nodes_allocatable") == baseline["karpenter_nodes_allocatable"] and s,
                         30, "node series back to the baseline", interval=0.5)
        grown = {f: (baseline.get(f, 0), n) for f, n in after.items() if n > baseline.get(f, 0) + 30}
        assert grown == {}, f"families that kept series of deleted objects (before, after): {grown}"

        # Every alert rule evaluates; the NodePool at its cpu limit (2 of 2) makes its rule pending.
        def rules() -> list[dict[str, Any]]:
            return [r for g in prometheus.api("/api/v1/rules")["data"]["groups"] for r in g["rules"]]

        pending = wait_for(lambda: [a for r in rules() if r["name"] == "NodewrightNodePoolNearLimit"
                                    for a in r["alerts"]], 30, "the near-limit alert pending")
        assert [(a["state"], a["labels"]["nodepool"], a["labels"]["resource_type"]) for a in pending] == [
            ("pending", "general", "cpu")]
        evaluated = rules()
        assert len(evaluated) == 13
        assert {r["name"]: r["health"] for r in evaluated} == {r["name"]: "ok" for r in evaluated}
        assert all(r["lastEvaluation"] > "2000" for r in evaluated)
        healthy = ("NodewrightNoLeader", "NodewrightMetricsAbsent", "NodewrightClusterStateUnsynced",
                   "NodewrightControllerErrors", "NodewrightNodeClaimNotReady", "NodewrightNodeClaimTerminationStuck")
        # Inactive once the run is steady (a 2 s test Lease on a loaded machine may lapse for a moment: the
        # no-leader rule then goes pending, as it should, and back).
        wait_for(lambda: all(r["state"] == "inactive" for r in rules() if r["name"] in healthy), 60,
                 "the health alerts inactive", interval=0.5)

        # The dashboards' queries run in Prometheus and return series (but for the named ones).
        with_data: dict[str, bool] = {}  # panel -> one of its queries returned series
        ran = 0
        for path in DASHBOARDS:
            for where, query, template in dashboard_queries(json.loads(path.read_text())):
                if template:
                    continue
                ran += 1
                panel = where.removeprefix("panel ").strip("'")
                with_data[panel] = with_data.get(panel, False) or bool(prometheus.query(grafana_to_promql(query)))
        empty = {panel for panel, data in with_data.items() if not data}
        record_timing(f"prometheus: {ran} dashboard queries, {len(empty)} without data: {sorted(empty)}", 0.0)
        assert ran >= 80
        assert not KEY_PANELS & empty, f"key panels without data: {sorted(KEY_PANELS & empty)}"
        assert empty <= EXPECTED_EMPTY, f"panels without data: {sorted(empty - EXPECTED_EMPTY)}"
    finally:
        prometheus.stop()
