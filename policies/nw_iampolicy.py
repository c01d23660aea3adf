"""IAM policy documents as plain statements, from every form a synthesized stack may hold them in.

A policy attribute (``policy``, ``assume_role_policy``, an inline policy) may be, in the Terraform JSON:

- a JSON string (``json.dumps`` in the stack code), possibly with ``${...}`` tokens inside values;
- an object (already a dict);
- a reference ``${data.aws_iam_policy_document.<name>.json}`` (also ``minified_json``), possibly through a
  cross-stack output;
- any of these list-wrapped (checkov's parser form).

``${jsonencode(...)}`` and other Terraform expressions cannot be read without Terraform; they give a
``PolicyError`` so the rules fail closed rather than pass a document they did not read.

IAM semantics (AWS IAM User Guide, "IAM JSON policy elements reference"): ``Action``/``Resource`` match
case-insensitively for actions, with ``*`` and ``?`` wildcards; a missing ``Effect`` in
``aws_iam_policy_document`` defaults to ``Allow`` (Terraform AWS provider docs).
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Any

from nw_tfdoc import Project, Ref, dict_list, scalar, str_list

POLICY_DOC_TYPE = "aws_iam_policy_document"


class PolicyError(ValueError):
    """A policy value that cannot be read as an IAM document (the message says why)."""


@dataclass(frozen=True)
class Condition:
    """One condition test: ``operator`` (e.g. ``StringEquals``), context ``key``, ``values``."""

    operator: str
    key: str
    values: tuple[str, ...]


@dataclass
class Statement:
    """One IAM statement, normalised. Principals map type (``AWS``/``Service``/``Federated``/``*``)
    to identifiers."""

    effect: str = "Allow"
    sid: str = ""
    actions: list[str] = field(default_factory=list)
    not_actions: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    not_resources: list[str] = field(default_factory=list)
    principals: dict[str, list[str]] = field(default_factory=dict)
    not_principals: dict[str, list[str]] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)

    @property
    def allows(self) -> bool:
        """True for ``Effect: Allow``."""
        return self.effect.lower() == "allow"

    def grants(self, action: str) -> bool:
        """True when this statement's action list covers ``action`` (wildcards, ``NotAction``)."""
        if self.not_actions:
            return not any(action_matches(p, action) for p in self.not_actions)
        return any(action_matches(p, action) for p in self.actions)

    def condition_values(self, key: str, operators: tuple[str, ...]) -> list[tuple[str, ...]]:
        """The value tuples of every condition on ``key`` (case-insensitive) with one of ``operators``."""
        key_l = key.lower()
        ops = {o.lower() for o in operators}
        return [c.values for c in self.conditions if c.key.lower() == key_l and c.operator.lower() in ops]


def action_matches(pattern: str, action: str) -> bool:
    """IAM action matching: case-insensitive, ``*`` and ``?`` wildcards."""
    return fnmatch.fnmatchcase(action.lower(), pattern.lower())


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _principals_from_json(value: Any) -> dict[str, list[str]]:
    value = scalar(value)
    if value is None:
        return {}
    if isinstance(value, str):  # "Principal": "*"
        return {"*": [value]}
    if isinstance(value, dict):
        return {str(k): str_list(v) for k, v in value.items()}
    raise PolicyError(f"unreadable Principal {value!r}")


def _conditions_from_json(value: Any) -> list[Condition]:
    out: list[Condition] = []
    for block in dict_list(value):
        for operator, tests in block.items():
            for test in dict_list(tests):
                for key, values in test.items():
                    out.append(Condition(str(operator), str(key), tuple(str_list(values))))
    return out


def statement_from_json(raw: dict[str, Any]) -> Statement:
    """A statement from IAM JSON (``Effect``, ``Action``, ``Resource``, ``Principal``, ``Condition``...)."""
    return Statement(
        effect=str(scalar(raw.get("Effect")) or "Allow"),
        sid=str(scalar(raw.get("Sid")) or ""),
        actions=str_list(raw.get("Action")),
        not_actions=str_list(raw.get("NotAction")),
        resources=str_list(raw.get("Resource")),
        not_resources=str_list(raw.get("NotResource")),
        principals=_principals_from_json(raw.get("Principal")),
        not_principals=_principals_from_json(raw.get("NotPrincipal")),
        conditions=_conditions_from_json(raw.get("Condition")),
    )


