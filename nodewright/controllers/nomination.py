"""Nomination: point kube-scheduler at the node the provisioner planned for each pod (KEP-5278).

When a NodeClaim the provisioner planned registers its Node (already while ``karpenter.sh/unregistered`` is on
it), each pod planned for it gets ``status.nominatedNodeName: <node>``; a pod re-planned onto an existing or
just-registered Node (a recovery plan) gets that Node. Since Kubernetes 1.34 (KEP-5278, "Nominated node name
for an expected pod placement"; beta and on by default from 1.35) kube-scheduler tries a pod's nominated node
first, counts pods nominated to a node against that node's room when it places *other* pods there, and no
longer clears a nomination it did not make. So the scheduler follows the provisioner's cost-optimal plan instead
of spreading pods by its own LeastAllocated scoring (issue 25: 48/60 plans kept without, 60/60 with).

kube-scheduler itself clears a nomination when an attempt fails and preemption finds no victim
(``preemption.Evaluator.Preempt``: "Specify nominatedNodeName to clear the pod's nominatedNodeName status"), which
happens while the planned node still boots (every Node event re-queues the pending pods, and the booting node's
taints reject them). And every clear re-queues every other pending pod of equal or lower priority
(``updatePodInSchedulingQueue``: a nominated pod that leaves a node frees room, an ``AssignedPodDelete`` event),
whose attempts fail and clear theirs in turn: one Node event starts a *wave* that clears the nominations of every
pod that does not fit yet. Setting a nomination again does not re-queue anything, so the controller sets the
cleared ones again once the wave is over: :data:`QUIET` seconds after the last clear it saw (the adapter's pod
watch reports each clear and :meth:`NominationController._on_pod` arms a timer; the next pass does it where there
is no watch). Set at once instead, each re-set is cleared by the wave still running, whose clears re-queue the
others: measured on kube-scheduler v1.36, pods retried every ~60 ms for the whole boot, the scheduler's status
writes made our conditional writes fail with 409 (and back off for 1-2 s, without a nomination, exactly when a
node turned Ready), and the room a pod's nomination should have held was taken. Bounded: after
:data:`MAX_RENOMINATIONS` clears of one pod the controller leaves it to the scheduler.

Our nominations are cleared when they go stale: the Node or NodeClaim is gone, the pod was bound (to any node),
the plan was replaced by a later batch (the provisioner's nomination now names another target; the pod is
re-nominated there once that target has a Node), or the provisioner's nomination expired. A nomination someone
else set (kube-scheduler's preemption) is never overwritten or cleared. A deleted pod needs nothing.

Writes: a merge patch of the ``pods/status`` subresource. Clearing one of our nominations carries the pod's
``resourceVersion`` as precondition (a nomination someone set meanwhile is not wiped). Setting one does not: the
pod was seen unbound and without a nomination milliseconds before, and kube-scheduler's own status writes (a new
``PodScheduled`` message at each failed attempt) would otherwise make the write fail while it matters most. A pod
bound in that window keeps a stale nomination until the next pass clears it.

* 409 on a clear (the pod changed since the snapshot): retried on a later pass under
  :class:`~nodewright.backoff.Backoff` (1 s doubling to 30 s, per pod), never in a loop.
* 403 (the ClusterRole lacks ``patch`` on ``pods/status``): one error line and one Warning Event
  ``FailedNomination`` naming the missing rule; nomination pauses for :data:`FORBIDDEN_RETRY` seconds
  (re-tried silently, so a fixed ClusterRole takes effect without a restart). Provisioning is unaffected.
* API server older than 1.34 (``server_version()`` of the cluster adapter, read once): one info line, and the
  controller stays off (kube-scheduler there clears foreign nominations).

Turned off by ``NOMINATE_PODS=false`` (chart ``controller.nominatePods: false``); bind mode (``--bind-pods``)
is the other way to make the plan stick.
"""

from __future__ import annotations

import re
import threading

from nodewright.backoff import Backoff
from nodewright.controllers.common import Context, log
from nodewright.controllers.provisioning import Provisioner
from nodewright.kube import resources as r
from nodewright.kube.errors import ConflictError, KubeError, NotFoundError
from nodewright.kube.objects import Obj, is_deleting, meta, name_of
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.pods import is_terminal, node_name, nominated_node_name, pod_key

