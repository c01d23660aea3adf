"""Pod autoscalers on the simulated clock: a HorizontalPodAutoscaler model and KEDA ScaledObjects.

Load is requests per second per workload, set by scenario ``load`` events. One replica serves
``perReplicaCapacity`` requests/s at 100% of its CPU request.

**HPA** (``autoscaling/v2``), every 15 s (kube-controller-manager's ``--horizontal-pod-autoscaler-sync-period``):

* ``Resource cpu`` with ``averageUtilization: U``: raw = ceil(rps / (perReplicaCapacity x U/100));
* any metric with ``averageValue: V`` (Pods/Object/External, e.g. requests per second per replica):
  raw = ceil(rps / V); several metrics: the largest;
* 10% tolerance around the current count; stabilisation windows (scale-up 0 s, scale-down 300 s by
  default, or ``spec.behavior.*.stabilizationWindowSeconds``); the default scale-up rate limit (at most
  +100% or +4 pods per 15 s, whichever is more); clamped to ``[minReplicas, maxReplicas]``.
  Source: Kubernetes docs, "Horizontal Pod Autoscaling" (algorithm details, default behavior).

**KEDA ScaledObject** (``keda.sh/v1alpha1``), polled every ``pollingInterval`` (30 s):

* ``cron`` triggers: active between the last ``start`` and the next ``end`` occurrence in ``timezone``
  (evaluated with croniter), asking for ``desiredReplicas``;
* ``cpu`` triggers (``metadata.value`` = utilisation %), and any other trigger with ``metadata.threshold``
  (read as requests/s per replica from the load), active when the load is above ``activationThreshold``;
* any trigger active: the HPA algorithm above over the triggers (largest wins), floor
  ``max(1, minReplicaCount)``; none active for ``cooldownPeriod`` (300 s): ``minReplicaCount``
  (``idleReplicaCount`` when set). Source: KEDA docs, "Scaling Deployments" and the cron scaler.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from nodewright.errors import NodewrightValidationError
from nodewright.scheduling.pods import _replicas as count_of
from nodewright.sim.workloads import ReplicaWorkload, replicas_for

HPA_SYNC_SECONDS = 15.0
KEDA_POLLING_SECONDS = 30.0
KEDA_COOLDOWN_SECONDS = 300.0
DEFAULT_SCALE_DOWN_WINDOW = 300.0
TOLERANCE = 0.1


@dataclass
class Load:
    """Offered load of one workload: requests/s and requests/s one replica handles at 100% CPU."""

    requests_per_second: float = 0.0
    per_replica_capacity: float = 10.0


@dataclass
class Stabilizer:
    """HPA recommendation smoothing: stabilisation windows plus the default scale-up rate limit."""

    up_window: float = 0.0
    down_window: float = DEFAULT_SCALE_DOWN_WINDOW
    history: deque[tuple[float, int]] = field(default_factory=deque)

    def apply(self, now: float, raw: int, current: int, low: int, high: int) -> int:
        """The replica count to set given the raw recommendation ``raw`` and ``current`` replicas."""
        self.history.append((now, raw))
        horizon = max(self.up_window, self.down_window)
        while self.history and self.history[0][0] < now - horizon:
            self.history.popleft()
        up = min(v for t, v in self.history if t >= now - self.up_window)
        down = max(v for t, v in self.history if t >= now - self.down_window)
        desired = current
        if current < up:
            desired = min(up, max(current * 2, current + 4))
        elif current > down:
            desired = down
        return max(low, min(high, desired))


def _tolerant(raw: int, current: int) -> int:
    if current > 0 and abs(raw / current - 1.0) <= TOLERANCE:
        return current
    return raw


def _behavior(doc: Mapping[str, Any] | None, path: str) -> Stabilizer:
    behavior = doc or {}
    up = count_of((behavior.get("scaleUp") or {}).get("stabilizationWindowSeconds"),
                  f"{path}.scaleUp.stabilizationWindowSeconds", 0)
    down = count_of((behavior.get("scaleDown") or {}).get("stabilizationWindowSeconds"),
                    f"{path}.scaleDown.stabilizationWindowSeconds", int(DEFAULT_SCALE_DOWN_WINDOW))
    return Stabilizer(float(up), float(down))


def _metric_target(metric: Mapping[str, Any], load: Load, path: str) -> int:
    """Raw replicas one HPA metric asks for under ``load``."""
    kind = metric.get("type")
    body = metric.get({"Resource": "resource", "Pods": "pods", "Object": "object",
                       "External": "external", "ContainerResource": "containerResource"}.get(str(kind), "")) or {}
    target = body.get("target") or {}
    if "averageUtilization" in target:
        utilization = float(target["averageUtilization"]) / 100.0
        return replicas_for(load.requests_per_second, load.per_replica_capacity * utilization)
    for key in ("averageValue", "value"):
        if key in target:
            return replicas_for(load.requests_per_second, _quantity(target[key], f"{path}.target.{key}"))
    raise NodewrightValidationError(path, "metric target needs averageUtilization, averageValue or value")


def _quantity(value: Any, path: str) -> float:
    text = str(value)
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError:
        raise NodewrightValidationError(path, f"expected a number, got {value!r}") from None


@dataclass
class HorizontalPodAutoscaler:
    """An ``autoscaling/v2`` HPA on a Deployment/StatefulSet (see module docstring)."""

    name: str
    target: str
    min_replicas: int
    max_replicas: int
    metrics: list[dict[str, Any]]
    stabilizer: Stabilizer
    period: float = HPA_SYNC_SECONDS
    next_sync: float = 0.0

    @classmethod
    def from_manifest(cls, doc: Mapping[str, Any], *, check_bounds: bool = True) -> HorizontalPodAutoscaler:
        """Build from a HorizontalPodAutoscaler manifest.

        Raises:
            NodewrightValidationError: no target, bounds (or stabilization windows) that are not counts, or (with
                ``check_bounds``) bounds the API server refuses (:func:`refused_bounds`).
        """
        meta = doc.get("metadata") or {}
        spec = doc.get("spec") or {}
        name = str(meta.get("name") or "hpa")
        target = str((spec.get("scaleTargetRef") or {}).get("name") or "")
        if not target:
            raise NodewrightValidationError(f"{name}.spec.scaleTargetRef.name", "required field is missing")
        metrics = list(spec.get("metrics") or [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
        model = cls(name, target, count_of(spec.get("minReplicas"), f"{name}.spec.minReplicas", 1),
                    count_of(spec.get("maxReplicas"), f"{name}.spec.maxReplicas", 10), metrics,
                    _behavior(spec.get("behavior"), f"{name}.spec.behavior"))
        refused = refused_bounds(doc, model) if check_bounds else None
        if refused is not None:
            raise refused
        return model

    def reconcile(self, now: float, workload: ReplicaWorkload, load: Load) -> bool:
        """Resize ``workload`` when a sync is due; True when it ran."""
        if now < self.next_sync:
            return False
        self.next_sync = now + self.period
        raw = max(_metric_target(m, load, f"{self.name}.spec.metrics[{i}]") for i, m in enumerate(self.metrics))
        raw = _tolerant(raw, workload.replicas)
        workload.replicas = self.stabilizer.apply(now, raw, workload.replicas, self.min_replicas, self.max_replicas)
        return True


@dataclass
class CronTrigger:
    """KEDA's cron scaler: ``desired`` replicas between ``start`` and ``end`` (cron expressions in ``timezone``)."""

    start: str
    end: str
    timezone: str
    desired: int

    def active(self, now: float) -> bool:
        """Whether ``now`` lies in a window: the latest start is more recent than the latest end."""
        local = dt.datetime.fromtimestamp(now + 1e-3, tz=ZoneInfo(self.timezone))
        last_start = croniter(self.start, local).get_prev(float)
        last_end = croniter(self.end, local).get_prev(float)
        return bool(last_start > last_end)


