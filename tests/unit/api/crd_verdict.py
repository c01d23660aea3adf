"""What the API server would say about a document, offline: our generated CRD's defaults, OpenAPI schema and
CEL rules (``x-kubernetes-validations``).

The order is the apiserver's for a create: apply the schema's defaults, validate the structural schema
(``jsonschema`` with closed objects, as ``kubectl --validate=strict`` and pruning make unknown fields an
error), then evaluate every CEL rule whose field is present, with ``self`` bound to that field's value.
Transition rules (those that read ``oldSelf``) only run on updates and are skipped here.

CEL is evaluated by ``common-expression-language`` (the ``cel`` module: Python bindings of the Rust
``cel`` interpreter). It covers the standard library the rules use (``has``, ``all``, ``exists``,
``filter``, ``size``, ``matches``, ``startsWith``, ``endsWith``, ``in``, ``int``), but not two Kubernetes
CEL extension functions our rules call; they are supplied here, with the Kubernetes semantics:

* ``<string>.split(<string>)`` (cel-go ``ext.Strings``): every piece between separators;
* ``<string>.find(<regex>)`` (Kubernetes' regex library): the first match, ``""`` when none;
* ``<string>.lowerAscii()`` (cel-go ``ext.Strings``): ASCII letters lowered.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from functools import cache
from typing import Any

import cel
import jsonschema

from nodewright.api import crds


def _split(value: str, separator: str) -> list[str]:
    return value.split(separator)


def _find(value: str, pattern: str) -> str:
    match = re.search(pattern, value)
    return match.group(0) if match else ""


def _lower_ascii(value: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in value)


@cache
def _schema(kind: str) -> dict[str, Any]:
    crd = next(c for c in crds.generate_crds() if c["spec"]["names"]["kind"] == kind)
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _closed(schema: Any) -> Any:
    """The schema with ``additionalProperties: false`` wherever properties are listed (no unknown fields)."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: ({n: _closed(v) for n, v in val.items()} if k == "properties" else _closed(val))
           for k, val in schema.items() if k != "x-kubernetes-validations"}
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """``value`` with the schema's ``default`` filled in where a property is absent (recursively)."""
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key in value:
            value[key] = apply_defaults(schema["additionalProperties"], value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


def _rules(schema: dict[str, Any], value: Any, path: str) -> Iterator[tuple[str, str, str, Any]]:
    """(path, rule, message, self) for every CEL rule that applies to ``value``."""
    for rule in schema.get("x-kubernetes-validations") or []:
        if "oldSelf" not in rule["rule"]:
            yield path, rule["rule"], rule.get("message", rule["rule"]), value
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name in value:
                yield from _rules(sub, value[name], f"{path}.{name}")
    elif isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key, item in value.items():
            yield from _rules(schema["additionalProperties"], item, f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from _rules(schema["items"], item, f"{path}[{i}]")


def evaluate(rule: str, self_value: Any) -> bool:
    """One CEL rule with ``self`` bound; a rule that errors counts as failed (the apiserver rejects then)."""
    context = cel.Context()
    context.add_function("split", _split)
    context.add_function("find", _find)
    context.add_function("lowerAscii", _lower_ascii)
    context.add_variable("self", self_value)
    try:
        return cel.evaluate(rule, context) is True
    except Exception as err:  # a rule that cannot evaluate is a rejection, and a bug in the rule
        raise AssertionError(f"CEL rule failed to evaluate: {rule!r} on {self_value!r}: {err}") from err


def crd_errors(doc: dict[str, Any]) -> list[str]:
    """The API server's reasons to reject ``doc`` (a NodePool, NodeClaim or EC2NodeClass); [] if accepted."""
    schema = _schema(doc["kind"])
    defaulted = apply_defaults(schema, copy.deepcopy(doc))
    errors = [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
              for e in jsonschema.Draft7Validator(_closed(schema)).iter_errors(defaulted)]
    if errors:
        return errors  # the apiserver runs CEL only on a structurally valid object
    return [f"{path}: {message}" for path, rule, message, value in _rules(schema, defaulted, "")
            if not evaluate(rule, value)]
