"""Workload controllers of the simulated cluster: what kube-controller-manager does for pods.

* :class:`ReplicaWorkload` -- Deployment / ReplicaSet / StatefulSet: keeps ``replicas`` pods alive,
  recreates evicted or garbage-collected ones, scales down pending pods first, then the newest (the
  ReplicaSet controller's ranking, simplified). StatefulSet pods keep ordinal names ``<name>-<i>``.
* :class:`JobWorkload` -- a Job: runs ``parallelism`` pods until ``completions`` succeeded; each pod runs
  for the Job's simulated duration once Running, then succeeds and is removed (as a TTL controller would);
  an evicted pod is replaced.
* :class:`CronJobWorkload` -- creates a Job at each ``spec.schedule`` time (croniter, ``spec.timeZone``
  honoured), skipping when ``concurrencyPolicy: Forbid`` and the previous Job still runs.
* :class:`DaemonSetWorkload` -- one pod bound to each Ready node it tolerates and selects.
* bare Pods -- created once.

The simulated run time of a Job's pods comes from the annotation ``sim.nodewright.io/duration`` (a
duration string such as ``"45s"``) on the Job/CronJob or its pod template, default 60 s.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj, is_deleting, labels_of, name_of, parse_time
from nodewright.scheduling import Pod, daemonset_pod
from nodewright.scheduling.daemonsets import runs_on_node
from nodewright.scheduling.taints import taint_from_dict
from nodewright.sim.scenario import parse_duration

DURATION_ANNOTATION = "sim.nodewright.io/duration"
DEFAULT_JOB_SECONDS = 60.0


def _template(doc: Mapping[str, Any], path: str) -> dict[str, Any]:
    template = doc.get("template")
    if not isinstance(template, Mapping):
        raise NodewrightValidationError(path, "required pod template is missing")
    return dict(template)


def pod_manifest(template: Mapping[str, Any], namespace: str, name: str, owner_kind: str, owner_name: str,
                 node_name: str = "") -> Obj:
    """A Pending ``v1/Pod`` from a pod template, owned (controller reference) by ``owner_kind/owner_name``."""
    meta = template.get("metadata") or {}
    spec = dict(template.get("spec") or {})
    if node_name:
        spec["nodeName"] = node_name
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(meta.get("labels") or {}),
                                "annotations": dict(meta.get("annotations") or {})}
    if owner_kind:
        api = {"Job": "batch/v1", "ReplicationController": "v1"}.get(owner_kind, "apps/v1")
        metadata["ownerReferences"] = [{"apiVersion": api,
                                        "kind": owner_kind, "name": owner_name, "uid": f"sim-{owner_name}",
                                        "controller": True}]
    status: dict[str, Any] = {"phase": "Pending"}
    if node_name:
        status["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def _live(cluster: InMemoryCluster, namespace: str, name: str) -> Obj | None:
    pod = cluster.get(r.PODS, name, namespace)
    if pod is None or is_deleting(pod) or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return None
    return pod


@dataclass
class ReplicaWorkload:
    """A Deployment, ReplicaSet or StatefulSet.

    Attributes:
        kind, name, namespace: identity.
        template: pod template.
        replicas: desired replicas (scale events and autoscalers set it).
        pods: names of this workload's live pods, oldest first.
    """

    kind: str
    name: str
    namespace: str
    template: dict[str, Any]
    replicas: int
    pods: list[str] = field(default_factory=list)
    _counter: itertools.count = field(default_factory=itertools.count)  # type: ignore[type-arg]

    @classmethod
    def from_manifest(cls, doc: Mapping[str, Any]) -> ReplicaWorkload:
        """Build from a Deployment/ReplicaSet/StatefulSet manifest.

        Raises:
            NodewrightValidationError: no name or template, or a bad replica count.
        """
        meta = doc.get("metadata") or {}
        if not meta.get("name"):
            raise NodewrightValidationError("metadata.name", f"{doc.get('kind')} without a name")
        spec = doc.get("spec") or {}
        replicas = spec.get("replicas", 1)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise NodewrightValidationError(f"{meta['name']}.spec.replicas", f"expected a count, got {replicas!r}")
        return cls(str(doc["kind"]), str(meta["name"]), str(meta.get("namespace") or "default"),
                   _template(spec, f"{meta['name']}.spec.template"), replicas)

    @property
    def owner_kind(self) -> str:
        """Kind of the pods' controller owner (a Deployment's pods belong to its ReplicaSet)."""
        return "ReplicaSet" if self.kind == "Deployment" else self.kind

    def forget(self, name: str) -> None:
        """A pod of this workload was deleted (evicted, garbage-collected): it will be replaced."""
        if name in self.pods:
            self.pods.remove(name)

    def reconcile(self, cluster: InMemoryCluster) -> None:
        """Create missing pods, delete surplus ones (deleted pods were reported through :meth:`forget`)."""
        if len(self.pods) == self.replicas:
            return
        if self.kind == "StatefulSet":
            self._reconcile_ordinals(cluster)
            return
        while len(self.pods) < self.replicas:
            name = f"{self.name}-{next(self._counter)}"
            cluster.create(r.PODS, pod_manifest(self.template, self.namespace, name, self.owner_kind, self.name))
            self.pods.append(name)
        if len(self.pods) > self.replicas:
            for name in self._victims(cluster, len(self.pods) - self.replicas):
                cluster.delete(r.PODS, name, self.namespace)
                self.forget(name)

    def _victims(self, cluster: InMemoryCluster, count: int) -> list[str]:
        def rank(item: tuple[int, str]) -> tuple[int, int]:
            index, name = item
            pod = cluster.get(r.PODS, name, self.namespace) or {}
            bound = 1 if (pod.get("spec") or {}).get("nodeName") else 0
            return (bound, -index)  # unbound before bound, newer before older

        return [name for _, name in sorted(enumerate(self.pods), key=rank)[:count]]

    def _reconcile_ordinals(self, cluster: InMemoryCluster) -> None:
        live = set(self.pods)
        for ordinal in range(self.replicas):
            name = f"{self.name}-{ordinal}"
            if name not in live and cluster.get(r.PODS, name, self.namespace) is None:
                cluster.create(r.PODS, pod_manifest(self.template, self.namespace, name, self.kind, self.name))
                self.pods.append(name)
        for name in list(self.pods):
            if int(name.rsplit("-", 1)[1]) >= self.replicas:
                cluster.delete(r.PODS, name, self.namespace)
                self.forget(name)


def job_duration(doc: Mapping[str, Any], template: Mapping[str, Any], path: str) -> float:
    """Seconds a Job's pods run (annotation :data:`DURATION_ANNOTATION` on the workload or its pod template).

    Raises:
        NodewrightValidationError: the annotation is not a duration.
    """
    for meta in (doc.get("metadata") or {}, template.get("metadata") or {}):
        value = (meta.get("annotations") or {}).get(DURATION_ANNOTATION)
        if value is not None:
            return parse_duration(value, f"{path}.metadata.annotations[{DURATION_ANNOTATION}]")
    return DEFAULT_JOB_SECONDS


@dataclass
class JobWorkload:
    """A Job: ``parallelism`` pods at a time until ``completions`` pods have run for ``duration`` seconds.

    Attributes:
        running: pod name -> epoch seconds it will finish (set when the pod is Running; None before).
        succeeded: pods that completed.
    """

    name: str
    namespace: str
    template: dict[str, Any]
    parallelism: int
    completions: int
    duration: float
    running: dict[str, float | None] = field(default_factory=dict)
    succeeded: int = 0
    _counter: itertools.count = field(default_factory=itertools.count)  # type: ignore[type-arg]

    @classmethod
    def from_spec(cls, name: str, namespace: str, spec: Mapping[str, Any], duration: float) -> JobWorkload:
        """Build from a Job ``spec`` (parallelism default 1, completions default parallelism)."""
        parallelism = int(spec.get("parallelism", 1) or 0)
        completions = int(spec.get("completions", parallelism) or 0)
        return cls(name, namespace, _template(spec, f"{name}.spec.template"), parallelism, completions, duration)

    @property
    def done(self) -> bool:
        """All completions succeeded."""
        return self.succeeded >= self.completions

    def reconcile(self, cluster: InMemoryCluster, now: float) -> None:
        """Finish pods whose run time elapsed, replace lost ones, start new ones up to parallelism."""
        for pod_name, finish in list(self.running.items()):
            pod = _live(cluster, self.namespace, pod_name)
            if pod is None:
                del self.running[pod_name]  # evicted or garbage-collected: counts as not done
                continue
            status = pod.get("status") or {}
            if finish is None and status.get("phase") == "Running":
                started = parse_time(status.get("startTime")) or now
                self.running[pod_name] = finish = started + self.duration
            if finish is not None and now >= finish:
                cluster.delete(r.PODS, pod_name, self.namespace)
                del self.running[pod_name]
                self.succeeded += 1
        wanted = min(self.parallelism, self.completions - self.succeeded)
        while len(self.running) < wanted:
            pod_name = f"{self.name}-{next(self._counter)}"
            cluster.create(r.PODS, pod_manifest(self.template, self.namespace, pod_name, "Job", self.name))
            self.running[pod_name] = None

    def next_finish(self) -> float | None:
        """Earliest epoch second a running pod finishes, or None."""
        times = [t for t in self.running.values() if t is not None]
        return min(times) if times else None


@dataclass
class CronJobWorkload:
    """A CronJob: a :class:`JobWorkload` at every ``schedule`` time (in ``time_zone``).

    Attributes:
        jobs: Jobs started and not finished yet.
        started: count of Jobs created.
    """

    name: str
    namespace: str
    schedule: str
    time_zone: str
    job_spec: dict[str, Any]
    duration: float
    forbid_concurrent: bool
    jobs: list[JobWorkload] = field(default_factory=list)
    started: int = 0
    _next: float | None = None

    @classmethod
    def from_manifest(cls, doc: Mapping[str, Any]) -> CronJobWorkload:
        """Build from a ``batch/v1`` CronJob.

        Raises:
            NodewrightValidationError: missing/invalid schedule or time zone, or no job template.
        """
        meta = doc.get("metadata") or {}
        name = str(meta.get("name") or "")
        spec = doc.get("spec") or {}
        schedule = str(spec.get("schedule") or "")
        if not name or not croniter.is_valid(schedule):
            raise NodewrightValidationError(f"{name or 'CronJob'}.spec.schedule", f"invalid cron schedule {schedule!r}")
        time_zone = str(spec.get("timeZone") or "UTC")
        try:
            ZoneInfo(time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise NodewrightValidationError(f"{name}.spec.timeZone", f"unknown time zone {time_zone!r}") from None
        job_spec = dict(((spec.get("jobTemplate") or {}).get("spec")) or {})
        template = _template(job_spec, f"{name}.spec.jobTemplate.spec.template")
        return cls(name, str(meta.get("namespace") or "default"), schedule, time_zone, job_spec,
                   job_duration(doc, template, name), spec.get("concurrencyPolicy") == "Forbid")

    def next_fire(self, now: float) -> float:
        """Epoch seconds of the first schedule time strictly after ``now``."""
        if self._next is None or self._next <= now:
            start = dt.datetime.fromtimestamp(now, tz=ZoneInfo(self.time_zone))
            self._next = float(croniter(self.schedule, start).get_next(float))
        return self._next

    def reconcile(self, cluster: InMemoryCluster, now: float) -> None:
        """Start a Job when a schedule time is reached; drive running Jobs."""
        if self._next is None:
            self.next_fire(now - 1)
        if self._next is not None and now >= self._next:
            self._next = None
            self.next_fire(now)
            if not (self.forbid_concurrent and self.jobs):
                stamp = int(now // 60)  # Kubernetes names Jobs by the scheduled time in minutes
                self.jobs.append(JobWorkload.from_spec(f"{self.name}-{stamp}", self.namespace, self.job_spec,
                                                       self.duration))
                self.started += 1
        for job in self.jobs:
            job.reconcile(cluster, now)
        self.jobs = [j for j in self.jobs if not j.done]


@dataclass
class DaemonSetWorkload:
    """A DaemonSet: one pod bound to each Ready node whose taints it tolerates and whose labels it selects (the
    scheduler's rule, :func:`nodewright.scheduling.daemonsets.runs_on_node`)."""

    name: str
    namespace: str
    template: dict[str, Any]
    pod: Pod
    pods: dict[str, str] = field(default_factory=dict)  # node name -> pod name

    @classmethod
    def from_manifest(cls, doc: Mapping[str, Any]) -> DaemonSetWorkload:
        """Build from a ``apps/v1`` DaemonSet.

        Raises:
            NodewrightValidationError: invalid template fields.
        """
        pod = daemonset_pod({**doc, "kind": "DaemonSet"})
        meta = doc.get("metadata") or {}
        return cls(str(meta["name"]), str(meta.get("namespace") or "default"),
                   _template(doc.get("spec") or {}, f"{meta['name']}.spec.template"), pod)

    def runs_on(self, node: Obj) -> bool:
        """Whether this DaemonSet places a pod on ``node`` (NoSchedule/NoExecute taints tolerated, node selector
        and one required node-affinity term)."""
        taints = [taint_from_dict(t) for t in (node.get("spec") or {}).get("taints") or []]
        return runs_on_node(self.pod, labels_of(node), taints)

    def reconcile(self, cluster: InMemoryCluster, ready_nodes: Iterable[Obj]) -> None:
        """Create the pod of every Ready node that lacks one; forget pods of nodes that went away."""
        for node in ready_nodes:
            node_name = name_of(node)
            current = self.pods.get(node_name)
            if current is not None and cluster.get(r.PODS, current, self.namespace) is not None:
                continue
            if is_deleting(node) or not self.runs_on(node):
                continue
            pod_name = f"{self.name}-{node_name.split('.')[0]}"
            if cluster.get(r.PODS, pod_name, self.namespace) is None:
                cluster.create(r.PODS, pod_manifest(self.template, self.namespace, pod_name, "DaemonSet",
                                                    self.name, node_name=node_name))
            self.pods[node_name] = pod_name
        for node_name in [n for n, p in self.pods.items() if cluster.get(r.PODS, p, self.namespace) is None]:
            del self.pods[node_name]


def replicas_for(load: float, per_replica: float) -> int:
    """Replicas needed to serve ``load`` requests/s at ``per_replica`` requests/s each (ceil, >= 0)."""
    if per_replica <= 0:
        return 0
    return max(0, math.ceil(load / per_replica - 1e-9))
