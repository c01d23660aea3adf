"""Garbage collection: leaked instances and NodeClaims whose instance vanished.

Karpenter's ``nodeclaim/garbagecollection`` controller: an instance tagged for this cluster (the cloud
provider's :meth:`list`) with no NodeClaim of the same provider ID, older than :attr:`grace` (30 s, so a
launch in flight is never mistaken for a leak), is terminated, unless the NodeClaim its ``karpenter.sh/nodeclaim`` tag names exists without a provider ID yet (the launch
is being recorded; Karpenter's GC would race it after 30 s). A launched NodeClaim whose instance no longer
exists is deleted (its finalizer then releases without a cloud call).
"""

from __future__ import annotations

from nodewright.api import labels as L
from nodewright.api.nodeclaim import NodeClaim
from nodewright.cloud.provider import CloudProviderError, NodeClaimNotFoundError
from nodewright.controllers.common import Context, log
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import condition, condition_true, is_deleting, name_of, parse_time
from nodewright.state.cluster import ClusterState, provider_id_of, snapshot


class GarbageCollector:
    """Runs at most every :attr:`period` seconds.

    Args:
        ctx: dependencies.
        grace: seconds an untracked instance may exist before it counts as leaked.
        period: seconds between passes (each pass lists every instance).
    """

    def __init__(self, ctx: Context, grace: float = 30.0, period: float = 30.0) -> None:
        self.ctx = ctx
        self.grace = grace
        self.period = period
        self._last = float("-inf")
        self.terminated: list[str] = []

    def reconcile(self, state: ClusterState | None = None, force: bool = False) -> None:
        """One pass (skipped when the last one was less than :attr:`period` ago, unless ``force``)."""
        now = self.ctx.clock()
        if not force and now - self._last < self.period:
            return
        self._last = now
        state = state or snapshot(self.ctx.cluster)
        try:
            instances = self.ctx.cloud.list()
        except CloudProviderError as err:
            self.ctx.cloud_error("nodeclaim.garbagecollection", "List", err)
            return
        live = {}
        for view in instances:
            pid = (view.status.provider_id if view.status else None) or ""
            if pid:
                live[pid] = view
        for pid, view in live.items():
            if pid in state.nodeclaim_by_provider_id:
                continue
            owner = state.nodeclaims.get(view.metadata.name or "")
            if owner is not None and not provider_id_of(owner):
                # Its NodeClaim (the karpenter.sh/nodeclaim tag) exists but has not recorded the launch yet: a
                # status write refused or a leader killed after CreateFleet. The next launch attempt finds this
                # instance by its tag; terminating it here would make that attempt launch a second one.
                continue
            created = parse_time(view.metadata.creation_timestamp)
            if created is None or now - created < self.grace:
                continue
            self._terminate(view, pid)
        for claim in state.nodeclaims.values():
            pid = provider_id_of(claim)
            if not pid or pid in live or is_deleting(claim) or not condition_true(claim, L.CONDITION_LAUNCHED):
                continue
            launched = parse_time((condition(claim, L.CONDITION_LAUNCHED) or {}).get("lastTransitionTime"))
            if launched is not None and now - launched < self.grace:
                continue  # the cloud's list may lag a fresh launch
            log.info("deleting nodeclaim %s: its instance no longer exists", name_of(claim),
                     extra={"nodeclaim": name_of(claim), "provider-id": pid})
            self.ctx.event(claim, "GarbageCollected", f"Instance {pid} no longer exists", warning=True)
            try:
                self.ctx.cluster.delete(r.NODECLAIMS, name_of(claim))
            except (NotFoundError, KubeError):
                continue

    def _terminate(self, view: NodeClaim, pid: str) -> None:
        log.info("terminating leaked instance %s (no NodeClaim)", pid, extra={"provider-id": pid})
        try:
            self.ctx.cloud.delete(view)
        except NodeClaimNotFoundError:
            return
        except CloudProviderError as err:
            self.ctx.cloud_error("nodeclaim.garbagecollection", "Delete", err)
            return
        self.terminated.append(pid)
