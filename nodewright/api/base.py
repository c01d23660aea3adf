"""Shared building blocks of the API models: the base model, object metadata, taints, conditions,
field types with Kubernetes validation (label keys/values, quantities, durations), and the
translation of pydantic errors into :class:`nodewright.errors.NodewrightValidationError`.

Field names are Python snake_case with the Kubernetes camelCase spelling as alias, so
``Model.model_validate(manifest_dict)`` reads a manifest and ``model.to_manifest()`` writes one.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from nodewright.api import durations
from nodewright.errors import NodewrightValidationError, combine
from nodewright.quantities import QUANTITY_PATTERN

# --- errors -------------------------------------------------------------------------------------

_NODEWRIGHT_ERROR = "nodewright"


def invalid(subpath: str, reason: str) -> PydanticCustomError:
    """Build the error a model validator raises for a problem ``subpath`` below the model.

    ``subpath`` is relative to the model being validated (``"values"``, ``"budgets[1]"``, or ``""``
    for the model itself); :func:`validation_error` appends it to pydantic's location so the
    final path names the exact field.
    """
    return PydanticCustomError(_NODEWRIGHT_ERROR, "{reason}", {"reason": reason, "subpath": subpath})


def format_path(loc: Sequence[int | str], prefix: str = "") -> str:
    """Render a pydantic location as ``spec.template.spec.requirements[2].values``.

    Integers become ``[i]``; map keys that contain ``.`` or ``/`` (label keys, tag keys) become
    ``[key]`` so the path stays unambiguous; pydantic's internal tags (``[key]``,
    ``function-after[...]``) are dropped.
    """
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]" or ("[" in part and part.endswith("]")):
            continue
        elif "." in part or "/" in part or part == "":
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _reason(error: Any) -> str:
    if error["type"] == _NODEWRIGHT_ERROR:
        return str(error["ctx"]["reason"])
    msg = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix) :]
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "extra_forbidden":
        return "unknown field"
    value = error.get("input")
    # Pydantic's own messages do not show the offending value; ours (value_error) already do.
    if error["type"] != "value_error" and isinstance(value, str | int | float | bool) and "got" not in msg:
        msg += f", got {value!r}"
    return msg


def _types_of(annotation: Any) -> Iterator[Any]:
    """The types ``annotation`` may hold: ``Annotated`` metadata dropped, each member of a union (``X | None``)."""
    if typing.get_origin(annotation) is Annotated:
        yield from _types_of(typing.get_args(annotation)[0])
    elif typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            yield from _types_of(arg)
    else:
        yield annotation


def known_fields(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The fields (Kubernetes spelling) of the model found at ``loc`` below ``model`` (a pydantic location: field
    names, list indices, map keys), ``[]`` when ``loc`` leads to no model."""
    current: list[Any] = [model]
    for part in loc:
        found: list[Any] = []
        for tp in (t for c in current for t in _types_of(c)):
            origin, args = typing.get_origin(tp), typing.get_args(tp)
            if isinstance(part, int) and origin in (list, tuple, Sequence) and args:
                found.append(args[0])
            elif isinstance(part, str) and origin is dict and len(args) == 2:
                found.append(args[1])
            elif isinstance(part, str) and isinstance(tp, type) and issubclass(tp, BaseModel):
                found.extend(f.annotation for name, f in tp.model_fields.items() if part in (f.alias, name))
        current = found
    return sorted({f.alias or name for c in current for tp in _types_of(c)
                   if isinstance(tp, type) and issubclass(tp, BaseModel) for name, f in tp.model_fields.items()})


def _one_error(error: Any, prefix: str, model: type[BaseModel] | None = None) -> NodewrightValidationError:
    path = format_path(list(error["loc"]), prefix)
    if error["type"] == "extra_forbidden" and model is not None:
        # A misspelt field: name the closest one the object has (difflib), as the review's warnings do.
        loc = list(error["loc"])
        match = difflib.get_close_matches(str(loc[-1]), known_fields(model, loc[:-1]), n=1, cutoff=0.6)
        if match:
            return NodewrightValidationError(path, f"unknown field; did you mean {match[0]!r}?")
    if error["type"] == _NODEWRIGHT_ERROR:
        sub = str(error["ctx"].get("subpath", ""))
        if sub:
            path = f"{path}.{sub}" if path and not sub.startswith("[") else f"{path}{sub}"
    return NodewrightValidationError(path, _reason(error))


