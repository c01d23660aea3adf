"""Where ``nodewright nodes`` reads objects from: a snapshot file or a live cluster.

* :func:`load_snapshot`: a snapshot (a ``v1`` ``kind: List`` of the cluster's objects, YAML or JSON, with the
  ``nodewright.io/snapshot-*`` annotations; docs/viewer.md) read as a plain ``kind: List`` into a read-only
  :class:`ObjectsCluster`. When ``nodewright.whatif.snapshot`` is installed its ``read_snapshot`` reads the
  file (the one reader), else the list is read here.
* :func:`live_cluster`: a :class:`~nodewright.kube.client.KubernetesCluster` over the kubeconfig that watches
  only what the viewer shows (:data:`VIEWER_KINDS`: Pods, Nodes, NodeClaims, NodePools): one LIST each, then
  WATCH events (:mod:`nodewright.kube.informer`); nothing is polled. :class:`WatchedOnly` answers ``[]`` for the
  kinds :func:`nodewright.state.cluster.snapshot` reads beyond those, so building a view never reaches the
  server.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.objects import Obj, in_scope, name_of, namespace_of, parse_time
from nodewright.kube.resources import ResourceKind

#: The snapshot annotation holding when it was taken (RFC 3339), shared with ``nodewright.whatif``.
SNAPSHOT_TIME = "nodewright.io/snapshot-time"
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


def _read_list(path: Path) -> tuple[list[Obj], float | None]:
    """The items of a ``kind: List`` file (YAML or JSON) and its ``nodewright.io/snapshot-time`` (epoch s).

    Raises:
        NodewrightValidationError: naming the file and what is wrong.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise NodewrightValidationError(str(path), f"cannot read the snapshot: {err.strerror or err}") from err
    try:
        doc = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as err:
        raise NodewrightValidationError(str(path), f"not YAML or JSON: {' '.join(str(err).split())}") from err
    if not isinstance(doc, dict) or doc.get("kind") != "List":
        raise NodewrightValidationError(str(path), "a snapshot is one v1 'kind: List' of the cluster's objects")
    items = doc.get("items")
    if not isinstance(items, list):
        raise NodewrightValidationError(f"{path}: items", "must be a list of objects")
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not item.get("kind") or not isinstance(item.get("metadata"), dict):
            raise NodewrightValidationError(f"{path}: items[{i}]", "must be an object with kind and metadata")
    annotations = (doc.get("metadata") or {}).get("annotations") or {}
    return items, parse_time(annotations.get(SNAPSHOT_TIME))


def load_snapshot(path: str) -> ObjectsCluster:
    """The objects of a snapshot file as a read-only cluster (see the module docstring).

    Raises:
        NodewrightValidationError: the file cannot be read or is not a ``kind: List``.
    """
    reader: Callable[[str], Any] | None = None
    try:
        from nodewright.whatif.snapshot import read_snapshot  # type: ignore[import-not-found]

        reader = read_snapshot
    except ImportError:
        reader = None
    if reader is not None:
        loaded = reader(path)
        items = loaded if isinstance(loaded, list) else getattr(loaded, "objects", None)
        if isinstance(items, list):
            return ObjectsCluster(items)
    items, taken = _read_list(Path(path))
    return ObjectsCluster(items, taken)


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
