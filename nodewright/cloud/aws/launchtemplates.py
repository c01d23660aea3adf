"""Launch templates: one per distinct launch configuration, created with tags, reused, deleted when unused.

The name is ``nodewright/<cluster>/<hash>`` where the hash covers everything that changes what boots: the
EC2NodeClass name, AMI, userData (which carries the NodeClaim's labels and taints), security groups, block
devices, metadata options, instance profile, public IP and monitoring settings, and tags. Same inputs, same
name: an existing template is found and reused instead of created again (Karpenter does the same with its
``karpenter.k8s.aws/<hash>`` names).

Tags (Karpenter v1, see :mod:`nodewright.cloud.aws.tags`): the template, and the network interfaces and spot
requests launched from it (the template data's ``TagSpecifications``), carry the ownership tag, ``eks:eks-cluster-name``,
``karpenter.sh/nodepool``, ``karpenter.k8s.aws/ec2nodeclass`` and the EC2NodeClass's tags: the controller policy
lets CreateFleet use a template only when it carries them. A template is therefore per NodePool, and per capacity
type (spot requests are tagged only in spot templates, as Karpenter does).

Refresh policy: a template known to exist is trusted for 10 minutes; a fleet error saying it is gone
invalidates it. :meth:`LaunchTemplateProvider.delete_unused` removes this cluster's templates that no
current configuration needs; its callers (Karpenter's ``DeleteAll`` on EC2NodeClass termination, and its
launch-template cache eviction) are :meth:`LaunchTemplateProvider.delete_for_nodeclass` (the EC2NodeClass
finalizer, :mod:`nodewright.controllers.nodeclass`) and :meth:`LaunchTemplateProvider.garbage_collect` (the
periodic pass of :class:`nodewright.controllers.garbagecollection.LaunchTemplateGC`).

Karpenter v1.14's EC2NodeClass launch fields (``launchtemplate.go``): ``networkInterfaces`` become the
template's interfaces (security groups on each, ``Ipv4PrefixCount``, public IP and connection tracking on all but
``efa-only`` ones); without them, ``ipPrefixCount``, ``connectionTracking`` or ``associatePublicIPAddress`` put one
primary interface (device 0) in the template; ``cpuOptions.nestedVirtualization`` -> ``CpuOptions``;
``placementGroupSelector`` -> ``Placement`` by ``GroupName``/``GroupId`` (EC2 resolves it; Karpenter resolves it
first and also picks a partition, which is not done here).

Defaults (Karpenter v1): IMDSv2 required with hop limit 1; root volumes gp3, encrypted, 20 GiB on
``/dev/xvda`` for AL2023/AL2; Bottlerocket gets a 4 GiB OS volume on ``/dev/xvda`` and a 20 GiB data volume
on ``/dev/xvdb``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api import labels
from nodewright.api.ec2nodeclass import BlockDeviceMapping, EC2NodeClassSpec, MetadataOptions
from nodewright.cloud.aws.cache import Clock, TTLCache
from nodewright.cloud.aws.errors import error_code, is_not_found_error, translate
from nodewright.cloud.aws.filters import tag_filters, tag_list
from nodewright.cloud.aws.tags import ownership_tag
from nodewright.cloud.instancetype import CAPACITY_TYPE_SPOT

log = logging.getLogger(__name__)

LAUNCH_TEMPLATE_TTL_SECONDS = 600.0

_GIB = 2**30


def _default_ebs(size_gib: int) -> dict[str, Any]:
    return {"VolumeSize": size_gib, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}


def default_block_devices(ami_family: str) -> list[dict[str, Any]]:
    """EC2 ``BlockDeviceMappings`` used when the EC2NodeClass declares none (sizes in GiB)."""
    if ami_family == "Bottlerocket":
        return [{"DeviceName": "/dev/xvda", "Ebs": _default_ebs(4)}, {"DeviceName": "/dev/xvdb", "Ebs": _default_ebs(20)}]
    if ami_family in ("AL2023", "AL2"):
        return [{"DeviceName": "/dev/xvda", "Ebs": _default_ebs(20)}]
    return []


def volume_size_gib(size: str) -> int:
    """An EC2NodeClass ``volumeSize`` (``"20Gi"``, ``"100G"``, ``"1Ti"``, ``"1T"``) in whole GiB, rounded up.

    Raises:
        ValueError: not one of those forms.
    """
    match = re.fullmatch(r"(\d+)(Gi|G|Ti|T)", size)
    if not match:
        raise ValueError(f"volumeSize {size!r} is not a whole number of Gi, G, Ti or T")
    number, unit = int(match[1]), match[2]
    scale = {"Gi": _GIB, "G": 10**9, "Ti": 1024 * _GIB, "T": 10**12}[unit]
    return math.ceil(number * scale / _GIB)


def block_devices(mappings: Sequence[BlockDeviceMapping] | None, ami_family: str) -> list[dict[str, Any]]:
    """EC2 ``BlockDeviceMappings`` from an EC2NodeClass's ``blockDeviceMappings`` (or the family defaults)."""
    if not mappings:
        return default_block_devices(ami_family)
    out = []
    for mapping in mappings:
        ebs: dict[str, Any] = {}
        if mapping.ebs is not None:
            source = mapping.ebs
            pairs = {"VolumeSize": volume_size_gib(source.volume_size) if source.volume_size else None,
                     "VolumeType": source.volume_type, "Encrypted": source.encrypted,
                     "DeleteOnTermination": source.delete_on_termination, "Iops": source.iops,
                     "Throughput": source.throughput, "KmsKeyId": source.kms_key_id, "SnapshotId": source.snapshot_id}
            ebs = {k: v for k, v in pairs.items() if v is not None}
        out.append({"DeviceName": mapping.device_name or "/dev/xvda", "Ebs": ebs})
    return out


