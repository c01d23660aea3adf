"""`make pipeline`: the GitOps pull-request step, locally -- `nodewright diff` between two git revisions.

For each of ``--base`` and ``--head`` (git revisions of ``--repo``), the files under ``--manifests`` at that
revision are written to a temporary directory (``git ls-tree`` + ``git show``: nothing is checked out, the work tree
is untouched), then ``nodewright diff --base DIR --head DIR --snapshot FILE --output markdown`` runs with the gates
given. The Markdown is printed and written to ``--out`` (what `.github/workflows/gitops.yaml` posts on the pull
request). Exit status: ``nodewright diff``'s (0 pass, 1 a gate exceeded, 2 invalid input).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True).stdout


def export(repo: str, revision: str, path: str, target: Path) -> int:
    """Write the files under ``path`` at ``revision`` into ``target``; how many."""
    names = [n for n in git(repo, "ls-tree", "-r", "--name-only", revision, "--", path).decode().splitlines() if n]
    for name in names:
        out = target / Path(name).relative_to(path) if path not in ("", ".") else target / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(git(repo, "show", f"{revision}:{name}"))
    return len(names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=".")
    parser.add_argument("--base", default="HEAD~1")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--manifests", default="examples/whatif/nodepools",
                        help="directory of NodePool/EC2NodeClass manifests in the repository")
    parser.add_argument("--snapshot", default="examples/whatif/snapshot.yaml")
    parser.add_argument("--out", default="out/pipeline/diff.md")
    parser.add_argument("--max-cost-increase", default=None)
    parser.add_argument("--max-evictions", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nodewright-pipeline-") as tmp:
        dirs = {}
        for label, revision in (("base", args.base), ("head", args.head)):
            dirs[label] = Path(tmp) / label
            dirs[label].mkdir()
            try:
                count = export(args.repo, revision, args.manifests.strip("/"), dirs[label])
            except subprocess.CalledProcessError as err:
                print(f"error: git {label} revision {revision!r}: {err.stderr.decode().strip()}", file=sys.stderr)
                return 2
            if not count:
                print(f"error: {args.manifests}: no files at the {label} revision {revision!r}", file=sys.stderr)
                return 2
        command = [sys.executable, "-m", "nodewright.cli", "diff", "--base", str(dirs["base"]), "--head",
                   str(dirs["head"]), "--snapshot", args.snapshot, "--output", "markdown"]
        if args.max_cost_increase:
            command += ["--max-cost-increase", args.max_cost_increase]
        if args.max_evictions:
            command += ["--max-evictions", str(args.max_evictions)]
        done = subprocess.run(command, capture_output=True, text=True)
    markdown = done.stdout.replace(str(dirs["base"]), f"{args.manifests}@{args.base}").replace(
        str(dirs["head"]), f"{args.manifests}@{args.head}")
    sys.stderr.write(done.stderr)
    if done.returncode in (0, 1):
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(markdown)
    sys.stdout.write(markdown)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
