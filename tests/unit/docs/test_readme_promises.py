"""What README.md tells a first-day user matches the repository (issue #26 items 10-12)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_deploy_command_is_the_pinned_cdktn_cli_of_the_cdktn_library() -> None:
    # `npx cdktn deploy` cannot work: the CLI is the npm package cdktn-cli (Node.js >= 22.19).
    assert "npx cdktn deploy" not in README
    pinned = re.search(r"npx --yes --package cdktn-cli@(\d+)\.(\d+)\.(\d+) cdktn deploy '\*'", README)
    assert pinned, "README names no pinned cdktn-cli deploy command"
    library = re.search(r'"cdktn>=(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert library and pinned.group(1, 2) == library.group(1, 2)  # the CLI of the library's line
    assert "Node.js >= 22.19" in README


def test_helm_is_the_one_setup_installs() -> None:
    commands = [line for line in README.splitlines() if "helm template" in line and "|" in line]
    assert commands and all(line.lstrip().startswith(".tools/helm template") for line in commands)
    assert re.search(r"^HELM\s*[:?]?=\s*\$\(TOOLS\)/helm|\.tools/helm", (ROOT / "Makefile").read_text(), re.M)


def test_the_e2e_section_names_what_the_suites_read_and_do() -> None:
    section = README[README.index("**End-to-end tests"):README.index("## Why not the cdktf package")]
    code = "\n".join(p.read_text() for p in sorted((ROOT / "tests" / "e2e").glob("*.py")))
    for variable in sorted(set(re.findall(r"NODEWRIGHT_E2E_[A-Z_]+", code)) | {"KUBEBUILDER_ASSETS"}):
        assert variable in section, f"README's e2e section does not name {variable}"
    assert "at least one Node" not in section  # the old adapters-only suite's requirement
    assert "replaces the nodewright CRDs cluster-wide" in section and "moto" in section


def test_the_target_utilization_sentence_matches_its_table() -> None:
    rows = re.findall(r"^\| priority-pools \(3 h\) \| ([\d.]+) \| (\d+) \|", README, re.M)
    assert [r[0] for r in rows] == ["1.0", "0.75"]
    removals = [int(r[1]) for r in rows]
    sentence = re.search(r"node removals ([^.]*?) \((\d+) vs (\d+)", README)
    assert sentence and [int(sentence.group(2)), int(sentence.group(3))] == removals
    assert "the same" not in sentence.group(1) or removals[0] == removals[1]


def test_the_ci_recipe_runs_as_written() -> None:
    """The README's `helm template ... | nodewright simulate ... --strict --fail-on-unschedulable` names files the
    repository ships and exits 0 (a new user found `./chart` and `nodepools.yaml`, which it did not ship)."""
    import os
    import shutil
    import subprocess

    import pytest

    helm = ROOT / ".tools" / "helm"
    if not helm.exists():
        pytest.skip("helm is not installed (make setup)")
    block = README[README.index("## Using the CLI"):]
    recipe = re.search(r"^(\.tools/helm template .*?--fail-on-unschedulable)", block, re.M | re.S)
    assert recipe, "README has no CI recipe"
    command = re.sub(r"\s*#[^\n]*", "", recipe.group(1)).replace("\\\n", " ")
    for path in re.findall(r"\bexamples/\S+", command):
        assert (ROOT / path).exists(), f"README's CI recipe names {path}, which is not in the repository"
    nodewright = shutil.which("nodewright") or str(ROOT / ".venv" / "bin" / "nodewright")
    command = command.replace(".venv/bin/nodewright", nodewright)
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 unschedulable" in done.stdout