@dataclass
class MetricTrigger:
    """A KEDA metric trigger read from the load: ``per_replica`` requests/s per replica (cpu: utilisation)."""

    kind: str
    per_replica: float | None
    utilization: float | None
    activation: float = 0.0

    def desired(self, load: Load) -> int:
        """Raw replicas for ``load``."""
        if self.utilization is not None:
            return replicas_for(load.requests_per_second, load.per_replica_capacity * self.utilization)
        return replicas_for(load.requests_per_second, self.per_replica or load.per_replica_capacity)

    def active(self, load: Load) -> bool:
        """Load above the activation threshold."""
        return load.requests_per_second > self.activation


def _trigger(doc: Mapping[str, Any], path: str) -> CronTrigger | MetricTrigger:
    kind = str(doc.get("type") or "")
    meta = doc.get("metadata") or {}
    if kind == "cron":
        for key in ("start", "end", "desiredReplicas"):
            if key not in meta:
                raise NodewrightValidationError(f"{path}.metadata.{key}", "required field is missing")
        timezone = str(meta.get("timezone") or "UTC")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise NodewrightValidationError(f"{path}.metadata.timezone", f"unknown time zone {timezone!r}") from None
        for key in ("start", "end"):
            if not croniter.is_valid(str(meta[key])):
                raise NodewrightValidationError(f"{path}.metadata.{key}", f"invalid cron expression {meta[key]!r}")
        desired = str(meta["desiredReplicas"])  # KEDA trigger metadata is text: "10"
        if not desired.isdigit():
            raise NodewrightValidationError(f"{path}.metadata.desiredReplicas",
                                            f"must be a non-negative integer, got {meta['desiredReplicas']!r}")
        return CronTrigger(str(meta["start"]), str(meta["end"]), timezone, int(desired))
    if kind in ("cpu", "memory"):
        value = _quantity(meta.get("value", 80), f"{path}.metadata.value")
        return MetricTrigger(kind, None, value / 100.0)
    threshold = meta.get("threshold", meta.get("targetValue"))
    activation = _quantity(meta.get("activationThreshold", 0), f"{path}.metadata.activationThreshold")
    per_replica = _quantity(threshold, f"{path}.metadata.threshold") if threshold is not None else None
    return MetricTrigger(kind, per_replica, None, activation)