def metadata_options(options: MetadataOptions | None) -> dict[str, Any]:
    """EC2 ``MetadataOptions``; defaults IMDSv2 required, hop limit 1 (Karpenter v1)."""
    options = options or MetadataOptions()
    return {"HttpEndpoint": options.http_endpoint, "HttpProtocolIpv6": options.http_protocol_ipv6,
            "HttpPutResponseHopLimit": options.http_put_response_hop_limit, "HttpTokens": options.http_tokens}


def launch_options(spec: EC2NodeClassSpec) -> dict[str, Any]:
    """The :class:`LaunchTemplateSpec` keyword arguments for an EC2NodeClass's v1.14 launch fields
    (``network_interfaces``, ``ip_prefix_count``, ``connection_tracking``, ``cpu_options``, ``placement``), in EC2
    API shapes; unset fields are left out."""
    out: dict[str, Any] = {}
    if spec.network_interfaces:
        out["network_interfaces"] = tuple((n.network_card_index, n.device_index, n.interface_type)
                                          for n in spec.network_interfaces)
    if spec.ip_prefix_count is not None:
        out["ip_prefix_count"] = spec.ip_prefix_count
    ct = spec.connection_tracking
    if ct is not None:
        pairs = {"TcpEstablishedTimeout": ct.tcp_established_timeout, "UdpStreamTimeout": ct.udp_stream_timeout,
                 "UdpTimeout": ct.udp_timeout}
        out["connection_tracking"] = {k: v for k, v in pairs.items() if v is not None}
    if spec.cpu_options is not None and spec.cpu_options.nested_virtualization is not None:
        out["cpu_options"] = {"NestedVirtualization": spec.cpu_options.nested_virtualization}
    pg = spec.placement_group_selector
    if pg is not None:
        out["placement"] = {"GroupId": pg.id} if pg.id else {"GroupName": pg.name}
    return out


