"""Build a :class:`~nodewright.disruption.model.ClusterView` from Kubernetes objects (plain dicts).

Pure: the disruption controller passes the snapshot, ``now``, the instance types it fetched per NodePool and
what it remembers between passes (last pod event per node, cloud drift reasons); nothing here does I/O.

Conventions (Karpenter's): a NodeClaim without a registered Node is in flight (neither candidate nor
destination); ``expireAfter`` missing on a NodeClaim means the CRD default ``720h``; a Node or NodeClaim
carrying ``karpenter.sh/disrupted`` or a deletion timestamp is being disrupted; a node's price is its instance
type's offering in its zone and capacity type (0.0 when the type is unknown, so it never looks like a saving).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from nodewright.api import labels as wk
from nodewright.api.annotations import consolidation_hysteresis, min_node_lifetime
from nodewright.api.durations import to_seconds
from nodewright.api.manifests import parse_nodepool
from nodewright.api.nodepool import DEFAULT_EXPIRE_AFTER
from nodewright.cloud.instancetype import InstanceType
from nodewright.disruption.hashing import ec2nodeclass_hash, nodepool_hash
from nodewright.disruption.model import (
    PDB,
    ClusterView,
    Node,
    NodeClassInfo,
    Pool,
)
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import (
    annotations_of,
    condition_true,
    is_deleting,
    labels_of,
    meta,
    name_of,
    parse_time,
)
from nodewright.kube.pdb import disruptions_allowed
from nodewright.scheduling import (
    Pod,
    node_from_manifest,
    nodepool_spec_from_model,
    pod_from_manifest,
)
from nodewright.scheduling import daemonset_pods as scheduling_daemonset_pods
from nodewright.state.cluster import ClusterState
from nodewright.state.pods import needs_eviction

log = logging.getLogger("nodewright.disruption")
Obj = dict[str, Any]


def _seconds(text: Any, default: float | None = None) -> float | None:
    if text is None:
        return default
    try:
        value = to_seconds(str(text))
    except ValueError:
        return default
    return None if value is None else float(value)


def pool_from_doc(doc: Obj, instance_types: Sequence[InstanceType], daemonsets: Iterable[Pod]) -> Pool:
    """A :class:`Pool` from a ``karpenter.sh/v1`` NodePool dict.

    Raises:
        NodewrightValidationError: an invalid NodePool.
    """
    model = parse_nodepool(doc)
    disruption = model.spec.disruption
    annotations = model.metadata.annotations or {}
    return Pool(
        name=model.name,
        spec=nodepool_spec_from_model(doc, daemonsets),
        instance_types=list(instance_types),
        consolidation_policy=disruption.consolidation_policy,
        consolidate_after=_seconds(disruption.consolidate_after),
        budgets=list(disruption.budgets),
        hash=nodepool_hash(model),
        # Malformed nodewright.io/* annotations fall back to their defaults (nodepool_status reports them).
        min_node_lifetime=min_node_lifetime(annotations),
        hysteresis=consolidation_hysteresis(annotations),
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


def _price(instance_types: Sequence[InstanceType], labels: Mapping[str, str]) -> float:
    name, zone, ct = labels.get(wk.INSTANCE_TYPE), labels.get(wk.ZONE), labels.get(wk.CAPACITY_TYPE)
    for it in instance_types:
        if it.name == name:
            prices = [o.price for o in it.offerings if o.zone == zone and o.capacity_type == ct]
            return min(prices, default=0.0)
    return 0.0


#: id(pod manifest) -> (the manifest, its scheduler pod). Cluster objects are replaced, never mutated, on
#: every change, so a manifest seen again (same object, kept alive here) converts to the same pod; this keeps
#: a disruption pass over thousands of unchanged pods cheap. Bounded: cleared when it grows past the limit.
_CONVERTED: dict[int, tuple[Obj, Pod]] = {}
_CONVERTED_LIMIT = 50_000


def _converted(doc: Obj) -> Pod:
    entry = _CONVERTED.get(id(doc))
    if entry is not None and entry[0] is doc:
        return entry[1]
    pod = pod_from_manifest({**doc, "kind": "Pod"})
    if len(_CONVERTED) >= _CONVERTED_LIMIT:
        _CONVERTED.clear()
    _CONVERTED[id(doc)] = (doc, pod)
    return pod


def _pods(state: ClusterState, node: str) -> tuple[list[Pod], list[Pod]]:
    """(every bound pod, the reschedulable ones) as scheduler pods."""
    everything: list[Pod] = []
    movable: list[Pod] = []
    for doc in state.pods_on(node):
        if (doc.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        try:
            pod = _converted(doc)
        except NodewrightValidationError:
            continue
        everything.append(pod)
        if needs_eviction(doc):
            movable.append(pod)
    return everything, movable


def node_from_state(
    claim: Obj, doc: Obj, state: ClusterState, pools: Mapping[str, Pool],
    last_pod_event: float | None, cloud_drift: str | None, now: float,
) -> Node | None:
    """A :class:`Node` for a NodeClaim and its registered Node (None when the Node is unreadable)."""
    everything, movable = _pods(state, name_of(doc))
    try:
        view = node_from_manifest({**doc, "kind": "Node"}, everything)
    except NodewrightValidationError:
        return None
    for key, value in labels_of(claim).items():
        view.labels.setdefault(key, value)
    view.__post_init__()  # refresh instance type/zone/capacity type from the merged labels
    nodepool = labels_of(claim).get(wk.NODEPOOL, "")
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    pool = pools.get(nodepool)
    disrupted = any(t.get("key") == wk.DISRUPTED_TAINT_KEY for t in (doc.get("spec") or {}).get("taints") or [])
    node_ann, claim_ann = annotations_of(doc), annotations_of(claim)
    return Node(
        name=name_of(doc),
        nodeclaim=name_of(claim),
        nodepool=nodepool,
        view=view,
        pods=movable,
        created=parse_time(meta(claim).get("creationTimestamp")) or now,
        price=_price(pool.instance_types if pool else (), view.labels),
        initialized=view.labels.get(wk.INITIALIZED) == "true" or condition_true(claim, wk.CONDITION_INITIALIZED),
        ready=condition_true(doc, "Ready"),
        deleting=is_deleting(claim) or is_deleting(doc) or disrupted,
        do_not_disrupt="true" in (node_ann.get(wk.DO_NOT_DISRUPT), claim_ann.get(wk.DO_NOT_DISRUPT)),
        last_pod_event=last_pod_event if last_pod_event is not None else parse_time(status.get("lastPodEventTime")),
        expire_after=_seconds(spec.get("expireAfter", DEFAULT_EXPIRE_AFTER)),
        termination_grace_period=_seconds(spec.get("terminationGracePeriod")),
        annotations=dict(claim_ann),
        nodeclass=str((spec.get("nodeClassRef") or {}).get("name") or ""),
        image_id=str(status.get("imageID") or ""),
        cloud_drift=cloud_drift,
    )


def pdbs_from_state(state: ClusterState) -> list[PDB]:
    """Every PodDisruptionBudget with the disruptions it allows now (Kubernetes' arithmetic)."""
    by_ns: dict[str, list[Obj]] = {}
    for pod in state.pods.values():
        by_ns.setdefault(str(meta(pod).get("namespace") or "default"), []).append(pod)
    out = []
    for doc in state.pdbs:
        ns = str(meta(doc).get("namespace") or "default")
        out.append(PDB(name_of(doc), ns, (doc.get("spec") or {}).get("selector"),
                       disruptions_allowed(doc, by_ns.get(ns, []))))
    return out


def daemonset_pods(state: ClusterState) -> list[Pod]:
    """The pod each DaemonSet of the snapshot runs on a node (for daemonset overhead)."""
    return scheduling_daemonset_pods(state.daemonsets)


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
    daemonsets = daemonset_pods(state)
    pools: dict[str, Pool] = {}
    for name, doc in sorted(state.nodepools.items()):
        if is_deleting(doc) or name not in instance_types:
            continue
        try:
            pools[name] = pool_from_doc(doc, instance_types[name], daemonsets)
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
        if name in managed or wk.NODEPOOL in labels_of(doc):
            continue
        try:
            unmanaged.append(node_from_manifest({**doc, "kind": "Node"}, _pods(state, name)[0]))
        except NodewrightValidationError:
            continue
    return ClusterView(
        nodes=nodes,
        pools=pools,
        nodeclasses={name: nodeclass_info(doc) for name, doc in state.nodeclasses.items()},
        pdbs=pdbs_from_state(state),
        unmanaged=unmanaged,
        daemonsets=daemonsets,
    )

