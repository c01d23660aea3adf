"""Where ``nodewright nodes`` reads objects from: a snapshot file or a live cluster.

* :func:`load_snapshot`: a snapshot (a ``v1`` ``kind: List`` of the cluster's objects, YAML or JSON, with the
  ``nodewright.io/snapshot-*`` annotations; docs/whatif.md) read by ``nodewright.whatif.snapshot.read_snapshot``
  into a read-only :class:`ObjectsCluster`.
* :func:`live_cluster`: a :class:`~nodewright.kube.client.KubernetesCluster` over the kubeconfig that watches
  only what the viewer shows (:data:`VIEWER_KINDS`: Pods, Nodes, NodeClaims, NodePools): one LIST each, then
  WATCH events (:mod:`nodewright.kube.informer`); nothing is polled. :class:`WatchedOnly` answers ``[]`` for the
  kinds :func:`nodewright.state.cluster.snapshot` reads beyond those, so building a view never reaches the
  server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.objects import Obj, in_scope, name_of, namespace_of
from nodewright.kube.resources import ResourceKind

#: What the live viewer watches.
VIEWER_KINDS: tuple[ResourceKind, ...] = (r.PODS, r.NODES, r.NODECLAIMS, r.NODEPOOLS)


class ObjectsCluster:
    """A read-only :class:`~nodewright.kube.cluster.Cluster` over a fixed list of objects (a snapshot). Reads
    follow the contract; writes raise ``NotImplementedError`` (the viewer never writes)."""

    def __init__(self, objects: list[Obj], time: float | None = None) -> None:
        #: When the snapshot was taken (epoch seconds; its ``nodewright.io/snapshot-time``), None when unknown.
        self.time = time
        self._by_kind: dict[ResourceKind, list[Obj]] = {}
        for obj in objects:
            kind = _kind_of(obj)
            if kind is not None:
                self._by_kind.setdefault(kind, []).append(obj)

    def list(self, kind: ResourceKind, namespace: str | None = None,
             label_selector: Mapping[str, str] | None = None) -> list[Obj]:
        return [o for o in self._by_kind.get(kind, []) if in_scope(o, namespace, label_selector)]

    def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> Obj | None:
        return next((o for o in self._by_kind.get(kind, [])
                     if name_of(o) == name and (not kind.namespaced or namespace_of(o) == namespace)), None)

    def _read_only(self, *_: Any, **__: Any) -> Any:
        raise NotImplementedError("a snapshot is read-only")

    create = patch = patch_status = replace = delete = bind_pod = evict_pod = _read_only

    def record_event(self, involved: Obj, reason: str, message: str, event_type: str = "Normal") -> None:
        return None


class WatchedOnly:
    """Reads of ``cluster`` restricted to ``kinds``: other kinds list as empty (see the module docstring)."""

    def __init__(self, cluster: Any, kinds: tuple[ResourceKind, ...] = VIEWER_KINDS) -> None:
        self.cluster = cluster
        self.kinds = kinds

    def list(self, kind: ResourceKind, namespace: str | None = None,
             label_selector: Mapping[str, str] | None = None) -> list[Obj]:
        return self.cluster.list(kind, namespace, label_selector) if kind in self.kinds else []

    def get(self, kind: ResourceKind, name: str, namespace: str | None = None) -> Obj | None:
        return self.cluster.get(kind, name, namespace) if kind in self.kinds else None


def _kind_of(obj: Mapping[str, Any]) -> ResourceKind | None:
    for kind in r.ALL:
        if obj.get("kind") == kind.kind and obj.get("apiVersion") == kind.api_version:
            return kind
    return None


def load_snapshot(path: str) -> ObjectsCluster:
    """The objects of a snapshot file as a read-only cluster, read by the one snapshot reader
    (:func:`nodewright.whatif.snapshot.read_snapshot`: ``nodewright snapshot`` files and ``kubectl get -o yaml``
    output); its time (``nodewright.io/snapshot-time``) becomes :attr:`ObjectsCluster.time`.

    Raises:
        NodewrightValidationError: every problem of the file, one per line.
    """
    from nodewright.whatif.snapshot import read_snapshot

    snap = read_snapshot(path)
    return ObjectsCluster(snap.objects, snap.time)


def live_cluster(kubeconfig: str | None, context: str | None, on_change: Callable[[], None],
                 stop: threading.Event, clock: Callable[[], float]) -> Any:
    """Start informers for :data:`VIEWER_KINDS` against the kubeconfig's cluster (``on_change()`` on every watch
    event); returns the :class:`~nodewright.kube.client.KubernetesCluster` once every informer has listed.

    Raises:
        NodewrightValidationError: no usable kubeconfig, or the API server did not answer within 30 s.
    """
    from nodewright.kube.client import KubernetesCluster
    from nodewright.kube.rest import RestClient, load_api_client

    try:
        api_client = load_api_client(kubeconfig, context)
    except Exception as err:  # the kubernetes client raises ConfigException, TypeError, OSError, ...
        raise NodewrightValidationError(f"--kubeconfig {kubeconfig or '(default)'}",
                                        f"cannot load: {' '.join(str(err).split())}") from err
    cluster = KubernetesCluster(RestClient(api_client, timeout=10.0), clock, kinds=VIEWER_KINDS, watch_timeout=60.0)
    for informer in cluster.informers.values():
        informer.add_handler(lambda _event, _obj: on_change())
    cluster.start(stop)
    if not cluster.wait_for_sync(30.0):
        stop.set()
        host = getattr(api_client.configuration, "host", "?")
        raise NodewrightValidationError(f"--kubeconfig {kubeconfig or '(default)'}",
                                        f"the API server at {host} did not answer a LIST within 30s")
    return cluster