@dataclass
class ScaledObject:
    """A KEDA ScaledObject (see module docstring)."""

    name: str
    target: str
    min_replicas: int
    max_replicas: int
    idle_replicas: int | None
    triggers: list[CronTrigger | MetricTrigger]
    stabilizer: Stabilizer
    polling: float = KEDA_POLLING_SECONDS
    cooldown: float = KEDA_COOLDOWN_SECONDS
    next_poll: float = 0.0
    last_active: float | None = None

    @classmethod
    def from_manifest(cls, doc: Mapping[str, Any], *, check_bounds: bool = True) -> ScaledObject:
        """Build from a ``keda.sh/v1alpha1`` ScaledObject.

        Raises:
            NodewrightValidationError: no target or triggers, an invalid trigger, a count (replica counts,
                ``pollingInterval``, ``cooldownPeriod``) that is not a non-negative integer, or (with
                ``check_bounds``) bounds KEDA refuses (:func:`refused_bounds`).
        """
        meta = doc.get("metadata") or {}
        spec = doc.get("spec") or {}
        name = str(meta.get("name") or "scaledobject")
        target = str((spec.get("scaleTargetRef") or {}).get("name") or "")
        if not target:
            raise NodewrightValidationError(f"{name}.spec.scaleTargetRef.name", "required field is missing")
        triggers = spec.get("triggers") or []
        if not triggers:
            raise NodewrightValidationError(f"{name}.spec.triggers", "a ScaledObject needs at least one trigger")
        behavior = (((spec.get("advanced") or {}).get("horizontalPodAutoscalerConfig") or {}).get("behavior"))
        idle = spec.get("idleReplicaCount")

        def count(key: str, default: int) -> int:
            return count_of(spec.get(key), f"{name}.spec.{key}", default)

        model = cls(name, target, count("minReplicaCount", 0), count("maxReplicaCount", 100),
                    count("idleReplicaCount", 0) if idle is not None else None,
                    [_trigger(t, f"{name}.spec.triggers[{i}]") for i, t in enumerate(triggers)],
                    _behavior(behavior, f"{name}.spec.advanced.horizontalPodAutoscalerConfig.behavior"),
                    float(count("pollingInterval", int(KEDA_POLLING_SECONDS))),
                    float(count("cooldownPeriod", int(KEDA_COOLDOWN_SECONDS))))
        refused = refused_bounds(doc, model) if check_bounds else None
        if refused is not None:
            raise refused
        return model

    def reconcile(self, now: float, workload: ReplicaWorkload, load: Load) -> bool:
        """Poll the triggers when due and resize ``workload``; True when it polled."""
        if now < self.next_poll:
            return False
        self.next_poll = now + self.polling
        wanted: list[int] = []
        for trigger in self.triggers:
            if isinstance(trigger, CronTrigger):
                if trigger.active(now):
                    wanted.append(trigger.desired)
            elif trigger.active(load):
                wanted.append(trigger.desired(load))
        if wanted:
            self.last_active = now
            floor = max(1, self.min_replicas)
            raw = _tolerant(max(wanted), workload.replicas)
            workload.replicas = self.stabilizer.apply(now, raw, max(workload.replicas, 0), floor, self.max_replicas)
        elif self.last_active is None or now - self.last_active >= self.cooldown:
            idle = self.idle_replicas if self.idle_replicas is not None else self.min_replicas
            workload.replicas = idle
            self.stabilizer.history.clear()
        return True


