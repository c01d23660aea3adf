"""A small TOML writer for Bottlerocket userData (the standard library only reads TOML).

Covers what Bottlerocket settings use: nested tables, strings, integers, floats, booleans and arrays of
those. Keys keep their insertion order; a table's plain values come before its sub-tables, as TOML needs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _value(value: Any, path: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        # JSON string escapes are valid TOML basic-string escapes.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item, path) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v, path)}" for k, v in value.items()) + "}"
    raise TypeError(f"{path}: TOML cannot hold a {type(value).__name__}")


def dumps(document: Mapping[str, Any]) -> str:
    """Serialize ``document`` (nested mappings) as TOML text ending in a newline.

    Raises:
        TypeError: a value is not a TOML type (None, objects).
    """
    blocks: list[str] = []
    _emit_table(document, [], blocks)
    # Every block ends in a newline; joining with one more puts a blank line between tables.
    return "\n".join(blocks)


def _emit_table(table: Mapping[str, Any], path: list[str], blocks: list[str]) -> None:
    lines = [f"{_key(k)} = {_value(v, '.'.join([*path, k]))}" for k, v in table.items()
             if not isinstance(v, Mapping)]
    subtables = [(k, v) for k, v in table.items() if isinstance(v, Mapping)]
    if lines:
        header = [f"[{'.'.join(_key(p) for p in path)}]"] if path else []
        blocks.append("\n".join(header + lines) + "\n")
    elif path and not subtables:
        blocks.append(f"[{'.'.join(_key(p) for p in path)}]\n")
    for key, sub in subtables:
        _emit_table(sub, [*path, key], blocks)