def validation_error(err: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
                     ) -> NodewrightValidationError:
    """Turn pydantic's errors into one :class:`NodewrightValidationError` carrying every problem (one per
    field path, the first reason pydantic gives for it; ``.problems`` lists them, the first is ``path``). With
    ``model`` (the one validated), an unknown field names the closest field of its object: ``unknown field; did
    you mean 'requirements'?``."""
    problems: dict[str, NodewrightValidationError] = {}
    for error in err.errors(include_url=False):
        one = _one_error(error, prefix, model)
        problems.setdefault(one.path, one)
    return combine(list(problems.values()))


M = TypeVar("M", bound=BaseModel)


def parse_model(model: type[M], doc: Any, prefix: str = "") -> M:
    """Validate ``doc`` (a decoded manifest) as ``model``.

    Raises:
        NodewrightValidationError: naming each invalid field's path and the reason (``.problems``).
    """
    if not isinstance(doc, dict):
        raise NodewrightValidationError(prefix, f"expected a mapping, got {type(doc).__name__}")
    try:
        return model.model_validate(doc)
    except ValidationError as err:
        raise validation_error(err, prefix, model) from None


def cel(*rules: tuple[str, str]) -> ConfigDict:
    """Model config carrying CEL rules (``(rule, message)``) for the generated CRD: the same
    checks the model validators make, so the API server enforces them too."""
    return ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [{"message": m, "rule": r} for r, m in rules]}
    )


def cel_field(*rules: tuple[str, str], **schema: Any) -> dict[str, Any]:
    """``json_schema_extra`` for one field: its CEL rules (``(rule, message)``, ``self`` is the field's value)
    plus extra schema keywords (``maxProperties``, ...), as Karpenter's CRDs put them on the field."""
    return {**schema, "x-kubernetes-validations": [{"message": m, "rule": r} for r, m in rules]}


#: Selector-term tag maps (Karpenter's EC2NodeClass CRD): at most 20 tags, no empty key or value.
SELECTOR_TAGS_SCHEMA = cel_field(("self.all(k, k != '' && self[k] != '')", "empty tag keys or values aren't supported"),
                                 maxProperties=20)  # ec2nodeclass.MAX_SELECTOR_TAGS


# --- base model ---------------------------------------------------------------------------------


class KubeModel(BaseModel):
    """Base for every API object: camelCase aliases, unknown fields rejected (as a structural CRD
    with strict field validation would), population by either name."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=False,
    )

    def to_manifest(self) -> dict[str, Any]:
        """Plain dict in Kubernetes spelling (camelCase, no ``None`` fields), ready for YAML/JSON."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class LenientModel(KubeModel):
    """For status and metadata blocks written by servers and controllers: unknown fields kept."""

    model_config = ConfigDict(extra="allow")


# --- string formats -----------------------------------------------------------------------------

_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# Kubernetes resource.Quantity: a signed decimal number with an optional SI/binary suffix or exponent.
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)


def check_qualified_name(key: str) -> str:
    """Validate a label/taint key: ``[prefix/]name``, prefix a DNS subdomain <= 253 characters,
    name <= 63 characters of alphanumerics, ``-``, ``_``, ``.`` (Kubernetes IsQualifiedName)."""
    if not isinstance(key, str) or not key:
        raise ValueError("must be a non-empty qualified name like 'example.com/team'")
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.match(prefix)):
        raise ValueError(f"prefix of {key!r} must be a lowercase DNS subdomain")
    if len(name) > 63 or not _NAME_RE.match(name):
        raise ValueError(
            f"{key!r} is not a qualified name: at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending alphanumeric"
        )
    return key


