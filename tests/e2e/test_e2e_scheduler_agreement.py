"""Opt-in: does the real kube-scheduler carry out the provisioner's plan? With nomination and without (issue 25).

Needs the control plane of ``controlplane.py`` with a kube-scheduler and a kube-controller-manager (its DaemonSet
and PersistentVolume controllers); skipped with the reason when either binary is not provided. For each generated case (:mod:`tests.e2e.cases`, 48 by
default, ``NODEWRIGHT_E2E_CASES`` to change) and each mode:

1. the provisioner decides (:func:`nodewright.sim.decision.decide`: the controller's ``Provisioner.provision``
   over the bundled catalog, as ``nodewright simulate -f`` runs it);
2. the case's PersistentVolumes/claims and Pods are created in a namespace of their own, and the suite waits until
   kube-scheduler marked every Pod ``Unschedulable`` (there is no Node yet);
3. every planned NodeClaim registers as a kubelet would: a Node with the NodeClaim's labels, the instance type's
   labels, zone, capacity type and hostname, the NodePool's taints plus ``karpenter.sh/unregistered`` and
   ``node.kubernetes.io/not-ready``, and the allocatable of our catalog;
4. with nomination: :class:`~nodewright.controllers.nomination.NominationController` patches
   ``status.nominatedNodeName`` through the production adapter (:class:`~nodewright.kube.client.KubernetesCluster`)
   and keeps reconciling every 0.25 s (as ``nodewright run``) while the Nodes turn Ready;
   in bind mode (``--bind-pods``) instead: each Node's ``karpenter.sh/unregistered`` taint comes off as the
   lifecycle controller's registration does, and ``Provisioner.on_registered`` binds the planned Pods to it
   (``pods/binding``), the production path; kube-scheduler has nothing left to place but the DaemonSet's Pods;
5. the Nodes turn Ready one after the other, ``NODEWRIGHT_E2E_READY_GAP`` s apart (1 s by default), as kubelets
   report it: only the ``Ready`` condition is written; the node lifecycle controller of kube-controller-manager lifts
   ``node.kubernetes.io/not-ready`` (until 2026-12-02 run o the suite removed the boot taints itself, with the Node
   still ``Ready=False``, which started a wave of failed attempts of its own), and the real kube-scheduler places
   the Pods.

Modes: ``hold`` (the controller's defaults: nomination with the readiness hold, ``NOMINATION_HOLD``: each Node
registers with ``nodewright.io/nominating=<node>:NoSchedule`` as the lifecycle controller's registration gives it,
the nomination controller pins each Pod to its Node with the toleration of that taint and lifts the holds once the
Pods are placed), ``pin`` (the same hold with nomination off: ``NOMINATE_PODS=false``, or an API server older than
1.34), ``nom`` (nomination alone: ``NOMINATION_HOLD=false``), ``plain`` (neither: kube-scheduler on its own) and
``bind``; ``NODEWRIGHT_E2E_MODES`` (comma-separated, default all five) picks some.

A case *agrees* when every Pod is bound to a launched Node and no launched Node is left without a Pod (the
DaemonSet's aside): the issue's measure. Pods bound to another Node than planned are counted too ("moved").
The table is printed; ``NODEWRIGHT_E2E_REPORT`` names a JSON file to write it to, ``NODEWRIGHT_E2E_ONLY`` (comma-separated
case names) re-runs some cases. The issue's targets, 100% of the cases with nomination and >= 95% without, are
asserted on the controller's defaults (``hold`` and ``pin``, both asserted to keep every plan), with nomination
never lowering the agreement and bind mode keeping every plan; nomination alone (``nom``) and the scheduler alone
(``plain``) are measured, not asserted to a target (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from nodewright.api import labels as L
from nodewright.cloud.catalog import load_instance_types
from nodewright.controllers.common import Context
from nodewright.controllers.nomination import NominationController, hold_taint
from nodewright.controllers.provisioning import Nomination, Provisioner
from nodewright.kube import resources as r
from nodewright.kube.client import KubernetesCluster
from nodewright.kube.rest import RestClient, load_api_client
from nodewright.sim.decision import decide
from nodewright.state.cluster import snapshot

from .cases import Case, generate, planned_node
from .controlplane import ControlPlane, skip_reason
from .test_e2e_flow import api_client, core, crds  # noqa: F401 (fixtures shared with the flow suite)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(3600)]
REGION = "us-east-1"
RUN = uuid.uuid4().hex[:4]
UNSCHEDULABLE_WAIT = 15.0  # s for kube-scheduler to try every pod once with no Node
SETTLE = 6.0  # s without a new binding after the last Node turned Ready: the scheduler is done
DEADLINE = 45.0  # s per run at most
VOLUME_CACHE_WAIT = 1.5  # s between creating the volumes and the pods that mount them
REGISTRATION_SETTLE = 0.5  # s between the Nodes' first status and their registration (karpenter.sh/unregistered off)
REGISTERED_TO_READY = 2.0  # s between the Nodes' registration (and nomination) and their turning Ready
# s between two Nodes of one batch turning Ready (instances launched together boot seconds apart, not in the same
# millisecond). 0 is the worst case for nomination: kube-scheduler retries every pending pod at each Node's Ready,
# clears the nomination of each that fits nowhere yet, and (SchedulerPopFromBackoffQ) retries it at the next Node's
# Ready milliseconds later, before the controller's next pass (0.25 s) has set it again.
READY_GAP = float(os.environ.get("NODEWRIGHT_E2E_READY_GAP", "1.0"))
MODES = ("hold", "pin", "nom", "plain", "bind")
MODE_NAMES = {"hold": "with nomination (the default: with the readiness hold)",
              "pin": "without nomination (the readiness hold alone)",
              "nom": "nomination alone (NOMINATION_HOLD=false)", "plain": "neither (kube-scheduler alone)",
              "bind": "bind mode"}


@dataclass
class Outcome:
    """One case in one mode."""

    case: str
    mode: str  # one of MODES
    pods: int
    nodes: int
    bound: int
    moved: int
    pending: int
    empty_nodes: int
    features: str
    why: str = ""  # kube-scheduler's message for the first pod left pending
    renominated: int = 0  # most times kube-scheduler cleared one pod's nomination and the controller set it again
    detail: str = ""  # for a case that disagrees: each pending pod and empty Node, and where its planned pods went

    @property
    def agrees(self) -> bool:
        return self.pending == 0 and self.empty_nodes == 0


@pytest.fixture(scope="module")
def adapter(real_scheduler: ControlPlane, crds: list[str]) -> Iterator[KubernetesCluster]:  # noqa: F811
    """The production cluster adapter (informers on pods and nodes) the nomination controller writes through."""
    cluster = KubernetesCluster(RestClient(load_api_client(real_scheduler.kubeconfig)), time.time,
                                kinds=(r.PODS, r.NODES), watch_timeout=60)
    stop = threading.Event()
    cluster.start(stop)
    assert cluster.wait_for_sync(60)
    yield cluster
    stop.set()


def _in_namespace(doc: dict[str, Any], ns: str) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    out["metadata"]["namespace"] = ns
    return out


def _wait(check: Any, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return check()


def run_case(core_api: k8s.CoreV1Api, apps: k8s.AppsV1Api, adapter: KubernetesCluster, case: Case, mode: str,
             types: dict[str, Any]) -> Outcome:
    """One case in one mode (see module docstring); everything it created is deleted before it returns."""
    nominate, hold = mode in ("nom", "hold"), mode in ("hold", "pin")
    ns = f"{case.name}-{mode}-{RUN}"
    decision = decide(case.documents(), region=REGION)
    planned: dict[str, str] = {}
    nodes: list[tuple[str, dict[str, Any]]] = []
    for i, claim in enumerate(decision["nodeclaims"]):
        name = f"{ns}-n{i}"
        nodes.append((name, claim))
        for key in claim["pods"]:
            planned[key.split("/", 1)[1]] = name
    core_api.create_namespace({"metadata": {"name": ns}})
    pvs = []
    try:
        # Pre-bound volumes: the PersistentVolume (claimRef) first, then its claim (volumeName) once the PV
        # controller has seen the volume, which then completes the binding (a claim naming a volume the controller
        # has not seen yet is marked Lost).
        for doc in case.volumes:
            if doc["kind"] == "PersistentVolume":
                doc = _in_namespace(doc, ns)
                doc["metadata"]["name"] = f"{ns}-{doc['metadata']['name']}"
                doc["metadata"].pop("namespace")
                doc["spec"]["claimRef"]["namespace"] = ns
                core_api.create_persistent_volume(doc)
                pvs.append(doc["metadata"]["name"])
        _wait(lambda: all(core_api.read_persistent_volume(pv).status.phase == "Available" for pv in pvs), 20)
        for doc in case.volumes:
            if doc["kind"] == "PersistentVolumeClaim":
                doc = _in_namespace(doc, ns)
                doc["metadata"].pop("annotations", None)  # the PV controller completes the binding
                doc["spec"]["volumeName"] = f"{ns}-{doc['spec']['volumeName']}"
                core_api.create_namespaced_persistent_volume_claim(ns, doc)
        _wait(lambda: all(c.status.phase == "Bound"
                          for c in core_api.list_namespaced_persistent_volume_claim(ns).items), 20)
        if pvs:
            # kube-scheduler must have the volumes in its cache before it first tries the pods: a pod rejected for a
            # volume it has not seen yet waits for a volume event that already passed (up to 5 minutes).
            time.sleep(VOLUME_CACHE_WAIT)
        for doc in case.pods:
            core_api.create_namespaced_pod(ns, _in_namespace(doc, ns))
        names = [p["metadata"]["name"] for p in case.pods]

        def unschedulable() -> bool:
            pods = core_api.list_namespaced_pod(ns).items
            return all(any(c.type == "PodScheduled" and c.reason == "Unschedulable"
                           for c in (p.status.conditions or [])) for p in pods if p.metadata.name in names)

        _wait(unschedulable, UNSCHEDULABLE_WAIT)
        for doc in case.daemonsets:
            apps.create_namespaced_daemon_set(ns, _in_namespace(doc, ns))
        for name, claim in nodes:
            # One POST with the status, as a kubelet registers (the API server keeps a Node's status on create): a
            # Node created without conditions loses its not-ready taint to the node lifecycle controller, which
            # derives it from the Ready condition, and was schedulable before Ready (run s, case-19: two pods bound
            # at registration).
            node, status = planned_node(name, claim, types, REGION)
            core_api.create_node({**node, "status": status})
        # The node lifecycle controller first settles the new Nodes' not-ready taint (it reconciles it from the
        # Ready condition): a registration patch before that could be undone by its swap.
        _wait(lambda: all(any(t.key == L.NOT_READY_TAINT_KEY for t in core_api.read_node(n).spec.taints or [])
                          for n, _ in nodes), 10, 0.1)
        time.sleep(REGISTRATION_SETTLE)
        for name, _ in nodes:  # registration (LifecycleController): karpenter.sh/unregistered off, the hold on
            _register(core_api, name, hold)
        stop = threading.Event()
        controller = None
        if nominate or hold:  # the controller keeps reconciling, as in `nodewright run` (every 0.25 s)
            controller = _nominate(adapter, ns, planned, [n for n, _ in nodes], nominate, hold)
            loop = threading.Thread(target=_keep_nominating, args=(controller, stop), daemon=True)
            loop.start()
        bind_detail = _bind(adapter, core_api, ns, planned, nodes) if mode == "bind" else ""
        try:
            # A real node turns Ready tens of seconds after it registers.
            time.sleep(REGISTERED_TO_READY)
            for i, (name, _) in enumerate(nodes):  # Ready, one after the other, as the kubelets report it
                if i and READY_GAP:
                    time.sleep(READY_GAP)
                # Only the condition: the node lifecycle controller lifts node.kubernetes.io/not-ready (ms later)
                # and the hold stays until the nomination controller lifts it.
                core_api.patch_node_status(name, {"status": {"conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
            outcome = _outcome(core_api, ns, case, mode, planned, [n for n, _ in nodes])
            if bind_detail:
                outcome.detail = "; ".join(d for d in (bind_detail, outcome.detail) if d)
            if controller is not None:
                outcome.renominated = max(controller.cleared.values(), default=0)
            return outcome
        finally:
            stop.set()
    finally:
        _cleanup(core_api, apps, ns, [n for n, _ in nodes], pvs, bool(case.daemonsets))


def _register(core_api: k8s.CoreV1Api, name: str, hold: bool) -> None:
    """Registration's taint update, guarded by the Node's resourceVersion (retried on a conflict), so a concurrent
    update of the node lifecycle controller is never overwritten."""
    for _ in range(10):
        current = core_api.read_node(name)
        registered = [{"key": t.key, "value": t.value, "effect": t.effect} for t in current.spec.taints or []
                      if t.key != L.UNREGISTERED_TAINT_KEY] + ([hold_taint(name)] if hold else [])
        try:
            core_api.patch_node(name, {"metadata": {"resourceVersion": current.metadata.resource_version},
                                       "spec": {"taints": registered}})
            return
        except ApiException as err:
            if err.status != 409:
                raise
    raise AssertionError(f"registering {name}: 10 conflicts in a row")


def _bind(adapter: KubernetesCluster, core_api: k8s.CoreV1Api, ns: str, planned: dict[str, str],
          nodes: list[tuple[str, dict[str, Any]]]) -> str:
    """Bind mode: each Node registered (its ``karpenter.sh/unregistered`` taint off, as ``LifecycleController``'s
    registration does, which then calls ``Provisioner.on_registered``), and the provisioner's pass binds the Pods
    planned for it :data:`~nodewright.controllers.provisioning.BIND_SETTLE` s later (``Provisioner.bind_due``; the
    NodeClaims, which this suite does not create, stand in the snapshot by provider ID). Returns "" when every planned
    Pod was bound where planned, else which were not and what the Nodes hold (the case's detail line)."""
    _wait(lambda: all(adapter.get(r.NODES, n) is not None for n, _ in nodes)
          and all(adapter.get(r.PODS, p, ns) is not None for p in planned), 20)
    ctx = Context(adapter, None, time.time)  # type: ignore[arg-type]  # binding never calls the cloud
    provisioner = Provisioner(ctx, bind_pods=True)
    now = time.time()
    provisioner.nominations = {f"{ns}/{pod}": Nomination(node, True, now) for pod, node in planned.items()}
    claims = {}
    for name, _ in nodes:  # registered by run_case (karpenter.sh/unregistered off)
        node = core_api.read_node(name)
        claims[name] = {"metadata": {"name": name}, "status": {"providerID": node.spec.provider_id}}
        provisioner.on_registered(claims[name], adapter.get(r.NODES, name) or {})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        state = snapshot(adapter)
        for claim in claims.values():
            state.nodeclaims[claim["metadata"]["name"]] = claim
            state.nodeclaim_by_provider_id[claim["status"]["providerID"]] = claim
        provisioner.bind_due(state)
        if all(adapter.get(r.PODS, p, ns) and (adapter.get(r.PODS, p, ns) or {}).get("spec", {}).get("nodeName")
               for p in planned):
            break
        time.sleep(0.25)  # the run loop's pass
    unbound = sorted(p for p in planned if core_api.read_namespaced_pod(p, ns).spec.node_name != planned[p])
    if not unbound:
        return ""
    on = {n: sorted(f"{p.metadata.name}" for p in core_api.list_namespaced_pod(
        ns, field_selector=f"spec.nodeName={n}").items) for n in sorted({planned[p] for p in unbound})}
    return (f"bind: {len(unbound)} of {len(planned)} pods not bound to their planned Node: "
            + ", ".join(f"{p} (planned {planned[p]}, bind failures {provisioner.bind_backoff.failures(f'{ns}/{p}')})"
                        for p in unbound) + f"; on those Nodes: {on}")


def _keep_nominating(controller: NominationController, stop: threading.Event) -> None:
    while not stop.wait(0.25):
        controller.reconcile()


def _nominate(adapter: KubernetesCluster, ns: str, planned: dict[str, str], nodes: list[str],
              nominate: bool, hold: bool) -> NominationController:
    """The nomination controller over the real API server: the plan as the provisioner would hold it. Returns once
    it nominated (``nominate``) and pinned (``hold``) every planned Pod."""
    _wait(lambda: all(adapter.get(r.NODES, n) is not None for n in nodes)
          and all(adapter.get(r.PODS, p, ns) is not None for p in planned), 20)
    ctx = Context(adapter, None, time.time)  # type: ignore[arg-type]  # nomination never calls the cloud
    provisioner = Provisioner(ctx)
    now = time.time()
    provisioner.nominations = {f"{ns}/{pod}": Nomination(node, False, now) for pod, node in planned.items()}
    controller = NominationController(ctx, provisioner, enabled=nominate, hold=hold)

    def pinned() -> int:
        return sum(1 for pod in planned if any(t.get("key") == L.NOMINATING_TAINT_KEY for t in
                                               ((adapter.get(r.PODS, pod, ns) or {}).get("spec") or {}).get("tolerations") or []))

    for _ in range(5):  # a 409 (the pod moved on since the cache) is retried after its backoff
        controller.reconcile()
        if (not nominate or len(controller.ours) == len(planned)) and (not hold or pinned() == len(planned)):
            return controller
        time.sleep(1.1)
    # Not an abort of the whole run: the case's outcome shows where the pods went.
    print(f"warning: nominated {len(controller.ours)} and pinned {pinned() if hold else 0} of {len(planned)} pods "
          f"in {ns} before the Nodes turned Ready")
    return controller


def _outcome(core_api: k8s.CoreV1Api, ns: str, case: Case, mode: str, planned: dict[str, str],
             nodes: list[str]) -> Outcome:
    names = {p["metadata"]["name"] for p in case.pods}
    started = last_change = time.monotonic()
    last: dict[str, str] = {}
    while True:
        placed = {p.metadata.name: p.spec.node_name or "" for p in core_api.list_namespaced_pod(ns).items
                  if p.metadata.name in names}
        if placed != last:
            last, last_change = placed, time.monotonic()
        now = time.monotonic()
        if all(placed.values()) and len(placed) == len(names):
            break
        if now - last_change > SETTLE or now - started > DEADLINE:
            break
        time.sleep(0.25)
    used = {n for n in last.values() if n}
    why = ""
    for pod in core_api.list_namespaced_pod(ns).items:
        if pod.metadata.name in names and not pod.spec.node_name:
            why = next((f"{pod.metadata.name}: {c.message}" for c in pod.status.conditions or []
                        if c.type == "PodScheduled"), pod.metadata.name)
            break
    empty = [n for n in nodes if n not in used]
    detail = []
    for pod, node in sorted(last.items()):
        if not node:
            detail.append(f"{pod} pending (planned {planned.get(pod, '-')})")
    for node in empty:
        went = sorted(f"{pod}->{last.get(pod) or 'pending'}" for pod, n in planned.items() if n == node)
        detail.append(f"{node} empty (its pods: {', '.join(went) or 'none'})")
    return Outcome(case.name, mode, len(names), len(nodes), sum(1 for n in last.values() if n),
                   sum(1 for pod, n in last.items() if n and n != planned.get(pod)),
                   sum(1 for n in last.values() if not n), len(empty),
                   ",".join(sorted(set(case.features))), why, detail="; ".join(detail))


def _cleanup(core_api: k8s.CoreV1Api, apps: k8s.AppsV1Api, ns: str, nodes: list[str], pvs: list[str],
             daemonsets: bool) -> None:
    def quietly(call: Any, *args: Any, **kwargs: Any) -> None:
        try:
            call(*args, **kwargs)
        except ApiException as err:
            if err.status != 404:
                raise

    if daemonsets:
        quietly(apps.delete_collection_namespaced_daemon_set, ns)
    quietly(core_api.delete_collection_namespaced_pod, ns, grace_period_seconds=0)
    quietly(core_api.delete_collection_namespaced_persistent_volume_claim, ns)
    for pv in pvs:
        quietly(core_api.delete_persistent_volume, pv)
    for node in nodes:
        quietly(core_api.delete_node, node)
    quietly(core_api.delete_namespace, ns)
    _wait(lambda: not core_api.list_namespaced_pod(ns).items, 20)


def render(outcomes: list[Outcome]) -> str:
    """The per-case table and the two agreement rates."""
    lines = [f"{'case':8} {'mode':6} {'pods':>4} {'nodes':>5} {'moved':>5} {'pending':>7} {'empty':>5}  features"]
    for o in outcomes:
        lines.append(f"{o.case:8} {o.mode:6} {o.pods:4d} {o.nodes:5d} {o.moved:5d} "
                     f"{o.pending:7d} {o.empty_nodes:5d}  {o.features}"
                     + (f"  (renominated up to {o.renominated}x)" if o.renominated else "")
                     + (f"\n    {o.why}" if o.why else "") + (f"\n    {o.detail}" if o.detail else ""))
    for mode in MODES:
        runs = [o for o in outcomes if o.mode == mode]
        if not runs:
            continue
        agree = sum(1 for o in runs if o.agrees)
        moved = sum(o.moved for o in runs)
        lines.append(f"{MODE_NAMES[mode]}: {agree}/{len(runs)} cases agree, "
                     f"{moved} pods moved, {sum(o.pending for o in runs)} pending")
    return "\n".join(lines)


def test_real_scheduler_carries_out_the_plan(real_scheduler: ControlPlane, core: k8s.CoreV1Api,  # noqa: F811
                                             api_client: k8s.ApiClient, adapter: KubernetesCluster) -> None:  # noqa: F811
    cases = generate(int(os.environ.get("NODEWRIGHT_E2E_CASES", "48")), seed=25)
    only = {name for name in os.environ.get("NODEWRIGHT_E2E_ONLY", "").split(",") if name}
    if only:  # re-run some cases by name (e.g. NODEWRIGHT_E2E_ONLY=case-05,case-21)
        cases = [case for case in cases if case.name in only]
    if "kube-controller-manager" not in real_scheduler.processes:
        pytest.skip(skip_reason(("kube-controller-manager",)))  # DaemonSets and volume binding need it
    apps = k8s.AppsV1Api(api_client)
    types = {t.name: t for t in load_instance_types(REGION)}
    modes = [m for m in os.environ.get("NODEWRIGHT_E2E_MODES", ",".join(MODES)).split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        pytest.fail(f"NODEWRIGHT_E2E_MODES: unknown mode(s) {', '.join(unknown)}; known: {', '.join(MODES)}")
    outcomes = []
    report = os.environ.get("NODEWRIGHT_E2E_REPORT")
    for case in cases:
        for mode in modes:
            outcomes.append(run_case(core, apps, adapter, case, mode, types))
        if report:  # after each case: a run cut short keeps what it measured
            with open(report, "w") as out:
                json.dump({"outcomes": [asdict(o) for o in outcomes]}, out, indent=1)
    table = render(outcomes)
    print(table)
    if report:
        with open(report, "w") as out:
            json.dump({"outcomes": [asdict(o) for o in outcomes]}, out, indent=1)
    agree = {mode: sum(1 for o in outcomes if o.mode == mode and o.agrees) for mode in modes}
    if "nom" in agree and "plain" in agree:  # nomination never makes the real scheduler worse at the plan
        assert agree["nom"] >= agree["plain"], table
    for held in ("hold", "pin"):  # pinned to their held Nodes, the pods keep the plan whatever the Ready order (run x)
        if held in agree:
            assert agree[held] == len(cases), table
    if "bind" in agree:  # bound by the controller, the plan is the placement
        assert sum(o.moved for o in outcomes if o.mode == "bind") == 0 and agree["bind"] == len(cases), table
