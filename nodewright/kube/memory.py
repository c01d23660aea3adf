"""An in-memory Kubernetes cluster: the :class:`~nodewright.kube.cluster.Cluster` for unit tests and the simulator.

Deterministic (uids, generated names and resourceVersions come from counters and a seeded RNG; timestamps
come from the injected clock), single-threaded, no I/O. It keeps the API-server semantics the controllers
rely on: ``metadata.uid``/``resourceVersion``/``creationTimestamp``/``generation``, finalizers and
``deletionTimestamp``, optimistic concurrency, ``pods/binding``, ``pods/eviction`` with PodDisruptionBudgets
(429), and the pod garbage collector's behaviour of deleting pods bound to a Node that was deleted.

Objects are stored copy-on-write: every write stores a new dict, so snapshots handed out earlier never
change.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from nodewright.kube import resources as r
from nodewright.kube.cluster import Clock
from nodewright.kube.errors import AlreadyExistsError, ConflictError, NotFoundError, TooManyRequestsError
from nodewright.kube.objects import (
    Obj,
    finalizers_of,
    format_time,
    in_scope,
    is_deleting,
    merge_patch,
    meta,
    name_of,
    namespace_of,
)
from nodewright.kube.pdb import blocking_budget
from nodewright.kube.resources import ResourceKind

#: Listener signature: (kind, event type "ADDED"|"MODIFIED"|"DELETED", object).
Listener = Callable[[ResourceKind, str, Obj], None]

_UID_NAMESPACE = uuid.UUID("6f1f0e1e-9a53-4a55-9c1e-6e6f64657772")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet (no vowels)


class InMemoryCluster:
    """The cluster interface over dicts in memory.

    Args:
        clock: epoch seconds now; stamps ``creationTimestamp``, ``deletionTimestamp`` and events.
        seed: seeds ``generateName`` suffixes so runs are reproducible.

    Attributes:
        events: recorded Events as dicts ``{"reason", "message", "type", "kind", "name", "namespace", "time"}``.
        bindings: ``(namespace, pod, node)`` for every successful ``pods/binding``.
        evictions: ``(namespace, pod)`` for every successful ``pods/eviction``.
        version: the ``gitVersion`` :meth:`server_version` reports (``v1.36.0``; tests set older ones).
    """

    def __init__(self, clock: Clock, seed: int = 0) -> None:
        self._clock = clock
        self._rng = random.Random(seed)
        self._store: dict[ResourceKind, dict[tuple[str | None, str], Obj]] = {}
        self._rv = 0
        self._uids = 0
        self._listeners: list[Listener] = []
        self.events: list[dict[str, Any]] = []
        self.bindings: list[tuple[str, str, str]] = []
        self.evictions: list[tuple[str, str]] = []
        self.version = "v1.36.0"

    # --- observation -------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(kind, type, obj)`` after every change (the simulator's watch)."""
        self._listeners.append(listener)

    def _notify(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        for listener in self._listeners:
            listener(kind, event, obj)

    def _bucket(self, kind: ResourceKind) -> dict[tuple[str | None, str], Obj]:
        return self._store.setdefault(kind, {})

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    # --- reads -------------------------------------------------------------------------------

    def list(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        label_selector: Mapping[str, str] | None = None,
    ) -> list[Obj]:
        """Objects of ``kind`` in insertion order, filtered by namespace and equality label selector."""
        return [
            obj
            for (ns, _), obj in self._bucket(kind).items()
            if (namespace is None or ns == namespace) and in_scope(obj, None, label_selector)
        ]

    def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> Obj | None:
        """One object or None."""
        return self._bucket(kind).get((namespace if kind.namespaced else None, name))

    # --- writes ------------------------------------------------------------------------------

    def _generate_name(self, prefix: str) -> str:
        return prefix + "".join(self._rng.choice(_NAME_CHARS) for _ in range(5))

    def create(self, kind: ResourceKind, obj: Obj) -> Obj:
        """Store a new object with server-set metadata; see :meth:`Cluster.create`."""
        metadata = dict(meta(obj))
        if not metadata.get("name"):
            prefix = metadata.get("generateName")
            if not prefix:
                raise ValueError(f"{kind.kind}: metadata.name or metadata.generateName is required")
            name = self._generate_name(prefix)
            while (metadata.get("namespace"), name) in self._bucket(kind):
                name = self._generate_name(prefix)
            metadata["name"] = name
        ns = metadata.get("namespace") if kind.namespaced else None
        if kind.namespaced and not ns:
            ns = metadata["namespace"] = "default"
        key = (ns, metadata["name"])
        if key in self._bucket(kind):
            raise AlreadyExistsError(f"{kind.kind} {metadata['name']!r} already exists")
        self._uids += 1
        metadata["uid"] = str(uuid.uuid5(_UID_NAMESPACE, str(self._uids)))
        metadata["resourceVersion"] = self._next_rv()
        metadata["creationTimestamp"] = format_time(self._clock())
        metadata["generation"] = 1
        metadata.pop("deletionTimestamp", None)
        stored = {**obj, "apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata}
        self._bucket(kind)[key] = stored
        self._notify(kind, "ADDED", stored)
        return stored

    def restore(self, kind: ResourceKind, obj: Obj) -> Obj:
        """Store ``obj`` exactly as an API server served it (a snapshot's object: its uid, creationTimestamp,
        deletionTimestamp and finalizers kept; only ``resourceVersion`` is this cluster's). No listener is told:
        restoring is loading, not a change.

        Raises:
            AlreadyExistsError: an object of that kind, namespace and name is already stored.
            ValueError: no ``metadata.name``.
        """
        metadata = dict(meta(obj))
        if not metadata.get("name"):
            raise ValueError(f"{kind.kind}: metadata.name is required")
        ns = (metadata.get("namespace") or "default") if kind.namespaced else None
        if kind.namespaced:
            metadata["namespace"] = ns
        key = (ns, str(metadata["name"]))
        if key in self._bucket(kind):
            raise AlreadyExistsError(f"{kind.kind} {metadata['name']!r} already exists")
        if not metadata.get("uid"):
            self._uids += 1
            metadata["uid"] = str(uuid.uuid5(_UID_NAMESPACE, str(self._uids)))
        metadata["resourceVersion"] = self._next_rv()
        metadata.setdefault("creationTimestamp", format_time(self._clock()))
        stored = {**obj, "apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata}
        self._bucket(kind)[key] = stored
        return stored

    def _existing(self, kind: ResourceKind, name: str, namespace: str | None) -> tuple[tuple[str | None, str], Obj]:
        key = (namespace if kind.namespaced else None, name)
        obj = self._bucket(kind).get(key)
        if obj is None:
            raise NotFoundError(f"{kind.kind} {name!r} not found")
        return key, obj

    def _store_update(self, kind: ResourceKind, key: tuple[str | None, str], old: Obj, new: Obj) -> Obj:
        old_meta = meta(old)
        new_meta = dict(meta(new))
        # Server-owned fields cannot be changed by clients.
        for field in ("uid", "creationTimestamp", "name", "namespace"):
            if field in old_meta:
                new_meta[field] = old_meta[field]
        if old_meta.get("deletionTimestamp"):
            new_meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
        if new.get("spec") != old.get("spec"):
            new_meta["generation"] = int(old_meta.get("generation") or 1) + 1
        else:
            new_meta["generation"] = old_meta.get("generation", 1)
        new_meta["resourceVersion"] = self._next_rv()
        stored = {**new, "metadata": new_meta}
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers"):
            self._remove(kind, key, stored)
            return stored
        self._bucket(kind)[key] = stored
        self._notify(kind, "MODIFIED", stored)
        return stored

    def _check_precondition(self, kind: ResourceKind, current: Obj, wanted_rv: Any) -> None:
        if wanted_rv is not None and str(wanted_rv) != meta(current).get("resourceVersion"):
            raise ConflictError(
                f"{kind.kind} {name_of(current)!r}: the object has been modified; "
                "please apply your changes to the latest version and try again"
            )

    def patch(self, kind: ResourceKind, name: str, patch: Obj, namespace: str | None = None) -> Obj:
        """JSON merge patch (``status`` included, as the in-memory cluster has no subresource split)."""
        key, current = self._existing(kind, name, namespace)
        self._check_precondition(kind, current, (patch.get("metadata") or {}).get("resourceVersion"))
        return self._store_update(kind, key, current, merge_patch(current, patch))

    def patch_status(self, kind: ResourceKind, name: str, status: Obj, namespace: str | None = None,
                     resource_version: str | None = None) -> Obj:
        """Merge-patch ``status`` only (``resource_version``: a precondition)."""
        key, current = self._existing(kind, name, namespace)
        self._check_precondition(kind, current, resource_version)
        return self._store_update(kind, key, current, merge_patch(current, {"status": status}))

    def replace(self, kind: ResourceKind, obj: Obj) -> Obj:
        """Replace with optimistic concurrency on ``metadata.resourceVersion``."""
        key, current = self._existing(kind, name_of(obj), namespace_of(obj))
        self._check_precondition(kind, current, meta(obj).get("resourceVersion"))
        return self._store_update(kind, key, current, {**obj, "status": obj.get("status", current.get("status"))})

    def _remove(self, kind: ResourceKind, key: tuple[str | None, str], obj: Obj) -> None:
        self._bucket(kind).pop(key, None)
        self._notify(kind, "DELETED", obj)
        if kind == r.NODES:
            # The pod garbage collector deletes pods bound to a Node that no longer exists.
            for pod in list(self.list(r.PODS)):
                if (pod.get("spec") or {}).get("nodeName") == key[1]:
                    self._delete_pod_now(pod)

    def _delete_pod_now(self, pod: Obj) -> None:
        key = (namespace_of(pod), name_of(pod))
        if finalizers_of(pod):
            self._mark_deleting(r.PODS, key, pod)
        else:
            self._remove(r.PODS, key, pod)

    def _mark_deleting(self, kind: ResourceKind, key: tuple[str | None, str], obj: Obj) -> None:
        if is_deleting(obj):
            return
        new_meta = {**meta(obj), "deletionTimestamp": format_time(self._clock()), "resourceVersion": self._next_rv()}
        stored = {**obj, "metadata": new_meta}
        self._bucket(kind)[key] = stored
        self._notify(kind, "MODIFIED", stored)

    def delete(self, kind: ResourceKind, name: str, namespace: str | None = None) -> None:
        """Delete now, or mark deleting when finalizers are present."""
        key, current = self._existing(kind, name, namespace)
        if finalizers_of(current):
            self._mark_deleting(kind, key, current)
        else:
            self._remove(kind, key, current)

    def bind_pod(self, namespace: str, name: str, node_name: str) -> None:
        """Set ``spec.nodeName`` and ``PodScheduled=True``, as the binding subresource does."""
        key, pod = self._existing(r.PODS, name, namespace)
        if (pod.get("spec") or {}).get("nodeName"):
            raise ConflictError(f"pod {namespace}/{name} is already assigned to node {pod['spec']['nodeName']!r}")
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": format_time(self._clock())})
        new = merge_patch(pod, {"spec": {"nodeName": node_name}, "status": {"conditions": conditions}})
        self._store_update(r.PODS, key, pod, new)
        self.bindings.append((namespace, name, node_name))

    def evict_pod(self, namespace: str, name: str) -> None:
        """Delete the pod unless a PodDisruptionBudget forbids it (then 429)."""
        key, pod = self._existing(r.PODS, name, namespace)
        budget = blocking_budget(pod, self.list(r.PDBS, namespace), self.list(r.PODS, namespace))
        if budget is not None:
            raise TooManyRequestsError(
                f"Cannot evict pod as it would violate the pod's disruption budget {namespace}/{budget}"
            )
        self.evictions.append((namespace, name))
        self._delete_pod_now(pod)

    def server_version(self) -> str:
        """The emulated API server's ``gitVersion`` (:attr:`version`, ``v1.36.0`` unless a test sets another)."""
        return self.version

    def record_event(self, involved: Obj, reason: str, message: str, event_type: str = "Normal") -> None:
        """Append to :attr:`events`."""
        self.events.append(
            {
                "reason": reason,
                "message": message,
                "type": event_type,
                "kind": involved.get("kind", ""),
                "name": name_of(involved),
                "namespace": namespace_of(involved),
                "time": self._clock(),
            }
        )
        if len(self.events) > 10_000:  # bounded for long simulations
            del self.events[:1000]