def _to_label_value(value: Any) -> Any:
    # YAML turns 8 into an int; Kubernetes wants the string "8". Booleans are not coerced because
    # YAML's `yes`/`true` are a classic surprise: the user must quote them.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, bool):
        raise ValueError(f"must be a string, got {value!r}: quote it ('\"{str(value).lower()}\"')")
    return value


def check_label_value(value: str) -> str:
    """Validate a label value: empty or <= 63 alphanumerics, ``-``, ``_``, ``.`` (IsValidLabelValue)."""
    if len(value) > 63 or not _LABEL_VALUE_RE.match(value):
        raise ValueError(
            f"{value!r} is not a valid label value: at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending alphanumeric"
        )
    return value


def check_dns_subdomain(value: str) -> str:
    """Validate an object name: a lowercase RFC 1123 subdomain of at most 253 characters."""
    if len(value) > 253 or not _DNS_SUBDOMAIN_RE.match(value):
        raise ValueError(f"{value!r} is not a valid name: lowercase alphanumerics, '-' and '.', at most 253")
    return value


def _to_quantity(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"must be a quantity like '2', '500m' or '4Gi', got {value!r}")
    if isinstance(value, int | float):
        return str(value)
    return value


def check_quantity(value: str) -> str:
    """Validate a Kubernetes quantity (``"1000"``, ``"500m"``, ``"1000Gi"``, ``"1e3"``)."""
    if not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a quantity: expected a number with an optional suffix like m, Gi, G")
    return value


def _check_duration(value: str) -> str:
    if not durations.is_duration(value):
        raise ValueError(f"{value!r} is not a duration: use e.g. '30s', '15m', '720h' or '1h30m'")
    return value


def _check_nillable_duration(value: str) -> str:
    if value != durations.NEVER and not durations.is_duration(value):
        raise ValueError(f"{value!r} is not a duration: use e.g. '30s', '15m', '720h', or 'Never'")
    return value


# OpenAPI fragments for the CRDs (see nodewright.api.crds): the same rules as the validators.
QUALIFIED_NAME_SCHEMA = {
    "type": "string",
    "maxLength": 316,
    # The name part is bounded in the pattern ({0,61}: at most 63 characters). Not as a CEL rule: on list items
    # without maxItems (taints) the API server's cost estimate refuses such a rule (40x over budget, v1.36).
    "pattern": r"^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?"
    r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$",
}
LABEL_VALUE_SCHEMA = {"type": "string", "maxLength": 63, "pattern": _LABEL_VALUE_RE.pattern}
QUANTITY_SCHEMA = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": _QUANTITY_RE.pattern,
    "x-kubernetes-int-or-string": True,
}
DURATION_SCHEMA = {"type": "string", "pattern": r"^([0-9]+(s|m|h))+$"}
NILLABLE_DURATION_SCHEMA = {"type": "string", "pattern": r"^(([0-9]+(s|m|h))+|Never)$"}

QualifiedName = Annotated[str, AfterValidator(check_qualified_name), WithJsonSchema(QUALIFIED_NAME_SCHEMA)]
LabelValue = Annotated[
    str, BeforeValidator(_to_label_value), AfterValidator(check_label_value), WithJsonSchema(LABEL_VALUE_SCHEMA)
]
ObjectName = Annotated[str, AfterValidator(check_dns_subdomain)]
Quantity = Annotated[
    str, BeforeValidator(_to_quantity), AfterValidator(check_quantity), WithJsonSchema(QUANTITY_SCHEMA)
]
#: A quantity that may not be negative (kubelet reserved resources): the sign is left out of the pattern, the
#: cheap way for the API server (a CEL rule over the map's values exceeds its cost budget).
NonNegativeQuantity = Annotated[
    str, BeforeValidator(_to_quantity), AfterValidator(check_quantity),
    WithJsonSchema({**QUANTITY_SCHEMA, "pattern": QUANTITY_SCHEMA["pattern"].replace("^[+-]?", "^[+]?", 1)}),
]
Duration = Annotated[str, AfterValidator(_check_duration), WithJsonSchema(DURATION_SCHEMA)]
"""A Go duration made of ``<int>s|m|h`` parts, e.g. ``"1h30m"``."""
NillableDuration = Annotated[str, AfterValidator(_check_nillable_duration), WithJsonSchema(NILLABLE_DURATION_SCHEMA)]
"""A :data:`Duration` or the literal ``"Never"``."""
ResourceList = dict[str, Quantity]
"""Resource name -> quantity, e.g. ``{"cpu": "1000", "memory": "1000Gi", "nodes": "10"}``."""


