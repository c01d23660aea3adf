"""Typed settings of the infrastructure app: one object, validated before any construct is built.

Sources, lowest to highest precedence:

1. the defaults below, which synthesize without any AWS access;
2. ``cdktf.json`` → ``context.nodewright`` (a JSON object with the field names below);
3. environment variables ``NODEWRIGHT_INFRA_<FIELD>``, nested fields joined with ``__``
   (``NODEWRIGHT_INFRA_IMAGE__TAG=0.2.0``), read by pydantic-settings' environment source; list fields
   take a JSON array or a comma-separated string
   (``NODEWRIGHT_INFRA_PUBLIC_ACCESS_CIDRS=203.0.113.0/24,198.51.100.7/32``).

Invalid settings raise :class:`nodewright.errors.NodewrightValidationError` naming the field path
(``workload.cron_start: ...``), which ``main.py`` prints as one line before exiting 2.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource
from pydantic_settings.exceptions import SettingsError

from nodewright.errors import NodewrightValidationError

ENV_PREFIX = "NODEWRIGHT_INFRA_"
CONTEXT_KEY = "nodewright"

# The controller's identity in the cluster: the chart's ServiceAccount in kube-system. The IRSA
# trust policy and the Pod Identity association both name exactly this subject.
CONTROLLER_NAMESPACE = "kube-system"
CONTROLLER_SERVICE_ACCOUNT = "nodewright"

# CloudWatch Logs accepts only these retention values (PutRetentionPolicy API reference).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192,
                      2557, 2922, 3288, 3653)

# EKS managed node group AMI types for Amazon Linux 2023 and Bottlerocket (EKS CreateNodegroup API).
NODE_GROUP_AMI_TYPES = ("AL2023_x86_64_STANDARD", "AL2023_ARM_64_STANDARD", "BOTTLEROCKET_x86_64",
                        "BOTTLEROCKET_ARM_64")

# Derived resource names append at most 26 characters ("-nodewright-interruption" and friends) to
# the cluster name, and IAM role names stop at 64, so the cluster name is capped at 38.
_CLUSTER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,36}[A-Za-z0-9]$|^[A-Za-z]$")
_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
_K8S_VERSION = re.compile(r"^1\.(\d{2})$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_MIN_K8S_MINOR = 30  # the chart's kubeVersion ">=1.30.0-0" (ValidatingAdmissionPolicy v1)


class EndpointAccess(StrEnum):
    """How the EKS API server endpoint is reachable."""

    PRIVATE = "private"
    """Only from inside the VPC (and peered networks): the secure default."""
    PUBLIC_AND_PRIVATE = "public-and-private"
    """Also from the internet, restricted to ``public_access_cidrs``."""


class IdentityMode(StrEnum):
    """How the controller's pods get AWS credentials."""

    IRSA = "irsa"
    """IAM Roles for Service Accounts: OIDC provider + ``sts:AssumeRoleWithWebIdentity``."""
    POD_IDENTITY = "pod-identity"
    """EKS Pod Identity: an association of the service account with the role, agent add-on."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


class ImageSettings(_Model):
    """The controller image the Helm release runs (built from the repository's Dockerfile)."""

    repository: str = Field(default="nodewright", min_length=1)
    tag: str = Field(default="0.1.0", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
    digest: str = ""
    """``sha256:<64 hex>``; when set the chart pins ``repository@digest``. Empty: tag only."""

    @field_validator("digest")
    @classmethod
    def _digest_format(cls, value: str) -> str:
        if value and not _DIGEST.match(value):
            raise ValueError("must be 'sha256:' followed by 64 lowercase hex digits, or empty")
        return value


class StateBackendSettings(_Model):
    """Where Terraform keeps each stack's state."""

    type: Literal["local", "s3"] = "local"
    bucket: str = ""
    """S3 bucket (type ``s3``); the bucket must exist and should have versioning on."""
    key_prefix: str = Field(default="nodewright", pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
    """State key is ``<key_prefix>/<cluster_name>/<stack>.tfstate``."""
    region: str = ""
    """Bucket region; empty: the cluster's region."""

    @model_validator(mode="after")
    def _bucket_for_s3(self) -> StateBackendSettings:
        if self.type == "s3" and not _BUCKET.match(self.bucket):
            raise ValueError("bucket: an S3 backend needs a valid bucket name (3-63 of a-z 0-9 . -)")
        return self


class SystemNodeGroupSettings(_Model):
    """The small on-demand managed node group that runs the controller and core add-ons.

    The controller must never run on nodes it manages (it could terminate its own node), so this
    group is tainted ``CriticalAddonsOnly=true:NoSchedule`` and the chart tolerates that taint.
    """

    instance_types: list[str] = Field(default_factory=lambda: ["m6i.large"], min_length=1)
    ami_type: str = "AL2023_x86_64_STANDARD"
    size: int = Field(default=2, ge=1, le=10)
    """Desired and minimum node count; the maximum is ``size + 1`` for rolling updates."""
    disk_size_gib: int = Field(default=50, ge=20, le=1000)

    @field_validator("ami_type")
    @classmethod
    def _known_ami_type(cls, value: str) -> str:
        if value not in NODE_GROUP_AMI_TYPES:
            raise ValueError(f"must be one of {', '.join(NODE_GROUP_AMI_TYPES)}")
        return value

    @field_validator("instance_types")
    @classmethod
    def _instance_type_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.match(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$", name):
                raise ValueError(f"{name!r} is not an EC2 instance type name like 'm6i.large'")
        return value


class WorkloadSettings(_Model):
    """The sample service and its KEDA ScaledObject (the second field report's cron scaling).

    The cron trigger scales the service to ``desired_replicas`` between ``cron_start`` and
    ``cron_end`` (5-field cron, evaluated by KEDA in ``timezone``), ahead of a known daily event;
    the CPU trigger beside it handles load outside that window.
    """

    namespace: str = Field(default="storefront", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    name: str = Field(default="storefront", pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    image: str = "public.ecr.aws/nginx/nginx-unprivileged:1.27-alpine"
    nodepool: str = "service"
    """The chart's NodePool the service runs on; its taint is tolerated (``taint_key``)."""
    taint_key: str = "nodewright.io/priority"
    cpu_request_millicores: int = Field(default=250, ge=10, le=64000)
    memory_request_mib: int = Field(default=256, ge=16, le=262144)
    timezone: str = "Asia/Seoul"
    cron_start: str = "50 19 * * *"
    """Scale out at 19:50 (``timezone``), ten minutes before a 20:00 daily event."""
    cron_end: str = "30 21 * * *"
    desired_replicas: int = Field(default=12, ge=1)
    min_replicas: int = Field(default=2, ge=0)
    max_replicas: int = Field(default=30, ge=1)
    cpu_utilization_percent: int = Field(default=60, ge=1, le=100)

    @field_validator("timezone")
    @classmethod
    def _iana_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"{value!r} is not an IANA time zone name like 'Asia/Seoul'") from None
        return value

    @field_validator("cron_start", "cron_end")
    @classmethod
    def _five_field_cron(cls, value: str) -> str:
        # KEDA's cron scaler parses standard 5-field expressions (robfig/cron ParseStandard).
        if len(value.split()) != 5 or not croniter.is_valid(value):
            raise ValueError(f"{value!r} is not a 5-field cron expression like '50 19 * * *'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadSettings:
        if self.cron_start.split() == self.cron_end.split():
            raise ValueError("cron_end: must differ from cron_start, or the window is empty")
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas: must not exceed max_replicas")
        if not self.min_replicas <= self.desired_replicas <= self.max_replicas:
            raise ValueError("desired_replicas: must lie between min_replicas and max_replicas")
        return self


class InfraSettings(_Model):
    """Everything the stacks need; the defaults synthesize with no AWS access."""

    cluster_name: str = "nodewright"
    region: str = "ap-northeast-2"
    kubernetes_version: str = "1.34"
    vpc_cidr: str = "10.0.0.0/16"
    az_count: int = Field(default=3, ge=2, le=4)
    availability_zones: list[str] = Field(default_factory=list)
    """Explicit zone names; empty: ``<region>a``, ``<region>b``, ... (``az_count`` of them)."""
    single_nat_gateway: bool = False
    """One NAT gateway for all zones (cheaper) instead of one per zone (survives a zone outage)."""
    endpoint_access: EndpointAccess = EndpointAccess.PRIVATE
    public_access_cidrs: list[str] = Field(default_factory=list)
    admin_principal_arns: list[str] = Field(default_factory=list)
    """IAM principals given cluster-admin access entries (the deploying identity gets one anyway)."""
    identity_mode: IdentityMode = IdentityMode.IRSA
    image: ImageSettings = Field(default_factory=ImageSettings)
    chart_path: str = ""
    """Local chart directory; empty: ``helm/nodewright`` of this repository."""
    keda_chart_repository: str = "https://kedacore.github.io/charts"
    keda_chart_version: str = Field(default="2.21.1", pattern=r"^\d+\.\d+\.\d+$")
    log_retention_days: int = 365
    state_backend: StateBackendSettings = Field(default_factory=StateBackendSettings)
    system_nodes: SystemNodeGroupSettings = Field(default_factory=SystemNodeGroupSettings)
    workload: WorkloadSettings = Field(default_factory=WorkloadSettings)
    tags: dict[str, str] = Field(default_factory=dict)
    """Extra tags on every AWS resource (provider default_tags)."""

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, value: str) -> str:
        if not _CLUSTER_NAME.match(value):
            raise ValueError("must be 1-38 letters, digits or '-', start with a letter and not end with '-'")
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str) -> str:
        if not _REGION.match(value):
            raise ValueError(f"{value!r} is not an AWS region name like 'ap-northeast-2'")
        return value

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        match = _K8S_VERSION.match(value)
        if not match or int(match.group(1)) < _MIN_K8S_MINOR:
            raise ValueError(f"{value!r} is not an EKS Kubernetes version '1.MM' >= 1.{_MIN_K8S_MINOR}")
        return value

    @field_validator("vpc_cidr")
    @classmethod
    def _vpc_cidr(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value)
        except ValueError as err:
            raise ValueError(f"{value!r} is not an IPv4 network: {err}") from None
        if not 16 <= net.prefixlen <= 22:
            raise ValueError("prefix length must be /16 to /22 (AWS allows /16-/28; subnets need room)")
        return value

    @field_validator("public_access_cidrs")
    @classmethod
    def _public_cidrs(cls, value: list[str]) -> list[str]:
        for i, cidr in enumerate(value):
            try:
                net = ipaddress.IPv4Network(cidr)
            except ValueError as err:
                raise ValueError(f"[{i}] {cidr!r} is not an IPv4 network: {err}") from None
            if net.prefixlen == 0:
                raise ValueError(f"[{i}] {cidr} opens the API server to the whole internet; list your networks")
        return value

    @field_validator("admin_principal_arns")
    @classmethod
    def _principal_arns(cls, value: list[str]) -> list[str]:
        for i, arn in enumerate(value):
            if not re.match(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/.+$", arn):
                raise ValueError(f"[{i}] {arn!r} is not an IAM role or user ARN")
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"must be one of the CloudWatch Logs values {LOG_RETENTION_DAYS}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> InfraSettings:
        if self.endpoint_access is EndpointAccess.PUBLIC_AND_PRIVATE and not self.public_access_cidrs:
            raise ValueError("public_access_cidrs: a public endpoint needs at least one allowed CIDR")
        if self.endpoint_access is EndpointAccess.PRIVATE and self.public_access_cidrs:
            raise ValueError("public_access_cidrs: only used with endpoint_access 'public-and-private'")
        if self.availability_zones:
            if len(self.availability_zones) != self.az_count:
                raise ValueError(f"availability_zones: expected {self.az_count} names (az_count)")
            for zone in self.availability_zones:
                if not re.match(rf"^{re.escape(self.region)}[a-z]$", zone):
                    raise ValueError(f"availability_zones: {zone!r} is not a zone of {self.region}")
        return self

    # --- derived names, one place so stacks and tests agree -------------------------------------
    @property
    def zones(self) -> list[str]:
        """The zones of the subnets, in order. Literal names rather than a data-source lookup keep
        the set closed (a zone AWS adds later never moves a subnet) and visible in the plan."""
        if self.availability_zones:
            return list(self.availability_zones)
        return [f"{self.region}{letter}" for letter in "abcdef"[: self.az_count]]

    @property
    def interruption_queue_name(self) -> str:
        """SQS queue name the controller polls (also the chart's ``settings.interruptionQueue``)."""
        return f"{self.cluster_name}-nodewright-interruption"

    @property
    def controller_role_name(self) -> str:
        return f"{self.cluster_name}-nodewright-controller"

    @property
    def node_role_name(self) -> str:
        """IAM role of nodes the controller launches (the chart's ``nodeRole``)."""
        return f"{self.cluster_name}-nodewright-node"

    @property
    def controller_subject(self) -> str:
        """The controller's Kubernetes identity as the OIDC token's ``sub`` claim."""
        return f"system:serviceaccount:{CONTROLLER_NAMESPACE}:{CONTROLLER_SERVICE_ACCOUNT}"


def load_settings(context: Mapping[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None) -> InfraSettings:
    """Build the settings from ``cdktf.json`` context and environment variables.

    Args:
        context: the object under ``context.nodewright`` in ``cdktf.json`` (or None).
        environ: environment variables (``os.environ``); only ``NODEWRIGHT_INFRA_*`` are read, by
            pydantic-settings' environment source (nested fields split at ``__``, complex values JSON, and
            list fields also as comma-separated text).

    Returns:
        The validated, frozen settings.

    Raises:
        NodewrightValidationError: a setting is malformed; ``path`` is the dotted field path (or the
            environment variable for an unknown name or unparseable value).
    """
    if context is not None and not isinstance(context, Mapping):
        raise NodewrightValidationError(CONTEXT_KEY, "cdktf.json context.nodewright must be a JSON object")
    # A deep copy: environment overrides are merged into nested mappings.
    data: dict[str, Any] = json.loads(json.dumps(dict(context or {})))
    _deep_merge(data, _environment_values(environ or {}))
    try:
        return InfraSettings.model_validate(data)
    except ValidationError as err:
        raise _first_error(err) from None


def _environment_values(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``NODEWRIGHT_INFRA_*`` overrides as a nested dict (not validated yet)."""
    for key in sorted(environ):
        if key.upper().startswith(ENV_PREFIX):
            name = key[len(ENV_PREFIX):].lower().split("__")[0]
            if name not in InfraSettings.model_fields:
                raise NodewrightValidationError(key, f"unknown setting {key[len(ENV_PREFIX):].lower()!r}")
    source = _InfraEnvironment(environ)
    try:
        return dict(source())
    except SettingsError as err:
        cause = err.__cause__
        if isinstance(cause, NodewrightValidationError):
            raise cause from None
        raise NodewrightValidationError(ENV_PREFIX + "*", str(err)) from None


#: The fields of :class:`InfraSettings` as a ``BaseSettings``, the shape pydantic-settings reads the environment
#: by (values are only decoded there; :class:`InfraSettings` validates them).
_InfraEnvShape: type[BaseSettings] = create_model(  # type: ignore[call-overload]
    "_InfraEnvShape", __base__=BaseSettings,
    **{name: (field.annotation, None) for name, field in InfraSettings.model_fields.items()})


class _InfraEnvironment(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping, accepting comma-separated lists."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        super().__init__(_InfraEnvShape, case_sensitive=False, env_prefix=ENV_PREFIX, env_nested_delimiter="__")
        self.env_vars = {key.lower(): value for key, value in environ.items()}

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        try:
            return super().decode_complex_value(field_name, field, value)
        except ValueError as err:
            if getattr(field.annotation, "__origin__", None) is list and isinstance(value, str):
                return [item.strip() for item in value.split(",") if item.strip()]
            key = ENV_PREFIX + field_name.upper()
            raise NodewrightValidationError(key, f"invalid JSON: {getattr(err, 'msg', err)}") from None


def _deep_merge(base: dict[str, Any], overlay: Mapping[str, Any]) -> None:
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value


def _first_error(err: ValidationError) -> NodewrightValidationError:
    first = err.errors()[0]
    path = ""
    for part in first["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    reason = first["msg"].removeprefix("Value error, ")
    # A model-level check names its field at the start of the message ("field: reason").
    if re.match(r"^[a-z_]+(\.[a-z_]+)?: ", reason):
        field, reason = reason.split(": ", 1)
        path = f"{path}.{field}" if path else field
    # A list check names the offending item first ("[2] reason").
    index = re.match(r"^\[(\d+)\] ", reason)
    if index:
        path, reason = f"{path}[{index.group(1)}]", reason[index.end():]
    return NodewrightValidationError(path or "settings", reason)
