"""``SimulatedCloudProvider``: the :class:`~nodewright.cloud.provider.CloudProvider` over :class:`SimulatedEC2`.

Behaves like the AWS provider as far as the controllers can tell:

* instance types come from the bundled catalog (:func:`nodewright.cloud.catalog.load_instance_types`) for the
  simulated region and zones, with the EC2NodeClass's kubelet settings (``maxPods``, ``podsPerCore``,
  ``kubeReserved``, ``systemReserved``, ``evictionHard``) applied to allocatable;
* every EC2NodeClass that exists resolves (subnets in every simulated zone); a missing one raises
  :class:`~nodewright.cloud.provider.NodeClassNotReadyError`;
* ``create`` launches the cheapest allowed offering, spot first when the NodeClaim allows spot (Karpenter
  sends a spot fleet request whenever spot is allowed); offerings marked out of capacity are skipped and, if
  nothing is left, :class:`~nodewright.cloud.provider.InsufficientCapacityError` is raised;
* an offering that failed with insufficient capacity or whose spot instance was interrupted is unavailable
  for 3 minutes (Karpenter's unavailable-offerings cache TTL);
* capacity reservations: the EC2NodeClass's ``status.capacityReservations`` (Karpenter's shape, as ``kubectl get``
  shows it; :func:`nodewright.cloud.reservations.from_status`) become ``reserved`` offerings while they have room
  (``availableInstanceCount`` per entry, EC2's field; 1 when absent, as Karpenter's status does not carry it),
  minus the live instances launched into them; ``create`` launches into a reservation first, then spot, then
  on-demand (Karpenter's order); with the ``ReservedCapacity`` gate off (``reserved_capacity=False``) they are
  ignored, with one warning per class (:class:`~nodewright.cloud.reservations.ReservedCapacityGate`);
* drift: the EC2NodeClass spec hash stamped at launch (``karpenter.k8s.aws/ec2nodeclass-hash``) differs.
"""

from __future__ import annotations

import builtins
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nodewright.api import labels as L
from nodewright.api.hashing import stamped_nodeclass_hash
from nodewright.api.manifests import parse_ec2nodeclass, parse_nodeclaim
from nodewright.api.nodeclaim import NodeClaim
from nodewright.api.nodepool import NodePool
from nodewright.api.requirements import Requirement
from nodewright.cloud.aws.repair import AWS_REPAIR_POLICIES
from nodewright.cloud.catalog import instance_types_for_nodeclass, load_instance_types
from nodewright.cloud.instancetype import (
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    InstanceType,
    LaunchPricingHook,
    Offering,
)
from nodewright.cloud.matching import allowed_offerings, as_requirements, type_filter
from nodewright.cloud.overhead import KubeletSettings, kubelet_settings
from nodewright.cloud.overlay import OverlayStore, offering_key
from nodewright.cloud.provider import (
    DRIFT_NODECLASS,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    RepairPolicy,
    UnavailableOffering,
    make_provider_id,
    parse_provider_id,
)
from nodewright.cloud.reservations import (
    CapacityReservation,
    ReservedCapacityGate,
    from_status,
    reservation_labels,
    with_reservations,
)
from nodewright.cloud.simulated.ec2 import SimInstance, SimulatedEC2
from nodewright.cloud.unavailable import OfferingKey, UnavailableOfferings
from nodewright.kube.objects import format_time
from nodewright.quantities import format_resource_list


def nodeclass_hash(nodeclass: Mapping[str, Any]) -> str:
    """Hash of an EC2NodeClass spec without its selectors (what replaces nodes when it changes)."""
    spec = {k: v for k, v in (nodeclass.get("spec") or {}).items()
            if k not in ("subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms")}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


