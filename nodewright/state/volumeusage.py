"""CSI volume attach limits: which volumes a pod attaches, per CSI driver, and how many a node can attach.

Karpenter's ``scheduling.VolumeUsage`` (kubernetes-sigs/karpenter ``pkg/scheduling/volumeusage.go``) and
``state.Cluster.populateVolumeLimits``: a node's ``storage.k8s.io/v1`` CSINode (same name as the node) lists, per
driver, ``spec.drivers[].allocatable.count``, the volumes that driver can attach to it. A pod's claim volumes are
counted per driver by claim identity (``namespace/claim``), so pods sharing one claim count it once.

Driver of a claim (Karpenter ``ResolveDriver``): a bound claim's PersistentVolume ``spec.csi.driver`` (an in-tree
``awsElasticBlockStore`` volume counts for ``ebs.csi.aws.com``; any other volume, NFS included, is not counted); an
unbound claim's StorageClass ``provisioner``, an in-tree plugin name translated to its CSI driver as CSIMigration
does (``kubernetes.io/aws-ebs`` -> ``ebs.csi.aws.com``). A claim, volume or class that is missing, and a claim
with no class, count nothing (Karpenter logs and ignores them; the claim's own validation lives in
:class:`~nodewright.state.models.VolumeTopology`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nodewright.kube.objects import Obj

if TYPE_CHECKING:
    from nodewright.state.models import VolumeTopology

log = logging.getLogger("nodewright.state")

#: In-tree volume plugin -> its CSI driver (k8s.io/csi-translation-lib ``plugins``, the names CSIMigration uses).
IN_TREE_TO_CSI: Mapping[str, str] = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
EBS_CSI_DRIVER = IN_TREE_TO_CSI["kubernetes.io/aws-ebs"]

#: One attached volume: (CSI driver, ``namespace/claim``).
Attachment = tuple[str, str]


def claim_name(pod: Mapping[str, Any], volume: Mapping[str, Any]) -> str | None:
    """The claim a pod volume mounts: ``persistentVolumeClaim.claimName``, or ``<pod>-<volume>`` for a generic
    ephemeral volume (the name kube gives the claim it creates); None for other volume types."""
    if isinstance(volume.get("persistentVolumeClaim"), Mapping):
        return str(volume["persistentVolumeClaim"].get("claimName") or "")
    if "ephemeral" in volume:
        return f"{(pod.get('metadata') or {}).get('name')}-{volume.get('name')}"
    return None


def claim_driver(claim: Mapping[str, Any], index: VolumeTopology) -> str:
    """The CSI driver that attaches ``claim`` ('' when none is known; see module docstring)."""
    spec = claim.get("spec") or {}
    if spec.get("volumeName"):
        pv = index.pvs.get(str(spec["volumeName"]))
        pv_spec = (pv or {}).get("spec") or {}
        if isinstance(pv_spec.get("csi"), Mapping):
            return str(pv_spec["csi"].get("driver") or "")
        return EBS_CSI_DRIVER if "awsElasticBlockStore" in pv_spec else ""
    name = spec.get("storageClassName")
    if name is None:
        name = index.default_class
    sc = index.classes.get(str(name)) if name else None
    provisioner = str((sc or {}).get("provisioner") or "")
    return IN_TREE_TO_CSI.get(provisioner, provisioner)


def pod_attachments(pod: Mapping[str, Any], spec: Mapping[str, Any], index: VolumeTopology) -> frozenset[Attachment]:
    """The volumes ``pod`` attaches through a CSI driver (Karpenter ``GetVolumes``): ``(driver, namespace/claim)``."""
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        return frozenset()
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    out = set()
    for volume in volumes:
        name = claim_name(pod, volume) if isinstance(volume, Mapping) else None
        claim = index.pvcs.get((namespace, name)) if name else None
        driver = claim_driver(claim, index) if claim is not None else ""
        if driver:
            out.add((driver, f"{namespace}/{name}"))
    return frozenset(out)


def csinode_limits(csinodes: Sequence[Obj]) -> dict[str, dict[str, int]]:
    """Node name -> {CSI driver: volumes it can attach} from CSINode objects (Karpenter
    ``populateVolumeLimits``). A driver without ``allocatable.count`` has no limit; a count that is not a
    non-negative integer is skipped with one warning line naming the CSINode and field."""
    out: dict[str, dict[str, int]] = {}
    for csinode in csinodes:
        node = str((csinode.get("metadata") or {}).get("name") or "")
        limits = out.setdefault(node, {})
        drivers = (csinode.get("spec") or {}).get("drivers") or []
        for i, driver in enumerate(drivers if isinstance(drivers, list) else []):
            if not isinstance(driver, Mapping) or not driver.get("name"):
                continue
            allocatable = driver.get("allocatable")
            count = allocatable.get("count") if isinstance(allocatable, Mapping) else None
            if count is None:
                continue
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                log.warning("CSINode %s: spec.drivers[%d].allocatable.count is %r, not a non-negative integer; "
                            "no volume limit for driver %s", node, i, count, driver["name"])
                continue
            limits[str(driver["name"])] = count
    return out

