"""A Kubernetes API emulator for integration tests: kmock's ``KubernetesEmulator`` made deep enough for nodewright.

kmock (by kopf's author) gives an aiohttp server on 127.0.0.1, request parsing into Kubernetes terms
(resource, namespace, name, subresource, action), API discovery, ``Status`` error rendering and a DSL for
ad-hoc reactions (``emulator['get /api/v1/pods'] << 500`` still overrides anything below). Its object store
is shallow, as measured with the official client: no uid/resourceVersion/creationTimestamp, selectors
ignored, no eviction, bindings without effect, no resourceVersion-aware watches. This subclass keeps kmock's
server, parsing, discovery and DSL and replaces the store with the API-server behaviour the controller relies
on, taken from the Kubernetes API concepts documentation and the apiserver's registry strategies:

* **metadata**: ``uid``; one cluster-wide, increasing ``resourceVersion`` (etcd revision); ``creationTimestamp``;
  ``generation`` (1 on create, +1 when ``spec`` changes); ``generateName``; server-owned fields immutable;
  list ``metadata.resourceVersion`` is the current revision; list items carry no ``kind``/``apiVersion`` for
  built-in kinds (as served).
* **selectors**: ``labelSelector`` (``=``, ``==``, ``!=``, ``in``, ``notin``, exists, ``!``) and
  ``fieldSelector`` (``metadata.name``, ``metadata.namespace``, ``spec.nodeName``, ``status.phase``, ...) on
  lists and watches; a watched object that stops/starts matching arrives as DELETED/ADDED.
* **optimistic concurrency**: PUT or PATCH carrying a stale ``metadata.resourceVersion`` -> 409 Conflict.
* **status subresource**: for kinds that have one, writes to the main resource keep ``status`` and writes to
  ``/status`` change only ``status``; create drops ``status`` of custom resources and resets a Pod's to
  ``Pending``.
* **finalizers**: DELETE with finalizers sets ``deletionTimestamp`` (once); removing the last finalizer of a
  deleting object deletes it; deleting a Node deletes the Pods bound to it (kube-controller-manager's pod GC).
* **pods/binding** (and the ``bindings`` collection): sets ``spec.nodeName`` and ``PodScheduled=True``; 409 when
  already bound. **pods/eviction**: 429 ``TooManyRequests`` while a PodDisruptionBudget selecting the pod has no
  disruption left (healthy = Ready pods; an un-Ready pod may go while the budget is met, the default
  ``IfHealthyBudget`` policy), else the pod is deleted.
* **watch**: ``resourceVersion`` resume from an event history, ``allowWatchBookmarks`` (a BOOKMARK every
  :attr:`bookmark_interval` seconds), ``timeoutSeconds``, ``410 Gone`` (an ERROR event, as the apiserver sends
  it) for a version older than the compacted history, and fault injection: :meth:`break_watches` drops live
  connections mid-stream, :meth:`compact` forgets the history.

* **graceful pod deletion**: deleting or evicting a Pod bound to a Node sets ``deletionTimestamp`` to now + its
  grace period (DeleteOptions ``gracePeriodSeconds``, else ``spec.terminationGracePeriodSeconds``, else 30 s) and
  the Pod stays, terminating, until its "kubelet" removes it when the grace period ends (scaled by
  :attr:`~NodewrightKubeEmulator.pod_grace_scale`; ``None`` waits for the test) or when a test calls
  :meth:`~NodewrightKubeEmulator.finish_pod`; an unbound Pod, or grace 0, goes at once.
* **RBAC** (opt-in, :attr:`~NodewrightKubeEmulator.rbac_rules`): a request no rule grants gets the apiserver's
  ``403 Forbidden`` naming user, verb, resource (with subresource) and API group; rules are ClusterRole/Role
  ``rules`` (``resourceNames`` honoured, namespaces not distinguished).
* **OwnerReferencesPermissionEnforcement** (opt-in, :attr:`~NodewrightKubeEmulator.owner_references_enforcement`,
  the admission plugin OpenShift enables): changing an object's ``ownerReferences`` needs ``delete`` on it, and
  setting ``blockOwnerDeletion: true`` on a reference needs ``update`` on the owner's ``<plural>/finalizers``.

* **new Nodes are not-ready** (:attr:`~NodewrightKubeEmulator.node_lifecycle`): the TaintNodesByCondition
  admission taints a created Node ``node.kubernetes.io/not-ready:NoSchedule``, and, standing in for
  kube-controller-manager's node lifecycle controller, the taint is removed right after any write that leaves
  the Node ``Ready=True`` (again after a client wrote it back).

Approximations (documented, not hidden): no kubelet beyond finishing graceful Pod deletions, strategic merge patch
is a JSON merge patch except that ``status.conditions`` merge by ``type``, list ``limit``/``continue`` are
ignored (everything in one page), JSON patch (a list body) is refused with 415.

:class:`EmulatorThread` runs the emulator in a background event loop so synchronous code (the controller and
the official ``kubernetes`` client) talks to it over real HTTP.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import itertools
import json
import math
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import attrs
import kmock
from kmock._internal import apps, parsing, rendering

Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """One served resource: ``group``/``version``/``plural``, its ``kind``, scope and status subresource."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status: bool = True
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


