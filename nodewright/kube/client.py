"""The :class:`~nodewright.kube.cluster.Cluster` over a real API server (the official ``kubernetes`` client).

Reads come from :class:`~nodewright.kube.informer.Informer` caches (one per watched resource); writes go
to the API server and are reflected into the cache at once, so a controller sees its own writes on the
next reconcile even before the watch event arrives. Kinds without an informer (Leases, Events) are
read straight from the server.

Writes the server refuses with 403 (RBAC, admission), 409 (a stale ``resourceVersion``), 429 or 5xx, or that
get no answer, are retried with per-object exponential backoff (0.5 s doubling to 30 s, 20 % jitter, as
client-go's rate-limited work queue does): until the object's delay has passed, another write to it fails at
once with the last error, annotated, without reaching the server. Controllers reconcile every 0.1-1 s, so
without this a refused write would be repeated dozens of times a second. Evictions (a 429 there is a
PodDisruptionBudget's answer, which the drain backs off per pod), Events (best effort) and Leases (leader
election keeps its own retry period and deadlines) are not gated.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from nodewright.backoff import Backoff
from nodewright.kube import resources as r
from nodewright.kube.cluster import Clock
from nodewright.kube.errors import AlreadyExistsError, KubeError, NotFoundError
from nodewright.kube.informer import Informer
from nodewright.kube.objects import (
    Obj,
    format_micro_time,
    format_time,
    in_scope,
    key_of,
    name_of,
    namespace_of,
)
from nodewright.kube.resources import ResourceKind
from nodewright.kube.rest import MERGE_PATCH, RestClient

log = logging.getLogger(__name__)
T = TypeVar("T")


def _retriable(err: KubeError) -> bool:
    """403, 409 (not AlreadyExists: that answer is final), 429, 5xx and no answer at all (status 0)."""
    if isinstance(err, AlreadyExistsError):
        return False
    return err.status in (0, 403, 409, 429) or err.status >= 500


class KubernetesCluster:
    """Informer-backed reads, REST writes.

    Args:
        rest: REST client over the official ``ApiClient``.
        clock: epoch seconds, stamps Events.
        kinds: resources to watch (default: :data:`nodewright.kube.resources.WATCHED`).
        watch_timeout: server-side watch timeout in seconds (re-watch after each).
        component: ``source.component`` / ``reportingController`` of recorded Events.
    """

    def __init__(
        self,
        rest: RestClient,
        clock: Clock,
        kinds: Iterable[ResourceKind] = r.WATCHED,
        watch_timeout: float = 300.0,
        component: str = "karpenter",
    ) -> None:
        self.rest = rest
        self.clock = clock
        self.component = component
        self.informers: dict[ResourceKind, Informer] = {
            kind: Informer(rest, kind, watch_timeout=watch_timeout, ) for kind in kinds
        }
        self._threads: list[threading.Thread] = []
        self.write_backoff = Backoff(initial=0.5, maximum=30.0, jitter=0.2)
        self._write_errors: dict[str, KubeError] = {}
        self._write_lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """Start one daemon thread per informer; returns at once."""
        for kind, informer in self.informers.items():
            thread = threading.Thread(target=informer.run, args=(stop,), name=f"informer-{kind.plural}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait_for_sync(self, timeout: float) -> bool:
        """Block until every informer finished its first LIST; False on timeout."""
        for informer in self.informers.values():
            if not informer.synced.wait(timeout):
                log.warning("informer for %s did not sync within %.0fs", informer.kind, timeout)
                return False
        return True

    def has_synced(self) -> bool:
        """True once every informer has listed once (the readiness probe)."""
        return all(informer.synced.is_set() for informer in self.informers.values())

    # --- reads -------------------------------------------------------------------------------

    def list(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        label_selector: Mapping[str, str] | None = None,
    ) -> list[Obj]:
        """From the informer cache (from the server when the kind is not watched)."""
        informer = self.informers.get(kind)
        if informer is None:
            query = {"labelSelector": ",".join(f"{k}={v}" for k, v in label_selector.items())} if label_selector else None
            doc = self.rest.request("GET", kind.collection_path(namespace), query)
            items = doc.get("items") or []
            for item in items:
                item.setdefault("kind", kind.kind)
                item.setdefault("apiVersion", kind.api_version)
            return list(items)
        return [obj for obj in informer.items() if in_scope(obj, namespace, label_selector)]

    def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> Obj | None:
        """From the informer cache (from the server when the kind is not watched)."""
        informer = self.informers.get(kind)
        if informer is None:
            try:
                obj = self.rest.request("GET", kind.object_path(name, namespace))
            except NotFoundError:
                return None
            return obj
        return informer.get(f"{namespace}/{name}" if kind.namespaced and namespace else name)

    # --- writes ------------------------------------------------------------------------------

    def _guarded(self, verb: str, kind: ResourceKind, name: str, namespace: str | None, call: Callable[[], T]) -> T:
        """Run one ``verb`` write of object ``kind/namespace/name`` under its backoff (see the module docstring;
        each verb on each object backs off on its own: a refused patch does not hold back a delete).

        Raises:
            KubeError: the server's answer; or, while the object is backing off, a copy of the last refusal
                (same class and status) saying when the next attempt is allowed.
        """
        if kind == r.LEASES:
            return call()  # leader election has its own retry period and deadlines
        key = f"{verb} {kind.plural}/{namespace or ''}/{name}"
        now = self.clock()
        with self._write_lock:
            last = self._write_errors.get(key)
            if last is not None and not self.write_backoff.ready(key, now):
                raise type(last)(f"{last} (not retried yet: {verb} of {kind.kind} {name} is backing off after "
                                 f"{self.write_backoff.failures(key)} refusal(s))", last.status)
        try:
            result = call()
        except KubeError as err:
            if _retriable(err):
                with self._write_lock:
                    self._write_errors[key] = err
                    delay = self.write_backoff.failed(key, now)
                log.info("%s of %s %s refused (%s), retrying in %.1fs", verb, kind.kind, name, err, delay,
                         extra={"kind": kind.kind, "object": name, "status": err.status})
            raise
        with self._write_lock:
            if self._write_errors.pop(key, None) is not None:
                self.write_backoff.succeeded(key)
        return result

    def _reflect(self, kind: ResourceKind, event: str, obj: Obj) -> Obj:
        obj.setdefault("kind", kind.kind)
        obj.setdefault("apiVersion", kind.api_version)
        informer = self.informers.get(kind)
        if informer is not None and obj.get("metadata"):
            informer.apply_local(event, obj)
        return obj

    def create(self, kind: ResourceKind, obj: Obj) -> Obj:
        """POST to the collection."""
        body = {**obj, "apiVersion": kind.api_version, "kind": kind.kind}
        namespace = namespace_of(obj) or ("default" if kind.namespaced else None)
        name = name_of(obj) or str((obj.get("metadata") or {}).get("generateName") or "")
        created = self._guarded("create", kind, name, namespace, lambda: self.rest.request(
            "POST", kind.collection_path(namespace), body=body, creating=True))
        return self._reflect(kind, "ADDED", created)

    def patch(self, kind: ResourceKind, name: str, patch: Obj, namespace: str | None = None) -> Obj:
        """PATCH with ``application/merge-patch+json``."""
        patched = self._guarded("patch", kind, name, namespace, lambda: self.rest.request(
            "PATCH", kind.object_path(name, namespace), body=patch, content_type=MERGE_PATCH))
        return self._reflect(kind, "MODIFIED", patched)

    def patch_status(self, kind: ResourceKind, name: str, status: Obj, namespace: str | None = None,
                     resource_version: str | None = None) -> Obj:
        """PATCH the ``status`` subresource (``resource_version``: the ``metadata.resourceVersion`` precondition)."""
        body: Obj = {"status": status}
        if resource_version is not None:
            body["metadata"] = {"resourceVersion": resource_version}
        patched = self._guarded("patch", kind, f"{name}/status", namespace, lambda: self.rest.request(
            "PATCH", kind.object_path(name, namespace, "status"), body=body, content_type=MERGE_PATCH))
        return self._reflect(kind, "MODIFIED", patched)

    def server_version(self) -> str:
        """The API server's ``gitVersion`` (``GET /version``), e.g. ``v1.36.0``.

        Raises:
            KubeError: the request failed.
        """
        return str(self.rest.request("GET", "/version").get("gitVersion") or "")

    def replace(self, kind: ResourceKind, obj: Obj) -> Obj:
        """PUT the object (``metadata.resourceVersion`` is the precondition)."""
        body = {**obj, "apiVersion": kind.api_version, "kind": kind.kind}
        replaced = self._guarded("update", kind, name_of(obj), namespace_of(obj), lambda: self.rest.request(
            "PUT", kind.object_path(name_of(obj), namespace_of(obj)), body=body))
        return self._reflect(kind, "MODIFIED", replaced)

    def delete(self, kind: ResourceKind, name: str, namespace: str | None = None) -> None:
        """DELETE; the answer is the object (marked deleting) or a Status when it is gone."""
        doc = self._guarded("delete", kind, name, namespace, lambda: self.rest.request("DELETE", kind.object_path(name, namespace)))
        if doc.get("kind") == kind.kind and doc.get("metadata", {}).get("deletionTimestamp"):
            self._reflect(kind, "MODIFIED", doc)
            return
        informer = self.informers.get(kind)
        if informer is not None:
            cached = informer.get(f"{namespace}/{name}" if kind.namespaced and namespace else name)
            if cached is not None:
                informer.apply_local("DELETED", cached)

    def bind_pod(self, namespace: str, name: str, node_name: str) -> None:
        """POST ``pods/binding``."""
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        self._guarded("create", r.PODS, f"{name}/binding", namespace, lambda: self.rest.request(
            "POST", r.PODS.object_path(name, namespace, "binding"), body=body))

    def evict_pod(self, namespace: str, name: str) -> None:
        """POST ``pods/eviction`` (``policy/v1``)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        self.rest.request("POST", r.PODS.object_path(name, namespace, "eviction"), body=body)

    def record_event(self, involved: Obj, reason: str, message: str, event_type: str = "Normal") -> None:
        """Create a ``v1`` Event in the object's namespace (``default`` for cluster-scoped objects)."""
        now = self.clock()
        namespace = namespace_of(involved) or "default"
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name_of(involved) or 'object'}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""),
                "kind": involved.get("kind", ""),
                "name": name_of(involved),
                "namespace": namespace_of(involved) or "",
                "uid": (involved.get("metadata") or {}).get("uid", ""),
            },
            "reason": reason,
            "message": message[:1024],
            "type": event_type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.component,
            "firstTimestamp": format_time(now),
            "lastTimestamp": format_time(now),
            "eventTime": format_micro_time(now),
            "action": reason,
            "count": 1,
        }
        try:
            self.rest.request("POST", r.EVENTS.collection_path(namespace), body=body, creating=True)
        except KubeError as err:  # events are best effort, as in client-go's recorder
            log.debug("could not record event %s on %s: %s", reason, key_of(involved), err)
