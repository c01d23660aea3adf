"""Cluster snapshots: one file holding every object a provisioning or disruption decision reads.

**Format** (shared with ``nodewright nodes``; docs/whatif.md): a Kubernetes ``kind: List`` (``apiVersion: v1``)
in YAML or JSON (``.json``), whose ``metadata.annotations`` carry

- ``nodewright.io/snapshot-version``: ``"1"`` (:data:`SNAPSHOT_VERSION`);
- ``nodewright.io/snapshot-time``: RFC 3339 UTC, when the cluster was read (the dry-run's ``now``);
- ``nodewright.io/karpenter-version``: the Karpenter release this build targets (``v1.15.1``: Karpenter v1 API);
- ``nodewright.io/snapshot-objects``: how many items follow (a truncated file is refused);
- ``nodewright.io/snapshot-redacted``: ``"true"`` when ``--redact`` hashed names and labels.

``items`` are the objects exactly as the API server served them (``apiVersion`` and ``kind`` set on each), minus
``metadata.managedFields``, the ``kubectl.kubernetes.io/last-applied-configuration`` annotation and Node
``status.images`` (large, read by no decision), sorted by kind (:data:`SNAPSHOT_KINDS` order), namespace, name.

:func:`read_snapshot` also reads what ``kubectl get nodes,pods,... -o yaml`` prints (a ``kind: List`` without the
annotations; several documents are concatenated), in which case the snapshot time is unknown (``None``).
Secrets and ConfigMaps are never read and refused in a file.

Errors: :class:`~nodewright.errors.NodewrightValidationError`, one problem per bad object
(``file#items[3]: ...``), so the CLI prints one line each and exits 2. :func:`write_snapshot` writes a temporary
file beside the target and renames it, so a failed or interrupted write leaves nothing partial.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from nodewright import KARPENTER_VERSION as _TARGET
from nodewright.api import labels as L
from nodewright.api.hashing import ec2nodeclass_hash, nodepool_hash
from nodewright.errors import NodewrightValidationError, combine
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import Obj, format_time, meta, parse_time
from nodewright.kube.resources import ResourceKind
from nodewright.review import Finding, unknown_field_findings

SNAPSHOT_VERSION = "1"
ANN_VERSION = "nodewright.io/snapshot-version"
ANN_TIME = "nodewright.io/snapshot-time"
ANN_KARPENTER = "nodewright.io/karpenter-version"
ANN_OBJECTS = "nodewright.io/snapshot-objects"
ANN_REDACTED = "nodewright.io/snapshot-redacted"

#: Karpenter's NodeOverlay (v1alpha1, Karpenter v1.6+, feature-gated): read when the cluster serves it.
NODEOVERLAYS = r.NODEOVERLAYS
#: CapacityBuffers (``autoscaling.x-k8s.io/v1beta1``, feature-gated; docs/capacity-buffers.md): read when served.
CAPACITYBUFFERS = r.CAPACITYBUFFERS
#: What a CapacityBuffer's ``podTemplateRef`` / ``scalableRef`` names: listed only when the cluster has a buffer,
#: and only the objects some buffer names are kept (a cluster's ReplicaSets are many; no decision reads the rest).
BUFFER_TARGET_KINDS: tuple[ResourceKind, ...] = (r.PODTEMPLATES, r.DEPLOYMENTS, r.STATEFULSETS, r.REPLICASETS)
#: Every resource a snapshot reads, in file order. Never Secrets or ConfigMaps.
SNAPSHOT_KINDS: tuple[ResourceKind, ...] = (
    r.NODEPOOLS, r.EC2NODECLASSES, r.NODECLAIMS, r.NODES, r.PODS, r.DAEMONSETS, r.PDBS, r.PVCS, r.PVS,
    r.STORAGECLASSES, r.CSINODES, r.LIMITRANGES, r.NAMESPACES, r.RUNTIMECLASSES, NODEOVERLAYS,
    CAPACITYBUFFERS, *BUFFER_TARGET_KINDS,
)
#: Resources a cluster may not serve: a 404 on their LIST means "none" (Karpenter's are required).
OPTIONAL_KINDS = frozenset({NODEOVERLAYS, CAPACITYBUFFERS})
KIND_OF = {k.kind: k for k in SNAPSHOT_KINDS}
_ORDER = {k.kind: i for i, k in enumerate(SNAPSHOT_KINDS)}
#: Kinds never read nor accepted (they may hold credentials).
REFUSED_KINDS = frozenset({"Secret", "ConfigMap"})
#: Top-level fields each kind may carry beside apiVersion/kind/metadata (anything else is an unknown field).
_TOP_FIELDS: dict[str, frozenset[str]] = {
    "StorageClass": frozenset({"provisioner", "parameters", "reclaimPolicy", "volumeBindingMode", "allowedTopologies",
                               "mountOptions", "allowVolumeExpansion"}),
    "RuntimeClass": frozenset({"handler", "overhead", "scheduling"}),
    "PodTemplate": frozenset({"template"}),
}
_DEFAULT_TOP = frozenset({"spec", "status"})
_KARPENTER_GROUPS = (L.GROUP, L.AWS_GROUP)
#: The Karpenter release this build reads (:data:`nodewright.KARPENTER_VERSION`; the v1 API of Karpenter >= 1.0).
KARPENTER_VERSION = _TARGET


@dataclass(frozen=True)
class Snapshot:
    """A snapshot read back.

    Attributes:
        objects: every object, as the API server served it (plain dicts, ``apiVersion``/``kind`` set).
        time: epoch seconds the cluster was read, or None (``kubectl get -o yaml`` input carries no time).
        karpenter_version: ``nodewright.io/karpenter-version`` (``""`` when absent).
        version: ``nodewright.io/snapshot-version`` (``""`` for kubectl output).
        source: the path it was read from.
        redacted: names and labels were replaced by hashes.
        findings: warnings about fields of its workloads no Kubernetes v1.36 object has (:func:`unknown_fields`):
            ignored, said once per kind and field.
    """

    objects: list[Obj]
    time: float | None = None
    karpenter_version: str = ""
    version: str = ""
    source: str = ""
    redacted: bool = False
    findings: tuple[Finding, ...] = ()

    def of_kind(self, kind: str) -> list[Obj]:
        """The objects of ``kind`` (``"Pod"``, ``"NodePool"``, ...), in file order."""
        return [o for o in self.objects if o.get("kind") == kind]


# --- reading a cluster -----------------------------------------------------------------------------------------


def _clean(obj: Obj, kind: ResourceKind) -> Obj:
    """``obj`` with ``apiVersion``/``kind`` set and the bulky fields no decision reads removed."""
    metadata = dict(obj.get("metadata") or {})
    metadata.pop("managedFields", None)
    annotations = metadata.get("annotations")
    if isinstance(annotations, dict) and "kubectl.kubernetes.io/last-applied-configuration" in annotations:
        metadata["annotations"] = {k: v for k, v in annotations.items()
                                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    out = {"apiVersion": kind.api_version, "kind": kind.kind, **{k: v for k, v in obj.items()
                                                                 if k not in ("apiVersion", "kind")}}
    out["metadata"] = metadata
    if kind.kind == "Node" and isinstance(out.get("status"), dict):
        out["status"] = {k: v for k, v in out["status"].items() if k != "images"}
    return out


def collect(rest: Any, kinds: Sequence[ResourceKind] = SNAPSHOT_KINDS, page_size: int = 500) -> list[Obj]:
    """LIST every resource of ``kinds`` through ``rest`` (:class:`nodewright.kube.rest.RestClient`), paginated
    (``limit``/``continue``): the only verbs used are ``list`` (docs/whatif.md has the ClusterRole).

    Raises:
        NodewrightValidationError: the API server is unreachable, refuses a LIST (403: the ClusterRole), or does
            not serve a required resource (404: Karpenter's v1 CRDs are not installed).
    """
    out: list[Obj] = []
    named: set[tuple[str, str, str]] | None = None
    for kind in kinds:
        if kind in BUFFER_TARGET_KINDS:
            if named is None:
                named = buffer_targets(out)
            if not any(k == kind.kind for k, _, _ in named):
                continue  # no buffer names one: not listed at all
        token: str | None = None
        while True:
            try:
                page = rest.request("GET", kind.collection_path(), {"limit": page_size, "continue": token})
            except NotFoundError:
                if kind in OPTIONAL_KINDS:
                    break
                raise NodewrightValidationError(
                    "--kubeconfig", f"the API server does not serve {kind} ({kind.api_version}): "
                                    "Karpenter v1 (>= 1.0) or nodewright CRDs must be installed") from None
            except KubeError as err:
                status = getattr(err, "status", 0)
                if status == 403:
                    why = f"list {kind} is forbidden: bind the ClusterRole of docs/whatif.md ({err})"
                elif status == 0:
                    why = _unreachable(rest, err)
                else:
                    why = f"list {kind} failed: {err}"
                raise NodewrightValidationError("--kubeconfig", why) from None
            items = [_clean(item, kind) for item in page.get("items") or [] if isinstance(item, dict)]
            if named is not None:
                items = [o for o in items if identity(o) in named]
            out.extend(items)
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                break
    return out


def _unreachable(rest: Any, err: KubeError) -> str:
    """``cannot reach the API server URL: cause``: the server from the kubeconfig and the transport's own reason
    (``[Errno 111] Connection refused``, a timeout, a name that does not resolve) rather than urllib3's retry chain."""
    host = str(getattr(getattr(getattr(rest, "api_client", None), "configuration", None), "host", "") or "")
    cause = err.__cause__
    reason = str(getattr(cause, "reason", None) or cause or err)
    if "): " in reason:  # "HTTPSConnection(host='h', port=1): Failed to establish a new connection: ..."
        reason = reason.split("): ", 1)[1]
    return f"cannot reach the API server{' ' + host if host else ''}: {reason}"


def buffer_targets(objects: Iterable[Obj]) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of every object the CapacityBuffers among ``objects`` reference: a
    ``podTemplateRef`` names a PodTemplate, an ``apps`` ``scalableRef`` a Deployment, StatefulSet or ReplicaSet, in
    the buffer's namespace (docs/capacity-buffers.md; another group or kind resolves to nothing)."""
    out: set[tuple[str, str, str]] = set()
    for obj in objects:
        if obj.get("kind") != CAPACITYBUFFERS.kind:
            continue
        ns = str(meta(obj).get("namespace") or "default")
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            continue
        template, scalable = spec.get("podTemplateRef"), spec.get("scalableRef")
        if isinstance(template, dict) and template.get("name"):
            out.add((r.PODTEMPLATES.kind, ns, str(template["name"])))
        if isinstance(scalable, dict) and scalable.get("name") and scalable.get("apiGroup") == "apps":
            out.add((str(scalable.get("kind")), ns, str(scalable["name"])))
    return out


# --- redaction --------------------------------------------------------------------------------------------------

#: Label/annotation domains whose keys (and, except hostname/namespace-name, values) mean something to a decision.
_KEPT_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws", "nodewright.io", "amazonaws.com")
#: Well-known labels whose values are object names (hashed like the names).
_NAME_VALUED = frozenset({L.HOSTNAME, "kubernetes.io/metadata.name", L.NODEPOOL})
_KEPT_ANNOTATIONS = ("karpenter.sh/", "karpenter.k8s.aws/", "nodewright.io/", "compatibility.karpenter.sh/",
                     "controller.kubernetes.io/pod-deletion-cost", "cluster-autoscaler.kubernetes.io/")


def _kept_key(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in _KEPT_DOMAINS)


def stable_hash(text: str) -> str:
    """``"h-"`` + the first 10 hex digits of SHA-256 of ``text``: the same input gives the same output in every
    snapshot, so two redacted snapshots (or one and a bug report) can be compared. Not a secret against guessing
    short names."""
    return "h-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def _label_maps(obj: Any) -> Iterable[dict[str, Any]]:
    """Every ``labels`` map in ``obj`` (metadata and pod templates)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "labels" and isinstance(value, dict):
                yield value
            else:
                yield from _label_maps(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _label_maps(value)


def redact(objects: Sequence[Obj]) -> list[Obj]:
    """``objects`` with names, namespaces, owner names and custom labels (keys and values outside the
    Kubernetes/Karpenter/AWS domains) replaced by :func:`stable_hash` *everywhere they occur* (so selectors,
    ``nodeName``, ``claimName``, ``nodeClassRef`` and affinity still match what they matched), container
    images/commands/arguments/environment dropped, annotations outside Karpenter's/nodewright's removed, Node
    addresses dropped, EC2NodeClass role/instance profile and selector-term tag values hashed. NodeClaims whose
    NodePool/EC2NodeClass hash matched before are re-stamped with the redacted object's hash, so redaction never
    makes a node look drifted."""
    names: set[str] = set()
    custom: set[str] = set()
    protected: set[str] = set(KIND_OF)
    for obj in objects:
        m = meta(obj)
        for value in (m.get("name"), m.get("namespace"), m.get("generateName")):
            if isinstance(value, str) and value:
                names.add(value)
        for ref in m.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("name"):
                names.add(str(ref["name"]))
        for labels in _label_maps(obj):
            for key, value in labels.items():
                if _kept_key(key):
                    if key not in _NAME_VALUED:
                        protected.add(str(value))
                else:
                    custom.update((str(key), str(value)))
    replace = {s: stable_hash(s) for s in (names | custom) - protected if s}

    def walk(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if key == "annotations":
                    if not str(k).startswith(_KEPT_ANNOTATIONS):
                        continue
                    out[k] = v
                    continue
                if k in ("image", "command", "args", "env", "envFrom") and key in ("", "container"):
                    continue
                out[replace.get(k, k) if key in ("labels", "matchLabels", "nodeSelector") else k] = walk(v, _ctx(k))
            return out
        if isinstance(value, list):
            return [walk(v, key) for v in value]
        if isinstance(value, str):
            return replace.get(value, value)
        return value

    redacted = []
    for obj in objects:
        new = walk(obj)
        if new.get("kind") == "Node" and isinstance(new.get("status"), dict):
            new["status"] = {k: v for k, v in new["status"].items() if k != "addresses"}
        if new.get("kind") == "EC2NodeClass" and isinstance(new.get("spec"), dict):
            new["spec"] = _redact_nodeclass_spec(new["spec"])
            status = new.get("status")
            if isinstance(status, dict) and isinstance(status.get("instanceProfile"), str):
                new["status"] = {**status, "instanceProfile": stable_hash(status["instanceProfile"])}
        redacted.append(new)
    _restamp(objects, redacted)
    return redacted


def _ctx(key: str) -> str:
    """The walk context a child of ``key`` is in (container fields are only dropped inside containers)."""
    if key in ("containers", "initContainers", "ephemeralContainers"):
        return "container"
    return key if key in ("labels", "matchLabels", "nodeSelector", "annotations") else "-"


def _redact_nodeclass_spec(spec: dict[str, Any]) -> dict[str, Any]:
    out = dict(spec)
    for key in ("role", "instanceProfile"):
        if isinstance(out.get(key), str):
            out[key] = stable_hash(out[key])
    for field in ("subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms",
                  "capacityReservationSelectorTerms"):
        terms = out.get(field)
        if isinstance(terms, list):
            out[field] = [{**t, "tags": {k: stable_hash(str(v)) for k, v in t["tags"].items()}}
                          if isinstance(t, dict) and isinstance(t.get("tags"), dict) else t for t in terms]
    out.pop("userData", None)
    return out


def _safe_hash(fn: Any, obj: Obj) -> str | None:
    try:
        return str(fn(obj))
    except (NodewrightValidationError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _restamp(before: Sequence[Obj], after: list[Obj]) -> None:
    """Re-stamp NodeClaim hash annotations that matched their (unredacted) NodePool/EC2NodeClass."""
    def hashes(objs: Sequence[Obj], kind: str, fn: Any) -> dict[str, str | None]:
        return {str(meta(o).get("name")): _safe_hash(fn, o) for o in objs if o.get("kind") == kind}

    old_pools, new_pools = hashes(before, "NodePool", nodepool_hash), hashes(after, "NodePool", nodepool_hash)
    old_classes = hashes(before, "EC2NodeClass", ec2nodeclass_hash)
    new_classes = hashes(after, "EC2NodeClass", ec2nodeclass_hash)
    pool_of = dict(zip(old_pools, new_pools, strict=True))
    class_of = dict(zip(old_classes, new_classes, strict=True))
    for old, new in zip(before, after, strict=True):
        if old.get("kind") != "NodeClaim":
            continue
        ann = dict(meta(old).get("annotations") or {})
        pool = str((meta(old).get("labels") or {}).get(L.NODEPOOL) or "")
        ref = str(((old.get("spec") or {}).get("nodeClassRef") or {}).get("name") or "")
        stamps = dict(meta(new).get("annotations") or {})
        if pool in old_pools and ann.get(L.NODEPOOL_HASH) == old_pools[pool] and pool_of.get(pool):
            stamps[L.NODEPOOL_HASH] = str(new_pools[pool_of[pool]])
        if ref in old_classes and ann.get(L.EC2NODECLASS_HASH) == old_classes[ref] and class_of.get(ref):
            stamps[L.EC2NODECLASS_HASH] = str(new_classes[class_of[ref]])
        new["metadata"] = {**meta(new), "annotations": stamps}


# --- writing ----------------------------------------------------------------------------------------------------


def _sort_key(obj: Obj) -> tuple[int, str, str]:
    m = meta(obj)
    return (_ORDER.get(str(obj.get("kind")), len(_ORDER)), str(m.get("namespace") or ""), str(m.get("name") or ""))


def snapshot_document(objects: Sequence[Obj], *, time: float, karpenter_version: str = KARPENTER_VERSION,
                      redacted: bool = False) -> dict[str, Any]:
    """The ``kind: List`` document of a snapshot (see module docstring); ``time`` is epoch seconds."""
    items = sorted(objects, key=_sort_key)
    annotations = {ANN_VERSION: SNAPSHOT_VERSION, ANN_TIME: format_time(time), ANN_KARPENTER: karpenter_version,
                   ANN_OBJECTS: str(len(items))}
    if redacted:
        annotations[ANN_REDACTED] = "true"
    return {"apiVersion": "v1", "kind": "List", "metadata": {"annotations": annotations}, "items": items}


def write_snapshot(path: str | os.PathLike[str], objects: Sequence[Obj], *, time: float,
                   karpenter_version: str = KARPENTER_VERSION, redact_names: bool = False) -> int:
    """Write ``objects`` as a snapshot to ``path`` (JSON when it ends in ``.json``, else YAML) through a temporary
    file in the same directory renamed over ``path`` (nothing partial is ever left); returns the item count.

    Raises:
        NodewrightValidationError: the directory does not exist or is not writable.
    """
    target = Path(path)
    objs = redact(objects) if redact_names else list(objects)
    doc = snapshot_document(objs, time=time, karpenter_version=karpenter_version, redacted=redact_names)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise NodewrightValidationError("--output", f"{directory}: no such directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise NodewrightValidationError("--output", f"{directory}: cannot write ({err.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            if target.suffix == ".json":
                # dumps, not dump: json.dump streams through the pure-Python encoder (10x slower at 50 MB).
                handle.write(json.dumps(doc, separators=(",", ":")))
            else:
                yaml.dump(doc, handle, Dumper=yaml.CSafeDumper, sort_keys=False, width=10_000)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(objs)


# --- reading a file ---------------------------------------------------------------------------------------------


def _load_documents(path: str, text: str) -> list[Any]:
    stripped = text.lstrip()
    if path.endswith(".json") or stripped.startswith("{"):
        try:
            return [json.loads(text)]
        except ValueError as err:
            raise NodewrightValidationError(
                path, f"not valid JSON at line {getattr(err, 'lineno', '?')} column {getattr(err, 'colno', '?')}: "
                      f"{getattr(err, 'msg', err)} (truncated or corrupted?)") from None
    try:
        return [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise NodewrightValidationError(path, f"not valid YAML{where}: {problem} (truncated or corrupted?)") from None


def _check_object(obj: Any, where: str) -> NodewrightValidationError | None:
    """Why ``obj`` cannot be part of a snapshot, or None."""
    if not isinstance(obj, dict):
        return NodewrightValidationError(where, f"expected a Kubernetes object (a mapping), got {type(obj).__name__}")
    kind, api = obj.get("kind"), obj.get("apiVersion")
    m = obj.get("metadata")
    name = m.get("name") if isinstance(m, dict) else None
    label = f"{kind} {name!r}"
    if kind in REFUSED_KINDS:
        return NodewrightValidationError(where, f"{label}: snapshots never hold Secrets or ConfigMaps; remove it")
    if kind == "Provisioner" or kind == "AWSNodeTemplate" or (
            isinstance(api, str) and api.split("/")[0] in _KARPENTER_GROUPS and api.split("/")[-1] in ("v1alpha5",
                                                                                                     "v1beta1")):
        return NodewrightValidationError(
            where, f"{label} is {api}: an object of Karpenter before v1.0; this nodewright reads Karpenter's v1 API "
                   f"(Karpenter >= 1.0, {KARPENTER_VERSION}); upgrade Karpenter, or `nodewright convert` the manifests")
    if kind not in KIND_OF:
        return NodewrightValidationError(
            where, f"unknown kind {kind!r} ({api}); a snapshot holds {', '.join(sorted(KIND_OF))}")
    expected = KIND_OF[str(kind)].api_version
    if api != expected:
        return NodewrightValidationError(where, f"{label} has apiVersion {api!r}; expected {expected!r}")
    if not isinstance(m, dict) or not name:
        return NodewrightValidationError(f"{where}.metadata.name", f"{kind}: required")
    allowed = _TOP_FIELDS.get(str(kind), _DEFAULT_TOP) | {"apiVersion", "kind", "metadata"}
    unknown = sorted(set(obj) - allowed)
    if unknown:
        return NodewrightValidationError(f"{where}.{unknown[0]}", f"unknown field of {label}")
    return None


def _karpenter_problems(obj: Obj, where: str) -> list[NodewrightValidationError]:
    """Invalid fields of a NodePool, NodeClaim or EC2NodeClass (Karpenter v1.14's schema, our models)."""
    from nodewright.api.manifests import parse_ec2nodeclass, parse_nodeclaim, parse_nodepool
    from nodewright.errors import prefixed

    parse = {"NodePool": parse_nodepool, "NodeClaim": parse_nodeclaim, "EC2NodeClass": parse_ec2nodeclass}.get(
        str(obj.get("kind")))
    if parse is None:
        return []
    try:
        parse(obj)
    except NodewrightValidationError as err:
        return [prefixed(err, where, f" (in {obj.get('kind')} {meta(obj).get('name')!r})")]
    return []


def identity(obj: Obj) -> tuple[str, str, str]:
    """(kind, namespace, name): what makes an object unique in a cluster (namespace ``""`` when cluster-scoped;
    ``default`` when a namespaced object names none, as the API server would)."""
    kind = KIND_OF.get(str(obj.get("kind")))
    m = meta(obj)
    ns = str(m.get("namespace") or "default") if kind is not None and kind.namespaced else ""
    return str(obj.get("kind")), ns, str(m.get("name"))


def read_snapshot(path: str | os.PathLike[str]) -> Snapshot:
    """Read a snapshot written by :func:`write_snapshot`, or ``kubectl get ... -o yaml|json`` output (one ``List``,
    several, or plain objects, in one or more YAML documents).

    Returns:
        a :class:`Snapshot` (objects in file order).

    Raises:
        NodewrightValidationError: every problem, one per line: unreadable or invalid YAML/JSON (truncated), fewer
            items than its header says (truncated), another snapshot version, objects of another Karpenter
            version (v1beta1/v1alpha5), unknown kinds or top-level fields, Secrets/ConfigMaps, invalid Karpenter
            fields (``file#items[i].spec...: reason (in NodePool 'x')``), one object twice with different contents
            (the same object twice is read once: concatenated kubectl outputs overlap).
    """
    source = os.fspath(path)
    try:
        raw = Path(source).read_bytes()
    except OSError as err:
        raise NodewrightValidationError(source, f"cannot read: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NodewrightValidationError(source, f"not UTF-8 text (byte {err.start})") from None
    documents = _load_documents(source, text)
    if not documents:
        raise NodewrightValidationError(source, "empty: no objects (is this a snapshot?)")
    header: dict[str, str] = {}
    items: list[tuple[str, Any]] = []
    for d, doc in enumerate(documents):
        prefix = source if len(documents) == 1 else f"{source}#documents[{d}]"
        if isinstance(doc, dict) and doc.get("kind") == "List" or (isinstance(doc, dict) and "items" in doc
                                                                  and str(doc.get("kind", "")).endswith("List")):
            m = doc.get("metadata")
            ann = (m.get("annotations") if isinstance(m, dict) else None) or {}
            if isinstance(ann, dict) and ANN_VERSION in ann and not header:
                header = {str(k): str(v) for k, v in ann.items()}
            listed = doc.get("items")
            if not isinstance(listed, list):
                raise NodewrightValidationError(f"{prefix}.items", "a List needs a list of items (truncated?)")
            items.extend((f"{prefix}#items[{i}]", item) for i, item in enumerate(listed))
        else:
            items.append((f"{prefix}" if len(documents) > 1 else f"{source}#documents[0]", doc))
    problems: list[NodewrightValidationError] = []
    version = header.get(ANN_VERSION, "")
    if header and version != SNAPSHOT_VERSION:
        problems.append(NodewrightValidationError(
            source, f"snapshot version {version!r}; this nodewright reads version {SNAPSHOT_VERSION!r}"))
    karpenter = header.get(ANN_KARPENTER, "")
    if karpenter and not karpenter.startswith("v1."):
        problems.append(NodewrightValidationError(
            source, f"taken from Karpenter {karpenter}; this nodewright reads Karpenter's v1 API (>= v1.0, "
                    f"{KARPENTER_VERSION}): upgrade Karpenter and snapshot again"))
    expected = header.get(ANN_OBJECTS)
    if expected is not None and expected.isdigit() and int(expected) != len(items):
        # Whatever else is wrong follows from the cut: one line.
        raise NodewrightValidationError(
            source, f"holds {len(items)} object{'' if len(items) == 1 else 's'} but its header says {expected}: the file is truncated")
    objects: list[Obj] = []
    seen: dict[tuple[str, str, str], tuple[str, Obj]] = {}
    for where, obj in items:
        problem = _check_object(obj, where)
        if problem is not None:
            problems.append(problem)
            continue
        key = identity(obj)
        if key in seen:  # kubectl outputs concatenated: the same object twice is read once
            if seen[key][1] != obj:
                problems.append(NodewrightValidationError(
                    where, f"{key[0]} {key[2]!r} appears twice with different contents (also {seen[key][0]})"))
            continue
        seen[key] = (where, obj)
        problems.extend(_karpenter_problems(obj, where))
        objects.append(obj)
    if problems:
        raise combine(problems)
    when = parse_time(header.get(ANN_TIME)) if header.get(ANN_TIME) else None
    if header.get(ANN_TIME) and when is None:
        raise NodewrightValidationError(source, f"{ANN_TIME}: not an RFC 3339 time: {header[ANN_TIME]!r}")
    return Snapshot(objects, when, karpenter, version, source, header.get(ANN_REDACTED) == "true",
                    unknown_fields(objects, [seen[identity(o)][0] for o in objects]))


def unknown_fields(objects: Sequence[Obj], wheres: Sequence[str]) -> tuple[Finding, ...]:
    """Fields of the snapshot's Pods and workloads that no Kubernetes v1.36 object has
    (:func:`nodewright.review.unknown_field_findings`, the check ``simulate -f`` makes), one warning per kind and
    field path (list indices aside) naming the first object (``wheres[i]``: ``file#items[i]``) and how many more
    have it. An API server serves only fields of its own version, so such a field is a newer server's (which the
    simulation ignores) or a hand edit; ``examples/snapshots`` and ``examples/whatif`` have none. About 12 us of CPU
    an object (50,000 Pods: 0.6 s, beside the 10 s of ``simulate --snapshot`` on them, docs/whatif.md "Scale")."""
    groups: dict[tuple[str, str], list[tuple[int, Finding]]] = {}
    for finding in unknown_field_findings(objects, "served"):
        number, rest = finding.path.removeprefix("documents[").split("]", 1)
        kind = str(objects[int(number)].get("kind"))
        groups.setdefault((kind, re.sub(r"\[\d+\]", "[]", rest)), []).append((int(number), finding))
    out = []
    for (kind, _), found in groups.items():
        index, first = found[0]
        more = f"; {len(found) - 1} more {kind} object(s) have it" if len(found) > 1 else ""
        out.append(Finding(wheres[index] + first.path.split("]", 1)[1], first.reason + more))
    return tuple(out)


def now_utc() -> float:
    """The current time, epoch seconds (the snapshot time of a live read)."""
    return dt.datetime.now(dt.UTC).timestamp()


def take_snapshot(kubeconfig: str | None, context: str | None = None, timeout: float = 30.0) -> tuple[list[Obj], float]:
    """Read the cluster of ``kubeconfig`` (``--kubeconfig``; else ``$KUBECONFIG``/in-cluster/``~/.kube/config``):
    (objects, epoch seconds the read started).

    Raises:
        NodewrightValidationError: no usable kubeconfig, or see :func:`collect`.
    """
    from nodewright.kube.rest import RestClient, load_api_client

    try:
        api = load_api_client(kubeconfig, context)
    except KubeError as err:
        raise NodewrightValidationError("--kubeconfig", str(err)) from None
    started = now_utc()
    try:
        return collect(RestClient(api, timeout=timeout)), started
    finally:
        api.close()


def cluster_role(name: str = "nodewright-snapshot") -> dict[str, Any]:
    """The read-only ClusterRole ``nodewright snapshot`` needs: ``list`` on every resource of
    :data:`SNAPSHOT_KINDS`, grouped by API group; nothing else (no Secrets, no ConfigMaps, no writes)."""
    groups: dict[str, list[str]] = {}
    for kind in SNAPSHOT_KINDS:
        groups.setdefault(kind.group, []).append(kind.plural)
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": [{"apiGroups": [group], "resources": sorted(plurals), "verbs": ["list"]}
                      for group, plurals in sorted(groups.items())]}


def summary_line(objects: Sequence[Obj]) -> str:
    """``"3 NodePools, 1 EC2NodeClass, ..."``: what a snapshot holds, by kind (file order)."""
    counts: dict[str, int] = {}
    for obj in sorted(objects, key=_sort_key):
        counts[str(obj.get("kind"))] = counts.get(str(obj.get("kind")), 0) + 1
    return ", ".join(f"{n} {kind}{'' if n == 1 else ('es' if kind.endswith('s') else 's')}"
                     for kind, n in counts.items())


def objects_by_kind(objects: Iterable[Obj]) -> Mapping[str, list[Obj]]:
    """Kind -> its objects, in order."""
    out: dict[str, list[Obj]] = {}
    for obj in objects:
        out.setdefault(str(obj.get("kind")), []).append(obj)
    return out
