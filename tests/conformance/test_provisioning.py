"""Karpenter ``provisioning/suite_test.go``: Describe "Provisioning" (pods and NodePools, resource limits,
daemonsets, labels, taints, NodeClaim creation, volume topology, preferential fallback, multiple NodePools,
MinValuesPolicy).

Where Karpenter reads the launched node's capacity ("a 4 vCPU / 4Gi type means the daemonset was counted"),
the port reads the NodeClaim's ``requests`` (pods plus daemonset overhead) from the decision and checks that
the chosen type holds them.
"""

from __future__ import annotations

import pytest

from .kit import (
    ARCH,
    CAPACITY_TYPE,
    GIB,
    HOSTNAME,
    INSTANCE_TYPE,
    MIB,
    NODEPOOL,
    OS,
    SIZE,
    Z1,
    Z2,
    Z3,
    ZONE,
    affinity_term,
    allocatable_of,
    claim_volume,
    daemonset,
    ec2nodeclass,
    expr,
    fits,
    node,
    nodepool,
    persistent_volume,
    pod,
    pods,
    pvc,
    req,
    run,
    run_created,
    spread,
    storage_class,
    taint,
    toleration,
    type_labels,
)

GPU = {"families": ("g4dn",), "requirements": [req(SIZE, "In", "xlarge", "2xlarge")]}


def cpu_mem(d, p) -> tuple[int, int]:
    r = d.claim_of(p)["requests"]
    return r["cpu"], r["memory"]


# Describe("Provisioning")


def test_provision_nodes():
    # It("should provision nodes")
    d = run(nodepool(), pod("p"))
    assert len(d.claims) == 1 and d.scheduled("p")


def test_provision_nodes_for_many_pods():
    # It("Should provision nodes for multiple pods")
    ps = pods(100, "p")
    d = run(nodepool(), ps)
    assert d.claims and all(d.scheduled(p) for p in ps)


def test_ignore_deleting_nodepools():
    # It("should ignore NodePools that are deleting")
    d = run(nodepool(deleting=True), pod("p"))
    assert not d.claims and "default/p" in d.unschedulable


def test_unschedulable_without_valid_nodepools():
    # It("should mark pod as unschedulable if there are no valid nodepools")
    d = run(nodepool(deleting=True), pod("p"))
    assert "default/p" in d.unschedulable


SUPPORTED = [(NODEPOOL, "default"), (ZONE, Z1), (INSTANCE_TYPE, "m5.xlarge"), (ARCH, "arm64"), (OS, "linux")]
UNSUPPORTED = [(NODEPOOL, "unknown"), (ZONE, "unknown"), (INSTANCE_TYPE, "unknown"), (ARCH, "unknown"), (OS, "unknown"),
               (CAPACITY_TYPE, "unknown"), ("foo", "bar")]


@pytest.mark.parametrize("form", ["nodeSelector", "nodeAffinity"])
def test_supported_node_constraints(form):
    # It("should provision nodes for pods with supported node selectors")
    # It("should provision nodes for pods with supported node affinities")
    def make(name, key, value):
        if form == "nodeSelector":
            return pod(name, node_selector={key: value})
        return pod(name, required=[expr(key, "In", value)])

    ok = [make(f"ok-{i}", k, v) for i, (k, v) in enumerate(SUPPORTED)]
    bad = [make(f"bad-{i}", k, v) for i, (k, v) in enumerate(UNSUPPORTED)]
    d = run(nodepool(), ok, bad)
    assert all(d.scheduled(p) for p in ok), d.unschedulable
    assert not any(d.scheduled(p) for p in bad)


def test_accelerators():
    # It("should provision nodes for accelerators")
    """Karpenter's two fake GPU vendors become NVIDIA (g4dn) and AWS Inferentia (inf1)."""
    ps = [pod("nvidia", limits={"nvidia.com/gpu": "1"}), pod("neuron", limits={"aws.amazon.com/neuron": "1"})]
    d = run(nodepool(families=("g4dn", "inf1")), ps)
    assert all(d.scheduled(p) for p in ps)


def test_max_pods_forces_nodes():
    # It("should provision multiple nodes when maxPods is set")
    """Karpenter's single-pod type is modelled with pods too large to share a c5.large (1930m allocatable)."""
    ps = pods(3, "p", cpu="1")
    d = run(nodepool(requirements=[req(INSTANCE_TYPE, "In", "c5.large")]), ps)
    assert len(d.claims) == 3 and all(d.scheduled(p) for p in ps)


def test_deleting_inflight_node_ignored():
    # It("should schedule all pods on one inflight node when node is in deleting state")
    state = [node("old", initialized=False, deleting=True)] + [pod(f"b{i}", node_name="old") for i in range(3)]
    ps = pods(2, "new")
    d = run(nodepool(), state, ps)
    assert all(d.where(p)[0] == "new" for p in ps)


SIDECAR = {"restartPolicy": "Always"}


def _container(cpu: str, mem: str, **extra) -> dict:
    return {"name": f"c-{cpu}-{mem}", "image": "busybox", **extra,
            "resources": {"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": cpu, "memory": mem}}}


