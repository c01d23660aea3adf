"""What the PersistentVolume controller does to the volumes of an input before any pod schedules: statically
bound pairs become Bound.

A user's manifests bind a claim to a pre-provisioned volume by naming each other -- the claim's
``spec.volumeName`` and the volume's ``spec.claimRef`` (namespace and name) -- and never carry the
``pv.kubernetes.io/bind-completed`` annotation the controller writes when it finishes the bind
(kube-controller-manager ``pkg/controller/volume/persistentvolume`` ``syncUnboundClaim``/``bind``). Without it
the scheduler's volume rules (:class:`nodewright.state.models.VolumeTopology`) see a claim that is "not bound
yet" and its pods launch nothing. ``simulate -f`` and scenario replay apply this first, as the cluster would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: The annotation the PersistentVolume controller sets on a claim once it is bound.
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def _meta(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    return _map(doc, "metadata")


def _map(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, Mapping) else {}


def bind_static_claims(docs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``docs`` with every statically bound PersistentVolumeClaim/PersistentVolume pair marked Bound.

    A pair: a claim whose ``spec.volumeName`` names a volume of the input whose ``spec.claimRef`` names the
    claim back (namespace, default ``default``, and name); or a volume whose ``claimRef`` names a claim of the
    input that names no volume (a pre-bound volume: the claim gets ``volumeName``). The claim gains
    ``pv.kubernetes.io/bind-completed: "yes"`` and ``status.phase: Bound``, the volume ``status.phase: Bound``.
    A claim naming a volume without a ``claimRef`` back stays unbound, as Karpenter's scheduler treats a claim
    whose bind has not completed (its "should handle pods with PVCs with defined volumeName" case); one naming a
    volume bound to another claim too. Changed documents are copies; the order is kept.
    """
    claims: dict[tuple[str, str], int] = {}
    volumes: dict[str, int] = {}
    for index, doc in enumerate(docs):
        name = _meta(doc).get("name")
        if not isinstance(name, str):
            continue
        if doc.get("kind") == "PersistentVolumeClaim":
            claims[(str(_meta(doc).get("namespace") or "default"), name)] = index
        elif doc.get("kind") == "PersistentVolume":
            volumes[name] = index
    out = list(docs)
    for volume_name, v_index in volumes.items():
        pv = docs[v_index]
        spec = _map(pv, "spec")
        ref = _map(spec, "claimRef") or None
        wanted = (str(ref.get("namespace") or "default"), str(ref.get("name"))) if ref else None
        pair = None
        for key, c_index in claims.items():
            named = _map(docs[c_index], "spec").get("volumeName")
            if named == volume_name and wanted == key:
                pair = (key, c_index)
                break
            if not named and wanted == key:
                pair = (key, c_index)
        if pair is None:
            continue
        _, c_index = pair
        pvc = docs[c_index]
        annotations = {**_map(_meta(pvc), "annotations"), BIND_COMPLETED: "yes"}
        out[c_index] = {**pvc, "metadata": {**_meta(pvc), "annotations": annotations},
                        "spec": {**_map(pvc, "spec"), "volumeName": volume_name},
                        "status": {**_map(pvc, "status"), "phase": "Bound"}}
        out[v_index] = {**pv, "status": {**_map(pv, "status"), "phase": "Bound"}}
    return out
