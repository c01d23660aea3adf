"""``AWSCloudProvider``: the :class:`~nodewright.cloud.provider.CloudProvider` over real EC2 (boto3).

Composes the per-concept views of this package: an EC2NodeClass resolves to subnets, security groups,
AMIs and an instance profile (:meth:`AWSCloudProvider.resolve_nodeclass`, also the source of its status);
a NodeClaim's requirements pick the candidate offerings; each (AMI, max pods) group of candidates gets a
launch template carrying the merged userData; one ``CreateFleet`` launches the instance.

Authorization errors are remembered per EC2NodeClass and re-raised without calling AWS again for a backoff
that doubles from 30 seconds to 10 minutes, so a missing ``iam:PassRole`` produces one denial per window
rather than a storm; the controllers surface the sentence on the NodeClaim, the NodePool and as an event.
"""

from __future__ import annotations

import builtins
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.api.ec2nodeclass import EC2NodeClass
from nodewright.api.hashing import ec2nodeclass_hash, ec2nodeclass_hash_annotations, stamped_nodeclass_hash
from nodewright.api.nodeclaim import NodeClaim
from nodewright.api.nodepool import NodePool
from nodewright.backoff import Backoff
from nodewright.cloud.aws import tags, userdata
from nodewright.cloud.aws.amis import AMI, AMIProvider
from nodewright.cloud.aws.cache import Clock
from nodewright.cloud.aws.capacityreservations import CapacityReservationProvider
from nodewright.cloud.aws.clients import AWSClients
from nodewright.cloud.aws.errors import botocore_errors
from nodewright.cloud.aws.instanceprofiles import InstanceProfileProvider
from nodewright.cloud.aws.instances import (
    FleetCandidate,
    Instance,
    InstanceProvider,
    LaunchRequest,
)
from nodewright.cloud.aws.instancetypes import InstanceTypeProvider
from nodewright.cloud.aws.launchtemplates import (
    LaunchTemplateProvider,
    LaunchTemplateSpec,
    block_devices,
    launch_options,
    metadata_options,
)
from nodewright.cloud.aws.nodeclaims import from_instance, launched, registration_labels, registration_taints
from nodewright.cloud.aws.pricing import PricingProvider
from nodewright.cloud.aws.repair import AWS_REPAIR_POLICIES
from nodewright.cloud.aws.securitygroups import SecurityGroup, SecurityGroupProvider
from nodewright.cloud.aws.subnets import Subnet, SubnetProvider
from nodewright.cloud.catalog import instance_types_for_nodeclass
from nodewright.cloud.instancetype import InstanceType, LaunchPricingHook
from nodewright.cloud.kubeletexpr import KubeletExpressionError
from nodewright.cloud.matching import allowed_offerings
from nodewright.cloud.overhead import KubeletSettings, kubelet_settings
from nodewright.cloud.overlay import OverlayStore
from nodewright.cloud.provider import (
    DRIFT_AMI,
    DRIFT_NODECLASS,
    DRIFT_SECURITY_GROUP,
    DRIFT_SUBNET,
    AuthorizationError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
    RepairPolicy,
    parse_provider_id,
)
from nodewright.cloud.reservations import CapacityReservation, ReservedCapacityGate, with_reservations
from nodewright.cloud.unavailable import UnavailableOfferings

log = logging.getLogger(__name__)

