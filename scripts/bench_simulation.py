"""Benchmark of the scenario simulator: a simulated day of 2,000 pods on ~200 nodes, target < 60 s.

The scenario (generated here, deterministic): 20 Deployments of 0.7 vCPU / 1.5 GiB replicas behind HPAs on a
requests-per-replica metric, a diurnal load curve that takes them from 400 replicas at night to 2,000 at the
peak (load changes every 30 minutes), one on-demand NodePool (m/c/r, generation > 5, consolidation
``WhenEmptyOrUnderutilized`` after 5 minutes) with two DaemonSets. nodewright's controllers run the whole day
on the simulated clock; the table shows simulated time, peak pods and nodes, controller steps and the wall
and CPU seconds the run took. ``--baseline`` also runs the Cluster Autoscaler model.

Run: ``.venv/bin/python scripts/bench_simulation.py [--hours 24] [--baseline]``
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from nodewright.sim.runner import CLUSTER_AUTOSCALER, NODEWRIGHT, run
from nodewright.sim.scenario import parse_scenario

DEPLOYMENTS = 20
PEAK_REPLICAS = 100
TROUGH_REPLICAS = 20
PER_REPLICA_RPS = 10.0


def _deployment(i: int) -> list[dict[str, Any]]:
    name = f"svc-{i:02d}"
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
         "spec": {"replicas": TROUGH_REPLICAS, "selector": {"matchLabels": {"app": name}},
                  "template": {"metadata": {"labels": {"app": name}},
                               "spec": {"containers": [{"name": "app", "image": name, "resources": {
                                   "requests": {"cpu": "700m", "memory": "1536Mi"}}}]}}}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                  "minReplicas": TROUGH_REPLICAS, "maxReplicas": PEAK_REPLICAS,
                  "metrics": [{"type": "Pods", "pods": {"metric": {"name": "requests_per_second"},
                                                        "target": {"type": "AverageValue",
                                                                   "averageValue": str(PER_REPLICA_RPS)}}}]}},
    ]


def _daemonset(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"tolerations": [{"operator": "Exists"}], "containers": [
                    {"name": name, "image": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}}


def scenario_document(hours: float) -> dict[str, Any]:
    """The benchmark scenario as a Scenario document."""
    manifests: list[dict[str, Any]] = [
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
         "spec": {"role": "bench-node", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                  "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                  "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}]}},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
         "spec": {"template": {"spec": {
             "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
             "requirements": [
                 {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                 {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["m", "c", "r"]},
                 {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]},
                 {"key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["8"]}]}},
             "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m",
                            "budgets": [{"nodes": "10%"}]},
             "limits": {"cpu": "4000"}}},
        _daemonset("kube-proxy", "100m", "64Mi"),
        _daemonset("aws-node", "25m", "128Mi"),
    ]
    for i in range(DEPLOYMENTS):
        manifests.extend(_deployment(i))
    events = []
    step = 1800
    for k in range(int(hours * 3600 // step) + 1):
        t = k * step
        # Diurnal curve: trough at 03:00, peak at 15:00 (the day starts at 00:00).
        phase = math.cos(2 * math.pi * (t / 86400.0 - 15 / 24))
        replicas = TROUGH_REPLICAS + (PEAK_REPLICAS - TROUGH_REPLICAS) * (1 + phase) / 2
        for i in range(DEPLOYMENTS):
            events.append({"at": t, "load": {"deployment": f"svc-{i:02d}",
                                             "requestsPerSecond": round(replicas * PER_REPLICA_RPS, 1),
                                             "perReplicaCapacity": PER_REPLICA_RPS}})
    events = [e for e in events if e["at"] <= hours * 3600]
    return {"apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench-day"},
            "spec": {"duration": int(hours * 3600), "seed": 1, "sampleInterval": "60s", "manifests": manifests,
                     "events": events,
                     "baseline": {"clusterAutoscaler": {"nodeGroups": [
                         {"name": "general", "nodePool": "general", "instanceType": "m6i.2xlarge",
                          "maxSize": 400}]}}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours (default 24)")
    parser.add_argument("--baseline", action="store_true", help="also run the Cluster Autoscaler model")
    args = parser.parse_args()
    scenario = parse_scenario(scenario_document(args.hours))
    rows = []
    for name in (NODEWRIGHT, CLUSTER_AUTOSCALER) if args.baseline else (NODEWRIGHT,):
        cpu = time.process_time()
        result = run(scenario, name)
        cpu = time.process_time() - cpu
        peak_pods = max(s.running_pods + s.pending_pods for s in result.timeline)
        rows.append((name, f"{scenario.duration / 3600:g} h", str(peak_pods), str(result.summary["max_nodes"]),
                     str(result.summary["nodes_launched"]), str(result.steps), f"{result.wall_seconds:.1f}",
                     f"{cpu:.1f}", f"${result.summary['cost_usd']:.0f}",
                     "yes" if result.wall_seconds < 60 else "NO"))
    header = ("autoscaler", "simulated", "peak pods", "peak nodes", "launched", "steps", "wall s", "cpu s",
              "cost", "< 60 s")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
