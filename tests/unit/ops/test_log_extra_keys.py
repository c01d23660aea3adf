"""No log call passes a LogRecord attribute in ``extra``: ``logging`` raises ``KeyError("Attempt to overwrite
'name' in LogRecord")`` for it, but only once the record is actually built, i.e. only at a log level that
emits it (a refused Kubernetes write logged at INFO crashed the write path this way)."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import nodewright

RESERVED = set(logging.LogRecord("n", 0, "p", 0, "m", (), None).__dict__) | {"message", "asctime"}


def test_no_extra_key_overwrites_a_logrecord_attribute() -> None:
    root = Path(nodewright.__file__).parent
    clashes = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            for kw in node.keywords:
                if kw.arg == "extra" and isinstance(kw.value, ast.Dict):
                    clashes += [f"{path.relative_to(root)}:{node.lineno} {key.value!r}" for key in kw.value.keys
                                if isinstance(key, ast.Constant) and key.value in RESERVED]
    assert clashes == []
