"""``NodePool`` (``karpenter.sh/v1``): what nodes a pool may launch and how they are disrupted.

Defaults and rules follow the Karpenter v1 CRD: ``expireAfter`` 720h, ``consolidationPolicy``
WhenEmptyOrUnderutilized, ``budgets`` ``[{nodes: "10%"}]`` (at most 50; a cron ``schedule``
needs a ``duration`` and vice versa), ``weight`` 1..100, at most 100 requirements, and the
restricted label keys of :func:`nodewright.api.labels.is_restricted_label`.
``consolidateAfter`` defaults to ``"0s"`` (Karpenter defaults the whole ``disruption`` block to
``{consolidateAfter: 0s}``; we also accept a ``disruption`` block that omits it).

Karpenter v1.14 additions (kubernetes-sigs/karpenter ``pkg/apis/v1/nodepool.go``): ``consolidationPolicy:
Balanced`` and ``spec.replicas`` (a static NodePool of N nodes, alpha: only ``limits.nodes`` and no ``weight``
with it; its consolidation settings are ignored). Both are modelled and validated; what the controllers do with
them is listed in ``docs/karpenter-compatibility.md``.
"""

from __future__ import annotations

import difflib
import re
from typing import Annotated, Any, Literal

from croniter import croniter
from pydantic import BeforeValidator, Field, field_validator, model_validator

from nodewright.api import durations, labels
from nodewright.api.base import (
    Condition,
    Duration,
    KubeModel,
    LenientModel,
    NillableDuration,
    NodeClassReference,
    ObjectMeta,
    Quantity,
    ResourceList,
    Taint,
    TemplateMetadata,
    cel,
    invalid,
    restricted_label_cel,
)
from nodewright.api.requirements import MAX_REQUIREMENTS, Requirement

ConsolidationPolicy = Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]
DisruptionReason = Literal["Underutilized", "Empty", "Drifted"]
DEFAULT_EXPIRE_AFTER = "720h"
DEFAULT_BUDGET_NODES = "10%"
MAX_BUDGETS = 50

_BUDGET_NODES_RE = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_CRON_MACROS = frozenset({"@annually", "@yearly", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})


def _cron_field(value: str) -> str:
    """Regex of one cron field: ``*`` or a value or range, optional ``/step`` (step >= 1), comma lists."""
    item = f"(?:[*]|{value}(?:-{value})?)(?:/[1-9][0-9]*)?"
    return f"{item}(?:,{item})*"


_MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
_DAYS = "sun|mon|tue|wed|thu|fri|sat"
#: A budget schedule: a macro, or five space-separated fields with their value ranges (minute 0-59, hour
#: 0-23, day of month 1-31, month 1-12 or jan..dec, day of week 0-7 or sun..sat; names in any case), as
#: robfig/cron's standard parser (Karpenter's) takes them. One regex, used by the model and as the CRD's CEL
#: rule, so the API server and ``nodewright`` give the same verdict. No backslashes: it sits in a CEL string.
CRON_PATTERN = (
    "(?i)^(@(annually|yearly|monthly|weekly|daily|midnight|hourly)|"
    + " +".join(_cron_field(v) for v in (
        "[0-5]?[0-9]", "(?:[01]?[0-9]|2[0-3])", "(?:0?[1-9]|[12][0-9]|3[01])", f"(?:0?[1-9]|1[0-2]|{_MONTHS})",
        f"(?:[0-7]|{_DAYS})"))
    + ")$"
)
_CRON_RE = re.compile(CRON_PATTERN)
MAX_SCHEDULE_LENGTH = 128