class SimulatedCloudProvider:
    """The in-memory cloud for ``nodewright simulate`` (see module docstring).

    Args:
        ec2: the simulated EC2 (instances, latency, billing).
        region: region of the bundled catalog, e.g. ``"us-east-1"``.
        zones: zones with subnets.
        nodeclasses: EC2NodeClass name -> its manifest dict, or None when it does not exist.
        kubelet: an EC2NodeClass dict -> its kubelet settings (the cluster's cached conversion,
            :meth:`nodewright.state.models.ClusterModels.kubelet`; default: parse it each time).
        reserved_capacity: Karpenter's ``ReservedCapacity`` feature gate (default on).
    """

    name = "simulated"

    def __init__(self, ec2: SimulatedEC2, region: str, zones: list[str],
                 nodeclasses: Callable[[str], Mapping[str, Any] | None],
                 kubelet: Callable[[Mapping[str, Any]], KubeletSettings] | None = None,
                 reserved_capacity: bool = True) -> None:
        self.ec2 = ec2
        self.reserved_capacity = ReservedCapacityGate(reserved_capacity)
        self._kubelet = kubelet or (lambda doc: kubelet_settings(parse_ec2nodeclass(dict(doc))))
        self.region = region
        self.zones = list(zones)
        self._nodeclasses = nodeclasses
        #: Offerings out of launches for a while (the same cache as the AWS provider's, on the simulated clock).
        self.unavailable = UnavailableOfferings(clock=ec2.clock)
        #: Offerings that fail every launch with InsufficientInstanceCapacity (scenario events set them).
        self.out_of_capacity: set[tuple[str, str, str]] = set()  # (type, zone, capacity type)
        #: Under a PricingPolicy (``simulate --scenario --pricing``): launches follow effective prices.
        self.launch_pricing: LaunchPricingHook | None = None
        #: The NodeOverlays in force (set by the controllers' Context): a launch ranks by the overlaid prices.
        self.overlays: OverlayStore | None = None
        self.launches = 0
        self._types: dict[str, list[InstanceType]] = {}
        #: instance id -> (instance, its NodeClaim view): an instance's view never changes (type, offering, tags and
        #: image are fixed at launch), so list() -- the garbage collector's every 30 s -- parses each one once.
        self._listed: dict[str, tuple[SimInstance, NodeClaim]] = {}
        #: Reservations seen in EC2NodeClass statuses (for the reservation-type label of their instances).
        self._reservation_kinds: dict[str, str] = {}

    # --- helpers -----------------------------------------------------------------------------------------

    def _nodeclass(self, name: str) -> Mapping[str, Any]:
        doc = self._nodeclasses(name)
        if doc is None:
            raise NodeClassNotReadyError(f"EC2NodeClass {name!r} not found")
        return doc

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        """Keep an offering out of launches for the unavailable-offerings TTL (Karpenter: 3 minutes)."""
        self.unavailable.mark(OfferingKey(instance_type, zone, capacity_type), reason)

    def mark_spot_interrupted(self, instance_type: str, zone: str) -> None:
        """See :meth:`nodewright.cloud.provider.CloudProvider.mark_spot_interrupted`."""
        self.unavailable.mark_spot_interrupted(instance_type, zone)

    def instance_types_for(self, nodeclass: Mapping[str, Any],
                           requirements: Sequence[Requirement] = ()) -> list[InstanceType]:
        """Catalog types for ``nodeclass`` in the simulated zones, with unavailable offerings flagged.

        With ``requirements`` (a NodePool's), only the types whose instance properties satisfy them: the
        scheduler would discard the others anyway, and a short list keeps a simulated day fast.

        Raises:
            NodewrightValidationError: an invalid EC2NodeClass.
        """
        settings = self._kubelet(nodeclass)
        spec = nodeclass.get("spec")
        # What else shapes the types a class sees (catalog.instance_types_for_nodeclass): OS family, CPU options.
        shape = [spec.get(k) for k in ("amiFamily", "amiSelectorTerms", "cpuOptions")] if isinstance(spec, dict) else []
        key = json.dumps([settings.catalog_arguments(), shape, [r.model_dump(mode="json") for r in requirements]],
                         sort_keys=True, default=str)
        types = self._types.get(key)
        if types is None:
            types = load_instance_types(self.region, zones=self.zones, **settings.catalog_arguments())
            types = instance_types_for_nodeclass(types, parse_ec2nodeclass(dict(nodeclass)).spec)
            if requirements:
                allowed = type_filter(requirements)
                types = [it for it in types if allowed(it)]
            self._types[key] = types
        flagged = self.unavailable.flag(list(types))
        reservations = self._reservations(nodeclass)
        if not reservations:
            return flagged
        used: dict[str, int] = {}
        for instance in self.ec2.live():
            if instance.offering.reservation_id:
                used[instance.offering.reservation_id] = used.get(instance.offering.reservation_id, 0) + 1
        return with_reservations(flagged, reservations, used)

    def _reservations(self, nodeclass: Mapping[str, Any]) -> builtins.list[CapacityReservation]:
        status = nodeclass.get("status")
        entries = status.get("capacityReservations") if isinstance(status, dict) else None
        spec = nodeclass.get("spec")
        terms = spec.get("capacityReservationSelectorTerms") if isinstance(spec, dict) else None
        name = str((nodeclass.get("metadata") or {}).get("name", ""))
        if not self.reserved_capacity.allows(name, bool(terms) or bool(entries)):
            return []
        found = from_status(entries if isinstance(entries, list) else None, unknown_count=1)
        self._reservation_kinds.update({r.id: r.reservation_type for r in found})
        return found

    # --- CloudProvider -----------------------------------------------------------------------------------

    def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """See :meth:`nodewright.cloud.provider.CloudProvider.create` (module docstring for the choice)."""
        name = nodeclaim.metadata.name or ""
        existing = self.ec2.find_by_tag(L.TAG_NODECLAIM, name)
        if existing is not None:
            return self._launched(nodeclaim, existing)
        ref = nodeclaim.spec.node_class_ref.name
        nodeclass = self._nodeclass(ref)
        listed = self.instance_types_for(nodeclass)
        types = listed if self.overlays is None else self.overlays.launch_types(nodeclaim.nodepool, listed)
        # NodeOverlay prices rank the launch; EC2 bills the listed price (Karpenter: overlays "don't affect actual
        # cloud provider billing"). Overlay capacity stays: the node reports it, as its device plugin would.
        billed = {(it.name, offering_key(o)): o for it in listed for o in it.offerings} if types is not listed else {}
        pairs = allowed_offerings(types, nodeclaim.spec.requirements, self.zones)
        pricing = self.launch_pricing(types) if self.launch_pricing is not None else None
        if pricing is not None:
            # As the AWS fleet request under a PricingPolicy: effective-price order; spot only when cheapest.
            pairs.sort(key=lambda p: (pricing.price(p[0].name, p[1]), p[1].price, p[0].name, p[1].zone))
        firsts = (CAPACITY_TYPE_RESERVED,) if pricing is not None else (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT)
        for first in firsts:
            if any(o.capacity_type == first for _, o in pairs):
                pairs = [(it, o) for it, o in pairs if o.capacity_type == first]
                break
        else:
            if pricing is not None and pairs:
                pairs = [(it, o) for it, o in pairs if o.capacity_type == pairs[0][1].capacity_type]
        reasons: list[UnavailableOffering] = []
        for instance_type, offering in pairs:
            key = (instance_type.name, offering.zone, offering.capacity_type)
            if key in self.out_of_capacity:
                reasons.append(UnavailableOffering(*key, "InsufficientInstanceCapacity"))
                self.mark_unavailable(*key, "InsufficientInstanceCapacity")
                continue
            offering = billed.get((instance_type.name, offering_key(offering)), offering)
            instance = self._run(nodeclaim, nodeclass, instance_type, offering)
            return self._launched(nodeclaim, instance)
        raise InsufficientCapacityError(
            f"no capacity for nodeclaim {name}: {len(reasons)} offering(s) failed, "
            f"{len(pairs) - len(reasons)} left", reasons)

    def _run(self, nodeclaim: NodeClaim, nodeclass: Mapping[str, Any], instance_type: InstanceType,
             offering: Offering) -> SimInstance:
        pool = nodeclaim.nodepool or ""
        labels = self._instance_labels(instance_type, offering)
        node_labels = {**(nodeclaim.metadata.labels or {}), **labels}
        for key, value in as_requirements(nodeclaim.spec.requirements).labels().items():
            node_labels.setdefault(key, value)
        # Karpenter's userData registers the node with its taints, startup taints and karpenter.sh/unregistered.
        taints = [{"key": L.UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}]
        startup: list[dict[str, str]] = []
        for group, target in ((nodeclaim.spec.taints, None), (nodeclaim.spec.startup_taints, startup)):
            for taint in group or []:
                doc = {"key": taint.key, "effect": taint.effect}
                if taint.value:
                    doc["value"] = taint.value
                taints.append(doc)
                if target is not None:
                    target.append(doc)
        self.launches += 1
        return self.ec2.run_instance(
            instance_type, offering,
            tags={L.TAG_NODECLAIM: nodeclaim.metadata.name or "", L.TAG_NODEPOOL: pool,
                  L.TAG_EC2NODECLASS: nodeclaim.spec.node_class_ref.name,
                  "nodewright.io/nodeclass-hash": nodeclass_hash(nodeclass)},
            node_labels=node_labels, node_taints=taints, startup_taints=startup)

    def _instance_labels(self, instance_type: InstanceType, offering: Offering) -> dict[str, str]:
        labels = dict(instance_type.labels)
        labels.update({L.INSTANCE_TYPE: instance_type.name, L.ZONE: offering.zone, L.REGION: self.region,
                       L.CAPACITY_TYPE: offering.capacity_type})
        if offering.zone_id:
            labels[L.ZONE_ID] = offering.zone_id
        labels.update(reservation_labels(offering, self._reservation_kinds))
        return labels

    def _launched(self, nodeclaim: NodeClaim, instance: SimInstance) -> NodeClaim:
        doc = nodeclaim.to_manifest()
        meta = doc.setdefault("metadata", {})
        meta["labels"] = {**(meta.get("labels") or {}),
                          **self._instance_labels(instance.instance_type, instance.offering)}
        meta["annotations"] = {**(meta.get("annotations") or {}),
                               L.EC2NODECLASS_HASH: instance.tags.get("nodewright.io/nodeclass-hash", ""),
                               L.EC2NODECLASS_HASH_VERSION: "v1"}
        doc["status"] = {
            "providerID": make_provider_id(instance.zone, instance.id),
            "imageID": instance.image_id,
            "capacity": format_resource_list(instance.instance_type.capacity),
            "allocatable": format_resource_list(instance.instance_type.allocatable()),
        }
        return parse_nodeclaim(doc)

    def _instance(self, provider_id: str) -> SimInstance:
        try:
            instance_id = parse_provider_id(provider_id)[1]
        except ValueError as err:
            raise NodeClaimNotFoundError(str(err)) from err
        instance = self.ec2.instances.get(instance_id)
        if instance is None or not instance.alive:
            raise NodeClaimNotFoundError(f"instance {instance_id} not found")
        return instance

    def delete(self, nodeclaim: NodeClaim) -> None:
        """See :meth:`nodewright.cloud.provider.CloudProvider.delete`."""
        provider_id = nodeclaim.status.provider_id if nodeclaim.status else None
        if provider_id:
            instance = self._instance(provider_id)
        else:
            found = self.ec2.find_by_tag(L.TAG_NODECLAIM, nodeclaim.metadata.name or "")
            if found is None:
                raise NodeClaimNotFoundError(f"nodeclaim {nodeclaim.metadata.name} has no instance")
            instance = found
        self.ec2.terminate(instance.id)

    def reboot(self, nodeclaim: NodeClaim) -> None:
        """See :meth:`nodewright.cloud.provider.Rebooter.reboot` (recorded in ``ec2.reboots``)."""
        provider_id = nodeclaim.status.provider_id if nodeclaim.status else None
        if not provider_id:
            raise NodeClaimNotFoundError(f"nodeclaim {nodeclaim.metadata.name} has no instance")
        self.ec2.reboot(self._instance(provider_id).id)

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """The AWS provider's policies (:mod:`nodewright.cloud.aws.repair`): the simulated cloud is EC2."""
        return AWS_REPAIR_POLICIES

    def _view(self, instance: SimInstance) -> NodeClaim:
        labels = self._instance_labels(instance.instance_type, instance.offering)
        if instance.tags.get(L.TAG_NODEPOOL):
            labels[L.NODEPOOL] = instance.tags[L.TAG_NODEPOOL]
        return parse_nodeclaim({
            "apiVersion": L.API_VERSION, "kind": "NodeClaim",
            "metadata": {"name": instance.tags.get(L.TAG_NODECLAIM) or instance.id,
                         "creationTimestamp": format_time(instance.launched_at), "labels": labels},
            "spec": {"requirements": [
                {"key": L.INSTANCE_TYPE, "operator": "In", "values": [instance.instance_type.name]},
                {"key": L.ZONE, "operator": "In", "values": [instance.zone]},
                {"key": L.CAPACITY_TYPE, "operator": "In", "values": [instance.capacity_type]}],
                "nodeClassRef": {"group": L.AWS_GROUP, "kind": "EC2NodeClass",
                                 "name": instance.tags.get(L.TAG_EC2NODECLASS) or "unknown"}},
            "status": {"providerID": make_provider_id(instance.zone, instance.id), "imageID": instance.image_id},
        })

    def get(self, provider_id: str) -> NodeClaim:
        """See :meth:`nodewright.cloud.provider.CloudProvider.get`."""
        return self._view(self._instance(provider_id))

    def list(self) -> builtins.list[NodeClaim]:
        """Live instances this controller launched (tagged with a NodeClaim name)."""
        live = [i for i in self.ec2.live() if i.tags.get(L.TAG_NODECLAIM)]
        listed = {}
        for instance in live:
            hit = self._listed.get(instance.id)
            if hit is None or hit[0] is not instance:
                hit = (instance, self._view(instance))
            listed[instance.id] = hit
        self._listed = listed
        return [listed[i.id][1] for i in live]

    def get_instance_types(self, nodepool: NodePool) -> builtins.list[InstanceType]:
        """See :meth:`nodewright.cloud.provider.CloudProvider.get_instance_types`."""
        template = nodepool.spec.template.spec
        return self.instance_types_for(self._nodeclass(template.node_class_ref.name), template.requirements)

    def is_drifted(self, nodeclaim: NodeClaim) -> str | None:
        """:data:`~nodewright.cloud.provider.DRIFT_NODECLASS` when the EC2NodeClass changed since launch."""
        nodeclass = self._nodeclasses(nodeclaim.spec.node_class_ref.name)
        stamped = stamped_nodeclass_hash(nodeclaim.metadata.annotations or {})
        if nodeclass is None or not stamped:
            return None
        return DRIFT_NODECLASS if stamped != nodeclass_hash(nodeclass) else None
