"""Karpenter ``scheduling/suite_test.go``: Describe "VolumeUsage", the CSI attach-limit Its (and its Context
"CSIMigration").

A node's CSINode says how many volumes each CSI driver can attach to it (``allocatable.count``); an existing node
takes a pending pod only while the distinct claims of each driver stay within that count
(``nodewright.state.volumeusage``, ``ExistingNodeState.exceeds_volume_limits``). Karpenter registers its first
node by provisioning a pod and then applying the CSINode; here that node is given as an existing Node with its
bound pod and CSINode, the state Karpenter's second ``ExpectProvisioned`` starts from.
"""

from __future__ import annotations

from typing import Any

from .kit import Z1, claim_volume, node, nodepool, persistent_volume, pod, pvc, run, storage_class

EBS = "ebs.csi.aws.com"
IN_TREE_EBS = "kubernetes.io/aws-ebs"


def _limits(ebs: int, other: int | None = None) -> dict[str, Any]:
    drivers = [{"name": EBS, "nodeID": "id-n1", "allocatable": {"count": ebs}}]
    if other is not None:
        drivers.append({"name": "other-provider", "nodeID": "id-n1", "allocatable": {"count": other}})
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
            "spec": {"drivers": drivers}}


def _with_claims(name: str, *claims: str, **kw: Any) -> dict[str, Any]:
    return pod(name, cpu="10m", volumes=[claim_volume(c) for c in claims], **kw)


def _ephemeral(name: str, storage_class_name: str | None, **kw: Any) -> dict[str, Any]:
    """A pod with generic ephemeral volume ``tmp`` (its claim is ``<name>-tmp``)."""
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    return pod(name, cpu="10m", volumes=[{"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": spec}}}], **kw)


def _created(doc: dict[str, Any], timestamp: str) -> dict[str, Any]:
    doc["metadata"]["creationTimestamp"] = timestamp
    return doc


def _on_new_node_only(d: Any, name: str) -> bool:
    return d.where(name)[0] == "new" and len(d.claims) == 1


def test_launch_multiple_nodes_for_volume_limits():
    # Describe("VolumeUsage") It("should launch multiple nodes if required due to volume limits")
    docs: list[Any] = [node("n1"), pod("initial", cpu="10m", node_name="n1"), _limits(10),
                       storage_class("my-storage-class", zones=[Z1], provisioner=EBS)]
    for i in range(6):
        docs += [pvc(f"claim-a-{i}", storage_class_name="my-storage-class"),
                 pvc(f"claim-b-{i}", storage_class_name="my-storage-class"),
                 _with_claims(f"p{i}", f"claim-a-{i}", f"claim-b-{i}")]
    d = run(nodepool(), docs)
    on_n1 = [f"p{i}" for i in range(6) if d.where(f"p{i}") == ("existing", "n1")]
    # 10 attachable EBS volumes hold 5 pods of 2 claims; the sixth needs a second node.
    assert len(on_n1) == 5 and len(d.claims) == 1
    assert all(d.scheduled(f"p{i}") for i in range(6))


def test_single_node_when_pods_share_a_claim():
    # Describe("VolumeUsage") It("should launch a single node if all pods use the same PVC")
    docs = [node("n1", instance_type="m5.8xlarge"), pod("initial", cpu="10m", node_name="n1"), _limits(10),
            storage_class("my-storage-class", zones=[Z1], provisioner=EBS),
            persistent_volume("my-volume", zones=[Z1]), pvc("my-claim", storage_class_name="my-storage-class",
                                                            volume_name="my-volume")]
    ps = [_with_claims(f"p{i}", "my-claim") for i in range(100)]
    d = run(nodepool(), docs, ps)
    assert not d.claims and all(d.where(p) == ("existing", "n1") for p in ps)


def test_shared_claim_counts_once_against_a_limit_of_one():
    # Describe("VolumeUsage") It("should launch a single node if all pods use the same PVC"), at the edge: a
    # limit of one volume, already taken by a bound pod of the same claim.
    docs = [node("n1"), _with_claims("initial", "my-claim", node_name="n1"), _limits(1),
            persistent_volume("my-volume", zones=[Z1]), pvc("my-claim", volume_name="my-volume")]
    ps = [_with_claims(f"p{i}", "my-claim") for i in range(5)]
    d = run(nodepool(), docs, ps)
    assert not d.claims and all(d.where(p) == ("existing", "n1") for p in ps)


def test_nfs_volumes_not_counted():
    # Describe("VolumeUsage") It("should not fail for NFS volumes")
    pv = persistent_volume("my-volume", zones=[Z1], storage_class_name="nfs")
    del pv["spec"]["csi"]
    pv["spec"]["nfs"] = {"server": "fake.server", "path": "/some/path"}
    docs = [node("n1"), pod("initial", cpu="10m", node_name="n1"), _limits(1), pv,
            pvc("my-claim", storage_class_name="", volume_name="my-volume")]
    ps = [_with_claims(f"p{i}", "my-claim", "my-claim") for i in range(5)]
    d = run(nodepool(), docs, ps)
    assert not d.claims and all(d.where(p) == ("existing", "n1") for p in ps)


def test_ephemeral_volume_specified_storage_class():
    # Describe("VolumeUsage") It("should launch nodes for pods with ephemeral volume using the specified storage class name")
    docs = [node("n1"), _limits(1, other=10),
            storage_class("my-storage-class", zones=[Z1], provisioner=EBS),
            storage_class("default-storage-class", zones=[Z1], provisioner="other-provider", default=True),
            _ephemeral("initial", "my-storage-class", node_name="n1"),
            pvc("initial-tmp", storage_class_name="my-storage-class"),
            _ephemeral("p", "my-storage-class"), pvc("p-tmp", storage_class_name="my-storage-class")]
    d = run(nodepool(), docs)
    assert _on_new_node_only(d, "p")


