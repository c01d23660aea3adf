"""``make pipeline``'s script on a fixture GitOps repository with two commits: the exact pull-request table."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.unit.whatif.cluster import nodeclass, nodepool
from tests.unit.whatif.test_diff import manifest

REPO = Path(__file__).parents[3]
EXPECTED = """\
### nodewright diff

NodePools/EC2NodeClasses `nodepools@HEAD~1` -> `nodepools@HEAD`, evaluated on snapshot `snapshot.yaml`.

| | base | head | change |
|---|---|---|---|
| $/h (list) | 1.1700 | 0.4590 | -0.7110 (-60.77%) |
| nodes | 5 | 2 | -3 |
| pods pending | 0 | 0 | +0 |
| instance types | 1 x c6a.2xlarge, 1 x m5.2xlarge, 1 x m5.large, 2 x m5.xlarge | 1 x c6a.2xlarge, 1 x c6a.xlarge |  |
| drift: nodes replaced |  | 4 | 4 RequirementsDrifted; 2 wait for a PDB or do-not-disrupt pod |
| drift: pods evicted |  | 4 |  |
| drift: pace |  | 1 round(s) | general: 4 at most 4 at a time (1 round(s)) |

<details><summary>nodes replaced by drift</summary>

| node | nodepool | reason | pods evicted | waits for |
|---|---|---|---|---|
| ip-10-0-1-1 | general | RequirementsDrifted | 2 | - |
| ip-10-0-1-2 | general | RequirementsDrifted | 0 | - |
| ip-10-0-1-3 | general | RequirementsDrifted | 1 | pdb default/db prevents pod evictions |
| ip-10-0-1-4 | general | RequirementsDrifted | 1 | pod default/batch-0 has karpenter.sh/do-not-disrupt |

</details>
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
                   check=True, capture_output=True)


def test_pipeline_on_a_two_commit_repository(tmp_path: Path) -> None:
    repo = tmp_path / "gitops"
    (repo / "nodepools").mkdir(parents=True)
    shutil.copy(REPO / "examples" / "whatif" / "snapshot.yaml", repo / "snapshot.yaml")
    pools = repo / "nodepools" / "general.yaml"
    pools.write_text(yaml.safe_dump_all([manifest(nodepool()), manifest(nodeclass())]))
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "general pool")
    pools.write_text(yaml.safe_dump_all([manifest(nodepool(categories=("c",))), manifest(nodeclass())]))
    git(repo, "commit", "-qam", "compute-optimized only")
    out = tmp_path / "out" / "diff.md"
    # `make pipeline` itself, as the workflow runs it (-o: never (re)build the virtualenv here; -s: no echo).
    done = subprocess.run(["make", "-s", "-o", ".venv/.stamp", "pipeline", f"PY={sys.executable}",
                           f"GITOPS_REPO={repo}", "MANIFESTS=nodepools", f"SNAPSHOT={repo / 'snapshot.yaml'}",
                           f"PIPELINE_OUT={out}", "MAX_EVICTIONS=10"], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout == EXPECTED
    assert out.read_text() == EXPECTED
    gated = subprocess.run([sys.executable, str(REPO / "scripts" / "pipeline.py"), "--repo", str(repo),
                            "--manifests", "nodepools", "--snapshot", str(repo / "snapshot.yaml"), "--out", str(out),
                            "--max-evictions", "3"], capture_output=True, text=True, cwd=REPO)
    assert gated.returncode == 1
    assert gated.stderr.splitlines() == ["gate: 4 pod(s) evicted, more than --max-evictions 3"]


def test_the_workflow_runs_make_pipeline_and_posts_the_table() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "gitops.yaml").read_text())
    steps = workflow["jobs"]["diff"]["steps"]
    assert any("make pipeline" in (s.get("run") or "") for s in steps)
    assert any("gh pr comment" in (s.get("run") or "") for s in steps)


def test_a_revision_without_the_manifests_is_one_line(tmp_path: Path) -> None:
    repo = tmp_path / "gitops"
    repo.mkdir()
    (repo / "README").write_text("x")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "empty")
    git(repo, "commit", "-q", "--allow-empty", "-m", "again")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "pipeline.py"), "--repo", str(repo),
                           "--manifests", "nodepools", "--snapshot", "s.yaml", "--out", str(tmp_path / "o.md")],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["error: nodepools: no files at the base revision 'HEAD~1'"]
    assert not (tmp_path / "o.md").exists()
