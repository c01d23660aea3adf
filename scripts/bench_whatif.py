#!/usr/bin/env python3
"""Benchmark: a 5,000-node / 50,000-pod cluster snapshot written, read and simulated (issue 29).

The cluster is the what-if test cluster (``tests/unit/whatif/cluster.py``: Karpenter v1 objects as served) scaled
up: 5 NodePools, 5,000 NodeClaims + Nodes (m5.large/xlarge/2xlarge across three us-west-2 zones), a DaemonSet pod
on every node and 9 workload pods per node (250m-500m cpu; 50,000 pods bound), plus ``--pending`` pending pods.

Measured:

- **write**: :func:`nodewright.whatif.snapshot.write_snapshot` of every object, JSON and YAML (target <= 60 s; a live
  ``nodewright snapshot`` adds the LIST round trips);
- **simulate**: ``nodewright simulate --snapshot FILE -o json`` in a child process, the user's command: read +
  provisioning for the pending pods + the disruption dry run (every method, a reason per node); wall seconds and the
  child's peak RSS (targets <= 30 s, <= 1 GiB).

Run (niced, one core): ``nice -n 5 .venv/bin/python scripts/bench_whatif.py [--nodes 5000] [--pending 200]``
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodewright.whatif.snapshot import write_snapshot  # noqa: E402
from tests.unit.whatif.cluster import NOW, daemonset, node_and_claim, nodeclass, nodepool, pod  # noqa: E402

TYPES = ("m5.large", "m5.xlarge", "m5.xlarge", "m5.2xlarge")
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")


def synthetic(nodes: int, pending: int, pods_per_node: int = 9) -> list[dict]:
    pools = [nodepool(f"pool-{i}") for i in range(5)]
    objects: list[dict] = [*pools, nodeclass(), daemonset()]
    for i in range(nodes):
        name = f"ip-10-{i // 65536}-{i // 256 % 256}-{i % 256}"
        itype = TYPES[i % len(TYPES)]
        objects.extend(node_and_claim(i + 1, name, itype, ZONES[i % 3], f"pool-{i % 5}"))
        objects.append(pod(f"node-agent-{i}", name, "100m", "128Mi", {"app": "node-agent"},
                           owner=("DaemonSet", "node-agent"), namespace="kube-system"))
        for j in range(pods_per_node):
            objects.append(pod(f"web-{i}-{j}", name, "250m" if j % 2 else "150m", "256Mi",
                               {"app": f"web-{j % 20}"}, owner=("ReplicaSet", f"web-{j % 20}-5d8f")))
    for k in range(pending):
        objects.append(pod(f"pending-{k}", None, "500m", "512Mi", {"app": "burst"}, owner=("ReplicaSet", "burst-7c")))
    return objects


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pending", type=int, default=200)
    args = parser.parse_args()
    started = time.perf_counter()
    objects = synthetic(args.nodes, args.pending)
    built = time.perf_counter() - started
    pods = sum(1 for o in objects if o["kind"] == "Pod")
    rows = [("step", "objects", "seconds", "peak RSS MiB", "target")]
    with tempfile.TemporaryDirectory(prefix="bench-whatif-") as tmp:
        sizes = {}
        for suffix in (".json", ".yaml"):
            path = Path(tmp) / f"snapshot{suffix}"
            t0 = time.perf_counter()
            write_snapshot(path, objects, time=NOW)
            seconds = time.perf_counter() - t0
            sizes[suffix] = path.stat().st_size
            rows.append((f"write {suffix[1:]} ({sizes[suffix] / 2**20:.0f} MiB)", str(len(objects)), f"{seconds:.1f}",
                         "", "<= 60 s"))
        for suffix in (".json",):
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "nodewright.cli", "simulate", "--snapshot",
                                   str(Path(tmp) / f"snapshot{suffix}"), "-o", "json"],
                                  capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
            seconds = time.perf_counter() - t0
            if done.returncode != 0:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            rows.append((f"simulate --snapshot {suffix[1:]}", str(len(objects)), f"{seconds:.1f}", f"{rss:.0f}",
                         "<= 30 s, <= 1024 MiB"))
            import json

            doc = json.loads(done.stdout)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"{args.nodes} nodes, {pods} pods ({args.pending} pending), built in {built:.1f} s")
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    acts = doc["disruption"]["acts"]
    decision = next((m["decision"] for m in doc["disruption"]["methods"] if m["method"] == acts), None)
    print(f"provisioning: {len(doc['provisioning']['nodeclaims'])} new node(s), "
          f"{sum(len(e['pods']) for e in doc['provisioning']['existing'])} pod(s) on existing nodes; "
          f"disruption acts: {acts} ({decision['message'] if decision else '-'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
