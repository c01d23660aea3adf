"""Helpers shared by the chart tests: the render script loaded as a module, document lookups.

A uniquely named module (not conftest) so that ``from chart_helpers import ...`` cannot pick up
another folder's conftest.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "nodewright"


def _load_render_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_chart", ROOT / "scripts" / "render_chart.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("render_chart", module)
    spec.loader.exec_module(module)
    return module


render_chart = _load_render_module()

Doc = dict[str, Any]


def find(docs: list[Doc], kind: str, name: str | None = None) -> list[Doc]:
    """Documents of ``kind`` (and ``name`` when given)."""
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[Doc], kind: str, name: str | None = None) -> Doc:
    """The single document of ``kind`` (and ``name``); fails the test if there is not exactly one."""
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
