"""Host ports: pods whose ports conflict never share a node, on the packing path as on Karpenter's path."""

from nodewright.scheduling import ExistingNode, HostPort, schedule

from .helpers import GIB, pod, pool, standard_types


def layout(result) -> list[tuple[str, tuple[str, ...]]]:
    return sorted((nc.instance_type.name, tuple(sorted(p.name for p in nc.pods))) for nc in result.new_nodeclaims)


def test_host_port_replicas_are_packed_with_plain_pods() -> None:
    port = (HostPort(8080),)
    pods = [pod(f"h{i}", 1500, 1024, host_ports=port) for i in range(2)] + [pod(f"p{i}", 500, 6 * 1024) for i in range(2)]
    r = schedule(pods, [], [pool()], {"default": standard_types()})
    # One replica per node, each sharing an m.large with a memory-heavy pod: $0.192/h. Placing the replicas one
    # by one first (two c.large) and packing the rest after costs $0.296/h (two c.large + one r.large).
    assert layout(r) == [("m.large", ("h0", "p0")), ("m.large", ("h1", "p1"))]
    assert round(r.total_price, 6) == 0.192
    greedy = schedule(pods, [], [pool()], {"default": standard_types()}, optimize=False)
    assert all(sum(1 for p in nc.pods if p.host_ports) <= 1 for nc in greedy.new_nodeclaims)


def test_host_port_replicas_one_per_node_on_packing_path() -> None:
    port = (HostPort(9100, "TCP"),)
    r = schedule([pod(f"h{i}", 100, 100, host_ports=port) for i in range(5)], [], [pool()], {"default": standard_types()})
    assert layout(r) == [("c.large", (f"h{i}",)) for i in range(5)]


def test_different_ports_share_a_node() -> None:
    pods = [pod("a", 500, 256, host_ports=(HostPort(80),)), pod("b", 500, 256, host_ports=(HostPort(81),))]
    r = schedule(pods, [], [pool()], {"default": standard_types()})
    assert layout(r) == [("c.large", ("a", "b"))]


def test_host_port_conflict_with_existing_node() -> None:
    bound = pod("exporter", 100, 100, host_ports=(HostPort(9100),), node_name="n1")
    node = ExistingNode("n1", {}, {"cpu": 8000, "memory": 8 * GIB, "pods": 20}, pods=[bound])
    pods = [pod("h", 100, 100, host_ports=(HostPort(9100),)), pod("plain", 100, 100)]
    r = schedule(pods, [node], [pool()], {"default": standard_types()})
    assert [p.name for p in r.existing["n1"]] == ["plain"]
    assert layout(r) == [("c.large", ("h",))]


def test_distinct_host_ips_do_not_conflict() -> None:
    # Same port on two specific addresses: no conflict, one node (these stay on the pod-by-pod path).
    pods = [pod("a", 500, 256, host_ports=(HostPort(80, host_ip="10.0.0.1"),)), pod("b", 500, 256, host_ports=(HostPort(80, host_ip="10.0.0.2"),))]
    r = schedule(pods, [], [pool()], {"default": standard_types()})
    assert layout(r) == [("c.large", ("a", "b"))]


def test_host_port_pods_fill_spare_room_of_constrained_nodeclaims_once() -> None:
    from nodewright.scheduling import Affinity, LabelSelector, PodAffinityTerm

    anti = Affinity(pod_anti_affinity_required=(PodAffinityTerm("kubernetes.io/hostname", LabelSelector((("app", "db"),))),))
    dbs = [pod(f"db{i}", 1000, 1024, labels={"app": "db"}, affinity=anti) for i in range(2)]
    hs = [pod(f"h{i}", 500, 512, host_ports=(HostPort(7000),)) for i in range(3)]
    r = schedule(dbs + hs, [], [pool()], {"default": standard_types()})
    assert r.unschedulable == {}
    for nc in r.new_nodeclaims:
        assert sum(1 for p in nc.pods if p.host_ports) <= 1
    # Each db node takes one h pod in its spare room; the third h pod gets its own node.
    assert layout(r) == [("c.large", ("db0", "h0")), ("c.large", ("db1", "h1")), ("c.large", ("h2",))]


def test_single_nodeclaim_cap_never_merges_conflicting_ports() -> None:
    # Consolidation asks for at most one NodeClaim: one node for everything is only allowed when ports permit.
    port = (HostPort(8080),)
    pods = [pod(f"h{i}", 100, 100, host_ports=port) for i in range(2)]
    r = schedule(pods, [], [pool()], {"default": standard_types()}, max_new_nodeclaims=1)
    assert layout(r) == [("c.large", ("h0",))]
    assert r.unschedulable == {"default/h1": "would need more than 1 new NodeClaim(s)"}
    plain = [pod(f"p{i}", 100, 100) for i in range(2)] + [pod("h", 100, 100, host_ports=port)]
    r = schedule(plain, [], [pool()], {"default": standard_types()}, max_new_nodeclaims=1)
    assert layout(r) == [("c.large", ("h", "p0", "p1"))] and r.unschedulable == {}