def _nodes_to_str(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


class Budget(KubeModel):
    """How many of the pool's nodes may be disrupted at once, optionally only in a time window.

    ``nodes`` is a count (``"5"``) or a percentage of the pool's nodes (``"10%"``); ``schedule`` is
    a 5-field cron expression in UTC (or an ``@daily``-style macro) and ``duration`` how long the
    window lasts (minutes/hours); ``reasons`` restricts the budget to some disruption reasons.
    """

    model_config = cel(("has(self.schedule) == has(self.duration)", "'schedule' must be set with 'duration'"))

    nodes: Annotated[str, BeforeValidator(_nodes_to_str)] = Field(
        default=DEFAULT_BUDGET_NODES, json_schema_extra={"pattern": _BUDGET_NODES_RE.pattern}
    )
    # maxLength bounds the API server's cost estimate of the CEL rule (unbounded, v1.36 refuses the CRD).
    schedule: str | None = Field(
        default=None,
        max_length=MAX_SCHEDULE_LENGTH,
        json_schema_extra={
            "pattern": r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$",
            "x-kubernetes-validations": [{
                "message": "schedule must be a 5-field cron expression (minute hour day-of-month month day-of-week) "
                           "or an @daily-style macro",
                "rule": f"self.matches('{CRON_PATTERN}')"}],
        },
    )
    duration: str | None = Field(
        default=None, json_schema_extra={"pattern": r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"}
    )
    reasons: list[DisruptionReason] | None = None

    @field_validator("nodes")
    @classmethod
    def _check_nodes(cls, value: str) -> str:
        if not _BUDGET_NODES_RE.match(value):
            raise ValueError(f"nodes must be an integer or a percentage 0%..100%, got {value!r}")
        return value

    @field_validator("schedule")
    @classmethod
    def _check_schedule(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if value in _CRON_MACROS:
            return value
        if not _CRON_RE.match(value) or not croniter.is_valid(value):
            raise ValueError(f"{value!r} is not a 5-field cron expression or @daily-style macro")
        return value

    @field_validator("duration")
    @classmethod
    def _check_duration(cls, value: str | None) -> str | None:
        if value is not None and not durations.is_budget_duration(value):
            raise ValueError(f"{value!r} is not a budget duration: minutes and hours only, e.g. '8h', '1h30m'")
        return value

    @field_validator("reasons")
    @classmethod
    def _unique_reasons(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"reasons must not repeat, got {value!r}")
        return value

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> Budget:
        if (self.schedule is None) != (self.duration is None):
            missing = "duration" if self.duration is None else "schedule"
            raise invalid(missing, "'schedule' must be set with 'duration'")
        return self

    def percent(self) -> int | None:
        """The percentage of ``nodes`` (``"10%"`` -> 10), or ``None`` when it is a plain count."""
        return int(self.nodes[:-1]) if self.nodes.endswith("%") else None


def _default_budgets() -> list[Budget]:
    return [Budget(nodes=DEFAULT_BUDGET_NODES)]


class Disruption(KubeModel):
    """When the pool's nodes may be consolidated and how many at once.

    ``consolidate_after``: how long a node must be consolidatable (empty, or empty/underutilized
    per ``consolidation_policy``) before it is disrupted; ``"Never"`` disables consolidation.
    """

    consolidation_policy: ConsolidationPolicy = "WhenEmptyOrUnderutilized"
    consolidate_after: NillableDuration = "0s"
    budgets: list[Budget] = Field(
        default_factory=_default_budgets,
        max_length=MAX_BUDGETS,
        json_schema_extra={"default": [{"nodes": DEFAULT_BUDGET_NODES}]},
    )


class NodeClaimTemplateSpec(KubeModel):
    """``spec.template.spec``: the NodeClaim every node of the pool starts from."""

    model_config = cel(
        (
            f"self.requirements.all(x, {restricted_label_cel('x.key')})",
            "requirement key is restricted: karpenter.sh/nodepool, kubernetes.io/hostname and unknown "
            "labels under karpenter.sh, karpenter.k8s.aws",
        ),
    )

    requirements: list[Requirement] = Field(max_length=MAX_REQUIREMENTS)
    node_class_ref: NodeClassReference
    taints: list[Taint] | None = None
    startup_taints: list[Taint] | None = None
    expire_after: NillableDuration = DEFAULT_EXPIRE_AFTER
    termination_grace_period: Duration | None = None


class NodeClaimTemplate(KubeModel):
    """``spec.template``: labels/annotations plus the NodeClaim spec."""

    metadata: TemplateMetadata | None = None
    spec: NodeClaimTemplateSpec


def _default_disruption() -> Disruption:
    return Disruption()


#: Resource names a node has, so a ``spec.limits`` key that caps something: Kubernetes' standard ones (plus
#: ``hugepages-<size>``), Karpenter's ``nodes`` and the extended resources of EC2 instance types (Karpenter AWS
#: ``pkg/apis/v1/labels.go`` ``Resource*``; ``aws.amazon.com/neuroncore`` as nodewright.cloud.overhead counts it).
LIMIT_RESOURCES = frozenset({
    "cpu", "memory", "pods", "ephemeral-storage", "nodes", "nvidia.com/gpu", "amd.com/gpu", "habana.ai/gaudi",
    "aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "vpc.amazonaws.com/efa", "vpc.amazonaws.com/pod-eni",
    "vpc.amazonaws.com/PrivateIPv4Address",
})


def limit_key_problem(key: str) -> str | None:
    """Why ``spec.limits`` key ``key`` caps nothing (no node has such a resource, so its usage stays 0), or None.

    A name without a domain that is not one of :data:`LIMIT_RESOURCES` (nor ``hugepages-*``) is no resource at all
    (Kubernetes reserves unprefixed names for its own: ``memry``); a domain-prefixed name is an extended resource a
    device plugin may advertise, flagged only when it is close to a known one (``nvidia.com/gpus``). Karpenter's CRD
    accepts any key, so this is a warning, never an error."""
    if key in LIMIT_RESOURCES or key.startswith("hugepages-"):
        return None
    match = difflib.get_close_matches(key, sorted(LIMIT_RESOURCES), n=1, cutoff=0.6)
    hint = f"; did you mean {match[0]!r}?" if match else ""
    if "/" not in key:
        return (f"{key!r} is not a resource name (names without a domain are Kubernetes' own: cpu, memory, pods, "
                f"ephemeral-storage, hugepages-<size>; and Karpenter's nodes), so this limit caps nothing{hint}")
    if match:
        return f"{key!r} is no resource an EC2 instance type has, so this limit caps nothing{hint}"
    return None


class NodePoolSpec(KubeModel):
    """``spec`` of a NodePool. ``limits`` caps the pool's total capacity (``cpu`` in cores or
    millicores as a quantity, ``memory`` in bytes with suffix, ``nodes`` as a count). ``replicas``
    (>= 0) makes the pool static: N nodes whatever the pods, only ``limits.nodes``, no ``weight``."""

    model_config = cel(
        ("!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || "
         "(size(self.limits) == 1 && 'nodes' in self.limits))",
         "only 'limits.nodes' is supported on static NodePools"),
        ("!has(self.replicas) || !has(self.weight)", "'weight' is not supported on static NodePools"),
    )

    template: NodeClaimTemplate
    disruption: Disruption = Field(
        default_factory=_default_disruption, json_schema_extra={"default": {"consolidateAfter": "0s"}}
    )
    limits: ResourceList | None = None
    weight: int | None = Field(default=None, ge=1, le=100)
    replicas: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _limits(self) -> NodePoolSpec:
        from nodewright.errors import NodewrightValidationError
        from nodewright.quantities import parse_quantity

        for name, value in (self.limits or {}).items():
            try:
                parse_quantity(value, name)
            except NodewrightValidationError as err:
                raise invalid(f"limits.{name}", err.reason) from None
        return self

    @model_validator(mode="after")
    def _static(self) -> NodePoolSpec:
        if self.replicas is None:
            return self
        other = sorted(k for k in self.limits or {} if k != "nodes")
        if other:
            raise invalid(f"limits.{other[0]}", "only 'limits.nodes' is supported on static NodePools (replicas set)")
        if self.weight is not None:
            raise invalid("weight", "'weight' is not supported on static NodePools (replicas set)")
        return self

    @model_validator(mode="after")
    def _restricted_keys(self) -> NodePoolSpec:
        for i, req in enumerate(self.template.spec.requirements):
            reason = labels.is_restricted_label(req.key)
            if reason:
                raise invalid(f"template.spec.requirements[{i}].key", reason)
        meta = self.template.metadata
        for key in (meta.labels or {}) if meta else {}:
            reason = labels.is_restricted_label(key)
            if reason:
                raise invalid(f"template.metadata.labels[{key}]", reason)
        return self


class NodePoolStatus(LenientModel):
    """``status``: resources in use by the pool's nodes (same keys as limits) and conditions; nodewright adds
    ``targetUtilization``, the packing target in effect (``"0.8"``; ``"1"`` = pack fully)."""

    resources: dict[str, Quantity] | None = None
    conditions: list[Condition] | None = None
    node_class_observed_generation: int | None = None
    target_utilization: str | None = None


class NodePool(KubeModel):
    """A ``karpenter.sh/v1`` NodePool. Build from a manifest with
    :func:`nodewright.api.parse_nodepool`; write back with :meth:`to_manifest`."""

    api_version: Literal["karpenter.sh/v1"] = Field(default="karpenter.sh/v1", alias="apiVersion")
    kind: Literal["NodePool"] = "NodePool"
    metadata: ObjectMeta
    spec: NodePoolSpec
    status: NodePoolStatus | None = None

    @model_validator(mode="after")
    def _named(self) -> NodePool:
        if not self.metadata.name:
            raise invalid("metadata.name", "required field is missing")
        return self

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name or ""

    @property
    def requirements(self) -> list[Requirement]:
        """Shortcut for ``spec.template.spec.requirements``."""
        return self.spec.template.spec.requirements

    @property
    def labels(self) -> dict[str, str]:
        """``spec.template.metadata.labels`` (empty dict when unset)."""
        meta = self.spec.template.metadata
        return dict(meta.labels or {}) if meta else {}

    @property
    def taints(self) -> list[Taint]:
        """``spec.template.spec.taints`` (empty list when unset)."""
        return list(self.spec.template.spec.taints or [])
