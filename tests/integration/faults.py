"""The fault campaign (issue 32): the real controller (``runtime.build_runtime`` + ``serve`` in a thread) against
the API emulator and moto on 127.0.0.1, while a seeded plan injects faults, and the invariants checked after
every run.

One run (:func:`run_campaign`):

1. a replica leads; a burst of pods (500m each) lands on a NodePool of c5.large and m5.xlarge (limit 12 cpu);
   this module plays kube-scheduler (first fit on Ready, untainted nodes) and the kubelet (Nodes register for
   launched NodeClaims, pods run), and a ReplicaSet (a deleted pod of the workload comes back pending);
2. the workload shrinks, so disruption empties and consolidates nodes (replacements included);
3. meanwhile the plan injects, by request count (not by time): 409/429/500/503 on the controller's API writes, an
   API outage (every controller request 503, leases and watches included), cut watch streams, ICE in
   CreateFleet (alone, and beside a launched instance), throttling and 5xx from CreateFleet, a lost CreateFleet
   reply (launched, then a read timeout), TerminateInstances 500s, and one ``kill -9`` of the leader at a point of
   the plan (after CreateFleet, at a disruption taint, at a replacement's creation, at a candidate's deletion,
   at an eviction); a new replica takes over after the Lease expires;
4. faults stop; the run waits until the cluster is quiet and checks :data:`INVARIANTS`.

The seed fixes the plan (which faults, how many, where the kill happens, the workload sizes); thread timing
decides the interleaving, and the invariants hold for every interleaving, so the verdict does not depend on it.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from nodewright.api import labels as L
from nodewright.controllers.orchestration import COMMAND_ANNOTATION, REPLACEMENT_ANNOTATION
from nodewright.kube import resources as r
from nodewright.logging import LIMITER
from nodewright.quantities import parse_quantity

from .awsmoto import Account
from .emulator import EmulatorThread
from .harness import Replica, ec2nodeclass, nodepool, pending_pod, register_node

#: What every run asserts once the faults stopped and the cluster is quiet.
INVARIANTS = ("no leaked instance", "no duplicate launch", "no pod pending", "no node stuck terminating",
              "NodePool limits never exceeded", "no disrupted taint without a live command",
              "no traceback in the controller log")
CRASH_POINTS = ("after-create-fleet", "disruption-taint", "replacement-create", "candidate-delete", "eviction")
LIMIT_CPU = 12_000  # millicores
POD_CPU = 500
WRITE_VERBS = ("create", "update", "patch", "delete")
DRIFTED_TEAM = "web-v2"


class Crash(BaseException):
    """``kill -9``: raised in the leader's thread; no handler of the controller catches a BaseException."""


@dataclass
class Plan:
    """The faults of one run, drawn from its seed."""

    seed: int
    rng: random.Random = field(init=False)
    write_fault_rate: float = 0.0
    lost_reply_rate: float = 0.0  # of the controller's API writes made, then answered 500
    crash_point: str = ""
    burst: int = 0
    shrink_to: int = 0
    outage_after: int = 0  # the outage starts at this controller request (count), lasts ``outage_requests``
    outage_requests: int = 0
    fleet_faults: list[str] = field(default_factory=list)  # one per CreateFleet call, in order, then none
    terminate_failures: int = 0
    watch_cuts: int = 0
    keep: str = "oldest"
    drift: bool = False

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        rng = self.rng
        self.write_fault_rate = rng.choice((0.05, 0.1, 0.15))
        self.crash_point = CRASH_POINTS[self.seed % len(CRASH_POINTS)]
        self.burst = rng.randint(6, 10)
        self.shrink_to = rng.randint(1, 2)
        self.outage_after = rng.randint(60, 200)
        self.outage_requests = rng.randint(20, 60)
        kinds = ["ice", "ice-beside-instance", "throttle", "5xx", "lost-reply", "read-timeout"]
        rng.shuffle(kinds)
        self.fleet_faults = kinds[: rng.randint(2, 4)]
        self.terminate_failures = rng.randint(1, 2)
        self.watch_cuts = rng.randint(1, 2)
        self.keep = rng.choice(("oldest", "newest"))  # which pods the workload keeps when it shrinks
        # For the kills during a replacement and its drain, the NodePool's template changes instead: every node
        # drifts and is replaced (a replacement NodeClaim first, then the drain).
        self.drift = self.crash_point in ("replacement-create", "eviction")
        # Drawn last, so the plans drawn above stay what they were for every seed.
        self.lost_reply_rate = rng.choice((0.02, 0.05))


