"""``nodewright simulate -f FILE...``: the controller's first provisioning batch for a set of manifests, offline.

Reads multi-document YAML (NodePool of any version or Provisioner, EC2NodeClass/AWSNodeTemplate, NodeClaim,
NodeOverlay (applied with ``FEATURE_GATES=NodeOverlay=true``, as the controller),
Deployment, StatefulSet, ReplicaSet, Job, CronJob (one run), Pod, DaemonSet, PodDisruptionBudget, LimitRange, Namespace
(its labels, for pod affinity ``namespaceSelector``), RuntimeClass (pod overhead), PersistentVolumeClaim/PersistentVolume/StorageClass (volume
zones, CSI drivers), CSINode (volume attach limits), Node with pods bound by ``spec.nodeName``, CapacityBuffer
and PodTemplate: the buffer's virtual pods join the batch, docs/capacity-buffers.md), converts the Karpenter kinds to v1 through :mod:`nodewright.api`, loads every
object into an in-memory cluster (:class:`~nodewright.kube.memory.InMemoryCluster`: workloads become their
pods, pending ones marked ``Unschedulable`` as kube-scheduler would) and runs the provisioning controller's
batch on it (:meth:`nodewright.controllers.provisioning.Provisioner.provision`) with the simulated cloud
provider over the bundled EC2 catalog -- the same path ``nodewright run`` and scenario replay take, without
I/O. So the EC2NodeClass's kubelet settings (``maxPods``, reserved resources) shape allocatable, the capacity a
NodePool already owns (its Nodes and NodeClaims) counts against its ``limits``, and the pods of Nodes being
deleted (``metadata.deletionTimestamp``) are placed again. A NodePool naming an EC2NodeClass that is not in
the input gets one with the defaults (no kubelet overrides).

The region is ``--region`` when given, else inferred from zone requirements of the NodePools or zone labels
of the Nodes (``ap-northeast-2a`` -> ``ap-northeast-2``), else ``us-east-1``; every zone of the region's
catalog is available.

The JSON output is the contract of DESIGN.md (``nodeclaims``, ``existing``, ``unschedulable``,
``total_price_per_hour``) plus ``region``, ``price_source``, ``events`` (the log sentences), ``target_utilization``
and ``limits`` (each limited NodePool's ``spec.limits`` as quantities).
"""

from __future__ import annotations

import logging
import os
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nodewright.admission import apply_limit_ranges, missing_runtime_class, runtime_classes
from nodewright.api import labels as L
from nodewright.api.manifests import KarpenterObjects, parse_documents
from nodewright.cloud.catalog import (
    WINDOWS_LICENSE_PER_VCPU_HOUR,
    catalog_price_source,
    price_table,
    region_zones,
)
from nodewright.cloud.labels import region_of_zone
from nodewright.cloud.overlay import OverlayStore
from nodewright.cloud.simulated import LatencyDistribution, SimulatedCloudProvider, SimulatedEC2
from nodewright.controllers.buffer import CapacityBufferController
from nodewright.controllers.common import Context
from nodewright.controllers.provisioning import Provisioner
from nodewright.controllers.static import StaticCapacityController
from nodewright.errors import NodewrightValidationError, combine, prefixed
from nodewright.kube import resources as r
from nodewright.kube.errors import AlreadyExistsError
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import Obj
from nodewright.metrics import Metrics
from nodewright.pricing import PricingPolicy, Usage
from nodewright.pricing.report import add_effective_prices
from nodewright.quantities import format_quantity
from nodewright.review import Review
from nodewright.scheduling import (
    ExistingNode,
    NodePoolSpec,
    SchedulingResult,
    daemonset_pod,
    pods_from_workload,
)
from nodewright.scheduling.pods import WORKLOAD_KINDS
from nodewright.settings import feature_gates, min_values_policy, preference_policy, scheduler_config
from nodewright.sim.render import targets_text
from nodewright.sim.volumes import bind_static_claims
from nodewright.sim.workloads import pod_manifest
from nodewright.state.cluster import snapshot
from nodewright.state.models import models_for
from nodewright.state.pods import pod_key