#: First minor version of Kubernetes 1.x whose kube-scheduler keeps nominations set by other components.
MIN_MINOR = 34
#: Seconds nomination pauses after a 403 before it is tried again (without a second log line).
FORBIDDEN_RETRY = 300.0
#: Times a pod's nomination is set again after kube-scheduler cleared it, before we leave the pod to the scheduler (a
#: safety bound: the scheduler clears only on the attempts cluster events trigger, and the nomination itself ends
#: ``nomination_grace`` after its NodeClaim is Initialized).
MAX_RENOMINATIONS = 100
#: Seconds without a new clear after which the nominations kube-scheduler cleared are set again (its wave of attempts
#: after one Node event is over: each attempt takes milliseconds, each clear re-queues the others).
QUIET = 0.25
#: Seconds after the last pass during which the pod watch may set a cleared nomination again (a replica that stopped
#: leading stops passing, and its watch then stops writing).
WATCH_ACTIVE = 5.0
#: The ClusterRole rule nomination needs (named in the 403 error and Event).
REQUIRED_RULE = 'apiGroups: [""], resources: ["pods/status"], verbs: ["patch"]'


def parse_minor(version: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a ``gitVersion`` such as ``v1.36.0`` or ``v1.33.5-eks-1234``; None when unparsable or
    a source build without version stamping (``v0.0.0-master+$Format:%H$``), whose age is unknown."""
    match = re.match(r"v?(\d+)\.(\d+)", version.strip())
    if not match or int(match.group(1)) == 0:
        return None
    return int(match.group(1)), int(match.group(2))


class NominationController:
    """Keeps ``status.nominatedNodeName`` of planned pods on the Node planned for them (see module docstring).

    Args:
        ctx: dependencies (the cluster adapter may offer ``server_version() -> str``).
        provisioner: whose nominations (pod key -> NodeClaim or Node) are published.
        enabled: False turns the controller off (``NOMINATE_PODS=false``).

    Attributes:
        ours: pod key -> node name this controller set and has not cleared yet.
        backoff: per-pod retry delays after a 409.
    """

    def __init__(self, ctx: Context, provisioner: Provisioner, enabled: bool = True) -> None:
        self.ctx = ctx
        self.provisioner = provisioner
        self.enabled = enabled
        self.ours: dict[str, str] = {}
        self.backoff = Backoff(initial=1.0, maximum=30.0)
        self.cleared: dict[str, int] = {}  # pod key -> times kube-scheduler cleared our nomination
        self._wanted: dict[str, str] = {}  # the last pass's wanted nominations (read by the pod watch)
        self._clearing: set[str] = set()  # pods whose nomination this controller is clearing right now
        self._renominate: set[str] = set()  # pods kube-scheduler cleared, to be set again once its wave is over
        self._last_clear = float("-inf")  # when the last clear by kube-scheduler was seen
        self._timer: threading.Timer | None = None
        self.timer_factory = threading.Timer  # (seconds, callback) -> a started-later timer; tests replace it
        self._last_pass = float("-inf")
        self._lock = threading.RLock()  # reconcile (run loop) and the pod watch (informer thread)
        self._watching = False
        self._watching_pods = False  # the adapter's pod informer reports every change to _on_pod
        self._supported: bool | None = None
        self._forbidden_until = float("-inf")
        self._forbidden_reported = False

    # --- reconcile ---------------------------------------------------------------------------

    def reconcile(self, state: ClusterState | None = None) -> None:
        """Set the nominations the plan wants, clear our stale ones (one patch per pod at most)."""
        if not self.enabled or not self._server_supports():
            return
        self._watch()
        with self._lock:
            self._reconcile(state)

    def _reconcile(self, state: ClusterState | None) -> None:
        now = self.ctx.clock()
        if now < self._forbidden_until:
            return
        state = state or snapshot(self.ctx.cluster)
        wanted = self.wanted(state)
        self._wanted, self._last_pass = wanted, now
        for key in sorted(set(self.ours) | set(wanted)):
            pod = state.pods.get(key)
            if pod is None:  # deleted: nothing to clear
                self.ours.pop(key, None)
                self.backoff.succeeded(key)
                continue
            target = wanted.get(key, "")
            current = nominated_node_name(pod)
            mine = self.ours.get(key)
            if current == target:
                if target:
                    self.ours[key] = target
                else:
                    self.ours.pop(key, None)
                continue
            if current and current != mine:
                self.ours.pop(key, None)  # someone else's nomination (preemption): leave it alone
                continue
            if not current and mine and mine == target:
                # kube-scheduler cleared it after a failed attempt while the node still boots (its preemption step
                # clears the nomination of a pod no node takes yet). Set it again once the scheduler's wave of
                # attempts is over (QUIET), so that it is in place when the node's last boot taint comes off.
                # Bounded: after MAX_RENOMINATIONS clears of one pod we leave it to the scheduler.
                if key not in self._renominate and not self._watching_pods:
                    self._last_clear = max(self._last_clear, now)  # seen by this pass (no watch)
                self._renominate.add(key)
                if now - self._last_clear < QUIET:
                    continue  # the wave may still run: the timer (or a later pass) sets it
                self._renominate.discard(key)
                if not self._count_renomination(key):
                    continue
            if not self.backoff.ready(key, now):
                continue
            if not self._patch(pod, key, target or None, now):
                return  # forbidden: nothing more this pass
        self.backoff.prune(lambda key: key in state.pods)
        for key in [k for k in self.cleared if k not in wanted]:
            del self.cleared[key]
        self._renominate &= set(wanted)

    def _watch(self) -> None:
        """Once: have the adapter's pod informer (``KubernetesCluster.informers``; none in memory) report every pod
        change, so a nomination kube-scheduler clears is set again within milliseconds instead of at the next pass
        (:meth:`_on_pod`)."""
        if self._watching:
            return
        self._watching = True
        informer = (getattr(self.ctx.cluster, "informers", None) or {}).get(r.PODS)
        if informer is not None:
            informer.add_handler(self._on_pod)
            self._watching_pods = True

    def _on_pod(self, event: str, pod: Obj) -> None:
        """A pod changed (informer thread): when kube-scheduler cleared a nomination of ours that the last pass
        still wanted, note it and (re)arm the timer that sets the cleared ones again :data:`QUIET` s after the last
        clear (:meth:`flush`)."""
        if event != "MODIFIED" or nominated_node_name(pod) or node_name(pod) or is_deleting(pod):
            return
        key = pod_key(pod)
        with self._lock:
            mine = self.ours.get(key)
            now = self.ctx.clock()
            if not mine or key in self._clearing or self._wanted.get(key) != mine \
                    or now - self._last_pass > WATCH_ACTIVE or now < self._forbidden_until:
                return
            self._renominate.add(key)
            self._last_clear = now
            if self._timer is None:
                self._arm(QUIET)

    def renomination_due(self) -> float | None:
        """Epoch seconds at which the nominations kube-scheduler cleared are to be set again (:data:`QUIET` after
        the last clear seen), or None when none waits: a caller that passes less often than the run loop's 0.25 s
        and has no pod watch (scenario replay) runs a pass then."""
        return self._last_clear + QUIET if self._renominate else None

    def _count_renomination(self, key: str) -> bool:
        """Count one more clear of ``key``'s nomination by kube-scheduler; False past :data:`MAX_RENOMINATIONS`
        (the pod is left to the scheduler)."""
        cleared = self.cleared.get(key, 0) + 1
        if cleared > MAX_RENOMINATIONS:
            return False
        self.cleared[key] = cleared
        return True

    def _arm(self, seconds: float) -> None:
        self._timer = self.timer_factory(seconds, self.flush)
        self._timer.daemon = True
        self._timer.start()

    def flush(self) -> None:
        """Set again the nominations kube-scheduler cleared, once :data:`QUIET` s have passed without a new clear
        (else wait the rest); each pod as the cluster cache has it now, still unbound and wanted (the same bound,
        :data:`MAX_RENOMINATIONS`, as a pass)."""
        with self._lock:
            self._timer = None
            now = self.ctx.clock()
            if now - self._last_clear < QUIET:
                self._arm(QUIET - (now - self._last_clear))
                return
            if now < self._forbidden_until:
                self._renominate.clear()
                return
            for key in sorted(self._renominate):
                mine = self.ours.get(key)
                namespace, name = key.split("/", 1)
                pod = self.ctx.cluster.get(r.PODS, name, namespace)
                if not mine or pod is None or self._wanted.get(key) != mine or nominated_node_name(pod) \
                        or node_name(pod) or is_deleting(pod):
                    continue
                if not self._count_renomination(key):
                    continue
                if not self._patch(pod, key, mine, now):
                    break  # forbidden
            self._renominate.clear()

    def wanted(self, state: ClusterState) -> dict[str, str]:
        """Pod key -> Node name for every unbound, live pod whose provisioner nomination is valid and whose target
        has a Node (a NodeClaim's registered Node, or the existing Node itself)."""
        now = self.ctx.clock()
        out: dict[str, str] = {}
        for key, nom in self.provisioner.nominations.items():
            pod = state.pods.get(key)
            if pod is None or node_name(pod) or is_deleting(pod) or is_terminal(pod):
                continue
            if not self.provisioner.is_nominated(key, state, now):
                continue
            if nom.on_nodeclaim:
                claim = state.nodeclaims.get(nom.target)
                node = state.node_for(claim) if claim is not None else None
            else:
                node = state.nodes.get(nom.target)
            if node is not None and not is_deleting(node):
                out[key] = name_of(node)
        return out

    # --- writes ------------------------------------------------------------------------------

    def _patch(self, pod: Obj, key: str, target: str | None, now: float) -> bool:
        """Set (``target``) or clear (None) the pod's nomination; False when forbidden (stop the pass)."""
        if target:
            return self._write(pod, key, target, now)
        self._clearing.add(key)  # the pod watch sees this clear (even before it returns): not kube-scheduler's
        try:
            return self._write(pod, key, None, now)
        finally:
            self._clearing.discard(key)

    def _write(self, pod: Obj, key: str, target: str | None, now: float) -> bool:
        namespace, name = key.split("/", 1)
        rv = meta(pod).get("resourceVersion") if target is None else None  # a clear only (module docstring)
        try:
            self.ctx.cluster.patch_status(r.PODS, name, {"nominatedNodeName": target}, namespace,
                                          resource_version=str(rv) if rv else None)
        except NotFoundError:
            self.ours.pop(key, None)
            self.backoff.succeeded(key)
            return True
        except ConflictError as err:
            delay = self.backoff.failed(key, now)
            log.info("nominating %s conflicted (pod changed), retrying in %.0fs: %s", key, delay, err,
                     extra={"pod": key})
            return True
        except KubeError as err:
            if err.status == 403:
                self._forbidden(pod, key, err, now)
                return False
            delay = self.backoff.failed(key, now)
            log.warning("nominating %s failed, retrying in %.0fs: %s", key, delay, err, extra={"pod": key})
            return True
        self.backoff.succeeded(key)
        if target:
            self.ours[key] = target
            log.debug("nominated %s to node %s", key, target, extra={"pod": key, "node": target})
        else:
            self.ours.pop(key, None)
            log.debug("cleared the nomination of %s", key, extra={"pod": key})
        return True

    def _forbidden(self, pod: Obj, key: str, err: KubeError, now: float) -> None:
        self._forbidden_until = now + FORBIDDEN_RETRY
        if self._forbidden_reported:
            return
        self._forbidden_reported = True
        message = (f"nominating {key} is forbidden: the ClusterRole lacks the rule {REQUIRED_RULE}; provisioning "
                   "goes on without nomination (grant it, as the chart does with controller.nominatePods=true, "
                   "or set NOMINATE_PODS=false)")
        log.error(message, extra={"pod": key, "error": str(err)})
        self.ctx.event(pod, "FailedNomination", message, warning=True)

    def _server_supports(self) -> bool:
        """Whether the API server is 1.34 or newer; asked once (unknown counts as supported)."""
        if self._supported is not None:
            return self._supported
        self._supported = True
        ask = getattr(self.ctx.cluster, "server_version", None)
        if ask is None:
            return True
        try:
            version = str(ask())
        except KubeError as err:
            log.debug("server version unknown (%s): nominating pods", err)
            return True
        parsed = parse_minor(version)
        if parsed is not None and parsed < (1, MIN_MINOR):
            self._supported = False
            log.info("API server %s is older than 1.%d: kube-scheduler there clears nominations it did not make "
                     "(KEP-5278), so pods are not nominated to their planned nodes", version, MIN_MINOR,
                     extra={"version": version})
        return self._supported

