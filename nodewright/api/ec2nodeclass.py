"""``EC2NodeClass`` (``karpenter.k8s.aws/v1``): the AWS side of a node (AMI, subnets, security
groups, IAM role or instance profile, user data, tags, kubelet settings, block devices, IMDS).

Rules follow the Karpenter AWS provider v1 CRD (as of v1.14, ``pkg/apis/v1/ec2nodeclass.go``):
selector term lists hold 1..30 terms; an ``alias`` (``<family>@<version>``, family one of al2,
al2023, bottlerocket, windows2019, windows2022, windows2025; Windows only ``@latest``) must be the
only AMI term and alone in it; ``amiFamily`` is required without an alias and, with one, must be
the alias's family or ``Custom`` (user data is then entirely the user's); exactly one of ``role``
and ``instanceProfile``; at most one ``rootVolume`` block device; IMDS defaults to ``httpTokens:
required`` and hop limit 1; user tags may not use keys Karpenter owns. v1.14 fields:
``capacityReservationSelectorTerms`` (<= 30; ``id`` alone, or tags / ownerID /
instanceMatchCriteria), ``placementGroupSelector`` (exactly one of name, id), ``ipPrefixCount``
(>= 0), ``networkInterfaces`` (<= 150; a primary ``interface`` at card 0 / device 0, unique
(card, device) pairs, at most one ``efa-only`` per card), ``connectionTracking`` (TCP established
60..432000 s, UDP stream 60..180 s, UDP 30..60 s; at least one) and ``cpuOptions``
(``nestedVirtualization`` enabled|disabled).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema, field_validator, model_validator

from nodewright.api import labels
from nodewright.api.base import (
    SELECTOR_TAGS_SCHEMA,
    Condition,
    KubeModel,
    LenientModel,
    ObjectMeta,
    StringMap,
    cel,
    cel_field,
    invalid,
)

AMIFamily = Literal["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]
# alias family (lowercase) -> amiFamily it implies
ALIAS_FAMILIES: dict[str, str] = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
#: Families whose nodes run Windows (Karpenter: amd64 types only, ``kubernetes.io/os: windows``).
WINDOWS_FAMILIES = frozenset({"Windows2019", "Windows2022", "Windows2025"})
MAX_ALIAS_LENGTH = 30
MAX_NETWORK_INTERFACES = 150
WINDOWS_ALIAS_FAMILIES = tuple(f for f in ALIAS_FAMILIES if f.startswith("windows"))
MAX_SELECTOR_TERMS = 30
MAX_SELECTOR_TAGS = 20
_ALIAS_RE = re.compile(r"^[a-zA-Z0-9]+@.+$")
_EBS_SIZE_RE = re.compile(r"^[0-9]+(Gi|G|Ti|T)$")


def _check_tags(tags: dict[str, str] | None, what: str) -> dict[str, str] | None:
    if tags is not None and len(tags) > MAX_SELECTOR_TAGS:
        raise ValueError(f"{what} may hold at most {MAX_SELECTOR_TAGS} entries, got {len(tags)}")
    for key, value in (tags or {}).items():
        if not key:
            raise ValueError(f"{what} keys must not be empty")
        if not isinstance(value, str) or not value:
            raise ValueError(f"{what} values must be non-empty strings (use '*' to match any), key {key!r}")
    return tags


class SubnetSelectorTerm(KubeModel):
    """Selects subnets by ``tags`` (all must match; value ``*`` matches any) or by ``id``."""

    model_config = cel(
        ("has(self.tags) || has(self.id)", "expected at least one, got none, ['tags', 'id']"),
        ("!has(self.id) || !has(self.tags)", "'id' is mutually exclusive, cannot be set with a combination of other fields"),
    )

    tags: StringMap | None = Field(default=None, json_schema_extra=SELECTOR_TAGS_SCHEMA)
    id: str | None = Field(default=None, pattern=r"^subnet-[0-9a-z]+$")

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        return _check_tags(tags, "tags")

    @model_validator(mode="after")
    def _one_way(self) -> SubnetSelectorTerm:
        if not self.tags and not self.id:
            raise invalid("", "expected at least one of 'tags' or 'id'")
        if self.id and self.tags:
            raise invalid("id", "'id' is mutually exclusive, cannot be set with a combination of other fields")
        return self


class SecurityGroupSelectorTerm(KubeModel):
    """Selects security groups by ``tags``, ``id`` or group ``name``."""

    model_config = cel(
        ("has(self.tags) || has(self.id) || has(self.name)", "expected at least one, got none, ['tags', 'id', 'name']"),
        ("!has(self.id) || !(has(self.tags) || has(self.name))",
         "'id' is mutually exclusive, cannot be set with a combination of other fields"),
        ("!has(self.name) || !(has(self.tags) || has(self.id))",
         "'name' is mutually exclusive, cannot be set with a combination of other fields"),
    )

    tags: StringMap | None = Field(default=None, json_schema_extra=SELECTOR_TAGS_SCHEMA)
    id: str | None = Field(default=None, pattern=r"^sg-[0-9a-z]+$")
    name: str | None = None

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        return _check_tags(tags, "tags")

    @model_validator(mode="after")
    def _one_way(self) -> SecurityGroupSelectorTerm:
        set_fields = [f for f in ("tags", "id", "name") if getattr(self, f)]
        if not set_fields:
            raise invalid("", "expected at least one of 'tags', 'id' or 'name'")
        for exclusive in ("id", "name"):
            if exclusive in set_fields and len(set_fields) > 1:
                raise invalid(
                    exclusive,
                    f"'{exclusive}' is mutually exclusive, cannot be set with a combination of other fields",
                )
        return self


class AMISelectorTerm(KubeModel):
    """Selects AMIs: ``alias`` (``family@version``, e.g. ``bottlerocket@latest``) alone, or any of
    ``tags``, ``id``, ``name``, ``owner`` (account ID or ``self``/``amazon``), ``ssmParameter``."""

    model_config = cel(
        ("has(self.alias) || has(self.tags) || has(self.id) || has(self.name) || has(self.ssmParameter)",
         "expected at least one, got none, ['alias', 'tags', 'id', 'name', 'ssmParameter']"),
        ("!has(self.alias) || !(has(self.tags) || has(self.id) || has(self.name) || has(self.owner) || has(self.ssmParameter))",
         "'alias' is mutually exclusive, cannot be set with a combination of other fields"),
        ("!has(self.id) || !(has(self.tags) || has(self.name) || has(self.ssmParameter))",
         "'id' is mutually exclusive, cannot be set with a combination of other fields"),
        ("!has(self.ssmParameter) || !(has(self.tags) || has(self.name))",
         "'ssmParameter' is mutually exclusive, cannot be set with a combination of other fields"),
    )

    alias: str | None = Field(default=None, max_length=MAX_ALIAS_LENGTH, json_schema_extra=cel_field(
        ("self.matches('^[a-zA-Z0-9]+@.+$')", "'alias' is improperly formatted, must match the format 'family@version'"),
        (f"self.split('@')[0] in [{', '.join(repr(f) for f in ALIAS_FAMILIES)}]",
         f"family is not supported, must be one of the following: {', '.join(repr(f) for f in ALIAS_FAMILIES)}"),
        (f"self.split('@')[0] in [{', '.join(repr(f) for f in WINDOWS_ALIAS_FAMILIES)}] ? "
         "self.split('@')[1] == 'latest' : true",
         "windows families may only specify version 'latest'"),
    ))
    tags: StringMap | None = Field(default=None, json_schema_extra=SELECTOR_TAGS_SCHEMA)
    id: str | None = Field(default=None, pattern=r"^ami-[0-9a-z]+$")
    name: str | None = None
    owner: str | None = None
    ssm_parameter: str | None = None

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        return _check_tags(tags, "tags")

    @field_validator("alias")
    @classmethod
    def _alias(cls, alias: str | None) -> str | None:
        if alias is None:
            return alias
        family = alias.split("@", 1)[0]
        if len(alias) > MAX_ALIAS_LENGTH:
            raise ValueError(f"alias must be at most {MAX_ALIAS_LENGTH} characters, got {alias!r}")
        if not _ALIAS_RE.match(alias) or family not in ALIAS_FAMILIES:
            raise ValueError(
                f"alias must be '<family>@<version>' with family one of {sorted(ALIAS_FAMILIES)}, got {alias!r}"
            )
        version = alias.split("@", 1)[1]
        if family.startswith("windows") and version != "latest":
            raise ValueError(f"Windows aliases only support 'latest', got {alias!r}")
        return alias

    @model_validator(mode="after")
    def _one_way(self) -> AMISelectorTerm:
        set_fields = [f for f in ("alias", "tags", "id", "name", "ssm_parameter") if getattr(self, f)]
        if not set_fields:
            raise invalid("", "expected at least one of 'alias', 'tags', 'id', 'name' or 'ssmParameter'")
        if self.alias and (len(set_fields) > 1 or self.owner):
            raise invalid("alias", "'alias' is mutually exclusive, cannot be set with a combination of other fields")
        if self.id and len(set_fields) > 1:
            raise invalid("id", "'id' is mutually exclusive, cannot be set with a combination of other fields")
        if self.ssm_parameter and len(set_fields) > 1:
            raise invalid(
                "ssmParameter",
                "'ssmParameter' is mutually exclusive, cannot be set with a combination of other fields",
            )
        return self

    @property
    def alias_family(self) -> str | None:
        """``amiFamily`` implied by the alias (``"bottlerocket@latest"`` -> ``"Bottlerocket"``)."""
        return ALIAS_FAMILIES[self.alias.split("@", 1)[0]] if self.alias else None

    @property
    def alias_version(self) -> str:
        """The version half of the alias (``"bottlerocket@v1.46.0"`` -> ``"v1.46.0"``), ``""`` without one."""
        return self.alias.split("@", 1)[1] if self.alias else ""


class CapacityReservationSelectorTerm(KubeModel):
    """Selects EC2 capacity reservations (On-Demand Capacity Reservations, Capacity Blocks) by ``id``
    (``cr-...``) alone, or by ``tags`` / ``ownerID`` (12-digit account) / ``instanceMatchCriteria``
    (``open`` | ``targeted``), ANDed. Terms are ORed (Karpenter v1.14 ``CapacityReservationSelectorTerm``)."""

    model_config = cel(
        ("has(self.tags) || has(self.id) || has(self.instanceMatchCriteria)",
         "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"),
        ("!has(self.id) || !(has(self.tags) || has(self.ownerID) || has(self.instanceMatchCriteria))",
         "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"),
    )

    tags: StringMap | None = Field(default=None, max_length=20)
    id: str | None = Field(default=None, pattern=r"^cr-[0-9a-z]+$")
    owner_id: str | None = Field(default=None, alias="ownerID", pattern=r"^[0-9]{12}$")
    instance_match_criteria: Literal["open", "targeted"] | None = None

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        return _check_tags(tags, "tags")

    @model_validator(mode="after")
    def _one_way(self) -> CapacityReservationSelectorTerm:
        if not (self.tags or self.id or self.instance_match_criteria):
            raise invalid("", "expected at least one of 'tags', 'id' or 'instanceMatchCriteria'")
        if self.id and (self.tags or self.owner_id or self.instance_match_criteria):
            raise invalid("id", "'id' is mutually exclusive, cannot be set along with other fields in a capacity "
                                "reservation selector term")
        return self


class PlacementGroupSelector(KubeModel):
    """The EC2 placement group to launch into, by ``name`` or by ``id`` (``pg-...``), exactly one."""

    model_config = cel(
        ("has(self.name) || has(self.id)", "expected at least one, got none, ['name', 'id']"),
        ("!(has(self.name) && has(self.id))", "'name' and 'id' are mutually exclusive"),
    )

    name: str | None = Field(default=None, min_length=1)
    id: str | None = Field(default=None, pattern=r"^pg-[0-9a-z]+$")

    @model_validator(mode="after")
    def _exactly_one(self) -> PlacementGroupSelector:
        if self.name is None and self.id is None:
            raise invalid("", "expected at least one of 'name' or 'id'")
        if self.name is not None and self.id is not None:
            raise invalid("id", "'name' and 'id' are mutually exclusive")
        return self


class NetworkInterface(KubeModel):
    """One network interface of the launch template: network card index, device index, and type
    (``interface`` = ENA, ``efa-only`` = an EFA device without IP traffic)."""

    network_card_index: int = Field(ge=0)
    device_index: int = Field(ge=0)
    interface_type: Literal["interface", "efa-only"]


class ConnectionTracking(KubeModel):
    """Idle connection-tracking timeouts (seconds) on the ENIs of the launch template (EFA-only ENIs
    excluded; Nitro instances only). Unset values keep EC2's defaults."""

    model_config = cel(
        ("has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)",
         "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"),
    )

    tcp_established_timeout: int | None = Field(default=None, ge=60, le=432_000)
    udp_stream_timeout: int | None = Field(default=None, ge=60, le=180)
    udp_timeout: int | None = Field(default=None, ge=30, le=60)

    @model_validator(mode="after")
    def _something(self) -> ConnectionTracking:
        if self.tcp_established_timeout is None and self.udp_stream_timeout is None and self.udp_timeout is None:
            raise invalid("", "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set")
        return self


