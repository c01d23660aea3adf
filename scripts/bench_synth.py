#!/usr/bin/env python
"""Benchmark ``python main.py`` (full synthesis of the six stacks) and print a table.

Each run is a fresh process, as ``cdktn synth`` / ``make synth`` would start it, into a temporary
``CDKTF_OUTDIR``. Reports wall-clock seconds (median and max of ``--runs``) and the peak resident
memory of the Python process plus its jsii Node.js child (max RSS of the process tree, MiB).
Target from the issue: synthesis under 15 s.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 15.0

CONFIGS = {
    "irsa (default)": {},
    "pod-identity, s3 state": {"NODEWRIGHT_INFRA_IDENTITY_MODE": "pod-identity",
                               "NODEWRIGHT_INFRA_STATE_BACKEND__TYPE": "s3",
                               "NODEWRIGHT_INFRA_STATE_BACKEND__BUCKET": "example-terraform-state"},
}


def run_once(extra_env: dict[str, str]) -> tuple[float, float]:
    """One synthesis; returns (seconds, peak RSS MiB of the largest process in the tree)."""
    with tempfile.TemporaryDirectory() as out:
        env = {**os.environ, **extra_env, "CDKTF_OUTDIR": out, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, str(ROOT / "main.py")], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"main.py failed:\n{done.stderr[-2000:]}")
        stacks = sorted(p.parent.name for p in Path(out, "stacks").glob("*/cdk.tf.json"))
        if len(stacks) != 6:
            raise SystemExit(f"expected 6 stacks, got {stacks}")
    # ru_maxrss of children is the largest single descendant (KiB on Linux).
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return elapsed, peak_mib


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'configuration':<26}{'runs':>5}{'median s':>10}{'max s':>8}{'peak RSS MiB':>14}  target < {TARGET_SECONDS:.0f} s")
    for name, env in CONFIGS.items():
        times, peak = [], 0.0
        for _ in range(args.runs):
            seconds, rss = run_once(env)
            times.append(seconds)
            peak = max(peak, rss)
        verdict = "ok" if max(times) < TARGET_SECONDS else "SLOW"
        print(f"{name:<26}{args.runs:>5}{statistics.median(times):>10.2f}{max(times):>8.2f}{peak:>14.0f}  {verdict}")


if __name__ == "__main__":
    main()