@dataclass
class Result:
    """What one run injected and found."""

    seed: int
    injected: Counter[str] = field(default_factory=Counter)
    crashes: int = 0
    violations: list[str] = field(default_factory=list)
    max_cpu: int = 0
    recovery_seconds: float = 0.0
    launches: int = 0
    streams_cut: int = 0  # watch connections the cuts broke (one per informer)
    #: What :func:`check_invariants` counted (each 0 when its invariant held): leaked instances, duplicate
    #: launches, pods pending, nodes stuck terminating, stale disrupted taints, tracebacks.
    found: Counter[str] = field(default_factory=Counter)


class FaultInjector:
    """Installs the plan's faults on the emulator and on the shared moto clients; :meth:`stop` removes them."""

    def __init__(self, plan: Plan, kube: EmulatorThread, account: Account, result: Result) -> None:
        self.plan, self.kube, self.account, self.result = plan, kube, account, result
        self.active = True
        self.requests = 0
        self.fleet_calls = 0
        self.terminates = 0
        self.leader: Replica | None = None
        self.crash_armed = True
        self._lock = threading.Lock()
        from .awsmoto import _controller_clients

        self.ec2 = _controller_clients(account.url).ec2
        kube.emulator.fault = self._kube_fault
        kube.emulator.lost_reply = self._kube_lost_reply
        events = self.ec2.meta.events
        events.register_first("before-parameter-build.ec2.CreateFleet", self._plan_fleet,
                              unique_id="campaign-fleet-plan")
        events.register_first("before-call.ec2.CreateFleet", self._before_fleet, unique_id="campaign-fleet-before")
        events.register_first("after-call.ec2.CreateFleet", self._after_fleet, unique_id="campaign-fleet-after")
        events.register_first("before-call.ec2.TerminateInstances", self._before_terminate,
                              unique_id="campaign-terminate")

    def stop(self) -> None:
        self.active = False
        self.kube.emulator.fault = None
        self.kube.emulator.lost_reply = None
        events = self.ec2.meta.events
        events.unregister("before-parameter-build.ec2.CreateFleet", unique_id="campaign-fleet-plan")
        events.unregister("before-call.ec2.CreateFleet", unique_id="campaign-fleet-before")
        events.unregister("after-call.ec2.CreateFleet", unique_id="campaign-fleet-after")
        events.unregister("before-call.ec2.TerminateInstances", unique_id="campaign-terminate")

    # --- Kubernetes API ---------------------------------------------------------------------------------

    def _kube_fault(self, verb: str, resource: str, name: str | None) -> int | None:
        with self._lock:
            if not self.active:
                return None
            self.requests += 1
            start = self.plan.outage_after
            if start <= self.requests < start + self.plan.outage_requests:
                self.result.injected["api outage 503"] += 1
                return 503
            if verb in WRITE_VERBS and resource != "events" and self.plan.rng.random() < self.plan.write_fault_rate:
                status = self.plan.rng.choice((409, 429, 500, 503))
                self.result.injected[f"api write {status}"] += 1
                return status
        return None

    def _kube_lost_reply(self, verb: str, resource: str, name: str | None) -> int | None:
        """A write the API server made, answered with a 500 (the reply lost after the commit)."""
        with self._lock:
            if not self.active or verb not in WRITE_VERBS or resource == "events":
                return None
            if self.plan.rng.random() < self.plan.lost_reply_rate:
                self.result.injected["api write lost reply"] += 1
                return 500
        return None

    # --- EC2 ----------------------------------------------------------------------------------------------

    def _crash(self, point: str) -> None:
        """Kill the leader now if the plan's kill happens at ``point`` (once per run)."""
        leader = self.leader
        if not self.active or not self.crash_armed or self.plan.crash_point != point or leader is None:
            return
        if threading.current_thread() is not leader.thread:
            return
        self.crash_armed = False
        self.result.crashes += 1
        self.result.injected[f"kill -9 at {point}"] += 1
        crash(leader)

    def _plan_fleet(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """``before-parameter-build``: pick this CreateFleet call's fault (the API parameters are visible here)."""
        with self._lock:
            index = self.fleet_calls
            self.fleet_calls += 1
            fault = self.plan.fleet_faults[index] if self.active and index < len(self.plan.fleet_faults) else ""
        context["campaign"] = (fault, params)
        if fault:
            self.result.injected[f"CreateFleet {fault}"] += 1

    def _before_fleet(self, context: dict[str, Any], **_: Any) -> Any:
        fault, params = context.get("campaign", ("", {}))
        if fault == "ice":
            override = params["LaunchTemplateConfigs"][0]["Overrides"][0]
            return _ok({"FleetId": "fleet-ice", "Instances": [], "Errors": [_ice(params, override)]})
        if fault == "throttle":
            return _error(400, "RequestLimitExceeded", "Request limit exceeded.")
        if fault == "5xx":
            return _error(500, "InternalError", "An internal error has occurred")
        if fault == "read-timeout":
            raise ReadTimeoutError(endpoint_url=self.account.url)
        return None

    def _after_fleet(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        fault, params = context.get("campaign", ("", {}))
        if not parsed.get("Instances"):
            return
        self.result.launches += 1
        if fault == "ice-beside-instance":
            overrides = [o for cfg in params.get("LaunchTemplateConfigs", []) for o in cfg["Overrides"]]
            parsed.setdefault("Errors", []).extend(_ice(params, o) for o in overrides[1:2])
        if fault == "lost-reply":
            raise ReadTimeoutError(endpoint_url=self.account.url)
        self._crash("after-create-fleet")

    def _before_terminate(self, params: dict[str, Any], **_: Any) -> Any:
        with self._lock:
            self.terminates += 1
            fail = self.active and self.terminates <= self.plan.terminate_failures
        if fail:
            self.result.injected["TerminateInstances 500"] += 1
            return _error(500, "InternalError", "An internal error has occurred")
        return None

    # --- the controller's cluster (crash points in the leader's own writes) --------------------------------

    def arm(self, replica: Replica) -> None:
        """Wrap the replica's cluster writes so the plan's kill can happen inside them."""
        self.leader = replica
        cluster = replica.runtime.cluster
        patch, create, delete, evict = cluster.patch, cluster.create, cluster.delete, cluster.evict_pod  # type: ignore[attr-defined]

        def patched(kind: r.ResourceKind, name: str, body: Any, namespace: str | None = None) -> Any:
            taints = ((body.get("spec") or {}).get("taints") or []) if isinstance(body, dict) else []
            if kind == r.NODES and any(t.get("key") == L.DISRUPTED_TAINT_KEY for t in taints):
                current = cluster.get(r.NODECLAIMS, _claim_of(cluster, name)) if _claim_of(cluster, name) else None
                if current is not None and COMMAND_ANNOTATION in (current["metadata"].get("annotations") or {}):
                    self._crash("disruption-taint")
            return patch(kind, name, body, namespace)

        def created(kind: r.ResourceKind, obj: Any) -> Any:
            if kind == r.NODECLAIMS and REPLACEMENT_ANNOTATION in ((obj.get("metadata") or {}).get("annotations") or {}):
                self._crash("replacement-create")
            return create(kind, obj)

        def deleted(kind: r.ResourceKind, name: str, namespace: str | None = None) -> Any:
            result = delete(kind, name, namespace)
            if kind == r.NODECLAIMS:
                current = cluster.get(r.NODECLAIMS, name)
                if current is not None and COMMAND_ANNOTATION in (current["metadata"].get("annotations") or {}):
                    self._crash("candidate-delete")
            return result

        def evicted(namespace: str, name: str) -> Any:
            self._crash("eviction")
            return evict(namespace, name)

        cluster.patch, cluster.create, cluster.delete, cluster.evict_pod = (  # type: ignore[method-assign]
            patched, created, deleted, evicted)


def _cpu(text: str) -> int:
    return parse_quantity(text, "cpu")


def _claim_of(cluster: Any, node: str) -> str:
    doc = cluster.get(r.NODES, node)
    pid = ((doc or {}).get("spec") or {}).get("providerID")
    for claim in cluster.list(r.NODECLAIMS):
        if (claim.get("status") or {}).get("providerID") == pid:
            return str(claim["metadata"]["name"])
    return ""


def _ice(params: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    return {"LaunchTemplateAndOverrides": {
        "LaunchTemplateSpecification": params["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"],
        "Overrides": {"InstanceType": override["InstanceType"], "SubnetId": override["SubnetId"]}},
        "Lifecycle": "on-demand", "ErrorCode": "InsufficientInstanceCapacity",
        "ErrorMessage": f"We currently do not have sufficient {override['InstanceType']} capacity (injected)"}


def _ok(parsed: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    return AWSResponse("https://127.0.0.1/", 200, {}, None), {**parsed, "ResponseMetadata": {"HTTPStatusCode": 200}}


def _error(status: int, code: str, message: str) -> tuple[AWSResponse, dict[str, Any]]:
    return AWSResponse("https://127.0.0.1/", status, {}, None), {
        "Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}


def crash(replica: Replica) -> None:
    """``kill -9`` of ``replica`` from inside its own thread: the Lease is not released, memory is lost."""
    if replica.runtime.elector is not None:
        replica.runtime.elector.release = lambda: None  # type: ignore[method-assign]
    replica.runtime.stop.set()  # the informer threads die with the process
    raise Crash()


# --- kube-scheduler, the kubelet and a ReplicaSet, played by the test --------------------------------------------


class World:
    """The parts of a cluster the controller does not run, stepped by the test's main thread."""

    def __init__(self, kube: EmulatorThread, core: k8s.CoreV1Api, desired: int, keep: str = "oldest") -> None:
        self.kube, self.core, self.desired, self.keep = kube, core, desired, keep
        self.serial = 0
        self.registered: set[str] = set()

    def objects(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.kube.emulator.snapshot(plural, namespace)

    def step(self) -> None:
        self._register()
        self._replicate()
        self._schedule()

    def _register(self) -> None:
        for claim in self.objects("nodeclaims"):
            status = claim.get("status") or {}
            pid = status.get("providerID")
            if not pid or pid in self.registered or claim["metadata"].get("deletionTimestamp") \
                    or not status.get("capacity"):
                continue
            self.registered.add(pid)
            try:
                register_node(self.core, claim)
            except ApiException:
                self.registered.discard(pid)

    def _replicate(self) -> None:
        live = [p for p in self.objects("pods", "default") if not p["metadata"].get("deletionTimestamp")]
        for _ in range(self.desired - len(live)):
            pending_pod(self.core, f"web-{self.serial}", cpu=f"{POD_CPU}m")
            self.serial += 1
        order = sorted(live, key=lambda p: int(p["metadata"]["name"].rsplit("-", 1)[-1]), reverse=self.keep == "newest")
        for pod in order[self.desired:]:
            try:  # the ReplicaSet scaled down
                self.core.delete_namespaced_pod(pod["metadata"]["name"], "default")
            except ApiException:
                pass

    def _schedule(self) -> None:
        pods = [p for p in self.objects("pods", "default") if not p["metadata"].get("deletionTimestamp")]
        used: Counter[str] = Counter()
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName"):
                used[pod["spec"]["nodeName"]] += POD_CPU
        nodes = [n for n in self.objects("nodes") if _schedulable(n)]
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName"):
                continue
            for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
                name = node["metadata"]["name"]
                if _cpu(node["status"]["allocatable"]["cpu"]) - used[name] >= POD_CPU:
                    try:
                        self.core.create_namespaced_binding("default", k8s.V1Binding(
                            metadata=k8s.V1ObjectMeta(name=pod["metadata"]["name"]),
                            target=k8s.V1ObjectReference(kind="Node", name=name)), _preload_content=False)
                        self.core.patch_namespaced_pod_status(pod["metadata"]["name"], "default", {"status": {
                            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
                    except ApiException:
                        break
                    used[name] += POD_CPU
                    break


def _schedulable(node: dict[str, Any]) -> bool:
    if node["metadata"].get("deletionTimestamp") or (node.get("spec") or {}).get("unschedulable"):
        return False
    if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in (node.get("spec") or {}).get("taints") or []):
        return False
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), {})
    return ready.get("status") == "True" and bool((node.get("status") or {}).get("allocatable"))


# --- one run -------------------------------------------------------------------------------------------------


def claim_cpu(claims: list[dict[str, Any]]) -> int:
    """Millicores of the NodeClaims not being deleted (their capacity; a claim not launched yet counts its
    request)."""
    total = 0
    for claim in claims:
        if claim["metadata"].get("deletionTimestamp"):
            continue
        capacity = (claim.get("status") or {}).get("capacity") or {}
        total += _cpu(capacity["cpu"]) if "cpu" in capacity else _cpu(
            ((claim.get("spec") or {}).get("resources") or {}).get("requests", {}).get("cpu", "0"))
    return total


def quiet(world: World) -> bool:
    """Nothing left to do: every pod of the workload bound, no NodeClaim or Node deleting or unready, no
    disrupted taint, every launched NodeClaim registered."""
    pods = [p for p in world.objects("pods", "default") if not p["metadata"].get("deletionTimestamp")]
    if len(pods) != world.desired or any(not (p.get("spec") or {}).get("nodeName") for p in pods):
        return False
    claims, nodes = world.objects("nodeclaims"), world.objects("nodes")
    if any(c["metadata"].get("deletionTimestamp") for c in claims) or \
            any(n["metadata"].get("deletionTimestamp") for n in nodes):
        return False
    if any(_condition(c, L.CONDITION_READY) != "True" for c in claims) or len(claims) != len(nodes):
        return False
    return not any(t.get("key") == L.DISRUPTED_TAINT_KEY for n in nodes for t in n["spec"].get("taints") or [])


def _condition(obj: dict[str, Any], type_: str) -> str | None:
    return next((str(c.get("status")) for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == type_), None)


#: How long a leaked instance may outlive the quiet cluster: garbage collection terminates an instance without a
#: NodeClaim once it is older than the run's grace (3 s), at its next pass (every 1 s). A bound, not a speed target:
#: on a loaded machine the pass comes late, and the verdict must not depend on it.
LEAK_BOUND = 30.0


def leaked_instances(world: World, account: Account) -> list[str]:
    """IDs of the live instances no NodeClaim records."""
    known = {str((c.get("status") or {}).get("providerID", "")).rsplit("/", 1)[-1] for c in world.objects("nodeclaims")}
    return sorted(i["InstanceId"] for i in account.instances()
                  if i["State"]["Name"] in ("pending", "running") and i["InstanceId"] not in known)


def check_invariants(world: World, account: Account, result: Result, records: list[logging.LogRecord]) -> None:
    """Append every broken invariant to ``result.violations`` (one sentence each) and count what broke it in
    ``result.found``. The controller still runs: an instance launched for a NodeClaim that is gone (a lost reply,
    a rolled-back replacement) is garbage collection's to terminate, within :data:`LEAK_BOUND`."""
    deadline = time.monotonic() + LEAK_BOUND
    leaked = leaked_instances(world, account)
    while leaked and time.monotonic() < deadline:
        time.sleep(0.2)
        leaked = leaked_instances(world, account)
    claims, nodes = world.objects("nodeclaims"), world.objects("nodes")
    instances = account.instances()
    result.found["leaked instances"] = len(leaked)
    if leaked:
        result.violations.append(f"no leaked instance: {leaked} run without a NodeClaim")
    per_claim = Counter(next((t["Value"] for t in i.get("Tags", []) if t["Key"] == L.TAG_NODECLAIM), "?")
                        for i in instances)
    duplicates = sorted(name for name, n in per_claim.items() if n > 1)
    result.found["duplicate launches"] = sum(per_claim[name] - 1 for name in duplicates)
    if duplicates:
        result.violations.append(f"no duplicate launch: {duplicates} launched more than once")
    pending = sorted(p["metadata"]["name"] for p in world.objects("pods", "default")
                     if not (p.get("spec") or {}).get("nodeName"))
    result.found["pods pending"] = len(pending)
    if pending:
        result.violations.append(f"no pod pending: {pending}")
    stuck = sorted(o["metadata"]["name"] for o in claims + nodes if o["metadata"].get("deletionTimestamp"))
    result.found["nodes stuck terminating"] = len(stuck)
    if stuck:
        result.violations.append(f"no node stuck terminating: {stuck}")
    if result.max_cpu > LIMIT_CPU:
        result.violations.append(f"NodePool limits never exceeded: {result.max_cpu}m > {LIMIT_CPU}m")
    recorded = {c["metadata"]["name"] for c in claims if COMMAND_ANNOTATION in (c["metadata"].get("annotations") or {})}
    by_pid = {(c.get("status") or {}).get("providerID"): c["metadata"]["name"] for c in claims}
    stale = sorted(n["metadata"]["name"] for n in nodes
                   if any(t.get("key") == L.DISRUPTED_TAINT_KEY for t in n["spec"].get("taints") or [])
                   and by_pid.get(n["spec"].get("providerID")) not in recorded)
    result.found["stale disrupted taints"] = len(stale)
    if stale:
        result.violations.append(f"no disrupted taint without a live command: {stale}")
    tracebacks = [rec.getMessage() for rec in records if rec.exc_info or "controller %s failed" in str(rec.msg)]
    result.found["tracebacks"] = len(tracebacks)
    if tracebacks:
        result.violations.append(f"no traceback in the controller log: {tracebacks[:3]}")


def run_campaign(seed: int, kube: EmulatorThread, account: Account, core: k8s.CoreV1Api,
                 custom: k8s.CustomObjectsApi, records: list[logging.LogRecord], replicas: list[Replica],
                 deadline: float = 240.0) -> Result:
    """One seeded run (module docstring); returns what was injected and which invariants broke."""
    plan, result = Plan(seed), Result(seed)
    LIMITER.reset()
    kube.emulator.rbac_token = "nodewright-controller"  # faults hit the controller's requests only
    settings = {"lease_duration": 1.0, "renew_deadline": 0.7, "retry_period": 0.1, "gc_grace_period": 3.0,
                "gc_period": 1.0, "disruption_poll_period": 0.2, "disruption_validation_delay": 0.4}
    injector = FaultInjector(plan, kube, account, result)
    world = World(kube, core, plan.burst, plan.keep)
    generation = [0]

    def start() -> Replica:
        generation[0] += 1
        replica = Replica(kube, account, f"r{generation[0]}", **settings)
        replicas.append(replica)
        injector.arm(replica)
        replica.thread.start()
        return replica

    try:
        custom.create_cluster_custom_object("karpenter.k8s.aws", "v1", "ec2nodeclasses", ec2nodeclass())
        pool = nodepool(types=("c5.large", "m5.xlarge"))
        pool["spec"]["limits"] = {"cpu": str(LIMIT_CPU // 1000)}
        custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", pool)
        leader = start()
        started = time.monotonic()
        cuts = plan.watch_cuts
        phase, shrunk_at, claims_at_shrink, faults_end = "burst", 0.0, 0, 0.0
        while time.monotonic() - started < deadline:
            world.step()
            claims = world.objects("nodeclaims")
            result.max_cpu = max(result.max_cpu, claim_cpu(claims))
            if not leader.thread.is_alive():  # killed: a new process starts and waits out the Lease
                leader = start()
            if cuts and injector.requests > 50 * (plan.watch_cuts - cuts + 1):
                cuts -= 1
                result.injected["watch cut"] += 1
                result.streams_cut += kube.break_watches()
            now = time.monotonic()
            if phase == "burst" and quiet(world):
                phase, shrunk_at, claims_at_shrink = "shrink", now, len(claims)
                if plan.drift:  # every node drifts (NodePoolDrifted) and is replaced
                    custom.patch_cluster_custom_object("karpenter.sh", "v1", "nodepools", "general", {
                        "spec": {"template": {"metadata": {"labels": {"team": DRIFTED_TEAM}}}}})
                else:
                    world.desired = plan.shrink_to  # disruption empties and consolidates nodes
            elif phase == "shrink" and (quiet(world) and _consolidated(claims, claims_at_shrink, plan)
                                        or now - shrunk_at > 25):
                if injector.crash_armed:  # the planned point never came: kill -9 between two passes instead
                    injector.crash_armed = False
                    result.crashes += 1
                    result.injected["kill -9 between passes"] += 1
                    leader.stop(release=False)
                    leader = start()
                injector.stop()
                phase, faults_end = "recover", now
            elif phase == "recover" and _quiet_for(world, 0.6):
                result.recovery_seconds = time.monotonic() - faults_end
                break
            time.sleep(0.05)
        else:
            result.violations.append(f"the cluster did not become quiet within {deadline:.0f}s (phase {phase})")
        check_invariants(world, account, result, records)
    finally:
        injector.stop()
        for replica in replicas:
            if replica.thread.is_alive():
                replica.stop()
    return result


def _consolidated(claims: list[dict[str, Any]], before: int, plan: Plan) -> bool:
    """Disruption has done what the run invites: fewer NodeClaims after the shrink, or every node replaced after
    the drift."""
    if plan.drift:
        return all((c["metadata"].get("labels") or {}).get("team") == DRIFTED_TEAM for c in claims)
    return len(claims) < before


def _quiet_for(world: World, seconds: float) -> bool:
    """Quiet now and still quiet ``seconds`` later (the controller had passes in between to act)."""
    if not quiet(world):
        return False
    time.sleep(seconds)
    world.step()
    return quiet(world)