#: What the emulator serves (the resources nodewright reads and writes, plus bindings).
KINDS: tuple[Kind, ...] = (
    Kind("", "v1", "pods", "Pod", True),
    Kind("", "v1", "nodes", "Node", False),
    Kind("", "v1", "events", "Event", True, status=False),
    Kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True),
    Kind("", "v1", "limitranges", "LimitRange", True, status=False),
    Kind("", "v1", "namespaces", "Namespace", False),
    Kind("", "v1", "persistentvolumes", "PersistentVolume", False),
    Kind("", "v1", "bindings", "Binding", True, status=False),
    Kind("apps", "v1", "daemonsets", "DaemonSet", True),
    Kind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True),
    Kind("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, status=False),
    Kind("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False, status=False),
    Kind("storage.k8s.io", "v1", "csinodes", "CSINode", False, status=False),
    Kind("coordination.k8s.io", "v1", "leases", "Lease", True, status=False),
    Kind("karpenter.sh", "v1", "nodeclaims", "NodeClaim", False, custom=True),
    Kind("karpenter.sh", "v1", "nodepools", "NodePool", False, custom=True),
    Kind("karpenter.k8s.aws", "v1", "ec2nodeclasses", "EC2NodeClass", False, custom=True),
    # CapacityBuffers and what they reference (the CapacityBuffer gate).
    Kind("autoscaling.x-k8s.io", "v1beta1", "capacitybuffers", "CapacityBuffer", True, custom=True),
    Kind("", "v1", "podtemplates", "PodTemplate", True, status=False),
    Kind("apps", "v1", "deployments", "Deployment", True),
    Kind("apps", "v1", "replicasets", "ReplicaSet", True),
    Kind("apps", "v1", "statefulsets", "StatefulSet", True),
    Kind("karpenter.sh", "v1alpha1", "nodeoverlays", "NodeOverlay", False, custom=True),
    # The selectors of the default topology spread (SCHEDULER_CONFIG; ReplicaSets and StatefulSets above).
    Kind("", "v1", "services", "Service", True),
    Kind("", "v1", "replicationcontrollers", "ReplicationController", True),
)
_BY_PATH = {(k.group, k.version, k.plural): k for k in KINDS}

_kmock_parse_path = parsing.parse_path


def _parse_path(path: str) -> parsing.ParsedPath:
    """kmock's path parser, plus the cluster-scoped ``namespaces`` resource itself (``/api/v1/namespaces`` and
    ``/api/v1/namespaces/<name>``), which kmock reads as the prefix of a namespaced path and cannot parse."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if parts[:3] == ["api", "v1", "namespaces"] and len(parts) in (3, 4, 5) and (len(parts) < 5 or parts[4] == "status"):
        name = parts[3] if len(parts) >= 4 else None
        return parsing.ParsedPath("", "v1", "namespaces", None, name, parts[4] if len(parts) == 5 else None)
    return _kmock_parse_path(path)


parsing.parse_path = _parse_path


class ApiError(kmock.KubernetesError):
    """A ``Status`` failure answer (kmock renders it with ``code``, ``reason`` and ``message``)."""


def _status_error(code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> ApiError:
    return ApiError(status=code, reason=reason, message=message, details=dict(details or {}))


def _now() -> str:
    return dt.datetime.now(tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- patches and selectors (independent of nodewright's own helpers: this is the test oracle) -----------


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: dicts merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = json_merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(target: Obj, patch: Obj) -> Obj:
    """Strategic merge approximated: a merge patch, but ``status.conditions`` merge by ``type`` (its merge key)."""
    conditions = (patch.get("status") or {}).get("conditions") if isinstance(patch.get("status"), dict) else None
    merged = json_merge_patch(target, patch)
    if isinstance(conditions, list):
        by_type = {c.get("type"): c for c in (target.get("status") or {}).get("conditions") or []}
        for cond in conditions:
            by_type[cond.get("type")] = {**by_type.get(cond.get("type"), {}), **cond}
        merged["status"]["conditions"] = list(by_type.values())
    return merged


def _selector_terms(text: str) -> list[str]:
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


def label_selector_matches(text: str | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy a URL ``labelSelector``.

    Raises:
        ApiError: 400 for a selector that does not parse.
    """
    for term in _selector_terms(text or ""):
        words = term.split()
        if len(words) >= 3 and words[1] in ("in", "notin"):
            values_text = term.split(None, 2)[2].strip()
            if not (values_text.startswith("(") and values_text.endswith(")")):
                raise _status_error(400, "BadRequest", f"unable to parse requirement: {term!r}")
            values = {v.strip() for v in values_text[1:-1].split(",") if v.strip()}
            present = words[0] in labels
            if words[1] == "in" and not (present and labels[words[0]] in values):
                return False
            if words[1] == "notin" and present and labels[words[0]] in values:
                return False
        elif "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


def field_selector_matches(text: str | None, obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` satisfies a URL ``fieldSelector`` (``=``, ``==``, ``!=`` terms)."""
    for term in _selector_terms(text or ""):
        if "!=" in term:
            path, value = term.split("!=", 1)
            if _field(obj, path.strip()) == value.strip():
                return False
        elif "=" in term:
            path, value = term.replace("==", "=").split("=", 1)
            if _field(obj, path.strip()) != value.strip():
                return False
        else:
            raise _status_error(400, "BadRequest", f"invalid field selector: {term!r}")
    return True


# --- disruption budgets (the disruption controller's arithmetic, for eviction) ------------------------------


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _budget(pdb: Mapping[str, Any], pods: list[Obj]) -> tuple[int, int]:
    """``(currentHealthy, desiredHealthy)`` of one PodDisruptionBudget over its namespace's ``pods``."""
    spec = pdb.get("spec") or {}
    selected = [p for p in pods if _selects(spec.get("selector"), (p.get("metadata") or {}).get("labels") or {})]
    expected = len(selected)
    healthy = sum(1 for p in selected if _pod_ready(p))

    def scaled(value: Any) -> int:
        if isinstance(value, str) and value.endswith("%"):
            return math.ceil(int(value[:-1]) * expected / 100)
        return int(value)

    if spec.get("minAvailable") is not None:
        return healthy, scaled(spec["minAvailable"])
    if spec.get("maxUnavailable") is not None:
        return healthy, expected - scaled(spec["maxUnavailable"])
    return healthy, 0


_NOT_READY = "node.kubernetes.io/not-ready"


def _node_ready_but_tainted(node: Mapping[str, Any]) -> bool:
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (node.get("status") or {}).get("conditions") or [])
    return ready and any(t.get("key") == _NOT_READY for t in (node.get("spec") or {}).get("taints") or [])


# --- the emulator --------------------------------------------------------------------------------------------


@dataclass
class _Watch:
    kind: Kind
    namespace: str | None
    labels: str | None
    fields: str | None
    queue: asyncio.Queue[tuple[str, Obj, Obj | None] | None]
    transport: Any

    def matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return label_selector_matches(self.labels, meta.get("labels") or {}) and field_selector_matches(self.fields, obj)

    def translate(self, event: str, obj: Obj, old: Obj | None) -> str | None:
        """The event this watcher sees, given selector transitions (None: not at all)."""
        now, before = self.matches(obj), self.matches(old)
        if event == "MODIFIED":
            if now and before:
                return "MODIFIED"
            if now:
                return "ADDED"
            return "DELETED" if before else None
        return event if now else None


@attrs.define(kw_only=True)
class NodewrightKubeEmulator(kmock.KubernetesEmulator):
    """kmock's ``KubernetesEmulator`` with API-server semantics (see the module docstring).

    Attributes:
        bookmark_interval: seconds between BOOKMARK events on watches that asked for them.
        history_limit: watch events kept for resuming; older resume points get ``410 Gone``.
        server_version: what ``GET /version`` reports as ``major``/``minor``.
    """

    bookmark_interval: float = 0.25
    history_limit: int = 5000
    server_version: tuple[str, str] = ("1", "31")
    #: Seconds the "kubelet" takes per second of a Pod's grace period; None: only :meth:`finish_pod` ends it.
    pod_grace_scale: float | None = 1.0
    #: ClusterRole/Role rules the caller holds; None grants everything (no authorization).
    rbac_rules: list[Obj] | None = None
    #: When set, the rules bind only requests bearing this token (the controller); the others (a test playing
    #: kube-scheduler or the kubelet) act as cluster-admin.
    rbac_token: str | None = None
    #: The user named in 403 messages.
    user: str = "system:serviceaccount:kube-system:nodewright"
    #: The OwnerReferencesPermissionEnforcement admission plugin.
    owner_references_enforcement: bool = False
    #: TaintNodesByCondition on create and the node lifecycle controller's removal of the not-ready taint.
    node_lifecycle: bool = True
    _store: dict[tuple[Kind, str | None, str], Obj] = attrs.field(factory=dict, init=False)
    _revision: int = attrs.field(default=0, init=False)
    _compacted: int = attrs.field(default=0, init=False)
    _history: deque[tuple[int, Kind, str, Obj, Obj | None]] = attrs.field(factory=deque, init=False)
    _watches: list[_Watch] = attrs.field(factory=list, init=False)
    _state_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _uids: Iterator[int] = attrs.field(factory=itertools.count, init=False)
    #: Counters per (verb, plural): "list", "watch", "create", "update", "patch", "delete", "bind", "evict".
    calls: dict[tuple[str, str], int] = attrs.field(factory=dict, init=False)
    #: ``(namespace, pod, node)`` per successful binding and ``(namespace, pod)`` per successful eviction.
    bindings: list[tuple[str, str, str]] = attrs.field(factory=list, init=False)
    evictions: list[tuple[str, str]] = attrs.field(factory=list, init=False)
    refused_evictions: list[tuple[str, str]] = attrs.field(factory=list, init=False)
    #: ``(verb, resource, group)`` of every request refused with 403.
    forbidden: list[tuple[str, str, str]] = attrs.field(factory=list, init=False)
    #: Fault injection: ``fault(verb, resource, name)`` -> an HTTP status to refuse the request with (409, 429,
    #: 500, 503...), or None to serve it. Called for requests bearing :attr:`rbac_token` (the controller) when it
    #: is set, else for every request; ``verb`` as RBAC names it (get, list, watch, create, patch, ...).
    fault: Callable[[str, str, str | None], int | None] | None = None
    #: ``(verb, resource, status)`` of every request the fault hook refused.
    faulted: list[tuple[str, str, int]] = attrs.field(factory=list, init=False)
    #: Lost replies: ``lost_reply(verb, resource, name)`` -> an HTTP status to answer with *after* the request was
    #: served (the write went through; the client hears an error, as after a timeout or a 5xx past the commit),
    #: or None. Called like :attr:`fault`.
    lost_reply: Callable[[str, str, str | None], int | None] | None = None

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for kind in KINDS:
            key = f"{kind.group}/{kind.version}/{kind.plural}" if kind.group else f"v1/{kind.plural}"
            self.resources[key] = kmock.ResourceInfo(
                kind=kind.kind, namespaced=kind.namespaced, singular=kind.kind.lower(),
                verbs={"get", "list", "watch", "create", "update", "patch", "delete"},
                subresources={"status"} if kind.status else set())
        # One fallback above kmock's own object handlers: any request for a resource (a plural in the path).
        (self.fallback ** 1)[lambda req: req.resource is not None and bool(req.resource.plural)] << self._serve_api

    async def _handle(self, request: rendering.Request) -> Any:
        # kmock's emulator mutates its own shallow store before dispatching; skip that, dispatch directly.
        return await apps.RawHandler._handle(self, request)

    async def _serve_server_version(self, request: rendering.Request) -> rendering.Payload:
        major, minor = self.server_version
        return {"major": major, "minor": minor, "gitVersion": f"v{major}.{minor}.0-kmock", "platform": "linux/amd64"}

    # --- dispatch -------------------------------------------------------------------------------------------

    def _count(self, verb: str, kind: Kind) -> None:
        key = (verb, kind.plural)
        self.calls[key] = self.calls.get(key, 0) + 1

    async def _serve_api(self, request: rendering.Request) -> rendering.Response:
        answer = self._answer(request)
        self._lose_reply(request)
        # Always a Response with an explicit status: kmock copies a returned Response's status onto the shared
        # reaction object, so a bare dict after a 201 would otherwise be served as 201 too (what made the
        # official client return None for lists and custom objects).
        return answer if isinstance(answer, rendering.Response) else rendering.Response(status=200, payload=answer)

    def _answer(self, request: rendering.Request) -> Any:
        res = request.resource
        assert res is not None
        kind = _BY_PATH.get((res.group or "", res.version or "", res.plural or ""))
        if kind is None:
            raise _status_error(404, "NotFound", f"the server could not find the requested resource ({res.plural})")
        method = request.method.value.upper()
        namespace, name, sub = request.namespace, request.name, request.subresource or ""
        if kind.namespaced and name is not None and namespace is None:
            raise _status_error(404, "NotFound", f"{kind.plural} must be addressed within a namespace")
        self._authorize(request, kind, method, namespace, name, sub)
        self._inject_fault(request, kind, method, name, sub)
        if name is None:
            if method == "GET" and request.params.get("watch") in ("true", "1"):
                self._count("watch", kind)
                return self._watch(request, kind, namespace)
            if method == "GET":
                self._count("list", kind)
                return self._list(kind, namespace, request.params)
            if method == "POST" and kind.plural == "bindings":
                self._count("bind", kind)
                return self._bind(namespace or "default", self._body(request))
            if method == "POST":
                self._count("create", kind)
                return rendering.Response(status=201, payload=self._create(kind, namespace, self._body(request)))
            raise _status_error(405, "MethodNotAllowed", f"{method} is not supported on a collection here")
        if sub not in ("", "status", "binding", "eviction"):
            raise _status_error(404, "NotFound", f"unknown subresource {sub!r}")
        if method == "POST" and kind.plural == "pods" and sub in ("binding", "eviction"):
            body = self._body(request)
            if sub == "binding":
                self._count("bind", kind)
                return self._bind(namespace or "default", {**body, "metadata": {**(body.get("metadata") or {}),
                                                                                   "name": name}})
            self._count("evict", kind)
            return self._evict(namespace or "default", name)
        if method == "GET":
            return self._get(kind, namespace, name)
        if method == "PUT":
            self._count("update", kind)
            return self._replace(kind, namespace, name, self._body(request), sub == "status")
        if method == "PATCH":
            self._count("patch", kind)
            content_type = (request.headers.get("Content-Type") or "").split(";")[0].strip()
            return self._patch(kind, namespace, name, request.data, content_type, sub == "status")
        if method == "DELETE":
            self._count("delete", kind)
            body = request.data if isinstance(request.data, dict) else {}
            grace = request.params.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
            return self._delete(kind, namespace, name, None if grace is None else int(grace))
        raise _status_error(405, "MethodNotAllowed", f"{method} is not supported")

    _FAULT_REASONS: ClassVar[dict[int, str]] = {409: "Conflict", 429: "TooManyRequests", 500: "InternalError",
                                                503: "ServiceUnavailable"}

    def _inject_fault(self, request: rendering.Request, kind: Kind, method: str, name: str | None,
                      sub: str) -> None:
        if self.fault is None:
            return
        if self.rbac_token is not None and request.headers.get("Authorization") != f"Bearer {self.rbac_token}":
            return
        verb = self._verb(method, name, sub, request.params.get("watch") in ("true", "1"))
        resource = f"{kind.plural}/{sub}" if sub else kind.plural
        status = self.fault(verb, resource, name)
        if status is None:
            return
        self.faulted.append((verb, resource, status))
        raise _status_error(status, self._FAULT_REASONS.get(status, "InternalError"),
                            f"injected fault: {verb} {resource} {name or ''}".strip())

    def _lose_reply(self, request: rendering.Request) -> None:
        hook = self.lost_reply
        if hook is None or request.params.get("watch") in ("true", "1"):
            return
        if self.rbac_token is not None and request.headers.get("Authorization") != f"Bearer {self.rbac_token}":
            return
        res = request.resource
        kind = _BY_PATH.get((res.group or "", res.version or "", res.plural or "")) if res is not None else None
        if kind is None:
            return
        sub = request.subresource or ""
        verb = self._verb(request.method.value.upper(), request.name, sub, False)
        status = hook(verb, f"{kind.plural}/{sub}" if sub else kind.plural, request.name)
        if status is not None:
            self.faulted.append((verb, f"{kind.plural}/{sub}" if sub else kind.plural, status))
            raise _status_error(status, self._FAULT_REASONS.get(status, "InternalError"),
                                f"injected lost reply: {verb} {kind.plural} {request.name or ''}".strip())

    # --- authorization and admission -------------------------------------------------------------------------

    @staticmethod
    def _verb(method: str, name: str | None, sub: str, watch: bool) -> str:
        if method == "GET":
            return "get" if name is not None else ("watch" if watch else "list")
        return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())

    def _allowed(self, verb: str, group: str, resource: str, name: str | None) -> bool:
        if self.rbac_rules is None:
            return True
        for rule in self.rbac_rules:
            if (group in rule.get("apiGroups", ()) and resource in rule.get("resources", ())
                    and verb in rule.get("verbs", ())
                    and (not rule.get("resourceNames") or name in rule["resourceNames"])):
                return True
        return False

    def _forbid(self, kind: Kind, name: str | None, namespace: str | None, verb: str, group: str, resource: str,
                why: str = "") -> ApiError:
        self.forbidden.append((verb, resource, group))
        scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        target = f'{kind.resource} "{name}"' if name else kind.resource
        return _status_error(403, "Forbidden", f'{target} is forbidden: {why}User "{self.user}" cannot {verb} '
                             f'resource "{resource}" in API group "{group}" {scope}',
                             {"name": name or "", "group": kind.group, "kind": kind.plural})

    def _authorize(self, request: rendering.Request, kind: Kind, method: str, namespace: str | None,
                   name: str | None, sub: str) -> None:
        """RBAC, then OwnerReferencesPermissionEnforcement (see the module docstring)."""
        if self.rbac_token is not None and request.headers.get("Authorization") != f"Bearer {self.rbac_token}":
            return
        watch = request.params.get("watch") in ("true", "1")
        verb = self._verb(method, name, sub, watch)
        resource = f"{kind.plural}/{sub}" if sub else kind.plural
        if not self._allowed(verb, kind.group, resource, name):
            raise self._forbid(kind, name, namespace, verb, kind.group, resource)
        if not (self.owner_references_enforcement and method in ("POST", "PUT", "PATCH") and not sub
                and isinstance(request.data, dict)):
            return
        refs = (request.data.get("metadata") or {}).get("ownerReferences")
        if refs is None:
            return
        current = self._store.get((kind, namespace if kind.namespaced else None, name or "")) if name else None
        old = ((current or {}).get("metadata") or {}).get("ownerReferences") or []
        if current is not None and refs != old and not self._allowed("delete", kind.group, kind.plural, name):
            raise self._forbid(kind, name, namespace, "delete", kind.group, kind.plural,
                               "cannot set an ownerRef on a resource you can't delete: ")
        blocking_before = {o.get("uid") for o in old if o.get("blockOwnerDeletion")}
        for ref in refs:
            if not ref.get("blockOwnerDeletion") or ref.get("uid") in blocking_before:
                continue
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            owner = next((k for k in KINDS if k.kind == ref.get("kind") and k.group == group), None)
            plural = owner.plural if owner else f"{str(ref.get('kind', '')).lower()}s"
            if not self._allowed("update", group, f"{plural}/finalizers", ref.get("name")):
                raise self._forbid(kind, name or (request.data.get("metadata") or {}).get("name"), namespace,
                                   "update", group, f"{plural}/finalizers",
                                   "cannot set blockOwnerDeletion if an ownerReference refers to a resource you "
                                   "can't set finalizers on: ")

    @staticmethod
    def _body(request: rendering.Request) -> Obj:
        if not isinstance(request.data, dict):
            raise _status_error(400, "BadRequest", "the request body must be a JSON object")
        return request.data

    # --- store primitives (run on the event loop thread; the lock lets test threads read consistently) -------

    def _next_revision(self) -> str:
        self._revision += 1
        return str(self._revision)

    def _record(self, kind: Kind, event: str, obj: Obj, old: Obj | None) -> None:
        revision = int(obj["metadata"]["resourceVersion"])
        self._history.append((revision, kind, event, obj, old))
        while len(self._history) > self.history_limit:
            dropped = self._history.popleft()
            self._compacted = dropped[0]
        for watch in list(self._watches):
            if watch.kind == kind:
                seen = watch.translate(event, obj, old)
                if seen is not None:
                    watch.queue.put_nowait((seen, obj, old))

    def _lookup(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self._store.get((kind, namespace if kind.namespaced else None, name))
        if obj is None:
            raise _status_error(404, "NotFound", f'{kind.resource} "{name}" not found',
                                {"name": name, "kind": kind.plural})
        return obj

    def _served(self, kind: Kind, obj: Obj) -> Obj:
        return {"apiVersion": kind.api_version, "kind": kind.kind, **obj}

    def _put(self, kind: Kind, event: str, obj: Obj, old: Obj | None) -> Obj:
        meta = obj["metadata"]
        key = (kind, meta.get("namespace") if kind.namespaced else None, meta["name"])
        with self._state_lock:
            if event == "DELETED":
                self._store.pop(key, None)
            else:
                self._store[key] = obj
        self._record(kind, event, obj, old)
        if event == "DELETED" and kind.plural == "nodes":
            self._collect_pods_of(meta["name"])
        elif kind.plural == "nodes" and self.node_lifecycle and _node_ready_but_tainted(obj):
            asyncio.get_running_loop().call_soon(self._untaint_ready_node, meta["name"])
        return obj

    def _untaint_ready_node(self, name: str) -> None:
        """The node lifecycle controller: a Ready Node loses its ``node.kubernetes.io/not-ready`` taint."""
        nodes = _BY_PATH[("", "v1", "nodes")]
        current = self._store.get((nodes, None, name))
        if current is None or not _node_ready_but_tainted(current):
            return
        taints = [t for t in current["spec"]["taints"] if t.get("key") != _NOT_READY]
        new = {**current, "spec": {**current["spec"], "taints": taints},
               "metadata": {**current["metadata"], "resourceVersion": self._next_revision()}}
        self._put(nodes, "MODIFIED", new, current)

    def _collect_pods_of(self, node: str) -> None:
        """kube-controller-manager's pod GC: pods bound to a Node that no longer exists are deleted."""
        pods = _BY_PATH[("", "v1", "pods")]
        for (kind, ns, name), pod in list(self._store.items()):
            if kind == pods and (pod.get("spec") or {}).get("nodeName") == node:
                self._delete(pods, ns, name, grace=0)  # no kubelet left to run out a grace period

    # --- verbs ---------------------------------------------------------------------------------------------

    def _list(self, kind: Kind, namespace: str | None, params: Mapping[str, str]) -> Obj:
        with self._state_lock:
            objs = [o for (k, ns, _), o in self._store.items()
                    if k == kind and (namespace is None or ns == namespace)]
            revision = str(self._revision)
        labels, fields = params.get("labelSelector"), params.get("fieldSelector")
        items = [o for o in objs if label_selector_matches(labels, (o.get("metadata") or {}).get("labels") or {})
                 and field_selector_matches(fields, o)]
        items.sort(key=lambda o: ((o["metadata"].get("namespace") or ""), o["metadata"]["name"]))
        if kind.custom:
            items = [self._served(kind, o) for o in items]
        return {"apiVersion": kind.api_version, "kind": f"{kind.kind}List",
                "metadata": {"resourceVersion": revision}, "items": items}

    def _get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        with self._state_lock:
            return self._served(kind, self._lookup(kind, namespace, name))

    def _create(self, kind: Kind, namespace: str | None, body: Obj) -> Obj:
        obj = copy.deepcopy(body)
        obj.pop("apiVersion", None)
        obj.pop("kind", None)
        meta = dict(obj.get("metadata") or {})
        if kind.namespaced:
            if namespace and meta.get("namespace") and meta["namespace"] != namespace:
                raise _status_error(400, "BadRequest", "the namespace of the object does not match the request")
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise _status_error(422, "Invalid", f"{kind.kind}: metadata.name or generateName is required")
            meta["name"] = f"{prefix}{uuid.uuid4().hex[:5]}"
        key = (kind, meta.get("namespace"), meta["name"])
        if key in self._store:
            raise _status_error(409, "AlreadyExists", f'{kind.resource} "{meta["name"]}" already exists',
                                {"name": meta["name"], "kind": kind.plural})
        for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(server_owned, None)
        meta.update(uid=str(uuid.uuid4()), resourceVersion=self._next_revision(), creationTimestamp=_now(),
                    generation=1)
        obj["metadata"] = meta
        if kind.plural == "pods":
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        if kind.plural == "nodes" and self.node_lifecycle:
            taints = list((obj.get("spec") or {}).get("taints") or [])
            if not any(t.get("key") == _NOT_READY for t in taints):
                obj["spec"] = {**(obj.get("spec") or {}), "taints": [*taints, {"key": _NOT_READY,
                                                                              "effect": "NoSchedule"}]}
        elif kind.custom:
            obj.pop("status", None)
        return self._served(kind, self._put(kind, "ADDED", obj, None))

    def _write(self, kind: Kind, current: Obj, new: Obj, status_only: bool) -> Obj:
        """Store ``new`` as the next version of ``current`` under the apiserver's update rules."""
        old_meta = current["metadata"]
        if status_only:
            new = {**current, "status": new.get("status", current.get("status"))}
            meta = dict(old_meta)
        else:
            meta = dict(new.get("metadata") or {})
            if kind.status:
                new = {**new, "status": current.get("status")} if "status" in current else \
                    {k: v for k, v in new.items() if k != "status"}
            for owned in ("uid", "name", "namespace", "creationTimestamp", "deletionTimestamp",
                          "deletionGracePeriodSeconds", "generation"):
                if owned in old_meta:
                    meta[owned] = old_meta[owned]
                else:
                    meta.pop(owned, None)
            if old_meta.get("deletionTimestamp"):
                # No new finalizers on an object being deleted (the apiserver forbids adding them).
                meta["finalizers"] = [f for f in meta.get("finalizers") or [] if f in (old_meta.get("finalizers") or [])]
            if new.get("spec") != current.get("spec"):
                meta["generation"] = int(old_meta.get("generation") or 1) + 1
        new.pop("apiVersion", None)
        new.pop("kind", None)
        def comparable(obj: Obj, obj_meta: Mapping[str, Any]) -> Obj:
            return {**obj, "metadata": {k: v for k, v in obj_meta.items() if k != "resourceVersion"}}

        if comparable(new, meta) == comparable(current, old_meta):
            return self._served(kind, current)  # a no-op write does not bump the resourceVersion
        meta["resourceVersion"] = self._next_revision()
        stored = {**new, "metadata": meta}
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._served(kind, self._put(kind, "DELETED", stored, current))
        return self._served(kind, self._put(kind, "MODIFIED", stored, current))

    def _check_version(self, kind: Kind, current: Obj, wanted: Any) -> None:
        if wanted not in (None, "") and str(wanted) != current["metadata"]["resourceVersion"]:
            name = current["metadata"]["name"]
            raise _status_error(409, "Conflict", f'Operation cannot be fulfilled on {kind.resource} "{name}": the '
                                "object has been modified; please apply your changes to the latest version and "
                                "try again", {"name": name, "kind": kind.plural})

    def _replace(self, kind: Kind, namespace: str | None, name: str, body: Obj, status_only: bool) -> Obj:
        current = self._lookup(kind, namespace, name)
        if (body.get("metadata") or {}).get("name") not in (None, name):
            raise _status_error(400, "BadRequest", "the name of the object does not match the name in the URL")
        self._check_version(kind, current, (body.get("metadata") or {}).get("resourceVersion"))
        return self._write(kind, current, copy.deepcopy(body), status_only)

    def _patch(self, kind: Kind, namespace: str | None, name: str, patch: Any, content_type: str,
               status_only: bool) -> Obj:
        current = self._lookup(kind, namespace, name)
        if not isinstance(patch, dict):
            raise _status_error(415, "UnsupportedMediaType", "only merge patches are emulated")
        if content_type == "application/strategic-merge-patch+json":
            if kind.custom:
                raise _status_error(415, "UnsupportedMediaType",
                                    "strategic merge patch is not supported for custom resources")
            merged = strategic_merge_patch(current, patch)
        elif content_type in ("application/merge-patch+json", "application/json"):
            merged = json_merge_patch(current, patch)
        else:
            raise _status_error(415, "UnsupportedMediaType", f"unsupported patch type {content_type!r}")
        self._check_version(kind, current, (patch.get("metadata") or {}).get("resourceVersion"))
        merged.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        return self._write(kind, current, merged, status_only)

    def _delete(self, kind: Kind, namespace: str | None, name: str, grace: int | None = None) -> Obj:
        current = self._lookup(kind, namespace, name)
        meta = current["metadata"]
        if kind.plural == "pods" and meta.get("deletionTimestamp") and grace == 0:
            return self.finish_pod(namespace or "default", name) or self._served(kind, current)
        if kind.plural == "pods" and (current.get("spec") or {}).get("nodeName"):
            if grace is None:
                grace = int((current.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
            if grace > 0 or meta.get("deletionTimestamp"):
                return self._delete_gracefully(kind, current, grace)
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return self._served(kind, current)
            marked = {**current, "metadata": {**meta, "deletionTimestamp": _now(), "deletionGracePeriodSeconds": 0,
                                              "resourceVersion": self._next_revision()}}
            return self._served(kind, self._put(kind, "MODIFIED", marked, current))
        gone = {**current, "metadata": {**meta, "resourceVersion": self._next_revision()}}
        return self._served(kind, self._put(kind, "DELETED", gone, current))

    def _delete_gracefully(self, kind: Kind, current: Obj, grace: int) -> Obj:
        """A bound Pod: mark it terminating for ``grace`` seconds; its kubelet removes it afterwards."""
        meta = current["metadata"]
        if meta.get("deletionTimestamp"):
            if grace == 0:  # a second delete with grace 0 forces it (kubectl delete --force)
                return self.finish_pod(meta.get("namespace") or "default", meta["name"]) or self._served(kind, current)
            return self._served(kind, current)
        ends = dt.datetime.now(tz=dt.UTC) + dt.timedelta(seconds=grace)
        marked = {**current, "metadata": {**meta, "deletionTimestamp": ends.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                          "deletionGracePeriodSeconds": grace,
                                          "resourceVersion": self._next_revision()}}
        stored = self._put(kind, "MODIFIED", marked, current)
        if self.pod_grace_scale is not None:
            asyncio.get_running_loop().call_later(grace * self.pod_grace_scale, self.finish_pod,
                                                  meta.get("namespace") or "default", meta["name"], meta.get("uid"))
        return self._served(kind, stored)

    def _success(self, code: int = 201) -> rendering.Response:
        return rendering.Response(status=code, payload={"apiVersion": "v1", "kind": "Status", "metadata": {},
                                                        "status": "Success", "code": code})

    def _bind(self, namespace: str, binding: Obj) -> rendering.Response:
        pods = _BY_PATH[("", "v1", "pods")]
        name = (binding.get("metadata") or {}).get("name") or ""
        node = (binding.get("target") or {}).get("name")
        if not node:
            raise _status_error(422, "Invalid", "binding target name is required")
        pod = self._lookup(pods, namespace, name)
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound:
            raise _status_error(409, "Conflict", f"pod {name} is already assigned to node {bound!r}")
        if pod["metadata"].get("deletionTimestamp"):
            raise _status_error(409, "Conflict", f"pod {name} is being deleted, cannot be assigned to a host")
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()})
        new = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node},
               "status": {**(pod.get("status") or {}), "conditions": conditions}}
        new["metadata"] = {**pod["metadata"], "resourceVersion": self._next_revision()}
        self._put(pods, "MODIFIED", new, pod)
        self.bindings.append((namespace, name, node))
        return self._success()

    def _evict(self, namespace: str, name: str) -> rendering.Response:
        pods = _BY_PATH[("", "v1", "pods")]
        pdbs = _BY_PATH[("policy", "v1", "poddisruptionbudgets")]
        pod = self._lookup(pods, namespace, name)
        if not pod["metadata"].get("deletionTimestamp"):
            siblings = [o for (k, ns, _), o in self._store.items() if k == pods and ns == namespace]
            labels = pod["metadata"].get("labels") or {}
            for (k, ns, pdb_name), pdb in list(self._store.items()):
                if k != pdbs or ns != namespace or not _selects((pdb.get("spec") or {}).get("selector"), labels):
                    continue
                healthy, desired = _budget(pdb, siblings)
                allowed = healthy - desired > 0 if _pod_ready(pod) else healthy >= desired
                if not allowed:
                    self.refused_evictions.append((namespace, name))
                    raise _status_error(429, "TooManyRequests",
                                        "Cannot evict pod as it would violate the pod's disruption budget.",
                                        {"causes": [{"reason": "DisruptionBudget", "message":
                                                     f"The disruption budget {pdb_name} needs {desired} healthy "
                                                     f"pods and has {healthy} currently"}]})
        self.evictions.append((namespace, name))
        self._delete(pods, namespace, name)
        return self._success()

    # --- watch -------------------------------------------------------------------------------------------------

    def _watch(self, request: rendering.Request, kind: Kind, namespace: str | None) -> AsyncIterator[Any]:
        params = request.params
        raw = request._raw_request
        watch = _Watch(kind, namespace, params.get("labelSelector"), params.get("fieldSelector"), asyncio.Queue(),
                       raw.transport if raw is not None else None)
        since = params.get("resourceVersion") or ""
        bookmarks = params.get("allowWatchBookmarks") in ("true", "1")
        timeout = float(params.get("timeoutSeconds") or 1800)
        # Decide the start synchronously (no await before registering), so no event slips between.
        if since not in ("", "0") and int(since) < self._compacted:
            backlog: list[Any] = [{"type": "ERROR", "object": {
                "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "code": 410,
                "reason": "Expired", "message": f"too old resource version: {since} ({self._compacted})"}}]
            return self._stream(watch, backlog, 0.0, False)
        if since in ("", "0"):
            with self._state_lock:
                current = [o for (k, _, _), o in self._store.items() if k == kind and watch.matches(o)]
            current.sort(key=lambda o: int(o["metadata"]["resourceVersion"]))
            backlog = [("ADDED", o, None) for o in current]
        else:
            backlog = []
            for revision, k, event, obj, old in self._history:
                if k == kind and revision > int(since):
                    seen = watch.translate(event, obj, old)
                    if seen is not None:
                        backlog.append((seen, obj, old))
        self._watches.append(watch)
        return self._stream(watch, backlog, timeout, bookmarks)

    async def _stream(self, watch: _Watch, backlog: list[Any], timeout: float, bookmarks: bool) -> AsyncIterator[Any]:
        kind = watch.kind
        try:
            yield b""  # send the headers now, as the apiserver does
            for item in backlog:
                yield item if isinstance(item, dict) else {"type": item[0], "object": self._served(kind, item[1])}
            if not timeout:
                return
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while (left := deadline - loop.time()) > 0:
                try:
                    item = await asyncio.wait_for(watch.queue.get(), min(left, self.bookmark_interval))
                except TimeoutError:
                    if bookmarks:
                        yield {"type": "BOOKMARK", "object": {"apiVersion": kind.api_version, "kind": kind.kind,
                                                              "metadata": {"resourceVersion": str(self._revision)}}}
                    continue
                if item is None:  # break_watches(): drop the connection mid-stream, no clean end
                    if watch.transport is not None:
                        watch.transport.abort()
                    return
                yield {"type": item[0], "object": self._served(kind, item[1])}
        finally:
            if watch in self._watches:
                self._watches.remove(watch)

    # --- controls, callable from any thread through EmulatorThread -------------------------------------------

    def break_watches(self, plural: str | None = None) -> int:
        """Abort live watch connections (of ``plural`` or all); returns how many. Loop thread only."""
        broken = 0
        for watch in list(self._watches):
            if plural is None or watch.kind.plural == plural:
                watch.queue.put_nowait(None)
                broken += 1
        return broken

    def compact(self) -> int:
        """Forget the watch history: resuming from any earlier version now gets ``410 Gone``. Loop thread only."""
        self._history.clear()
        self._compacted = self._revision
        return self._compacted

    def delete_object(self, plural: str, name: str, namespace: str | None = None) -> Obj:
        """DELETE as a client would (finalizers honoured), bypassing HTTP. Loop thread only."""
        kind = next(k for k in KINDS if k.plural == plural)
        return self._delete(kind, namespace, name)

    def finish_pod(self, namespace: str, name: str, uid: str | None = None) -> Obj | None:
        """The kubelet's last step for a terminating Pod: remove it (its finalizers permitting). Loop thread only.

        Returns the removed Pod (None when it is gone, not terminating, or another Pod of that name by ``uid``).
        """
        pods = _BY_PATH[("", "v1", "pods")]
        current = self._store.get((pods, namespace, name))
        if current is None or not current["metadata"].get("deletionTimestamp"):
            return None
        if (uid is not None and current["metadata"].get("uid") != uid) or current["metadata"].get("finalizers"):
            return None
        gone = {**current, "metadata": {**current["metadata"], "resourceVersion": self._next_revision()}}
        return self._served(pods, self._put(pods, "DELETED", gone, current))

    def terminating_pods(self) -> list[tuple[str, str]]:
        """``(namespace, name)`` of Pods marked for deletion and not yet removed; thread-safe."""
        with self._state_lock:
            return sorted((ns or "", n) for (k, ns, n), o in self._store.items()
                          if k.plural == "pods" and o["metadata"].get("deletionTimestamp"))

    def live_watches(self, plural: str | None = None) -> int:
        """Number of open watch streams (of ``plural`` or all)."""
        return sum(1 for w in self._watches if plural is None or w.kind.plural == plural)

    def snapshot(self, plural: str, namespace: str | None = None) -> list[Obj]:
        """Stored objects of ``plural`` (deep copies, sorted by name); thread-safe."""
        with self._state_lock:
            out = [copy.deepcopy(o) for (k, ns, _), o in self._store.items()
                   if k.plural == plural and (namespace is None or ns == namespace)]
        return sorted(out, key=lambda o: o["metadata"]["name"])

    def peek(self, plural: str, name: str, namespace: str | None = None) -> Obj | None:
        """One stored object (a deep copy) or None; thread-safe."""
        with self._state_lock:
            for (k, ns, n), obj in self._store.items():
                if k.plural == plural and n == name and (namespace is None or ns == namespace):
                    return copy.deepcopy(obj)
        return None

    @property
    def revision(self) -> int:
        """The current cluster-wide resourceVersion."""
        return self._revision


class EmulatorThread:
    """Runs a :class:`NodewrightKubeEmulator` on 127.0.0.1 in a background event loop.

    Use as a context manager; :attr:`url` is the API server URL. :meth:`call` runs a control function of the
    emulator on its loop and returns the result (bounded by ``timeout`` seconds).
    """

    def __init__(self, emulator: NodewrightKubeEmulator | None = None, start_timeout: float = 10.0) -> None:
        # "is not None": kmock handlers define __len__ (their request log), so a fresh emulator is falsy.
        self.emulator = emulator if emulator is not None else NodewrightKubeEmulator()
        self._start_timeout = start_timeout
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="kube-emulator", daemon=True)
        self.url = ""
        self._error: BaseException | None = None

    def _main(self) -> None:
        async def serve() -> None:
            async with self.emulator, kmock.Server(self.emulator, host="127.0.0.1") as server:
                self._loop = asyncio.get_running_loop()
                self._stop = asyncio.Event()
                self.url = f"http://127.0.0.1:{server.port}"
                self._ready.set()
                await self._stop.wait()
                self.emulator.break_watches()
                await asyncio.sleep(0)

        try:
            asyncio.run(serve())
        except BaseException as err:  # surfaced by __enter__/__exit__
            self._error = err
            self._ready.set()

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        if not self._ready.wait(self._start_timeout) or self._error is not None:
            raise RuntimeError(f"the Kubernetes emulator did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10.0)

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 5.0) -> Any:
        """Run ``fn(*args)`` on the emulator's loop thread; returns its result."""
        assert self._loop is not None

        async def run() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout)

    def break_watches(self, plural: str | None = None) -> int:
        """Drop live watch connections mid-stream (see :meth:`NodewrightKubeEmulator.break_watches`)."""
        return int(self.call(self.emulator.break_watches, plural))

    def compact(self) -> int:
        """Forget the watch history (see :meth:`NodewrightKubeEmulator.compact`)."""
        return int(self.call(self.emulator.compact))

    def finish_pod(self, namespace: str, name: str) -> bool:
        """End a terminating Pod's grace period now (see :meth:`NodewrightKubeEmulator.finish_pod`)."""
        return self.call(self.emulator.finish_pod, namespace, name) is not None

    def kubeconfig(self, token: str | None = None) -> str:
        """A kubeconfig document (YAML-compatible JSON) pointing at this emulator; with ``token`` the client sends
        it as a bearer token (see :attr:`NodewrightKubeEmulator.rbac_token`)."""
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "emulator", "user": {"token": token} if token else {}}],
            "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "emulator"}}],
        })
