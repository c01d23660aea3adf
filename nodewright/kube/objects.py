"""Helpers over Kubernetes objects as plain JSON dicts: metadata, timestamps, merge patches, selectors.

Objects are treated as immutable snapshots: every helper that "changes" an object returns a new dict and
leaves its argument untouched, so a reader holding an old snapshot never sees it change underneath.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from typing import Any

from nodewright.selectors import LabelSelector

Obj = dict[str, Any]


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj["metadata"]`` or an empty dict."""
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


def name_of(obj: Mapping[str, Any]) -> str:
    """``metadata.name`` (empty when unset)."""
    return str(meta(obj).get("name") or "")


def namespace_of(obj: Mapping[str, Any]) -> str | None:
    """``metadata.namespace`` or None for cluster-scoped objects."""
    ns = meta(obj).get("namespace")
    return str(ns) if ns else None


def key_of(obj: Mapping[str, Any]) -> str:
    """``"namespace/name"`` for namespaced objects, ``"name"`` otherwise (the informer cache key)."""
    ns = namespace_of(obj)
    return f"{ns}/{name_of(obj)}" if ns else name_of(obj)


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.labels`` or an empty dict."""
    return dict(meta(obj).get("labels") or {})


def in_scope(obj: Mapping[str, Any], namespace: str | None, label_selector: Mapping[str, str] | None) -> bool:
    """Whether ``obj`` is in ``namespace`` (None: any) and carries every ``label_selector`` pair (equality)."""
    if namespace is not None and namespace_of(obj) != namespace:
        return False
    if label_selector:
        labels = labels_of(obj)
        return all(labels.get(k) == v for k, v in label_selector.items())
    return True


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """``metadata.annotations`` or an empty dict."""
    return dict(meta(obj).get("annotations") or {})


def finalizers_of(obj: Mapping[str, Any]) -> list[str]:
    """``metadata.finalizers`` or an empty list."""
    return list(meta(obj).get("finalizers") or [])


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """True once ``metadata.deletionTimestamp`` is set."""
    return bool(meta(obj).get("deletionTimestamp"))


def resource_version_int(obj: Mapping[str, Any]) -> int | None:
    """``metadata.resourceVersion`` as an int, or None when absent or not numeric.

    resourceVersions are opaque by contract, but etcd-backed servers hand out increasing integers; the
    informer uses this only to avoid replacing a newer cached object with an older watch event.
    """
    raw = meta(obj).get("resourceVersion")
    try:
        return int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


def format_time(seconds: float) -> str:
    """RFC 3339 UTC timestamp (``2026-07-20T12:00:00Z``) for epoch ``seconds``, as the API serves them."""
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(seconds: float) -> str:
    """RFC 3339 timestamp with microseconds (Kubernetes ``MicroTime``, used by Leases)."""
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> float | None:
    """Epoch seconds for an RFC 3339 timestamp, None for None/empty/unparseable input."""
    if not value:
        return None
    text = value.replace("Z", "+00:00")
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch and return the result; ``target`` is not modified.

    ``None`` values in ``patch`` delete keys; dicts merge recursively; anything else (lists included)
    replaces. This is what ``Content-Type: application/merge-patch+json`` does on the API server.
    """
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def condition(obj: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    """The ``status.conditions`` entry of ``type_`` or None."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def condition_true(obj: Mapping[str, Any], type_: str) -> bool:
    """True when the ``type_`` condition exists with ``status: "True"``."""
    cond = condition(obj, type_)
    return bool(cond and cond.get("status") == "True")


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: bool,
    now: float,
    reason: str = "",
    message: str = "",
) -> list[dict[str, Any]]:
    """A new conditions list with ``type_`` set; ``lastTransitionTime`` changes only when status flips."""
    wanted = "True" if status else "False"
    out: list[dict[str, Any]] = []
    found = False
    for cond in conditions:
        if cond.get("type") != type_:
            out.append(cond)
            continue
        found = True
        changed = cond.get("status") != wanted
        out.append(
            {
                "type": type_,
                "status": wanted,
                "reason": reason or wanted,
                "message": message,
                "lastTransitionTime": format_time(now) if changed else cond.get("lastTransitionTime"),
            }
        )
    if not found:
        out.append(
            {
                "type": type_,
                "status": wanted,
                "reason": reason or wanted,
                "message": message,
                "lastTransitionTime": format_time(now),
            }
        )
    return out


# --- selectors ---------------------------------------------------------------------------------


def parse_label_selector_string(text: str) -> list[tuple[str, str, list[str]]]:
    """Parse a URL ``labelSelector`` (``a=b,c!=d,e in (x,y),!f,g``) into (key, op, values) triples.

    ``op`` is one of ``=``, ``!=``, ``in``, ``notin``, ``exists``, ``!``.

    Raises:
        ValueError: on a malformed selector.
    """
    terms: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    out: list[tuple[str, str, list[str]]] = []
    for raw in (t.strip() for t in terms):
        if not raw:
            continue
        lowered = raw.replace("  ", " ")
        for op in (" notin ", " in "):
            if op in lowered:
                key, rest = lowered.split(op, 1)
                rest = rest.strip()
                if not (rest.startswith("(") and rest.endswith(")")):
                    raise ValueError(f"malformed set in label selector term {raw!r}")
                values = [v.strip() for v in rest[1:-1].split(",") if v.strip()]
                out.append((key.strip(), op.strip(), values))
                break
        else:
            if "!=" in raw:
                key, value = raw.split("!=", 1)
                out.append((key.strip(), "!=", [value.strip()]))
            elif "==" in raw or "=" in raw:
                key, value = raw.split("==", 1) if "==" in raw else raw.split("=", 1)
                out.append((key.strip(), "=", [value.strip()]))
            elif raw.startswith("!"):
                out.append((raw[1:].strip(), "!", []))
            else:
                out.append((raw, "exists", []))
    return out


def match_label_selector_string(text: str | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a URL ``labelSelector`` string (empty or None matches everything), evaluated by
    the one :class:`~nodewright.selectors.LabelSelector` (``a=b`` is ``In [b]``, ``a!=b`` ``NotIn [b]``, ``a``
    ``Exists``, ``!a`` ``DoesNotExist``)."""
    if not text:
        return True
    operators = {"=": "In", "!=": "NotIn", "in": "In", "notin": "NotIn", "exists": "Exists", "!": "DoesNotExist"}
    expressions = tuple((key, operators[op], tuple(sorted(values)))
                        for key, op, values in parse_label_selector_string(text))
    return LabelSelector(match_expressions=expressions).matches(labels)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string value at a dotted field path (``spec.nodeName``), ``""`` when absent."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return ""
        value = value.get(part)
    return "" if value is None else str(value)


def match_field_selector_string(text: str | None, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` matches a URL ``fieldSelector`` (``spec.nodeName=x,status.phase!=Failed``)."""
    if not text:
        return True
    for term in (t.strip() for t in text.split(",")):
        if not term:
            continue
        if "!=" in term:
            path, value = term.split("!=", 1)
            if field_value(obj, path.strip()) == value.strip():
                return False
        else:
            path, value = term.split("==", 1) if "==" in term else term.split("=", 1)
            if field_value(obj, path.strip()) != value.strip():
                return False
    return True

