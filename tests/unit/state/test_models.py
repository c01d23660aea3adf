"""The one conversion layer (``nodewright.state.models``): cluster objects -> models, cached per object version."""

from __future__ import annotations

import logging

import pytest

from nodewright.api import labels as L
from nodewright.cloud.instancetype import InstanceType, Offering, Overhead, PriceIndex
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.state.cluster import snapshot
from nodewright.state.models import ClusterModels, models_for


def _pod(name: str, cpu: str, node: str = "") -> dict:
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_a_pod_converts_once_per_resource_version() -> None:
    cluster = InMemoryCluster(lambda: 0.0)
    models = models_for(cluster)
    first = cluster.create(r.PODS, _pod("web", "250m"))
    assert models.pod(first) is models.pod(dict(first))  # same uid + resourceVersion: same model, even a copy
    changed = cluster.patch(r.PODS, "web", {"metadata": {"labels": {"app": "web"}}}, "default")
    assert models.pod(changed) is not models.pod(first)
    assert models.pod(changed).labels == {"app": "web"}  # type: ignore[union-attr]
    assert snapshot(cluster).models is models  # every snapshot of a cluster shares its cache


def test_pending_drops_the_binding_and_invalid_objects_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    cluster = InMemoryCluster(lambda: 0.0)
    models = models_for(cluster)
    bound = cluster.create(r.PODS, _pod("moving", "1", node="leaving"))
    bad = cluster.create(r.PODS, _pod("bad", "lots"))
    assert models.pod(bound).node_name == "leaving"  # type: ignore[union-attr]
    assert models.pod(bound, pending=True).node_name == ""  # type: ignore[union-attr]
    with caplog.at_level(logging.DEBUG, logger="nodewright.state"):
        assert models.pods([bound, bad]) == [models.pod(bound)]
    assert "ignoring Pod default/bad: spec.containers[0].resources.requests.cpu: 'lots' is not a quantity" in caplog.text
    assert models.requests(bad) == {}


def test_two_clusters_never_share_conversions() -> None:
    # Same seed, same uids and resourceVersions, different objects: the cache belongs to one cluster.
    one, two = InMemoryCluster(lambda: 0.0, seed=1), InMemoryCluster(lambda: 0.0, seed=1)
    a = one.create(r.PODS, _pod("p", "1"))
    b = two.create(r.PODS, _pod("p", "2"))
    assert a["metadata"]["uid"] == b["metadata"]["uid"]
    assert models_for(one).requests(a)["cpu"] == 1000 and models_for(two).requests(b)["cpu"] == 2000


def test_nodepools_raise_for_the_caller_to_report() -> None:
    models = ClusterModels()
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p", "resourceVersion": "1"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                            "name": "default"},
                                           "requirements": [{"key": "k", "operator": "Sideways"}]}}}}
    with pytest.raises(NodewrightValidationError, match="requirements"):
        models.nodepool(pool)
    with pytest.raises(NodewrightValidationError):
        models.nodepool_spec(pool)


def test_a_nodes_price_is_one_lookup() -> None:
    def offering(zone: str, ct: str, price: float) -> Offering:
        return Offering(zone=zone, capacity_type=ct, price=price)

    it = InstanceType(name="m5.large", labels={}, capacity={"cpu": 2000}, overhead=Overhead(),
                      offerings=(offering("us-east-1a", "on-demand", 0.096), offering("us-east-1a", "spot", 0.04),
                                 offering("us-east-1a", "spot", 0.03)))
    shadow = InstanceType(name="m5.large", labels={}, capacity={"cpu": 2000}, overhead=Overhead(),
                          offerings=(offering("us-east-1a", "on-demand", 9.0),))
    index = PriceIndex([it, shadow])
    labels = {L.INSTANCE_TYPE: "m5.large", L.ZONE: "us-east-1a", L.CAPACITY_TYPE: "spot"}
    assert index.price(labels) == 0.03  # the cheapest offering of the node's zone and capacity type
    assert index.price({**labels, L.CAPACITY_TYPE: "on-demand"}) == 0.096  # the first type of a name wins
    assert index.price({**labels, L.ZONE: "us-east-1b"}) == 0.0  # unknown offering: never looks like a saving
    assert index.price({}) == 0.0


def test_volume_zones_are_kept_apart_from_the_pods_own_node_affinity() -> None:
    """A bound volume's zones become ``Affinity.volume_required`` (Karpenter's ``PodData.VolumeRequirements``):
    the pod's own required terms stay as written, and a node must meet both (own term major, then volume)."""
    models = ClusterModels()
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-b"},
          "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
              {"matchExpressions": [{"key": L.ZONE, "operator": "In", "values": ["us-east-1b"]}]}]}}}}
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "data", "namespace": "default",
                        "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
           "spec": {"volumeName": "pv-b"}, "status": {"phase": "Bound"}}
    models.use_volumes([pvc], [pv], [])
    pod = _pod("db", "1")
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["amd64"]}]},
                              {"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["arm64"]}]}]}}}
    model = models.pod(pod)
    assert model is not None
    zone_b = (L.ZONE, "In", ("us-east-1b",))
    assert [t.expressions for t in model.affinity.node_required] == [((L.ARCH, "In", ("amd64",)),),
                                                                      ((L.ARCH, "In", ("arm64",)),)]
    assert [t.expressions for t in model.affinity.volume_required] == [(zone_b,)]
    assert [t.expressions for t in model.affinity.placement_terms()] == [((L.ARCH, "In", ("amd64",)), zone_b),
                                                                          ((L.ARCH, "In", ("arm64",)), zone_b)]
    # Without volumes the placement terms are the pod's own.
    plain = models.pod(_pod("web", "1"))
    assert plain is not None and plain.affinity.placement_terms() == ()
