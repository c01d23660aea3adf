"""CSI volume attach limits in the cluster model: a claim's CSI driver (Karpenter ``ResolveDriver``) and a
CSINode's counts (Karpenter ``populateVolumeLimits``)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from nodewright.state.models import VolumeTopology
from nodewright.state.volumeusage import claim_driver, csinode_limits, pod_attachments


def _pv(name: str, **source: Any) -> dict[str, Any]:
    return {"kind": "PersistentVolume", "metadata": {"name": name}, "spec": {"capacity": {"storage": "1Gi"}, **source}}


def _sc(name: str, provisioner: str, default: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {"kind": "StorageClass", "metadata": meta, "provisioner": provisioner}


def _claim(name: str, **spec: Any) -> dict[str, Any]:
    return {"kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


INDEX = VolumeTopology().updated(
    [], [_pv("csi", csi={"driver": "efs.csi.aws.com", "volumeHandle": "fs-1"}),
         _pv("in-tree", awsElasticBlockStore={"volumeID": "vol-1"}),
         _pv("nfs", nfs={"server": "10.0.0.1", "path": "/"})],
    [_sc("gp2", "kubernetes.io/aws-ebs", default=True), _sc("gp3", "ebs.csi.aws.com")])


@pytest.mark.parametrize(("spec", "driver"), [
    ({"volumeName": "csi"}, "efs.csi.aws.com"),
    ({"volumeName": "in-tree"}, "ebs.csi.aws.com"),
    ({"volumeName": "nfs"}, ""),
    ({"volumeName": "gone"}, ""),
    ({"storageClassName": "gp3"}, "ebs.csi.aws.com"),
    ({"storageClassName": "gp2"}, "ebs.csi.aws.com"),
    ({}, "ebs.csi.aws.com"),
    ({"storageClassName": ""}, ""),
    ({"storageClassName": "missing"}, ""),
], ids=["pv csi", "pv in-tree ebs", "pv nfs", "pv missing", "sc csi", "sc in-tree", "default sc", "no sc", "sc missing"])
def test_claim_driver(spec: dict[str, Any], driver: str) -> None:
    assert claim_driver(_claim("c", **spec), INDEX) == driver


def test_pod_attachments_count_a_claim_once_and_skip_other_volumes() -> None:
    index = VolumeTopology().updated([_claim("data", storageClassName="gp3"), _claim("web-0-scratch")], [],
                                     [_sc("gp3", "ebs.csi.aws.com", default=True)])
    pod = {"metadata": {"name": "web-0", "namespace": "default"}}
    spec = {"volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "b", "persistentVolumeClaim": {"claimName": "data"}},
                        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                        {"name": "tmp", "emptyDir": {}},
                        {"name": "lost", "persistentVolumeClaim": {"claimName": "not-there"}}]}
    assert pod_attachments(pod, spec, index) == {("ebs.csi.aws.com", "default/data"),
                                                 ("ebs.csi.aws.com", "default/web-0-scratch")}


def test_csinode_limits_and_bad_counts(caplog: pytest.LogCaptureFixture) -> None:
    csinode = {"metadata": {"name": "n1"}, "spec": {"drivers": [
        {"name": "ebs.csi.aws.com", "allocatable": {"count": 25}},
        {"name": "efs.csi.aws.com"},
        {"name": "bad.csi.example.com", "allocatable": {"count": "lots"}}]}}
    with caplog.at_level(logging.WARNING, logger="nodewright.state"):
        assert csinode_limits([csinode]) == {"n1": {"ebs.csi.aws.com": 25}}
    assert [r.getMessage() for r in caplog.records] == [
        "CSINode n1: spec.drivers[2].allocatable.count is 'lots', not a non-negative integer; "
        "no volume limit for driver bad.csi.example.com"]