def _principals_from_data(value: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for block in dict_list(value):
        out.setdefault(str(scalar(block.get("type"))), []).extend(str_list(block.get("identifiers")))
    return out


def statement_from_data(raw: dict[str, Any]) -> Statement:
    """A statement from an ``aws_iam_policy_document`` ``statement`` block (snake_case fields)."""
    conditions = [
        Condition(str(scalar(c.get("test"))), str(scalar(c.get("variable"))), tuple(str_list(c.get("values"))))
        for c in dict_list(raw.get("condition"))
    ]
    return Statement(
        effect=str(scalar(raw.get("effect")) or "Allow"),
        sid=str(scalar(raw.get("sid")) or ""),
        actions=str_list(raw.get("actions")),
        not_actions=str_list(raw.get("not_actions")),
        resources=str_list(raw.get("resources")),
        not_resources=str_list(raw.get("not_resources")),
        principals=_principals_from_data(raw.get("principals")),
        not_principals=_principals_from_data(raw.get("not_principals")),
        conditions=conditions,
    )


def statements_from_document(doc: dict[str, Any]) -> list[Statement]:
    """Statements of an IAM JSON document (``{"Version": ..., "Statement": [...]}``).

    Raises ``PolicyError`` when there is no ``Statement``.
    """
    if "Statement" not in doc:
        raise PolicyError("policy document has no Statement")
    return [statement_from_json(s) for s in dict_list(doc["Statement"])]


def _merge_by_sid(base: list[Statement], overrides: list[Statement]) -> list[Statement]:
    """Terraform's override semantics: a statement with a matching non-empty ``sid`` is replaced."""
    out = list(base)
    for st in overrides:
        same = [i for i, b in enumerate(out) if st.sid and b.sid == st.sid]
        if same:
            out[same[0]] = st
        else:
            out.append(st)
    return out


def statements_from_data_source(project: Project, stack: str, conf: dict[str, Any], depth: int = 0) -> list[Statement]:
    """Statements of an ``aws_iam_policy_document`` data source, with its source/override documents."""
    base: list[Statement] = []
    for source in str_list(conf.get("source_policy_documents")) + str_list(conf.get("source_json")):
        base = _merge_by_sid(base, parse_policy(project, stack, source, depth + 1))
    own = [statement_from_data(s) for s in dict_list(conf.get("statement"))]
    merged = _merge_by_sid(base, own)
    for override in str_list(conf.get("override_policy_documents")) + str_list(conf.get("override_json")):
        merged = _merge_by_sid(merged, parse_policy(project, stack, override, depth + 1))
    return merged


def parse_policy(project: Project, stack: str, value: Any, depth: int = 0) -> list[Statement]:
    """The statements of a policy attribute value in ``stack`` (see the module docstring for forms).

    Raises ``PolicyError`` with the reason when the value cannot be read.
    """
    if depth > 8:
        raise PolicyError("policy documents nest too deeply")
    value = scalar(value)
    if value is None or value == "":
        raise PolicyError("policy is empty")
    if isinstance(value, list):  # several JSON strings: merge them
        return [st for v in value for st in parse_policy(project, stack, v, depth + 1)]
    if isinstance(value, dict):
        if "Statement" in value:
            return statements_from_document(value)
        if "statement" in value:  # a policy-document-shaped object
            return [statement_from_data(s) for s in dict_list(value["statement"])]
        raise PolicyError("policy object has no Statement")
    text = str(value)
    ref = project.resolve(stack, text)
    if ref is not None:
        return _statements_from_ref(project, ref, depth)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "a Terraform expression" if "${" in text else "not JSON"
        raise PolicyError(f"policy is {what} and cannot be analysed ({exc.msg}); write it as JSON "
                          f"or an aws_iam_policy_document") from None
    if not isinstance(doc, dict):
        raise PolicyError("policy JSON is not an object")
    return statements_from_document(doc)


def _statements_from_ref(project: Project, ref: Ref, depth: int) -> list[Statement]:
    if ref.kind == "data" and ref.type == POLICY_DOC_TYPE and ref.attr in ("json", "minified_json"):
        conf = project.conf(ref)
        if conf is None:
            raise PolicyError(f"{ref.address} is not in the synthesized stacks")
        return statements_from_data_source(project, ref.stack, conf, depth + 1)
    if ref.kind == "resource" and ref.type == "aws_iam_policy" and ref.attr == "policy":
        conf = project.conf(ref)
        if conf is None:
            raise PolicyError(f"{ref.address} is not in the synthesized stacks")
        return parse_policy(project, ref.stack, conf.get("policy"), depth + 1)
    raise PolicyError(f"policy refers to {ref.address}.{ref.attr}, which is not a policy document")


# --------------------------------------------------------------------------------------------
# Document facts: Version and size
# --------------------------------------------------------------------------------------------

IAM_VERSION = "2012-10-17"
_TOKEN = re.compile(r"\$\{[^}]*\}")
# Upper bounds of what a Terraform reference becomes at apply time (characters): partitions are at most
# "aws-us-gov", account ids 12 digits, region names 15; any other value (an ARN, a name) is taken as 128.
_TOKEN_LENGTHS = ((".partition}", 10), (".account_id}", 12), (".region}", 15), (".dns_suffix}", 20),
                  ("data.aws_region.", 15), ("data.aws_partition.", 10), ("data.aws_caller_identity.", 12))


def estimated_chars(text: str) -> int:
    """IAM's size of a JSON policy text (white space outside strings not counted), with each ``${...}``
    reference replaced by the upper bound of its value (see ``_TOKEN_LENGTHS``; 128 for others)."""
    try:
        compact = json.dumps(json.loads(text), separators=(",", ":"))
    except ValueError:
        compact = "".join(text.split())

    def length(token: str) -> int:
        return next((n for part, n in _TOKEN_LENGTHS if token.endswith(part) or token.startswith("${" + part)), 128)

    return len(_TOKEN.sub("", compact)) + sum(length(t) for t in _TOKEN.findall(compact))


def statement_json(st: Statement) -> dict[str, Any]:
    """A statement back in IAM JSON (what Terraform renders an ``aws_iam_policy_document`` statement into)."""
    out: dict[str, Any] = {"Sid": st.sid} if st.sid else {}
    out["Effect"] = st.effect
    for key, value in (("Action", st.actions), ("NotAction", st.not_actions), ("Resource", st.resources),
                       ("NotResource", st.not_resources)):
        if value:
            out[key] = value[0] if len(value) == 1 else value
    if st.principals:
        out["Principal"] = {k: v[0] if len(v) == 1 else v for k, v in st.principals.items()}
    if st.conditions:
        blocks: dict[str, dict[str, Any]] = {}
        for c in st.conditions:
            blocks.setdefault(c.operator, {})[c.key] = c.values[0] if len(c.values) == 1 else list(c.values)
        out["Condition"] = blocks
    return out


def document_facts(project: Project, stack: str, value: Any, depth: int = 0) -> tuple[str | None, int | None]:
    """``(Version, estimated size in characters)`` of a policy value; the size is ``None`` when it cannot be
    known offline (``aws_iam_policy_document`` data sources render at plan time; Terraform writes their
    ``version``, default 2012-10-17)."""
    value = scalar(value)
    if depth > 8 or value is None:
        return None, None
    if isinstance(value, dict):
        return (str(value["Version"]) if "Version" in value else None), estimated_chars(json.dumps(value))
    text = str(value)
    ref = project.resolve(stack, text)
    if ref is not None:
        conf = project.conf(ref)
        if conf is None:
            return None, None
        if ref.kind == "data" and ref.type == POLICY_DOC_TYPE:
            version = str(scalar(conf.get("version")) or IAM_VERSION)
            try:
                statements = statements_from_data_source(project, ref.stack, conf, depth + 1)
            except PolicyError:
                return version, None
            rendered = {"Version": version, "Statement": [statement_json(st) for st in statements]}
            return version, estimated_chars(json.dumps(rendered))
        if ref.kind == "resource" and ref.type == "aws_iam_policy":
            return document_facts(project, ref.stack, conf.get("policy"), depth + 1)
        return None, None
    try:
        doc = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    return (str(doc["Version"]) if "Version" in doc else None), estimated_chars(text)
