"""Nomination: point kube-scheduler at the node the provisioner planned for each pod (KEP-5278).

When a NodeClaim the provisioner planned registers its Node (already while ``karpenter.sh/unregistered`` is on
it), each pod planned for it gets ``status.nominatedNodeName: <node>``; a pod re-planned onto an existing or
just-registered Node (a recovery plan) gets that Node. Since Kubernetes 1.34 (KEP-5278, "Nominated node name
for an expected pod placement", feature gates ``NominatedNodeNameForExpectation`` and
``ClearingNominatedNodeNameAfterBinding``, beta and on by default from 1.35) kube-scheduler tries a pod's nominated
node first, counts pods nominated to a node (of the pod's priority or higher) against that node's room when it
places *other* pods there, and clears the nomination once the pod is bound. So the scheduler follows the
provisioner's cost-optimal plan instead of spreading pods by its own LeastAllocated scoring (issue 25; the
measured agreement, with and without nomination and in bind mode, is in docs/benchmarks.md).

What KEP-5278 does not change: kube-scheduler itself clears a nomination when an attempt fails and preemption
finds no victim (``preemption.Evaluator.Preempt``: "Specify nominatedNodeName to clear the pod's nominatedNodeName
status"; a pod with ``preemptionPolicy: Never`` is not eligible to preempt and keeps it), which
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

Readiness hold (``NOMINATION_HOLD=true``, chart ``controller.nominationHold``; off by default and experimental:
against a real kube-scheduler v1.36 with Nodes turning Ready as kubelets report it, it kept 45 of 48 plans where
nomination alone kept 47, docs/benchmarks.md run p; run t: 42 against 45; run w: 43 against 46). A Node turning
Ready is two updates: the kubelet's Ready condition, then, milliseconds later, the node lifecycle controller lifting
``node.kubernetes.io/not-ready``. The wave of attempts the first one starts clears the nominations of the pods
planned for the Node (it is still tainted), so when the Node becomes schedulable they have none and kube-scheduler
places them by its own scoring. With the hold, the Node registers with the taint ``nodewright.io/nominating:
NoSchedule`` (added by the lifecycle controller's registration, :meth:`NominationController.hold_taints`, when pods
are planned for it) and this controller lifts it once the Node is Ready, every other boot taint is gone
(not-ready, unreachable, uninitialized, unregistered, the NodeClaim's startup taints), no wave is running
(:data:`QUIET`) and every pod still planned for it carries its nomination again -- so the update that makes the
Node schedulable comes after the nominations -- and the same holds for every other Node of its batch (the
NodeClaims planned in the same provisioning pass, :meth:`NominationController._batch_waits`): the batch turns
schedulable in one pass, so a pod planned for a Node still booting is not placed by kube-scheduler's scoring on a
Node of its batch that is already schedulable (in the replay model with Nodes turning Ready 1 s apart, the 48 e2e
cases keep 48 plans with the batch released 5 ms apart, 42 at 50 ms apart, 46 with Nodes released one by one; against
the real kube-scheduler v1.36 the three cases the hold lost in run p are still lost, docs/benchmarks.md run q). The
lifts of one pass are separate Node updates about 10 ms apart, and the first starts a wave of attempts before the
last arrives: a pod of a hard spread, pod (anti-)affinity or host port (``scheduling.topology.placement_dependent``)
may fail on its Node for its peers' sake and lose its nomination then, so the Nodes planned for such pods are lifted
last (:func:`placement_dependent_targets`; replay model, lifts 10 ms apart: 48 plans against 47 in name order; 20 ms:
40 against 36; sending the patches concurrently did not bring them closer, docs/benchmarks.md run s). And each
lift after the first of a pass is preceded by the nominations of that Node's pods, written again
(:meth:`NominationController._confirm`): the earlier lifts' waves clear the nominations of pods whose Node is still
held, and the clears reach the cache only milliseconds later, after the next lift (replay model, lifts 15 ms apart:
48 plans against 40; 30 ms: 47 against 44; docs/benchmarks.md runs u-w). Bounded: lifted :data:`HOLD_MAX` s after the boot taints went
whatever the pods, :data:`HOLD_UNREADY_MAX` s after registration if the Node never turns Ready (a DaemonSet the
Node needs before Ready might not tolerate the taint), at once when nomination is forbidden or off, and after a
restart (no plan in memory: nothing to wait for). Being a boot taint (``EPHEMERAL_TAINT_KEYS``), it delays the
NodeClaim's ``Initialized`` until it is lifted and the provisioner plans onto the held Node as onto any booting
one. DaemonSet pods that do not tolerate it start once it is lifted. A Node registered seconds before the
controller is uninstalled keeps the taint (as it would keep ``karpenter.sh/unregistered``): remove it with
``kubectl taint nodes <node> nodewright.io/nominating-``.

Turned off by ``NOMINATE_PODS=false`` (chart ``controller.nominatePods: false``); bind mode (``--bind-pods``)
is the other way to make the plan stick.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping

from nodewright.api import labels as L
from nodewright.backoff import Backoff
from nodewright.controllers.common import Context, log
from nodewright.controllers.provisioning import Provisioner
from nodewright.kube import resources as r
from nodewright.kube.cluster import Cluster
from nodewright.kube.errors import ConflictError, KubeError, NotFoundError
from nodewright.kube.objects import Obj, condition_true, is_deleting, meta, name_of, parse_time
from nodewright.scheduling.nodes import is_ephemeral_taint
from nodewright.scheduling.topology import placement_dependent
from nodewright.state.cluster import ClusterState, snapshot
from nodewright.state.models import models_for
from nodewright.state.pods import is_terminal, node_name, nominated_node_name, pod_key
from nodewright.state.registering import startup_taints

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
#: Seconds a Node is held (readiness hold) at most once its boot taints are gone.
HOLD_MAX = 10.0
#: Seconds after its registration a Node that never turned Ready is held at most.
HOLD_UNREADY_MAX = 600.0
#: The release reason of a held Node whose pods carry their nominations (it still waits for its batch).
CARRYING = "its pods carry their nominations"
#: The readiness hold's taint, as the Node carries it.
HOLD_TAINT = {"key": L.NOMINATING_TAINT_KEY, "effect": L.NOMINATING_TAINT_EFFECT}
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
        hold: the readiness hold (``NOMINATION_HOLD``, module docstring).

    Attributes:
        ours: pod key -> node name this controller set and has not cleared yet.
        backoff: per-pod retry delays after a 409.
    """

    def __init__(self, ctx: Context, provisioner: Provisioner, enabled: bool = True, hold: bool = False) -> None:
        self.ctx = ctx
        self.provisioner = provisioner
        self.enabled = enabled
        self.hold = hold
        #: held Node name -> (startup taint keys of its NodeClaim, when its boot taints were first seen gone or None)
        self._held: dict[str, tuple[frozenset[tuple[str, str]], float | None]] = {}
        self._claim_of: dict[str, str] = {}  # held Node -> its NodeClaim (the batch barrier)
        self._unregistered: set[str] = set()  # planned-for NodeClaims (or Nodes) not registered yet
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
            if self.hold:  # a hold left from before (NOMINATE_PODS turned off, an old API server): lift it
                with self._lock:
                    self._lift_holds(state or snapshot(self.ctx.cluster), self.ctx.clock())
            return
        self._watch()
        with self._lock:
            self._reconcile(state)

    def _reconcile(self, state: ClusterState | None) -> None:
        now = self.ctx.clock()
        state = state or snapshot(self.ctx.cluster)
        if now < self._forbidden_until:
            if self.hold:
                self._lift_holds(state, now)
            return
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
        if self.hold:
            self._lift_holds(state, now)

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
            if self.hold and self._held:  # the nominations are back: a held Node may be released now
                self._release(now)

    # --- readiness hold ------------------------------------------------------------------------

    def hold_taints(self, claim: Obj) -> list[Obj]:
        """The taints ``claim``'s Node registers with besides the NodeClaim's own: the hold's taint when the hold is
        on, nomination works, and pods are planned for the NodeClaim (``LifecycleController`` registration)."""
        if not (self.hold and self.enabled and self._supported is not False) \
                or self.ctx.clock() < self._forbidden_until:
            return []
        name = name_of(claim)
        if not any(nom.on_nodeclaim and nom.target == name for nom in self.provisioner.nominations.values()):
            return []
        return [dict(HOLD_TAINT)]

    def _lift_holds(self, state: ClusterState, now: float) -> None:
        """Note every held Node of ``state`` (with its NodeClaim's startup taints), then release what may go."""
        held = {}
        claim_of = {}
        for node in state.nodes.values():
            if any(t.get("key") == L.NOMINATING_TAINT_KEY for t in _taints(node)):
                claim = state.nodeclaim_for(node)
                startup = frozenset((t.key, t.effect) for t in startup_taints(claim, None))
                held[name_of(node)] = (startup, self._held.get(name_of(node), (startup, None))[1])
                if claim is not None:
                    claim_of[name_of(node)] = name_of(claim)
        self._held, self._claim_of = held, claim_of
        unregistered = set()
        for nom in self.provisioner.nominations.values():
            if not nom.on_nodeclaim:  # planned onto a Node by name
                if _unregistered(state.nodes.get(nom.target)):
                    unregistered.add(nom.target)
            elif (claim := state.nodeclaims.get(nom.target)) is not None and not is_deleting(claim) \
                    and _unregistered(state.node_for(claim)):
                unregistered.add(nom.target)
        self._unregistered = unregistered
        self._release(now)

    def _release(self, now: float) -> None:
        """Lift the hold of each held Node that may go now (module docstring); the Node read from the cache."""
        reasons: dict[str, tuple[Obj, str]] = {}
        waiting: set[str] = set()  # held Nodes that stay held on their own account
        for name in sorted(self._held):
            node = self.ctx.cluster.get(r.NODES, name)
            if node is None or is_deleting(node):
                self._held.pop(name, None)
                continue
            why = self._release_reason(node, now)
            if why is None:
                waiting.add(name)
            else:
                reasons[name] = (node, why)
        lifts = [(name, why, [t for t in _taints(node) if t.get("key") != L.NOMINATING_TAINT_KEY])
                 for name, (node, why) in sorted(reasons.items())
                 if not (why == CARRYING and self._batch_waits(name, waiting))]
        if len(lifts) > 1:  # placement-independent first (docs/benchmarks.md run s)
            dependent = placement_dependent_targets(self.ctx.cluster, self._wanted)
            lifts.sort(key=lambda lift: (lift[0] in dependent, lift[0]))
        lifted = False
        for name, why, taints in lifts:
            if why == CARRYING and lifted and not self._confirm(name, now):
                break  # forbidden: nothing more this pass
            try:
                self.ctx.cluster.patch(r.NODES, name, {"spec": {"taints": taints or None}})
            except NotFoundError:
                pass
            except KubeError as err:  # retried on the next pass
                log.warning("lifting the nominating hold of node %s failed: %s", name, err, extra={"node": name})
                continue
            self._held.pop(name, None)
            lifted = True
            log.debug("lifted the nominating hold of node %s: %s", name, why, extra={"node": name})

    def _release_reason(self, node: Obj, now: float) -> str | None:
        """Why the hold of ``node`` may be lifted now, or None to keep it."""
        name = name_of(node)
        startup, since = self._held[name]
        if not self.enabled or self._supported is False or now < self._forbidden_until:
            return "nomination is off"
        model = models_for(self.ctx.cluster).node(node)
        if model is None:
            return "the Node is not valid"
        booting = not condition_true(node, "Ready") or any(
            (t.key, t.effect) in startup or (is_ephemeral_taint(t) and t.key != L.NOMINATING_TAINT_KEY)
            for t in model.taints)
        if booting:
            registered = parse_time(meta(node).get("creationTimestamp"))
            if registered is not None and now - registered >= HOLD_UNREADY_MAX:
                return f"not Ready {HOLD_UNREADY_MAX:.0f}s after registration"
            self._held[name] = (startup, None)
            return None
        if since is None:
            since = now
            self._held[name] = (startup, since)
        if now - since >= HOLD_MAX:
            return f"held {HOLD_MAX:.0f}s"
        if now - self._last_clear < QUIET or self._renominate:
            return None  # a wave of attempts may still be running: its clears would meet the Node schedulable
        if any(nominated_node_name(pod) != name for _, pod in self._planned_pods(name)):
            return None
        return CARRYING

    def _planned_pods(self, name: str) -> list[tuple[str, Obj]]:
        """(key, pod) of every unbound, live pod the plan wants nominated to Node ``name`` (read from the cache)."""
        out = []
        for key, target in self._wanted.items():
            if target != name:
                continue
            namespace, pod_name = key.split("/", 1)
            pod = self.ctx.cluster.get(r.PODS, pod_name, namespace)
            if pod is not None and not node_name(pod) and not is_deleting(pod):
                out.append((key, pod))
        return out

    def _confirm(self, name: str, now: float) -> bool:
        """Write the nomination of every pod planned for held Node ``name`` again, right before its lift, when Nodes
        of its batch were lifted before it in this pass: their waves of attempts clear the nominations of pods whose
        Node is still held (it rejects them), and the clears reach the cache milliseconds after kube-scheduler made
        them -- possibly after this lift, which then meets the pods without nominations and leaves their room to
        others (docs/benchmarks.md, run u). Written whatever the cache shows: an unchanged value is a no-op on the
        API server (no new ``resourceVersion``, no event). False when forbidden."""
        for key, pod in self._planned_pods(name):
            current = nominated_node_name(pod)
            if current and current != name:
                continue  # someone else's nomination (preemption) since the pass began: never overwritten
            if not current and not self._count_renomination(key):
                continue  # cleared once too often: left to the scheduler
            self._renominate.discard(key)
            if not self._patch(pod, key, name, now):
                return False
        return True

    def _batch_waits(self, name: str, waiting: set[str]) -> bool:
        """Whether a held Node whose own pods carry their nominations waits for the rest of its batch (the
        NodeClaims planned in the same provisioning pass as its own): one of them has no Node yet, or its Node is
        held and not ready to go. The batch's Nodes then turn schedulable in one pass, so no pod planned for a Node
        still booting is placed by kube-scheduler's scoring on one already schedulable (bounded by :data:`HOLD_MAX`
        in :meth:`_release_reason`)."""
        target = self._claim_of.get(name, name)  # what the provisioner planned onto: its NodeClaim, or the Node
        noms = self.provisioner.nominations.values()
        times = {nom.time for nom in noms if nom.target == target}
        peers = {nom.target for nom in noms if nom.time in times} - {target}
        if peers & self._unregistered:
            return True
        return any(self._claim_of.get(node, node) in peers for node in waiting)

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
            if err.status == 422 and target and "already bound" in str(err):
                # Bound since the cache showed it unbound (the set carries no precondition): nothing to nominate.
                log.debug("not nominating %s: bound meanwhile", key, extra={"pod": key})
                self.backoff.succeeded(key)
                return True
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



def placement_dependent_targets(cluster: Cluster, wanted: Mapping[str, str]) -> set[str]:
    """The Node names of ``wanted`` (pod key -> Node name) planned for at least one pod whose placement depends on
    where other pods are (:func:`~nodewright.scheduling.topology.placement_dependent`): the readiness hold lifts
    them last. Pods gone from ``cluster`` count for nothing."""
    models = models_for(cluster)
    out: set[str] = set()
    for key, target in wanted.items():
        if target in out:
            continue
        namespace, pod_name = key.split("/", 1)
        obj = cluster.get(r.PODS, pod_name, namespace)
        pod = models.pod(obj, pending=True) if obj is not None else None
        if pod is not None and placement_dependent(pod):
            out.add(target)
    return out


def _taints(node: Obj) -> list[Obj]:
    """The Node's ``spec.taints`` as written (the patch that lifts the hold writes the rest back unchanged)."""
    return [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]


def _unregistered(node: Obj | None) -> bool:
    """No Node yet, or one that still carries ``karpenter.sh/unregistered`` (registration adds the hold)."""
    return node is None or any(t.get("key") == L.UNREGISTERED_TAINT_KEY for t in _taints(node))
