"""Garbage collection: leaked instances, NodeClaims whose instance vanished, and unused launch templates.

Karpenter's ``nodeclaim/garbagecollection`` controller: an instance tagged for this cluster (the cloud
provider's :meth:`list`) with no NodeClaim of the same provider ID, older than :attr:`grace` (30 s, so a
launch in flight is never mistaken for a leak), is terminated, unless the NodeClaim its ``karpenter.sh/nodeclaim`` tag names exists without a provider ID yet (the launch
is being recorded; Karpenter's GC would race it after 30 s). A launched NodeClaim whose instance no longer
exists is deleted (its finalizer then releases without a cloud call).

:class:`LaunchTemplateGC` (Karpenter deletes a launch template when its cache evicts it unused): every
:attr:`LaunchTemplateGC.period` (5 min) the cloud deletes the launch templates this cluster owns that no current
EC2NodeClass / NodePool / capacity type needs (:meth:`nodewright.cloud.aws.launchtemplates.LaunchTemplateProvider.
garbage_collect`): EC2 allows 5,000 per region, and every change of a class's AMI, security groups or userData
makes new ones.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

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


@runtime_checkable
class LaunchTemplateCollector(Protocol):
    """A cloud whose launch templates outlive the configurations that made them."""

    def garbage_collect_launch_templates(self, needed: dict[str, set[str]]) -> list[str]:
        """Delete the templates no class/pool in ``needed`` (EC2NodeClass -> its NodePools) still uses; returns
        their names. Raises CloudProviderError."""
        ...


class LaunchTemplateGC:
    """Runs at most every :attr:`period` seconds (a no-op for clouds without launch templates).

    Attributes:
        deleted: names of the templates deleted, in order (tests, the simulator).
    """

    def __init__(self, ctx: Context, period: float = 300.0) -> None:
        self.ctx = ctx
        self.period = period
        self._last = float("-inf")
        self.deleted: list[str] = []

    def reconcile(self, state: ClusterState | None = None, force: bool = False) -> None:
        cloud = self.ctx.cloud
        now = self.ctx.clock()
        if not isinstance(cloud, LaunchTemplateCollector) or (not force and now - self._last < self.period):
            return
        self._last = now
        state = state or snapshot(self.ctx.cluster)
        needed = {name: pools for name, pools in state.nodepools_by_nodeclass().items()
                  if name in state.nodeclasses and not is_deleting(state.nodeclasses[name])}
        try:
            self.deleted += cloud.garbage_collect_launch_templates(needed)
        except CloudProviderError as err:
            self.ctx.cloud_error("launchtemplate.garbagecollection", "DeleteLaunchTemplate", err)
