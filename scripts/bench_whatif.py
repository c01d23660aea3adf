#!/usr/bin/env python3
"""Benchmark: a 5,000-node / 50,000-pod cluster snapshot written, read and simulated (issue 29).

The cluster is the what-if test cluster (``tests/unit/whatif/cluster.py``: Karpenter v1 objects as served) scaled
up: 5 NodePools, 5,000 NodeClaims + Nodes (m5.large/xlarge/2xlarge across three us-west-2 zones), a DaemonSet pod
on every node and 9 workload pods per node (250m-500m cpu; 50,000 pods bound), plus ``--pending`` pending pods.

Measured:

- **collect**: :func:`nodewright.whatif.snapshot.collect` over LIST pages of 500 served from memory (our side of a
  live ``nodewright snapshot``; the API server's own time and the network come on top);
- **write**: :func:`nodewright.whatif.snapshot.write_snapshot` of every object, JSON and YAML (target <= 60 s for
  collect + write);
- **simulate**: ``nodewright simulate --snapshot FILE -o json`` in a child process, the user's command: read +
  provisioning for the pending pods + the disruption dry run (every method, a reason per node); wall and CPU
  seconds and the child's peak RSS (targets <= 30 s on one core, <= 1 GiB).

Both run in child processes, so the peaks are theirs; on a shared machine the CPU seconds (user + system) are the
one-core figure, the wall seconds include waiting for a core (the load average is printed).

- **live** (``--live``, opt-in): the same objects created in a real kube-apiserver on 127.0.0.1 (the e2e control
  plane of ``tests/e2e/controlplane.py``: ``KUBEBUILDER_ASSETS`` or ``NODEWRIGHT_E2E_*`` name the binaries; nothing
  is fetched or built), then ``nodewright snapshot --kubeconfig ... -o FILE.json`` in a child: LISTs + write. The
  objects are created without their statuses (the apiserver drops status on create; a status write each would
  double the load time), so the file is a little smaller than a real cluster's.

Run (niced, one core): ``nice -n 5 .venv/bin/python scripts/bench_whatif.py [--nodes 5000] [--pending 200] [--live]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nodewright.whatif.snapshot import SNAPSHOT_KINDS, collect, write_snapshot  # noqa: E402
from tests.unit.whatif.cluster import NOW, daemonset, node_and_claim, nodeclass, nodepool, pod  # noqa: E402

#: The user's command in a child that reports its own peak RSS (KiB) on its last stderr line.
SIMULATE = ("import resource, sys\nfrom nodewright.cli import main\ntry:\n"
            "    main(['simulate', '--snapshot', sys.argv[1], '-o', 'json'])\nexcept SystemExit as done:\n"
            "    assert not done.code, done.code\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
#: ``nodewright snapshot`` of a live cluster in a child that reports its own peak RSS (KiB) on its last stderr line.
SNAPSHOT = ("import resource, sys, warnings\nfrom nodewright.cli import main\n"
            "warnings.filterwarnings('ignore', message='Unverified HTTPS request')\ntry:\n"
            "    main(['snapshot', '--kubeconfig', sys.argv[1], '-o', sys.argv[2]])\nexcept SystemExit as done:\n"
            "    assert not done.code, done.code\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
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


class Pages:
    """The API server's LIST answers from memory (``limit``/``continue`` pages): what :func:`collect` does with them
    is timed, not the network round trips."""

    def __init__(self, objects: list[dict]) -> None:
        self.by_plural: dict[str, list[dict]] = {}
        for kind in SNAPSHOT_KINDS:
            self.by_plural[kind.plural] = [o for o in objects if o["kind"] == kind.kind]

    def request(self, method: str, path: str, query: dict) -> dict:
        items = self.by_plural.get(path.rsplit("/", 1)[1], [])
        start, limit = int(query.get("continue") or 0), int(query["limit"])
        more = start + limit < len(items)
        return {"items": items[start:start + limit], "metadata": {"continue": str(start + limit) if more else ""}}


def write(path: str, nodes: int, pending: int) -> None:
    """Child process: build the cluster, collect it from in-memory pages, write it as JSON and YAML beside
    ``path``; one line per step."""
    objects = synthetic(nodes, pending)
    pods = sum(1 for o in objects if o["kind"] == "Pod")
    print(f"built {len(objects)} {pods}")
    wall, cpu = time.perf_counter(), time.process_time()
    collected = collect(Pages(objects))
    assert len(collected) == len(objects)
    print(f"collect {len(collected)} {time.perf_counter() - wall:.1f} {time.process_time() - cpu:.1f}")
    for suffix in (".json", ".yaml"):
        target = Path(path).with_suffix(suffix)
        wall, cpu = time.perf_counter(), time.process_time()
        write_snapshot(target, objects, time=NOW)
        print(f"write {suffix[1:]} {target.stat().st_size} {time.perf_counter() - wall:.1f} "
              f"{time.process_time() - cpu:.1f}")


def load(kubeconfig: str, nodes: int, pending: int) -> None:
    """Child process: create the cluster's objects (without status) through ``kubeconfig``, 6 requests at a time."""
    import copy
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    from nodewright.kube.rest import RestClient, load_api_client
    from nodewright.whatif.snapshot import KIND_OF
    from tests.e2e.test_e2e_whatif import SERVER_FIELDS, _apply_crds

    warnings.filterwarnings("ignore", message="Unverified HTTPS request")
    rest = RestClient(load_api_client(kubeconfig))
    _apply_crds(rest)

    def create(obj: dict) -> None:
        body = {k: v for k, v in copy.deepcopy(obj).items() if k != "status"}
        for key in SERVER_FIELDS:
            body["metadata"].pop(key, None)
        rest.request("POST", KIND_OF[obj["kind"]].collection_path(body["metadata"].get("namespace")), body=body,
                     creating=True)

    objects = [o for o in synthetic(nodes, pending) if o["kind"] != "Namespace"]  # default, kube-system exist
    early = ("NodePool", "EC2NodeClass", "DaemonSet")
    wall = time.perf_counter()
    for obj in objects:
        if obj["kind"] in early:
            create(obj)
    with ThreadPoolExecutor(6) as pool:
        list(pool.map(create, [o for o in objects if o["kind"] not in early]))
    print(f"loaded {len(objects)} {time.perf_counter() - wall:.1f}")


