"""Issue 14 behaviours that no ``It`` of the four Karpenter files pins down on its own.

Each test states Karpenter's (or kube-scheduler's) rule in a small scenario. Those nodewright does not follow
yet are ``xfail(strict=True)`` with the issue bullet as reason, so they flip to failures (and must be unmarked)
the day the fix lands.
"""

from __future__ import annotations

import pytest

from .kit import (
    CAPACITY_TYPE,
    CPU_LABEL,
    FAMILY,
    GIB,
    HOSTNAME,
    INSTANCE_TYPE,
    NODEPOOL,
    SIZE,
    Z1,
    ZONE,
    affinity_term,
    allocatable_of,
    daemonset,
    ec2nodeclass,
    expr,
    fits,
    limit_range,
    namespace,
    node,
    nodepool,
    pod,
    pods,
    req,
    run,
    type_labels,
)


def _reason(bullet: str) -> str:
    return f"issue 14: {bullet}"


# --- DaemonSets -----------------------------------------------------------------------------------


def test_daemonset_selecting_the_nodepool_label_counts():
    """A DaemonSet pinned to ``karpenter.sh/nodepool: default`` runs on that pool's nodes."""
    d = run(nodepool(), daemonset("ds", cpu="1", node_selector={NODEPOOL: "default"}), pod("p", cpu="1"))
    assert d.claim_of("p")["requests"]["cpu"] == 2000


def test_daemonset_for_large_types_does_not_inflate_a_small_one():
    """The issue's case: a DaemonSet that only runs where ``instance-cpu Gt 8`` does not count on a 4-vCPU type,
    so a 3-vCPU pod gets an xlarge (as one pool-wide overhead, 5 vCPU, it would need an 8-vCPU type)."""
    ds = daemonset("big-agent", cpu="2", memory="1Gi", required=[expr(CPU_LABEL, "Gt", "8")])
    claim = run(nodepool(), ds, pod("p", cpu="3", memory="1Gi")).claim_of("p")
    assert type_labels(claim["instance_type"])[CPU_LABEL] == "4"
    assert claim["requests"]["cpu"] == 3000 and fits(claim)


def test_daemonset_host_port_blocks_a_new_node_with_the_reason():
    d = run(nodepool(), daemonset("exporter", cpu="100m", host_ports=[9100]), pod("p", host_ports=[9100]))
    assert not d.claims
    assert d.unschedulable["default/p"] == ('incompatible with nodepool "default", host port 9100/TCP is taken by '
                                            "daemonset default/exporter on every instance type it allows")


def test_limit_range_defaults_pending_pod_requests():
    d = run(nodepool(), limit_range(default_request={"cpu": "3", "memory": "1Gi"}), pod("p"))
    assert d.claim_of("p")["requests"]["cpu"] == 3000


def test_limit_range_defaults_daemonset_requests():
    d = run(nodepool(), limit_range(default_request={"cpu": "2"}), daemonset("ds"), pod("p", cpu="1"))
    assert d.claim_of("p")["requests"]["cpu"] == 3000


# --- Topology -------------------------------------------------------------------------------------


def test_namespace_selector_matches_namespace_labels():
    target = pod("target", namespace="team-a", labels={"security": "s2"})
    follower = pod("follower", affinity=[affinity_term(HOSTNAME, {"security": "s2"},
                                                       namespace_selector={"matchLabels": {"team": "a"}})])
    d = run(nodepool(), namespace("team-a", {"team": "a"}), target, follower)
    assert d.same_node(target, follower)


def test_succeeded_pod_frees_its_node():
    """A Succeeded pod on a node holds no resources: the pending pod fits in its place."""
    full = allocatable_of("c5.large")["cpu"]
    d = run(nodepool(), node("n1", instance_type="c5.large"), pod("done", cpu=f"{full}m", node_name="n1", phase="Succeeded"),
            pod("p", cpu="1"))
    assert d.where("p") == ("existing", "n1")


def test_terminating_pending_pod_ignored():
    """A pending pod that is itself terminating needs no capacity."""
    d = run(nodepool(), pod("going", cpu="1", deleting=True))
    assert not d.claims


# --- Requirements and labels ----------------------------------------------------------------------

