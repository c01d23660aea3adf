"""The discrete-event loop: one scenario, one node autoscaler, a simulated clock that never sleeps.

Each iteration at simulated time ``now``: the world ticks (scenario events, EC2 transitions, pod
autoscalers, workload controllers, pod starts, kube-scheduler), the node autoscaler steps, and the timeline
is sampled when a sample is due. Then the clock jumps to the earliest moment anything wants to act: the
world's next event, the autoscaler's next wake-up (every second while nodewright's controllers are busy,
every 10 s otherwise; Cluster Autoscaler's next scan) or the next sample. A simulated day takes seconds.

Runs are deterministic for a seed: names, latencies and random choices come from seeded generators and
nothing reads the wall clock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodewright.cloud.catalog import price_table
from nodewright.pricing import PricingPolicy, Run, Usage
from nodewright.pricing.report import effective_cost_usd
from nodewright.sim.baseline import ClusterAutoscalerDriver
from nodewright.sim.drivers import Driver, NodewrightDriver
from nodewright.sim.report import Sample
from nodewright.sim.scenario import Scenario, capacity_buffers, has_capacity_buffers
from nodewright.sim.world import World

NODEWRIGHT = "nodewright"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
AUTOSCALERS = (NODEWRIGHT, CLUSTER_AUTOSCALER)

#: progress(autoscaler name, simulated seconds done, simulated seconds total)
Progress = Callable[[str, float, float], None]


@dataclass
class RunResult:
    """One autoscaler's run of a scenario.

    Attributes:
        autoscaler: ``nodewright`` or ``cluster-autoscaler``.
        timeline: samples every ``sampleInterval`` seconds.
        summary: see :meth:`nodewright.sim.report.Recorder.summary`.
        steps: controller passes (nodewright) or scans (Cluster Autoscaler) run.
        wall_seconds: real seconds the run took.
        launches: instances launched over the run by ``"<instance type> <capacity type>"`` (sorted keys): what
            the autoscaler chose, for comparisons (not part of :meth:`to_dict`).
    """

    autoscaler: str
    timeline: list[Sample]
    summary: dict[str, Any]
    steps: int
    wall_seconds: float
    launches: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape: ``{"autoscaler", "summary", "timeline"}``."""
        return {"autoscaler": self.autoscaler, "summary": self.summary,
                "timeline": [s.to_dict() for s in self.timeline]}


def _driver(name: str, scenario: Scenario, seed: int,
            pricing: PricingPolicy | None = None, nominate_pods: bool | None = None,
            capacity_buffer: bool | None = None, nomination_hold: bool | None = None) -> tuple[World, Driver]:
    if name == NODEWRIGHT:
        world = World(scenario, seed, scenario.launch_latency)
        return world, NodewrightDriver(world, pricing=pricing, nominate_pods=nominate_pods,
                                       capacity_buffer=capacity_buffer, nomination_hold=nomination_hold)
    if name == CLUSTER_AUTOSCALER:
        world = World(scenario, seed, scenario.baseline.launch_latency)
        return world, ClusterAutoscalerDriver(world, scenario.baseline)
    raise ValueError(f"unknown autoscaler {name!r}; expected one of {', '.join(AUTOSCALERS)}")


def run(scenario: Scenario, autoscaler: str = NODEWRIGHT, seed: int | None = None,
        progress: Progress | None = None, pricing: PricingPolicy | None = None,
        billing: PricingPolicy | None = None, nominate_pods: bool | None = None,
        capacity_buffer: bool | None = None, nomination_hold: bool | None = None) -> RunResult:
    """Simulate ``scenario`` with ``autoscaler`` (see module docstring).

    Args:
        scenario: the parsed scenario.
        autoscaler: ``"nodewright"`` or ``"cluster-autoscaler"``.
        seed: overrides ``scenario.seed``.
        progress: called now and then with (autoscaler, simulated seconds done, total).
        pricing: a PricingPolicy: nodewright's provisioner decides on effective marginal prices (the baseline
            cannot), and the summary adds ``effective_cost_usd`` (:mod:`nodewright.pricing.report`).
        billing: the PricingPolicy the summary's ``effective_cost_usd`` is billed under when it is not
            ``pricing`` (a run that decides on list prices, billed as the account pays: ``--compare-pricing``).
        nominate_pods: nodewright publishes its plan as ``status.nominatedNodeName`` (None: ``NOMINATE_PODS``,
            default true); the summary says how much of the plan kube-scheduler kept (:mod:`nodewright.sim.plans`).
        capacity_buffer: the ``CapacityBuffer`` gate (None: on when the scenario declares a CapacityBuffer). The
            summary then adds ``pod_pending_seconds`` (seconds pods waited, summed over pods).
        nomination_hold: the nomination controller's readiness hold (None: ``NOMINATION_HOLD``, default true).

    Raises:
        NodewrightValidationError: the scenario's workloads, autoscalers or node groups are inconsistent.
        ValueError: an unknown ``autoscaler``.
    """
    started = time.perf_counter()
    world, driver = _driver(autoscaler, scenario, scenario.seed if seed is None else seed, pricing, nominate_pods,
                            capacity_buffer, nomination_hold)
    world.validate_events()
    start, end = scenario.start, scenario.start + scenario.duration
    interval = scenario.sample_interval
    next_sample = start
    now = start
    steps = 0
    last_report = -math.inf
    while True:
        world.clock.now = now
        world.tick(now)
        if driver.should_step(now):
            driver.step(now)
            steps += 1
        while next_sample <= now:
            world.recorder.sample(now)
            next_sample += interval
        if progress is not None and now - last_report >= 60:
            progress(autoscaler, now - start, scenario.duration)
            last_report = now
        if now >= end:
            break
        wake = min(world.next_wake(now), driver.next_wake(now), next_sample, end)
        now = wake if wake > now else now + 1.0
    if progress is not None:
        progress(autoscaler, scenario.duration, scenario.duration)
    summary = world.recorder.summary(end)
    if isinstance(driver, NodewrightDriver):
        summary.update(driver.plans.summary(end))
        if has_capacity_buffers(scenario):
            summary["pod_pending_seconds"] = round(world.recorder.pending_seconds(end), 3)
    billed = pricing if billing is None else billing
    if billed is not None:
        runs = [Run(Usage(i.instance_type.name, i.offering.zone, i.offering.capacity_type), i.launched_at,
                    i.terminated_at) for i in world.ec2.instances.values()]
        summary["effective_cost_usd"] = effective_cost_usd(billed, price_table(scenario.region), runs, start, end)
    launches: dict[str, int] = {}
    for i in world.ec2.instances.values():
        key = f"{i.instance_type.name} {i.offering.capacity_type}"
        launches[key] = launches.get(key, 0) + 1
    return RunResult(autoscaler, world.recorder.timeline, summary, steps, time.perf_counter() - started,
                     dict(sorted(launches.items())))


