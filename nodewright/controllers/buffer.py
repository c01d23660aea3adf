"""CapacityBuffers (gate ``CapacityBuffer``): headroom held as virtual pods, as Karpenter's alpha support does.

Karpenter main (2026-08-20) ``pkg/controllers/capacitybuffer``, ``pkg/state/virtualpods`` and
``pkg/controllers/provisioning/buffers.go``; ``designs/capacity-buffers.md`` is the RFC. One
:class:`CapacityBufferController` per controller manager, run before the provisioner each pass:

1. **Resolve** (:meth:`CapacityBufferController.reconcile`): every ``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer
   is resolved through :func:`nodewright.state.buffers.resolve` into its chunk count and virtual pods, and its
   ``status`` is written as Karpenter writes it -- ``replicas``, ``podTemplateRef`` / ``podTemplateGeneration``
   (podTemplateRef buffers), ``provisioningStrategy`` and the ``ReadyForProvisioning`` condition (``Resolved``,
   ``PodTemplateNotFound``, ``ScalableRefNotFound``, ``ResolutionFailed``) -- patched only when it changes. A
   buffer that does not resolve is logged once per message (one line naming object and field).
2. **Provision**: the provisioner appends :meth:`~CapacityBufferController.virtual_pods` to the pending pods of each
   scheduling run (they are ordinary :class:`~nodewright.scheduling.Pod` models: the scheduler is unchanged). They
   fill existing and in-flight room first; where that is not enough the run plans new NodeClaims for them. They
   are never nominated nor bound, so kube-scheduler sees the room as free and real pods land in it at once. A run
   is started for the buffers alone when a buffer changed, when the room a virtual pod held was taken (real pods
   bound there) and otherwise every :attr:`~CapacityBufferController.refresh` seconds (Karpenter: the buffer
   controller's 30 s requeue triggers the provisioner).
3. **Status after each run** (:meth:`~CapacityBufferController.observe`): the ``Provisioning`` condition --
   ``True/FitsExistingCapacity`` when every virtual pod fit existing capacity, ``False/RequiresNewCapacity``
   (``"2/5 virtual pods required new capacity, 0 failed"``) otherwise, ``False/NotReadyForProvisioning`` and
   ``False/BufferEmpty`` for buffers that are not ready or want zero chunks.
4. **Consolidation guard**: :meth:`~CapacityBufferController.held` gives, per initialized Node, the virtual pods
   the last run placed there; the disruption controller adds them to that node's pods in its view. So an
   otherwise empty node holding buffer pods is not empty (Karpenter ``HasBufferPods``), a candidate's buffer pods
   must fit elsewhere in every simulation (Karpenter includes them in ``SimulateScheduling``), and room a buffer
   holds on other nodes is not offered to a candidate's pods. PodDisruptionBudgets never count virtual pods.

Gate off (the default, as in Karpenter): buffers are ignored; the first pass lists CapacityBuffers once and, if
any exist, warns once that they are ignored (a missing CRD is silent).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nodewright.api import capacitybuffer as cb
from nodewright.controllers.common import Context, log
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import Obj, condition, meta, name_of, set_condition
from nodewright.quantities import fits, subtract
from nodewright.scheduling import Pod, SchedulingResult
from nodewright.state.buffers import Resolution, buffer_of, is_virtual, resolve
from nodewright.state.cluster import ClusterState
from nodewright.state.models import object_version, versions
from nodewright.state.pods import holds_node

_LOOKUP_KINDS = {"PodTemplate": r.PODTEMPLATES, "Deployment": r.DEPLOYMENTS, "StatefulSet": r.STATEFULSETS,
                 "ReplicaSet": r.REPLICASETS}


@dataclass
class Placement:
    """Where one run put a buffer's virtual pods: on existing (or in-flight) capacity, new NodeClaims, nowhere."""

    existing: int = 0
    new: int = 0
    failed: int = 0