log = logging.getLogger("nodewright.sim")
#: Kinds whose zones restrict the pods mounting them (:class:`nodewright.state.models.VolumeTopology`), and
#: CSINodes, whose attach limits bound the volumes of a node (:mod:`nodewright.state.volumeusage`).
VOLUME_KINDS = {"PersistentVolumeClaim": r.PVCS, "PersistentVolume": r.PVS, "StorageClass": r.STORAGECLASSES,
                "CSINode": r.CSINODES}

DEFAULT_REGION = "us-east-1"
#: Pods named in one "unschedulable" line of the table; the rest are counted.
SHOWN_PODS = 5
#: CapacityBuffers and their PodTemplates (a CapacityBuffer in the input turns its gate on: docs/capacity-buffers.md).
BUFFER_KINDS = {"CapacityBuffer": r.CAPACITYBUFFERS, "PodTemplate": r.PODTEMPLATES}
#: Workloads also stored as objects, for a CapacityBuffer's scalableRef and for the selector of the default
#: topology spread (``SCHEDULER_CONFIG``; with Services: :mod:`nodewright.state.defaultspread`).
BUFFER_TARGETS = {"Deployment": r.DEPLOYMENTS, "StatefulSet": r.STATEFULSETS, "ReplicaSet": r.REPLICASETS,
                  "ReplicationController": r.REPLICATIONCONTROLLERS}
#: The simulated moment of the decision (epoch seconds; only creation and deletion timestamps depend on it).
DECISION_TIME = 1_784_548_800.0  # 2026-07-20T12:00:00Z
#: What a NodePool's missing EC2NodeClass stands for: the defaults (AL2023, no kubelet overrides).
DEFAULT_NODECLASS_SPEC: dict[str, Any] = {
    "amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "nodewright-simulated",
    "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "simulated"}}],
    "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "simulated"}}],
}


def infer_region(nodepools: Sequence[NodePoolSpec], nodes: Sequence[ExistingNode]) -> str | None:
    """Region from the first zone found in NodePool requirements, then in node labels."""
    for np in nodepools:
        req = np.requirements.get(L.ZONE)
        if req is not None and not req.complement:
            for zone in sorted(req.values):
                region = region_of_zone(zone)
                if region:
                    return region
    for node in nodes:
        region = node.labels.get(L.REGION) or region_of_zone(node.labels.get(L.ZONE, ""))
        if region:
            return region
    return None


class _Clock:
    def __call__(self) -> float:
        return DECISION_TIME


