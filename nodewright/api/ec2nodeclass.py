"""``EC2NodeClass`` (``karpenter.k8s.aws/v1``): the AWS side of a node (AMI, subnets, security
groups, IAM role or instance profile, user data, tags, kubelet settings, block devices, IMDS).

Rules follow the Karpenter AWS provider v1 CRD: selector term lists hold 1..30 terms; an
``alias`` (``<family>@<version>``, family one of al2, al2023, bottlerocket, windows2019,
windows2022) must be the only AMI term and alone in it; ``amiFamily`` is required without an
alias; exactly one of ``role`` and ``instanceProfile``; at most one ``rootVolume`` block device;
IMDS defaults to ``httpTokens: required`` and hop limit 1; user tags may not use keys Karpenter
owns.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from nodewright.api import labels
from nodewright.api.base import (
    Condition,
    KubeModel,
    LenientModel,
    ObjectMeta,
    Quantity,
    StringMap,
    cel,
    invalid,
)

AMIFamily = Literal["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022"]
# alias family (lowercase) -> amiFamily it implies
ALIAS_FAMILIES: dict[str, str] = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
}
MAX_SELECTOR_TERMS = 30
_ALIAS_RE = re.compile(r"^[a-zA-Z0-9]+@.+$")
_EBS_SIZE_RE = re.compile(r"^[0-9]+(Gi|G|Ti|T)$")


def _check_tags(tags: dict[str, str] | None, what: str) -> dict[str, str] | None:
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

    tags: StringMap | None = None
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

    tags: StringMap | None = None
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

    alias: str | None = None
    tags: StringMap | None = None
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


EvictionSignal = Literal[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
]
ReservedResource = Literal["cpu", "memory", "ephemeral-storage", "pid"]
_EVICTION_VALUE_RE = re.compile(r"^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%|[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?)$")


class KubeletConfiguration(KubeModel):
    """Kubelet settings for the nodes (the subset Karpenter exposes). Reserved resources are
    quantities (``cpu`` in cores/millicores, ``memory`` bytes with suffix); eviction thresholds
    are quantities or percentages; grace periods are durations."""

    model_config = cel(
        ("!has(self.imageGCHighThresholdPercent) || !has(self.imageGCLowThresholdPercent) || "
         "self.imageGCHighThresholdPercent >= self.imageGCLowThresholdPercent",
         "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"),
        ("has(self.evictionSoft) == has(self.evictionSoftGracePeriod) && (!has(self.evictionSoft) || "
         "(self.evictionSoft.all(e, e in self.evictionSoftGracePeriod) && "
         "self.evictionSoftGracePeriod.all(e, e in self.evictionSoft)))",
         "evictionSoft and evictionSoftGracePeriod must name the same signals"),
    )

    cluster_dns: list[str] | None = Field(default=None, alias="clusterDNS")
    max_pods: int | None = Field(default=None, ge=0)
    pods_per_core: int | None = Field(default=None, ge=0)
    system_reserved: dict[ReservedResource, Quantity] | None = None
    kube_reserved: dict[ReservedResource, Quantity] | None = None
    eviction_hard: dict[EvictionSignal, str] | None = None
    eviction_soft: dict[EvictionSignal, str] | None = None
    eviction_soft_grace_period: dict[EvictionSignal, str] | None = None
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = Field(default=None, ge=0, le=100, alias="imageGCHighThresholdPercent")
    image_gc_low_threshold_percent: int | None = Field(default=None, ge=0, le=100, alias="imageGCLowThresholdPercent")
    cpu_cfs_quota: bool | None = Field(default=None, alias="cpuCFSQuota")

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
    (MiB/s) apply to gp3/io1/io2."""

    delete_on_termination: bool | None = None
    encrypted: bool | None = None
    iops: int | None = Field(default=None, ge=0)
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    throughput: int | None = Field(default=None, ge=0)
    volume_initialization_rate: int | None = Field(default=None, ge=100, le=300)
    volume_size: str | None = None
    volume_type: VolumeType | None = None

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
    ami_family: AMIFamily | None = None
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    role: str | None = None
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
    context: str | None = None

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
            if implied != self.ami_family:
                raise invalid(
                    "amiFamily",
                    f"amiFamily {self.ami_family!r} contradicts alias {self.ami_selector_terms[0].alias!r}",
                )

    @property
    def resolved_ami_family(self) -> str:
        """``amiFamily``, or the one the alias implies (``bottlerocket@latest`` -> Bottlerocket)."""
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
