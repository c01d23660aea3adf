"""A real Prometheus (Debian's ``/usr/bin/prometheus``) scraping a running controller during an integration run.

The controller runs as in production (``Replica``: the emulator as API server, moto as AWS) and launches a node
for pending pods; Prometheus, started on 127.0.0.1 with a free port and a temporary directory, scrapes its
``/metrics`` every second and evaluates the chart's alert rules (``rules/nodewright-alerts.yaml``). Then the run
creates and deletes hundreds of pods and nodes, and the test asserts, through Prometheus's HTTP API:

* every alert rule evaluates without error, and the NodePool-near-limit rule goes pending on real data;
* the dashboards' queries succeed and return series (those that cannot have data in this run are named);
* no family's series count grows with the churn: per family it stays under :data:`SERIES_BOUND` while
  hundreds of objects come and go, and falls back to its pre-churn count when they are gone.

A second run (:func:`test_prometheus_scrapes_disruption_repair_and_aws_failure_families`) drives what the first
does not: an insufficient-capacity answer from CreateFleet, node repair, failed TerminateInstances calls, an empty
node consolidated, a NodeClaim deleted and drained by eviction, under a PricingPolicy; every metric the alerts
and dashboards name must then have been exported (but for :data:`NOT_EXPORTED_IN_FAMILIES_RUN`), Prometheus must
hold the families added with Karpenter main's
metrics (``karpenter_pods_disruption_initiated_total``, ``karpenter_nodeclaims_unhealthy_disrupted_total``, the
disruption labels ``consolidation_policy``/``termination_mode`` with snake_case reasons, the AWS launch and
termination failure counters, ``karpenter_ec2nodeclasses_userdata_bytes``), and every label value a dashboard
or alert filters on (``reason="empty"``-like matchers, :func:`chart.promql_refs.value_selectors`) must select
series.

Skipped, with the reason, when prometheus is not installed (``make setup`` installs it as root).
"""

from __future__ import annotations

import json
import re
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
from chart.promql_refs import (  # tests/chart/promql_refs.py
    dashboard_queries,
    grafana_to_promql,
    metric_refs,
    value_selectors,
)
from kubernetes import client as k8s

from nodewright.api import labels as L
from nodewright.kube import resources as r
from nodewright.settings import FeatureGates

from .awsmoto import Account, _controller_clients
from .emulator import EmulatorThread
from .faults import _error, _ice, _ok
from .harness import (
    Replica,
    apply_pool,
    condition,
    nodepool,
    pending_pod,
    record_timing,
    register_node,
    run_pod,
    wait_for,
)
from .test_repair import not_ready_since

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "examples" / "pricing" / "savings-plan.yaml"
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

