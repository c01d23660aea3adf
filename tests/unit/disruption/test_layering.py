"""``nodewright.disruption`` decides over models only: it imports nothing that reads Kubernetes objects.

Its view (:mod:`nodewright.state.disruption_view`, :mod:`nodewright.state.incremental_view`) is built in
``nodewright.state`` from the cluster's models, so the package stays pure: no ``nodewright.kube`` (objects,
clients) and no ``nodewright.state`` (which depends on it) in any import, at any depth of the module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nodewright.disruption

PACKAGE = Path(nodewright.disruption.__file__).parent
FORBIDDEN = ("nodewright.kube", "nodewright.state", "nodewright.controllers")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_disruption_imports_nothing_from_kube_or_state() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 10  # the package is really there
    offending = {f"{p.name}: {name}" for p in modules for name in _imports(p)
                 if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)}
    assert offending == set()


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from nodewright.kube.objects import name_of\n    return name_of\n")
    assert _imports(sample) == ["nodewright.kube.objects"]