def load_cluster(objects: KarpenterObjects, cluster: InMemoryCluster, warn: bool = True) -> None:
    """Create the parsed documents in ``cluster`` as an API server would hold them.

    Workloads become their pods (``<name>-<i>``; pending ones ``PodScheduled=False/Unschedulable``, bound
    ones Running), admitted with the LimitRange defaults of their namespace (:mod:`nodewright.admission`); a NodePool, NodeClaim, Node or Pod with ``metadata.deletionTimestamp`` is created and then
    deleted (held by a finalizer), so it is terminating as in the input (so are PersistentVolumes and claims); a NodePool whose EC2NodeClass is
    missing gets a default one. Every invalid document is reported, not only the first; statically bound
    PersistentVolume/Claim pairs are bound first (:func:`nodewright.sim.volumes.bind_static_claims`). With
    ``warn=False`` nothing is logged (missing RuntimeClasses, skipped kinds).

    Raises:
        NodewrightValidationError: an invalid document (path ``documents[i].<field>``, reason ending
            ``(in <Kind> '<name>')``). A kind no decision reads is skipped, named in one warning line
            (:meth:`nodewright.review.Review.skipped_line`).
    """
    classes = {nc.name for nc in objects.ec2nodeclasses}
    for nodeclass in objects.ec2nodeclasses:
        cluster.create(r.EC2NODECLASSES, nodeclass.to_manifest())
    leaving: list[tuple[r.ResourceKind, str, str | None]] = []
    for nodepool in objects.nodepools:
        _create_held(cluster, r.NODEPOOLS, nodepool.to_manifest(), leaving)
        ref = nodepool.spec.template.spec.node_class_ref
        if ref.kind == "EC2NodeClass" and ref.name not in classes:
            classes.add(ref.name)
            cluster.create(r.EC2NODECLASSES, {"apiVersion": f"{L.AWS_GROUP}/v1", "kind": "EC2NodeClass",
                                              "metadata": {"name": ref.name}, "spec": DEFAULT_NODECLASS_SPEC})
    for claim in objects.nodeclaims:
        _create_held(cluster, r.NODECLAIMS, claim.to_manifest(), leaving)
    for overlay in objects.nodeoverlays:  # applied when FEATURE_GATES has NodeOverlay=true (nodewright.cloud.overlay)
        cluster.create(r.NODEOVERLAYS, overlay.to_manifest())
    # LimitRange defaults, as the API server's admission applies them to every workload of their namespace
    # (idempotent: the CLI has usually applied them already).
    others = bind_static_claims(apply_limit_ranges(objects.others))  # static PV/PVC pairs bound, as the PV controller would
    skipped = Review()  # kinds a decision does not read: one warning line naming them, never fatal
    errors: list[NodewrightValidationError] = []  # every invalid document, reported together
    for index, doc in enumerate(others):
        kind = doc.get("kind")
        try:
            if kind in WORKLOAD_KINDS:
                for pod in _workload_pods(doc):
                    _create_held(cluster, r.PODS, pod, leaving)
                if kind in BUFFER_TARGETS:  # what a CapacityBuffer's scalableRef reads
                    cluster.create(BUFFER_TARGETS[str(kind)], doc)
            elif kind in BUFFER_KINDS:
                cluster.create(BUFFER_KINDS[str(kind)], doc)
            elif kind == "Service":  # its selector deduces the default spread selector (SCHEDULER_CONFIG)
                cluster.create(r.SERVICES, {**doc, "metadata": {**(doc.get("metadata") or {}),
                                                                "namespace": _namespace(doc)}})
            elif kind == "LimitRange":
                cluster.create(r.LIMITRANGES, doc)
            elif kind == "Namespace":
                cluster.create(r.NAMESPACES, doc)
            elif kind == "RuntimeClass":
                cluster.create(r.RUNTIMECLASSES, doc)
            elif kind == "DaemonSet":
                daemonset_pod(doc)  # validated here, so an invalid one is reported with its path
                cluster.create(r.DAEMONSETS, doc)
            elif kind == "PodDisruptionBudget":
                cluster.create(r.PDBS, doc)
            elif kind == "Node":
                _create_held(cluster, r.NODES, doc, leaving)
            elif kind in VOLUME_KINDS:
                _create_held(cluster, VOLUME_KINDS[str(kind)], doc, leaving)
            else:  # named once (the CLI's review has left these out already)
                skipped.skipped[str(kind)] += 1
        except NodewrightValidationError as err:
            errors.append(prefixed(err, f"documents[{objects.other_indices[index]}]",
                                   f" (in {kind} {_name(doc, index)!r})"))
        except AlreadyExistsError as err:
            errors.append(NodewrightValidationError(
                f"documents[{objects.other_indices[index]}].metadata.name",
                f"{err}: an object of the same kind and name is defined earlier in this namespace, and the API "
                f"server would refuse the second (in {kind} {_name(doc, index)!r})"))
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as err:
            # A field of the wrong type (a list where Kubernetes has a map, ...) that the converters do not check.
            errors.append(NodewrightValidationError(
                f"documents[{objects.other_indices[index]}]",
                f"malformed {kind}: a field has the wrong type ({type(err).__name__}: {err}); kubectl apply "
                f"--dry-run=server names it (in {kind} {_name(doc, index)!r})",
            ))
    if errors:
        raise combine(errors)
    for resource, name, namespace in leaving:
        cluster.delete(resource, name, namespace)
    if not warn:  # a validation pass (document_problems): the decision's own pass prints the warnings
        return
    _warn_missing_runtime_classes(cluster)
    line = skipped.skipped_line()
    if line:
        log.warning(line)


