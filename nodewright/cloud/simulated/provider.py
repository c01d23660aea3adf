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
* drift: the EC2NodeClass spec hash stamped at launch (``karpenter.k8s.aws/ec2nodeclass-hash``) differs.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nodewright.api import labels as L
from nodewright.api.manifests import parse_nodeclaim
from nodewright.api.nodeclaim import NodeClaim
from nodewright.api.nodepool import NodePool
from nodewright.api.requirements import Requirement
from nodewright.cloud.aws.matching import allowed_offerings, type_allowed
from nodewright.cloud.catalog import load_instance_types
from nodewright.cloud.instancetype import CAPACITY_TYPE_SPOT, InstanceType, Offering
from nodewright.cloud.provider import (
    DRIFT_NODECLASS,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    UnavailableOffering,
    make_provider_id,
    parse_provider_id,
)
from nodewright.cloud.simulated.ec2 import SimInstance, SimulatedEC2
from nodewright.kube.objects import format_time

#: Seconds an offering stays unavailable after insufficient capacity or a spot interruption (Karpenter: 3 min).
UNAVAILABLE_SECONDS = 180.0

OfferingKey = tuple[str, str, str]  # (instance type, zone, capacity type)


def quantity(resource: str, value: int) -> str:
    """Canonical integer (cpu millicores, bytes, count) as a Kubernetes quantity string."""
    if resource == "cpu":
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    if resource in ("memory", "ephemeral-storage"):
        return f"{value // 2**20}Mi" if value % 2**20 == 0 else str(value)
    return str(value)


def resource_list(resources: Mapping[str, int]) -> dict[str, str]:
    """``{resource: quantity string}``."""
    return {name: quantity(name, qty) for name, qty in sorted(resources.items())}


def nodeclass_hash(nodeclass: Mapping[str, Any]) -> str:
    """Hash of an EC2NodeClass spec without its selectors (what replaces nodes when it changes)."""
    spec = {k: v for k, v in (nodeclass.get("spec") or {}).items()
            if k not in ("subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms")}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def _kubelet_args(nodeclass: Mapping[str, Any]) -> dict[str, Any]:
    kubelet = (nodeclass.get("spec") or {}).get("kubelet") or {}
    return {
        "max_pods": kubelet.get("maxPods"),
        "pods_per_core": kubelet.get("podsPerCore"),
        "kube_reserved": dict(kubelet.get("kubeReserved") or {}) or None,
        "system_reserved": dict(kubelet.get("systemReserved") or {}) or None,
        "eviction_hard": dict(kubelet.get("evictionHard") or {}) or None,
    }


class SimulatedCloudProvider:
    """The in-memory cloud for ``nodewright simulate`` (see module docstring).

    Args:
        ec2: the simulated EC2 (instances, latency, billing).
        region: region of the bundled catalog, e.g. ``"us-east-1"``.
        zones: zones with subnets.
        nodeclasses: EC2NodeClass name -> its manifest dict, or None when it does not exist.
    """

    name = "simulated"

    def __init__(self, ec2: SimulatedEC2, region: str, zones: list[str],
                 nodeclasses: Callable[[str], Mapping[str, Any] | None]) -> None:
        self.ec2 = ec2
        self.region = region
        self.zones = list(zones)
        self._nodeclasses = nodeclasses
        #: (type, zone, capacity type) -> epoch seconds until which the offering is unavailable.
        self.unavailable: dict[OfferingKey, float] = {}
        #: Offerings that fail every launch with InsufficientInstanceCapacity (scenario events set them).
        self.out_of_capacity: set[OfferingKey] = set()
        self.launches = 0
        self._types: dict[str, list[InstanceType]] = {}
        #: instance id -> (instance, its NodeClaim view): an instance's view never changes (type, offering, tags and
        #: image are fixed at launch), so list() -- the garbage collector's every 30 s -- parses each one once.
        self._listed: dict[str, tuple[SimInstance, NodeClaim]] = {}

    # --- helpers -----------------------------------------------------------------------------------------

    def _nodeclass(self, name: str) -> Mapping[str, Any]:
        doc = self._nodeclasses(name)
        if doc is None:
            raise NodeClassNotReadyError(f"EC2NodeClass {name!r} not found")
        return doc

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """Keep an offering out of launches for :data:`UNAVAILABLE_SECONDS`."""
        self.unavailable[(instance_type, zone, capacity_type)] = self.ec2.clock() + UNAVAILABLE_SECONDS

    def _current_unavailable(self) -> set[OfferingKey]:
        now = self.ec2.clock()
        for key in [k for k, until in self.unavailable.items() if until <= now]:
            del self.unavailable[key]
        return set(self.unavailable)

    def instance_types_for(self, nodeclass: Mapping[str, Any],
                           requirements: Sequence[Requirement] = ()) -> list[InstanceType]:
        """Catalog types for ``nodeclass`` in the simulated zones, with unavailable offerings flagged.

        With ``requirements`` (a NodePool's), only the types whose instance properties satisfy them: the
        scheduler would discard the others anyway, and a short list keeps a simulated day fast.
        """
        kubelet = _kubelet_args(nodeclass)
        key = json.dumps([kubelet, [r.model_dump(mode="json") for r in requirements]], sort_keys=True, default=str)
        types = self._types.get(key)
        if types is None:
            types = load_instance_types(self.region, zones=self.zones, **kubelet)
            if requirements:
                types = [it for it in types if type_allowed(it, requirements)]
            self._types[key] = types
        types = list(types)
        marked = self._current_unavailable()
        if not marked:
            return types
        names = {k[0] for k in marked}
        out = []
        for it in types:
            if it.name in names:
                offerings = tuple(dataclasses.replace(o, available=False)
                                  if (it.name, o.zone, o.capacity_type) in marked else o for o in it.offerings)
                it = dataclasses.replace(it, offerings=offerings)
            out.append(it)
        return out

    # --- CloudProvider -----------------------------------------------------------------------------------

    def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """See :meth:`nodewright.cloud.provider.CloudProvider.create` (module docstring for the choice)."""
        name = nodeclaim.metadata.name or ""
        existing = self.ec2.find_by_tag(L.TAG_NODECLAIM, name)
        if existing is not None:
            return self._launched(nodeclaim, existing)
        ref = nodeclaim.spec.node_class_ref.name
        nodeclass = self._nodeclass(ref)
        pairs = allowed_offerings(self.instance_types_for(nodeclass), nodeclaim.spec.requirements, self.zones)
        if any(o.capacity_type == CAPACITY_TYPE_SPOT for _, o in pairs):
            pairs = [(it, o) for it, o in pairs if o.capacity_type == CAPACITY_TYPE_SPOT]
        reasons: list[UnavailableOffering] = []
        for instance_type, offering in pairs:
            key = (instance_type.name, offering.zone, offering.capacity_type)
            if key in self.out_of_capacity:
                reasons.append(UnavailableOffering(*key, "InsufficientInstanceCapacity"))
                self.mark_unavailable(*key)
                continue
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
        for req in nodeclaim.spec.requirements:
            if req.operator == "In" and len(req.values or []) == 1:
                node_labels.setdefault(req.key, (req.values or [""])[0])
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
            "capacity": resource_list(instance.instance_type.capacity),
            "allocatable": resource_list(instance.instance_type.allocatable()),
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
        stamped = (nodeclaim.metadata.annotations or {}).get(L.EC2NODECLASS_HASH)
        if nodeclass is None or not stamped:
            return None
        return DRIFT_NODECLASS if stamped != nodeclass_hash(nodeclass) else None