class CPUOptions(KubeModel):
    """CPU options of the instances: ``nestedVirtualization`` (Karpenter then keeps only types whose
    ``ProcessorInfo.SupportedFeatures`` include ``nested-virtualization``)."""

    nested_virtualization: Literal["enabled", "disabled"] | None = None


def check_network_interfaces(interfaces: list[NetworkInterface]) -> None:
    """Karpenter's rules for ``networkInterfaces``: a primary ``interface`` at card 0 / device 0, unique
    (card, device) pairs, at most one ``efa-only`` interface per network card.

    Raises:
        PydanticCustomError: naming ``networkInterfaces[i]``.
    """
    if interfaces and not any(
        n.network_card_index == 0 and n.device_index == 0 and n.interface_type == "interface" for n in interfaces
    ):
        raise invalid("networkInterfaces", "networkInterfaces must include a primary interface with "
                                           "interfaceType='interface' at networkCardIndex 0, deviceIndex 0")
    seen: set[tuple[int, int]] = set()
    efa_cards: set[int] = set()
    for i, nic in enumerate(interfaces):
        pair = (nic.network_card_index, nic.device_index)
        if pair in seen:
            raise invalid(f"networkInterfaces[{i}]", f"duplicate networkCardIndex/deviceIndex pair {pair}")
        seen.add(pair)
        if nic.interface_type == "efa-only":
            if nic.network_card_index in efa_cards:
                raise invalid(f"networkInterfaces[{i}]",
                              f"at most one efa-only interface per network card ({nic.network_card_index})")
            efa_cards.add(nic.network_card_index)