AUTH_BACKOFF_START_SECONDS = 30.0
AUTH_BACKOFF_MAX_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class AWSProviderSettings:
    """Cluster facts the provider needs (Helm values / flags of ``nodewright run``).

    Attributes:
        cluster_name: EKS cluster name.
        cluster_endpoint: API server URL.
        region: AWS region.
        kubernetes_version: ``"1.31"``, for AMI alias parameters.
        ca_bundle: base64 cluster CA.
        cluster_cidr: service CIDR (nodeadm needs it).
        cluster_dns: kubelet clusterDNS override, empty for the AMI default.
        instance_type_patterns: restrict the catalog to these ``instance-type`` filter patterns (``"m5.*"``);
            empty = every type (Karpenter's default).
        vm_memory_overhead_percent: Karpenter's ``VM_MEMORY_OVERHEAD_PERCENT`` (fraction, default 0.075).
        reserved_enis: Karpenter's ``RESERVED_ENIS``: ENIs left out of the max-pods count (default 0).
        isolated_vpc: Karpenter's ``ISOLATED_VPC``: never call the Pricing API (no VPC endpoint).
        node_class_cel: the AWS gate ``NodeClassCEL`` (kubelet expressions).
        reserved_capacity: the core gate ``ReservedCapacity``: false = capacityReservationSelectorTerms are not
            resolved (no reserved offerings, launches or status entries; one warning per class,
            :class:`~nodewright.cloud.reservations.ReservedCapacityGate`).
    """

    cluster_name: str
    cluster_endpoint: str
    region: str
    kubernetes_version: str
    ca_bundle: str = ""
    cluster_cidr: str = ""
    cluster_dns: tuple[str, ...] = ()
    instance_type_patterns: tuple[str, ...] = ()
    vm_memory_overhead_percent: float = 0.075
    reserved_enis: int = 0
    isolated_vpc: bool = False
    node_class_cel: bool = False
    reserved_capacity: bool = True


