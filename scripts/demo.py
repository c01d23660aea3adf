"""`make demo`: the main job on built-in defaults, with no cloud access.

Steps, each a separate process so its output reads as a user would see it:
1. convert the field reports' v1alpha5/v1beta1 manifests to Karpenter v1;
2. simulate the provisioning decision for each field report's manifests;
3. synthesize the CDK Terrain stacks (cdktf.out/);
4. render the Helm chart (out/chart/);
5. run the policy gate (checkov + our checks) over both;
6. replay the load-test scenario against the Cluster Autoscaler baseline, plot under out/;
7. run the load-test and priority-pools scenarios at target utilization 1.0 and 0.75, side by side;
8. run the committed-spend scenario deciding on list prices, then on effective prices under
   examples/pricing/savings-plan.yaml (a Savings Plan and RIs): the dollars paid side by side (docs/pricing.md).
Exits non-zero as soon as a step fails.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
NODEWRIGHT = [PY, "-m", "nodewright.cli"]
EXAMPLES = ROOT / "examples"


# Each field report's manifests, with the workloads that make its decision worth looking at.
SIMULATIONS = [
    ("the first field report (v1alpha5 Provisioner, four inflate pods + daemonsets)",
     ["provisioner-v1alpha5-default.yaml", "workloads/first-report-inflate.yaml"]),
    ("the second field report (v1beta1 priority NodePools, a platform chart and a batch Job)",
     ["nodepools-v1beta1-priority.yaml", "workloads/priority-workloads.yaml"]),
    ("the third field report (team1 Provisioner, 4 replicas spread over zones)",
     ["team1-alternative-provisioner.yaml"]),
]


def steps() -> list[tuple[str, list[str]]]:
    """The demo's steps as (title, argv), in order."""
    field_reports = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))
    files = [arg for path in field_reports for arg in ("-f", path)]
    result = [("Convert the field reports' manifests to Karpenter v1", [*NODEWRIGHT, "convert", *files])]
    for title, names in SIMULATIONS:
        args = [arg for name in names for arg in ("-f", str(EXAMPLES / name))]
        result.append((f"Simulate {title}", [*NODEWRIGHT, "simulate", *args, "--output", "table"]))
    result += [
        ("Synthesize the infrastructure (CDK Terrain)", [PY, "main.py"]),
        ("Render the Helm chart", [PY, "scripts/render_chart.py"]),
        ("Policy gate (checkov + CKV_NW_* checks)", [PY, "scripts/policy_gate.py", "--no-build"]),
        ("Replay the load-test scenario vs Cluster Autoscaler",
         [*NODEWRIGHT, "simulate", "--scenario", "examples/scenarios/load-test.yaml",
          "--baseline", "cluster-autoscaler", "--output", "table", "--plot", "out/load-test.png"]),
    ]
    for name in ("load-test", "priority-pools"):
        result.append((f"Target utilization 1.0 vs 0.75 on the {name} scenario (churn, pod wait, dollars)",
                       [*NODEWRIGHT, "simulate", "--scenario", f"examples/scenarios/{name}.yaml",
                        "--compare-target-utilization", "1.0,0.75", "--output", "table"]))
    result.append(("A Savings Plan and RIs: decided on list vs effective prices (committed-spend scenario)",
                   [*NODEWRIGHT, "simulate", "--scenario", "examples/scenarios/committed-spend.yaml",
                    "--pricing", "examples/pricing/savings-plan.yaml", "--compare-pricing", "--output", "table"]))
    return result


def main() -> int:
    """Run every step; return the first failing exit code, else 0."""
    (ROOT / "out").mkdir(exist_ok=True)
    started = time.monotonic()
    for title, argv in steps():
        print(f"\n=== {title}\n$ {' '.join(Path(a).name if a == PY else a for a in argv)}", flush=True)
        code = subprocess.call(argv, cwd=ROOT)
        if code != 0:
            print(f"demo step failed ({code}): {title}", file=sys.stderr)
            return code
    print(f"\nDemo finished in {time.monotonic() - started:.0f} s. Outputs are under out/ and cdktf.out/.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