class CapacityBufferController:
    """See the module docstring.

    Args:
        ctx: dependencies.
        enabled: the ``CapacityBuffer`` feature gate.
        refresh: seconds between buffer-only provisioning runs (Karpenter's 30 s requeue).
    """

    def __init__(self, ctx: Context, enabled: bool = False, refresh: float = 30.0) -> None:
        self.ctx = ctx
        self.enabled = enabled
        self.refresh = refresh
        #: ``namespace/name`` -> the last resolution.
        self.resolutions: dict[str, Resolution] = {}
        #: ``namespace/name`` -> (inputs' versions, resolution): a buffer is resolved again only when it, the object
        #: it references or a LimitRange changed (a 1,000-chunk buffer is not rebuilt every pass).
        self._resolved: dict[str, tuple[Any, Resolution]] = {}
        #: buffer uid -> the status this controller last wrote (see :meth:`_status`).
        self._written: dict[str, dict[str, Any]] = {}
        #: Node name -> the virtual pods the last run placed on it (initialized Nodes only).
        self._held: dict[str, list[Pod]] = {}
        self._reported: dict[str, str] = {}
        self._warned_ignored: set[str] = set()
        #: Set when the gate-off warning was given (or must not be: the replay's deliberate run without buffers).
        self.warned_disabled = False
        self._fingerprint: tuple[Any, ...] = ()
        self._dirty = False
        self.last_run = -math.inf

    # --- resolution --------------------------------------------------------------------------------------

    def _lookup(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.ctx.cluster.get(_LOOKUP_KINDS[kind], name, namespace)

    def reconcile(self, state: ClusterState) -> None:
        """Resolve every buffer and write its resolution status (see module docstring)."""
        if not self.enabled:
            self._warn_disabled()
            return
        buffers = self.ctx.cluster.list(r.CAPACITYBUFFERS)
        resolutions: dict[str, Resolution] = {}
        limitranges = versions(state.limitranges)
        for doc in buffers:
            resolution = self._resolve(doc, state, limitranges)
            resolutions[resolution.key] = resolution
            self._report(resolution)
            self._write_resolution(doc, resolution)
        for key in [k for k in self._reported if k not in resolutions]:
            del self._reported[key]
        for key in [k for k in self._resolved if k not in resolutions]:
            del self._resolved[key]
        live = {str(meta(doc).get("uid") or "") for doc in buffers}
        for uid in [u for u in self._written if u not in live]:
            del self._written[uid]
        self.resolutions = resolutions
        fingerprint = tuple(sorted((k, v.ready, tuple(p.key for p in v.pods), tuple(p.shape_key for p in v.pods[:1]))
                                   for k, v in resolutions.items()))
        if fingerprint != self._fingerprint:
            self._fingerprint = fingerprint
            self._dirty = True
        if self._held and not self._still_held(state):
            self._dirty = True

    def _resolve(self, doc: Obj, state: ClusterState, limitranges: Any) -> Resolution:
        """:func:`~nodewright.state.buffers.resolve`, reused while the buffer (its spec: status writes do not
        count), the object it references and the LimitRanges are unchanged."""
        key = f"{meta(doc).get('namespace') or 'default'}/{name_of(doc)}"
        spec = doc.get("spec") or {}
        ref = spec.get("podTemplateRef") or spec.get("scalableRef") or {}
        kind = "PodTemplate" if spec.get("podTemplateRef") else str((ref or {}).get("kind") or "")
        target = self._lookup(kind, key.split("/", 1)[0], str(ref.get("name"))) \
            if kind in _LOOKUP_KINDS and isinstance(ref, dict) and ref.get("name") else None
        inputs = (meta(doc).get("uid"), meta(doc).get("generation"), repr(spec),
                  None if target is None else object_version(target), limitranges)
        cached = self._resolved.get(key)
        if cached is not None and cached[0] == inputs:
            return cached[1]
        resolution = resolve(doc, state.models, self._lookup, state.limitranges)
        self._resolved[key] = (inputs, resolution)
        return resolution

    def _warn_disabled(self) -> None:
        if self.warned_disabled:
            return
        self.warned_disabled = True
        try:
            existing = self.ctx.cluster.list(r.CAPACITYBUFFERS)
        except KubeError as err:  # no CRD (404) or no access: nothing to warn about
            log.debug("not listing CapacityBuffers: %s", err)
            return
        if existing:
            names = ", ".join(sorted(f"{meta(b).get('namespace')}/{name_of(b)}" for b in existing)[:5])
            log.warning("%d CapacityBuffer(s) ignored (%s): the CapacityBuffer feature gate is off; set "
                        "FEATURE_GATES=CapacityBuffer=true (chart: settings.featureGates.capacityBuffer) to "
                        "hold their headroom", len(existing), names)

    def _report(self, resolution: Resolution) -> None:
        for sentence in resolution.ignored:
            if sentence not in self._warned_ignored:
                self._warned_ignored.add(sentence)
                log.warning("%s", sentence, extra={"capacitybuffer": resolution.key})
        message = "" if resolution.ready else resolution.message
        if self._reported.get(resolution.key) == message:
            return
        self._reported[resolution.key] = message
        if message:
            log.error("%s", message, extra={"capacitybuffer": resolution.key, "reason": resolution.reason})

    def _status(self, doc: Obj) -> dict[str, Any]:
        """The buffer's status to build the next write on: what this controller last wrote (the informer's copy may
        not show it yet, and a merge patch replaces the whole conditions list), else the object's."""
        written = self._written.get(str(meta(doc).get("uid") or ""))
        return dict(written if written is not None else doc.get("status") or {})

    def _write_resolution(self, doc: Obj, resolution: Resolution) -> None:
        status = self._status(doc)
        wanted = dict(status)
        now = self.ctx.clock()
        conditions = set_condition(list(status.get("conditions") or []), cb.READY_FOR_PROVISIONING,
                                   resolution.ready, now, resolution.reason, resolution.message)
        wanted["conditions"] = _with_generation(conditions, cb.READY_FOR_PROVISIONING, meta(doc).get("generation"))
        wanted["provisioningStrategy"] = resolution.strategy
        if resolution.ready:
            wanted["replicas"] = resolution.replicas
            if resolution.pod_template is not None:
                wanted["podTemplateRef"] = {"name": resolution.pod_template}
                wanted["podTemplateGeneration"] = resolution.pod_template_generation
            else:
                wanted["podTemplateRef"] = None
                wanted["podTemplateGeneration"] = None
        self._patch(doc, status, wanted)

    def _patch(self, doc: Obj, status: Mapping[str, Any], wanted: dict[str, Any]) -> None:
        if {k: v for k, v in wanted.items() if v is not None} == {k: v for k, v in status.items() if v is not None}:
            return
        name, namespace = name_of(doc), meta(doc).get("namespace")
        try:
            self.ctx.cluster.patch_status(r.CAPACITYBUFFERS, name, wanted, namespace)
        except NotFoundError:
            self._written.pop(str(meta(doc).get("uid") or ""), None)
            return
        except KubeError as err:
            log.warning("patching CapacityBuffer %s/%s status failed: %s (retrying next pass)", namespace, name, err,
                        extra={"capacitybuffer": f"{namespace}/{name}"})
            return
        uid = str(meta(doc).get("uid") or "")
        if uid:
            self._written[uid] = {k: v for k, v in wanted.items() if v is not None}

    # --- provisioning ------------------------------------------------------------------------------------

    def virtual_pods(self) -> list[Pod]:
        """Every ready buffer's virtual pods, by buffer key (read-only: shared across runs)."""
        if not self.enabled:
            return []
        return [p for key in sorted(self.resolutions) for p in self.resolutions[key].pods
                if self.resolutions[key].ready]

    def wants_run(self, now: float) -> bool:
        """Whether a provisioning run is due for the buffers alone (see module docstring, step 2)."""
        if not self.enabled or not any(res.ready and res.pods for res in self.resolutions.values()):
            return False
        return self._dirty or now - self.last_run >= self.refresh

    def next_due(self, now: float) -> float | None:
        """Epoch seconds of the next buffer-only run (None without buffers to hold)."""
        if not self.enabled or not any(res.ready and res.pods for res in self.resolutions.values()):
            return None
        return now if self._dirty else max(now, self.last_run + self.refresh)

    def observe(self, result: SchedulingResult, state: ClusterState, now: float) -> None:
        """After a provisioning run that included the virtual pods: the ``Provisioning`` conditions and where the
        buffers hold room (see module docstring, steps 3 and 4)."""
        if not self.enabled:
            return
        self.last_run = now
        self._dirty = False
        placements: dict[str, Placement] = {}
        held: dict[str, list[Pod]] = {}
        for target, pods in result.existing.items():
            registered = target in state.nodes
            for pod in pods:
                if is_virtual(pod):
                    placements.setdefault(buffer_of(pod), Placement()).existing += 1
                    if registered:
                        held.setdefault(target, []).append(pod)
        for plan in result.new_nodeclaims:
            for pod in plan.pods:
                if is_virtual(pod):
                    placements.setdefault(buffer_of(pod), Placement()).new += 1
        virtual = {p.key: p for p in self.virtual_pods()}
        for key in result.unschedulable:
            failed = virtual.get(key)
            if failed is not None:
                placements.setdefault(buffer_of(failed), Placement()).failed += 1
        self._held = held
        for doc in self.ctx.cluster.list(r.CAPACITYBUFFERS):
            key = f"{meta(doc).get('namespace') or 'default'}/{name_of(doc)}"
            resolution = self.resolutions.get(key)
            if resolution is None:
                continue
            self._write_provisioning(doc, resolution, placements.get(key), now)

    def _write_provisioning(self, doc: Obj, resolution: Resolution, placed: Placement | None, now: float) -> None:
        """Karpenter ``computeProvisioningCondition``."""
        if not resolution.ready:
            ok, reason, message = False, cb.REASON_NOT_READY, "Buffer is not ReadyForProvisioning"
        elif resolution.replicas == 0:
            ok, reason, message = False, cb.REASON_EMPTY, "Buffer has zero desired replicas"
        elif placed is None:
            return
        elif placed.new or placed.failed:
            ok, reason = False, cb.REASON_REQUIRES_NEW
            message = (f"{placed.new}/{resolution.replicas} virtual pods required new capacity, "
                       f"{placed.failed} failed")
        elif placed.existing == resolution.replicas:
            ok, reason = True, cb.REASON_FITS_EXISTING
            message = f"All {resolution.replicas} virtual pods fit on existing capacity"
        else:
            return
        status = self._status(doc)
        current = condition({"status": status}, cb.PROVISIONING)
        if current and (current.get("status"), current.get("reason"), current.get("message")) == (
                "True" if ok else "False", reason, message):
            return
        conditions = set_condition(list(status.get("conditions") or []), cb.PROVISIONING, ok, now, reason, message)
        self._patch(doc, status, {**status, "conditions": _with_generation(conditions, cb.PROVISIONING,
                                                                            meta(doc).get("generation"))})

    # --- consolidation -----------------------------------------------------------------------------------

    def held(self) -> Mapping[str, list[Pod]]:
        """Node name -> the virtual pods holding room on it (the last run's placement; empty with the gate off)."""
        return self._held if self.enabled else {}

    def _still_held(self, state: ClusterState) -> bool:
        """Whether every Node holding virtual pods still has room for them beside its bound pods (real pods bound
        into buffer room end the hold: a refill run is due)."""
        for name, pods in self._held.items():
            node = state.nodes.get(name)
            if node is None:
                return False
            current = state.models.node(node, state.models.pods(p for p in state.pods_on(name) if holds_node(p)))
            if current is None:
                return False
            free = subtract(current.allocatable, current.requested())
            for pod in pods:
                if not fits(pod.requests, free):
                    return False
                free = subtract(free, pod.requests)
        return True


def _with_generation(conditions: Iterable[dict[str, Any]], type_: str, generation: Any) -> list[dict[str, Any]]:
    """``conditions`` with ``observedGeneration`` stamped on the ``type_`` one (Karpenter ``SetCondition``)."""
    out = []
    for cond in conditions:
        if cond.get("type") == type_ and isinstance(generation, int):
            cond = {**cond, "observedGeneration": generation}
        out.append(cond)
    return out