def test_ephemeral_volume_default_storage_class():
    # Describe("VolumeUsage") It("should launch nodes for pods with ephemeral volume using a default storage class")
    docs = [node("n1"), _limits(1, other=10),
            storage_class("default-storage-class", zones=[Z1], provisioner=EBS, default=True),
            _ephemeral("initial", None, node_name="n1"), pvc("initial-tmp"),
            _ephemeral("p", None), pvc("p-tmp")]
    d = run(nodepool(), docs)
    assert _on_new_node_only(d, "p")


def test_ephemeral_volume_newest_default_storage_class():
    # Describe("VolumeUsage") It("should launch nodes for pods with ephemeral volume using the newest storage class")
    older = _created(storage_class("default-storage-class", zones=[Z1], provisioner="other-provider", default=True),
                     "2026-01-01T00:00:00Z")
    newer = _created(storage_class("newer-default-storage-class", zones=[Z1], provisioner=EBS, default=True),
                     "2026-01-01T00:00:02Z")
    docs = [node("n1"), _limits(1, other=10), older, newer,
            _ephemeral("initial", None, node_name="n1"), pvc("initial-tmp"),
            _ephemeral("p", None), pvc("p-tmp")]
    d = run(nodepool(), docs)
    assert _on_new_node_only(d, "p")


def test_csi_migration_non_dynamic_claim():
    # Context("CSIMigration") It("should launch nodes for pods with non-dynamic PVC using a migrated PVC/PV")
    in_tree = persistent_volume("my-volume", zones=[Z1], storage_class_name="in-tree-storage-class")
    del in_tree["spec"]["csi"]
    in_tree["spec"]["awsElasticBlockStore"] = {"volumeID": "vol-0123456789abcdef0"}
    docs = [node("n1"), _limits(1),
            storage_class("in-tree-storage-class", zones=[Z1], provisioner=IN_TREE_EBS, default=True), in_tree,
            pvc("claim-1", storage_class_name="in-tree-storage-class", volume_name="my-volume"),
            _with_claims("initial", "claim-1", node_name="n1"),
            pvc("claim-2", storage_class_name="in-tree-storage-class"), _with_claims("p", "claim-2")]
    d = run(nodepool(), docs)
    assert _on_new_node_only(d, "p")


def test_csi_migration_ephemeral_volume():
    # Context("CSIMigration") It("should launch nodes for pods with ephemeral volume using a migrated PVC/PV")
    docs = [node("n1"), _limits(1),
            storage_class("in-tree-storage-class", zones=[Z1], provisioner=IN_TREE_EBS, default=True),
            _ephemeral("initial", "in-tree-storage-class", node_name="n1"), pvc("initial-tmp"),
            _ephemeral("p", "in-tree-storage-class"), pvc("p-tmp", storage_class_name="in-tree-storage-class")]
    d = run(nodepool(), docs)
    assert _on_new_node_only(d, "p")


def test_no_limit_without_csinode():
    # Karpenter state.Cluster.populateVolumeLimits: a node without a CSINode has no known limit.
    docs = [node("n1"), _with_claims("initial", "claim-0", node_name="n1"),
            storage_class("sc", zones=[Z1], provisioner=EBS),
            *[pvc(f"claim-{i}", storage_class_name="sc") for i in range(4)],
            *[_with_claims(f"p{i}", f"claim-{i}") for i in range(1, 4)]]
    d = run(nodepool(), docs)
    assert not d.claims and all(d.where(f"p{i}") == ("existing", "n1") for i in range(1, 4))


# Karpenter v1.15: instance-type volume attach limits on new NodeClaims (its source was not available: nodewright's
# rule, docs/karpenter-compatibility.md). m5.xlarge: EC2 MaximumEbsAttachments 27, minus the root volume = 26.

def _types(*names: str) -> dict[str, Any]:
    return {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(names)}


def _ebs_pods(count: int, prefix: str = "p") -> list[Any]:
    docs: list[Any] = [storage_class("ebs", zones=[Z1], provisioner=EBS)]
    for i in range(count):
        docs += [pvc(f"{prefix}-claim-{i}", storage_class_name="ebs"), _with_claims(f"{prefix}{i}", f"{prefix}-claim-{i}")]
    return docs


def test_new_nodeclaims_respect_the_instance_types_ebs_attach_limit():
    """m5.xlarge takes 58 pods but 26 EBS volumes: 30 pods of one claim each need two NodeClaims."""
    d = run(nodepool(families=None, requirements=[_types("m5.xlarge")]), _ebs_pods(30))
    assert all(d.scheduled(f"p{i}") for i in range(30))
    assert sorted(len(c["pods"]) for c in d.claims) == [4, 26]


def test_a_type_with_more_attachments_is_chosen_when_allowed():
    """m7i types have a dedicated limit of 32 (31 with the root volume): 30 claimed pods fit one m7i.xlarge."""
    d = run(nodepool(families=None, requirements=[_types("m5.xlarge", "m7i.xlarge")]), _ebs_pods(30))
    assert [(c["instance_type"], len(c["pods"])) for c in d.claims] == [("m7i.xlarge", 30)]


def test_pods_sharing_a_claim_count_once_on_a_new_nodeclaim():
    docs: list[Any] = [storage_class("ebs", zones=[Z1], provisioner=EBS), pvc("shared", storage_class_name="ebs")]
    d = run(nodepool(families=None, requirements=[_types("m5.xlarge")]), docs,
            [_with_claims(f"p{i}", "shared") for i in range(40)])
    assert [len(c["pods"]) for c in d.claims] == [40]
