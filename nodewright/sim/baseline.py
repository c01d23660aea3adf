"""The Cluster Autoscaler baseline: the same scenario scaled by Auto Scaling Groups of one instance type each.

A model of Cluster Autoscaler (kubernetes/autoscaler, ``cluster-autoscaler/FAQ.md``) with its defaults:

* every ``scanInterval`` (10 s) it looks at pods marked ``Unschedulable``; pods that fit on Ready nodes or on
  nodes still coming up are left alone; for the rest, each node group is simulated (how many new nodes of
  its instance type would hold which of the pods, with the scheduler core's predicates and the DaemonSets'
  overhead) and the **least-waste** expander picks the group whose new nodes leave the least idle cpu +
  memory; that ASG's desired capacity grows by that many (capped at ``maxSize``);
* an ASG launches into its zones in turn (least-populated zone first: ASGs balance zones, they do not know
  about pod topology), with its own launch latency (~2 min end to end in the first field report), and
  replaces instances that terminate underneath it (e.g. spot interruptions: Cluster Autoscaler does not
  handle the 2-minute warning);
* scale-down: a node whose requested cpu and memory are both below ``scaleDownUtilizationThreshold`` (0.5)
  of allocatable for ``scaleDownUnneededTime`` (10 min) is removed, not within ``scaleDownDelayAfterAdd``
  (10 min) of a scale-up: empty ones (only DaemonSet pods) in bulk, otherwise one per scan if all its pods
  fit on other nodes, none is a bare pod, none says ``cluster-autoscaler.kubernetes.io/safe-to-evict:
  "false"`` and every eviction is allowed by PodDisruptionBudgets.

Node groups come from the scenario (``spec.baseline.clusterAutoscaler.nodeGroups``) or, when none are given,
one per NodePool (see :func:`derive_node_groups`). A group's nodes carry the NodePool's labels and taints and
a ``karpenter.sh/nodepool`` label with its name, so the same workloads (which select on it) fit.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.catalog import load_instance_types
from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.cloud.matching import type_filter
from nodewright.cloud.simulated import SimInstance
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.errors import NotFoundError, TooManyRequestsError
from nodewright.kube.objects import Obj, annotations_of, condition_true, is_deleting, labels_of, meta, name_of
from nodewright.quantities import parse_resource_list
from nodewright.scheduling import (
    ExistingNode,
    NodePoolSpec,
    Pod,
    nodepool_spec_from_model,
    schedule,
)
from nodewright.scheduling.daemonsets import runs_on_node
from nodewright.sim.scenario import ClusterAutoscalerConfig, NodeGroup
from nodewright.sim.world import World
from nodewright.state.cluster import sync_models
from nodewright.state.models import ClusterModels, models_for
from nodewright.state.pods import is_daemonset_pod, is_terminal, is_unschedulable, node_name

NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
MAX_EMPTY_BULK_DELETE = 10


@dataclass
class _Group:
    spec: NodeGroup
    instance_type: InstanceType
    zones: list[str]
    pool: NodePoolSpec
    desired: int = 0
    instances: list[SimInstance] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.spec.nodepool or self.spec.name

    def offering(self, zone: str) -> Offering | None:
        return next((o for o in self.instance_type.offerings
                     if o.zone == zone and o.capacity_type == self.spec.capacity_type), None)


def _pool_doc(group: NodeGroup, zones: Sequence[str]) -> dict[str, Any]:
    name = group.nodepool or group.name
    return {"apiVersion": L.API_VERSION, "kind": "NodePool", "metadata": {"name": name}, "spec": {"template": {
        "metadata": {"labels": dict(group.labels)},
        "spec": {"requirements": [
            {"key": L.INSTANCE_TYPE, "operator": "In", "values": [group.instance_type]},
            {"key": L.CAPACITY_TYPE, "operator": "In", "values": [group.capacity_type]},
            {"key": L.ZONE, "operator": "In", "values": list(zones)}],
            "taints": [dict(t) for t in group.taints],
            "nodeClassRef": {"group": L.AWS_GROUP, "kind": "EC2NodeClass", "name": "cluster-autoscaler"}}}}}


def derive_node_groups(nodepools: Sequence[Obj], types: Sequence[InstanceType], zones: Sequence[str],
                       models: ClusterModels | None = None) -> list[NodeGroup]:
    """One node group per NodePool, as a Cluster Autoscaler user would set it up.

    Capacity type: on-demand when the NodePool allows it, else spot. Instance type: among the types the
    NodePool's requirements allow, the lowest price per vCPU among those with at least 4 vCPUs (the
    general-purpose size people pick for an ASG; the largest allowed type when none has 4). Zones: the
    NodePool's zones within the simulated ones. ``maxSize``: the NodePool's cpu limit / the type's vCPUs,
    else 100.

    Raises:
        NodewrightValidationError: a NodePool allows no instance type.
    """
    models = models or ClusterModels()
    out = []
    for doc in nodepools:
        name = name_of(doc)
        pool = models.nodepool_spec(doc)
        ct_req = pool.requirements.get(L.CAPACITY_TYPE)
        capacity_type = "on-demand" if ct_req is None or ct_req.has("on-demand") else "spot"
        zone_req = pool.requirements.get(L.ZONE)
        pool_zones = tuple(z for z in zones if zone_req is None or zone_req.has(z))
        candidates = []
        allowed = type_filter(pool.requirements)
        for it in types:
            if not allowed(it):
                continue
            prices = [o.price for o in it.offerings if o.capacity_type == capacity_type and o.zone in pool_zones]
            if prices:
                cpus = it.capacity.get("cpu", 0) / 1000
                candidates.append((cpus < 4, min(prices) / max(cpus, 1e-9), -cpus if cpus < 4 else cpus, it))
        if not candidates:
            raise NodewrightValidationError(f"NodePool {name}", "no instance type satisfies its requirements "
                                            "(cannot derive a Cluster Autoscaler node group)")
        chosen = min(candidates, key=lambda c: (c[0], c[1], c[2], c[3].name))[3]
        limit = (pool.limits or {}).get("cpu")
        max_size = max(1, math.floor(limit / chosen.capacity["cpu"])) if limit else 100
        taints = tuple(t.to_dict() for t in pool.taints)
        out.append(NodeGroup(name, chosen.name, capacity_type, pool_zones, 0, max_size,
                             {k: v for k, v in pool.labels.items() if k != L.NODEPOOL}, taints, name))
    return out


def _utilization(pods: Sequence[Obj], allocatable: Mapping[str, int], models: ClusterModels) -> float:
    cpu = sum(models.requests(p).get("cpu", 0) for p in pods)
    memory = sum(models.requests(p).get("memory", 0) for p in pods)
    return max(cpu / max(allocatable.get("cpu", 1), 1), memory / max(allocatable.get("memory", 1), 1))


class ClusterAutoscalerDriver:
    """The Cluster Autoscaler model (see module docstring).

    Args:
        world: the simulated cluster (its EC2 launches with the ASG latency).
        config: Cluster Autoscaler settings.

    Raises:
        NodewrightValidationError: a node group names an unknown instance type or one without an offering of
            its capacity type in its zones.
    """

    name = "cluster-autoscaler"

    def __init__(self, world: World, config: ClusterAutoscalerConfig) -> None:
        self.world = world
        self.models = models_for(world.cluster)
        self.config = config
        zones = world.scenario.zones
        types = {it.name: it for it in load_instance_types(world.scenario.region, zones=zones)}
        specs = list(config.node_groups) or derive_node_groups(world.cluster.list(r.NODEPOOLS), list(types.values()),
                                                               zones, self.models)
        self.groups = [self._group(spec, types, zones, i) for i, spec in enumerate(specs)]
        self.next_scan = world.start
        self.last_scale_up = -math.inf
        self.unneeded_since: dict[str, float] = {}
        self._counted_interruptions: set[str] = set()
        self._ds_docs = [dict(d, kind="DaemonSet") for d in world.cluster.list(r.DAEMONSETS)]
        self.scale_ups = 0

    def _group(self, spec: NodeGroup, types: Mapping[str, InstanceType], zones: Sequence[str], i: int) -> _Group:
        path = f"spec.baseline.clusterAutoscaler.nodeGroups[{i}]"
        it = types.get(spec.instance_type)
        if it is None:
            raise NodewrightValidationError(f"{path}.instanceType",
                                            f"{spec.instance_type!r} is not offered in {self.world.scenario.region}")
        group_zones = [z for z in (spec.zones or zones) if z in zones]
        offerings = tuple(o for o in it.offerings if o.zone in group_zones and o.capacity_type == spec.capacity_type)
        if not offerings:
            raise NodewrightValidationError(path, f"{spec.instance_type} has no {spec.capacity_type} offering in "
                                                  f"{', '.join(group_zones) or 'its zones'}")
        restricted = dataclasses.replace(it, offerings=offerings)
        pool = nodepool_spec_from_model(_pool_doc(spec, [o.zone for o in offerings]))
        group = _Group(spec, restricted, sorted({o.zone for o in offerings}), pool, desired=spec.min_size)
        return group

    # --- the loop ----------------------------------------------------------------------------------------

    def next_wake(self, now: float) -> float:
        """The next scan."""
        return self.next_scan if self.next_scan > now else now + self.config.scan_interval

    def should_step(self, now: float) -> bool:
        """A scan is due."""
        return now >= self.next_scan

    def step(self, now: float) -> None:
        """A scan when one is due: ASG health, scale-up, else scale-down."""
        if now < self.next_scan:
            return
        self.next_scan = now + self.config.scan_interval
        sync_models(self.world.cluster)  # namespaces and volumes that pod conversion reads
        self._asg_reconcile()
        if not self._scale_up(now):
            self._scale_down(now)

    # --- ASGs --------------------------------------------------------------------------------------------

    def _asg_reconcile(self) -> None:
        """Forget terminated instances and launch replacements up to the desired capacity."""
        for group in self.groups:
            for instance in group.instances:
                if not instance.alive and instance.interrupt_at and instance.id not in self._counted_interruptions:
                    self._counted_interruptions.add(instance.id)
                    self.world.recorder.disruption("Interrupted")
            group.instances = [i for i in group.instances if i.alive]
            if len(group.instances) < group.desired:
                self._launch(group, group.desired - len(group.instances))

    def _launch(self, group: _Group, count: int) -> None:
        per_zone = Counter(i.zone for i in group.instances)
        for _ in range(count):
            usable = [z for z in group.zones if (group.instance_type.name, z, group.spec.capacity_type)
                      not in self.world.out_of_capacity]
            if not usable:
                return
            zone = min(usable, key=lambda z: (per_zone[z], z))
            offering = group.offering(zone)
            if offering is None:
                return
            per_zone[zone] += 1
            labels = {**group.instance_type.labels, **group.spec.labels, L.INSTANCE_TYPE: group.instance_type.name,
                      L.ZONE: zone, L.REGION: self.world.scenario.region, L.CAPACITY_TYPE: offering.capacity_type,
                      L.NODEPOOL: group.label, NODEGROUP_LABEL: group.spec.name}
            instance = self.world.ec2.run_instance(
                group.instance_type, offering, tags={"aws:autoscaling:groupName": group.spec.name},
                node_labels=labels, node_taints=[dict(t) for t in group.spec.taints],
                latency=self.config.launch_latency)
            group.instances.append(instance)

    # --- scale-up ----------------------------------------------------------------------------------------

    def _daemonset_pods(self) -> list[Pod]:
        return self.models.daemonset_pods(self._ds_docs)

    def _pending(self) -> list[Pod]:
        return self.models.pods(doc for doc in self.world.cluster.list(r.PODS)
                                if not (node_name(doc) or is_deleting(doc) or is_terminal(doc))
                                and is_unschedulable(doc))

    def _capacity(self, daemonsets: list[Pod]) -> list[ExistingNode]:
        """Ready nodes with their pods, plus upcoming nodes (launched, not Ready, or Ready with the not-ready taint
        the node lifecycle controller lifts milliseconds later) as empty templates."""
        bound: dict[str, list[Pod]] = {}
        for doc in self.world.cluster.list(r.PODS):
            if node_name(doc) and not is_terminal(doc) and not is_deleting(doc):
                pod = self.models.pod(doc)
                if pod is not None:
                    bound.setdefault(node_name(doc), []).append(pod)
        out = []
        ready = set()
        for node in self.world.cluster.list(r.NODES):
            if is_deleting(node) or not condition_true(node, "Ready") or any(
                    t.get("key") == L.NOT_READY_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or []):
                continue
            ready.add(name_of(node))
            existing = self.models.node(node, bound.get(name_of(node), []))
            if existing is not None:
                out.append(existing)
        for group in self.groups:
            for instance in group.instances:
                if instance.alive and instance.node_name not in ready:
                    labels = {**group.instance_type.labels, **group.pool.labels, L.ZONE: instance.zone,
                              L.CAPACITY_TYPE: instance.capacity_type}
                    ds = [p for p in daemonsets if runs_on_node(p, labels, group.pool.taints)]
                    out.append(ExistingNode(name=f"upcoming-{instance.id}", labels=labels,
                                            allocatable=group.instance_type.allocatable(),
                                            taints=group.pool.taints, pods=ds))
        return out

    def _scale_up(self, now: float) -> bool:
        pending = self._pending()
        if not pending:
            return False
        daemonsets = self._daemonset_pods()
        capacity = self._capacity(daemonsets)
        if capacity:
            fits = schedule(pending, capacity, [], {}, max_new_nodeclaims=0)
            placed = {p.key for pods in fits.existing.values() for p in pods}
            pending = [p for p in pending if p.key not in placed]
        if not pending:
            return False
        best: tuple[tuple[float, int, str], _Group, int] | None = None
        for group in self.groups:
            room = group.spec.max_size - group.desired
            if room <= 0:
                continue
            result = schedule(pending, [], [group.pool], {group.pool.name: [group.instance_type]},
                              daemonsets=daemonsets, max_new_nodeclaims=room, optimize=False)
            plans = result.new_nodeclaims[:room]
            if not plans:
                continue
            score = self._waste(plans, group)
            pods = sum(len(p.pods) for p in plans)
            key = (score, -pods, group.spec.name)
            if best is None or key < best[0]:
                best = (key, group, len(plans))
        if best is None:
            return False
        _, group, count = best
        group.desired += count
        self._launch(group, count)
        self.last_scale_up = now
        self.scale_ups += 1
        return True

    @staticmethod
    def _waste(plans: Sequence[Any], group: _Group) -> float:
        """Least-waste score: idle fraction of cpu plus idle fraction of memory over the new nodes."""
        alloc = group.instance_type.allocatable()
        cpu = sum(p.requests.get("cpu", 0) for p in plans)
        memory = sum(p.requests.get("memory", 0) for p in plans)
        total_cpu = alloc.get("cpu", 1) * len(plans)
        total_memory = alloc.get("memory", 1) * len(plans)
        return (1 - cpu / total_cpu) + (1 - memory / total_memory)

    # --- scale-down --------------------------------------------------------------------------------------

    def _scale_down(self, now: float) -> None:
        nodes = {name_of(n): n for n in self.world.cluster.list(r.NODES)
                 if NODEGROUP_LABEL in labels_of(n) and condition_true(n, "Ready") and not is_deleting(n)}
        pods_on: dict[str, list[Obj]] = {}
        for pod in self.world.cluster.list(r.PODS):
            if node_name(pod) in nodes and not is_terminal(pod) and not is_deleting(pod):
                pods_on.setdefault(node_name(pod), []).append(pod)
        for name in [n for n in self.unneeded_since if n not in nodes]:
            del self.unneeded_since[name]
        for name, node in nodes.items():
            allocatable = parse_resource_list((node.get("status") or {}).get("allocatable"))
            if _utilization(pods_on.get(name, []), allocatable, self.models) < self.config.utilization_threshold:
                self.unneeded_since.setdefault(name, now)
            else:
                self.unneeded_since.pop(name, None)
        if now - self.last_scale_up < self.config.delay_after_add:
            return
        eligible = sorted((since, name) for name, since in self.unneeded_since.items()
                          if now - since >= self.config.unneeded_time)
        empty = [name for _, name in eligible if all(is_daemonset_pod(p) for p in pods_on.get(name, []))]
        removed = 0
        for name in empty:
            if removed >= MAX_EMPTY_BULK_DELETE:
                break
            if self._remove(nodes[name], [], "Empty"):
                removed += 1
        if removed:
            return
        for _, name in eligible:
            movable = [p for p in pods_on.get(name, []) if not is_daemonset_pod(p)]
            if self._can_move(name, movable, nodes, pods_on) and self._remove(nodes[name], movable, "Underutilized"):
                return

    def _can_move(self, name: str, pods: Sequence[Obj], nodes: Mapping[str, Obj],
                  pods_on: Mapping[str, Sequence[Obj]]) -> bool:
        if any(not meta(p).get("ownerReferences") or annotations_of(p).get(SAFE_TO_EVICT) == "false" for p in pods):
            return False
        others = []
        for other, node in nodes.items():
            if other == name:
                continue
            existing = self.models.node(node, self.models.pods(pods_on.get(other, [])))
            if existing is not None:
                others.append(existing)
        moving = self.models.pods(pods, pending=True)
        if len(moving) != len(pods):
            return False
        result = schedule(moving, others, [], {}, max_new_nodeclaims=0)
        return not result.unschedulable and sum(len(v) for v in result.existing.values()) == len(moving)

    def _group_of(self, node: Obj) -> _Group | None:
        group_name = labels_of(node).get(NODEGROUP_LABEL)
        return next((g for g in self.groups if g.spec.name == group_name), None)

    def _remove(self, node: Obj, pods: Sequence[Obj], reason: str) -> bool:
        group = self._group_of(node)
        if group is None or group.desired <= group.spec.min_size:
            return False
        for pod in pods:
            try:
                self.world.cluster.evict_pod(str(meta(pod).get("namespace") or "default"), name_of(pod))
            except NotFoundError:
                continue
            except TooManyRequestsError:
                return False  # a PodDisruptionBudget forbids it now; try again at a later scan
        instance = next((i for i in group.instances if i.node_name == name_of(node)), None)
        try:
            self.world.cluster.delete(r.NODES, name_of(node))
        except NotFoundError:
            pass
        if instance is not None:
            self.world.ec2.terminate(instance.id)
            group.instances.remove(instance)
        group.desired -= 1
        self.unneeded_since.pop(name_of(node), None)
        self.world.recorder.disruption(reason)
        return True
