"""The disruption view of a snapshot: a :class:`~nodewright.disruption.model.ClusterView` built from the
cluster's models (:mod:`nodewright.state.models`), so ``nodewright.disruption`` itself never reads a Kubernetes
object.

Pure: the disruption controller passes the snapshot, ``now``, the instance types it fetched per NodePool and
what it remembers between passes (last pod event per node, cloud drift reasons); nothing here does I/O.

Conventions (Karpenter's): a NodeClaim without a registered Node is in flight (neither candidate nor
destination); ``expireAfter`` missing on a NodeClaim means the CRD default ``720h``; a Node or NodeClaim
carrying ``karpenter.sh/disrupted`` or a deletion timestamp is being disrupted; a node's price is its instance
type's offering in its zone and capacity type (0.0 when the type is unknown, so it never looks like a saving).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from nodewright.api import labels as L
from nodewright.api.annotations import (
    consolidation_hysteresis,
    consolidation_minimum_saving,
    min_node_lifetime,
)
from nodewright.api.durations import to_seconds
from nodewright.api.hashing import ec2nodeclass_hash, nodepool_hash
from nodewright.api.nodepool import DEFAULT_EXPIRE_AFTER
from nodewright.cloud.instancetype import InstanceType
from nodewright.disruption.model import (
    PDB,
    ClusterView,
    Node,
    NodeClassInfo,
    Pool,
)
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import (
    Obj,
    annotations_of,
    condition_true,
    is_deleting,
    labels_of,
    meta,
    name_of,
    parse_time,
)
from nodewright.kube.pdb import disruptions_allowed, overlapping_budgets
from nodewright.pricing.engine import MinimumSaving
from nodewright.scheduling import Pod
from nodewright.selectors import LabelSelector
from nodewright.state.blocked import DRA_REASON, has_dra_requirements
from nodewright.state.cluster import ClusterState
from nodewright.state.models import ClusterModels
from nodewright.state.pods import needs_eviction

log = logging.getLogger("nodewright.disruption")


def _seconds(text: Any, default: float | None = None) -> float | None:
    if text is None:
        return default
    try:
        value = to_seconds(str(text))
    except ValueError:
        return default
    return None if value is None else float(value)


def pool_from_doc(doc: Obj, instance_types: Sequence[InstanceType], daemonsets: Sequence[Pod],
                  models: ClusterModels | None = None) -> Pool:
    """A :class:`Pool` from a ``karpenter.sh/v1`` NodePool dict.

    Raises:
        NodewrightValidationError: an invalid NodePool.
    """
    models = models or ClusterModels()
    model = models.nodepool(doc)
    disruption = model.spec.disruption
    annotations = model.metadata.annotations or {}
    return Pool(
        name=model.name,
        spec=models.nodepool_spec(doc, daemonsets),
        instance_types=list(instance_types),
        consolidation_policy=disruption.consolidation_policy,
        consolidate_after=_seconds(disruption.consolidate_after),
        budgets=list(disruption.budgets),
        hash=nodepool_hash(model),
        # Malformed nodewright.io/* annotations fall back to their defaults (nodepool_status reports them).
        min_node_lifetime=min_node_lifetime(annotations),
        hysteresis=consolidation_hysteresis(annotations),
        static=model.spec.replicas is not None,
        minimum_saving=MinimumSaving(*consolidation_minimum_saving(annotations)),
    )


def _ids(entries: Any, key: str = "id") -> frozenset[str] | None:
    if entries is None:
        return None
    return frozenset(str(e.get(key)) for e in entries if e.get(key))


def nodeclass_info(doc: Obj) -> NodeClassInfo:
    """A :class:`NodeClassInfo` from an EC2NodeClass dict (hash of the spec; resolved IDs from its status)."""
    status = doc.get("status") or {}
    try:
        digest = ec2nodeclass_hash(doc)
    except NodewrightValidationError:
        digest = ""
    return NodeClassInfo(
        name=name_of(doc),
        hash=digest,
        ami_ids=_ids(status.get("amis")),
        subnet_ids=_ids(status.get("subnets")),
        subnet_zones=_ids(status.get("subnets"), "zone"),
        security_group_ids=_ids(status.get("securityGroups")),
    )


def _pods(state: ClusterState, node: str) -> tuple[list[Pod], list[Pod], dict[str, str]]:
    """(every bound pod, the reschedulable ones, the reschedulable ones no simulation can place again: pod key ->
    why) as scheduler pods. A pod with DRA requirements cannot be placed again (Karpenter's scheduler refuses it
    with ``IGNORE_DRA_REQUESTS=true``, :mod:`nodewright.state.blocked`)."""
    everything: list[Pod] = []
    movable: list[Pod] = []
    unmovable: dict[str, str] = {}
    for doc in state.pods_on(node):
        if (doc.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        pod = state.models.pod(doc)
        if pod is None:
            continue
        everything.append(pod)
        if needs_eviction(doc):
            movable.append(pod)
            if has_dra_requirements(doc.get("spec") or {}):
                unmovable[pod.key] = DRA_REASON
    return everything, movable, unmovable


def node_from_state(
    claim: Obj, doc: Obj, state: ClusterState, pools: Mapping[str, Pool],
    last_pod_event: float | None, cloud_drift: str | None, now: float,
) -> Node | None:
    """A :class:`Node` for a NodeClaim and its registered Node (None when the Node is unreadable)."""
    everything, movable, unmovable = _pods(state, name_of(doc))
    view = state.models.node(doc, everything)
    if view is None:
        return None
    for key, value in labels_of(claim).items():
        view.labels.setdefault(key, value)
    view.__post_init__()  # refresh instance type/zone/capacity type from the merged labels
    nodepool = labels_of(claim).get(L.NODEPOOL, "")
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    pool = pools.get(nodepool)
    node_ann, claim_ann = annotations_of(doc), annotations_of(claim)
    return Node(
        name=name_of(doc),
        nodeclaim=name_of(claim),
        nodepool=nodepool,
        view=view,
        pods=movable,
        created=parse_time(meta(claim).get("creationTimestamp")) or now,
        price=pool.price_of(view.labels) if pool else 0.0,
        initialized=view.labels.get(L.INITIALIZED) == "true" or condition_true(claim, L.CONDITION_INITIALIZED),
        ready=condition_true(doc, "Ready"),
        deleting=is_deleting(claim) or view.marked_for_deletion,  # the Node deleting or tainted disrupted
        do_not_disrupt="true" in (node_ann.get(L.DO_NOT_DISRUPT), claim_ann.get(L.DO_NOT_DISRUPT)),
        last_pod_event=last_pod_event if last_pod_event is not None else parse_time(status.get("lastPodEventTime")),
        expire_after=_seconds(spec.get("expireAfter", DEFAULT_EXPIRE_AFTER)),
        termination_grace_period=_seconds(spec.get("terminationGracePeriod")),
        annotations=dict(claim_ann),
        nodeclass=str((spec.get("nodeClassRef") or {}).get("name") or ""),
        image_id=str(status.get("imageID") or ""),
        cloud_drift=cloud_drift,
        unmovable=unmovable,
    )


def pdbs_from_state(state: ClusterState) -> list[PDB]:
    """Every PodDisruptionBudget with the disruptions it allows now (Kubernetes' arithmetic) and the pods it
    selects together with another budget (:func:`nodewright.kube.pdb.overlapping_budgets`: never evictable)."""
    by_ns: dict[str, list[Obj]] = {}
    for pod in state.pods.values():
        by_ns.setdefault(str(meta(pod).get("namespace") or "default"), []).append(pod)
    overlaps: dict[str, set[str]] = {}
    for key, names in overlapping_budgets(state.pdbs, state.pods.values()).items():
        for name in names:
            overlaps.setdefault(f"{key.split('/', 1)[0]}/{name}", set()).add(key)
    out = []
    for doc in state.pdbs:
        ns = str(meta(doc).get("namespace") or "default")
        out.append(PDB(name_of(doc), ns, LabelSelector.from_dict((doc.get("spec") or {}).get("selector")),
                       disruptions_allowed(doc, by_ns.get(ns, [])),
                       frozenset(overlaps.get(f"{ns}/{name_of(doc)}", ()))))
    return out


def view_from_state(
    state: ClusterState,
    now: float,
    instance_types: Mapping[str, Sequence[InstanceType]],
    last_pod_events: Mapping[str, float] | None = None,
    cloud_drift: Mapping[str, str | None] | None = None,
) -> ClusterView:
    """The disruption inputs of one snapshot.

    Args:
        state: the cluster snapshot.
        now: epoch seconds.
        instance_types: NodePool name -> instance types it may launch (pools missing here are skipped).
        last_pod_events: node name -> epoch seconds of its last pod event (the controller tracks these).
        cloud_drift: NodeClaim name -> the cloud provider's drift reason (or None).
    """
    daemonsets = state.daemonset_models()
    pools: dict[str, Pool] = {}
    for name, doc in sorted(state.nodepools.items()):
        if is_deleting(doc) or name not in instance_types:
            continue
        try:
            pools[name] = pool_from_doc(doc, instance_types[name], daemonsets, state.models)
        except NodewrightValidationError as err:
            log.error("disruption ignores nodepool %s: %s", name, err, extra={"nodepool": name})
    nodes: list[Node] = []
    managed: set[str] = set()
    for claim in state.nodeclaims.values():
        registered = state.node_for(claim)
        if registered is None:
            continue
        managed.add(name_of(registered))
        node = node_from_state(claim, registered, state, pools, (last_pod_events or {}).get(name_of(registered)),
                               (cloud_drift or {}).get(name_of(claim)), now)
        if node is not None:
            nodes.append(node)
    unmanaged = []
    for name, doc in state.nodes.items():
        if name in managed or L.NODEPOOL in labels_of(doc):
            continue
        node_view = state.models.node(doc, _pods(state, name)[0])
        if node_view is not None:
            unmanaged.append(node_view)
    return ClusterView(
        nodes=nodes,
        pools=pools,
        nodeclasses={name: nodeclass_info(doc) for name, doc in state.nodeclasses.items()},
        pdbs=pdbs_from_state(state),
        unmanaged=unmanaged,
        daemonsets=daemonsets,
    )