@dataclass(frozen=True)
class LaunchTemplateSpec:
    """Everything a launch template holds.

    Attributes:
        cluster_name: EKS cluster name (in the name and tags).
        nodeclass: EC2NodeClass name.
        image_id: ``ami-...``.
        user_data: the final userData text (not yet base64).
        security_group_ids: sorted ``sg-...`` ids.
        instance_profile: instance profile name.
        block_device_mappings: EC2 API shape (see :func:`block_devices`).
        metadata_options: EC2 API shape (see :func:`metadata_options`).
        tags: tags of the template and of the network interfaces and spot requests it creates
            (:func:`nodewright.cloud.aws.tags.resource_tags`).
        capacity_type: ``spot`` adds the spot-instances-request tag specification; otherwise not used.
        associate_public_ip: None to follow the subnet's setting.
        detailed_monitoring: CloudWatch detailed monitoring.
        network_interfaces: ``(network card index, device index, "interface" | "efa-only")`` per interface.
        ip_prefix_count: IPv4 /28 prefixes per (non-EFA-only) interface.
        connection_tracking: EC2 ``ConnectionTrackingSpecification`` (seconds).
        cpu_options: EC2 ``CpuOptions``; placement: EC2 ``Placement`` (see :func:`launch_options`).
        capacity_reservation_id: ``cr-...`` to launch into: ``CapacityReservationSpecification.
            CapacityReservationTarget`` (Karpenter: one template per targeted reservation); ``capacity-block``
            reservations also need ``InstanceMarketOptions.MarketType: capacity-block``, not sent here.
    """

    cluster_name: str
    nodeclass: str
    image_id: str
    user_data: str
    security_group_ids: tuple[str, ...]
    instance_profile: str
    block_device_mappings: tuple[Mapping[str, Any], ...] = ()
    metadata_options: Mapping[str, Any] = field(default_factory=lambda: metadata_options(None))
    tags: Mapping[str, str] = field(default_factory=dict)
    associate_public_ip: bool | None = None
    detailed_monitoring: bool = False
    capacity_type: str = ""
    network_interfaces: tuple[tuple[int, int, str], ...] = ()
    ip_prefix_count: int | None = None
    connection_tracking: Mapping[str, int] | None = None
    cpu_options: Mapping[str, str] | None = None
    placement: Mapping[str, str] | None = None
    capacity_reservation_id: str = ""

    def _interface(self, card: int, device: int, kind: str | None) -> dict[str, Any]:
        nic: dict[str, Any] = {"DeviceIndex": device, "Groups": list(self.security_group_ids)}
        if kind is not None:
            nic.update({"NetworkCardIndex": card, "InterfaceType": kind})
        if kind != "efa-only":  # EC2 refuses prefixes, public IPs and conntrack on EFA-only interfaces
            if self.associate_public_ip is not None:
                nic["AssociatePublicIpAddress"] = self.associate_public_ip
            if self.ip_prefix_count is not None:
                nic["Ipv4PrefixCount"] = self.ip_prefix_count
            if self.connection_tracking:
                nic["ConnectionTrackingSpecification"] = dict(self.connection_tracking)
        return nic

    def data(self) -> dict[str, Any]:
        """The ``LaunchTemplateData`` document sent to ``ec2:CreateLaunchTemplate``."""
        data: dict[str, Any] = {
            "ImageId": self.image_id,
            "UserData": base64.b64encode(self.user_data.encode()).decode(),
            "IamInstanceProfile": {"Name": self.instance_profile},
            "BlockDeviceMappings": [dict(m) for m in self.block_device_mappings],
            "MetadataOptions": dict(self.metadata_options),
            "Monitoring": {"Enabled": self.detailed_monitoring},
        }
        if self.network_interfaces:
            data["NetworkInterfaces"] = [self._interface(*nic) for nic in self.network_interfaces]
        elif self.associate_public_ip is not None or self.ip_prefix_count is not None or self.connection_tracking:
            data["NetworkInterfaces"] = [self._interface(0, 0, None)]
        else:
            data["SecurityGroupIds"] = list(self.security_group_ids)
        if self.cpu_options:
            data["CpuOptions"] = dict(self.cpu_options)
        if self.placement:
            data["Placement"] = dict(self.placement)
        if self.capacity_reservation_id:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": self.capacity_reservation_id}}
        if self.tags:
            kinds = ("network-interface", "spot-instances-request") if self.capacity_type == CAPACITY_TYPE_SPOT \
                else ("network-interface",)
            data["TagSpecifications"] = [{"ResourceType": kind, "Tags": tag_list(self.tags)} for kind in kinds]
        return data

    def name(self) -> str:
        """``nodewright/<cluster>/<16 hex of sha256 over the data, tags and nodeclass>``."""
        digest = hashlib.sha256(json.dumps({"data": self.data(), "tags": dict(self.tags),
                                            "nodeclass": self.nodeclass}, sort_keys=True).encode()).hexdigest()
        return f"nodewright/{self.cluster_name}/{digest[:16]}"


