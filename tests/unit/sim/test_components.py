"""Simulator building blocks: latency, simulated EC2, scenario parsing, pod autoscalers, workloads, reports."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest

from nodewright.cloud.catalog import load_instance_types
from nodewright.cloud.simulated import LatencyDistribution, SimulatedEC2
from nodewright.cloud.simulated.ec2 import INTERRUPTION_WARNING, READY, REGISTERED, RUNNING, TERMINATED
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.sim.autoscaling import CronTrigger, HorizontalPodAutoscaler, Load, ScaledObject
from nodewright.sim.report import percentile
from nodewright.sim.scenario import parse_duration, parse_scenario
from nodewright.sim.workloads import CronJobWorkload, ReplicaWorkload


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- latency and EC2 -------------------------------------------------------------------------------------


def test_latency_fits_its_percentiles_and_is_seeded() -> None:
    dist = LatencyDistribution(p50=20.0, p90=40.0)
    rng = random.Random(1)
    draws = sorted(dist.sample(rng) for _ in range(4000))
    assert draws[2000] == pytest.approx(20.0, abs=1.0)
    assert draws[3600] == pytest.approx(40.0, abs=2.0)
    assert [dist.sample(random.Random(3)) for _ in range(3)] == [dist.sample(random.Random(3)) for _ in range(3)]
    phases = LatencyDistribution(30.0, 30.0).phases(random.Random(0))
    assert (phases.running, phases.registered, phases.ready) == (9.0, 22.0, 30.0)
    with pytest.raises(ValueError):
        LatencyDistribution(40.0, 20.0)


def test_ec2_phases_interruption_and_billing() -> None:
    clock = Clock(1000.0)
    ec2 = SimulatedEC2(clock, random.Random(0), LatencyDistribution(30.0, 30.0))
    it = next(t for t in load_instance_types("us-east-1") if t.name == "m6g.2xlarge")
    spot = next(o for o in it.offerings if o.capacity_type == "spot" and o.zone == "us-east-1a")
    instance = ec2.run_instance(it, spot)
    assert ec2.next_event_time() == 1009.0
    clock.now = 1030.0
    assert [k for k, _ in ec2.due(1030.0)] == [RUNNING, REGISTERED, READY]
    assert ec2.interrupt(instance.id) is True and ec2.interrupt(instance.id) is False
    assert [k for k, _ in ec2.due(1030.0)] == [INTERRUPTION_WARNING]
    assert ec2.next_event_time() == 1150.0  # two minutes after the warning
    assert [k for k, _ in ec2.due(1150.0)] == [TERMINATED]
    assert instance.terminated_at == 1150.0 and ec2.live() == []
    assert instance.billed_seconds(5000.0) == 150.0
    assert ec2.cost_per_hour() == 0.0


# --- scenario parsing ------------------------------------------------------------------------------------


def _scenario(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
            "spec": {"duration": "10m", **spec}}


def test_durations() -> None:
    assert parse_duration("1h30m", "x") == 5400.0
    assert parse_duration(45, "x") == 45.0
    for bad in ("soon", -1, True, "10 minutes"):
        with pytest.raises(NodewrightValidationError):
            parse_duration(bad, "spec.duration")


def test_scenario_defaults_and_sorted_events() -> None:
    scenario = parse_scenario(_scenario(events=[{"at": "5m", "interruptSpot": {"count": 2}},
                                                {"at": 30, "scale": {"deployment": "a", "replicas": 3}}]))
    assert scenario.duration == 600.0
    assert scenario.zones == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert scenario.start == dt.datetime(2026, 7, 20, tzinfo=dt.UTC).timestamp()
    assert [(e.at, e.kind) for e in scenario.events] == [(30.0, "scale"), (300.0, "interruptSpot")]
    assert scenario.launch_latency.p50 == 25.0 and scenario.baseline.launch_latency.p50 == 120.0


@pytest.mark.parametrize(("spec", "path", "reason"), [
    ({"duration": "forever"}, "spec.duration", "expected a duration"),
    ({"events": [{"at": "20m", "scale": {"deployment": "a", "replicas": 1}}]}, "spec.events[0].at", "after the end"),
    ({"events": [{"at": "1m", "explode": {}}]}, "spec.events[0]", "exactly one of"),
    ({"events": [{"at": "1m", "scale": {"deployment": "a", "replicas": -1}}]}, "spec.events[0].scale.replicas",
     "integer >= 0"),
    ({"zones": ["eu-west-1a"]}, "spec.zones[0]", "not a zone of us-east-1"),
    ({"launchLatency": {"p50": "40s", "p90": "20s"}}, "spec.launchLatency", "p50 <= p90"),
    ({"manifests": ["does-not-exist.yaml"]}, "spec.manifests[0]", "cannot read"),
    ({"baseline": {"karpenter": {}}}, "spec.baseline", "only clusterAutoscaler"),
])
def test_invalid_scenarios_name_the_field(spec: dict[str, Any], path: str, reason: str) -> None:
    with pytest.raises(NodewrightValidationError) as err:
        parse_scenario(_scenario(**spec))
    assert err.value.path == path
    assert reason in err.value.reason


# --- pod autoscalers -------------------------------------------------------------------------------------


def _workload(replicas: int = 2) -> ReplicaWorkload:
    return ReplicaWorkload("Deployment", "api", "default", {"metadata": {}, "spec": {"containers": []}}, replicas)


def test_hpa_scales_up_at_most_double_or_plus_four_and_down_after_the_window() -> None:
    hpa = HorizontalPodAutoscaler.from_manifest({"metadata": {"name": "api"}, "spec": {
        "scaleTargetRef": {"name": "api"}, "minReplicas": 2, "maxReplicas": 50,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"averageUtilization": 50}}}]}})
    workload, load = _workload(), Load(requests_per_second=200.0, per_replica_capacity=10.0)
    seen = []
    for t in range(0, 61, 15):
        hpa.reconcile(float(t), workload, load)
        seen.append(workload.replicas)
    assert seen == [6, 12, 24, 40, 40]  # 200 rps / (10 x 0.5) = 40
    load.requests_per_second = 10.0
    for t in range(75, 361, 15):
        hpa.reconcile(float(t), workload, load)
    assert workload.replicas == 40  # the 5-minute scale-down window still remembers 40
    hpa.reconcile(375.0, workload, load)
    assert workload.replicas == 2


def test_keda_cron_trigger_in_its_time_zone_and_cooldown_to_min() -> None:
    trigger = CronTrigger("30 8 * * *", "30 10 * * *", "Asia/Seoul", 12)
    seoul_0900 = dt.datetime(2026, 7, 20, 0, 0, tzinfo=dt.UTC).timestamp()  # 09:00 KST
    assert trigger.active(seoul_0900) is True
    assert trigger.active(seoul_0900 - 3600) is False  # 08:00 KST
    assert trigger.active(seoul_0900 + 2 * 3600) is False  # 11:00 KST
    scaled = ScaledObject.from_manifest({"metadata": {"name": "web"}, "spec": {
        "scaleTargetRef": {"name": "web"}, "minReplicaCount": 2, "cooldownPeriod": 300,
        "triggers": [{"type": "cron", "metadata": {"timezone": "Asia/Seoul", "start": "30 8 * * *",
                                                   "end": "30 10 * * *", "desiredReplicas": "12"}}]}})
    workload = _workload()
    scaled.reconcile(seoul_0900, workload, Load())
    assert workload.replicas == 6
    for k in range(1, 4):
        scaled.reconcile(seoul_0900 + 30 * k, workload, Load())
    assert workload.replicas == 12
    end = seoul_0900 + 5400  # 10:30 KST
    polls = {}
    t = seoul_0900 + 120
    while t <= end + 330:
        scaled.reconcile(t, workload, Load())
        polls[t - end] = workload.replicas
        t += 30
    assert polls[-30] == 12 and polls[0] == 12  # the last active poll was at 10:29:30
    assert polls[240] == 12  # inactive, cooling down (300 s)
    assert polls[270] == 2
    with pytest.raises(NodewrightValidationError):
        ScaledObject.from_manifest({"metadata": {"name": "x"}, "spec": {"scaleTargetRef": {"name": "x"}, "triggers": [
            {"type": "cron", "metadata": {"timezone": "Mars/Base", "start": "0 * * * *", "end": "1 * * * *",
                                          "desiredReplicas": "1"}}]}})


# --- workloads -------------------------------------------------------------------------------------------


def test_replicas_scale_down_pending_pods_first_then_newest() -> None:
    cluster = InMemoryCluster(Clock(0.0))
    workload = _workload(4)
    workload.reconcile(cluster)
    assert workload.pods == ["api-0", "api-1", "api-2", "api-3"]
    cluster.bind_pod("default", "api-0", "n1")
    cluster.bind_pod("default", "api-3", "n1")
    workload.replicas = 2
    workload.reconcile(cluster)
    assert sorted(p["metadata"]["name"] for p in cluster.list(r.PODS)) == ["api-0", "api-3"]
    workload.forget("api-3")
    workload.reconcile(cluster)
    assert workload.pods == ["api-0", "api-4"]


def test_cronjob_fires_on_schedule_in_its_time_zone() -> None:
    cron = CronJobWorkload.from_manifest({"kind": "CronJob", "metadata": {
        "name": "report", "annotations": {"sim.nodewright.io/duration": "45s"}}, "spec": {
        "schedule": "0 9 * * *", "timeZone": "Asia/Seoul",
        "jobTemplate": {"spec": {"parallelism": 2, "template": {"spec": {"containers": []}}}}}})
    assert cron.duration == 45.0
    seoul_0900 = dt.datetime(2026, 7, 20, 0, 0, tzinfo=dt.UTC).timestamp()
    assert cron.next_fire(seoul_0900 - 60) == seoul_0900
    cluster = InMemoryCluster(Clock(seoul_0900))
    cron.reconcile(cluster, seoul_0900 - 60)
    assert cron.started == 0
    cron.reconcile(cluster, seoul_0900)
    assert cron.started == 1 and len(cluster.list(r.PODS)) == 2
    with pytest.raises(NodewrightValidationError):
        CronJobWorkload.from_manifest({"kind": "CronJob", "metadata": {"name": "x"}, "spec": {"schedule": "never"}})


def test_percentile_interpolates() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([0.0, 10.0], 95) == 9.5


def test_event_labels_and_plot_panel_heights(tmp_path: Any) -> None:
    from nodewright.sim.plot import _pool_height, write_plot

    scenario = parse_scenario({"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "e"},
                               "spec": {"duration": "10m", "manifests": [
                                   {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api"},
                                    "spec": {"replicas": 1, "template": {"spec": {"containers": []}}}}],
                                   "events": [{"at": "1m", "load": {"deployment": "api", "requestsPerSecond": 333}},
                                              {"at": "2m", "scale": {"deployment": "api", "replicas": 40}},
                                              {"at": "3m", "interruptSpot": {"count": 2}}]}})
    assert [e.label() for e in scenario.events] == ["load api 333 rps", "scale api -> 40", "spot interruption x2"]
    timeline = [{"t": 0.0, "nodes_by_pool": {"a": 1, "b": 0}, "pending_pods": 0, "cost_per_hour": 0.1},
                {"t": 10.0, "nodes_by_pool": {"a": 1, "b": 3}, "pending_pods": 2, "cost_per_hour": 0.5}]
    runs = [("nodewright", timeline, {})]
    assert (_pool_height(runs, "a"), _pool_height(runs, "b")) == (0.5, 1.0)
    png = write_plot({"scenario": "e", "events": [{"t": 5.0, "kind": "scale", "label": "scale api -> 40"}],
                      "timeline": timeline, "summary": {"cost_usd": 0.01}}, tmp_path / "e.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
