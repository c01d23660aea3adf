"""List+watch informers: a local cache of one resource kept current from the API server.

The protocol (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes):
LIST to get the objects and the collection ``resourceVersion``; WATCH from that version with
``allowWatchBookmarks=true``; apply ADDED/MODIFIED/DELETED; remember the version of every event and
BOOKMARK; when the stream ends (server timeout, broken connection) watch again from the last version;
on ``410 Gone`` (version compacted away) LIST again and reconcile the cache, emitting synthetic
DELETED events for objects that vanished meanwhile. Failures back off exponentially with jitter.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from nodewright.backoff import Backoff
from nodewright.kube import resources as r
from nodewright.kube.errors import GoneError, KubeError
from nodewright.kube.objects import Obj, key_of, resource_version_int
from nodewright.kube.resources import ResourceKind
from nodewright.kube.rest import RestClient
from nodewright.logging import warn_limited

log = logging.getLogger(__name__)

#: Handler signature: (event type "ADDED"|"MODIFIED"|"DELETED", object).
Handler = Callable[[str, Obj], None]
#: Deletions remembered per informer (see :meth:`Informer._remember_deletion`).
_TOMBSTONES = 10_000


class Informer:
    """Cache of one resource kept current by list+watch.

    Args:
        rest: the REST client.
        kind: which resource.
        namespace: restrict to one namespace (None: cluster-wide).
        label_selector: URL label selector string, e.g. ``"karpenter.sh/nodepool"``.
        watch_timeout: seconds the server keeps each watch open (``timeoutSeconds``) before we re-watch.
        backoff: retry policy after failures.

    Thread-safety: :meth:`run` runs in one thread; :meth:`items`/:meth:`get` and :meth:`apply_local`
    may be called from others (a lock guards the cache).
    """

    def __init__(
        self,
        rest: RestClient,
        kind: ResourceKind,
        namespace: str | None = None,
        label_selector: str | None = None,
        watch_timeout: float = 300.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.rest = rest
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.watch_timeout = watch_timeout
        self.backoff = backoff or Backoff(initial=0.5, maximum=30.0, jitter=0.5)
        self.synced = threading.Event()
        self.resource_version: str | None = None
        self._cache: dict[str, Obj] = {}
        #: key -> resourceVersion of its last deletion, so a late answer to an own write cannot resurrect it.
        self._tombstones: dict[str, int] = {}
        self._lock = threading.Lock()
        self._handlers: list[Handler] = []
        #: Counters for tests and metrics: lists done, watches opened, 410s seen, failures.
        self.stats = {"lists": 0, "watches": 0, "gone": 0, "errors": 0, "bookmarks": 0}

    # --- cache access ------------------------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        """Call ``handler(type, obj)`` for every cache change (from the informer thread)."""
        self._handlers.append(handler)

    def items(self) -> list[Obj]:
        """Snapshot of the cached objects."""
        with self._lock:
            return list(self._cache.values())

    def get(self, key: str) -> Obj | None:
        """Cached object by ``"namespace/name"`` or ``"name"``."""
        with self._lock:
            return self._cache.get(key)

    def _remember_deletion(self, key: str, resource_version: int) -> None:
        """Keep the deletion's resourceVersion (bounded: the oldest half goes when full)."""
        self._tombstones[key] = max(resource_version, self._tombstones.get(key, 0))
        if len(self._tombstones) > _TOMBSTONES:
            for old in list(self._tombstones)[: _TOMBSTONES // 2]:
                del self._tombstones[old]

    def apply_local(self, event: str, obj: Obj) -> None:
        """Reflect this process's own successful write before the watch delivers it.

        Keeps the newer of cached and written object when both resourceVersions are numeric.
        """
        self._apply(event, obj)

    def _apply(self, event: str, obj: Obj) -> None:
        key = key_of(obj)
        meta = obj.get("metadata") or {}
        if (event != "DELETED" and meta.get("deletionTimestamp") and not meta.get("finalizers")
                and not meta.get("deletionGracePeriodSeconds")):
            # The API server answers the write that removes the last finalizer with the object's final state;
            # it is gone, whichever of that answer and the watch's DELETED arrives first. Not so a Pod in graceful
            # deletion (deletionGracePeriodSeconds > 0): it runs until its kubelet removes it.
            event = "DELETED"
        new_rv = resource_version_int(obj)
        with self._lock:
            current = self._cache.get(key)
            if event != "DELETED":
                tombstone = self._tombstones.get(key)
                if tombstone is not None and new_rv is not None and new_rv <= tombstone:
                    return  # an own write's answer arriving after the watch already delivered the deletion
                if current is not None:
                    old_rv = resource_version_int(current)
                    if old_rv is not None and new_rv is not None and new_rv < old_rv:
                        return
                self._cache[key] = obj
            else:
                if new_rv is not None:
                    self._remember_deletion(key, new_rv)
                if current is None:
                    return
                old_rv = resource_version_int(current)
                if new_rv is not None and old_rv is not None and new_rv < old_rv:
                    return
                del self._cache[key]
        for handler in self._handlers:
            handler(event, obj)

    # --- list + watch ------------------------------------------------------------------------

    def _query(self) -> dict[str, Any]:
        return {"labelSelector": self.label_selector} if self.label_selector else {}

    def relist(self) -> None:
        """LIST and replace the cache; objects that disappeared get a synthetic DELETED event.

        Raises:
            KubeError: the LIST failed.
        """
        doc = self.rest.request("GET", self.kind.collection_path(self.namespace), self._query())
        self.stats["lists"] += 1
        items = []
        for item in doc.get("items") or []:
            # Lists omit kind/apiVersion on items; restore them so every cached object is self-describing.
            item.setdefault("kind", self.kind.kind)
            item.setdefault("apiVersion", self.kind.api_version)
            items.append(item)
        fresh = {key_of(item): item for item in items}
        with self._lock:
            gone = [obj for key, obj in self._cache.items() if key not in fresh]
        for obj in gone:
            self._apply("DELETED", obj)
        for item in items:
            self._apply("MODIFIED" if self.get(key_of(item)) else "ADDED", item)
        self.resource_version = str((doc.get("metadata") or {}).get("resourceVersion") or "") or None
        self.synced.set()

    def watch_once(self, stop: threading.Event) -> None:
        """Open one watch from :attr:`resource_version` and apply events until it ends.

        Raises:
            GoneError: the version is too old (caller relists).
            KubeError: transport failure.
        """
        query = {
            **self._query(),
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": int(self.watch_timeout),
        }
        if self.resource_version:
            query["resourceVersion"] = self.resource_version
        self.stats["watches"] += 1
        stream = self.rest.stream_lines(
            self.kind.collection_path(self.namespace), query, read_timeout=self.watch_timeout + 30
        )
        for event in stream:
            if stop.is_set():
                return
            self._handle_event(event)
            self.backoff.reset()

    def _handle_event(self, event: dict[str, Any]) -> None:
        etype = event.get("type")
        obj = event.get("object") or {}
        if etype == "ERROR":
            code = int(obj.get("code") or 0)
            if code == 410:
                raise GoneError(str(obj.get("message") or "resourceVersion too old"))
            raise KubeError(f"watch error: {obj.get('message')}", code)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if etype == "BOOKMARK":
            self.stats["bookmarks"] += 1
        elif etype in ("ADDED", "MODIFIED", "DELETED"):
            obj.setdefault("kind", self.kind.kind)
            obj.setdefault("apiVersion", self.kind.api_version)
            self._apply(etype, obj)
        if rv:
            self.resource_version = str(rv)

    def run(self, stop: threading.Event) -> None:
        """List+watch until ``stop`` is set; never raises (failures are logged and retried)."""
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                    self.backoff.reset()
                self.watch_once(stop)
            except GoneError:
                self.stats["gone"] += 1
                log.info("watch of %s expired (410 Gone), relisting", self.kind)
                need_list = True
            except KubeError as err:
                self.stats["errors"] += 1
                delay = self.backoff.next_delay()
                if err.status == 404 and self.kind in r.OPTIONAL_WATCHED and not self.synced.is_set():
                    # A cluster without this CRD (NodeOverlay) has none of its objects: synced and empty, and the
                    # LIST is retried in case the CRD is installed later.
                    self.synced.set()
                # One line per cause per interval: a cut connection fails every informer's watch at once.
                warn_limited(log, f"list/watch failed {err.status}", "list/watch of %s failed: %s; retrying in %.1fs",
                             self.kind, err, delay, extra={"kind": str(self.kind), "status": err.status})
                # A LIST that failed must be retried; a broken watch resumes from the last version.
                stop.wait(delay)