EvictionSignal = Literal[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
]
ReservedResource = Literal["cpu", "memory", "ephemeral-storage", "pid"]


def _reserved_value(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"must be a quantity like '100m' or '1Gi' or a CEL expression, got {value!r}")
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str) and not value.strip():
        raise ValueError("must be a quantity or a CEL expression, got an empty string")
    return value


#: A ``kubeReserved``/``systemReserved`` value: a non-negative quantity (``"100Mi"``, ``2``) or, since Karpenter
#: v1.15, a CEL expression evaluated per instance type (any string that is not a quantity; see
#: :mod:`nodewright.cloud.kubeletexpr`). Karpenter's CRD dropped the quantity pattern for the same reason.
#: The CRD forbids the sign by pattern (``^[^-]``), not by a CEL rule over the map: the API server's cost estimate
#: refuses such a rule on an unbounded map of int-or-string values (422 "estimated rule cost exceeds budget", v1.36).
ReservedValue = Annotated[str, BeforeValidator(_reserved_value), WithJsonSchema(
    {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[^-]", "x-kubernetes-int-or-string": True})]
_EVICTION_VALUE_RE = re.compile(r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%|[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?)$")


class KubeletConfiguration(KubeModel):
    """Kubelet settings for the nodes. The fields Karpenter v1 typed are typed here: reserved resources are
    quantities (``cpu`` in cores/millicores, ``memory`` bytes with suffix); eviction thresholds are quantities
    or percentages; grace periods are durations. Karpenter v1.14 made ``kubelet`` an open map of upstream
    KubeletConfiguration fields: any other field is kept as given (``model_extra``) except ``registerWithTaints``,
    which Karpenter owns."""

    model_config = ConfigDict(extra="allow", **cel(  # type: ignore[typeddict-item]
        ("!has(self.imageGCHighThresholdPercent) || !has(self.imageGCLowThresholdPercent) || "
         "self.imageGCHighThresholdPercent >= self.imageGCLowThresholdPercent",
         "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"),
        ("has(self.evictionSoft) == has(self.evictionSoftGracePeriod) && (!has(self.evictionSoft) || "
         "(self.evictionSoft.all(e, e in self.evictionSoftGracePeriod) && "
         "self.evictionSoftGracePeriod.all(e, e in self.evictionSoft)))",
         "evictionSoft and evictionSoftGracePeriod must name the same signals"),
    ))

    cluster_dns: list[str] | None = Field(default=None, alias="clusterDNS")
    max_pods: int | str | None = Field(default=None, json_schema_extra={
        "anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True,
        "x-kubernetes-validations": [{"message": "maxPods must be a non-negative integer when set to an integer",
                                      "rule": "type(self) != int || self >= 0"}]})
    pods_per_core: int | None = Field(default=None, ge=0)
    system_reserved: dict[ReservedResource, ReservedValue] | None = None
    kube_reserved: dict[ReservedResource, ReservedValue] | None = None
    eviction_hard: dict[EvictionSignal, str] | None = None
    eviction_soft: dict[EvictionSignal, str] | None = None
    eviction_soft_grace_period: dict[EvictionSignal, str] | None = None
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = Field(default=None, ge=0, le=100, alias="imageGCHighThresholdPercent")
    image_gc_low_threshold_percent: int | None = Field(default=None, ge=0, le=100, alias="imageGCLowThresholdPercent")
    cpu_cfs_quota: bool | None = Field(default=None, alias="cpuCFSQuota")

    @field_validator("system_reserved", "kube_reserved")
    @classmethod
    def _not_negative(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for resource, quantity in (value or {}).items():
            if str(quantity).startswith("-"):
                raise ValueError(f"{resource}: reserved resources must not be negative, got {quantity!r}")
        return value

    @field_validator("max_pods")
    @classmethod
    def _max_pods(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, bool):
            raise ValueError("must be an integer or a CEL expression string")
        if isinstance(value, int) and value < 0:
            raise ValueError(f"Input should be greater than or equal to 0, got {value}")
        if isinstance(value, str) and not value.strip():
            raise ValueError("an expression must not be empty")
        return value

    def expressions(self) -> dict[str, str]:
        """Field path -> CEL expression of ``maxPods``/``kubeReserved``/``systemReserved`` values that are
        expressions rather than static values (:mod:`nodewright.cloud.kubeletexpr`); empty when all are static."""
        from nodewright.cloud.kubeletexpr import expressions

        return expressions(self.max_pods, self.kube_reserved or {}, self.system_reserved or {})

    @field_validator("eviction_hard", "eviction_soft")
    @classmethod
    def _thresholds(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for signal, threshold in (value or {}).items():
            if not _EVICTION_VALUE_RE.match(threshold):
                raise ValueError(f"{signal}: {threshold!r} is neither a quantity nor a percentage")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> KubeletConfiguration:
        from nodewright.api import durations

        if "registerWithTaints" in (self.model_extra or {}):
            raise invalid("registerWithTaints", "can't be set: Karpenter sets it from the NodeClaim's taints so the "
                                                "node registers unschedulable until it is ready")

        for signal, period in (self.eviction_soft_grace_period or {}).items():
            if not durations.is_duration(period):
                raise invalid(f"evictionSoftGracePeriod[{signal}]", f"{period!r} is not a duration")
        soft = set(self.eviction_soft or {})
        grace = set(self.eviction_soft_grace_period or {})
        if soft != grace:
            raise invalid(
                "evictionSoftGracePeriod",
                f"evictionSoft and evictionSoftGracePeriod must name the same signals, got {sorted(soft)} and {sorted(grace)}",
            )
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and low > high:
            raise invalid(
                "imageGCLowThresholdPercent",
                f"imageGCLowThresholdPercent ({low}) must not exceed imageGCHighThresholdPercent ({high})",
            )
        return self


VolumeType = Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]


class BlockDevice(KubeModel):
    """An EBS volume. ``volume_size`` is a quantity (``"20Gi"``); ``iops``/``throughput``
    (MiB/s) apply to gp3/io1/io2. A snapshot or a size is required (Karpenter's CRD rule)."""

    model_config = cel(("has(self.snapshotID) || has(self.volumeSize)", "snapshotID or volumeSize must be defined"))

    delete_on_termination: bool | None = None
    encrypted: bool | None = None
    iops: int | None = Field(default=None, ge=0)
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    throughput: int | None = Field(default=None, ge=0)
    volume_initialization_rate: int | None = Field(default=None, ge=100, le=300)
    volume_size: str | None = None
    volume_type: VolumeType | None = None

    @model_validator(mode="after")
    def _size_or_snapshot(self) -> BlockDevice:
        if self.snapshot_id is None and self.volume_size is None:
            raise invalid("", "snapshotID or volumeSize must be defined")
        return self

    @field_validator("volume_size")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None and not _EBS_SIZE_RE.match(value):
            raise ValueError(f"volumeSize must be a whole size in Gi, G, Ti or T, got {value!r}")
        return value


class BlockDeviceMapping(KubeModel):
    """``blockDeviceMappings[]``: device name (``/dev/xvda``), the EBS volume, and whether it is
    the root volume."""

    device_name: str | None = None
    ebs: BlockDevice | None = None
    root_volume: bool | None = None


class MetadataOptions(KubeModel):
    """Instance metadata service (IMDS) settings. Defaults are Karpenter v1's: IMDSv2 only
    (``httpTokens: required``) and a hop limit of 1 so pods cannot reach the node's credentials."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(default="disabled", alias="httpProtocolIPv6")
    http_put_response_hop_limit: int = Field(default=1, ge=1, le=64)
    http_tokens: Literal["required", "optional"] = "required"


def _check_user_tags(tags: dict[str, str] | None) -> dict[str, str] | None:
    for key in tags or {}:
        if not key:
            raise ValueError("empty tag keys aren't supported")
        if key in labels.RESTRICTED_TAG_KEYS or key.startswith(labels.TAG_CLUSTER_PREFIX):
            raise ValueError(f"tag contains a restricted tag {key!r}: Karpenter sets it itself")
    return tags


def _default_metadata_options() -> MetadataOptions:
    return MetadataOptions()


class EC2NodeClassSpec(KubeModel):
    """``spec`` of an EC2NodeClass."""

    model_config = cel(
        ("(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))",
         "must specify exactly one of ['role', 'instanceProfile']"),
        ("self.amiSelectorTerms.exists(x, has(x.alias)) || has(self.amiFamily)",
         "amiFamily is required when amiSelectorTerms does not contain an alias"),
        ("!has(self.amiFamily) || self.amiFamily == 'Custom' || !self.amiSelectorTerms.exists(x, has(x.alias)) || "
         "self.amiSelectorTerms.all(x, !has(x.alias) || x.alias.split('@')[0] == self.amiFamily.lowerAscii())",
         "if set, amiFamily must be the alias's family or 'Custom'"),
        ("!has(self.networkInterfaces) || self.networkInterfaces.size() == 0 || self.networkInterfaces.exists(x, "
         "x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')",
         "networkInterfaces must include a primary interface with interfaceType='interface'"),
        ("!has(self.networkInterfaces) || self.networkInterfaces.all(x, self.networkInterfaces.filter(y, "
         "x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && "
         "(x.interfaceType != 'efa-only' || self.networkInterfaces.filter(y, x.networkCardIndex == y.networkCardIndex "
         "&& y.interfaceType == 'efa-only').size() == 1))",
         "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one "
         "efa device per network card"),
        ("!self.amiSelectorTerms.exists(x, has(x.alias)) || self.amiSelectorTerms.size() == 1",
         "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"),
        ("!has(self.blockDeviceMappings) || self.blockDeviceMappings.filter(x, has(x.rootVolume) && x.rootVolume).size() <= 1",
         "must have only one blockDeviceMappings with rootVolume"),
        ("!has(self.tags) || self.tags.all(k, k != '' && !(k in ["
         + ", ".join(f"'{t}'" for t in sorted(labels.RESTRICTED_TAG_KEYS))
         + f"]) && !k.startsWith('{labels.TAG_CLUSTER_PREFIX}'))",
         "tag contains a restricted tag (kubernetes.io/cluster/*, karpenter.sh/nodepool, karpenter.sh/nodeclaim, "
         "karpenter.k8s.aws/ec2nodeclass, eks:eks-cluster-name) or an empty key"),
    )

    subnet_selector_terms: list[SubnetSelectorTerm] = Field(min_length=1, max_length=MAX_SELECTOR_TERMS)
    security_group_selector_terms: list[SecurityGroupSelectorTerm] = Field(
        min_length=1, max_length=MAX_SELECTOR_TERMS
    )
    ami_selector_terms: list[AMISelectorTerm] = Field(min_length=1, max_length=MAX_SELECTOR_TERMS)
    capacity_reservation_selector_terms: list[CapacityReservationSelectorTerm] | None = Field(
        default=None, max_length=MAX_SELECTOR_TERMS
    )
    placement_group_selector: PlacementGroupSelector | None = None
    ami_family: AMIFamily | None = None
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    ip_prefix_count: int | None = Field(default=None, ge=0, alias="ipPrefixCount")
    role: str | None = Field(default=None, json_schema_extra=cel_field(("self != ''", "role cannot be empty")))
    instance_profile: str | None = None
    user_data: str | None = None
    tags: StringMap | None = None
    kubelet: KubeletConfiguration | None = None
    block_device_mappings: list[BlockDeviceMapping] | None = Field(default=None, max_length=50)
    instance_store_policy: Literal["RAID0"] | None = None
    metadata_options: MetadataOptions = Field(
        default_factory=_default_metadata_options,
        json_schema_extra={
            "default": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled", "httpPutResponseHopLimit": 1,
                        "httpTokens": "required"}
        },
    )
    detailed_monitoring: bool | None = None
    network_interfaces: list[NetworkInterface] | None = Field(default=None, max_length=MAX_NETWORK_INTERFACES)
    connection_tracking: ConnectionTracking | None = None
    context: str | None = None
    cpu_options: CPUOptions | None = Field(default=None, alias="cpuOptions")

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: dict[str, str] | None) -> dict[str, str] | None:
        return _check_user_tags(tags)

    @model_validator(mode="after")
    def _consistent(self) -> EC2NodeClassSpec:
        self._check_ami_terms()
        if bool(self.role) == bool(self.instance_profile):
            raise invalid("role", "must specify exactly one of ['role', 'instanceProfile']")
        roots = [i for i, m in enumerate(self.block_device_mappings or []) if m.root_volume]
        if len(roots) > 1:
            raise invalid(f"blockDeviceMappings[{roots[1]}].rootVolume", "must have only one blockDeviceMappings with rootVolume")
        check_network_interfaces(self.network_interfaces or [])
        return self

    def _check_ami_terms(self) -> None:
        aliases = [i for i, t in enumerate(self.ami_selector_terms) if t.alias]
        if aliases and len(self.ami_selector_terms) > 1:
            raise invalid(
                f"amiSelectorTerms[{aliases[0]}].alias",
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
            )
        if not aliases and self.ami_family is None:
            raise invalid("amiFamily", "amiFamily is required when amiSelectorTerms does not contain an alias")
        if aliases and self.ami_family is not None:
            implied = self.ami_selector_terms[0].alias_family
            if self.ami_family not in (implied, "Custom"):
                raise invalid(
                    "amiFamily",
                    f"amiFamily {self.ami_family!r} contradicts alias {self.ami_selector_terms[0].alias!r}: "
                    f"with an alias, amiFamily must be {implied!r} or 'Custom'",
                )

    @property
    def resolved_ami_family(self) -> str:
        """``amiFamily``, or the one the alias implies (``bottlerocket@latest`` -> Bottlerocket). ``Custom`` with an
        alias stays ``Custom``: the alias picks the AMI, the user data is the user's (Karpenter's ``AMIFamily()``)."""
        if self.ami_family:
            return self.ami_family
        return self.ami_selector_terms[0].alias_family or "Custom"


class EC2NodeClassStatus(LenientModel):
    """``status``: resolved subnets, security groups and AMIs, the instance profile in use, and
    conditions (Ready, SubnetsReady, ...). Entries are kept as plain dicts."""

    subnets: list[dict[str, object]] | None = None
    security_groups: list[dict[str, object]] | None = None
    amis: list[dict[str, object]] | None = None
    instance_profile: str | None = None
    conditions: list[Condition] | None = None


class EC2NodeClass(KubeModel):
    """A ``karpenter.k8s.aws/v1`` EC2NodeClass."""

    api_version: Literal["karpenter.k8s.aws/v1"] = Field(default="karpenter.k8s.aws/v1", alias="apiVersion")
    kind: Literal["EC2NodeClass"] = "EC2NodeClass"
    metadata: ObjectMeta
    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus | None = None

    @model_validator(mode="after")
    def _named(self) -> EC2NodeClass:
        if not self.metadata.name:
            raise invalid("metadata.name", "required field is missing")
        return self

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name or ""
