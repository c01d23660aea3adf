"""The simulated cluster both autoscalers run against: objects, workloads, pod autoscalers, nodes, events.

A :class:`World` owns the simulated clock, the in-memory cluster, the simulated EC2, the kubelet and
kube-scheduler stand-ins, the workload controllers and the pod autoscalers of one scenario, plus a
:class:`~nodewright.sim.report.Recorder`. The node autoscaler under test (nodewright's controllers or the
Cluster Autoscaler model) is plugged in by the runner; the world calls it only through
:class:`InterruptionHandler` for spot interruption warnings.

``nodeUnhealthy`` events (:meth:`World.make_unhealthy`) set a Node condition (``Ready=False`` unless the event
says otherwise, ``lastTransitionTime`` now) on ``count`` random Ready nodes, as a failed kubelet or the EKS node
monitoring agent would; nodewright repairs them with ``FEATURE_GATES=NodeRepair=true``. With
``recoverOnReboot: true`` a node turns healthy again :data:`REBOOT_SECONDS` after an ``ec2:RebootInstances``
(``AWS_FEATURE_GATES=RebootForRepair=true``); otherwise a reboot changes nothing and the node is replaced.

Manifests accepted: NodePool, EC2NodeClass (Karpenter kinds already converted to v1), Deployment,
ReplicaSet, StatefulSet, Job, CronJob, DaemonSet, Pod, PodDisruptionBudget, HorizontalPodAutoscaler
(``autoscaling/v2``), ScaledObject (``keda.sh/v1alpha1``), CapacityBuffer (``autoscaling.x-k8s.io/v1beta1``) and
PodTemplate; Namespace, PersistentVolume(Claim), StorageClass, RuntimeClass, CSINode and Service are stored for the
controllers (:data:`STORED_KINDS`); ServiceAccount, ConfigMap, Secret and PriorityClass are accepted and ignored
(``simulate --scenario`` names them in its skipped-kinds line and leaves them out). Anything else is a validation
error.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from nodewright.api import labels as L
from nodewright.api.manifests import parse_ec2nodeclass, parse_nodeoverlay, parse_nodepool
from nodewright.cloud.simulated import LatencyDistribution, SimInstance, SimulatedEC2
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj, condition_true, format_time, is_deleting, labels_of, name_of
from nodewright.kube.resources import ResourceKind
from nodewright.sim.autoscaling import HorizontalPodAutoscaler, Load, ScaledObject
from nodewright.sim.autoscaling import next_due as scalers_due
from nodewright.sim.kubelet import SimulatedKubelet
from nodewright.sim.kubescheduler import KubeScheduler
from nodewright.sim.report import Recorder
from nodewright.sim.scenario import Event, Scenario
from nodewright.sim.volumes import bind_static_claims
from nodewright.sim.workloads import (
    CronJobWorkload,
    DaemonSetWorkload,
    JobWorkload,
    ReplicaWorkload,
    job_duration,
)
from nodewright.state.pods import is_daemonset_pod

IGNORED_KINDS = frozenset({"ServiceAccount", "ConfigMap", "Secret", "PriorityClass"})
#: Kinds stored in the cluster as given, for the controllers to read (Namespace labels for pod affinity
#: ``namespaceSelector``; volumes, claims and StorageClasses for volume topology).
STORED_KINDS = {"Namespace": r.NAMESPACES, "PersistentVolume": r.PVS, "PersistentVolumeClaim": r.PVCS,
                "StorageClass": r.STORAGECLASSES, "RuntimeClass": r.RUNTIMECLASSES, "CSINode": r.CSINODES,
                # CapacityBuffers and the PodTemplates they reference (nodewright.controllers.buffer).
                "PodTemplate": r.PODTEMPLATES, "CapacityBuffer": r.CAPACITYBUFFERS,
                # Services: their selectors deduce the default topology spread selector (SCHEDULER_CONFIG).
                "Service": r.SERVICES}
#: Workload kinds also stored as objects (a CapacityBuffer's scalableRef reads their template and replicas).
WORKLOAD_KINDS = {"Deployment": r.DEPLOYMENTS, "ReplicaSet": r.REPLICASETS, "StatefulSet": r.STATEFULSETS}
#: Kinds :meth:`World.apply` plays; ``simulate --scenario`` skips the others with one summary line.
APPLIED_KINDS = frozenset({"NodePool", "EC2NodeClass", "NodeOverlay", "Deployment", "ReplicaSet", "StatefulSet", "Job", "CronJob",
                           "DaemonSet", "Pod", "PodDisruptionBudget", "HorizontalPodAutoscaler", "ScaledObject",
                           *STORED_KINDS})
#: Seconds from a reboot until a node that recovers by rebooting reports healthy again.
REBOOT_SECONDS = 90.0
OfferingKey = tuple[str, str, str]
InterruptionHandler = Callable[[SimInstance], None]


class SimClock:
    """A settable clock: epoch seconds, advanced only by the simulation loop."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class World:
    """One scenario's simulated cluster (see module docstring).

    Args:
        scenario: the parsed scenario.
        seed: random seed (names, latencies, interruption choices).
        latency: launch latency of the instances this world's autoscaler launches.

    Attributes:
        out_of_capacity: offerings that currently fail launches (``insufficientCapacity`` events).
        on_interruption: called for each spot interruption warning (set by the autoscaler driver).
    """

    def __init__(self, scenario: Scenario, seed: int, latency: LatencyDistribution) -> None:
        self.scenario = scenario
        self.start = scenario.start
        self.clock = SimClock(scenario.start)
        self.rng = random.Random(seed)
        self.cluster = InMemoryCluster(self.clock, seed)
        self.ec2 = SimulatedEC2(self.clock, random.Random(f"ec2-{seed}"), latency)
        self.kubelet = SimulatedKubelet(self.cluster, self.ec2, self.clock, scenario.region,
                                        scenario.pod_start_delay, self._interruption_warning)
        self.scheduler = KubeScheduler(self.cluster, seed, clock=self.clock)
        self.recorder = Recorder(self.cluster, self.ec2, self.clock, scenario.start)
        self.replicas: dict[str, ReplicaWorkload] = {}
        self.jobs: list[JobWorkload] = []
        self.cronjobs: list[CronJobWorkload] = []
        self.daemonsets: list[DaemonSetWorkload] = []
        self.scalers: list[tuple[HorizontalPodAutoscaler | ScaledObject, str]] = []
        self.loads: dict[str, Load] = {}
        self.out_of_capacity: set[OfferingKey] = set()
        self._capacity_back: list[tuple[float, OfferingKey]] = []
        self.on_interruption: InterruptionHandler | None = None
        #: instance id -> the condition type a reboot clears (``recoverOnReboot`` nodes).
        self._recover_on_reboot: dict[str, str] = {}
        self._reboots_seen = 0
        self._recoveries: list[tuple[float, str]] = []  # (when, instance id)
        self._events = list(scenario.events)
        self._nodes_changed = True
        self.apply(scenario.manifests)
        self.cluster.add_listener(self._on_change)

    def _on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        # The DaemonSet controller watches nodes (and its pods); the ReplicaSet/StatefulSet controllers watch
        # their pods: a deleted one is replaced.
        if kind == r.NODES or (kind == r.PODS and event == "DELETED" and is_daemonset_pod(obj)):
            self._nodes_changed = True
        if kind == r.PODS and event == "DELETED":
            owners = (obj.get("metadata") or {}).get("ownerReferences") or []
            if owners and owners[0].get("kind") in ("ReplicaSet", "StatefulSet"):
                workload = self.replicas.get(str(owners[0].get("name")))
                if workload is not None:
                    workload.forget(name_of(obj))

    # --- manifests ---------------------------------------------------------------------------------------

    def apply(self, docs: list[dict[str, Any]]) -> None:
        """Create the objects and workloads of ``docs``.

        Raises:
            NodewrightValidationError: an unsupported kind, or an autoscaler naming an unknown workload.
        """
        scalers: list[tuple[HorizontalPodAutoscaler | ScaledObject, str]] = []
        for doc in bind_static_claims(docs):  # static PV/PVC pairs bound, as the PV controller would
            kind = str(doc.get("kind"))
            path = f"spec.manifests: {kind} {(doc.get('metadata') or {}).get('name', '')!s}".rstrip()
            try:
                scaler = self._apply_one(kind, doc)
            except NodewrightValidationError as err:
                raise NodewrightValidationError(f"{path}: {err.path}", err.reason) from None
            if scaler is not None:
                scalers.append((scaler, path))
        for scaler, path in scalers:
            if scaler.target not in self.replicas:
                raise NodewrightValidationError(f"{path}.spec.scaleTargetRef.name",
                                                f"no Deployment or StatefulSet named {scaler.target!r}")
            self.scalers.append((scaler, scaler.target))

    def _apply_one(self, kind: str, doc: dict[str, Any]) -> HorizontalPodAutoscaler | ScaledObject | None:
        # Karpenter kinds are stored as the API server would hold them: validated, defaults filled in (the same
        # objects ``simulate -f`` and the controller read).
        if kind == "NodePool":
            self.cluster.create(r.NODEPOOLS, parse_nodepool(doc).to_manifest())
        elif kind == "NodeOverlay":  # applied with FEATURE_GATES=NodeOverlay=true (nodewright.cloud.overlay)
            self.cluster.create(r.NODEOVERLAYS, parse_nodeoverlay(doc).to_manifest())
        elif kind == "EC2NodeClass":
            created = self.cluster.create(r.EC2NODECLASSES, parse_ec2nodeclass(doc).to_manifest())
            subnets = [{"id": f"subnet-sim-{z}", "zone": z} for z in self.scenario.zones]
            self.cluster.patch_status(r.EC2NODECLASSES, created["metadata"]["name"], {
                "subnets": subnets, "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]})
        elif kind in ("Deployment", "ReplicaSet", "StatefulSet"):
            workload = ReplicaWorkload.from_manifest(doc)
            self.replicas[workload.name] = workload
            self.cluster.create(WORKLOAD_KINDS[kind], doc)
        elif kind == "Job":
            meta = doc.get("metadata") or {}
            spec = doc.get("spec") or {}
            self.jobs.append(JobWorkload.from_spec(str(meta.get("name")), str(meta.get("namespace") or "default"),
                                                   spec, job_duration(doc, spec.get("template") or {}, "Job")))
        elif kind == "CronJob":
            self.cronjobs.append(CronJobWorkload.from_manifest(doc))
        elif kind == "DaemonSet":
            self.daemonsets.append(DaemonSetWorkload.from_manifest(doc))
            self.cluster.create(r.DAEMONSETS, doc)
        elif kind == "Pod":
            self.cluster.create(r.PODS, {**doc, "status": {"phase": "Pending"}})
        elif kind == "PodDisruptionBudget":
            self.cluster.create(r.PDBS, doc)
        elif kind in STORED_KINDS:
            self.cluster.create(STORED_KINDS[str(kind)], doc)
        elif kind == "HorizontalPodAutoscaler":
            return HorizontalPodAutoscaler.from_manifest(doc)
        elif kind == "ScaledObject":
            return ScaledObject.from_manifest(doc)
        elif kind not in IGNORED_KINDS:
            raise NodewrightValidationError("kind", f"{kind!r} is not simulated")
        return None

    # --- events ------------------------------------------------------------------------------------------

    def _workload(self, event: Event) -> ReplicaWorkload:
        name = str(event.params.get("deployment") or event.params.get("statefulset"))
        workload = self.replicas.get(name)
        if workload is None:
            raise NodewrightValidationError(f"{event.path}.{event.kind}", f"no workload named {name!r}")
        return workload

    def validate_events(self) -> None:
        """Check that every event names an existing workload.

        Raises:
            NodewrightValidationError: an event names an unknown workload.
        """
        for event in self._events:
            if event.kind in ("scale", "load"):
                self._workload(event)

    def apply_event(self, event: Event) -> None:
        """Carry out one scenario event now."""
        params = event.params
        if event.kind == "scale":
            self._workload(event).replicas = int(params["replicas"])
        elif event.kind == "load":
            name = self._workload(event).name
            previous = self.loads.get(name, Load())
            self.loads[name] = Load(float(params["requestsPerSecond"]),
                                    float(params.get("perReplicaCapacity", previous.per_replica_capacity)))
        elif event.kind == "interruptSpot":
            self.interrupt_spot(int(params.get("count", 1)), params.get("nodepool"))
        elif event.kind == "nodeUnhealthy":
            self.make_unhealthy(int(params.get("count", 1)), params.get("nodepool"),
                                str(params.get("condition", "Ready")), str(params.get("status", "False")),
                                bool(params.get("recoverOnReboot", False)))
        elif event.kind == "insufficientCapacity":
            key = (str(params["instanceType"]), str(params["zone"]), str(params["capacityType"]))
            self.out_of_capacity.add(key)
            if "for" in params:
                self._capacity_back.append((self.clock() + float(params["for"]), key))

    def interrupt_spot(self, count: int, nodepool: Any = None) -> list[str]:
        """Send spot interruption warnings to ``count`` random live spot instances (of ``nodepool``)."""
        candidates = [i for i in self.ec2.live() if i.capacity_type == "spot" and not i.interrupt_at
                      and (nodepool is None or i.node_labels.get(L.NODEPOOL) == nodepool)]
        chosen = self.rng.sample(candidates, min(count, len(candidates)))
        for instance in chosen:
            self.ec2.interrupt(instance.id)
        return [i.id for i in chosen]

    def make_unhealthy(self, count: int, nodepool: Any = None, condition_type: str = "Ready",
                       status: str = "False", recover_on_reboot: bool = False) -> list[str]:
        """Set ``condition_type=status`` (transition now) on ``count`` random Ready nodes (of ``nodepool``); returns
        their names."""
        candidates = []
        for instance in self.ec2.live():
            node = self.cluster.get(r.NODES, instance.node_name) if instance.node_name else None
            if (node is not None and not is_deleting(node) and condition_true(node, "Ready")
                    and (nodepool is None or labels_of(node).get(L.NODEPOOL) == nodepool)):
                candidates.append((instance, node))
        chosen = self.rng.sample(candidates, min(count, len(candidates)))
        for instance, node in chosen:
            self._set_condition(node, condition_type, status, "Simulated")
            if recover_on_reboot:
                self._recover_on_reboot[instance.id] = condition_type
        return [name_of(node) for _, node in chosen]

    def _set_condition(self, node: Obj, condition_type: str, status: str, reason: str) -> None:
        conditions = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") != condition_type]
        conditions.append({"type": condition_type, "status": status, "reason": reason,
                           "lastTransitionTime": format_time(self.clock())})
        self.cluster.patch_status(r.NODES, name_of(node), {"conditions": conditions})

    def _reboots(self, now: float) -> None:
        """Nodes that recover by rebooting report healthy :data:`REBOOT_SECONDS` after their reboot."""
        for at, instance_id in self.ec2.reboots[self._reboots_seen:]:
            if instance_id in self._recover_on_reboot:
                self._recoveries.append((at + REBOOT_SECONDS, instance_id))
        self._reboots_seen = len(self.ec2.reboots)
        for due in [d for d in self._recoveries if d[0] <= now]:
            self._recoveries.remove(due)
            instance = self.ec2.instances.get(due[1])
            condition_type = self._recover_on_reboot.pop(due[1], "")
            node = self.cluster.get(r.NODES, instance.node_name) if instance and instance.node_name else None
            if node is not None and instance is not None and instance.alive and not is_deleting(node):
                self._set_condition(node, condition_type, "True", "Rebooted")

    def _interruption_warning(self, instance: SimInstance) -> None:
        if self.on_interruption is not None:
            self.on_interruption(instance)

    # --- the tick ----------------------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        """Everything but the node autoscaler, at ``now``: events, EC2 transitions (and not-ready taints lifted), pod
        autoscalers, workload controllers, DaemonSets, pod starts, then kube-scheduler's wave (until the world's next
        event)."""
        while self._events and self._events[0].at + self.start <= now:
            self.apply_event(self._events.pop(0))
        for back in [b for b in self._capacity_back if b[0] <= now]:
            self._capacity_back.remove(back)
            self.out_of_capacity.discard(back[1])
        self.kubelet.apply_transitions(now)
        self.kubelet.lift_not_ready_taints(now)
        self._reboots(now)
        for scaler, target in self.scalers:
            scaler.reconcile(now, self.replicas[target], self.loads.get(target, Load()))
        for workload in self.replicas.values():
            workload.reconcile(self.cluster)
            self._sync_replicas(workload)
        for job in self.jobs:
            job.reconcile(self.cluster, now)
        self.jobs = [j for j in self.jobs if not j.done]
        for cronjob in self.cronjobs:
            cronjob.reconcile(self.cluster, now)
        if self.daemonsets and self._nodes_changed:
            self._nodes_changed = False
            ready = [n for n in self.cluster.list(r.NODES) if condition_true(n, "Ready") and not is_deleting(n)]
            for daemonset in self.daemonsets:
                daemonset.reconcile(self.cluster, ready)
        self.kubelet.start_pods(now)
        # The wave runs until the world's next event (a not-ready taint lifted milliseconds after Ready arrives
        # while it still runs).
        self.scheduler.tick(self.next_wake(now) - now)

    def _sync_replicas(self, workload: ReplicaWorkload) -> None:
        """The stored workload object's ``spec.replicas`` follows scale events and autoscalers (what a
        CapacityBuffer's ``percentage`` reads)."""
        kind = WORKLOAD_KINDS[workload.kind]
        stored = self.cluster.get(kind, workload.name, workload.namespace)
        if stored is not None and (stored.get("spec") or {}).get("replicas") != workload.replicas:
            self.cluster.patch(kind, workload.name, {"spec": {"replicas": workload.replicas}}, workload.namespace)

    def next_wake(self, now: float) -> float:
        """Epoch seconds of the next thing the world itself must do (inf when nothing is scheduled)."""
        times = [scalers_due([s for s, _ in self.scalers])]
        if self._events:
            times.append(self._events[0].at + self.start)
        times.extend(t for t, _ in self._capacity_back)
        times.extend(t for t, _ in self._recoveries)
        for value in (self.ec2.next_event_time(), self.kubelet.next_start(), self.kubelet.next_lift()):
            if value is not None:
                times.append(value)
        for job in self.jobs:
            finish = job.next_finish()
            if finish is not None:
                times.append(finish)
        for cronjob in self.cronjobs:
            times.append(cronjob.next_fire(now))
            times.extend(f for f in (j.next_finish() for j in cronjob.jobs) if f is not None)
        future = [t for t in times if t > now]
        return min(future) if future else math.inf