@pytest.mark.parametrize(("main", "inits"), [
    # It("... with sidecar containers when initcontainer comes first")
    (("6", "2Gi"), [("10", "4Gi", {}), ("4.9", "2.9Gi", SIDECAR)]),
    # It("... when sidecar container comes first and init container resources are smaller than container resources")
    (("6", "2Gi"), [("4.9", "2.9Gi", SIDECAR), ("5", "1Gi", {})]),
    # It("... when sidecar container comes first and init container resources are bigger than container resources")
    (("5", "1Gi"), [("4.9", "2.9Gi", SIDECAR), ("6", "2Gi", {})]),
], ids=["init-first", "sidecar-first-small-init", "sidecar-first-big-init"])
def test_sidecar_effective_requests(main, inits):
    # It("should schedule based on the max resource requests of containers and initContainers with sidecar containers ...")
    """Every variant needs 10.9 vCPU and 4.9Gi (kube's effective request); the chosen type must hold it."""
    p = pod("p", containers=[_container(*main)], init_containers=[_container(c, m, **x) for c, m, x in inits])
    d = run(nodepool(), p)
    cpu, mem = cpu_mem(d, p)
    assert cpu == 10900 and mem == pytest.approx(4.9 * GIB, abs=2)
    assert fits(d.claim_of(p))


def test_pod_level_resources():
    # It("should schedule based on the pod level resources requests")
    p = pod("p", containers=[_container("5", "1Gi")],
            init_containers=[_container("6", "2Gi"), _container("4", "2Gi", **SIDECAR)],
            extra={"resources": {"requests": {"cpu": "9.9", "memory": "3.9Gi"}, "limits": {"cpu": "10", "memory": "4Gi"}}})
    d = run(nodepool(), p)
    cpu, mem = cpu_mem(d, p)
    assert cpu == 9900 and mem == pytest.approx(3.9 * GIB, abs=2)


# Context("Resource Limits")


def test_limits_exceeded_by_owned_capacity():
    # It("should not schedule when limits are exceeded")
    """The pool already owns a full 96-vCPU node, far past its 20-vCPU limit: nothing more may launch."""
    full = allocatable_of("m5.24xlarge")["cpu"]
    d = run(nodepool(limits={"cpu": "20"}), node("big", instance_type="m5.24xlarge"),
            pod("busy", cpu=f"{full}m", node_name="big"), pod("q", cpu="1"))
    assert not d.claims and "default/q" in d.unschedulable


def test_limits_met():
    # It("should schedule if limits would be met")
    d = run(nodepool(limits={"cpu": "2"}), pod("p", cpu="1.75"))
    assert d.scheduled("p")
    assert type_labels(d.claim_of("p")["instance_type"])["karpenter.k8s.aws/instance-cpu"] == "2"


def test_limits_partial():
    # It("should partially schedule if limits would be exceeded")
    ps = pods(2, "p", labels={"app": "foo"}, cpu="1.5", anti_affinity=[affinity_term(HOSTNAME, {"app": "foo"})])
    d = run(nodepool(limits={"cpu": "3"}), ps)
    assert sum(d.scheduled(p) for p in ps) == 1


def test_limits_exceeded():
    # It("should not schedule if limits would be exceeded")
    d = run(nodepool(limits={"cpu": "2"}), pod("p", cpu="2.1"))
    assert not d.claims and "default/p" in d.unschedulable


def test_limits_exceeded_gpu():
    # It("should not schedule if limits would be exceeded (GPU)")
    """A pods limit of 1 is below every GPU type's pod capacity."""
    d = run(nodepool(limits={"pods": "1"}, **GPU), pod("p", limits={"nvidia.com/gpu": "1"}))
    assert not d.claims and "default/p" in d.unschedulable


def test_limits_after_round():
    # It("should not schedule to a nodepool after a scheduling round if limits would be exceeded")
    d1 = run(nodepool(limits={"cpu": "2"}), pod("p", cpu="1.75"))
    assert d1.scheduled("p")
    d2 = run(nodepool(limits={"cpu": "2"}), d1.as_cluster("r1"), pod("q", cpu="1.75"))
    assert "default/q" in d2.unschedulable


def test_limits_nodes():
    # It("should not schedule if limits would be exceeded (node)")
    opts = {"labels": {"app": "foo"}, "cpu": "1.5", "anti_affinity": [affinity_term(HOSTNAME, {"app": "foo"})]}
    cluster: list = []
    for r, expect in enumerate([True, True, False]):
        d = run(nodepool(limits={"nodes": "2"}), cluster, pod(f"p{r}", **opts))
        assert d.scheduled(f"p{r}") == expect
        cluster = d.as_cluster(f"r{r}")


# Context("Daemonsets")

DS2 = {"cpu": "2", "memory": "2Gi"}
POD1 = {"cpu": "1", "memory": "1Gi"}


def test_daemonsets_counted():
    # It("should account for daemonsets")
    d = run(nodepool(), daemonset("ds", **DS2), pod("p", **POD1))
    assert cpu_mem(d, "p") == (3000, 3 * GIB) and fits(d.claim_of("p"))


def test_daemonset_host_ports():
    # It("should account for daemonset hostports")
    d = run(nodepool(), daemonset("ds", host_ports=[8080], **DS2), pod("p", host_ports=[8080], **POD1))
    assert not d.claims and "default/p" in d.unschedulable


def test_daemonsets_counted_with_startup_taint():
    # It("should account for daemonsets (with startup taint)")
    d = run(nodepool(startup_taints=[taint("foo.com/taint")]), daemonset("ds", **DS2), pod("p", **POD1))
    assert cpu_mem(d, "p") == (3000, 3 * GIB)


def test_daemonset_overhead_too_large():
    # It("should not schedule if daemonset overhead is too large")
    d = run(nodepool(), daemonset("ds", cpu="10000", memory="10000Gi"), pod("p"))
    assert not d.claims and "default/p" in d.unschedulable