def pool_targets(scenario: Scenario) -> dict[str, float]:
    """Each NodePool of ``scenario`` -> its ``nodewright.io/target-utilization`` as a fraction (1.0 = pack fully;
    a malformed value counts as 1.0, as the controller reads it), by name."""
    from nodewright.api.annotations import target_utilization

    targets = {}
    for doc in scenario.manifests:
        if doc.get("kind") == "NodePool":
            meta = doc.get("metadata") or {}
            targets[str(meta.get("name"))] = target_utilization(meta.get("annotations")) or 1.0
    return dict(sorted(targets.items()))


def buffer_report(scenario: Scenario, with_buffers: dict[str, Any], without: dict[str, Any]) -> dict[str, Any]:
    """The ``capacity_buffer`` block of a replay's summary: the same scenario and seed with the CapacityBuffer gate
    on and off.

    Returns:
        ``{"buffers": ["ns/name"], "pod_pending_seconds": {"with", "without", "saved"}, "pod_wait_p50_s" and
        "pod_wait_p95_s": {"with", "without"}, "cost_per_hour_usd": {"with", "without", "buffer"}}``: pending
        seconds summed over pods; $/h = the run's ``cost_usd`` over its duration in hours, ``buffer`` = the
        difference (what the headroom costs).
    """
    hours = scenario.duration / 3600.0

    def rate(summary: dict[str, Any]) -> float:
        return round(float(summary.get("cost_usd") or 0.0) / hours, 4) if hours else 0.0

    pending_with = float(with_buffers.get("pod_pending_seconds") or 0.0)
    pending_without = float(without.get("pod_pending_seconds") or 0.0)
    return {
        "buffers": capacity_buffers(scenario),
        "pod_pending_seconds": {"with": round(pending_with, 3), "without": round(pending_without, 3),
                                "saved": round(pending_without - pending_with, 3)},
        "pod_wait_p50_s": {"with": with_buffers.get("pod_schedule_latency_p50_s"),
                           "without": without.get("pod_schedule_latency_p50_s")},
        "pod_wait_p95_s": {"with": with_buffers.get("pod_schedule_latency_p95_s"),
                           "without": without.get("pod_schedule_latency_p95_s")},
        "cost_per_hour_usd": {"with": rate(with_buffers), "without": rate(without),
                              "buffer": round(rate(with_buffers) - rate(without), 4)},
    }


def run_scenario(scenario: Scenario, *, baseline: str | None = None, seed: int | None = None,
                 progress: Progress | None = None, pricing: PricingPolicy | None = None) -> dict[str, Any]:
    """nodewright's run of ``scenario``, plus the baseline's when asked, as the JSON document of the CLI.

    Returns:
        ``{"scenario", "seed", "duration_s", "target_utilization": {nodepool: fraction} (:func:`pool_targets`),
        "events": [{"t", "kind", "label"}], "autoscaler": "nodewright",
        "summary", "timeline",
        "baseline": {"autoscaler", "summary", "timeline"} (only with a baseline)}``. The document is a pure
        function of (scenario, seed): no wall-clock timing in it, so the same seed gives byte-identical JSON
        (the CLI prints the real time taken on stderr).

    Raises:
        NodewrightValidationError: see :func:`run`.
        ValueError: ``baseline`` is not ``"cluster-autoscaler"``.
    """
    if baseline is not None and baseline != CLUSTER_AUTOSCALER:
        raise ValueError(f"unknown baseline {baseline!r}; only {CLUSTER_AUTOSCALER}")
    used_seed = scenario.seed if seed is None else seed
    main = run(scenario, NODEWRIGHT, used_seed, progress, pricing)
    if has_capacity_buffers(scenario):  # what the headroom buys and costs: the same run without it
        without = run(scenario, NODEWRIGHT, used_seed, progress, pricing, capacity_buffer=False)
        main.summary["capacity_buffer"] = buffer_report(scenario, main.summary, without.summary)
    events = [{"t": e.at, "kind": e.kind, "label": e.label()} for e in scenario.events]
    doc: dict[str, Any] = {"scenario": scenario.name, "seed": used_seed, "duration_s": scenario.duration,
                           "target_utilization": pool_targets(scenario), "events": events, **main.to_dict()}
    if baseline is not None:
        doc["baseline"] = run(scenario, baseline, used_seed, progress, pricing).to_dict()
    return doc
