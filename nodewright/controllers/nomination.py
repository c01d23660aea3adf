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

Readiness hold (``NOMINATION_HOLD``, chart ``controller.nominationHold``; on by default; it patches pods, a verb
nomination alone does not need, and the chart narrows that verb with a ValidatingAdmissionPolicy to adding the
hold's toleration to a pending pod, ``templates/validatingadmissionpolicy-pin.yaml``). Nomination tells kube-scheduler which Node to try first, not to wait for it:
a pod whose own Node still boots is placed by kube-scheduler's scoring on any Node of its batch that is already
schedulable, in room planned for other pods; and pods of a hard topology spread nominated two or more to one Node
count against each other there (``PodTopologySpread`` adds nominated pods), fail until the other domains have bound
pods, and lose their nominations -- and with them the room -- in the attempt (docs/benchmarks.md runs p-x: 45-47 of
48 plans kept with nomination alone). With the hold, the planned Node registers with the taint
``nodewright.io/nominating=<NodeClaim>:NoSchedule`` (:func:`hold_taint`, added by the lifecycle controller's
registration, :meth:`NominationController.hold_taints`, when pods are planned for it), and each pod planned for it
is given the toleration of that taint and of no other (:meth:`NominationController._pin`, a merge patch of
``spec.tolerations`` under the pod's ``resourceVersion``; tolerations can be added to a pod, never removed, so it
stays, naming a taint no other Node carries). So while the batch is held, each pod can go to its own Node and no
other Node of its batch, and no pod of another Node can take its room, whatever the order in which the Nodes turn
Ready and however far apart the lifts reach kube-scheduler; kube-scheduler still runs every filter, so a spread
is never broken on the way (a pod refused for its peers' sake binds once they are placed). The hold of a Node is
lifted once it is Ready, every other boot taint is gone (not-ready, unreachable, uninitialized, unregistered, the
NodeClaim's startup taints) and the pods planned for its batch (the NodeClaims planned in the same provisioning
pass, :meth:`NominationController._pending_batches`) are placed: bound, gone, re-planned, or planned onto a Node no
longer held (real kube-scheduler v1.36: 48 of 48 plans kept, 0 pods moved, docs/benchmarks.md run x; the replay
model the same at any lift timing). Bounded: lifted :data:`HOLD_MAX` s after the boot taints went whatever the
pods, :data:`HOLD_UNREADY_MAX` s after registration if the Node never turns Ready (a DaemonSet the Node needs before
Ready might not tolerate the taint), at once when pinning is forbidden (a 403 on ``pods`` ``patch``: one error line
and one Warning Event ``FailedNomination`` naming :data:`PIN_RULE`, retried after :data:`FORBIDDEN_RETRY` s), and
after a restart (no plan in memory: nothing to wait for). The hold needs no nomination: with ``NOMINATE_PODS=false``,
a 403 on ``pods/status`` or an API server older than 1.34 the tolerations alone steer the pods (e2e mode ``pin``). A 409 on a pin is
retried on a later pass (per-pod backoff, 1 s doubling to 30 s); any other refusal (an admission webhook) leaves
that pod unpinned and no Node waits for it. Being a boot taint (``EPHEMERAL_TAINT_KEYS``), the hold delays the
NodeClaim's ``Initialized`` until it is lifted and the provisioner plans onto the held Node as onto any booting
one. DaemonSet pods that do not tolerate it start once it is lifted. A Node registered seconds before the
controller is uninstalled keeps the taint (as it would keep ``karpenter.sh/unregistered``): remove it with
``kubectl taint nodes <node> nodewright.io/nominating-``.

Nomination is turned off by ``NOMINATE_PODS=false`` (chart ``controller.nominatePods: false``), the hold by
``NOMINATION_HOLD=false`` (``controller.nominationHold: false``); bind mode (``--bind-pods``) is the other way to make
the plan stick.
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
from nodewright.kube.errors import ConflictError, KubeError, NotFoundError
from nodewright.kube.objects import Obj, condition_true, is_deleting, meta, name_of, parse_time
from nodewright.scheduling.nodes import is_ephemeral_taint
from nodewright.scheduling.taints import toleration_from_dict
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
#: The release reason of a held Node whose batch's pinned pods are all placed.
PLACED = "the pods planned for its batch are placed"
#: The ClusterRole rule nomination needs (named in the 403 error and Event).
REQUIRED_RULE = 'apiGroups: [""], resources: ["pods/status"], verbs: ["patch"]'
#: The ClusterRole rule the readiness hold needs to pin pods (named in the 403 error and Event).
PIN_RULE = 'apiGroups: [""], resources: ["pods"], verbs: ["patch"]'


def hold_taint(value: str) -> Obj:
    """The readiness hold's taint as a held Node carries it: ``nodewright.io/nominating=<value>:NoSchedule``, the
    value naming what the plan targeted (the NodeClaim, or the Node planned onto by name)."""
    return {"key": L.NOMINATING_TAINT_KEY, "value": value, "effect": L.NOMINATING_TAINT_EFFECT}


def hold_toleration(taint: Obj) -> Obj:
    """The toleration of exactly ``taint`` (a hold taint): what a pod planned for that held Node is given."""
    return {"key": L.NOMINATING_TAINT_KEY, "operator": "Equal", "value": str(taint.get("value") or ""),
            "effect": L.NOMINATING_TAINT_EFFECT}


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
        self._forbidden = _Pause()  # nominating: a 403 on pods/status
        self.pin_backoff = Backoff(initial=1.0, maximum=30.0)  # per pod, after a 409 on its toleration write
        self._unpinnable: set[str] = set()  # pods whose toleration write was refused (a held Node never waits)
        self._pin_forbidden = _Pause()  # pinning: a 403 on pods

    # --- reconcile ---------------------------------------------------------------------------

    def reconcile(self, state: ClusterState | None = None) -> None:
        """Set the nominations the plan wants, clear our stale ones (one patch per pod at most); with the hold, pin
        the planned pods to their held Nodes and lift the holds that may go (with or without nomination)."""
        nominating = self.enabled and self._server_supports()
        if not nominating and not self.hold:
            return
        if nominating:
            self._watch()
        with self._lock:
            now = self.ctx.clock()
            state = state or snapshot(self.ctx.cluster)
            wanted = self.wanted(state)
            self._wanted, self._last_pass = wanted, now
            if self.hold:
                self._pin(state, wanted, now)
            if nominating and not self._forbidden.active(now):
                self._nominate(state, wanted, now)
            if self.hold:
                self._lift_holds(state, now)

    def _nominate(self, state: ClusterState, wanted: Mapping[str, str], now: float) -> None:
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
                    or now - self._last_pass > WATCH_ACTIVE or self._forbidden.active(now):
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
            if self._forbidden.active(now):
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

    # --- readiness hold ------------------------------------------------------------------------

    def hold_taints(self, claim: Obj) -> list[Obj]:
        """The taints ``claim``'s Node registers with besides the NodeClaim's own: the hold's taint (valued with the
        NodeClaim's name) when the hold is on, pinning is not forbidden, and pods are planned for the NodeClaim
        (``LifecycleController`` registration)."""
        if not self.hold or self._pin_forbidden.active(self.ctx.clock()):
            return []
        name = name_of(claim)
        if not any(nom.on_nodeclaim and nom.target == name for nom in self.provisioner.nominations.values()):
            return []
        return [hold_taint(name)]

    def _pin(self, state: ClusterState, wanted: Mapping[str, str], now: float) -> None:
        """Give each pod ``wanted`` on a held Node the toleration of that Node's hold taint (and of no other), so
        while the hold lasts the pod can go to its planned Node and no other Node of its batch, and no other pod
        can take its room there. A merge patch of ``spec.tolerations`` (adding a toleration is the one change of a
        pod's tolerations the API allows), preconditioned on the pod's ``resourceVersion``: a 409 is retried on a
        later pass under :attr:`pin_backoff`; a 403 from RBAC pauses the hold (one error line and one Event,
        :data:`PIN_RULE`); any other refusal (a 403 or 400 of an admission webhook, a 422) leaves that pod unpinned,
        and no held Node waits for it."""
        if self._pin_forbidden.active(now):
            return
        self._unpinnable &= set(wanted)
        holds: dict[str, Obj | None] = {}  # Node -> its hold taint, read once per pass
        for target in set(wanted.values()):
            node = self.ctx.cluster.get(r.NODES, target)  # the cache: a hold added by this pass's registration
            holds[target] = _hold_taint_of(node) if node is not None else None
        for key, target in sorted(wanted.items()):
            taint = holds[target]
            if taint is None or key in self._unpinnable or not self.pin_backoff.ready(key, now):
                continue
            namespace, name = key.split("/", 1)
            pod = self.ctx.cluster.get(r.PODS, name, namespace)
            if pod is None or node_name(pod):
                continue
            spec = pod.get("spec") or {}
            tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
            toleration = hold_toleration(taint)
            if toleration_from_dict(toleration) in {toleration_from_dict(t) for t in tolerations}:
                continue
            body: Obj = {"spec": {"tolerations": [*tolerations, toleration]}}
            rv = meta(pod).get("resourceVersion")
            if rv:
                body["metadata"] = {"resourceVersion": rv}
            try:
                self.ctx.cluster.patch(r.PODS, name, body, namespace)
            except NotFoundError:
                continue
            except ConflictError as err:
                delay = self.pin_backoff.failed(key, now)
                log.info("pinning %s to node %s conflicted (pod changed), retrying in %.0fs: %s", key, target, delay,
                         err, extra={"pod": key})
                continue
            except KubeError as err:
                if err.status == 403 and not _admission_denial(err):
                    self._pin_forbidden.report(self.ctx, pod, err, now, (
                        f"pinning {key} to its held node is forbidden: the ClusterRole lacks the rule {PIN_RULE}; the "
                        "readiness hold is lifted and nomination goes on without it (grant it, as the chart does with "
                        "controller.nominationHold=true, or set NOMINATION_HOLD=false)"))
                    return
                self._unpinnable.add(key)
                log.warning("pinning %s to node %s was refused (its held Node will not wait for it): %s", key,
                            target, err, extra={"pod": key, "node": target})
                continue
            self.pin_backoff.succeeded(key)
            log.debug("pinned %s to held node %s", key, target, extra={"pod": key, "node": target})
        self.pin_backoff.prune(lambda key: key in state.pods)

    def _lift_holds(self, state: ClusterState, now: float) -> None:
        """Note every held Node of ``state`` (with its NodeClaim's startup taints), then release what may go."""
        held = {}
        claim_of = {}
        for node in state.nodes.values():
            if _hold_taint_of(node) is not None:
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
        self._release(state, now)

    def _release(self, state: ClusterState, now: float) -> None:
        """Lift the hold of each held Node that may go now (module docstring); the Node read from the cache."""
        pending = self._pending_batches(state, now)
        for name in sorted(self._held):
            node = self.ctx.cluster.get(r.NODES, name)
            if node is None or is_deleting(node):
                self._held.pop(name, None)
                continue
            why = self._release_reason(node, pending, now)
            if why is None:
                continue
            taints = [t for t in _taints(node) if t.get("key") != L.NOMINATING_TAINT_KEY]
            try:
                self.ctx.cluster.patch(r.NODES, name, {"spec": {"taints": taints or None}})
            except NotFoundError:
                pass
            except KubeError as err:  # retried on the next pass
                log.warning("lifting the nominating hold of node %s failed: %s", name, err, extra={"node": name})
                continue
            self._held.pop(name, None)
            log.debug("lifted the nominating hold of node %s: %s", name, why, extra={"node": name})

    def _release_reason(self, node: Obj, pending: set[str], now: float) -> str | None:
        """Why the hold of ``node`` may be lifted now, or None to keep it (``pending``: the targets of the batches
        with pods still to be placed, :meth:`_pending_batches`)."""
        name = name_of(node)
        startup, since = self._held[name]
        if self._pin_forbidden.active(now):
            return "pinning is forbidden"
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
        if self._claim_of.get(name, name) in pending:  # what the plan targeted: its NodeClaim, or the Node
            return None
        return PLACED

    def _pending_batches(self, state: ClusterState, now: float) -> set[str]:
        """The targets (NodeClaims, or Nodes planned onto by name) of the provisioning batches (a nomination's
        ``time``: what one provisioning pass planned) with a pod still to be placed: pinning not refused, and the pod
        wanted on a held Node (so pinned there) or validly planned onto a target without a Node yet (to be pinned
        once it registers). A Node of such a batch stays held: lifted, its spare room could take that pod, whose own
        Node is not schedulable yet, by kube-scheduler's scoring. Reads this pass's :meth:`wanted`."""
        held_targets = {self._claim_of.get(name, name) for name in self._held}
        times: set[float] = set()
        for key, nom in self.provisioner.nominations.items():
            if nom.time in times or key in self._unpinnable:
                continue
            if nom.target in held_targets:
                pending = key in self._wanted
            else:
                pending = nom.target in self._unregistered and self._planned(key, state, now)
            if pending:
                times.add(nom.time)
        return {nom.target for nom in self.provisioner.nominations.values() if nom.time in times}

    def _planned(self, key: str, state: ClusterState, now: float) -> bool:
        """Whether pod ``key`` is live, unbound and validly nominated by the provisioner."""
        pod = state.pods.get(key)
        return pod is not None and not node_name(pod) and not is_deleting(pod) and not is_terminal(pod) \
            and self.provisioner.is_nominated(key, state, now)

    def wanted(self, state: ClusterState) -> dict[str, str]:
        """Pod key -> Node name for every unbound, live pod whose provisioner nomination is valid and whose target
        has a Node (a NodeClaim's registered Node, or the existing Node itself)."""
        now = self.ctx.clock()
        out: dict[str, str] = {}
        for key, nom in self.provisioner.nominations.items():
            if not self._planned(key, state, now):
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
                self._forbidden.report(self.ctx, pod, err, now, (
                    f"nominating {key} is forbidden: the ClusterRole lacks the rule {REQUIRED_RULE}; provisioning "
                    "goes on without nomination (grant it, as the chart does with controller.nominatePods=true, "
                    "or set NOMINATE_PODS=false)"))
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



class _Pause:
    """A write the ClusterRole forbids (a 403): paused :data:`FORBIDDEN_RETRY` s after each, then tried again
    silently (a fixed ClusterRole takes effect without a restart); reported once, as one error line and one Warning
    Event ``FailedNomination`` on the pod."""

    def __init__(self) -> None:
        self.until = float("-inf")
        self.reported = False

    def active(self, now: float) -> bool:
        return now < self.until

    def report(self, ctx: Context, pod: Obj, err: KubeError, now: float, message: str) -> None:
        self.until = now + FORBIDDEN_RETRY
        if self.reported:
            return
        self.reported = True
        log.error(message, extra={"pod": pod_key(pod), "error": str(err)})
        ctx.event(pod, "FailedNomination", message, warning=True)


def _admission_denial(err: KubeError) -> bool:
    """A refusal by admission, not by RBAC: a webhook's (OPA Gatekeeper answers 403, "admission webhook ... denied
    the request") or a ValidatingAdmissionPolicy's whose reason is Forbidden ("ValidatingAdmissionPolicy '...' with
    binding '...' denied request"). It concerns that one pod, not every pod."""
    text = str(err)
    return "admission webhook" in text or "ValidatingAdmissionPolicy" in text


def _taints(node: Obj) -> list[Obj]:
    """The Node's ``spec.taints`` as written (the patch that lifts the hold writes the rest back unchanged)."""
    return [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]


def _hold_taint_of(node: Obj) -> Obj | None:
    """The Node's readiness-hold taint (``nodewright.io/nominating``), or None when it is not held."""
    return next((t for t in _taints(node) if t.get("key") == L.NOMINATING_TAINT_KEY), None)


def _unregistered(node: Obj | None) -> bool:
    """No Node yet, or one that still carries ``karpenter.sh/unregistered`` (registration adds the hold)."""
    return node is None or any(t.get("key") == L.UNREGISTERED_TAINT_KEY for t in _taints(node))
