"""The requirements algebra: sets of allowed label values per key, their intersection and compatibility.

Semantics follow Karpenter's ``pkg/scheduling/requirement(s).go`` (read for behaviour, not copied):

- A :class:`Requirement` is either a finite set of allowed values (``In``; ``DoesNotExist`` is the empty set)
  or the complement of a finite set (``NotIn``; ``Exists`` is the complement of nothing), optionally bounded by
  integer bounds (``Gt``/``Lt``/``Gte``/``Lte``, stored as exclusive ``gt``/``lt``).
- ``minValues`` travels with a requirement and asks for that many distinct values among the candidate
  instance types of a launch.
- :meth:`Requirements.compatible` is Karpenter's ``Compatible(..., AllowUndefinedWellKnownLabels)``: keys both
  sides define must intersect (two "absence-allowing" operators, ``NotIn``/``DoesNotExist``, are compatible
  even when their intersection is empty); a key only the incoming side defines is allowed when it is a
  well-known label (the instance type will supply it) or when its operator is ``NotIn``/``DoesNotExist``.
- Old spellings are normalised: ``karpenter.sh/provisioner-name`` -> ``karpenter.sh/nodepool`` and the
  deprecated ``beta.kubernetes.io/*`` / ``failure-domain.beta.kubernetes.io/*`` keys -> their GA names.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping
from typing import Any

from nodewright.api import labels as L
from nodewright.errors import NodewrightValidationError

IN = "In"
NOT_IN = "NotIn"
EXISTS = "Exists"
DOES_NOT_EXIST = "DoesNotExist"
GT = "Gt"
LT = "Lt"
GTE = "Gte"
LTE = "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)

#: Old label keys accepted on input, mapped to today's key.
KEY_ALIASES: dict[str, str] = {**L.NORMALIZED_LABELS, L.V1ALPHA5_PROVISIONER_NAME: L.NODEPOOL}

#: Well-known keys whose value comes from the instance type (a type without the label behaves as
#: ``DoesNotExist`` for it, as Karpenter's AWS provider declares it).
INSTANCE_TYPE_KEYS: frozenset[str] = frozenset(
    L.WELL_KNOWN_LABELS
    - {
        L.NODEPOOL,
        L.ZONE,
        L.REGION,
        L.ZONE_ID,
        L.CAPACITY_TYPE,
        L.EC2NODECLASS,
        L.CAPACITY_RESERVATION_ID,
        L.WINDOWS_BUILD,
    }
    - set(L.NORMALIZED_LABELS)
)
#: Keys :meth:`Requirements.labels` never picks a value for: restricted keys and Karpenter's lifecycle labels
#: (its ``schedulingSimulationKeys``), which Karpenter sets itself.
_NOT_RESOLVED: frozenset[str] = frozenset(L.RESTRICTED_LABELS | {L.REGISTERED, L.INITIALIZED})
#: Keys whose value comes from the offering (zone x capacity type), not from the instance type.
OFFERING_KEYS: frozenset[str] = frozenset({L.ZONE, L.CAPACITY_TYPE, L.ZONE_ID})


def normalize_key(key: str) -> str:
    """Map an old/deprecated label key to the one Karpenter v1 uses; other keys unchanged."""
    return KEY_ALIASES.get(key, key)


class Requirement:
    """Allowed values of one label key.

    Attributes:
        key: the label key (normalised).
        complement: False: ``values`` are the allowed values; True: every value except ``values``.
        values: the finite set (allowed or excluded, per ``complement``).
        gt, lt: exclusive integer bounds (``Gt 5`` -> gt=5; ``Gte 5`` -> gt=4) or None.
        min_values: minimum distinct values among a launch's candidate instance types, or None.
    """

    __slots__ = ("key", "complement", "values", "gt", "lt", "min_values", "_hash")

    def __init__(
        self,
        key: str,
        complement: bool,
        values: Iterable[str] = (),
        gt: int | None = None,
        lt: int | None = None,
        min_values: int | None = None,
    ) -> None:
        self.key = key
        self.complement = complement
        vals = frozenset(values)
        if (gt is not None or lt is not None) and not complement:
            vals = frozenset(v for v in vals if _within(v, gt, lt))
        self.values = vals
        self.gt = gt
        self.lt = lt
        self.min_values = min_values
        self._hash: int | None = None

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_operator(
        cls,
        key: str,
        operator: str,
        values: Iterable[Any] | None = None,
        min_values: int | None = None,
        path: str = "",
    ) -> Requirement:
        """Build from a node selector requirement (``key``, ``operator``, ``values``).

        Raises:
            NodewrightValidationError: unknown operator, ``In``/``NotIn`` without values, or a numeric operator
                without exactly one integer value.
        """
        key = normalize_key(key)
        vals = [str(v) for v in (values or [])]
        if operator == IN:
            if not vals:
                raise NodewrightValidationError(path, f"operator In on {key!r} needs at least one value")
            return cls(key, False, vals, min_values=min_values)
        if operator == NOT_IN:
            return cls(key, True, vals, min_values=min_values)
        if operator == EXISTS:
            return cls(key, True, (), min_values=min_values)
        if operator == DOES_NOT_EXIST:
            return cls(key, False, ())
        if operator in (GT, LT, GTE, LTE):
            if len(vals) != 1 or not vals[0].lstrip("-").isdigit():
                raise NodewrightValidationError(path, f"{operator} on {key!r} needs one integer, got {vals!r}")
            bound = int(vals[0])
            if operator == GT:
                return cls(key, True, (), gt=bound, min_values=min_values)
            if operator == GTE:
                return cls(key, True, (), gt=bound - 1, min_values=min_values)
            if operator == LT:
                return cls(key, True, (), lt=bound, min_values=min_values)
            return cls(key, True, (), lt=bound + 1, min_values=min_values)
        raise NodewrightValidationError(path, f"unknown operator {operator!r}; use one of {', '.join(OPERATORS)}")

    # --- queries ------------------------------------------------------------------------------
    def has(self, value: str) -> bool:
        """True when ``value`` is allowed."""
        if self.complement:
            return value not in self.values and _within(value, self.gt, self.lt)
        return value in self.values

    def is_empty(self) -> bool:
        """True when no value is allowed (a ``DoesNotExist``, or an empty intersection)."""
        if self.complement:
            return self.gt is not None and self.lt is not None and self.lt - self.gt <= 1
        return not self.values

    def operator(self) -> str:
        """Karpenter's ``Operator()``: In, NotIn, Exists or DoesNotExist (bounded sets report Exists/NotIn)."""
        if self.complement:
            return NOT_IN if self.values else EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def any_value(self) -> str | None:
        """One value this requirement allows, as Karpenter's ``Requirement.Any()`` picks a label value for it;
        None for ``DoesNotExist`` or an empty range.

        ``In``: the smallest of its values (Karpenter takes an arbitrary one; ours is deterministic, so equal
        inputs give equal NodeClaims). ``NotIn``/``Exists``/``Gt``/``Lt``: the smallest non-negative integer
        within the bounds and not excluded (Karpenter draws a random integer within the bounds).
        """
        if not self.complement:
            return min(self.values) if self.values else None
        value = 0 if self.gt is None else self.gt + 1
        for _ in range(len(self.values) + 1):
            if self.lt is not None and value >= self.lt:
                return None
            if str(value) not in self.values:
                return str(value)
            value += 1
        return None

    def allows_absence(self) -> bool:
        """True for NotIn/DoesNotExist without bounds: satisfied by a node that lacks the label."""
        if self.gt is not None or self.lt is not None:
            return False
        return (self.complement and bool(self.values)) or (not self.complement and not self.values)

    def intersection(self, other: Requirement) -> Requirement:
        """Values allowed by both; ``min_values`` is the larger of the two."""
        gt = _max_opt(self.gt, other.gt)
        lt = _min_opt(self.lt, other.lt)
        mv = _max_opt(self.min_values, other.min_values)
        if self.complement and other.complement:
            return Requirement(self.key, True, self.values | other.values, gt, lt, mv)
        if self.complement:
            vals = frozenset(v for v in other.values if self.has(v))
        elif other.complement:
            vals = frozenset(v for v in self.values if other.has(v))
        else:
            vals = self.values & other.values
        return Requirement(self.key, False, vals, gt, lt, mv)

    def identity(self) -> tuple[Any, ...]:
        """Hashable identity (key, complement, sorted values, bounds, minValues)."""
        return (self.key, self.complement, tuple(sorted(self.values)), self.gt, self.lt, self.min_values)

    def to_dicts(self) -> list[dict[str, Any]]:
        """As NodeClaim requirement dicts (``{"key", "operator", "values"[, "minValues"]}``).

        A bounded requirement becomes a ``Gt``/``Lt`` pair (plus ``NotIn`` for excluded values).
        """
        out: list[dict[str, Any]] = []
        if self.gt is not None:
            out.append({"key": self.key, "operator": GT, "values": [str(self.gt)]})
        if self.lt is not None:
            out.append({"key": self.key, "operator": LT, "values": [str(self.lt)]})
        bounded = bool(out)
        op = self.operator()
        if not (bounded and op == EXISTS):
            entry: dict[str, Any] = {"key": self.key, "operator": op}
            if op in (IN, NOT_IN):
                entry["values"] = sorted(self.values)
            out.append(entry)
        if self.min_values is not None:
            out[-1]["minValues"] = self.min_values
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirement) and self.identity() == other.identity()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.identity())
        return self._hash

    def __repr__(self) -> str:
        parts = []
        if self.gt is not None:
            parts.append(f">{self.gt}")
        if self.lt is not None:
            parts.append(f"<{self.lt}")
        op = self.operator()
        vals = sorted(self.values)
        shown = ", ".join(vals[:5]) + (f" and {len(vals) - 5} others" if len(vals) > 5 else "")
        body = f"{op} [{shown}]" if op in (IN, NOT_IN) else op
        return f"{self.key} {body}{' ' + ' '.join(parts) if parts else ''}"


