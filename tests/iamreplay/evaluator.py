"""A small offline IAM policy evaluator: enough of IAM's documented semantics to judge the controller's calls.

Why our own: moto's IAM enforcement evaluates only ``StringEquals`` and silently ignores every other condition
operator (a condition it cannot evaluate counts as met), and it does not model ``aws:RequestTag`` /
``aws:ResourceTag`` for EC2; the PyPI evaluators looked at (iam-ape, aws-why, policyuniverse, parliament,
policy-sentry) either compute effective permissions without a request context or only lint. This module
follows the IAM User Guide ("Policy evaluation logic", "IAM JSON policy elements: Condition operators",
"Condition keys with multiple values"):

- A request is allowed when some ``Allow`` statement matches and no ``Deny`` statement does.
- A statement matches when its ``Action``/``NotAction`` (case-insensitive, ``*``/``?`` wildcards), its
  ``Resource``/``NotResource`` (wildcards per ARN component, the resource part may span ``/`` and ``:``), its
  ``Principal`` (trust policies only) and every one of its conditions match.
- Conditions: every operator block must hold, every key in a block must hold, and a key holds when any of its
  policy values matches. Operators: ``String[Not]Equals[IgnoreCase]``, ``String[Not]Like``, ``Arn[Not]Equals``,
  ``Arn[Not]Like``, ``Bool``, ``Null``, each with ``...IfExists``, and the ``ForAllValues:`` / ``ForAnyValue:``
  set qualifiers. A key missing from the request makes a positive operator false and a negated one true;
  ``IfExists`` makes a missing key true; ``ForAllValues`` is true for a missing or empty key, ``ForAnyValue``
  false. Condition key names are compared case-insensitively, values case-sensitively (except ``IgnoreCase``).

Not modelled (the controller's policies use none of it): policy variables (``${aws:username}``), numeric/date/IP
operators, permissions boundaries, SCPs, session policies, resource-based policies on the target.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

Document = Mapping[str, Any]


@dataclass(frozen=True)
class Request:
    """One authorization IAM performs.

    Attributes:
        action: ``service:Action`` (``ec2:CreateFleet``).
        resource: the resource ARN (``*`` for actions without resource-level permissions).
        context: condition keys -> values (``aws:RequestTag/karpenter.sh/nodepool`` -> ``("general",)``);
            multi-valued keys (``aws:TagKeys``) carry several values.
        principal: for trust policies, ``(type, value)`` such as ``("Service", "pods.eks.amazonaws.com")``.
        call: what made this request, for messages (``ec2:CreateFleet`` and its test).
    """

    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    principal: tuple[str, str] | None = None
    call: str = ""


@dataclass(frozen=True)
class Decision:
    """The result of :func:`evaluate`: ``allowed``, the statement that decided (Sid or ``#n`` of ``policy``), and
    for a denial the closest statement and why it did not apply."""

    allowed: bool
    statement: str | None = None
    reason: str = ""


# --------------------------------------------------------------------------------------------------------------
# Matching primitives
# --------------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    flags = re.IGNORECASE if ignore_case else 0
    return re.compile(fnmatch.translate(pattern), flags)


def glob_match(pattern: str, value: str, ignore_case: bool = False) -> bool:
    """IAM's wildcard match: ``*`` any run of characters (``/`` and ``:`` included), ``?`` one character.

    ``[`` has no special meaning in IAM, so it is escaped before matching.
    """
    escaped = pattern.replace("[", "[[]")
    return _glob(escaped, ignore_case).match(value) is not None


def action_matches(pattern: str, action: str) -> bool:
    """``ec2:Run*`` matches ``ec2:RunInstances``; service prefix and name are case-insensitive."""
    return glob_match(pattern, action, ignore_case=True)


def arn_matches(pattern: str, arn: str) -> bool:
    """An ARN pattern against an ARN, component by component (``arn:partition:service:region:account:resource``);
    ``*`` alone matches everything."""
    if pattern == "*":
        return True
    want = pattern.split(":", 5)
    have = arn.split(":", 5)
    if len(want) != 6 or len(have) != 6:
        return glob_match(pattern, arn)
    return all(glob_match(w, h) for w, h in zip(want, have, strict=True))


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


# --------------------------------------------------------------------------------------------------------------
# Conditions
# --------------------------------------------------------------------------------------------------------------

_NEGATED = {"stringnotequals", "stringnotequalsignorecase", "stringnotlike", "arnnotequals", "arnnotlike"}


def _value_matches(base: str, policy_value: str, value: str) -> bool:
    if base in ("stringequals", "stringnotequals"):
        return policy_value == value
    if base in ("stringequalsignorecase", "stringnotequalsignorecase"):
        return policy_value.lower() == value.lower()
    if base in ("stringlike", "stringnotlike"):
        return glob_match(policy_value, value)
    if base in ("arnequals", "arnnotequals", "arnlike", "arnnotlike"):
        return arn_matches(policy_value, value)
    if base == "bool":
        return policy_value.lower() == value.lower()
    raise ValueError(f"condition operator {base!r} is not supported by this evaluator")


def condition_holds(operator: str, key: str, policy_values: Sequence[Any],
                    context: Mapping[str, tuple[str, ...]]) -> bool:
    """One ``{operator: {key: values}}`` test against the request ``context`` (see the module docstring)."""
    qualifier, _, base = operator.rpartition(":")
    base = base.lower()
    if_exists = base.endswith("ifexists")
    if if_exists:
        base = base[: -len("ifexists")]
    values = _lookup(context, key)
    wanted = [str(v).lower() if isinstance(v, bool) else str(v) for v in policy_values]
    if base == "null":
        return (values is None or not values) == (wanted[0].lower() == "true")
    negated = base in _NEGATED
    qualifier = qualifier.lower()
    if qualifier == "forallvalues":
        if not values:
            return True
        return all(_single(base, negated, wanted, v) for v in values)
    if qualifier == "foranyvalue":
        if not values:
            return False
        return any(_single(base, negated, wanted, v) for v in values)
    if values is None:
        return if_exists or negated
    return any(_single(base, negated, wanted, v) for v in values)


def _single(base: str, negated: bool, wanted: Sequence[str], value: str) -> bool:
    hit = any(_value_matches(base, w, value) for w in wanted)
    return not hit if negated else hit


def _lookup(context: Mapping[str, tuple[str, ...]], key: str) -> tuple[str, ...] | None:
    if key in context:
        return context[key]
    lowered = key.lower()
    for name, values in context.items():
        if name.lower() == lowered:
            return values
    return None


def failing_conditions(statement: Document, context: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The ``operator key`` tests of ``statement`` that do not hold for ``context`` (empty: all hold)."""
    failed = []
    for operator, tests in (statement.get("Condition") or {}).items():
        for key, values in tests.items():
            if not condition_holds(operator, key, _as_list(values), context):
                have = _lookup(context, key)
                failed.append(f"{operator} {key} {_as_list(values)} (request: {list(have) if have else 'absent'})")
    return failed


# --------------------------------------------------------------------------------------------------------------
# Statements and policies
# --------------------------------------------------------------------------------------------------------------


def _principal_matches(statement: Document, principal: tuple[str, str] | None) -> bool:
    if "Principal" not in statement and "NotPrincipal" not in statement:
        return True
    if principal is None:
        return False
    declared = statement.get("Principal")
    if declared == "*":
        return True
    kind, value = principal
    return any(p == "*" or glob_match(str(p), value) for p in _as_list((declared or {}).get(kind, [])))


def _action_in(statement: Document, action: str) -> bool:
    if "NotAction" in statement:
        return not any(action_matches(a, action) for a in _as_list(statement["NotAction"]))
    return any(action_matches(a, action) for a in _as_list(statement.get("Action", [])))


def _resource_in(statement: Document, resource: str, trust: bool) -> bool:
    if trust and "Resource" not in statement and "NotResource" not in statement:
        return True
    if "NotResource" in statement:
        return not any(arn_matches(r, resource) for r in _as_list(statement["NotResource"]))
    return any(arn_matches(r, resource) for r in _as_list(statement.get("Resource", [])))


def statement_name(statement: Document, index: int, policy: str = "") -> str:
    """``policy/Sid`` (or ``policy/#n``) for messages."""
    name = statement.get("Sid") or f"#{index + 1}"
    return f"{policy}/{name}" if policy else str(name)


def evaluate(policies: Mapping[str, Document], request: Request, trust: bool = False) -> Decision:
    """Decide ``request`` against identity policies (or one trust policy with ``trust=True``), by IAM's rules.

    Args:
        policies: policy name -> document (every document attached to the principal).
        request: the authorization to decide.
        trust: the documents are trust (resource) policies: statements need a matching ``Principal`` and may
            omit ``Resource``.

    Returns:
        A :class:`Decision`; a denial names the statement closest to allowing (action and resource match, a
        condition failed; else action matches; else none) and the failing conditions.

    Raises:
        ValueError: a policy uses a condition operator this evaluator does not know (never a silent allow).
    """
    allowed_by: str | None = None
    near: list[tuple[int, str, str]] = []
    for policy_name, document in policies.items():
        if document.get("Version") != "2012-10-17":
            raise ValueError(f"policy {policy_name!r} has Version {document.get('Version')!r}, not 2012-10-17")
        for index, statement in enumerate(_as_list(document.get("Statement", []))):
            name = statement_name(statement, index, policy_name)
            if not _action_in(statement, request.action):
                continue
            if not _resource_in(statement, request.resource, trust):
                near.append((1, name, f"its Resource {_as_list(statement.get('Resource'))} does not match"))
                continue
            if trust and not _principal_matches(statement, request.principal):
                near.append((2, name, f"its Principal {statement.get('Principal')} does not match"))
                continue
            failed = failing_conditions(statement, request.context)
            if failed:
                near.append((3, name, "condition not met: " + "; ".join(failed)))
                continue
            if statement.get("Effect") == "Deny":
                return Decision(False, name, "explicitly denied")
            allowed_by = allowed_by or name
    if allowed_by is not None:
        return Decision(True, allowed_by)
    if not near:
        return Decision(False, None, f"no statement grants {request.action}")
    rank, name, why = max(near, key=lambda n: n[0])
    return Decision(False, name, why)


def tag_context(prefix: str, tags: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """``{f"{prefix}/{key}": (value,)}`` for every tag (``prefix`` is ``aws:RequestTag`` or ``aws:ResourceTag``),
    plus ``aws:TagKeys`` for request tags."""
    context: dict[str, tuple[str, ...]] = {f"{prefix}/{k}": (v,) for k, v in tags.items()}
    if prefix == "aws:RequestTag" and tags:
        context["aws:TagKeys"] = tuple(tags)
    return context


def merge(*contexts: Mapping[str, tuple[str, ...]] | None) -> dict[str, tuple[str, ...]]:
    """Union of request contexts (later ones win on the same key)."""
    merged: dict[str, tuple[str, ...]] = {}
    for context in contexts:
        merged.update(context or {})
    return merged


def all_statements(policies: Mapping[str, Document]) -> Iterable[tuple[str, Document]]:
    """``(policy/Sid, statement)`` of every statement."""
    for policy_name, document in policies.items():
        for index, statement in enumerate(_as_list(document.get("Statement", []))):
            yield statement_name(statement, index, policy_name), statement