def refused_bounds(doc: Mapping[str, Any], model: HorizontalPodAutoscaler | ScaledObject
                   ) -> NodewrightValidationError | None:
    """The replica bounds of ``doc`` (read as ``model``) that its owner refuses, or None; path
    ``<name>.spec.<field>`` as ``from_manifest``'s errors. An HPA whose ``maxReplicas`` is below ``minReplicas`` is
    refused by the API server (Kubernetes ``pkg/apis/autoscaling/validation``: "must be greater than or equal to
    `minReplicas`"), a ScaledObject whose ``minReplicaCount`` exceeds ``maxReplicaCount`` by KEDA
    (``CheckReplicaCountBoundsAreValid``); either never scales its target as written."""
    if model.min_replicas <= model.max_replicas:
        return None
    if isinstance(model, HorizontalPodAutoscaler):
        if (doc.get("spec") or {}).get("maxReplicas") is None:
            return None  # missing altogether: read as 10 here (the API server requires it)
        return NodewrightValidationError(
            f"{model.name}.spec.maxReplicas", f"must be greater than or equal to minReplicas ({model.min_replicas}), "
            f"got {model.max_replicas}: the API server refuses this HorizontalPodAutoscaler")
    return NodewrightValidationError(
        f"{model.name}.spec.minReplicaCount", f"must not exceed maxReplicaCount ({model.max_replicas}), got "
        f"{model.min_replicas}: KEDA refuses this ScaledObject")


def next_due(scalers: list[HorizontalPodAutoscaler | ScaledObject]) -> float:
    """Earliest epoch second any scaler wants to run again (inf when none)."""
    times = [s.next_sync if isinstance(s, HorizontalPodAutoscaler) else s.next_poll for s in scalers]
    return min(times) if times else math.inf


#: Pod autoscaler kinds ``simulate -f`` reads to size their targets (:func:`size_autoscaled_workloads`).
AUTOSCALER_KINDS = frozenset({"HorizontalPodAutoscaler", "ScaledObject"})
#: Workload kinds a pod autoscaler may target (``spec.scaleTargetRef.kind``; KEDA's default is Deployment).
SCALABLE_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})


@dataclass(frozen=True)
class Sizing:
    """What one pod autoscaler did to its target in ``simulate -f`` (:func:`size_autoscaled_workloads`).

    Attributes:
        kind, name, namespace: the autoscaler (``HorizontalPodAutoscaler`` or ``ScaledObject``).
        target_kind, target: its ``scaleTargetRef``.
        declared: the target's ``spec.replicas`` as given (1 when omitted, the API server's default); None when
            the target is not in the input.
        min_replicas, max_replicas: the autoscaler's bounds (HPA ``minReplicas`` default 1, ``maxReplicas``;
            KEDA ``minReplicaCount`` default 0, ``maxReplicaCount`` default 100).
        replicas: what the target is sized at (None when the target is not in the input).
    """

    kind: str
    name: str
    namespace: str
    target_kind: str
    target: str
    declared: int | None
    min_replicas: int
    max_replicas: int
    replicas: int | None

    def line(self, peak: bool) -> str:
        """One sentence for stderr, e.g. ``HorizontalPodAutoscaler 'web' sizes Deployment 'web' at 3 replicas
        (max(replicas 1, minReplicas 3))``."""
        what = f"{self.kind} {self.name!r}"
        target = f"{self.target_kind} {self.target!r}"
        if self.replicas is None:
            return f"{what}: its target {target} is not in the input (namespace {self.namespace}); nothing to size"
        low = "minReplicas" if self.kind == "HorizontalPodAutoscaler" else "minReplicaCount"
        high = "maxReplicas" if self.kind == "HorizontalPodAutoscaler" else "maxReplicaCount"
        why = (f"{high} {self.max_replicas}, --replicas max" if peak
               else f"max(replicas {self.declared}, {low} {self.min_replicas})")
        return f"{what} sizes {target} at {self.replicas} replicas ({why})"


