"""Karpenter ``scheduling/suite_test.go``: Describe "VolumeUsage" (the volume-topology Its),
"NodePool requirements instance filtering" and "Dynamic Resource Allocation (DRA)".

Volume topology (PersistentVolume node affinity, claims, StorageClasses) is converted into the pod's node
requirements by ``nodewright.state.models.VolumeTopology``. The CSI attach-limit Its of "VolumeUsage" are in
``test_volume_limits.py``.
"""

from __future__ import annotations

import pytest

from .kit import (
    ARCH,
    HOSTNAME,
    INSTANCE_TYPE,
    Z1,
    Z2,
    ZONE,
    affinity_term,
    claim_volume,
    daemonset,
    expr,
    nodepool,
    persistent_volume,
    pod,
    pvc,
    req,
    run,
    storage_class,
)

APP = {"app": "multi-zone-app"}


def _with_claims(name: str, *claims: str, **kw):
    return pod(name, volumes=[claim_volume(c) for c in claims], **kw)


def _ephemeral(name: str, storage_class_name: str | None):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    return pod(name, volumes=[{"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}])


def test_pv_with_multiple_zones():
    # It("should schedule pods using a PV with multiple zones")
    terms = [[expr(ZONE, "In", Z1)], [expr(ZONE, "In", Z2)]]
    docs = []
    for i in range(2):
        docs += [persistent_volume(f"pv-{i}", terms=terms), pvc(f"claim-{i}", volume_name=f"pv-{i}"),
                 _with_claims(f"p{i}", f"claim-{i}", labels=APP, anti_affinity=[affinity_term(ZONE, APP)])]
    d = run(nodepool(), docs)
    zones = {d.labels_of("p0")[ZONE], d.labels_of("p1")[ZONE]}
    assert zones == {Z1, Z2}


def test_storage_class_with_multiple_zone_terms():
    # It("should schedule pods using a StorageClass with multiple zones in AllowedTopologies")
    sc = storage_class("multi-zone-sc", allowed_topologies=[
        {"matchLabelExpressions": [{"key": ZONE, "values": [Z1]}]},
        {"matchLabelExpressions": [{"key": ZONE, "values": [Z2]}]}])
    docs = [sc]
    for i in range(2):
        docs += [pvc(f"claim-{i}", storage_class_name="multi-zone-sc"),
                 _with_claims(f"p{i}", f"claim-{i}", labels=APP, anti_affinity=[affinity_term(ZONE, APP)])]
    d = run(nodepool(), docs)
    assert {d.labels_of("p0")[ZONE], d.labels_of("p1")[ZONE]} == {Z1, Z2}


def test_multi_volume_topology_pruning():
    # It("should schedule pods when a valid multi-volume topology alternative remains after pruning disjoint branches")
    key = "special"
    sc_a = storage_class("a", allowed_topologies=[{"matchLabelExpressions": [{"key": key, "values": ["required"]}]},
                                                  {"matchLabelExpressions": [{"key": key, "values": ["optional"]}]}])
    sc_b = storage_class("b", allowed_topologies=[
        {"matchLabelExpressions": [{"key": ZONE, "values": [Z1]}, {"key": key, "values": ["optional"]}]},
        {"matchLabelExpressions": [{"key": ZONE, "values": [Z2]}, {"key": key, "values": ["required"]}]}])
    d = run(nodepool(requirements=[req(key, "In", "required", "optional")]), sc_a, sc_b,
            pvc("claim-a", storage_class_name="a"), pvc("claim-b", storage_class_name="b"),
            _with_claims("p", "claim-a", "claim-b"))
    labels = d.labels_of("p")
    assert labels[ZONE] in (Z1, Z2)
    assert labels[key] == ("optional" if labels[ZONE] == Z1 else "required")


@pytest.mark.parametrize("source", ["local", "hostPath"])
def test_pv_hostname_alternative_dropped(source):
    # DescribeTable("should preserve unconstrained PV alternatives after ignoring hostname affinity")
    pv = persistent_volume("pv", terms=[[expr(HOSTNAME, "In", "existing-host")], [expr(ZONE, "In", "invalid-zone")]])
    pv["spec"].pop("csi")
    pv["spec"][source] = {"path": "/mnt/data"}
    d = run(nodepool(), pv, pvc("claim", volume_name="pv"), _with_claims("p", "claim"))
    assert d.scheduled("p")


IMMEDIATE_SC = storage_class("default-storage-class", zones=[Z1], binding="Immediate")
WFFC_SC = storage_class("default-storage-class", zones=[Z1])


def test_unbound_immediate_volume():
    # It("should not launch nodes for pod with unbound volume for volumeBindingMode immediate")
    d = run(nodepool(), IMMEDIATE_SC, pvc("claim", storage_class_name="default-storage-class"), _with_claims("p", "claim"))
    assert not d.claims and "default/p" in d.unschedulable


def test_deleting_pvc():
    # It("should not launch nodes for pod with deleting persistentVolumeClaim")
    claim = pvc("claim", storage_class_name="default-storage-class")
    claim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    d = run(nodepool(), WFFC_SC, claim, _with_claims("p", "claim"))
    assert not d.claims and "default/p" in d.unschedulable


def test_pv_marked_for_deletion():
    # It("should not launch nodes for pod with bound persistentVolume that is marked for deletion")
    pv = persistent_volume("pv", driver="other-provider")
    pv["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    d = run(nodepool(), pv, pvc("p-tmp", volume_name="pv"), _ephemeral("p", None))
    assert not d.claims


def test_lost_pvc():
    # It("should not launch nodes for pod with Lost persistentVolumeClaim")
    d = run(nodepool(), WFFC_SC, pvc("claim", storage_class_name="default-storage-class", phase="Lost"),
            _with_claims("p", "claim"))
    assert not d.claims and "default/p" in d.unschedulable


@pytest.mark.parametrize("bind_completed", [False, True], ids=["bind-completed missing", "bind-completed present"])
def test_pvc_with_volume_name(bind_completed):
    # DescribeTable("should handle pods with PVCs with defined volumeName")
    claim = pvc("claim", storage_class_name="default-storage-class", volume_name="pv")
    if not bind_completed:
        del claim["metadata"]["annotations"]
    d = run(nodepool(), WFFC_SC, persistent_volume("pv", driver="other-provider"), claim, _with_claims("p", "claim"))
    assert d.scheduled("p") is bind_completed


@pytest.mark.parametrize("sc_name", ["non-existent", ""], ids=["non-existent storage class", "explicitly disabled"])
def test_ephemeral_without_storage_class_bound(sc_name):
    # DescribeTable("should launch nodes for pods with ephemeral volume without a storage class when the PVC is bound")
    d = run(nodepool(), pvc("p-tmp", storage_class_name=sc_name, volume_name="test-pv"), persistent_volume("test-pv"),
            _ephemeral("p", sc_name))
    assert len(d.claims) == 1


@pytest.mark.parametrize("sc_name", ["non-existent", ""], ids=["non-existent storage class", "explicitly disabled"])
def test_ephemeral_without_storage_class_unbound(sc_name):
    # DescribeTable("should not launch nodes for pods with ephemeral volume without a storage class when the PVC is unbound")
    d = run(nodepool(), _ephemeral("p", sc_name))
    assert not d.claims


@pytest.mark.parametrize("variant", ["pvc", "storage class", "volume name"])
def test_valid_pods_scheduled_beside_invalid_pvc(variant):
    # It("should schedule valid pods when a pod with an invalid pvc is encountered (pvc)")
    # It("should schedule valid pods when a pod with an invalid pvc is encountered (storage class)")
    # It("should schedule valid pods when a pod with an invalid pvc is encountered (volume name)")
    docs = {"pvc": [], "storage class": [pvc("claim", storage_class_name="invalid-storage-class")],
            "volume name": [pvc("claim", volume_name="invalid-volume-name")]}[variant]
    claim = "invalid" if variant == "pvc" else "claim"
    d = run(nodepool(), docs, _with_claims("invalid-pod", claim), pod("valid"))
    assert d.scheduled("valid") and not d.scheduled("invalid-pod")


# Describe("NodePool requirements instance filtering")


def test_filtered_out_by_unknown_instance_type():
    # It("should return appropriate pod error when no available instance types exist")
    d = run(nodepool(requirements=[req(INSTANCE_TYPE, "In", "non-existent-instance-type")]),
            pod("test-pod-filtered", cpu="32", memory="256Gi", limits={"cpu": "32", "memory": "256Gi"}))
    assert not d.claims and "default/test-pod-filtered" in d.unschedulable


def test_filtered_out_for_many_pods():
    # It("should handle multiple pods when requirements filter out all instance types")
    ps = [pod(f"pod-{i}") for i in range(1, 4)]
    d = run(nodepool(requirements=[req(ARCH, "In", "non-existent-arch")]), ps)
    assert not d.claims and set(d.unschedulable) == {f"default/pod-{i}" for i in range(1, 4)}


def test_filtered_out_by_conflicting_requirements():
    # It("should handle conflicting requirements that eliminate all instance types")
    d = run(nodepool(requirements=[req(ARCH, "In", "amd64"), req(ARCH, "In", "arm64")]), pod("conflicting-requirements-pod"))
    assert not d.claims and "default/conflicting-requirements-pod" in d.unschedulable


def test_filtered_out_by_zones():
    # It("should handle zone requirements that filter out all instance types")
    d = run(nodepool(zones=["non-existent-zone-1", "non-existent-zone-2"]), pod("zone-filtered-pod"))
    assert not d.claims and "default/zone-filtered-pod" in d.unschedulable


# Describe("Dynamic Resource Allocation (DRA)")

def _claim_ref(name: str) -> dict:
    return {"name": name, "resourceClaimName": f"{name}-rc"}


@pytest.mark.parametrize("case", [
    pytest.param("container", id="container with resource claims"),
    pytest.param("init", id="init container with resource claims"),
    pytest.param("both", id="container and init container resource claims"),
    pytest.param("none", id="non-DRA pod"),
])
def test_dra_pods(case):
    # DescribeTable("should handle DRA pods correctly")
    claims = {"container": ["gpu-claim"], "init": ["gpu-init-claim"], "both": ["gpu-claim", "storage-init-claim"],
              "none": []}[case]
    containers = [{"name": "app", "image": "nginx", "resources": {
        "requests": {"cpu": "1", "memory": "1Gi"}, **({"claims": [{"name": c} for c in claims]} if claims else {})}}]
    extra = {"resourceClaims": [_claim_ref(c) for c in claims]} if claims else None
    d = run(nodepool(), pod("p", containers=containers, extra=extra))
    assert bool(d.claims) is (case == "none")
    if case != "none":  # Karpenter's DRA error (IGNORE_DRA_REQUESTS=true, its default)
        assert "Dynamic Resource Allocation" in d.unschedulable["default/p"]


def test_dra_daemonset_adds_no_overhead():
    # It("should handle DaemonSet pods with DRA requirements based on IgnoreDRARequests flag value")
    """Only Karpenter's default half (IGNORE_DRA_REQUESTS=true; nodewright has no such setting): a DaemonSet whose
    pods claim a DRA device reserves nothing, so its 3 vCPU do not push a 1-vCPU pod off a 2-vCPU type."""
    containers = [{"name": "agent", "image": "agent", "resources": {"requests": {"cpu": "3"}, "claims": [{"name": "gpu"}]}}]
    ds = daemonset("dra-daemon", containers=containers, extra={"resourceClaims": [_claim_ref("gpu")]})
    d = run(nodepool(), ds, pod("app", cpu="1"))
    assert d.claim_of("app")["instance_type"].endswith(".large")
    plain = daemonset("plain", cpu="3")
    assert not run(nodepool(), plain, pod("app", cpu="1")).claim_of("app")["instance_type"].endswith(".large")
