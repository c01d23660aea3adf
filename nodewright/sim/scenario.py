"""Scenario files: ``apiVersion: nodewright.io/v1alpha1, kind: Scenario``.

A scenario names a duration, the manifests to apply at t=0 (inline documents or paths relative to the
scenario file; Karpenter v1alpha5/v1beta1 kinds are converted to v1), the launch latency of new nodes and a
list of timed events. Example::

    apiVersion: nodewright.io/v1alpha1
    kind: Scenario
    metadata: {name: load-test}
    spec:
      duration: 45m                     # simulated time
      start: "2026-07-20T00:00:00Z"     # simulated wall clock at t=0 (cron triggers and budgets use it)
      region: us-east-1                 # bundled catalog region
      zones: [us-east-1a, us-east-1b, us-east-1c]
      seed: 1
      sampleInterval: 10s               # timeline resolution
      podStartDelay: 5s                 # bind -> Running
      launchLatency: {p50: 20s, p90: 40s, min: 15s}
      manifests: [ {...inline document...}, "relative/path.yaml" ]
      events:
        - {at: 2m, load: {deployment: qna-api, requestsPerSecond: 333, perReplicaCapacity: 10}}
        - {at: 5m, scale: {deployment: inflate, replicas: 40}}
        - {at: 20m, interruptSpot: {count: 1, nodepool: low-spot}}
        - {at: 22m, insufficientCapacity: {instanceType: m6g.2xlarge, zone: us-east-1a, capacityType: spot}}
        - {at: 30m, nodeUnhealthy: {count: 1, nodepool: service, condition: Ready, status: Unknown}}
      baseline:
        clusterAutoscaler:
          scanInterval: 10s
          launchLatency: {p50: 2m, p90: 2m30s}
          scaleDownUtilizationThreshold: 0.5
          scaleDownUnneededTime: 10m
          scaleDownDelayAfterAdd: 10m
          nodeGroups:
            - {name: service, nodePool: service, instanceType: m7g.2xlarge, minSize: 0, maxSize: 50}

Headroom: put a ``CapacityBuffer`` (``autoscaling.x-k8s.io/v1beta1``; with a ``PodTemplate`` or a ``scalableRef`` to
one of the scenario's Deployments) among the manifests; the replay turns the ``CapacityBuffer`` gate on and its
summary's ``capacity_buffer`` block compares a run without it (pod wait bought, $/h paid).

Durations are seconds (numbers) or Go-style strings of ``h``/``m``/``s`` parts (``"1h30m"``, ``"20s"``);
``duration`` is at most :data:`MAX_DURATION` (168h). Errors from :func:`load_scenario` name the file
(``scenario.yaml#spec.duration: ...``). Unknown fields of the manifests (a workload's ``replica``, an older Karpenter
kind's field conversion drops) are warnings, :attr:`Scenario.findings` (``scenario.yaml#spec.manifests[2].spec.replica:
unknown field: simulate ignores it ...; did you mean 'replicas'?``), as ``simulate -f`` gives them.
Every problem raises :class:`~nodewright.errors.NodewrightValidationError` with the field path.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nodewright.api import convert_documents
from nodewright.api.durations import to_seconds
from nodewright.api.manifests import ManifestFiles, load_manifests, parse_documents, read_text
from nodewright.cloud.catalog import region_zones
from nodewright.cloud.simulated.latency import (
    ASG_LAUNCH_LATENCY,
    NODEWRIGHT_LAUNCH_LATENCY,
    LatencyDistribution,
)
from nodewright.errors import NodewrightValidationError
from nodewright.review import Finding, unknown_field_findings

API_VERSION = "nodewright.io/v1alpha1"
#: Longest ``spec.duration``: 7 simulated days (168h). A busy day takes ~25 s of CPU; a week, a few minutes.
MAX_DURATION = 7 * 24 * 3600
#: Monday 2026-07-20 00:00 UTC: outside business-hours disruption budgets, a fixed day for cron triggers.
DEFAULT_START = dt.datetime(2026, 7, 20, tzinfo=dt.UTC).timestamp()
EVENT_KINDS = ("scale", "load", "interruptSpot", "insufficientCapacity", "nodeUnhealthy")


@dataclass(frozen=True)
class Event:
    """A timed scenario event.

    Attributes:
        at: seconds after the start.
        kind: one of :data:`EVENT_KINDS`.
        params: the event's mapping (e.g. ``{"deployment": "qna-api", "replicas": 4}``).
        path: ``spec.events[i]`` for error messages.
    """

    at: float
    kind: str
    params: dict[str, Any]
    path: str

    def label(self) -> str:
        """A short label for plots, e.g. ``load qna-api 333 rps``, ``scale inflate -> 40``, ``spot x1``."""
        p = self.params
        if self.kind == "scale":
            return f"scale {p.get('deployment') or p.get('statefulset')} -> {p.get('replicas')}"
        if self.kind == "load":
            return f"load {p.get('deployment') or p.get('statefulset')} {float(p['requestsPerSecond']):g} rps"
        if self.kind == "interruptSpot":
            return f"spot interruption x{p.get('count', 1)}"
        if self.kind == "nodeUnhealthy":
            return f"unhealthy x{p.get('count', 1)} {p.get('condition', 'Ready')}={p.get('status', 'False')}"
        return f"ICE {p.get('instanceType')} {p.get('zone')}"


@dataclass(frozen=True)
class NodeGroup:
    """A Cluster Autoscaler node group: one Auto Scaling Group of a single instance type.

    Attributes:
        name: group name.
        instance_type: the ASG's instance type.
        capacity_type: ``on-demand`` or ``spot``.
        zones: zones the ASG spans (empty: every simulated zone).
        min_size, max_size: ASG bounds (nodes).
        labels, taints: what its nodes register with (copied from the NodePool it stands for).
        nodepool: the NodePool it mirrors ('' when given explicitly without one).
    """

    name: str
    instance_type: str
    capacity_type: str = "on-demand"
    zones: tuple[str, ...] = ()
    min_size: int = 0
    max_size: int = 100
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    nodepool: str = ""


@dataclass(frozen=True)
class ClusterAutoscalerConfig:
    """Cluster Autoscaler settings (defaults are CA's own: 10 s scan, 0.5 threshold, 10 min unneeded/after-add).

    Attributes:
        scan_interval: seconds between scans.
        launch_latency: ASG launch latency (default ~2 min end to end, first field report).
        utilization_threshold: a node is unneeded below this requested/allocatable ratio (cpu and memory).
        unneeded_time: seconds a node must stay unneeded before removal.
        delay_after_add: seconds after a scale-up before any scale-down.
        node_groups: explicit groups, or empty to derive one per NodePool.
    """

    scan_interval: float = 10.0
    launch_latency: LatencyDistribution = ASG_LAUNCH_LATENCY
    utilization_threshold: float = 0.5
    unneeded_time: float = 600.0
    delay_after_add: float = 600.0
    node_groups: tuple[NodeGroup, ...] = ()


@dataclass
class Scenario:
    """A parsed scenario (see module docstring); durations in seconds, ``start`` in epoch seconds."""

    name: str
    duration: float
    manifests: list[dict[str, Any]]
    events: list[Event] = field(default_factory=list)
    start: float = DEFAULT_START
    region: str = "us-east-1"
    zones: list[str] = field(default_factory=list)
    seed: int = 1
    sample_interval: float = 10.0
    pod_start_delay: float = 5.0
    launch_latency: LatencyDistribution = NODEWRIGHT_LAUNCH_LATENCY
    baseline: ClusterAutoscalerConfig = field(default_factory=ClusterAutoscalerConfig)
    #: Warnings about the manifests (unknown fields, :func:`nodewright.review.unknown_field_findings`), each
    #: naming ``spec.manifests[i]`` (and, from :func:`load_scenario`, the scenario file).
    findings: tuple[Finding, ...] = ()


# --- scalar parsers -------------------------------------------------------------------------------------


def parse_duration(value: Any, path: str) -> float:
    """Seconds from a number or a duration string (``"45m"``, ``"1h30m"``, ``"20s"``).

    Raises:
        NodewrightValidationError: negative, not a number nor a duration string.
    """
    if isinstance(value, bool):
        raise NodewrightValidationError(path, f"expected a duration like '45m', got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise NodewrightValidationError(path, f"must not be negative, got {value!r}")
        return float(value)
    if isinstance(value, str):
        try:
            seconds = to_seconds(value.strip())
        except ValueError:
            seconds = None
        if seconds is not None:
            return float(seconds)
    raise NodewrightValidationError(path, f"expected a duration like '45m', '1h30m' or '20s', got {value!r}")


def _time(value: Any, path: str) -> float:
    if isinstance(value, dt.datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return stamp.timestamp()
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            return (parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)).timestamp()
    raise NodewrightValidationError(path, f"expected an RFC 3339 time like '2026-07-20T00:00:00Z', got {value!r}")


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise NodewrightValidationError(path, f"expected a mapping, got {type(value).__name__}")
    return dict(value)


def _int(value: Any, path: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise NodewrightValidationError(path, f"expected an integer >= {minimum}, got {value!r}")
    return value


def _number(value: Any, path: str, minimum: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        raise NodewrightValidationError(path, f"expected a number >= {minimum}, got {value!r}")
    return float(value)


def parse_latency(value: Any, path: str, default: LatencyDistribution) -> LatencyDistribution:
    """A :class:`LatencyDistribution` from ``{p50, p90, min, max}`` (durations); missing keys keep ``default``'s.

    Raises:
        NodewrightValidationError: unknown keys, bad durations, or p90 < p50.
    """
    doc = _mapping(value, path)
    unknown = set(doc) - {"p50", "p90", "min", "max"}
    if unknown:
        raise NodewrightValidationError(path, f"unknown field(s) {sorted(unknown)}; use p50, p90, min, max")
    p50 = parse_duration(doc["p50"], f"{path}.p50") if "p50" in doc else default.p50
    p90 = parse_duration(doc["p90"], f"{path}.p90") if "p90" in doc else max(p50, default.p90)
    minimum = parse_duration(doc["min"], f"{path}.min") if "min" in doc else min(default.minimum, p50)
    maximum = parse_duration(doc["max"], f"{path}.max") if "max" in doc else 0.0
    if p50 <= 0 or p90 < p50:
        raise NodewrightValidationError(path, f"need 0 < p50 <= p90, got p50={p50:g}s p90={p90:g}s")
    return LatencyDistribution(p50, p90, minimum, maximum)


# --- manifests ------------------------------------------------------------------------------------------


def _read_manifest_file(ref: str, base_dir: Path, path: str) -> list[dict[str, Any]]:
    file = (base_dir / ref).resolve()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise NodewrightValidationError(path, f"cannot read {ref!r} (relative to {base_dir}): {err.strerror}") from None
    try:
        return load_manifests(text)
    except NodewrightValidationError as err:
        raise NodewrightValidationError(f"{path} ({ref}).{err.path}", err.reason) from None


def _manifests(value: Any, base_dir: Path) -> tuple[list[dict[str, Any]], tuple[Finding, ...]]:
    """The manifests converted to v1, and the warnings about them (unknown fields, found before conversion drops
    those of older Karpenter kinds), each naming ``spec.manifests[i]`` (``(file)#documents[j]`` for a file)."""
    if not isinstance(value, list):
        raise NodewrightValidationError("spec.manifests", "expected a list of documents or file paths")
    docs: list[dict[str, Any]] = []
    origins: list[str] = []  # where each document came from, for errors about it
    for i, entry in enumerate(value):
        path = f"spec.manifests[{i}]"
        if isinstance(entry, str) or (isinstance(entry, Mapping) and set(entry) == {"path"}
                                      and isinstance(entry["path"], str)):
            ref = entry if isinstance(entry, str) else entry["path"]
            loaded = _read_manifest_file(ref, base_dir, path)
            docs.extend(loaded)
            origins.extend(f"{path} ({ref})#documents[{j}]" for j in range(len(loaded)))
        elif isinstance(entry, Mapping) and entry.get("kind"):
            docs.append(dict(entry))
            origins.append(path)
        else:
            raise NodewrightValidationError(path, "expected a Kubernetes document (with kind) or a file path")
    where = ManifestFiles(docs, origins)
    try:
        converted = convert_documents(docs)
    except NodewrightValidationError as err:
        raise where.locate(err) from None
    parse_documents([d for d in converted if d.get("kind") in ("NodePool", "EC2NodeClass", "NodeOverlay")])
    findings = tuple(Finding(where.locate_path(f.path), where.locate_text(f.reason)) for f in unknown_field_findings(docs))
    return converted, findings


# --- events ---------------------------------------------------------------------------------------------


def _event(value: Any, path: str, duration: float) -> Event:
    doc = _mapping(value, path)
    if "at" not in doc:
        raise NodewrightValidationError(f"{path}.at", "required field is missing")
    at = parse_duration(doc.pop("at"), f"{path}.at")
    if at > duration:
        raise NodewrightValidationError(f"{path}.at", f"{at:g}s is after the end of the scenario ({duration:g}s)")
    kinds = [k for k in doc if k in EVENT_KINDS]
    if len(kinds) != 1 or len(doc) != 1:
        raise NodewrightValidationError(path, f"expected exactly one of {', '.join(EVENT_KINDS)} besides 'at', "
                                              f"got {sorted(doc)}")
    kind = kinds[0]
    params = _mapping(doc[kind], f"{path}.{kind}")
    _check_event(kind, params, f"{path}.{kind}")
    return Event(at, kind, params, path)


def _check_event(kind: str, params: dict[str, Any], path: str) -> None:
    if kind in ("scale", "load"):
        targets = [k for k in ("deployment", "statefulset") if k in params]
        if len(targets) != 1 or not isinstance(params[targets[0]], str):
            raise NodewrightValidationError(path, "name the workload with 'deployment: <name>' (or 'statefulset')")
    if kind == "scale":
        _int(params.get("replicas"), f"{path}.replicas")
    elif kind == "load":
        _number(params.get("requestsPerSecond"), f"{path}.requestsPerSecond")
        if "perReplicaCapacity" in params:
            _number(params["perReplicaCapacity"], f"{path}.perReplicaCapacity", 1e-9)
    elif kind == "interruptSpot":
        _int(params.get("count", 1), f"{path}.count", 1)
    elif kind == "nodeUnhealthy":
        _int(params.get("count", 1), f"{path}.count", 1)
        for key in ("nodepool", "condition"):
            if key in params and (not isinstance(params[key], str) or not params[key]):
                raise NodewrightValidationError(f"{path}.{key}", "must be a non-empty string")
        if params.get("status", "False") not in ("False", "Unknown", "True"):
            raise NodewrightValidationError(f"{path}.status", f"must be False, Unknown or True, got "
                                                              f"{params['status']!r} (quote it in YAML)")
        if not isinstance(params.get("recoverOnReboot", False), bool):
            raise NodewrightValidationError(f"{path}.recoverOnReboot", "must be true or false")
    elif kind == "insufficientCapacity":
        for key in ("instanceType", "zone", "capacityType"):
            if not isinstance(params.get(key), str):
                raise NodewrightValidationError(f"{path}.{key}", "required string is missing")
        if "for" in params:
            params["for"] = parse_duration(params["for"], f"{path}.for")


# --- baseline -------------------------------------------------------------------------------------------


def _node_group(value: Any, path: str) -> NodeGroup:
    doc = _mapping(value, path)
    for key in ("name", "instanceType"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise NodewrightValidationError(f"{path}.{key}", "required string is missing")
    capacity_type = doc.get("capacityType", "on-demand")
    if capacity_type not in ("on-demand", "spot"):
        raise NodewrightValidationError(f"{path}.capacityType", f"must be on-demand or spot, got {capacity_type!r}")
    min_size = _int(doc.get("minSize", 0), f"{path}.minSize")
    max_size = _int(doc.get("maxSize", 100), f"{path}.maxSize", max(1, min_size))
    taints = tuple(dict(t) for t in doc.get("taints") or [])
    return NodeGroup(str(doc["name"]), str(doc["instanceType"]), capacity_type, tuple(doc.get("zones") or ()),
                     min_size, max_size, {str(k): str(v) for k, v in (doc.get("labels") or {}).items()}, taints,
                     str(doc.get("nodePool") or ""))


def _baseline(value: Any, path: str) -> ClusterAutoscalerConfig:
    doc = _mapping(value, path)
    unknown = set(doc) - {"clusterAutoscaler"}
    if unknown:
        raise NodewrightValidationError(path, f"unknown baseline(s) {sorted(unknown)}; only clusterAutoscaler")
    ca_path = f"{path}.clusterAutoscaler"
    ca = _mapping(doc.get("clusterAutoscaler"), ca_path)
    default = ClusterAutoscalerConfig()
    groups = ca.get("nodeGroups") or []
    if not isinstance(groups, list):
        raise NodewrightValidationError(f"{ca_path}.nodeGroups", "expected a list")
    return ClusterAutoscalerConfig(
        scan_interval=parse_duration(ca.get("scanInterval", default.scan_interval), f"{ca_path}.scanInterval"),
        launch_latency=parse_latency(ca.get("launchLatency"), f"{ca_path}.launchLatency", default.launch_latency),
        utilization_threshold=_number(ca.get("scaleDownUtilizationThreshold", default.utilization_threshold),
                                      f"{ca_path}.scaleDownUtilizationThreshold"),
        unneeded_time=parse_duration(ca.get("scaleDownUnneededTime", default.unneeded_time),
                                     f"{ca_path}.scaleDownUnneededTime"),
        delay_after_add=parse_duration(ca.get("scaleDownDelayAfterAdd", default.delay_after_add),
                                       f"{ca_path}.scaleDownDelayAfterAdd"),
        node_groups=tuple(_node_group(g, f"{ca_path}.nodeGroups[{i}]") for i, g in enumerate(groups)),
    )


# --- entry points ---------------------------------------------------------------------------------------


def parse_scenario(doc: Any, base_dir: Path | str = ".") -> Scenario:
    """A :class:`Scenario` from a decoded document; relative manifest paths resolve against ``base_dir``.

    Raises:
        NodewrightValidationError: anything invalid, with its field path.
    """
    if not isinstance(doc, Mapping):
        raise NodewrightValidationError("", "a scenario must be a mapping")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "Scenario":
        raise NodewrightValidationError(
            "apiVersion", f"expected apiVersion {API_VERSION} and kind Scenario, got "
                          f"{doc.get('apiVersion')!r}/{doc.get('kind')!r}")
    spec = _mapping(doc.get("spec"), "spec")
    name = str((doc.get("metadata") or {}).get("name") or "scenario")
    if "duration" not in spec:
        raise NodewrightValidationError("spec.duration", "required field is missing")
    duration = parse_duration(spec["duration"], "spec.duration")
    if duration <= 0:
        raise NodewrightValidationError("spec.duration", "must be positive")
    if duration > MAX_DURATION:
        raise NodewrightValidationError(
            "spec.duration", f"at most {MAX_DURATION // 3600:g}h (7 days) of simulated time, got {spec['duration']!r}"
        )
    region = str(spec.get("region") or "us-east-1")
    available = region_zones(region)
    zones = [str(z) for z in spec.get("zones") or available[:3]]
    for i, zone in enumerate(zones):
        if zone not in available:
            raise NodewrightValidationError(f"spec.zones[{i}]", f"{zone!r} is not a zone of {region}")
    events = [_event(e, f"spec.events[{i}]", duration) for i, e in enumerate(spec.get("events") or [])]
    events.sort(key=lambda e: e.at)
    manifests, findings = _manifests(spec.get("manifests") or [], Path(base_dir))
    return Scenario(
        name=name,
        duration=duration,
        manifests=manifests,
        findings=findings,
        events=events,
        start=_time(spec["start"], "spec.start") if "start" in spec else DEFAULT_START,
        region=region,
        zones=zones,
        seed=_int(spec.get("seed", 1), "spec.seed"),
        sample_interval=parse_duration(spec.get("sampleInterval", 10), "spec.sampleInterval") or 10.0,
        pod_start_delay=parse_duration(spec.get("podStartDelay", 5), "spec.podStartDelay"),
        launch_latency=parse_latency(spec.get("launchLatency"), "spec.launchLatency", NODEWRIGHT_LAUNCH_LATENCY),
        baseline=_baseline(spec.get("baseline"), "spec.baseline"),
    )


def capacity_buffers(scenario: Scenario) -> list[str]:
    """``namespace/name`` of every CapacityBuffer the scenario's manifests declare (sorted). A scenario that
    declares one replays with the ``CapacityBuffer`` gate on, and its summary compares a run without buffers
    (:func:`nodewright.sim.runner.buffer_report`)."""
    return sorted(f"{(d.get('metadata') or {}).get('namespace') or 'default'}/{(d.get('metadata') or {}).get('name')}"
                  for d in scenario.manifests if d.get("kind") == "CapacityBuffer")


def has_capacity_buffers(scenario: Scenario) -> bool:
    """Whether the scenario declares a CapacityBuffer (:func:`capacity_buffers`)."""
    return any(d.get("kind") == "CapacityBuffer" for d in scenario.manifests)


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse a scenario file (YAML, one document).

    Raises:
        NodewrightValidationError: unreadable file, invalid YAML or an invalid scenario.
    """
    file = Path(path)
    text = read_text(str(path))
    try:
        docs = load_manifests(text)
        if len(docs) != 1:
            raise NodewrightValidationError("", f"expected one Scenario document, found {len(docs)}")
        scenario = parse_scenario(docs[0], file.resolve().parent)
        return dataclasses.replace(scenario, findings=tuple(Finding(f"{path}#{f.path}", f.reason)
                                                            for f in scenario.findings))
    except NodewrightValidationError as err:
        raise err.rewrite(lambda where, reason: (f"{path}#{where}" if where else str(path), reason)) from None