def size_autoscaled_workloads(docs: list[dict[str, Any]], peak: bool = False
                              ) -> tuple[list[dict[str, Any]], list[Sizing], list[NodewrightValidationError],
                                         list[NodewrightValidationError]]:
    """``docs`` with every HorizontalPodAutoscaler's and KEDA ScaledObject's target sized as the autoscaler keeps
    it: ``max(spec.replicas, minReplicas)`` (an HPA never lets its target run below ``minReplicas``; KEDA's
    ``minReplicaCount`` likewise), or ``maxReplicas`` with ``peak`` (``simulate --replicas max``: what the peak
    costs, and whether the NodePools' limits allow it). Targets are matched by kind, name and namespace; the
    autoscalers are parsed by the same models scenario replay runs (:class:`HorizontalPodAutoscaler`,
    :class:`ScaledObject`). The documents are not changed; a sized target is a copy.

    Returns:
        (the documents, in the same order; one :class:`Sizing` per autoscaler read, in input order; one problem
        per autoscaler that cannot be read (path ``documents[i].<field>``, e.g. no ``scaleTargetRef.name`` or a
        count that is not an integer): its target keeps the replicas given. Not raised: an autoscaler is not
        ours to validate, and a chart's autoscaler never makes a decision fail; ``simulate`` warns.)
        Last, one problem per autoscaler whose bounds its owner refuses (:func:`refused_bounds`, path
        ``documents[i].spec.<field>``): not a warning, since ``kubectl apply`` of the input would fail; ``simulate``
        reports it as an error, with every other problem of the input (its target keeps the replicas given).
    """
    out = list(docs)
    sizings: list[Sizing] = []
    errors: list[NodewrightValidationError] = []
    refused: list[NodewrightValidationError] = []
    for index, doc in enumerate(docs):
        kind = str(doc.get("kind"))
        if kind not in AUTOSCALER_KINDS:
            continue
        meta = doc.get("metadata") or {}
        name = str(meta.get("name") or "")
        try:
            model: HorizontalPodAutoscaler | ScaledObject = (
                HorizontalPodAutoscaler.from_manifest(doc, check_bounds=False) if kind == "HorizontalPodAutoscaler"
                else ScaledObject.from_manifest(doc, check_bounds=False))
        except NodewrightValidationError as err:
            path = err.path.split(".", 1)[1] if "." in err.path else ""
            errors.append(NodewrightValidationError(
                f"documents[{index}]" + (f".{path}" if path else ""),
                f"{err.reason}: cannot size its target, whose replicas are used as given (in {kind} {name!r})"))
            continue
        except (TypeError, ValueError) as err:
            errors.append(NodewrightValidationError(
                f"documents[{index}].spec", f"malformed {kind} ({err}): cannot size its target, whose replicas are "
                f"used as given (in {kind} {name!r})"))
            continue
        bounds = refused_bounds(doc, model)
        if bounds is not None:
            field = bounds.path.split(".", 1)[1]
            refused.append(NodewrightValidationError(f"documents[{index}].{field}",
                                                     f"{bounds.reason} (in {kind} {name!r})"))
            continue
        namespace = str(meta.get("namespace") or "default")
        target_kind = str(((doc.get("spec") or {}).get("scaleTargetRef") or {}).get("kind") or "Deployment")
        found = next((i for i, d in enumerate(out) if d.get("kind") == target_kind and d.get("kind") in SCALABLE_KINDS
                      and str((d.get("metadata") or {}).get("name")) == model.target
                      and str((d.get("metadata") or {}).get("namespace") or "default") == namespace), None)
        if found is None:
            sizings.append(Sizing(kind, name, namespace, target_kind, model.target, None, model.min_replicas,
                                  model.max_replicas, None))
            continue
        workload = out[found]
        spec = workload.get("spec") or {}
        declared = spec.get("replicas", 1)
        declared = declared if isinstance(declared, int) else 1
        replicas = model.max_replicas if peak else max(declared, model.min_replicas)
        out[found] = {**workload, "spec": {**spec, "replicas": replicas}}
        sizings.append(Sizing(kind, name, namespace, target_kind, model.target, declared, model.min_replicas,
                              model.max_replicas, replicas))
    return out, sizings, errors, refused