@pytest.mark.parametrize(("key", "values"), [
    pytest.param(ZONE, None, id="zone"),
    pytest.param(CAPACITY_TYPE, ("spot", "on-demand"), id="capacity-type"),
    pytest.param(FAMILY, None, id="family"),
    pytest.param("team", ("a", "b"), id="custom"),
])
def test_min_values_on_any_key(key, values):
    extra = [req(key, "In", *values, min_values=1)] if values else [req(key, "Exists", min_values=1)]
    d = run(nodepool(requirements=extra), pod("p"))
    assert d.scheduled("p")


def test_exists_requirement_labels_the_node():
    d = run(nodepool(requirements=[req("team", "Exists")]), pod("p", required=[expr("team", "Exists")]))
    assert "team" in d.labels_of("p")


# --- Capacity that is already there ---------------------------------------------------------------


def test_limits_count_inflight_nodes():
    busy = allocatable_of("m5.xlarge")["cpu"]
    d = run(nodepool(limits={"cpu": "4"}), node("n1", initialized=False), pod("busy", cpu=f"{busy}m", node_name="n1"),
            pod("p", cpu="1"))
    assert not d.claims


# --- Storage and resources ------------------------------------------------------------------------

ROOT_100G = [{"deviceName": "/dev/xvda", "rootVolume": True,
              "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": True}}]


def test_ephemeral_storage_from_root_volume():
    """A 100Gi root volume leaves 100Gi - 1Gi kube-reserved - 10% eviction = 89Gi (Karpenter ``types.go``)."""
    d = run(nodepool(), ec2nodeclass(blockDeviceMappings=ROOT_100G), pod("p", requests={"ephemeral-storage": "50Gi"}))
    assert d.scheduled("p")
    assert run(nodepool(), ec2nodeclass(blockDeviceMappings=ROOT_100G),
               pod("p", requests={"ephemeral-storage": "89Gi"})).scheduled("p")
    assert "default/p" in run(nodepool(), ec2nodeclass(blockDeviceMappings=ROOT_100G),
                              pod("p", requests={"ephemeral-storage": "90Gi"})).unschedulable
    # The default 20Gi volume: 17Gi is the most a pod can ask (20 - 1 - 2).
    assert "default/p" in run(nodepool(), ec2nodeclass(), pod("p", requests={"ephemeral-storage": "50Gi"})).unschedulable


def test_ephemeral_storage_from_bottlerocket_data_volume():
    """Bottlerocket's kubelet lives on /dev/xvdb (its data volume), not on the 4Gi OS volume /dev/xvda."""
    mappings = [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi"}},
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "80Gi"}}]
    d = run(nodepool(), ec2nodeclass(amiSelectorTerms=[{"alias": "bottlerocket@latest"}], blockDeviceMappings=mappings),
            pod("p", requests={"ephemeral-storage": "60Gi"}))
    assert d.scheduled("p")


def test_ephemeral_storage_from_instance_store_raid0():
    """c5d.2xlarge has one 200 GB NVMe disk: under RAID0 ephemeral storage is 200e9 bytes less 1Gi and 10%."""
    pool = nodepool(families=("c5d",), requirements=[req(SIZE, "In", "2xlarge")])
    d = run(pool, ec2nodeclass(instanceStorePolicy="RAID0"), pod("p", requests={"ephemeral-storage": "150Gi"}))
    assert d.claim_of("p")["instance_type"] == "c5d.2xlarge"
    assert "default/p" in run(pool, ec2nodeclass(), pod("p", requests={"ephemeral-storage": "150Gi"})).unschedulable


def test_kubelet_max_pods_in_simulate():
    ps = pods(30, "tiny", cpu="1m")
    d = run(nodepool(requirements=[req(INSTANCE_TYPE, "In", "m5.xlarge")]), ec2nodeclass(kubelet={"maxPods": 10}), ps)
    assert all(len(c["pods"]) <= 10 for c in d.claims) and len(d.claims) >= 3


def test_kubelet_kube_reserved_in_simulate():
    """kubeReserved replaces the EKS cpu tiers (Karpenter ``kubeReservedResources``): 3 vCPU reserved leave an
    m5.xlarge exactly 1 vCPU and an m5.large nothing, so a 1.5-vCPU pod needs an m5.2xlarge (5 vCPU left)."""
    d = run(nodepool(families=("m5",)), ec2nodeclass(kubelet={"kubeReserved": {"cpu": "3"}}), pod("p", cpu="1500m"))
    assert d.claim_of("p")["instance_type"] == "m5.2xlarge"
    # The same pod without the setting fits an m5.large (1930m allocatable).
    assert run(nodepool(families=("m5",)), ec2nodeclass(), pod("p", cpu="1500m")).claim_of("p")["instance_type"] == "m5.large"