def _gone(err: ClientError) -> bool:
    """EC2 says the template does not exist (another replica or a user deleted it)."""
    return is_not_found_error(error_code(err)) or error_code(err) == "InvalidLaunchTemplateName.NotFoundException"


@dataclass(frozen=True, slots=True)
class LaunchTemplate:
    """A launch template that exists in EC2."""

    name: str
    id: str
    image_id: str


class LaunchTemplateProvider:
    """Creates, reuses and deletes this cluster's launch templates."""

    def __init__(self, ec2: Any, cluster_name: str, clock: Clock = time.monotonic,
                 ttl: float = LAUNCH_TEMPLATE_TTL_SECONDS) -> None:
        self._ec2 = ec2
        self.cluster_name = cluster_name
        self._known: TTLCache[LaunchTemplate] = TTLCache(ttl, clock)
        self._clock = clock
        self.ttl = ttl
        self._used: dict[str, float] = {}  # template name -> clock time of its last ensure()
        self._seen: dict[str, float] = {}  # template name -> when garbage_collect first listed it
        self.created = 0
        """How many templates this provider created (a reuse counter for tests and metrics)."""
        #: Set by AWSCloudProvider.attach_metrics: karpenter_ec2nodeclasses_userdata_bytes.
        self.metrics: Any = None

    def ensure(self, spec: LaunchTemplateSpec) -> LaunchTemplate:
        """The template for ``spec``: cached, else found by name, else created.

        Raises:
            AuthorizationError: ``ec2:CreateLaunchTemplate``/``DescribeLaunchTemplates`` denied.
            LaunchError: any other AWS error.
        """
        name = spec.name()
        self._used[name] = self._clock()
        known = self._known.get(name)
        if known is not None:
            return known
        template = self._find(name, spec.image_id) or self._create(name, spec)
        return self._known.put(name, template)

    def invalidate(self, name: str) -> None:
        """Forget a template (a fleet said it does not exist)."""
        self._known.delete(name)

    def _find(self, name: str, image_id: str) -> LaunchTemplate | None:
        try:
            found = self._ec2.describe_launch_templates(LaunchTemplateNames=[name])["LaunchTemplates"]
        except ClientError as err:
            if _gone(err):
                return None
            raise translate(err, operation="ec2:DescribeLaunchTemplates") from err
        return LaunchTemplate(name, found[0]["LaunchTemplateId"], image_id) if found else None

    def _create(self, name: str, spec: LaunchTemplateSpec) -> LaunchTemplate:
        if self.metrics is not None:  # measured before the create, so an oversized one is still reported
            self.metrics.userdata_bytes.labels(spec.nodeclass).set(len(spec.user_data.encode()))
        try:
            created = self._ec2.create_launch_template(
                LaunchTemplateName=name, LaunchTemplateData=spec.data(),
                TagSpecifications=[{"ResourceType": "launch-template", "Tags": tag_list(spec.tags)}])
        except ClientError as err:
            if error_code(err) == "InvalidLaunchTemplateName.AlreadyExistsException":
                # Another replica (or our previous life) created it between describe and create.
                found = self._find(name, spec.image_id)
                if found:
                    return found
            raise translate(err, operation="ec2:CreateLaunchTemplate") from err
        self.created += 1
        log.info("created launch template", extra={"launch_template": name, "ami": spec.image_id})
        return LaunchTemplate(name, created["LaunchTemplate"]["LaunchTemplateId"], spec.image_id)

    def delete_unused(self, in_use: Collection[str] = (), nodeclass: str | None = None,
                      keep: Callable[[Mapping[str, Any]], bool] | None = None) -> list[str]:
        """Delete this cluster's templates whose names are not in ``in_use``; returns the deleted names.

        Only templates tagged ``kubernetes.io/cluster/<cluster>=owned`` and ``eks:eks-cluster-name=<cluster>`` are
        looked at: the ones the controller created, and the only ones its policy lets it delete.

        Args:
            in_use: names to keep.
            nodeclass: only templates tagged ``karpenter.k8s.aws/ec2nodeclass=<nodeclass>``.
            keep: also keep a template when this returns True for its ``DescribeLaunchTemplates`` record.
        """
        deleted = []
        wanted = {ownership_tag(self.cluster_name): "owned", labels.TAG_CLUSTER_NAME: self.cluster_name}
        if nodeclass is not None:
            wanted[labels.TAG_EC2NODECLASS] = nodeclass
        try:
            paginator = self._ec2.get_paginator("describe_launch_templates")
            pages = paginator.paginate(Filters=tag_filters(wanted))
            records = [t for page in pages for t in page.get("LaunchTemplates", [])]
            for record in records:
                name = record["LaunchTemplateName"]
                if name in in_use or (keep is not None and keep(record)):
                    continue
                try:
                    self._ec2.delete_launch_template(LaunchTemplateName=name)
                except ClientError as err:
                    if not _gone(err):
                        raise
                self._known.delete(name)
                self._used.pop(name, None)
                self._seen.pop(name, None)
                deleted.append(name)
                log.info("deleted launch template", extra={"launch_template": name})
        except ClientError as err:
            raise translate(err, operation="ec2:DeleteLaunchTemplate") from err
        return deleted

    def delete_for_nodeclass(self, nodeclass: str) -> list[str]:
        """Delete every template of ``nodeclass`` (Karpenter ``launchtemplate.Provider.DeleteAll``, called by its
        EC2NodeClass termination finalizer)."""
        return self.delete_unused(nodeclass=nodeclass)

    def garbage_collect(self, needed: Mapping[str, Collection[str]]) -> list[str]:
        """Delete the templates no current EC2NodeClass / NodePool / capacity type needs; returns their names.

        A template is needed while both hold: its ``karpenter.k8s.aws/ec2nodeclass`` tag names a class in
        ``needed`` whose NodePools include its ``karpenter.sh/nodepool`` tag; and it was used for a launch within
        :attr:`ttl` seconds (a changed class -- new AMI, security groups, userData -- or a capacity type a pool no
        longer allows makes new templates, and the old ones stop being used). A template this provider has not
        used since it started gets :attr:`ttl` seconds from the first pass that listed it (Karpenter hydrates its
        launch-template cache at start and deletes a template when it is evicted unused).

        Args:
            needed: EC2NodeClass name -> names of the NodePools that reference it.
        """
        now = self._clock()

        def keep(record: Mapping[str, Any]) -> bool:
            name = record["LaunchTemplateName"]
            tags = {t["Key"]: t.get("Value", "") for t in record.get("Tags", [])}
            if tags.get(labels.TAG_NODEPOOL) not in needed.get(tags.get(labels.TAG_EC2NODECLASS, ""), ()):
                return False
            last = self._used.get(name, self._seen.setdefault(name, now))
            return now - last < self.ttl

        return self.delete_unused(keep=keep)
