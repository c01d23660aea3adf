"""The long fault campaign (issue 32): many seeded runs of the integration suite's campaign, then a table.

Each run is ``tests/integration/test_faults.py::test_fault_campaign_run_keeps_every_invariant[<seed>]``: the real
controller against the API emulator and moto on 127.0.0.1, a seeded fault plan (API write errors, an outage, cut
watches, CreateFleet ICE / throttling / 5xx / lost replies / timeouts, TerminateInstances failures, one kill -9 of
the leader), and the seven invariants asserted after the run (``tests/integration/faults.py``). ``make test`` runs
the short version (3 seeds); this script runs ``--runs`` seeds from ``--first-seed``::

    .venv/bin/python scripts/fault_campaign.py --runs 24

Prints one line per run and the totals (runs, faults injected by kind, kills, invariants held, recovery time after
the faults stopped, and what the invariants count: leaked instances, duplicate launches, pods pending, nodes stuck
terminating, stale disrupted taints, tracebacks, the NodePool's cpu peak); exits 1 when any invariant broke.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=24, help="number of seeded runs (default 24)")
    parser.add_argument("--first-seed", type=int, default=1, help="first seed (default 1)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="nodewright-faults-") as tmp:
        report = Path(tmp) / "runs.jsonl"
        env = {**os.environ, "NODEWRIGHT_FAULT_RUNS": str(args.runs), "NODEWRIGHT_FAULT_FIRST_SEED":
               str(args.first_seed), "NODEWRIGHT_FAULT_REPORT": str(report), "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "tests/integration/test_faults.py", "-k", "campaign"], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        runs = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    if not runs:
        print(proc.stdout[-4000:] + proc.stderr[-4000:])
        return 1
    totals: Counter[str] = Counter()
    print(f"{'seed':>4}  {'faults':>6}  {'kills':>5}  {'recovery s':>10}  invariants held  injected")
    for run in runs:
        injected = Counter(run["injected"])
        totals.update(injected)
        held = run["invariants"] - len(run["violations"])
        kinds = ", ".join(f"{k} x{v}" for k, v in sorted(injected.items()))
        print(f"{run['seed']:>4}  {sum(injected.values()):>6}  {run['crashes']:>5}  {run['recovery_seconds']:>10.2f}"
              f"  {held}/{run['invariants']:<13}  {kinds}")
        for violation in run["violations"]:
            print(f"      BROKEN: {violation}")
    recovery = [run["recovery_seconds"] for run in runs]
    broken = sum(len(run["violations"]) for run in runs)
    print(f"\n{len(runs)} runs, {sum(totals.values())} faults injected, {sum(r['crashes'] for r in runs)} kill -9 of "
          f"the leader, {sum(r['invariants'] for r in runs) - broken}/{sum(r['invariants'] for r in runs)} "
          f"invariant checks held; recovery after the faults stopped: median {statistics.median(recovery):.2f} s, "
          f"max {max(recovery):.2f} s")
    for kind, count in sorted(totals.items()):
        print(f"  {count:>5}  {kind}")
    found: Counter[str] = Counter()
    for run in runs:
        found.update(run.get("found", {}))
    print("found after the runs (0 = the invariant held): " + ", ".join(
        f"{kind} {found[kind]}" for kind in ("leaked instances", "duplicate launches", "pods pending",
                                             "nodes stuck terminating", "stale disrupted taints", "tracebacks"))
          + f"; NodePool cpu peak {max(r['max_cpu'] for r in runs)}m of the 12000m limit")
    return 0 if broken == 0 and proc.returncode == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
