"""What every controller shares: the dependencies bundle, NodeClaim conversions and status writes."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from nodewright.api import labels as L
from nodewright.api.durations import to_seconds
from nodewright.api.manifests import parse_nodeclaim
from nodewright.api.nodeclaim import NodeClaim
from nodewright.cloud.instancetype import InstanceType
from nodewright.cloud.overlay import OverlayStore, PoolTypes
from nodewright.cloud.provider import CloudProvider, CloudProviderError
from nodewright.controllers.condition_metrics import observe_condition_transitions
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.cluster import Clock, Cluster
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import (
    Obj,
    condition,
    condition_true,
    finalizers_of,
    is_deleting,
    labels_of,
    meta,
    name_of,
    set_condition,
)
from nodewright.metrics import Metrics
from nodewright.state.cluster import ClusterState

log = logging.getLogger("nodewright.controllers")



@dataclass
class Context:
    """Dependencies of every controller, injected so the simulator can drive them on its own clock.

    Attributes:
        cluster: the cluster interface (in-memory or the real API server).
        cloud: the cloud provider (AWS, simulated or a test fake).
        clock: epoch seconds now.
        metrics: Prometheus metrics.
        cluster_name: the cluster's name (logs and tags).
        overlays: the NodeOverlays in force (:class:`~nodewright.cloud.overlay.OverlayStore`; its ``enabled`` is
            the ``NodeOverlay`` feature gate, off by default). The cloud provider (``overlays`` attribute, under
            the metrics decorator) gets the same store, so a launch ranks offerings by the overlaid prices.
    """

    cluster: Cluster
    cloud: CloudProvider
    clock: Clock
    metrics: Metrics = field(default_factory=Metrics)
    cluster_name: str = ""
    overlays: OverlayStore = field(default_factory=OverlayStore)

    def __post_init__(self) -> None:
        provider = getattr(self.cloud, "wrapped", self.cloud)
        if hasattr(provider, "overlays"):
            provider.overlays = self.overlays

    def event(self, obj: Obj, reason: str, message: str, warning: bool = False) -> None:
        """Record a Kubernetes Event on ``obj``."""
        self.cluster.record_event(obj, reason, message, "Warning" if warning else "Normal")

    def cloud_error(self, controller: str, method: str, err: Exception) -> None:
        """Count a failed cloud provider call in ``karpenter_cloudprovider_errors_total``."""
        self.metrics.cloudprovider_errors.labels(controller, method, self.cloud.name, type(err).__name__).inc()


def to_model(claim: Obj) -> NodeClaim:
    """The ``nodewright.api`` model of a NodeClaim dict (as the cloud provider takes it)."""
    return parse_nodeclaim(claim)


def nodepool_instance_types(
    ctx: Context, state: ClusterState, controller: str
) -> tuple[dict[str, list[InstanceType]], dict[str, NodewrightValidationError | CloudProviderError]]:
    """What each NodePool that is not being deleted and is Ready (:func:`nodepool_ready`) may launch now, by name
    (sorted), with the cluster's NodeOverlays applied (:meth:`nodewright.cloud.overlay.OverlayStore.instance_types`,
    conflicts judged across these pools), and why the others (valid, but failing) may not.

    The NodePool is read through the cluster's models; a cloud provider failure is counted in
    ``karpenter_cloudprovider_errors_total`` for ``controller``.
    """
    types: dict[str, list[InstanceType]] = {}
    problems: dict[str, NodewrightValidationError | CloudProviderError] = {}
    pools: list[PoolTypes] = []
    for name, doc in sorted(state.nodepools.items()):
        if is_deleting(doc) or not nodepool_ready(doc):
            continue
        try:
            model = state.models.nodepool(doc)
            pools.append(PoolTypes(name, model.labels, list(ctx.cloud.get_instance_types(model))))
        except NodewrightValidationError as err:
            problems[name] = err
        except CloudProviderError as err:
            ctx.cloud_error(controller, "GetInstanceTypes", err)
            problems[name] = err
    # NodeOverlays (Karpenter's overlay decorator over GetInstanceTypes): the one place they are applied.
    types = ctx.overlays.instance_types(state.overlay_inputs(), pools)
    return types, problems


def fleet_labels(nodes: Iterable[Obj], claims: Iterable[Obj]) -> list[dict[str, str]]:
    """Labels of the running ``nodes`` and of the launched ``claims`` (a ``status.providerID``) without a Node yet:
    the fleet a decision is priced on (:func:`nodewright.pricing.marginal_pricing`, which skips those without an
    instance type label) -- a launch, a static pool's NodeClaims, the NodePool cost metrics. A NodeClaim not
    launched yet is left out even when its labels name the planned offering: at launch time it is the claim being
    priced (counting it would make it pay for its own RI or commitment)."""
    out = [labels_of(node) for node in nodes]
    for claim in claims:
        status = claim.get("status") or {}
        if status.get("providerID") and not status.get("nodeName"):
            out.append(labels_of(claim))
    return out


def nodepool_ready(nodepool: Obj) -> bool:
    """Whether a NodePool may launch: its ``Ready`` condition is True, or it has none yet (no status written:
    a NodePool read from files by ``simulate``, or before the status controller's first pass). Karpenter's
    provisioner launches only from Ready NodePools; the status controller
    (:mod:`nodewright.controllers.nodepool_status`) writes ``Ready=False`` when the EC2NodeClass is missing or
    not ready."""
    cond = condition(nodepool, L.CONDITION_READY)
    return cond is None or cond.get("status") == "True"


def has_disrupted_taint(node: Obj) -> bool:
    """Whether the Node carries ``karpenter.sh/disrupted:NoSchedule``."""
    return any(t.get("key") == L.DISRUPTED_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or [])


def nodeclaim_ready(claim: Obj) -> bool:
    """``Ready=True`` on the NodeClaim."""
    return condition_true(claim, L.CONDITION_READY)


def nodepool_of(obj: Obj) -> str:
    """``karpenter.sh/nodepool`` label value or ``""``."""
    return str((meta(obj).get("labels") or {}).get(L.NODEPOOL) or "")


def capacity_type_of(obj: Obj) -> str:
    """``karpenter.sh/capacity-type`` label value or ``""``."""
    return str((meta(obj).get("labels") or {}).get(L.CAPACITY_TYPE) or "")


def termination_mode(claim: Obj) -> str:
    """The ``termination_mode`` label of a disrupted NodeClaim (Karpenter main ``DisruptionTerminationMode``):
    ``graceful`` without ``spec.terminationGracePeriod`` (or an unreadable one), ``forceful`` when it is zero,
    else ``eventual`` (the drain is bounded by the grace period)."""
    text = (claim.get("spec") or {}).get("terminationGracePeriod")
    if not isinstance(text, str) or not text:
        return "graceful"
    try:
        seconds = to_seconds(text)
    except ValueError:
        return "graceful"
    return "forceful" if seconds is not None and seconds <= 0 else "eventual"


def snake_case(text: str) -> str:
    """``WhenEmptyOrUnderutilized`` -> ``when_empty_or_underutilized`` (Karpenter's ``pretty.ToSnakeCase``, used
    for metric label values)."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(text))


def set_nodeclaim_condition(
    ctx: Context, claim: Obj, type_: str, status: bool, reason: str = "", message: str = ""
) -> Obj:
    """Write one condition to a NodeClaim's status subresource; returns the updated claim."""
    conditions = set_condition(list((claim.get("status") or {}).get("conditions") or []), type_, status,
                               ctx.clock(), reason, message)
    updated = ctx.cluster.patch_status(r.NODECLAIMS, name_of(claim), {"conditions": conditions})
    observe_condition_transitions(ctx.metrics, claim, conditions)
    return updated


def remove_finalizer(ctx: Context, kind: r.ResourceKind, obj: Obj, finalizer: str = L.TERMINATION_FINALIZER) -> bool:
    """Remove ``finalizer`` guarded by the object's resourceVersion; False when it changed meanwhile."""
    finalizers = finalizers_of(obj)
    if finalizer not in finalizers:
        return True
    remaining = [f for f in finalizers if f != finalizer]
    patch = {"metadata": {"finalizers": remaining, "resourceVersion": meta(obj).get("resourceVersion")}}
    try:
        ctx.cluster.patch(kind, name_of(obj), patch, meta(obj).get("namespace"))
    except NotFoundError:
        return True
    except KubeError as err:
        log.info("retrying finalizer removal on %s %s: %s", kind.kind, name_of(obj), err)
        return False
    return True
