"""Fixtures of the policy tests: the hand-written synthesized project, and the real outputs.

The rule modules live in ``policies/`` (checkov loads them from there); they are imported by bare
name, as checkov does, so ``policies/`` goes on ``sys.path`` here.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(ROOT / "policies"))

import nw_tfdoc  # noqa: E402

_FIXTURE_DOCS = {p.parent.name: json.loads(p.read_text()) for p in sorted((FIXTURES / "stacks").glob("*/cdk.tf.json"))}


def project_of_docs(docs: dict[str, dict[str, Any]]) -> nw_tfdoc.Project:
    """An in-memory project; stack ``name`` lives at the virtual path ``/fixture/<name>/cdk.tf.json``."""
    return nw_tfdoc.Project(stacks={
        name: nw_tfdoc.Stack(name=name, path=f"/fixture/{name}/cdk.tf.json", doc=doc) for name, doc in docs.items()
    })


def write_docs(docs: dict[str, dict[str, Any]], stacks_dir: Path) -> Path:
    """Write ``docs`` as ``<stacks_dir>/<stack>/cdk.tf.json`` (the cdktn layout); return ``stacks_dir``."""
    for name, doc in docs.items():
        (stacks_dir / name).mkdir(parents=True, exist_ok=True)
        (stacks_dir / name / "cdk.tf.json").write_text(json.dumps(doc, indent=2))
    return stacks_dir


@pytest.fixture
def docs() -> dict[str, dict[str, Any]]:
    """A fresh deep copy of the hand-written compliant project (tests/policy/fixtures/stacks)."""
    return copy.deepcopy(_FIXTURE_DOCS)


@pytest.fixture(scope="session")
def real_outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The real stacks synthesized (``python main.py``) and the real chart rendered
    (``scripts/render_chart.py``), side by side, into a temporary directory, once per session.

    Returns ``{"stacks": .../cdktf.out/stacks, "chart": .../chart}``. Fails (never skips) when either
    step fails: the gate cannot pass without them.
    """
    base = tmp_path_factory.mktemp("real")
    env = {**os.environ, "CDKTF_OUTDIR": str(base / "cdktf.out"), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    synth = subprocess.Popen([sys.executable, str(ROOT / "main.py")], cwd=ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    render = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_chart.py"), "--out", str(base / "chart")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    out, err = synth.communicate(timeout=600)
    if synth.returncode != 0:
        pytest.fail(f"python main.py failed:\n{err[-2000:]}", pytrace=False)
    if render.returncode != 0:
        pytest.fail(f"render_chart.py failed:\n{render.stderr[-2000:]}", pytrace=False)
    return {"stacks": base / "cdktf.out" / "stacks", "chart": base / "chart"}