def document_problems(objects: KarpenterObjects) -> list[NodewrightValidationError]:
    """Every problem :func:`load_cluster` finds in ``objects``' other documents (workloads, Nodes, volumes, ...),
    without deciding: lets ``simulate`` report them in the same run as the Karpenter kinds' problems."""
    try:
        load_cluster(objects, InMemoryCluster(_Clock(), seed=0), warn=False)
    except NodewrightValidationError as err:
        return err.problems
    return []


def _warn_missing_runtime_classes(cluster: InMemoryCluster) -> None:
    """One warning line per RuntimeClass that pods name but the input lacks: the API server would refuse those
    pods; here they are read without its overhead."""
    classes = runtime_classes(cluster.list(r.RUNTIMECLASSES))
    missing: dict[str, list[str]] = {}
    for pod in cluster.list(r.PODS):
        name = missing_runtime_class(pod.get("spec") or {}, classes)
        if name is not None:
            missing.setdefault(name, []).append(pod_key(pod))
    for name, keys in sorted(missing.items()):
        log.warning("RuntimeClass %r not in the input: %d pod(s) name it (%s), read without its overhead",
                    name, len(keys), ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else ""))


def _create_held(cluster: InMemoryCluster, kind: r.ResourceKind, doc: Obj,
                 leaving: list[tuple[r.ResourceKind, str, str | None]]) -> None:
    """Create ``doc``; one carrying ``metadata.deletionTimestamp`` gets a holding finalizer and is noted in
    ``leaving`` to be deleted once everything exists (an API server never accepts a deletionTimestamp on
    create, so a terminating Node or Pod is made by deleting it)."""
    meta = dict(doc.get("metadata") or {})
    if meta.get("deletionTimestamp"):
        meta["finalizers"] = [*(meta.get("finalizers") or []), "simulate.nodewright.io/hold"]
        leaving.append((kind, str(meta.get("name")), meta.get("namespace") if kind.namespaced else None))
    cluster.create(kind, {**doc, "metadata": meta})


def _namespace(doc: Mapping[str, Any]) -> str:
    meta = doc.get("metadata")
    return str((meta.get("namespace") if isinstance(meta, dict) else None) or "default")


def _name(doc: Mapping[str, Any], default: object) -> object:
    meta = doc.get("metadata")
    return meta.get("name", default) if isinstance(meta, dict) else default


def _workload_pods(doc: Mapping[str, Any]) -> list[Obj]:
    """The pod objects a workload document stands for (validated through the scheduler's conversion)."""
    pods = pods_from_workload(doc)
    if doc.get("kind") == "Pod":
        meta = doc.get("metadata") or {}
        spec = doc.get("spec") or {}
        bound = bool(spec.get("nodeName"))
        phase = (doc.get("status") or {}).get("phase") or "Running"  # a Succeeded/Failed pod keeps its phase
        status = {"phase": phase, "conditions": [{"type": "PodScheduled", "status": "True"}]} if bound else \
            _unschedulable()
        return [{**doc, "metadata": {**meta, "namespace": meta.get("namespace") or "default"}, "status": status}]
    spec = doc.get("spec") or {}
    template = ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") if doc.get("kind") == "CronJob" \
        else spec.get("template")
    out = []
    for pod in pods:
        manifest = pod_manifest(template or {}, pod.namespace, pod.name, pod.owner_kind, pod.owner_name,
                                pod.node_name)
        manifest["status"] = {"phase": "Running", **manifest["status"]} if pod.node_name else _unschedulable()
        out.append(manifest)
    return out


def _unschedulable() -> dict[str, Any]:
    return {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}