MAX_LABELS = 100


def check_labels(labels: dict[str, str]) -> dict[str, str]:
    """Validate every key (qualified name) and value (label value) of a label map (at most 100 labels, the
    ``maxProperties`` of Karpenter's CRDs)."""
    if len(labels) > MAX_LABELS:
        raise ValueError(f"at most {MAX_LABELS} labels, got {len(labels)}")
    for key, value in labels.items():
        try:
            check_qualified_name(key)
        except ValueError as err:
            raise invalid(f"[{key}]", str(err)) from None
        try:
            check_label_value(_to_label_value(value))
        except ValueError as err:
            raise invalid(f"[{key}]", str(err)) from None
    return labels


def _coerce_label_map(value: Any) -> Any:
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(item, int) and not isinstance(item, bool):
                item = str(item)
            out[key] = item
        return out
    return value


Labels = Annotated[
    dict[str, str],
    BeforeValidator(_coerce_label_map),
    AfterValidator(check_labels),
    WithJsonSchema({"type": "object", "additionalProperties": LABEL_VALUE_SCHEMA, "maxProperties": MAX_LABELS}),
]
StringMap = dict[str, str]


# --- metadata, taints, conditions ---------------------------------------------------------------


class ObjectMeta(LenientModel):
    """``metadata`` of a top-level object. Only the fields nodewright reads are typed; the rest
    (uid, resourceVersion, managedFields, ...) are kept as given."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    finalizers: list[str] | None = None
    owner_references: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _check_name(self) -> ObjectMeta:
        if self.name is not None:
            try:
                check_dns_subdomain(self.name)
            except ValueError as err:
                raise invalid("name", str(err)) from None
        return self


def restricted_label_cel(key: str) -> str:
    """CEL expression true when label ``key`` (a CEL string expression) is allowed in a NodePool;
    mirrors :func:`nodewright.api.labels.is_restricted_label`."""
    from nodewright.api import labels

    def quoted(items: frozenset[str]) -> str:
        return "[" + ", ".join(f"'{i}'" for i in sorted(items)) + "]"

    domain = f"{key}.split('/')[0]"
    under = f"(d, {domain} == d || {domain}.endsWith('.' + d))"
    return (
        f"!({key} in {quoted(labels.RESTRICTED_LABELS)}) && ({key} in {quoted(labels.WELL_KNOWN_LABELS)}"
        f" || !{key}.contains('/') || !{quoted(labels.RESTRICTED_LABEL_DOMAINS)}.exists{under})"
    )


class TemplateMetadata(KubeModel):
    """``spec.template.metadata``: labels and annotations stamped on every node of the pool."""

    model_config = cel(
        (
            f"!has(self.labels) || self.labels.all(k, {restricted_label_cel('k')})",
            "label is restricted: karpenter.sh/nodepool, kubernetes.io/hostname and unknown labels "
            "under karpenter.sh, karpenter.k8s.aws",
        ),
    )

    labels: Labels | None = None
    annotations: StringMap | None = None


TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Taint(KubeModel):
    """A node taint (``key[=value]:effect``) as in core/v1 Taint."""

    key: QualifiedName
    value: LabelValue | None = None
    effect: TaintEffect
    time_added: str | None = None


class Condition(LenientModel):
    """A status condition (``type``, ``status`` True/False/Unknown, reason, message, times)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None


class NodeClassReference(KubeModel):
    """``nodeClassRef``: which node class (by API group, kind and name) a NodePool/NodeClaim uses."""

    group: str = Field(min_length=1, pattern=r"^[^/]*$")
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
