"""Every repository path that README.md and docs/*.md name exists (issue #26 item 13).

A path is a backticked token or a Markdown link target that starts with a top-level directory of this
repository (``nodewright/``, ``docs/``, ``tests/``, ...), a subpackage of ``nodewright`` written short
(``sim/report.py``, as docs/architecture.md does under its package headings), a top-level file
(``main.py``, ``cdktf.json``, ...), or a relative ``*.md`` link. Globs must match something; templates
(``<stack>``), anchors (``#section``), Karpenter's Go sources (``scheduling/requirements.go``) and generated
outputs (``out/``, ``cdktf.out/``) are not checked. A module may be named without ``.py`` (``cloud/matching``)
or with a function (``sim/decision.decide``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP_DIRS = ("nodewright/", "docs/", "tests/", "scripts/", "examples/", "helm/", "policies/", "stacks/",
            "requirements/", ".github/")  # not .tools/: make setup installs it, a fresh clone has none
SUBPACKAGES = ("api/", "cloud/", "scheduling/", "disruption/", "state/", "kube/", "controllers/", "pricing/",
               "sim/", "whatif/", "viewer/")
TOP_FILES = ("main.py", "cdktf.json", "Makefile", "Dockerfile", "pyproject.toml")
_TOKEN = re.compile(r"`([^`\s]+)`|\]\(([^)\s]+)\)")


def named_paths(text: str) -> list[str]:
    """The repository paths ``text`` (Markdown) names, as written (anchors, ``:line`` and ``::test`` suffixes
    dropped)."""
    found = []
    for match in _TOKEN.finditer(text):
        token = (match.group(1) or match.group(2) or "").split("#")[0].rstrip(".,;:")
        token = re.sub(r":\d+$", "", token).split("::")[0]  # a pytest node id names its file
        if not token or "<" in token or "{" in token or "://" in token or token.startswith(("out/", "cdktf.out/")) \
                or token.endswith(".go"):
            continue
        link = match.group(2) is not None
        if token.startswith(TOP_DIRS + SUBPACKAGES) or token in TOP_FILES or (link and token.endswith(".md")):
            found.append(token)
    return found


def exists(doc: Path, token: str) -> bool:
    """Whether ``token`` names something in the repository (relative to the root, the doc's folder or, for a
    short subpackage path, ``nodewright/``); a glob must match at least one file."""
    bases = [ROOT, doc.parent]
    if token.startswith(SUBPACKAGES):
        bases.append(ROOT / "nodewright")
    module = re.sub(r"\.\w+$", "", token) if "." in token.rsplit("/", 1)[-1] else token
    for base in bases:
        if any(ch in token for ch in "*?["):
            if any(base.glob(token)):
                return True
        elif (base / token).exists() or (base / f"{token}.py").exists() or (base / f"{module}.py").exists():
            return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_named_path_exists(doc: Path) -> None:
    missing = sorted({t for t in named_paths(doc.read_text(encoding="utf-8")) if not exists(doc, t)})
    assert missing == [], f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_check_sees_a_stale_path(tmp_path: Path) -> None:
    text = "See `nodewright/scheduling/templates.py`, [the map](architecture.md) and `sim/report.py`."
    assert named_paths(text) == ["nodewright/scheduling/templates.py", "architecture.md", "sim/report.py"]
    doc = ROOT / "docs" / "x.md"
    assert [t for t in named_paths(text) if not exists(doc, t)] == ["nodewright/scheduling/templates.py"]
