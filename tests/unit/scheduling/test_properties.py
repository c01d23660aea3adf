"""Property tests: the invariants every plan must keep, on random inputs."""

from hypothesis import given, settings
from hypothesis import strategies as st

from nodewright.scheduling import LabelSelector, Toleration, TopologySpreadConstraint, schedule
from nodewright.scheduling.taints import Taint

from .helpers import pod, pool, standard_types

ZONE = "topology.kubernetes.io/zone"
SPREAD = TopologySpreadConstraint(1, ZONE, label_selector=LabelSelector((("app", "s"),)))

pod_spec = st.tuples(
    st.integers(min_value=50, max_value=6000),  # cpu m
    st.integers(min_value=64, max_value=20000),  # memory MiB
    st.booleans(),  # zone spread
    st.booleans(),  # tolerates the tainted pool
)


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(pod_spec, min_size=1, max_size=40), cpu_limit=st.sampled_from([None, 16000, 64000]))
def test_plan_invariants(specs: list[tuple[int, int, bool, bool]], cpu_limit: int | None) -> None:
    pods = []
    for i, (cpu, mem, spread, tol) in enumerate(specs):
        kw: dict[str, object] = {}
        if spread:
            kw["labels"] = {"app": "s"}
            kw["topology_spread"] = (SPREAD,)
        if tol:
            kw["tolerations"] = (Toleration("dedicated", "Exists"),)
        pods.append(pod(f"p{i}", cpu, mem, **kw))
    pools = [
        pool("tainted", weight=10, taints=(Taint("dedicated", "NoSchedule"),)),
        pool("general", limits={"cpu": cpu_limit} if cpu_limit else None),
    ]
    types = {p.name: standard_types() for p in pools}
    result = schedule(pods, [], pools, types)
    again = schedule(pods, [], pools, types)
    # Deterministic.
    assert [(n.instance_type.name, [p.name for p in n.pods]) for n in result.new_nodeclaims] == [
        (n.instance_type.name, [p.name for p in n.pods]) for n in again.new_nodeclaims
    ]
    # Every pod is either placed once or reported.
    placed = [p.key for n in result.new_nodeclaims for p in n.pods]
    assert len(placed) == len(set(placed))
    assert sorted(placed + list(result.unschedulable)) == sorted(p.key for p in pods)
    used_cpu = 0
    for nc in result.new_nodeclaims:
        # No node over allocatable: every candidate type holds the requests.
        for it in nc.instance_types:
            alloc = it.allocatable()
            assert all(qty <= alloc.get(name, 0) for name, qty in nc.requests.items())
        # No taint violated.
        for p in nc.pods:
            assert all(any(t.tolerates(taint) for t in p.tolerations) for taint in nc.taints)
        if nc.nodepool == "general":
            used_cpu += max(it.capacity["cpu"] for it in nc.instance_types)
    # No limit breached (largest candidate of each launch counted).
    if cpu_limit:
        assert used_cpu <= cpu_limit
    # Required zone spread kept (maxSkew 1 over the zones used by spread pods).
    per_zone = {"test-1a": 0, "test-1b": 0}
    for nc in result.new_nodeclaims:
        per_zone[nc.zone] += sum(1 for p in nc.pods if p.labels.get("app") == "s")
    assert abs(per_zone["test-1a"] - per_zone["test-1b"]) <= 1