def first_batch(cluster: InMemoryCluster, cloud: Any, clock: Any,
                policy: PricingPolicy | None = None) -> SchedulingResult:
    """The provisioning controller's first batch over ``cluster``: every provisionable pod (and every pod of a
    leaving node) scheduled at once; NodeClaims are created in ``cluster``. Static NodePools (``spec.replicas``)
    get their NodeClaims first (:class:`~nodewright.controllers.static.StaticCapacityController`), so pending
    pods land on them as in-flight capacity and the batch never launches for those pools (only under the
    ``StaticCapacity`` gate; off, Karpenter's default, they get none). With ``policy``, the
    provisioner decides on effective marginal prices (docs/pricing.md). Karpenter's ``MIN_VALUES_POLICY``,
    ``PREFERENCE_POLICY``, ``FEATURE_GATES`` and ``SCHEDULER_CONFIG`` are read from the environment, as the
    controller reads them.

    Raises:
        NodewrightValidationError: ``MIN_VALUES_POLICY`` is neither Strict nor BestEffort,
            ``PREFERENCE_POLICY`` neither Respect nor Ignore, or ``FEATURE_GATES`` or ``SCHEDULER_CONFIG`` is
            invalid."""
    gates = feature_gates(os.environ)
    models_for(cluster).use_scheduler_config(scheduler_config(os.environ))  # default topology spread
    ctx = Context(cluster, cloud, clock, Metrics(), "simulate", overlays=OverlayStore(gates.node_overlay))
    current = None if policy is None else lambda: policy
    # Static NodePools' replicas exist first (under the StaticCapacity gate, as the controller runs it).
    StaticCapacityController(ctx, current, enabled=gates.static_capacity).reconcile(snapshot(cluster))
    # CapacityBuffers in the input: their virtual pods join the batch (the gate is on when the input has one).
    buffers = CapacityBufferController(ctx, enabled=bool(cluster.list(r.CAPACITYBUFFERS)))
    buffers.reconcile(snapshot(cluster))
    provisioner = Provisioner(ctx, pricing_policy=current, min_values_policy=min_values_policy(os.environ),
                              preference_policy=preference_policy(os.environ), buffers=buffers)
    state = snapshot(cluster)
    pending = provisioner.pending_pods(state, clock())
    virtual = buffers.virtual_pods()
    result = provisioner.provision(pending, state, clock(), virtual) if pending or virtual else None
    return result if result is not None else SchedulingResult()


def decide(documents: Sequence[Mapping[str, Any]], region: str | None = None,
           pricing: tuple[PricingPolicy, str] | None = None) -> dict[str, Any]:
    """Run the first provisioning batch over ``documents`` (see module docstring); the JSON-ready result.

    Raises:
        NodewrightValidationError: see :func:`decide_in_cluster`.
    """
    return decide_in_cluster(documents, region, pricing)[0]


def decide_in_cluster(documents: Sequence[Mapping[str, Any]], region: str | None = None,
                      pricing: tuple[PricingPolicy, str] | None = None) -> tuple[dict[str, Any], InMemoryCluster]:
    """:func:`decide`, also returning the in-memory cluster afterwards (the NodeClaims the batch created).

    With ``pricing`` (a policy and a label naming it), the provisioner chooses on effective marginal prices and
    the result adds them beside the list prices (:func:`nodewright.pricing.report.add_effective_prices`).

    Raises:
        NodewrightValidationError: an invalid document (path names it), no NodePool/Provisioner, or an unknown
            region.
    """
    objects = parse_documents([dict(d) for d in documents])
    if not objects.nodepools:
        raise NodewrightValidationError("", "no NodePool or Provisioner in the input: nothing could launch nodes")
    clock = _Clock()
    cluster = InMemoryCluster(clock, seed=0)
    load_cluster(objects, cluster)
    models = models_for(cluster)
    state = snapshot(cluster)
    pools = [models.nodepool_spec(doc) for doc in state.nodepools.values()]
    nodes = [n for n in (models.node(doc) for doc in state.nodes.values()) if n is not None]
    chosen = region or infer_region(pools, nodes) or DEFAULT_REGION
    zones = region_zones(chosen)
    ec2 = SimulatedEC2(clock, random.Random(0), LatencyDistribution(30.0, 30.0))
    cloud = SimulatedCloudProvider(ec2, chosen, zones, lambda name: cluster.get(r.EC2NODECLASSES, name),
                                   models.kubelet, reserved_capacity=feature_gates(os.environ).reserved_capacity)
    result = first_batch(cluster, cloud, clock, None if pricing is None else pricing[0])
    source = catalog_price_source(chosen)
    if any(plan.capacity_type == "spot" for plan in result.new_nodeclaims):
        # Spot prices here are the catalog's model, not quotes: say so wherever a price is shown.
        source += "; spot prices modelled at 60-70% off on-demand per family"
    if any(plan.labels.get(L.OS) == "windows" for plan in result.new_nodeclaims):
        source += f"; Windows = Linux price + ${WINDOWS_LICENSE_PER_VCPU_HOUR}/vCPU-h modelled license"
    decision = to_json(result, chosen, source, pools)
    if pricing is not None:
        existing = [u for u in (Usage.from_labels(n.labels) for n in nodes) if u is not None]
        decision = add_effective_prices(decision, pricing[0], price_table(chosen), existing, pricing[1])
    return decision, cluster


