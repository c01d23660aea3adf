#!/usr/bin/env python
"""Benchmark of the policy gate (target: the whole gate, synthesis included, under 60 s).

Runs ``scripts/policy_gate.py`` as ``make policy`` does (synthesize, render, one checkov), then on the
existing outputs with one checkov process and with two side by side (``--parallel``), ``--runs`` times
each, and prints one table of wall-clock seconds per phase (median over the runs). The gate's own
timings come from its JSON report.

Usage: ``python scripts/bench_policy_gate.py [--runs N]``. Exit 1 when a gate run fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 60.0
VARIANTS = {
    "make policy (synth + chart + checkov)": [],
    "existing outputs, one checkov": ["--no-build"],
    "existing outputs, --parallel": ["--no-build", "--parallel"],
}


def run(args: list[str]) -> dict[str, float]:
    """One gate run; its phase timings (seconds) plus the wall clock seen from outside."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "policy_gate.py"), "--report", str(report), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=900)
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"gate failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        timings = json.loads(report.read_text())["timings_s"]
    return {**timings, "wall": wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"{'variant':<40}{'synth s':>9}{'chart s':>9}{'checkov s':>11}{'wall s':>9}  target < {TARGET_S:.0f} s")
    for name, extra in VARIANTS.items():
        runs = [run(extra) for _ in range(args.runs)]

        def med(key: str, runs: list[dict[str, float]] = runs) -> str:
            values = [r[key] for r in runs if key in r]
            return f"{statistics.median(values):.1f}" if values else "-"

        ok = "ok" if statistics.median(r["wall"] for r in runs) < TARGET_S else "OVER"
        print(f"{name:<40}{med('synth'):>9}{med('chart'):>9}{med('checkov'):>11}{med('wall'):>9}  {ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