def live(tmp: str, nodes: int, pending: int) -> tuple[str, ...] | None:
    """The ``--live`` row, or None (with the reason printed) when no control plane binaries are given."""
    from tests.e2e.controlplane import ControlPlane, skip_reason

    reason = skip_reason()
    if reason:
        print(f"live: not run: {reason}")
        return None
    plane = ControlPlane.start(Path(tmp) / "plane")
    try:
        done, _, _, _ = child([sys.executable, str(Path(__file__).resolve()), "--load-only", str(plane.kubeconfig),
                               "--nodes", str(nodes), "--pending", str(pending)])
        print(f"live: {done.stdout.split()[1]} objects created in {done.stdout.split()[2]} s")
        out = str(Path(tmp) / "live.json")
        done, wall, cpu, _ = child([sys.executable, "-c", SNAPSHOT, str(plane.kubeconfig), out])
        rss = float(done.stderr.strip().splitlines()[-1]) / 1024
        return (f"live nodewright snapshot -o .json ({Path(out).stat().st_size / 2**20:.0f} MiB; LISTs + write)",
                f"{wall:.1f}", f"{cpu:.1f}", f"{rss:.0f}", "<= 60 s")
    finally:
        plane.stop()


def child(command: list[str]) -> tuple[subprocess.CompletedProcess[str], float, float, float]:
    """(result, wall s, cpu s, the largest child's peak RSS MiB so far) of one child process; the parent never holds
    the cluster (a fork of a large parent would count its pages until exec)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        raise SystemExit(1)
    return done, wall, cpu, after.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pending", type=int, default=200)
    parser.add_argument("--live", action="store_true",
                        help="also snapshot a real kube-apiserver holding the cluster (KUBEBUILDER_ASSETS)")
    parser.add_argument("--write-only", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--load-only", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_only:
        write(args.write_only, args.nodes, args.pending)
        return 0
    if args.load_only:
        load(args.load_only, args.nodes, args.pending)
        return 0
    rows = [("step", "seconds (wall)", "seconds (cpu)", "peak RSS MiB", "target (one core)")]
    with tempfile.TemporaryDirectory(prefix="bench-whatif-") as tmp:
        base = str(Path(tmp) / "snapshot")
        done, _, _, _ = child([sys.executable, str(Path(__file__).resolve()), "--write-only", base,
                               "--nodes", str(args.nodes), "--pending", str(args.pending)])
        lines = done.stdout.split("\n")
        _, objects, pods = lines[0].split()
        for line in lines[1:]:
            if line.startswith("collect "):
                _, _, wall, cpu = line.split()
                rows.append(("collect (LIST pages of 500, from memory)", wall, cpu, "", "with the write: <= 60 s"))
            if line.startswith("write "):
                _, fmt, size, wall, cpu = line.split()
                rows.append((f"write {fmt} ({int(size) / 2**20:.0f} MiB)", wall, cpu, "", "<= 60 s"))
        done, wall, cpu, _ = child([sys.executable, "-c", SIMULATE, base + ".json"])
        rss = float(done.stderr.strip().splitlines()[-1]) / 1024
        rows.append(("simulate --snapshot (json)", f"{wall:.1f}", f"{cpu:.1f}", f"{rss:.0f}", "<= 30 s, <= 1024 MiB"))
        doc = json.loads(done.stdout)
        row = live(tmp, args.nodes, args.pending) if args.live else None
        if row is not None:
            rows.append(row)
    print(f"{args.nodes} nodes, {pods} pods ({args.pending} pending), {objects} objects; load average "
          f"{os.getloadavg()[0]:.1f} (wall seconds include waiting for a core; cpu seconds do not)")
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
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
