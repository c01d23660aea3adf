"""The cluster interface the controllers program against.

Two implementations share it: :class:`nodewright.kube.memory.InMemoryCluster` (unit tests and the
simulator; deterministic, no threads) and :class:`nodewright.kube.client.KubernetesCluster` (the official
``kubernetes`` client; reads come from informer caches, writes go to the API server).

Contract for every implementation:

* Objects are plain JSON dicts as the API server serves them. Returned dicts are read-only snapshots:
  callers must not mutate them (build a patch instead).
* Reads (:meth:`Cluster.list`, :meth:`Cluster.get`) are served from a local view that reflects this
  process's own successful writes immediately.
* Writes raise :mod:`nodewright.kube.errors` exceptions: ``NotFoundError`` (404),
  ``AlreadyExistsError``/``ConflictError`` (409), ``TooManyRequestsError`` (429), ``KubeError`` otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from nodewright.kube.objects import Obj
from nodewright.kube.resources import ResourceKind

#: A clock: returns the current time in epoch seconds. Controllers never call ``time.time()`` directly.
Clock = Callable[[], float]


@runtime_checkable
class Cluster(Protocol):
    """Reads and writes against a Kubernetes cluster (see the module docstring for the contract)."""

    def list(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        label_selector: Mapping[str, str] | None = None,
    ) -> list[Obj]:
        """Objects of ``kind`` (in ``namespace`` when given) whose labels contain ``label_selector``."""
        ...

    def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> Obj | None:
        """One object, or None when it does not exist."""
        ...

    def create(self, kind: ResourceKind, obj: Obj) -> Obj:
        """Create ``obj`` (``metadata.generateName`` is honoured); returns the stored object.

        Raises:
            AlreadyExistsError: an object with that name exists.
        """
        ...

    def patch(self, kind: ResourceKind, name: str, patch: Obj, namespace: str | None = None) -> Obj:
        """JSON merge patch (RFC 7386). A ``metadata.resourceVersion`` in the patch is a precondition.

        Raises:
            NotFoundError: no such object.
            ConflictError: the precondition ``resourceVersion`` is stale.
        """
        ...

    def patch_status(self, kind: ResourceKind, name: str, status: Obj, namespace: str | None = None,
                     resource_version: str | None = None) -> Obj:
        """Merge-patch the ``status`` subresource with ``status``; ``resource_version``, when given, is a
        precondition (sent as ``metadata.resourceVersion``).

        Raises:
            NotFoundError: no such object.
            ConflictError: the precondition ``resource_version`` is stale.
        """
        ...

    def replace(self, kind: ResourceKind, obj: Obj) -> Obj:
        """PUT ``obj``; its ``metadata.resourceVersion`` must be current (optimistic concurrency).

        Raises:
            NotFoundError: no such object.
            ConflictError: ``metadata.resourceVersion`` is stale.
        """
        ...

    def delete(self, kind: ResourceKind, name: str, namespace: str | None = None) -> None:
        """Delete; with finalizers present this only sets ``metadata.deletionTimestamp``.

        Raises:
            NotFoundError: no such object.
        """
        ...

    def bind_pod(self, namespace: str, name: str, node_name: str) -> None:
        """POST a ``pods/binding`` for the pod to ``node_name``.

        Raises:
            NotFoundError: no such pod.
            ConflictError: the pod is already bound.
        """
        ...

    def evict_pod(self, namespace: str, name: str) -> None:
        """POST a ``pods/eviction`` (``policy/v1`` Eviction).

        Raises:
            NotFoundError: the pod is gone (eviction is then complete).
            TooManyRequestsError: a PodDisruptionBudget does not allow the eviction now; retry later.
        """
        ...

    def record_event(
        self, involved: Obj, reason: str, message: str, event_type: str = "Normal"
    ) -> None:
        """Record a ``v1`` Event about ``involved`` (any object dict); never raises."""
        ...