def test_daemonset_overhead_from_its_pod():
    # It("should account for overhead using daemonset pod spec instead of daemonset spec")
    ds_pod = pod("ds-abc", cpu="2", memory="2Gi", owner=("DaemonSet", "ds"))
    d = run(nodepool(), daemonset("ds", cpu="4", memory="4Gi"), ds_pod, pod("p", node_selector={NODEPOOL: "default"}, **POD1))
    assert not d.scheduled(ds_pod)
    assert cpu_mem(d, "p") == (3000, 3 * GIB)


def test_pending_daemonset_pod_not_provisioned():
    # It("should account for overhead using daemonset pod spec instead of daemonset spec")  (its pending daemon pod)
    d = run(nodepool(), daemonset("ds", cpu="1"), pod("ds-abc", cpu="1", owner=("DaemonSet", "ds")))
    assert not d.claims


def test_daemonset_limits_as_requests_too_large():
    # It("should not schedule if resource requests are not defined and limits (requests) are too large")
    d = run(nodepool(), daemonset("ds", cpu="1", limits={"cpu": "10000", "memory": "10000Gi"}), pod("p"))
    assert not d.claims and "default/p" in d.unschedulable


def test_daemonset_init_container_max():
    # It("should schedule based on the max resource requests of containers and initContainers")
    init = {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "10000", "memory": "3Gi"}}}
    ds = daemonset("ds", cpu="1", limits={"cpu": "10000", "memory": "1Gi"}, init_containers=[init])
    d = run(nodepool(), ds, pod("p"))
    claim = d.claim_of("p")
    assert (claim["requests"]["cpu"], claim["requests"]["memory"]) == (3000, 3 * GIB) and fits(claim)


def test_daemonset_combined_max_too_large():
    # It("should not schedule if combined max resources are too large for any node")
    init = {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "10000", "memory": "10000Gi"}}}
    ds = daemonset("ds", cpu="1", limits={"cpu": "10000", "memory": "1Gi"}, init_containers=[init])
    d = run(nodepool(), ds, pod("p"))
    assert not d.claims and "default/p" in d.unschedulable


def test_daemonset_init_container_too_large():
    # It("should not schedule if initContainer resources are too large")
    init = {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "10000", "memory": "10000Gi"}}}
    d = run(nodepool(), daemonset("ds", init_containers=[init]), pod("p"))
    assert not d.claims and "default/p" in d.unschedulable


def test_daemonset_without_requests():
    # It("should be able to schedule pods if resource requests and limits are not defined")
    d = run(nodepool(), daemonset("ds"), pod("p"))
    assert d.scheduled("p")


def test_daemonset_without_toleration_ignored():
    # It("should ignore daemonsets without matching tolerations")
    d = run(nodepool(taints=[taint("foo", "bar")]), daemonset("ds", **DS2),
            pod("p", tolerations=[toleration(operator="Exists")], **POD1))
    assert cpu_mem(d, "p") == (1000, GIB)


def test_daemonset_invalid_selector_ignored():
    # It("should ignore daemonsets with an invalid selector")
    d = run(nodepool(), daemonset("ds", node_selector={"node": "invalid"}, **DS2), pod("p", **POD1))
    assert cpu_mem(d, "p") == (1000, GIB)


def test_daemonset_no_type_meets_requirements():
    # It("should ignore daemonsets when no instance types meet the daemonset requirements")
    ds = daemonset("ds", required=[expr(INSTANCE_TYPE, "In", "non-existent-instance-type")], **DS2)
    d = run(nodepool(), ds, pod("p", **POD1))
    assert cpu_mem(d, "p") == (1000, GIB)


def test_daemonset_custom_label_selector_matches_pool():
    # It("should account for daemonsets with a custom label nodeSelector that matches the nodepool")
    d = run(nodepool(labels={"purpose": "monitoring"}), daemonset("ds", node_selector={"purpose": "monitoring"}, **DS2),
            pod("p", **POD1))
    assert cpu_mem(d, "p") == (3000, 3 * GIB)


def test_daemonset_filtered_per_instance_type():
    # It("should filter out daemonsets based on instance type requirements")
    """A 10-vCPU daemonset that only runs on 4xlarge types must not inflate a large/xlarge candidate."""
    small = daemonset("small", cpu="1", required=[expr(SIZE, "In", "large", "xlarge")])
    large = daemonset("large", cpu="10", required=[expr(SIZE, "In", "4xlarge")])
    d = run(nodepool(), small, large, pod("p", **POD1))
    claim = d.claim_of("p")
    assert claim["requests"]["cpu"] == 2000
    assert type_labels(claim["instance_type"])[SIZE] in ("large", "xlarge")


def test_daemonset_not_in_unspecified_key():
    # It("should account daemonsets with NotIn operator and unspecified key")
    ds = daemonset("ds", required=[expr("foo", "NotIn", "bar")], **DS2)
    d = run(nodepool(), ds, pod("p", required=[expr(ZONE, "In", Z2)], **POD1))
    assert cpu_mem(d, "p") == (3000, 3 * GIB)


def test_daemonset_pod_hostname_affinity_removed():
    # It("should remove daemonset node hostname affinity when considering daemonset schedulability")
    """The daemonset's own pod (2 vCPU, as a LimitRange would set) pins a node by name; that pin is dropped and the
    pod's requests count on a ``foo: bar`` node."""
    ds = daemonset("ds", required=[expr("foo", "In", "bar")], cpu="4", memory="4Gi")
    ds_pod = pod("ds-abc", owner=("DaemonSet", "ds"), cpu="2", memory="2Gi",
                 extra={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                     "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-name"]}]}]}}}})
    d = run(nodepool(labels={"foo": "bar"}), ds, ds_pod, pod("p", node_selector={"foo": "bar"}, **POD1))
    assert cpu_mem(d, "p") == (3000, 3 * GIB)


