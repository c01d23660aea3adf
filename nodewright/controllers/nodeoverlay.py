"""NodeOverlay status: ``ValidationSucceeded`` and ``Ready`` on every NodeOverlay (Karpenter's
``nodeoverlay.controller``, ``pkg/controllers/nodeoverlay/controller.go``, main 2026-08-20).

Each pass (feature gate ``NodeOverlay`` on, some NodeOverlay exists) resolves the overlays over the NodePools'
instance types exactly as the decisions do (:func:`nodewright.controllers.common.nodepool_instance_types`, which
applies them through :class:`nodewright.cloud.overlay.OverlayStore`; cached, so a pass without changes costs a dict
lookup per pool) and writes each overlay's verdict:

- applied: ``ValidationSucceeded=True`` (reason ``ValidationSucceeded``), ``Ready=True`` (reason ``Ready``);
- invalid (runtime validation): ``ValidationSucceeded=False``, reason ``RuntimeValidation``, the field and why;
- conflict: ``ValidationSucceeded=False``, reason ``Conflict``, message ``conflict with another overlay: ...``
  naming the other overlay, the instance type and the NodePool;
- either failure: ``Ready=False``, reason ``UnhealthyDependents``, message ``ValidationSucceeded=False`` (the
  operatorpkg root condition Karpenter uses).

A status is patched only when a condition's status, reason or message changes. Gate off: nothing is written (the
store warns once that overlays are ignored), as Karpenter registers this controller only with the gate on.
"""

from __future__ import annotations

from typing import Any

from nodewright.api import labels as L
from nodewright.cloud.overlay import CONDITION_VALIDATION_SUCCEEDED
from nodewright.controllers.common import Context, log, nodepool_instance_types
from nodewright.kube import resources as r
from nodewright.kube.objects import Obj, is_deleting, set_condition
from nodewright.state.cluster import ClusterState

REASON_UNHEALTHY_DEPENDENTS = "UnhealthyDependents"


class NodeOverlayStatusController:
    """Writes each NodeOverlay's conditions from the overlay resolution of the pass (module docstring)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def reconcile(self, state: ClusterState) -> None:
        """One pass over ``state``'s NodeOverlays."""
        if not self.ctx.overlays.enabled or not state.nodeoverlays:
            return
        nodepool_instance_types(self.ctx, state, "nodeoverlay")
        verdicts = self.ctx.overlays.resolution.verdicts
        now = self.ctx.clock()
        for name, overlay in sorted(state.nodeoverlays.items()):
            verdict = verdicts.get(name)
            if verdict is None or is_deleting(overlay):
                continue
            self._write(overlay, verdict.reason, verdict.message, now)

    def _write(self, overlay: Obj, reason: str, message: str, now: float) -> None:
        status: dict[str, Any] = overlay.get("status") or {}
        old = list(status.get("conditions") or [])
        ok = not reason
        conditions = set_condition(old, CONDITION_VALIDATION_SUCCEEDED, ok, now,
                                   CONDITION_VALIDATION_SUCCEEDED if ok else reason, message)
        conditions = set_condition(conditions, L.CONDITION_READY, ok, now,
                                   "Ready" if ok else REASON_UNHEALTHY_DEPENDENTS,
                                   "" if ok else f"{CONDITION_VALIDATION_SUCCEEDED}=False")
        if _same(old, conditions):
            return
        name = str((overlay.get("metadata") or {}).get("name"))
        if not ok:
            log.warning("NodeOverlay %s not applied: %s", name, message,
                        extra={"nodeoverlay": name, "reason": reason})
        self.ctx.cluster.patch_status(r.NODEOVERLAYS, name, {**status, "conditions": conditions})


def _same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    def key(conds: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in conds)
    return key(a) == key(b)