class Requirements(Mapping[str, Requirement]):
    """An immutable map key -> :class:`Requirement`, with intersection and compatibility checks.

    Instances are hashable through :meth:`identity` so the scheduler can cache per requirement set.
    """

    __slots__ = ("_reqs", "_identity")

    def __init__(self, reqs: Iterable[Requirement] = ()) -> None:
        merged: dict[str, Requirement] = {}
        for req in reqs:
            existing = merged.get(req.key)
            merged[req.key] = req if existing is None else existing.intersection(req)
        self._reqs = merged
        self._identity: tuple[Any, ...] | None = None

    @classmethod
    def from_node_selector(cls, selector: Mapping[str, str] | None) -> Requirements:
        """``nodeSelector`` labels as ``In [value]`` requirements."""
        return cls(Requirement(normalize_key(k), False, (str(v),)) for k, v in (selector or {}).items())

    @classmethod
    def from_expressions(cls, expressions: Iterable[Mapping[str, Any]] | None, path: str = "") -> Requirements:
        """From ``[{"key", "operator", "values", "minValues"?}]`` (NodePool requirements, selector terms).

        Raises:
            NodewrightValidationError: an invalid expression (path ``<path>[i]``).
        """
        reqs = []
        for i, expr in enumerate(expressions or []):
            reqs.append(
                Requirement.from_operator(
                    str(expr.get("key", "")),
                    str(expr.get("operator", "")),
                    expr.get("values"),
                    expr.get("minValues", expr.get("min_values")),
                    path=f"{path}[{i}]",
                )
            )
        return cls(reqs)

    # --- Mapping protocol -----------------------------------------------------------------------
    def __getitem__(self, key: str) -> Requirement:
        return self._reqs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._reqs)

    def __len__(self) -> int:
        return len(self._reqs)

    def get(self, key: str, default: Any = None) -> Any:
        """The requirement on ``key`` or ``default`` (a direct dict lookup: this sits on hot paths)."""
        return self._reqs.get(key, default)

    def items(self) -> ItemsView[str, Requirement]:
        """(key, requirement) pairs: the dict's own view (Mapping's would call ``__getitem__`` per key; a pool's
        compatibility check runs it for each of ~1,300 instance types)."""
        return self._reqs.items()

    def __contains__(self, key: object) -> bool:
        return key in self._reqs

    def __repr__(self) -> str:
        return "Requirements(" + "; ".join(repr(r) for r in self._reqs.values()) + ")"

    def __str__(self) -> str:
        """Karpenter's ``Requirements.String()``: each requirement (``key In [a, b]``, at most 5 values shown),
        sorted, joined by ``", "`` -- the words of its "no instance type satisfied ... requirements" reason."""
        return ", ".join(sorted(repr(r) for r in self._reqs.values()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirements) and self.identity() == other.identity()

    def __hash__(self) -> int:
        return hash(self.identity())

    # --- algebra --------------------------------------------------------------------------------
    def identity(self) -> tuple[Any, ...]:
        """Hashable, order-independent identity."""
        if self._identity is None:
            self._identity = tuple(sorted(r.identity() for r in self._reqs.values()))
        return self._identity

    def intersect(self, other: Requirements) -> Requirements:
        """Per-key intersection (keys of either side kept)."""
        if not other._reqs:
            return self
        if not self._reqs:
            return other
        return Requirements([*self._reqs.values(), *other._reqs.values()])

    def with_requirement(self, req: Requirement) -> Requirements:
        """A copy with ``req`` intersected in."""
        return Requirements([*self._reqs.values(), req])

    def min_values(self) -> dict[str, int]:
        """key -> ``minValues`` of the requirements that set one."""
        return {key: req.min_values for key, req in self._reqs.items() if req.min_values}

    def with_min_values(self, changes: Mapping[str, int]) -> Requirements:
        """A copy whose requirements on the keys of ``changes`` ask for that ``minValues`` instead (0: none), as
        Karpenter's ``MinValuesPolicy=BestEffort`` rewrites a NodeClaim's requirements to what its instance types
        meet."""
        out = []
        for key, req in self._reqs.items():
            if key in changes:
                req = Requirement(key, req.complement, req.values, req.gt, req.lt, changes[key] or None)
            out.append(req)
        return Requirements(out)

    def incompatibility(self, incoming: Requirements, allow_undefined: frozenset[str] | None = None) -> str | None:
        """Why ``incoming`` (a pod's requirements) cannot be met by a node template with these requirements.

        ``allow_undefined`` are keys the template need not define (default: Karpenter's well-known labels,
        which instance types and offerings supply). Returns None when compatible.
        """
        allowed = L.WELL_KNOWN_LABELS if allow_undefined is None else allow_undefined
        for key, req in incoming._reqs.items():
            mine = self._reqs.get(key)
            if mine is None:
                if req.allows_absence() or key in allowed:
                    continue
                return f"label {key!r} does not have known values"
            if mine.intersection(req).is_empty() and not (mine.allows_absence() and req.allows_absence()):
                return f"key {key}, {req!r} not in {mine!r}"
        return None

    def compatible(self, incoming: Requirements, allow_undefined: frozenset[str] | None = None) -> bool:
        """True when :meth:`incompatibility` finds nothing."""
        return self.incompatibility(incoming, allow_undefined) is None

    def satisfied_by_labels(self, node_labels: Mapping[str, str]) -> bool:
        """Strict check against a real node's labels (existing nodes): each requirement must hold.

        A missing label satisfies only NotIn/DoesNotExist.
        """
        for key, req in self._reqs.items():
            value = node_labels.get(key)
            if value is None:
                if not req.allows_absence():
                    return False
            elif not req.has(value):
                return False
        return True

    def labels(self) -> dict[str, str]:
        """The labels a NodeClaim from these requirements carries (Karpenter's ``ToNodeClaim``): every
        single-valued ``In`` requirement, and a value for every other key that resolves to one (multi-valued
        ``In``, ``NotIn``, ``Exists``, ``Gt``, ``Lt``: :meth:`Requirement.any_value`) unless the key is well known
        (the instance type and offering supply it; any key NodePool validation admits under karpenter.sh or
        karpenter.k8s.aws is one of Karpenter's well-known labels), restricted, or one of Karpenter's lifecycle
        labels."""
        out: dict[str, str] = {}
        for key, req in self._reqs.items():
            if not req.complement and len(req.values) == 1:
                out[key] = next(iter(req.values))
            elif key not in L.WELL_KNOWN_LABELS and key not in _NOT_RESOLVED and not _karpenter_domain(key):
                value = req.any_value()
                if value is not None:
                    out[key] = value
        return out

    def to_dicts(self) -> list[dict[str, Any]]:
        """As NodeClaim ``spec.requirements`` dicts, sorted by key."""
        out: list[dict[str, Any]] = []
        for key in sorted(self._reqs):
            out.extend(self._reqs[key].to_dicts())
        return out


def _karpenter_domain(key: str) -> bool:
    """True for a key under one of Karpenter's reserved label domains (or a subdomain)."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in L.RESTRICTED_LABEL_DOMAINS)


def _within(value: str, gt: int | None, lt: int | None) -> bool:
    if gt is None and lt is None:
        return True
    try:
        number = int(value)
    except ValueError:
        return False
    return (gt is None or number > gt) and (lt is None or number < lt)


def _max_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