def to_json(result: SchedulingResult, region: str, price_source: str,
            pools: Sequence[NodePoolSpec] = ()) -> dict[str, Any]:
    """The DESIGN.md decision contract for ``result``, plus nodewright's ``target_utilization``: per NodeClaim
    (its pool's) and per NodePool (``{"name": fraction}``, 1.0 = pack fully; see
    :mod:`nodewright.api.annotations`)."""
    targets = {p.name: p.target_utilization or 1.0 for p in pools}
    return {
        "region": region,
        "price_source": price_source,
        "target_utilization": dict(sorted(targets.items())),
        # Each NodePool's spec.limits as given (quantities), {} when unlimited: what --replicas max is checked against.
        "limits": {p.name: {k: format_quantity(k, v) for k, v in sorted((p.limits or {}).items())} for p in pools
                   if p.limits},
        "nodeclaims": [
            {
                "nodepool": nc.nodepool,
                "target_utilization": targets.get(nc.nodepool, 1.0),
                "instance_type": nc.instance_type.name,
                "instance_types": [t.name for t in nc.instance_types],
                "capacity_type": nc.capacity_type,
                "zone": nc.zone,
                "arch": nc.arch,
                "price_per_hour": round(nc.price, 6),
                "labels": dict(sorted(nc.labels.items())),
                "taints": [t.to_dict() for t in nc.taints],
                "requests": dict(nc.requests),
                "pods": [p.key for p in nc.pods],
            }
            for nc in result.new_nodeclaims
        ],
        "existing": [{"node": name, "pods": [p.key for p in pods]} for name, pods in sorted(result.existing.items())],
        "unschedulable": [{"pod": key, "reason": reason} for key, reason in result.unschedulable.items()],
        "total_price_per_hour": round(result.total_price, 6),
        "events": [e.message for e in result.events],
    }


def peak_line(decision: Mapping[str, Any], sizings: Sequence[Any]) -> str:
    """What ``simulate --replicas max`` found about the peak (:class:`nodewright.sim.autoscaling.Sizing` each):
    whether the NodePools' limits leave pods of the autoscaled workloads unschedulable, one line."""
    sized = {(s.namespace, s.target) for s in sizings if s.replicas is not None}
    pods = sum(s.replicas for s in sizings if s.replicas is not None)
    mine = [u for u in decision["unschedulable"]
            if (u["pod"].split("/", 1)[0], u["pod"].split("/", 1)[1].rsplit("-", 1)[0]) in sized]
    if not mine:
        return (f"peak (--replicas max): {len(sized)} autoscaled workload(s), {pods} pod(s), fit within the "
                f"NodePools' limits at ${decision['total_price_per_hour']:.4f}/h")
    limits = "; ".join(f"{name} {', '.join(f'{k}={v}' for k, v in sorted(lim.items()))}"
                       for name, lim in sorted((decision.get("limits") or {}).items())) or "none"
    return (f"warning: peak (--replicas max): {len(mine)} of the autoscaled workloads' {pods} pod(s) are "
            f"unschedulable (NodePool limits: {limits}): raise spec.limits or lower maxReplicas, or see the "
            "unschedulable lines for other reasons")