def test_daemonset_multiple_node_affinity_terms():
    # It("should consider a daemonset schedulable with multiple node affinity terms")
    ds = daemonset("ds", required_terms=[[expr("foo", "In", "voo")], [expr("foo", "In", "bar")]], **DS2)
    d = run(nodepool(labels={"foo": "bar"}), ds, pod("p", **POD1))
    assert cpu_mem(d, "p") == (3000, 3 * GIB)


def test_daemonset_incompatible_preference():
    # It("should consider a daemonset schedulable with an incompatible node affinity preference")
    ds = daemonset("ds", prefer=[expr("node", "In", "invalid")], **DS2)
    d = run(nodepool(), ds, pod("p", **POD1))
    assert cpu_mem(d, "p") == (3000, 3 * GIB)


def test_daemonset_prefer_no_schedule_taint():
    # It("should consider a daemonset schedulable with a PreferNoSchedule taint")
    d = run(nodepool(taints=[taint("test", effect="PreferNoSchedule")]), daemonset("ds", **DS2), pod("p", **POD1))
    assert cpu_mem(d, "p") == (3000, 3 * GIB)


def test_daemonset_host_ports_only_where_it_runs():
    # It("should not account for daemonset hostports when daemonset would not schedule on selected node")
    """Karpenter's fake "small" size has 4 vCPU; the 4-vCPU size of the real families here is ``xlarge`` (a
    ``large`` has 2 vCPU, too small for the 2-vCPU daemonset plus the pod)."""
    big = daemonset("big", cpu="4", memory="4Gi", host_ports=[8080], required=[expr(SIZE, "In", "4xlarge")])
    small = daemonset("small", host_ports=[8081], required=[expr(SIZE, "In", "xlarge")], **DS2)
    p = pod("p", required=[expr(SIZE, "In", "xlarge")], host_ports=[8080], **POD1)
    d = run(nodepool(), big, small, p)
    claim = d.claim_of(p)
    assert type_labels(claim["instance_type"])[SIZE] == "xlarge"
    assert claim["requests"]["cpu"] == 3000 and fits(claim)


# Context("Annotations")