class KubeletNotReadyError(NodeClassNotReadyError):
    """``spec.kubelet`` cannot be applied: ``reason`` is Karpenter v1.15's ``ValidationSucceeded`` reason
    (``KubeletExpressionsDisabled``, ``KubeletExpressionInvalid``, ``KubeletExpressionEvalFailed``,
    ``UnsupportedKubeletConfiguration``); the message names the field."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class ResolvedNodeClass:
    """An EC2NodeClass resolved against AWS."""

    subnets: Sequence[Subnet]
    security_groups: Sequence[SecurityGroup]
    amis: Sequence[AMI]
    instance_profile: str
    zonal_subnets: dict[str, Subnet] = field(default_factory=dict)
    capacity_reservations: Sequence[CapacityReservation] = ()

    def status(self) -> dict[str, object]:
        """``EC2NodeClass.status`` document (subnets, securityGroups, amis, instanceProfile, capacityReservations
        when the class selects any, Ready)."""
        out: dict[str, object] = {
            "subnets": [s.status() for s in self.subnets],
            "securityGroups": [g.status() for g in self.security_groups],
            "amis": [a.status() for a in self.amis], "instanceProfile": self.instance_profile}
        if self.capacity_reservations:
            out["capacityReservations"] = [r.status() for r in self.capacity_reservations]
        out["conditions"] = [{"type": "Ready", "status": "True", "reason": "Ready", "message": ""}]
        return out


class AWSCloudProvider:
    """The AWS :class:`~nodewright.cloud.provider.CloudProvider`."""

    name = "aws"

    def __init__(self, settings: AWSProviderSettings, clients: AWSClients,
                 nodeclasses: Callable[[str], EC2NodeClass | None], clock: Clock = time.monotonic) -> None:
        self.settings = settings
        self._nodeclasses = nodeclasses
        self._clock = clock
        self.unavailable = UnavailableOfferings(clock=clock)
        self.subnets = SubnetProvider(clients.ec2, clock)
        self.security_groups = SecurityGroupProvider(clients.ec2, clock)
        self.amis = AMIProvider(clients.ec2, clients.ssm, settings.kubernetes_version, clock)
        self.pricing = PricingProvider(clients.pricing, clients.ec2, settings.region, clock,
                                       isolated_vpc=settings.isolated_vpc)
        self.instance_types = InstanceTypeProvider(clients.ec2, settings.region, self.pricing, self.unavailable, clock,
                                                    settings.instance_type_patterns,
                                                    zone_ids=lambda: self.subnets.zone_ids)
        self.capacity_reservations = CapacityReservationProvider(clients.ec2, clock)
        self.reserved_capacity = ReservedCapacityGate(settings.reserved_capacity)
        self.launch_templates = LaunchTemplateProvider(clients.ec2, settings.cluster_name, clock)
        self.instance_profiles = InstanceProfileProvider(clients.iam, settings.cluster_name, settings.region, clock)
        self.instances = InstanceProvider(clients.ec2, settings.cluster_name, self.unavailable,
                                          self.launch_templates.invalidate, zone_ids=lambda: self.subnets.zone_ids)
        #: Set by ``nodewright run`` under a PricingPolicy: the launch's marginal prices given the instance types
        #: (None: list prices). Fills each fleet candidate's ``effective_price`` (docs/pricing.md).
        self.launch_pricing: LaunchPricingHook | None = None
        #: The NodeOverlays in force (set by the controllers' Context): overlaid prices rank the fleet's overrides.
        self.overlays: OverlayStore | None = None
        self._denied: dict[str, AuthorizationError] = {}
        #: (expressions, catalog type names) -> None (valid) or (reason, message): each distinct kubelet block is
        #: evaluated over the catalog once.
        self._kubelet_verdicts: dict[tuple[Any, ...], tuple[str, str] | None] = {}
        self._auth_backoff = Backoff(initial=AUTH_BACKOFF_START_SECONDS, maximum=AUTH_BACKOFF_MAX_SECONDS)

    def attach_metrics(self, metrics: Any) -> None:
        """Write the AWS provider's own families into ``metrics`` (a :class:`nodewright.metrics.Metrics`):
        ``karpenter_cloudprovider_instance_launch_failures_total``, ``..._termination_failures_total`` and
        ``karpenter_ec2nodeclasses_userdata_bytes`` (Karpenter AWS main)."""
        self.instances.metrics = metrics
        self.launch_templates.metrics = metrics

    # --- EC2NodeClass ---------------------------------------------------------------------------------------

    def _kubelet(self, nodeclass: EC2NodeClass) -> KubeletSettings:
        """The node class's kubelet settings with the controller-wide ``VM_MEMORY_OVERHEAD_PERCENT`` and
        ``RESERVED_ENIS`` (Karpenter settings) for the allocatable maths."""
        return dataclasses.replace(kubelet_settings(nodeclass),
                                   vm_memory_overhead_percent=self.settings.vm_memory_overhead_percent,
                                   reserved_enis=self.settings.reserved_enis)

    def _nodeclass(self, name: str) -> EC2NodeClass:
        nodeclass = self._nodeclasses(name)
        if nodeclass is None:
            raise NodeClassNotReadyError(f"EC2NodeClass {name!r} not found")
        return nodeclass

    @botocore_errors("ResolveNodeClass")
    def resolve_nodeclass(self, nodeclass: EC2NodeClass) -> ResolvedNodeClass:
        """Subnets, security groups, AMIs and instance profile of ``nodeclass``.

        Raises:
            NodeClassNotReadyError: a selector matched nothing (the message names which).
            AuthorizationError: a describe/IAM call was denied.
        """
        spec = nodeclass.spec
        self._check_kubelet(nodeclass)
        subnets = self.subnets.resolve(spec.subnet_selector_terms)
        if not subnets:
            raise NodeClassNotReadyError(f"EC2NodeClass {nodeclass.name!r}: subnetSelectorTerms matched no subnet")
        groups = self.security_groups.resolve(spec.security_group_selector_terms)
        if not groups:
            raise NodeClassNotReadyError(
                f"EC2NodeClass {nodeclass.name!r}: securityGroupSelectorTerms matched no security group")
        amis = self.amis.resolve(spec.ami_selector_terms)
        if not amis:
            raise NodeClassNotReadyError(f"EC2NodeClass {nodeclass.name!r}: amiSelectorTerms matched no AMI "
                                         f"(Kubernetes {self.settings.kubernetes_version})")
        profile = self.instance_profiles.resolve(nodeclass.name, spec.role, spec.instance_profile, spec.tags)
        terms = spec.capacity_reservation_selector_terms or []
        # ReservedCapacity=false: no DescribeCapacityReservations, no reserved offerings, no status entries.
        reservations = (self.capacity_reservations.resolve(terms)
                        if self.reserved_capacity.allows(nodeclass.name, bool(terms)) else [])
        return ResolvedNodeClass(subnets, groups, amis, profile, self.subnets.zonal(spec.subnet_selector_terms),
                                 reservations)

    def _check_kubelet(self, nodeclass: EC2NodeClass) -> None:
        """Karpenter v1.15's kubelet validation of an EC2NodeClass (no AWS call): fields the AMI family cannot
        apply, expressions while the ``NodeClassCEL`` gate is off, and expressions that do not compile or fail on
        a known instance type (each expression evaluated on every type of the catalog, once per distinct
        kubelet block).

        Raises:
            KubeletNotReadyError: naming the class, the field and the reason.
        """
        kubelet = nodeclass.spec.kubelet
        if kubelet is None:
            return
        name = nodeclass.name
        problems = userdata.unsupported_kubelet_fields(
            nodeclass.spec.resolved_ami_family, kubelet.model_dump(by_alias=True, exclude_none=True))
        if problems:
            raise KubeletNotReadyError(f"EC2NodeClass {name!r}: {'; '.join(problems)}",
                                       "UnsupportedKubeletConfiguration")
        found = kubelet.expressions()
        if not found:
            return
        if not self.settings.node_class_cel:
            raise KubeletNotReadyError(
                f"EC2NodeClass {name!r}: {', '.join(sorted(found))} use CEL expressions, which need the AWS feature "
                "gate NodeClassCEL (--aws-feature-gates NodeClassCEL=true; chart settings.awsFeatureGates."
                "nodeClassCEL)", "KubeletExpressionsDisabled")
        key = (tuple(sorted(found.items())), tuple(self.instance_types.names()))
        if key not in self._kubelet_verdicts:
            verdict: tuple[str, str] | None = None
            settings = self._kubelet(nodeclass)
            try:
                for type_name in key[1]:
                    record = self.instance_types.record(type_name)
                    if record is not None:
                        settings.for_type(record)
            except KubeletExpressionError as err:
                verdict = (err.reason, str(err))
            self._kubelet_verdicts[key] = verdict
        failed = self._kubelet_verdicts[key]
        if failed is not None:
            raise KubeletNotReadyError(f"EC2NodeClass {name!r}: {failed[1]}", failed[0])

    def nodeclass_status(self, nodeclass: EC2NodeClass) -> dict[str, object]:
        """The ``status`` to write back on ``nodeclass``: resolved subnets (id, zone, zoneID), security groups,
        AMIs (id, name, requirements), instance profile and ``Ready=True``; or only ``Ready=False`` with the
        reason (``NodeClassNotReady``, ``Unauthorized``) and the actionable message. Never raises for AWS
        errors it can explain."""
        try:
            return self.resolve_nodeclass(nodeclass).status()
        except (NodeClassNotReadyError, AuthorizationError) as err:
            reason = "Unauthorized" if isinstance(err, AuthorizationError) else getattr(err, "reason",
                                                                                        "NodeClassNotReady")
            return {"conditions": [{"type": "Ready", "status": "False", "reason": reason, "message": str(err)}]}

    # --- cleanup (EC2NodeClass finalizer, launch-template garbage collection) -------------------------------

    @botocore_errors("DeleteNodeClassResources")
    def delete_nodeclass_resources(self, nodeclass: str) -> None:
        """The managed instance profile of ``nodeclass`` (whether or not the class still names ``spec.role``: a
        class switched to ``spec.instanceProfile`` leaves the old one behind) and every launch template tagged
        with it. See :class:`nodewright.controllers.nodeclass.NodeClassResources`."""
        self.instance_profiles.delete(nodeclass)
        self.launch_templates.delete_for_nodeclass(nodeclass)

    @botocore_errors("GarbageCollectLaunchTemplates")
    def garbage_collect_launch_templates(self, needed: dict[str, set[str]]) -> builtins.list[str]:
        """See :meth:`nodewright.cloud.aws.launchtemplates.LaunchTemplateProvider.garbage_collect`."""
        return self.launch_templates.garbage_collect(needed)

    # --- authorization backoff ------------------------------------------------------------------------------

    def _guarded(self, key: str, action: Callable[[], NodeClaim]) -> NodeClaim:
        now = self._clock()
        denied = self._denied.get(key)
        if denied is not None and not self._auth_backoff.ready(key, now):
            raise denied
        try:
            result = action()
        except AuthorizationError as err:
            self._denied[key] = err
            log.error(str(err), extra={"nodeclass": key, "retry_in_seconds": self._auth_backoff.failed(key, now)})
            raise
        self._denied.pop(key, None)
        self._auth_backoff.succeeded(key)
        return result

    # --- CloudProvider --------------------------------------------------------------------------------------

    @botocore_errors("Create")
    def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """See :meth:`nodewright.cloud.provider.CloudProvider.create`."""
        ref = nodeclaim.spec.node_class_ref.name
        return self._guarded(ref, lambda: self._create(nodeclaim, self._nodeclass(ref)))

    def _create(self, nodeclaim: NodeClaim, nodeclass: EC2NodeClass) -> NodeClaim:
        resolved = self.resolve_nodeclass(nodeclass)
        self._refresh_prices()
        types = self._types_for(nodeclass, resolved.zonal_subnets, resolved.capacity_reservations)
        pool = nodeclaim.nodepool
        overlaid: set[str] = set()
        if self.overlays is not None:
            # Karpenter's Create applies the overlay store; overlaid prices go to EC2 as priorities (prioritized).
            types = self.overlays.launch_types(pool, types)
            overlaid = {it.name for it in types if self.overlays.price_overlaid(pool, it.name)}
        pairs = allowed_offerings(types, nodeclaim.spec.requirements, resolved.zonal_subnets)
        candidates: list[FleetCandidate] = []
        by_name = {it.name: it for it in types}
        pricing = self.launch_pricing(types) if self.launch_pricing is not None else None
        for instance_type, offering in pairs:
            ami = next((a for a in resolved.amis if a.fits(instance_type.labels)), None)
            if ami is None:
                continue
            template = self._launch_template(nodeclaim, nodeclass, resolved, ami, instance_type, offering.capacity_type,
                                             offering.reservation_id)
            candidates.append(FleetCandidate(instance_type.name, offering.zone,
                                             resolved.zonal_subnets[offering.zone].id,
                                             offering.capacity_type, offering.price, template,
                                             offering.reservation_id,
                                             pricing.price(instance_type.name, offering) if pricing is not None
                                             else offering.price if instance_type.name in overlaid else None))
        if not candidates:
            raise NodeClassNotReadyError(
                f"no offering of EC2NodeClass {nodeclass.name!r} satisfies nodeclaim {nodeclaim.metadata.name!r}: "
                f"{len(types)} instance types in zones {sorted(resolved.zonal_subnets)}, none allowed and available")
        instance = self.instances.launch(LaunchRequest(
            nodeclaim=nodeclaim.metadata.name or "", token_seed=nodeclaim.metadata.uid or nodeclaim.metadata.name or "",
            candidates=candidates, tags=self._tags(nodeclaim, nodeclass)))
        if instance.capacity_reservation_id:
            self.capacity_reservations.mark_launched(instance.capacity_reservation_id)
        return launched(nodeclaim, instance, self.settings.region, by_name.get(instance.instance_type),
                        ec2nodeclass_hash_annotations(nodeclass))

    def _refresh_prices(self) -> None:
        # A no-op unless a refresh period has passed. With a narrowed catalog, ask spot history for those types
        # only; otherwise for all (one paginated call, as Karpenter).
        names = self.instance_types.names() if self.settings.instance_type_patterns else None
        self.pricing.refresh(names)

    def _tags(self, nodeclaim: NodeClaim, nodeclass: EC2NodeClass) -> dict[str, str]:
        return tags.instance_tags(self.settings.cluster_name, nodeclaim.nodepool or "", nodeclass.name,
                                  nodeclaim.metadata.name or "", nodeclass.spec.tags)

    def _launch_template(self, nodeclaim: NodeClaim, nodeclass: EC2NodeClass, resolved: ResolvedNodeClass,
                         ami: AMI, instance_type: InstanceType, capacity_type: str, reservation_id: str = "") -> str:
        spec = nodeclass.spec
        family = spec.resolved_ami_family
        record = self.instance_types.record(instance_type.name)
        kubelet = self._kubelet(nodeclass)
        resolved_kubelet = kubelet.for_type(record) if record is not None else kubelet
        options = userdata.BootstrapOptions(
            cluster_name=self.settings.cluster_name, cluster_endpoint=self.settings.cluster_endpoint,
            ca_bundle=self.settings.ca_bundle, cluster_cidr=self.settings.cluster_cidr,
            labels=registration_labels(nodeclaim), taints=registration_taints(nodeclaim),
            max_pods=instance_type.capacity.get("pods"),
            kubelet=userdata.node_kubelet(spec.kubelet, resolved_kubelet),
            cluster_dns=tuple(spec.kubelet.cluster_dns or ()) if spec.kubelet else self.settings.cluster_dns,
            custom_user_data=spec.user_data, instance_store_policy=spec.instance_store_policy,
            ami_version=next((t.alias_version for t in spec.ami_selector_terms if t.alias), ""))
        template = self.launch_templates.ensure(LaunchTemplateSpec(
            cluster_name=self.settings.cluster_name, nodeclass=nodeclass.name, image_id=ami.id,
            user_data=userdata.user_data(family, options),
            security_group_ids=tuple(g.id for g in resolved.security_groups),
            instance_profile=resolved.instance_profile,
            block_device_mappings=tuple(block_devices(spec.block_device_mappings, family)),
            metadata_options=metadata_options(spec.metadata_options),
            tags=tags.resource_tags(self.settings.cluster_name, nodeclaim.nodepool or "", nodeclass.name, spec.tags),
            associate_public_ip=spec.associate_public_ip_address,
            detailed_monitoring=bool(spec.detailed_monitoring), capacity_type=capacity_type,
            capacity_reservation_id=reservation_id,
            **launch_options(spec)))
        return template.name

    @botocore_errors("Delete")
    def delete(self, nodeclaim: NodeClaim) -> None:
        """See :meth:`nodewright.cloud.provider.CloudProvider.delete`."""
        provider_id = nodeclaim.status.provider_id if nodeclaim.status else None
        if provider_id:
            self.instances.terminate(parse_provider_id(provider_id)[1])
            return
        # Never launched as far as the NodeClaim knows: a crash may have hidden a launch; look by tag.
        instance = self.instances.find_by_nodeclaim(nodeclaim.metadata.name or "")
        if instance is None:
            raise NodeClaimNotFoundError(f"nodeclaim {nodeclaim.metadata.name} has no instance")
        self.instances.terminate(instance.id)

    @botocore_errors("Reboot")
    def reboot(self, nodeclaim: NodeClaim) -> None:
        """See :meth:`nodewright.cloud.provider.Rebooter.reboot` (``ec2:RebootInstances``)."""
        provider_id = nodeclaim.status.provider_id if nodeclaim.status else None
        if not provider_id:
            raise NodeClaimNotFoundError(f"nodeclaim {nodeclaim.metadata.name} has no instance")
        self.instances.reboot(parse_provider_id(provider_id)[1])

    def repair_policies(self) -> Sequence[RepairPolicy]:
        """See :meth:`nodewright.cloud.provider.RepairPolicySource.repair_policies` (:mod:`.repair`)."""
        return AWS_REPAIR_POLICIES

    def _view(self, instance: Instance) -> NodeClaim:
        types = {it.name: it for it in self.instance_types.instance_types([instance.zone])}
        return from_instance(instance, self.settings.region, types.get(instance.instance_type))

    @botocore_errors("Get")
    def get(self, provider_id: str) -> NodeClaim:
        """See :meth:`nodewright.cloud.provider.CloudProvider.get`."""
        try:
            instance_id = parse_provider_id(provider_id)[1]
        except ValueError as err:
            raise NodeClaimNotFoundError(str(err)) from err
        instance = self.instances.get(instance_id)
        assert instance is not None  # get() raises rather than returning None here
        return self._view(instance)

    @botocore_errors("List")
    def list(self) -> builtins.list[NodeClaim]:
        """See :meth:`nodewright.cloud.provider.CloudProvider.list`."""
        return [self._view(i) for i in self.instances.list_instances()]

    @botocore_errors("GetInstanceTypes")
    def get_instance_types(self, nodepool: NodePool) -> builtins.list[InstanceType]:
        """See :meth:`nodewright.cloud.provider.CloudProvider.get_instance_types`.

        Only types with an AMI that can boot them (architecture, GPU/Neuron variant) are returned.
        """
        nodeclass = self._nodeclass(nodepool.spec.template.spec.node_class_ref.name)
        resolved = self.resolve_nodeclass(nodeclass)
        self._refresh_prices()
        types = self._types_for(nodeclass, resolved.zonal_subnets, resolved.capacity_reservations)
        return [it for it in types if any(a.fits(it.labels) for a in resolved.amis)]

    def _types_for(self, nodeclass: EC2NodeClass, zones: Iterable[str],
                   reservations: Sequence[CapacityReservation] = ()) -> builtins.list[InstanceType]:
        """The region's types as ``nodeclass``'s nodes see them (kubelet overhead, OS, nested virtualization), with
        a ``reserved`` offering per selected capacity reservation that still has room
        (:func:`nodewright.cloud.reservations.with_reservations`)."""
        types = self.instance_types.instance_types(zones, self._kubelet(nodeclass))
        types = instance_types_for_nodeclass(types, nodeclass.spec, self.instance_types.record)
        if reservations:
            types = with_reservations(types, reservations, self.capacity_reservations.launched)
        return types

    @botocore_errors("IsDrifted")
    def is_drifted(self, nodeclaim: NodeClaim) -> str | None:
        """See :meth:`nodewright.cloud.provider.CloudProvider.is_drifted`."""
        nodeclass = self._nodeclass(nodeclaim.spec.node_class_ref.name)
        annotations = nodeclaim.metadata.annotations or {}
        stamped = stamped_nodeclass_hash(annotations)
        if stamped is not None and stamped != ec2nodeclass_hash(nodeclass):
            return DRIFT_NODECLASS
        provider_id = nodeclaim.status.provider_id if nodeclaim.status else None
        if not provider_id:
            return None
        instance = self.instances.get(parse_provider_id(provider_id)[1])
        assert instance is not None
        resolved = self.resolve_nodeclass(nodeclass)
        if instance.image_id and instance.image_id not in {a.id for a in resolved.amis}:
            return DRIFT_AMI
        if instance.subnet_id and instance.subnet_id not in {s.id for s in resolved.subnets}:
            return DRIFT_SUBNET
        if instance.security_group_ids and set(instance.security_group_ids) != {g.id for g in resolved.security_groups}:
            return DRIFT_SECURITY_GROUP
        return None

    # --- interruption ---------------------------------------------------------------------------------------

    def mark_spot_interrupted(self, instance_type: str, zone: str) -> None:
        """Keep the spot offering of an interrupted instance out of launches for the unavailability window."""
        self.unavailable.mark_spot_interrupted(instance_type, zone)
