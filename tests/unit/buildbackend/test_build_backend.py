"""``pip install -e .`` (``make setup``) shows no setuptools warning banner (issue #26 item 14).

pip runs the PEP 660 hook ``build_editable`` in a subprocess, records the warnings the backend emits and prints
each as a ``BuildBackendWarning`` banner. The cause was the undeclared flat layout: setuptools then installs a
meta path finder and warns "Editable installation. Please be careful with folders in your working directory
...". Here the same hook runs on a copy of ``pyproject.toml`` (with a one-module package) and every warning
it emits is collected.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_HOOK = """
import json, sys, warnings
import setuptools.build_meta as backend
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    wheel = backend.build_editable(sys.argv[1])
print(json.dumps({"wheel": wheel, "warnings": [f"{w.category.__name__}: {str(w.message).splitlines()[0]}"
                                               for w in caught]}))
"""


def test_editable_build_emits_no_warning(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "nodewright" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    shutil.copy(ROOT / "README.md", project / "README.md")
    (project / "nodewright" / "__init__.py").write_text("")
    (project / "nodewright" / "data" / "x.csv").write_text("a\n")
    out = tmp_path / "dist"
    out.mkdir()
    done = subprocess.run([sys.executable, "-c", _HOOK, str(out)], cwd=project, capture_output=True, text=True,
                          timeout=300, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["wheel"] == "nodewright-0.1.0-0.editable-py3-none-any.whl"
    assert result["warnings"] == []