def test_annotate_nodes():
    # It("should annotate nodes")
    """The NodePool template's annotations go on the NodeClaim (and from it on the Node at registration)."""
    pool = nodepool()
    pool["spec"]["template"].setdefault("metadata", {})["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    d, (claim,), _ = run_created(pool, pod("p"))
    assert d.scheduled("p") and claim["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"


# Context("Labels")


def test_label_nodes():
    # It("should label nodes")
    pool = nodepool(labels={"test-key-1": "test-value-1"}, requirements=[
        req("test-key-2", "In", "test-value-2"), req("test-key-3", "NotIn", "test-value-3"),
        req("test-key-4", "Lt", "4"), req("test-key-5", "Gt", "5"), req("test-key-6", "Exists"),
        req("test-key-7", "DoesNotExist")])
    labels = run(pool, pod("p")).labels_of("p")
    assert labels[NODEPOOL] == "default"
    assert labels["test-key-1"] == "test-value-1" and labels["test-key-2"] == "test-value-2"
    assert labels["test-key-3"] != "test-value-3"
    assert int(labels["test-key-4"]) < 4 and int(labels["test-key-5"]) > 5
    assert "test-key-6" in labels and "test-key-7" not in labels


@pytest.mark.parametrize("key", ["kubernetes.io/test", "k8s.io/test"])
def test_label_nodes_kubernetes_domains(key):
    # It("should label nodes with labels in the kubernetes domains")
    d = run(nodepool(labels={key: "test-value"}), pod("p", required=[expr(key, "In", "test-value")]))
    assert d.labels_of("p")[key] == "test-value"


@pytest.mark.parametrize("key", ["subdomain.kubernetes.io/test", "subdomain.k8s.io/test"])
def test_label_nodes_kubernetes_subdomains(key):
    # It("should label nodes with labels in the subdomain from kubernetes domains")
    d = run(nodepool(labels={key: "test-value"}), pod("p", required=[expr(key, "In", "test-value")]))
    assert d.labels_of("p")[key] == "test-value"


def test_no_well_known_labels_from_not_in():
    # It("should not label nodes with well-known labels from requirements")
    d = run(nodepool(requirements=[req("foo", "In", "bar"), req("node.kubernetes.io/windows-build", "NotIn", "test-value")]),
            pod("p"))
    labels = d.labels_of("p")
    assert labels.get("node.kubernetes.io/windows-build") != "test-value" and labels["foo"] == "bar"


# Context("Taints")


def test_tolerating_pods_scheduled():
    # It("should schedule pods that tolerate taints")
    ps = [pod("equal", tolerations=[toleration("nvidia.com/gpu", "true", "NoSchedule")]),
          pod("exists-effect", tolerations=[toleration("nvidia.com/gpu", effect="NoSchedule", operator="Exists")]),
          pod("exists-key", tolerations=[toleration("nvidia.com/gpu", operator="Exists")]),
          pod("exists-all", tolerations=[toleration(operator="Exists")])]
    d = run(nodepool(taints=[taint("nvidia.com/gpu", "true")]), ps)
    assert all(d.scheduled(p) for p in ps)


# Describe("Provisioning"): the NodeClaim's terminationGracePeriod. Karpenter's "... to be the global value when
# the nodepool terminationGracePeriod is not set" sets its DefaultTerminationGracePeriod package variable, which no
# setting reaches (not applicable, README); the NodePool's own value and its absence apply as they are.


def test_termination_grace_period_unset():
    # It("should expect nodeclaim terminationGracePeriod to be the nil when the nodepool terminationGracePeriod and
    #    global terminationGracePeriod is not set")
    _, (claim,), _ = run_created(nodepool(), pod("p"))
    assert "terminationGracePeriod" not in claim["spec"]


def test_termination_grace_period_from_nodepool():
    # It("should respect terminationGracePeriod value set on the nodePool over global terminationGracePeriod")
    pool = nodepool()
    pool["spec"]["template"]["spec"]["terminationGracePeriod"] = "223h"
    _, (claim,), _ = run_created(pool, pod("p"))
    assert claim["spec"]["terminationGracePeriod"] == "223h"


# Context("NodeClaim Creation")


def test_nodeclaim_owner_reference():
    # It("should create a nodeclaim request with the correct owner reference")
    _, (claim,), pools = run_created(nodepool(), pod("p"))
    assert claim["metadata"]["ownerReferences"] == [
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default",
         "uid": pools["default"]["metadata"]["uid"], "blockOwnerDeletion": True}]


def test_nodeclaim_node_class_reference():
    # It("should create a nodeclaim request propagating the nodeClass reference")
    """Karpenter's test uses a fake node class kind; nodewright launches EC2NodeClasses only, so the port names a
    non-default one."""
    _, (claim,), _ = run_created(ec2nodeclass("gpu-class"), nodepool(node_class="gpu-class"), pod("p"))
    assert claim["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu-class"}


def test_nodeclaim_requirements():
    # It("should create a nodeclaim request with expected requirements")
    """Candidates are the pool's compatible types, cheapest first; the NodeClaim carries the pool label."""
    d = run(nodepool(families=("c5",), zones=[Z1]), pod("p"))
    claim = d.claim_of("p")
    assert claim["labels"][NODEPOOL] == "default"
    assert claim["instance_types"] and all(type_labels(t)["karpenter.k8s.aws/instance-family"] == "c5"
                                           for t in claim["instance_types"])


def test_nodeclaim_additional_requirements():
    # It("should create a nodeclaim request with additional expected requirements")
    d = run(nodepool(requirements=[req("custom-requirement-key", "In", "value"), req("custom-requirement-key2", "In", "value")]),
            pod("p"))
    labels = d.labels_of("p")
    assert labels["custom-requirement-key"] == labels["custom-requirement-key2"] == "value"


def test_nodeclaim_arch_restricts_types():
    # It("should create a nodeclaim request restricting instance types on architecture")
    d = run(nodepool(requirements=[req(ARCH, "In", "arm64")]), pod("p"))
    assert all(type_labels(t)[ARCH] == "arm64" for t in d.claim_of("p")["instance_types"])


def test_nodeclaim_os_restricts_types():
    # It("should create a nodeclaim request restricting instance types on operating system")
    """Karpenter's fake ``ios`` type does not exist in EC2; the Linux restriction is checked instead."""
    d = run(nodepool(requirements=[req(OS, "In", "linux")]), pod("p"))
    assert all(type_labels(t)[OS] == "linux" for t in d.claim_of("p")["instance_types"])


def test_nodeclaim_requests_restrict_types():
    # It("should create a nodeclaim request restricting instance types based on pod resource requests")
    d = run(nodepool(families=("m5", "g4dn")), pod("p", requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"}))
    assert {type_labels(t)["karpenter.k8s.aws/instance-family"] for t in d.claim_of("p")["instance_types"]} == {"g4dn"}


def test_nodeclaim_resource_requests():
    # It("should create a nodeclaim with resource requests")
    d = run(nodepool(**GPU), pod("p", cpu="1", memory="1Mi", requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"}))
    assert {k: v for k, v in d.claim_of("p")["requests"].items() if v} == {"cpu": 1000, "memory": MIB, "nvidia.com/gpu": 1, "pods": 1}


def test_nodeclaim_requests_with_daemon_overhead():
    # It("should create a nodeclaim with resource requests with daemon overhead")
    d = run(nodepool(), daemonset("ds", cpu="1", memory="1Mi"), pod("p", cpu="1", memory="1Mi"))
    r = d.claim_of("p")["requests"]
    assert (r["cpu"], r["memory"], r["pods"]) == (2000, 2 * MIB, 2)


def test_nodeclaim_daemon_overhead_counted_once():
    # It("should not double-count daemon overhead when multiple pods are scheduled to the same nodeclaim")
    a, b = pod("a", cpu="1", memory="1Mi"), pod("b", cpu="1", memory="1Mi")
    d = run(nodepool(families=("m5",)), daemonset("ds", cpu="1", memory="1Mi"), a, b)
    assert d.same_node(a, b)
    r = d.claim_of(a)["requests"]
    assert (r["cpu"], r["memory"], r["pods"]) == (3000, 3 * MIB, 3)


# Context("Volume Topology Requirements")

SC = storage_class("my-storage-class", zones=[Z2, Z3])


def _with_claim(name: str, claim: str, **kw):
    return pod(name, volumes=[claim_volume(claim)], **kw)


def _ephemeral(name: str, storage_class_name: str, **kw):
    vol = {"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "storageClassName": storage_class_name, "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}}}}
    return pod(name, volumes=[vol], **kw)


VOLUME_CASES = {
    # It name: (documents builder, pod name, expectation: zone string / True scheduled / False not scheduled)
    "should not schedule if invalid pvc": (lambda: [_with_claim("p", "invalid")], False),
    "should schedule with an empty storage class if the pvc is bound": (
        lambda: [persistent_volume("pv", zones=[Z1]), pvc("claim", storage_class_name="", volume_name="pv"),
                 _with_claim("p", "claim")], True),
    "should not schedule with an empty storage class if the pvc is not bound": (
        lambda: [pvc("claim", storage_class_name=""), _with_claim("p", "claim")], False),
    "should schedule with a missing storage class if the pvc is bound": (
        lambda: [persistent_volume("pv", zones=[Z1]), pvc("claim", storage_class_name="missing", volume_name="pv"),
                 _with_claim("p", "claim")], True),
    "should not schedule with a missing storage class if the pvc is not bound": (
        lambda: [pvc("claim", storage_class_name="missing"), _with_claim("p", "claim")], False),
    "should schedule to storage class zones if volume does not exist": (
        lambda: [SC, pvc("claim", storage_class_name="my-storage-class"),
                 _with_claim("p", "claim", required=[expr(ZONE, "In", Z1, Z3)])], Z3),
    "should schedule to storage class zones if volume does not exist (ephemeral volume)": (
        lambda: [SC, pvc("p-tmp", storage_class_name="my-storage-class"),
                 _ephemeral("p", "my-storage-class", required=[expr(ZONE, "In", Z1, Z3)])], Z3),
    "should not schedule if storage class zones are incompatible": (
        lambda: [SC, pvc("claim", storage_class_name="my-storage-class"),
                 _with_claim("p", "claim", required=[expr(ZONE, "In", Z1)])], False),
    "should not schedule if storage class zones are incompatible (ephemeral volume)": (
        lambda: [SC, pvc("p-tmp", storage_class_name="my-storage-class"),
                 _ephemeral("p", "my-storage-class", required=[expr(ZONE, "In", Z1)])], False),
    "should schedule to volume zones if volume already bound": (
        lambda: [SC, persistent_volume("pv", zones=[Z3]), pvc("claim", storage_class_name="my-storage-class", volume_name="pv"),
                 _with_claim("p", "claim")], Z3),
    "should schedule to volume zones if volume already bound (ephemeral volume)": (
        lambda: [SC, persistent_volume("pv", zones=[Z3]), pvc("p-tmp", storage_class_name="my-storage-class", volume_name="pv"),
                 _ephemeral("p", "my-storage-class")], Z3),
    "should not schedule if volume zones are incompatible": (
        lambda: [SC, persistent_volume("pv", zones=[Z3]), pvc("claim", storage_class_name="my-storage-class", volume_name="pv"),
                 _with_claim("p", "claim", required=[expr(ZONE, "In", Z1)])], False),
    "should not schedule if volume zones are incompatible (ephemeral volume)": (
        lambda: [SC, persistent_volume("pv", zones=[Z3]), pvc("p-tmp", storage_class_name="my-storage-class", volume_name="pv"),
                 _ephemeral("p", "my-storage-class", required=[expr(ZONE, "In", Z1)])], False),
    "should not ignore hostname affinity when using non-local path volumes": (
        lambda: [SC, persistent_volume("pv", terms=[[expr(HOSTNAME, "In", "some-other-node")]]),
                 pvc("claim", storage_class_name="my-storage-class", volume_name="pv"), _with_claim("p", "claim")], False),
}


@pytest.mark.parametrize("it", list(VOLUME_CASES))
def test_volume_topology(it):
    # It(<it>) in Context("Volume Topology Requirements")
    build, expected = VOLUME_CASES[it]
    d = run(nodepool(), build())
    if expected is False:
        assert "default/p" in d.unschedulable and not d.claims
    elif expected is True:
        assert d.scheduled("p")
    else:
        assert d.labels_of("p")[ZONE] == expected


@pytest.mark.parametrize("source", ["local", "hostPath"])
@pytest.mark.parametrize("ephemeral", [False, True], ids=["pvc", "ephemeral volume"])
def test_volume_local_hostname_affinity_ignored(source, ephemeral):
    # DescribeTable("should ignore hostname affinity scheduling when using local path volumes")
    # DescribeTable("should ignore hostname affinity scheduling when using local path volumes (ephemeral volume)")
    """A local/hostPath PV pinned to a hostname is not a reason to refuse a new node."""
    pv = persistent_volume("pv", terms=[[expr(HOSTNAME, "In", "some-node")]])
    pv["spec"].pop("csi")
    pv["spec"][source] = {"path": "/mnt/local"}
    claim = "p-tmp" if ephemeral else "claim"
    p = _ephemeral("p", "my-storage-class") if ephemeral else _with_claim("p", claim)
    d = run(nodepool(), SC, pv, pvc(claim, storage_class_name="my-storage-class", volume_name="pv"), p)
    assert d.scheduled(p)


def test_volume_zone_not_relaxed_away():
    # It("should not relax an added volume topology zone node-selector away")
    d = run(nodepool(), SC, persistent_volume("pv", zones=[Z3]), pvc("claim", storage_class_name="my-storage-class", volume_name="pv"),
            _with_claim("p", "claim", preferred=[(1, [expr(ZONE, "In", Z1)])]))
    assert d.labels_of("p")[ZONE] == Z3


# Context("Preferential Fallback"): "should not relax the final term", "should relax multiple terms", "should relax
# all node affinity terms" and "should relax to use lighter weights" repeat the scheduling suite's Its and are
# ported once, in test_constraints.py.


def test_fallback_prefer_no_schedule_after_affinity():
    # It("should tolerate PreferNoSchedule taint only after trying to relax Affinity terms")
    t = taint("foo", "bar", "PreferNoSchedule")
    d = run(nodepool(taints=[t]), pod("p", preferred=[(1, [expr(ZONE, "In", "invalid")]), (1, [expr(INSTANCE_TYPE, "In", "invalid")])]))
    assert t in d.claim_of("p")["taints"]


@pytest.mark.parametrize("key", [ZONE, HOSTNAME])
def test_fallback_unsatisfiable_preference_shares_node(key):
    # DescribeTable("should ignore node preferredDuringSchedulingIgnoredDuringExecution affinity")
    a = pod("a", labels={"app": "foo"}, cpu="2")
    b = pod("b", labels={"app": "baz"}, cpu="1", prefer=[expr(key, "In", "value-1")])
    d = run(nodepool(families=("m5",)), a, b)
    assert d.same_node(a, b)


# Context("Preferential Fallback") / Context("Ignore Preferences"): Karpenter's PREFERENCE_POLICY=Ignore.

IGNORE = {"PREFERENCE_POLICY": "Ignore"}


def _zone_pods() -> tuple[dict, list[dict]]:
    """A 2-vCPU pod pinned to zone 1 and two 3.5-vCPU pods pinned to zone 2 (they fill a c6g.2xlarge / m5.2xlarge,
    so a third pod there would need a bigger or another node)."""
    return (pod("z1", labels={"app": "foo"}, node_selector={ZONE: Z1}, cpu="2"),
            pods(2, "z2", labels={"app": "bar"}, node_selector={ZONE: Z2}, cpu="3.5"))


def test_ignore_node_affinity_preferences():
    # It("should ignore node affinity preferences")
    """Karpenter checks the pod shares zone 1's node; nodewright packs for cost, so the port checks the intent:
    the zone-2 preference no longer pulls the pod to zone 2 (with Respect it lands there)."""
    z1, z2 = _zone_pods()
    p = pod("p", labels={"app": "baz"}, cpu="1", prefer=[expr(ZONE, "In", Z2)])
    assert run(nodepool(), z1, z2, p).labels_of(p)[ZONE] == Z2
    assert run(nodepool(), z1, z2, p, settings=IGNORE).labels_of(p)[ZONE] == Z1


@pytest.mark.parametrize("key", [ZONE, HOSTNAME])
def test_ignore_schedule_anyway_spread(key):
    # DescribeTable("should ignore topologySpreadConstraint preferences")
    ps = pods(5, "p", labels={"app": "foo"}, spreads=[spread(key, when="ScheduleAnyway", labels={"app": "foo"})])
    assert run(nodepool(), ps).node_count(ps) > 1
    assert run(nodepool(), ps, settings=IGNORE).node_count(ps) == 1


@pytest.mark.parametrize("key", [ZONE, HOSTNAME])
def test_ignore_pod_anti_affinity_preferences(key):
    # DescribeTable("should ignore pod anti-affinity preferences")
    ps = pods(5, "p", labels={"app": "foo"}, preferred_anti_affinity=[(1, affinity_term(key, {"app": "foo"}))])
    assert run(nodepool(), ps).node_count(ps) > 1
    assert run(nodepool(), ps, settings=IGNORE).node_count(ps) == 1


@pytest.mark.parametrize("key", [ZONE, HOSTNAME])
def test_ignore_pod_affinity_preferences(key):
    # DescribeTable("should ignore pod affinity preferences")
    """As for node affinity: with Respect the pod follows the ``app: bar`` pods to zone 2; ignored, the cheapest
    room is in zone 1."""
    z1, z2 = _zone_pods()
    p = pod("p", labels={"app": "baz"}, cpu="1", preferred_affinity=[(1, affinity_term(key, {"app": "bar"}))])
    assert run(nodepool(), z1, z2, p).labels_of(p)[ZONE] == Z2
    assert run(nodepool(), z1, z2, p, settings=IGNORE).labels_of(p)[ZONE] == Z1


# Context("Multiple NodePools")


def test_explicit_nodepool():
    # It("should schedule to an explicitly selected NodePool")
    d = run(nodepool("chosen"), nodepool("other"), pod("p", node_selector={NODEPOOL: "chosen"}))
    assert d.claim_of("p")["nodepool"] == "chosen"


def test_nodepool_by_labels():
    # It("should schedule to a NodePool by labels")
    d = run(nodepool("labelled", labels={"foo": "bar"}), nodepool("other"), pod("p", node_selector={"foo": "bar"}))
    assert d.claim_of("p")["nodepool"] == "labelled"


def test_prefer_no_schedule_pool_avoided():
    # It("should not match NodePool with PreferNoSchedule taint when other NodePool match")
    d = run(nodepool("a-tainted", taints=[taint("foo", "bar", "PreferNoSchedule")]), nodepool("b-plain"), pod("p"))
    assert d.claim_of("p")["nodepool"] == "b-plain"


def test_weighted_nodepools():
    # It("should schedule to the nodepool with the highest priority always")
    ps = pods(3, "p")
    d = run(nodepool("none"), nodepool("twenty", weight=20), nodepool("hundred", weight=100), ps)
    assert {d.claim_of(p)["nodepool"] for p in ps} == {"hundred"}


def test_explicit_nodepool_beats_weight():
    # It("should schedule to explicitly selected nodepool even if other nodePools are higher priority")
    d = run(nodepool("target"), nodepool("twenty", weight=20), nodepool("hundred", weight=100),
            pod("p", node_selector={NODEPOOL: "target"}))
    assert d.claim_of("p")["nodepool"] == "target"


# Context("StaticNodePool")


#: Karpenter's StaticNodePool suite runs with the StaticCapacity gate on (off by default).
STATIC_GATE = {"FEATURE_GATES": "StaticCapacity=true"}


def _static(name: str, replicas: int, **kw) -> dict:
    """A static NodePool (``spec.replicas``): nodewright's static controller keeps that many NodeClaims."""
    doc = nodepool(name, **kw)
    doc["spec"]["replicas"] = replicas
    return doc


def test_static_nodepool_creates_no_nodeclaims_for_pods():
    # It("should not create NodeClaims for StaticNodePool")
    """Karpenter's test runs the provisioner alone, so the pod stays pending. ``decide`` also runs the static
    controller first (its two replicas exist, in flight), so the pod may use one of them; the intent holds: the
    provisioner launches no NodeClaim from a static pool."""
    d = run(_static("static", 2, families=("m5",)), pod("p"), settings=STATIC_GATE)
    assert d.claims == []
    kind, ref = d.where("p")
    assert kind == "existing" and ref.startswith("static-")


def test_static_and_dynamic_nodepools():
    # It("should still provision dynamic NodeClaims when there are both Static and Dynamic NodePools")
    """The static replica (in flight, any m5 size, so it counts as its smallest, m5.large) holds one 1-vCPU
    pod; every NodeClaim launched for the others comes from the dynamic pool."""
    ps = pods(4, "p", cpu="1")
    d = run(_static("static", 1, families=("m5",)), nodepool("dynamic"), ps, settings=STATIC_GATE)
    assert d.claims and {c["nodepool"] for c in d.claims} == {"dynamic"}
    assert all(d.scheduled(p) for p in ps)
    assert sum(len(c["pods"]) for c in d.claims) == 3


# Context("MinValuesPolicy")

TWO_OF_THREE = [req(INSTANCE_TYPE, "In", "c6g.large", "c6g.xlarge", "c6g.nonexistent", min_values=3)]
STRICT = {"MIN_VALUES_POLICY": "Strict"}
BEST_EFFORT = {"MIN_VALUES_POLICY": "BestEffort"}


def test_min_values_policy_strict():
    # It("should not schedule when minValues requirement is not met")  (Strict)
    d = run(nodepool(weight=100, requirements=TWO_OF_THREE), pod("p", cpu="0.9"), settings=STRICT)
    assert not d.claims and "default/p" in d.unschedulable


def test_min_values_policy_best_effort():
    # It("should schedule even when minValues requirement is not met")  (BestEffort)
    d = run(nodepool(weight=100, requirements=TWO_OF_THREE), pod("p", cpu="0.9"), settings=BEST_EFFORT)
    claim = d.claim_of("p")
    assert claim["instance_type"] == "c6g.large" and set(claim["instance_types"]) == {"c6g.large", "c6g.xlarge"}


def test_min_values_policy_relax_before_fallback():
    # It("should relax minValues before falling back to other nodepools")
    plain = nodepool("plain", weight=10, requirements=[req(INSTANCE_TYPE, "In", "c6g.large", "c6g.xlarge")])
    d = run(nodepool(weight=100, requirements=TWO_OF_THREE), plain, pod("p", cpu="0.9"), settings=BEST_EFFORT)
    assert d.claim_of("p")["nodepool"] == "default"


def test_min_values_policy_higher_weight_when_relaxing():
    # It("should choose nodepool with higher weight when relaxing minValues")
    lighter = nodepool("lighter", weight=10, requirements=TWO_OF_THREE)
    d = run(nodepool(weight=100, requirements=TWO_OF_THREE), lighter, pod("p", cpu="0.9"), settings=BEST_EFFORT)
    assert d.claim_of("p")["nodepool"] == "default"


ZONE_MIN3 = {"families": ("c6g",), "zones": None,
             "requirements": [req(ZONE, "In", Z1, Z2, "us-east-1e", min_values=3)]}


def test_min_values_policy_zone_strict():
    # It("should not schedule when zone minValues requirement is not met")  (Strict)
    """No Graviton type is offered in us-east-1e, so only two of the three zones can be met."""
    d = run(nodepool(**ZONE_MIN3), pod("p", cpu="0.9"), settings=STRICT)
    assert not d.claims and "default/p" in d.unschedulable


def test_min_values_policy_zone_best_effort():
    # It("should schedule even when zone minValues requirement is not met")  (BestEffort)
    d = run(nodepool(**ZONE_MIN3), pod("p", cpu="0.9"), settings=BEST_EFFORT)
    assert d.claim_of("p")["zone"] in (Z1, Z2)


def test_min_values_policy_type_and_zone_best_effort():
    # It("should schedule when minValues requirement is not met")  (instance type and zone, BestEffort)
    pool = nodepool(families=("c6g",), zones=None, requirements=[*TWO_OF_THREE, req(ZONE, "In", Z1, Z2, "us-east-1e", min_values=3)])
    d = run(pool, pod("p", cpu="0.9"), settings=BEST_EFFORT)
    assert d.scheduled("p")