def test_kubelet_system_reserved_in_simulate():
    """systemReserved adds to kube-reserved: 6Gi of it leave an m5.large (8 GiB) too little for a 2Gi pod."""
    d = run(nodepool(families=("m5",)), ec2nodeclass(kubelet={"systemReserved": {"memory": "6Gi"}}),
            pod("p", cpu="100m", memory="2Gi"))
    assert d.claim_of("p")["instance_type"] == "m5.xlarge"


def test_kubelet_eviction_hard_in_simulate():
    """evictionHard ``memory.available: 50%`` keeps half of the memory: a 3500Mi pod no longer fits an m5.large
    (7578Mi - 3789Mi evicted - 574Mi kube-reserved = 3215Mi)."""
    d = run(nodepool(families=("m5",)), ec2nodeclass(kubelet={"evictionHard": {"memory.available": "50%"}}),
            pod("p", cpu="100m", memory="3500Mi"))
    assert d.claim_of("p")["instance_type"] == "m5.xlarge"


def test_unsupported_kind_is_skipped():
    ingress = {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "web"}, "spec": {}}
    d = run(nodepool(), ingress, pod("p"))
    assert d.scheduled("p")


def test_sidecar_counts_once_alongside_containers():
    """Native sidecars run for the pod's lifetime, so they add to the containers (kube's effective request)."""
    sidecar = {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}
    d = run(nodepool(), pod("p", cpu="1", memory="1Gi", init_containers=[sidecar]))
    r = d.claim_of("p")["requests"]
    assert (r["cpu"], r["memory"]) == (1500, 2 * GIB)


def test_zone_pinned_pod_lands_in_zone():
    """A sanity check of the zone stand-ins: us-east-1a is test-zone-1."""
    d = run(nodepool(), pod("p", node_selector={ZONE: Z1}))
    assert d.claim_of("p")["zone"] == Z1


# DaemonSets on existing nodes (Karpenter v1.14 ``scheduling/existingnode.go`` NewExistingNode): every existing
# node keeps room for the DaemonSets that run on its labels and taints, minus the DaemonSet pods already bound.


def _existing_daemon_case(*extra):
    free = allocatable_of("m5.xlarge")["cpu"]  # 3920m on an empty initialized m5.xlarge
    return run(nodepool(), node("n1"), *extra, pod("p", cpu=f"{free - 500}m"))


def test_initialized_node_keeps_room_for_a_daemonset_not_running_yet():
    """A 1-vCPU DaemonSet should run on n1 but has no pod there yet: n1 has 2.92 vCPU for others, so a pod asking
    3.42 vCPU needs a new node. Without the DaemonSet it takes n1."""
    assert _existing_daemon_case().where("p") == ("existing", "n1")
    assert _existing_daemon_case(daemonset("agent", cpu="1", memory="1Gi")).where("p")[0] == "new"


def test_initialized_node_daemonset_already_running_is_not_counted_twice():
    """The DaemonSet's pod is bound to n1 (asking 250m, below the template's 1 vCPU after admission): nothing more
    is held back, the pod's own 250m is in use, so 3.67 vCPU stay free and a 3.42-vCPU pod fits."""
    ds_pod = pod("agent-n1", cpu="250m", memory="1Gi", node_name="n1", owner=("DaemonSet", "agent"))
    d = _existing_daemon_case(daemonset("agent", cpu="1", memory="1Gi"), ds_pod)
    assert d.where("p") == ("existing", "n1")


def test_initialized_node_reserves_only_daemonsets_that_run_on_it():
    """A DaemonSet that selects another node label, or does not tolerate the node's taint, keeps no room."""
    elsewhere = daemonset("gpu-agent", cpu="1", node_selector={"accelerator": "nvidia"})
    intolerant = daemonset("plain", cpu="1")
    tolerated = pod("p", cpu=f"{allocatable_of('m5.xlarge')['cpu'] - 500}m",
                    tolerations=[{"key": "dedicated", "operator": "Exists"}])
    tainted = node("n1", taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    assert _existing_daemon_case(elsewhere).where("p") == ("existing", "n1")
    d = run(nodepool(), tainted, intolerant, tolerated)
    assert d.where("p") == ("existing", "n1")