#: Metrics the alerts and dashboards name that the second run does not export, and why.
NOT_EXPORTED_IN_FAMILIES_RUN = {
    "controller_runtime_reconcile_errors_total",  # no controller pass fails
    "karpenter_interruption_received_messages_total",  # no interruption queue configured
    "karpenter_voluntary_disruption_consolidation_timeouts_total",  # no consolidation search reaches its bound
    # present only while the provisioner has not decided on a pending pod (a pass or two here)
    "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
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


def daemon_pod(core: k8s.CoreV1Api, node: str) -> None:
    """A DaemonSet's pod running on ``node`` (what the DaemonSet controller and the kubelet do)."""
    core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "agent-0", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent",
                                                "uid": "0b7e5d2a-agent", "controller": True}]},
        "spec": {"nodeName": node, "containers": [{"name": "agent", "image": "agent",
                                                   "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})
    run_pod(core, "agent-0", node)


def panels_with_data(prometheus: Prometheus) -> dict[str, bool]:
    """Dashboard panel title -> whether one of its queries returns series now."""
    with_data: dict[str, bool] = {}
    for path in DASHBOARDS:
        for where, query, template in dashboard_queries(json.loads(path.read_text())):
            if not template:
                panel = where.removeprefix("panel ").strip("'")
                with_data[panel] = with_data.get(panel, False) or bool(prometheus.query(grafana_to_promql(query)))
    return with_data


def variable_queries() -> set[tuple[str, str, str]]:
    """``(query, metric, label)`` of every dashboard variable ``label_values(metric, label)``."""
    out = set()
    for path in DASHBOARDS:
        for _, query, template in dashboard_queries(json.loads(path.read_text())):
            match = re.fullmatch(r"label_values\((\w+), (\w+)\)", query.strip()) if template else None
            if match:
                out.add((query, match.group(1), match.group(2)))
    return out


def alert_and_dashboard_exprs() -> list[str]:
    """The alert rules' expressions and the dashboards' panel queries (Grafana variables left in)."""
    exprs = [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    return exprs + [query for path in DASHBOARDS
                    for _, query, template in dashboard_queries(json.loads(path.read_text())) if not template]


def alert_and_dashboard_selectors() -> set[str]:
    """Every selector with a literal label value in the alert rules and the dashboards' panel queries."""
    return {selector for expr in alert_and_dashboard_exprs() for selector in value_selectors(expr)}


def values(sample: dict[str, Any], *labels: str) -> tuple[str, ...]:
    """A query result's label values, "" for a label it lacks (Prometheus stores no empty label)."""
    return tuple(sample["metric"].get(label, "") for label in labels)


def family_labels(prometheus: Prometheus, selector: str, label: str) -> set[str]:
    """The values of ``label`` across ``selector``'s series seen in the last hour (deleted objects' too)."""
    return {r["metric"].get(label, "") for r in prometheus.query(f"last_over_time({selector}[1h])")}


@pytest.mark.timeout(300)
def test_prometheus_scrapes_disruption_repair_and_aws_failure_families(
        prometheus_binary: str, kube: EmulatorThread, account: Account, replicas: list[Replica], core: k8s.CoreV1Api,
        custom: k8s.CustomObjectsApi, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """CreateFleet answers insufficient capacity once, a node goes NotReady past node repair's toleration, the
    first TerminateInstances calls fail, an empty node is consolidated; Prometheus then holds each family with
    the label values Karpenter main writes, and every literal label value of the alerts and dashboards selects
    series."""
    ec2 = _controller_clients(account.url).ec2  # the replicas' shared client: its hooks see their calls
    calls = {"fleet": 0, "terminate": 0}

    def plan_fleet(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["prometheus-test"] = params

    def no_capacity_for_xlarge(context: dict[str, Any], **_: Any) -> Any:
        """Every m5.xlarge offering answers insufficient capacity (the NodeClaim cannot launch: deleted)."""
        calls["fleet"] += 1
        params = context.get("prometheus-test", {})
        overrides = [o for config in params.get("LaunchTemplateConfigs", []) for o in config["Overrides"]]
        if overrides and all(o["InstanceType"] == "m5.xlarge" for o in overrides):
            return _ok({"FleetId": "fleet-ice", "Instances": [], "Errors": [_ice(params, o) for o in overrides]})
        return None

    def fail_terminates(**_: Any) -> Any:
        calls["terminate"] += 1
        return _error(500, "InternalError", "An internal error has occurred") if calls["terminate"] <= 2 else None

    events = ec2.meta.events
    events.register_first("before-parameter-build.ec2.CreateFleet", plan_fleet, unique_id="prom-fleet-plan")
    events.register_first("before-call.ec2.CreateFleet", no_capacity_for_xlarge, unique_id="prom-fleet")
    events.register_first("before-call.ec2.TerminateInstances", fail_terminates, unique_id="prom-terminate")
    for event, unique_id in (("before-parameter-build.ec2.CreateFleet", "prom-fleet-plan"),
                             ("before-call.ec2.CreateFleet", "prom-fleet"),
                             ("before-call.ec2.TerminateInstances", "prom-terminate")):
        request.addfinalizer(lambda e=event, u=unique_id: events.unregister(e, unique_id=u))
    replica = Replica(kube, account, "families", bind_pods=True, feature_gates=FeatureGates(node_repair=True),
                      pricing_policy=str(POLICY), disruption_poll_period=0.2, disruption_validation_delay=0.4)
    replicas.append(replica.start())
    prometheus = Prometheus(prometheus_binary, f"127.0.0.1:{replica.runtime.endpoints[0].port}", tmp_path)
    try:
        wait_for(prometheus.ready, 60, "Prometheus to be ready", interval=0.2)
        apply_pool(custom, types=("m5.large", "m5.xlarge"))
        # A NodePool without limits (tainted: no pod here uses it); the dashboards' $nodepool list must name it.
        reserved = nodepool("reserved", taints=[{"key": "example.com/reserved", "effect": "NoSchedule"}])
        del reserved["spec"]["limits"]
        custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", reserved)
        # A pod only m5.xlarge may take: no capacity in any zone, the NodeClaim is deleted, the pod stays pending.
        pending_pod(core, "xl-0")
        core.patch_namespaced_pod("xl-0", "default", {"spec": {"nodeSelector": {L.INSTANCE_TYPE: "m5.xlarge"}}})
        wait_for(lambda: prometheus.query('karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle",'
                                          'method="Create",error="InsufficientCapacityError"}'), 30,
                 "an insufficient-capacity launch scraped", interval=0.5)
        wait_for(lambda: prometheus.query('karpenter_pods_state{name="xl-0",phase="Pending",scheduled="false"}'), 30,
                 "the pending pod scraped", interval=0.5)
        core.delete_namespaced_pod("xl-0", "default", grace_period_seconds=0)
        wait_for(lambda: not kube.emulator.snapshot("nodeclaims"), 20, "the NodeClaim without capacity gone")
        # m5.large only from here: no cheaper replacement exists, so nothing consolidates the node before repair.
        for i in range(2):
            pending_pod(core, f"web-{i}")
        claim = wait_for(lambda: next((c for c in kube.emulator.snapshot("nodeclaims")
                                       if condition(c, L.CONDITION_LAUNCHED) == "True"), None), 30, "a launch")
        assert claim["metadata"]["labels"][L.INSTANCE_TYPE] == "m5.large"
        node = register_node(core, claim)
        for i in range(2):
            run_pod(core, f"web-{i}", node)
        daemon_pod(core, node)
        wait_for(lambda: prometheus.query(f'karpenter_nodes_total_daemon_requests{{node_name="{node}",'
                                          'resource_type="cpu"}'), 30, "the node's DaemonSet requests scraped")
        # Node repair: NotReady past the 30-minute toleration; the first two TerminateInstances calls fail.
        not_ready_since(core, node, 31)
        name = claim["metadata"]["name"]
        wait_for(lambda: kube.emulator.peek("nodeclaims", name) is None, 60, "the unhealthy NodeClaim gone")
        assert calls["terminate"] >= 3
        # An empty node: one pod launches it, its deletion empties it, consolidation deletes it.
        pending_pod(core, "batch-0")
        second = wait_for(lambda: next((c for c in kube.emulator.snapshot("nodeclaims")
                                        if condition(c, L.CONDITION_LAUNCHED) == "True"), None), 30, "a second launch")
        second_node = register_node(core, second)
        run_pod(core, "batch-0", second_node)
        wait_for(lambda: (c := kube.emulator.peek("nodeclaims", second["metadata"]["name"]))
                 and condition(c, L.CONDITION_READY) == "True", 20, "the second NodeClaim Ready")
        wait_for(lambda: prometheus.query(f'karpenter_pods_state{{node="{second_node}",phase="Running"}}'), 30,
                 "the second node's pod scraped")
        core.delete_namespaced_pod("batch-0", "default", grace_period_seconds=0)
        wait_for(lambda: kube.emulator.peek("nodeclaims", second["metadata"]["name"]) is None, 60,
                 "the empty NodeClaim consolidated")
        # A NodeClaim deleted with a pod on it: drained by eviction; the pod's grace period (600 s, run 100x
        # faster by the emulator) keeps the NodeClaim terminating for a few scrapes.
        pending_pod(core, "drain-0", grace=600)
        third = wait_for(lambda: next((c for c in kube.emulator.snapshot("nodeclaims")
                                       if condition(c, L.CONDITION_LAUNCHED) == "True"), None), 30, "a third launch")
        third_name = third["metadata"]["name"]
        run_pod(core, "drain-0", register_node(core, third))
        wait_for(lambda: (c := kube.emulator.peek("nodeclaims", third_name)) and condition(c, L.CONDITION_READY)
                 == "True", 20, "the third NodeClaim Ready")
        custom.delete_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", third_name)
        wait_for(lambda: prometheus.query(f'operator_nodeclaim_termination_current_time_seconds{{name="{third_name}"}}'),
                 30, "the terminating NodeClaim scraped", interval=0.5)
        wait_for(lambda: kube.emulator.peek("nodeclaims", third_name) is None, 60, "the drained NodeClaim gone")
        assert kube.emulator.evictions == [("default", "drain-0")]

        def scraped(expr: str) -> list[dict[str, Any]]:
            return wait_for(lambda: prometheus.query(expr), 30, f"{expr} scraped", interval=0.5)

        pool = {"nodepool": "general", "capacity_type": "on-demand"}
        disrupted = scraped('karpenter_nodeclaims_disrupted_total{reason="empty"}') + scraped(
            'karpenter_nodeclaims_disrupted_total{reason="unhealthy"}')
        # (Prometheus drops a label whose value is "": consolidation_policy outside consolidation.)
        assert sorted((*values(s, "reason", "consolidation_policy", "termination_mode", *pool), s["value"][1])
                      for s in disrupted) == [
            ("empty", "when_empty_or_underutilized", "graceful", "general", "on-demand", "1"),
            ("unhealthy", "", "graceful", "general", "on-demand", "1")]
        initiated = scraped('karpenter_pods_disruption_initiated_total{reason="unhealthy"}')
        assert [(*values(s, "consolidation_policy", "termination_mode", *pool), s["value"][1]) for s in initiated] == [
            ("", "graceful", "general", "on-demand", "2")]
        unhealthy = scraped("karpenter_nodeclaims_unhealthy_disrupted_total")
        assert [(*values(s, "condition", "image_id", *pool), s["value"][1]) for s in unhealthy] == [
            ("ready", claim["status"]["imageID"], "general", "on-demand", "1")]
        # Karpenter main snake_cases the disruption reason: no PascalCase value anywhere.
        for family in ("karpenter_nodeclaims_disrupted_total", "karpenter_pods_disruption_initiated_total",
                       "karpenter_voluntary_disruption_decisions_total"):
            reasons = family_labels(prometheus, family, "reason")
            assert reasons and all(v == v.lower() for v in reasons), (family, reasons)
        zone = claim["metadata"]["labels"][L.ZONE]
        launch = scraped("karpenter_cloudprovider_instance_launch_failures_total")
        assert {values(s, "capacity_type", "reason") for s in launch} == {("on-demand", "InsufficientInstanceCapacity")}
        assert len(launch) >= 1 and all(s["metric"]["zone"] and s["metric"]["zone_id"].startswith("use1-")
                                        for s in launch)
        terminate = scraped("karpenter_cloudprovider_instance_termination_failures_total")
        assert [(s["metric"]["zone"], s["metric"]["zone_id"].startswith("use1-")) for s in terminate] == [(zone, True)]
        assert float(terminate[0]["value"][1]) >= 1
        userdata = scraped('karpenter_ec2nodeclasses_userdata_bytes{nodeclass="default"}')
        assert len(userdata) == 1 and float(userdata[0]["value"][1]) > 100
        assert scraped('karpenter_cloudprovider_errors_total{error="InsufficientCapacityError"}')

        # Every label value the alerts and dashboards filter on was written in this run.
        selectors = alert_and_dashboard_selectors()
        assert len(selectors) >= 10
        missing = sorted(s for s in selectors if not prometheus.query(f"last_over_time({s}[1h])"))
        record_timing(f"prometheus: {len(selectors)} alert/dashboard label-value selectors, {len(missing)} without "
                      f"series: {missing}", 0.0)
        assert missing == []
        # The controller label the dashboards' $controller variable lists: every pass docs/dashboards.md names.
        passes = family_labels(prometheus, "controller_runtime_reconcile_total", "controller")
        documented = set(re.findall(r"`([a-z.]+)`", (ROOT / "docs" / "dashboards.md").read_text().split(
            "The controller\nnames are nodewright's passes:", 1)[1].split("\n\n", 1)[0]))
        assert documented == passes | {"interruption"}, (sorted(passes - documented), sorted(documented - passes))
        # The dashboards' variables, as Grafana's label_values() asks Prometheus for them.
        variables = {query: prometheus.api(f"/api/v1/label/{label}/values", **{"match[]": metric})["data"]
                     for query, metric, label in variable_queries()}
        assert variables, "no label_values() variable"
        for query, found in variables.items():
            expected = {"general", "reserved"} if query.endswith(", nodepool)") else passes
            assert set(found) == expected, (query, found)
        # Every metric the alerts and dashboards name was exported in this run (but the named few).
        named = {ref.name for expr in alert_and_dashboard_exprs() for ref in metric_refs(expr)}
        unexported = sorted(name for name in named if not prometheus.query(f"last_over_time({name}[1h])"))
        record_timing(f"prometheus: {len(named)} metrics named by alerts and dashboards, not exported in this run: "
                      f"{unexported}", 0.0)
        assert set(unexported) <= NOT_EXPORTED_IN_FAMILIES_RUN, unexported
        # Panels the first run leaves empty have data now.
        covered = sorted(panel for panel, data in panels_with_data(prometheus).items() if data and panel in EXPECTED_EMPTY)
        record_timing(f"prometheus: panels without data in the churn run that have data here: {covered}", 0.0)
        assert {"Cloud provider errors", "Disruptions by reason", "Effective $/h", "Saved by the policy",
                "Node termination latency", "NodeClaim termination latency", "Eviction requests"} <= set(covered)
        assert {r["name"]: r["health"] for g in prometheus.api("/api/v1/rules")["data"]["groups"]
                for r in g["rules"] if r["health"] != "ok"} == {}
    finally:
        prometheus.stop()