def _natural(key: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", key)]


def _percent(fraction: float) -> str:
    return f"{fraction * 100:g}%"


def not_ready_lines(not_ready: Mapping[str, str]) -> list[str]:
    """``{NodePool: why it cannot launch}`` as one line per reason, naming its NodePools (``NodePools 'batch',
    'general' cannot launch: ...``): the table of ``simulate --snapshot`` and ``explain``, and ``diff``'s."""
    by_reason: dict[str, list[str]] = {}
    for name, why in not_ready.items():
        by_reason.setdefault(why, []).append(repr(name))
    return [f"NodePool{'s' if len(names) > 1 else ''} {', '.join(names)} cannot launch: {why}"
            for why, names in by_reason.items()]


def render_table(decision: Mapping[str, Any]) -> str:
    """What a person reads: one row per new node, the pods per node, the NodePools that cannot launch (``not_ready``,
    one line per reason), the unschedulable pods (one line per reason), $/h, and a summary line (which says why
    when no NodePool can launch, rather than a bare $0/h)."""
    effective = "total_effective_price_per_hour" in decision  # with --pricing: a column beside list $/h
    rows = [("NODEPOOL", "TARGET", "INSTANCE TYPE", "CAPACITY", "ZONE", "ARCH", "PODS", "$/H")
            + (("EFFECTIVE $/H",) if effective else ())]
    for nc in decision["nodeclaims"]:
        rows.append(
            (
                nc["nodepool"],
                _percent(nc.get("target_utilization", 1.0)),
                nc["instance_type"],
                nc["capacity_type"],
                nc["zone"],
                nc["arch"],
                str(len(nc["pods"])),
                f"{nc['price_per_hour']:.4f}",
            )
            + ((f"{nc['effective_price_per_hour']:.4f}",) if effective else ())
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    if len(rows) == 1:
        lines = []  # nothing launches: no table header over no rows
    for i, nc in enumerate(decision["nodeclaims"]):
        lines.append(f"node {i + 1} ({nc['instance_type']}): {', '.join(nc['pods'])}")
    for entry in decision["existing"]:
        lines.append(f"existing {entry['node']}: {', '.join(entry['pods'])}")
    # NodePools that cannot launch (simulate --snapshot: whatif.dryrun.not_ready_nodepools), one line per reason.
    not_ready = decision.get("not_ready") or {}
    lines.extend(not_ready_lines(not_ready))
    by_reason: dict[str, list[str]] = {}
    for entry in decision["unschedulable"]:
        by_reason.setdefault(entry["reason"], []).append(entry["pod"])
    # One line per reason, in the scheduler's words: the largest group first, pods in name order.
    for reason, pods in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        pods = sorted(pods, key=_natural)
        shown = ", ".join(pods[:SHOWN_PODS]) + (f" and {len(pods) - SHOWN_PODS} more" if len(pods) > SHOWN_PODS else "")
        lines.append(f"unschedulable ({len(pods)} pod{'s' if len(pods) != 1 else ''}: {shown}): {reason}")
    if decision.get("target_utilization"):
        lines.append(f"target utilization per NodePool: {targets_text(decision['target_utilization'])}")
    placed = sum(len(nc["pods"]) for nc in decision["nodeclaims"])
    on_existing = sum(len(e["pods"]) for e in decision["existing"])
    lines.append(f"prices: {decision['price_source']}")
    pools = set(decision.get("target_utilization") or {})
    stuck = not decision["nodeclaims"] and bool(not_ready) and pools <= set(decision.get("not_ready") or {})
    lines.append(
        f"{len(decision['nodeclaims'])} new node(s) for {placed} pod(s), {on_existing} pod(s) on existing nodes, "
        f"{len(decision['unschedulable'])} unschedulable; "
        + ("nothing can launch: no NodePool is ready (see above)" if stuck else
           f"total ${decision['total_price_per_hour']:.4f}/h ({decision['region']})")
    )
    if effective:
        lines.append(f"effective ${decision['total_effective_price_per_hour']:.4f}/h under {decision['pricing_policy']}")
    return "\n".join(lines)
