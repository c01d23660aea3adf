"""The scheduling package keeps Karpenter's layout in pieces one can read: no module over 600 lines, no class
over 300 (issue 13). Parsed with ``ast``, so a class is measured from its ``class`` line to its last line."""

from __future__ import annotations

import ast
from pathlib import Path

import nodewright.scheduling

PACKAGE = Path(nodewright.scheduling.__file__).parent
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 300


def _sizes() -> tuple[dict[str, int], dict[str, int]]:
    modules: dict[str, int] = {}
    classes: dict[str, int] = {}
    for path in sorted(PACKAGE.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        modules[path.name] = len(source.splitlines())
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, ast.ClassDef):
                assert node.end_lineno is not None
                classes[f"{path.name}:{node.name}"] = node.end_lineno - node.lineno + 1
    return modules, classes


def test_no_scheduling_module_over_600_lines() -> None:
    modules, _ = _sizes()
    assert "scheduler.py" in modules and "nodeclaim.py" in modules and "existingnode.py" in modules
    assert {name: n for name, n in modules.items() if n > MAX_MODULE_LINES} == {}


def test_no_scheduling_class_over_300_lines() -> None:
    _, classes = _sizes()
    assert "scheduler.py:Scheduler" in classes and "nodeclaim.py:NodeClaim" in classes
    assert {name: n for name, n in classes.items() if n > MAX_CLASS_LINES} == {}


def test_no_state_stashed_with_setattr() -> None:
    """Run state lives in declared fields, not in attributes set on other objects (``setattr``/``delattr``,
    or ``# type: ignore[attr-defined]`` assignments)."""
    offenders = []
    for path in sorted(PACKAGE.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
                offenders.append(f"{path.name}:{node.lineno}")
        offenders += [f"{path.name}:{i}" for i, line in enumerate(source.splitlines(), 1) if "attr-defined" in line]
    assert offenders == []
