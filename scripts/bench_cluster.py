"""Synthetic clusters shaped like the ones whose consolidation times out (issue 30; used by
``scripts/bench_consolidation.py``).

:func:`realistic` builds a :class:`~nodewright.disruption.ClusterView` of ``n`` nodes from the bundled us-east-1
catalog (every type offered to every NodePool, each pool's requirements narrowing it, as Karpenter does):

* 24 NodePools for 8 teams, three per team: an on-demand x86 pool (weight 50), a spot-and-on-demand x86 pool
  (weight 30) and an arm64 pool (weight 10); each allows 2-4 families of c/m/r generations 5-7, sizes large to
  4xlarge; the pools of teams 6 and 7 carry a ``dedicated=<team>:NoSchedule`` taint their pods tolerate. Default
  budgets (``nodes: 10%``), ``WhenEmptyOrUnderutilized``, ``consolidateAfter: 0``.
* Every node runs three DaemonSets (kube-proxy-like, aws-node-like, node-exporter-like: 240m / 350Mi in all).
* Per team ~8 workloads selecting the team's pools (``team`` node label): *web* Deployments (zone topology spread
  ``DoNotSchedule`` maxSkew 1, hostname spread ``ScheduleAnyway``, a PDB allowing 10% of replicas), *batch*
  Deployments (no constraints; 3% of pods ``karpenter.sh/do-not-disrupt``) and *stateful* StatefulSets (required
  hostname pod anti-affinity, a PDB allowing 1; one in five degraded: allows 0).
* Nodes are filled 10-85% (random per node); replicas go round-robin over zones, each to a random node of the
  team with room (anti-affinity honoured), so existing spreads are balanced as a scheduler leaves them.

Deterministic per ``(n, seed)``. Prices are the catalog's (on-demand, or the zone's spot price).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nodewright.api import labels as L  # noqa: E402
from nodewright.api.nodepool import Budget  # noqa: E402
from nodewright.cloud.catalog import load_instance_types  # noqa: E402
from nodewright.cloud.instancetype import InstanceType  # noqa: E402
from nodewright.disruption import PDB, ClusterView, Node, Pool  # noqa: E402
from nodewright.scheduling import (  # noqa: E402
    Affinity,
    ExistingNode,
    LabelSelector,
    NodePoolSpec,
    Pod,
    PodAffinityTerm,
    Requirement,
    Requirements,
    TopologySpreadConstraint,
)
from nodewright.scheduling.taints import Taint, Toleration  # noqa: E402

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
NOW = 1_784_548_800.0
TEAMS = 8
X86_FAMILIES = ("m5", "c5", "r5", "m6i", "c6i", "r6i", "m7i", "c7i", "r7i", "m6a", "c6a", "r6a")
ARM_FAMILIES = ("m6g", "c6g", "r6g", "m7g", "c7g", "r7g")
SIZES = ("large", "xlarge", "2xlarge", "4xlarge")
TEAM_LABEL = "bench.nodewright.io/team"

_CATALOG: list[InstanceType] | None = None


def catalog() -> list[InstanceType]:
    """The bundled us-east-1 catalog in three zones (loaded once)."""
    global _CATALOG
    if _CATALOG is None:
        _CATALOG = load_instance_types("us-east-1", zones=ZONES)
    return _CATALOG


def _daemonsets() -> list[Pod]:
    out = []
    for name, cpu, mem in (("kube-proxy", 100, 128), ("aws-node", 50, 128), ("node-exporter", 90, 94)):
        out.append(Pod(namespace="kube-system", name=name, labels={"app": name}, owner_kind="DaemonSet",
                       owner_name=name, requests={"cpu": cpu, "memory": mem * 2**20, "pods": 1},
                       tolerations=(Toleration(operator="Exists"),)))
    return out


def _pools(rng: random.Random, types: list[InstanceType], daemons: list[Pod],
           budget: str | None, teams: int) -> dict[str, Pool]:
    pools: dict[str, Pool] = {}
    for team in range(teams):
        taints = (Taint("dedicated", "NoSchedule", f"team{team}"),) if team >= 6 else ()
        for kind, weight in (("od", 50), ("spot", 30), ("arm", 10)):
            name = f"team{team}-{kind}"
            families = rng.sample(ARM_FAMILIES if kind == "arm" else X86_FAMILIES, rng.randint(2, 4))
            capacity = ("on-demand",) if kind == "od" else ("spot", "on-demand")
            reqs = Requirements([
                Requirement(L.NODEPOOL, False, (name,)),
                Requirement(L.CAPACITY_TYPE, False, capacity),
                Requirement(L.ARCH, False, ("arm64" if kind == "arm" else "amd64",)),
                Requirement(L.INSTANCE_FAMILY, False, tuple(families)),
                Requirement(L.INSTANCE_SIZE, False, SIZES),
                Requirement(TEAM_LABEL, False, (f"team{team}",)),
            ])
            spec = NodePoolSpec(name, reqs, weight=weight, labels={L.NODEPOOL: name, TEAM_LABEL: f"team{team}"},
                                taints=taints, daemonsets=tuple(daemons))
            pools[name] = Pool(name, spec, types) if budget is None else Pool(name, spec, types, budgets=[Budget(nodes=budget)])
    return pools


def _workloads(rng: random.Random, team: int, pods_wanted: int) -> list[dict[str, object]]:
    """Workload descriptions of one team, replicas summing to about ``pods_wanted``."""
    out: list[dict[str, object]] = []
    kinds = ["web", "web", "web", "batch", "batch", "batch", "stateful", "stateful"]
    shares = [rng.uniform(0.5, 1.5) for _ in kinds]
    total = sum(shares)
    for i, (kind, share) in enumerate(zip(kinds, shares, strict=True)):
        replicas = max(2, round(pods_wanted * share / total))
        cpu = rng.choice([100, 250, 500, 750, 1000, 1500, 2000])
        mem = rng.choice([256, 512, 1024, 2048, 3072, 4096]) * 2**20
        out.append({"name": f"t{team}-{kind}-{i}", "kind": kind, "replicas": replicas, "cpu": cpu, "mem": mem,
                    "degraded": kind == "stateful" and rng.random() < 0.2})
    return out


def _pod(w: dict[str, object], team: int, j: int, node: str, rng: random.Random) -> Pod:
    name = str(w["name"])
    labels = {"app": name}
    selector = LabelSelector((("app", name),))
    spread: tuple[TopologySpreadConstraint, ...] = ()
    affinity = Affinity()
    annotations: dict[str, str] = {}
    kind = w["kind"]
    if kind == "web":
        spread = (TopologySpreadConstraint(1, L.ZONE, "DoNotSchedule", selector),
                  TopologySpreadConstraint(1, L.HOSTNAME, "ScheduleAnyway", selector))
    elif kind == "stateful":
        affinity = Affinity(pod_anti_affinity_required=(PodAffinityTerm(L.HOSTNAME, selector),))
    elif rng.random() < 0.03:
        annotations[L.DO_NOT_DISRUPT] = "true"
    tolerations = (Toleration("dedicated", "Equal", f"team{team}", "NoSchedule"),) if team >= 6 else ()
    return Pod(namespace=f"team{team}", name=f"{name}-{j}", labels=labels, annotations=annotations,
               requests={"cpu": int(w["cpu"]), "memory": int(w["mem"]), "pods": 1},  # type: ignore[call-overload]
               node_selector={TEAM_LABEL: f"team{team}"}, tolerations=tolerations, topology_spread=spread,
               affinity=affinity, owner_kind="StatefulSet" if kind == "stateful" else "ReplicaSet",
               owner_name=name, node_name=node)


class _Slot:
    __slots__ = ("name", "zone", "room", "apps", "pods")

    def __init__(self, name: str, zone: str, room: tuple[int, int, int]) -> None:
        self.name, self.zone, self.room = name, zone, list(room)
        self.apps: set[str] = set()
        self.pods: list[Pod] = []


def realistic(n: int, seed: int, budget: str | None = None, teams: int = TEAMS) -> ClusterView:
    """A cluster of ``n`` nodes (see module docstring) of ``teams`` teams (3 NodePools each); ``budget``
    overrides the pools' ``nodes: 10%``."""
    rng = random.Random(seed)
    types = catalog()
    daemons = _daemonsets()
    pools = _pools(rng, types, daemons, budget, teams)
    allowed: dict[str, list[InstanceType]] = {}
    for name, pool in pools.items():
        reqs = pool.spec.requirements
        allowed[name] = [it for it in types if all(
            k in (L.NODEPOOL, L.CAPACITY_TYPE, TEAM_LABEL) or r.has(it.labels.get(k, "")) for k, r in reqs.items())]
    ds_cpu = sum(d.requests["cpu"] for d in daemons)
    ds_mem = sum(d.requests["memory"] for d in daemons)
    names = list(pools)
    slots: dict[int, list[_Slot]] = {t: [] for t in range(teams)}
    meta: list[tuple[str, str, InstanceType, str, str, float]] = []
    for i in range(n):
        pool_name = names[rng.randrange(len(names))] if i >= len(names) else names[i]
        team = int(pool_name.split("-")[0][4:])
        it = rng.choice(allowed[pool_name])
        zone = rng.choice(ZONES)
        capacity = "on-demand" if pool_name.endswith("-od") or rng.random() < 0.3 else "spot"
        price = next(o.price for o in it.offerings if o.zone == zone and o.capacity_type == capacity)
        alloc = it.allocatable()
        fill = rng.uniform(0.10, 0.85)
        room = (int(alloc["cpu"] * fill) - ds_cpu, int(alloc["memory"] * fill) - ds_mem, alloc["pods"] - 3)
        name = f"ip-10-{i // 62500}-{i // 250 % 250}-{i % 250}"
        slots[team].append(_Slot(name, zone, room))
        meta.append((name, pool_name, it, zone, capacity, price))
    pdbs: list[PDB] = []
    by_name = {s.name: s for team_slots in slots.values() for s in team_slots}
    for team, team_slots in slots.items():
        capacity_cpu = sum(max(0, s.room[0]) for s in team_slots)
        avg_cpu = 800
        by_zone = {z: [s for s in team_slots if s.zone == z] for z in ZONES}
        for w in _workloads(rng, team, max(len(team_slots), capacity_cpu // avg_cpu)):
            placed = 0
            for j in range(int(w["replicas"])):  # type: ignore[call-overload]
                zone_slots = by_zone[ZONES[j % 3]] or team_slots
                for _ in range(6):
                    s = zone_slots[rng.randrange(len(zone_slots))]
                    if s.room[0] < w["cpu"] or s.room[1] < w["mem"] or s.room[2] < 1:  # type: ignore[operator]
                        continue
                    if w["kind"] == "stateful" and w["name"] in s.apps:
                        continue
                    s.room[0] -= w["cpu"]  # type: ignore[operator]
                    s.room[1] -= w["mem"]  # type: ignore[operator]
                    s.room[2] -= 1
                    s.apps.add(str(w["name"]))
                    s.pods.append(_pod(w, team, j, s.name, rng))
                    placed += 1
                    break
            if w["kind"] != "batch" and placed:
                allowed_n = (0 if w["degraded"] else 1) if w["kind"] == "stateful" else max(1, placed // 10)
                pdbs.append(PDB(f"{w['name']}-pdb", f"team{team}", LabelSelector((("app", str(w["name"])),)),
                                allowed_n))
    nodes: list[Node] = []
    for name, pool_name, it, zone, capacity, price in meta:
        slot = by_name[name]
        if not slot.pods:  # every node runs something (no emptiness: the pass reaches consolidation)
            w = {"name": f"{pool_name}-filler", "kind": "batch", "cpu": 100, "mem": 128 * 2**20}
            team = int(pool_name.split("-")[0][4:])
            slot.pods.append(_pod(w, team, len(nodes), name, random.Random(len(nodes))))
        pool = pools[pool_name]
        labels = {**it.labels, **pool.spec.labels, L.INSTANCE_TYPE: it.name, L.ZONE: zone,
                  L.CAPACITY_TYPE: capacity, L.HOSTNAME: name}
        bound = [Pod(namespace=d.namespace, name=f"{d.name}-{name}", labels=d.labels, requests=d.requests,
                     owner_kind="DaemonSet", owner_name=d.name, tolerations=d.tolerations, node_name=name)
                 for d in daemons]
        view = ExistingNode(name=name, labels=labels, allocatable=it.allocatable(), taints=pool.spec.taints,
                            pods=bound + slot.pods, nodepool=pool_name, instance_type=it.name,
                            capacity_type=capacity, zone=zone, price=price)
        nodes.append(Node(name, f"{name}-claim", pool_name, view, list(slot.pods), created=NOW - 86_400,
                          price=price, expire_after=720 * 3600.0))
    return ClusterView(nodes=nodes, pools=pools, pdbs=pdbs, daemonsets=daemons)
