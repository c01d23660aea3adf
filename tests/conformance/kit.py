"""Manifest builders and the one entry point of the conformance suite.

Every conformance test builds Kubernetes objects as plain dicts (NodePool ``karpenter.sh/v1``, EC2NodeClass,
Pod, DaemonSet, Node with bound pods, ...) and hands them to :func:`run`, which calls
:func:`nodewright.sim.decision.decide` -- the function behind ``nodewright simulate -f --output json`` -- and
wraps its JSON contract (DESIGN.md: ``nodeclaims``, ``existing``, ``unschedulable``) in :class:`Decision`.
That is the only place that knows the entry point: if it moves, only :func:`run` changes.

Karpenter's tests run against a fake cloud provider with made-up types and zones ``test-zone-1..3``. Here the
bundled us-east-1 catalog stands in: zones ``us-east-1a/b/c`` play ``test-zone-1/2/3`` and the default NodePool
is narrowed to a few real families (c5, m5 for amd64; c6g, m6g for arm64) so each decision stays fast.
"""

from __future__ import annotations

import itertools
import os
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from nodewright.cloud.catalog import load_instance_types
from nodewright.kube import resources as kinds
from nodewright.sim.decision import decide, decide_in_cluster

REGION = "us-east-1"
Z1, Z2, Z3 = "us-east-1a", "us-east-1b", "us-east-1c"
ZONES = (Z1, Z2, Z3)
#: Families the default NodePool allows: two amd64 (c5, m5) and two arm64 (c6g, m6g) ladders.
FAMILIES = ("c5", "m5", "c6g", "m6g")

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODEPOOL = "karpenter.sh/nodepool"
FAMILY = "karpenter.k8s.aws/instance-family"
CPU_LABEL = "karpenter.k8s.aws/instance-cpu"
SIZE = "karpenter.k8s.aws/instance-size"
CATEGORY = "karpenter.k8s.aws/instance-category"
GENERATION = "karpenter.k8s.aws/instance-generation"
INITIALIZED = "karpenter.sh/initialized"
REGISTERED = "karpenter.sh/registered"

#: Labels of the spread/affinity test pods (Karpenter's suite uses ``test: test``).
APP = {"test": "test"}


# --- entry point -------------------------------------------------------------------------------


def _flatten(docs: Iterable[Mapping[str, Any] | Iterable[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    flat: list[Mapping[str, Any]] = []
    for d in docs:
        if isinstance(d, Mapping):
            flat.append(d)
        else:
            flat.extend(d)
    return flat


def run(*docs: Mapping[str, Any] | Iterable[Mapping[str, Any]], region: str | None = REGION,
        settings: Mapping[str, str] | None = None) -> Decision:
    """One provisioning decision for ``docs`` (dicts or lists of dicts, flattened in order).

    ``settings`` are controller settings under Karpenter's environment variable names (``MIN_VALUES_POLICY``
    ...), set only for this call.
    """
    flat = _flatten(docs)
    saved = {k: os.environ.get(k) for k in settings or {}}
    try:
        os.environ.update(settings or {})
        return Decision(decide(flat, region=region), flat)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_created(*docs: Mapping[str, Any] | Iterable[Mapping[str, Any]],
                region: str | None = REGION) -> tuple[Decision, list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """As :func:`run`, plus what the decision left in ``simulate``'s in-memory cluster: the NodeClaim objects the
    provisioner created (metadata and spec, as the API server holds them) and the NodePools by name. For Karpenter
    tests that read the created NodeClaim rather than the placement."""
    flat = _flatten(docs)
    raw, cluster = decide_in_cluster(flat, region=region)
    pools = {p["metadata"]["name"]: dict(p) for p in cluster.list(kinds.NODEPOOLS)}
    return Decision(raw, flat), [dict(c) for c in cluster.list(kinds.NODECLAIMS)], pools


def expr(key: str, op: str, *values: Any) -> dict[str, Any]:
    """A node selector requirement ``{key, operator, values}`` (values as strings)."""
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = [str(v) for v in values]
    return out


def req(key: str, op: str, *values: Any, min_values: int | None = None) -> dict[str, Any]:
    """A NodePool requirement (a node selector requirement with optional ``minValues``)."""
    out = expr(key, op, *values)
    if min_values is not None:
        out["minValues"] = min_values
    return out


def taint(key: str, value: str | None = None, effect: str = "NoSchedule") -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "effect": effect}
    if value is not None:
        out["value"] = value
    return out


def toleration(key: str | None = None, value: str | None = None, effect: str | None = None,
               operator: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if key is not None:
        out["key"] = key
    if operator is not None:
        out["operator"] = operator
    elif value is None:
        out["operator"] = "Exists"
    else:
        out["operator"] = "Equal"
        out["value"] = value
    if effect is not None:
        out["effect"] = effect
    return out


# --- Karpenter objects -------------------------------------------------------------------------


def nodepool(
    name: str = "default",
    *,
    requirements: Sequence[Mapping[str, Any]] = (),
    families: Sequence[str] | None = FAMILIES,
    zones: Sequence[str] | None = ZONES,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    startup_taints: Sequence[Mapping[str, Any]] = (),
    weight: int | None = None,
    limits: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_class: str = "default",
    status: Mapping[str, Any] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """A ``karpenter.sh/v1`` NodePool. ``families``/``zones`` narrow it to the suite's catalog (None: no
    narrowing); ``requirements`` come after them."""
    reqs: list[Mapping[str, Any]] = []
    if families is not None:
        reqs.append(req(FAMILY, "In", *families))
    if zones is not None:
        reqs.append(req(ZONE, "In", *zones))
    reqs.extend(requirements)
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class},
        "requirements": reqs,
    }
    if taints:
        spec["taints"] = list(taints)
    if startup_taints:
        spec["startupTaints"] = list(startup_taints)
    template: dict[str, Any] = {"spec": spec}
    if labels:
        template["metadata"] = {"labels": dict(labels)}
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        meta["finalizers"] = ["karpenter.sh/termination"]
    doc: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta,
                           "spec": {"template": template}}
    if weight is not None:
        doc["spec"]["weight"] = weight
    if limits is not None:
        doc["spec"]["limits"] = dict(limits)
    if status is not None:
        doc["status"] = dict(status)
    return doc


def not_ready(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a NodePool) with ``status.conditions`` Ready=False."""
    doc["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "NodeClassNotReady",
                                     "message": "node class not ready", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    return doc


def ec2nodeclass(name: str = "default", **spec: Any) -> dict[str, Any]:
    """A ``karpenter.k8s.aws/v1`` EC2NodeClass (AL2023, discovery selectors); ``spec`` keys override."""
    body: dict[str, Any] = {
        "role": "KarpenterNodeRole-test",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
    }
    body.update(spec)
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": body}


# --- pods --------------------------------------------------------------------------------------

_names = itertools.count()


def resources(cpu: Any = None, memory: Any = None, *, limits: Mapping[str, Any] | None = None,
              **extra: Any) -> dict[str, Any]:
    """Container ``resources``: ``cpu``/``memory`` (and ``extra`` names, ``_`` for ``/``... as given) requests."""
    requests: dict[str, Any] = {}
    if cpu is not None:
        requests["cpu"] = str(cpu)
    if memory is not None:
        requests["memory"] = str(memory)
    for k, v in extra.items():
        requests[k] = str(v)
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = {k: str(v) for k, v in limits.items()}
    return out


def node_affinity(required: Sequence[Sequence[Mapping[str, Any]]] = (),
                  preferred: Sequence[tuple[int, Sequence[Mapping[str, Any]]]] = ()) -> dict[str, Any]:
    """``nodeAffinity``: ``required`` is a list of ORed terms (each a list of expressions); ``preferred`` is
    ``[(weight, expressions)]``."""
    out: dict[str, Any] = {}
    if required:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in required]}
    if preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": {"matchExpressions": list(t)}} for w, t in preferred]
    return out


def affinity_term(key: str, labels: Mapping[str, str] | None = None, *, namespaces: Sequence[str] | None = None,
                  namespace_selector: Mapping[str, Any] | None = None,
                  selector: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A pod (anti-)affinity term over ``topologyKey=key`` selecting pods with ``labels``."""
    out: dict[str, Any] = {"topologyKey": key}
    if selector is not None:
        out["labelSelector"] = dict(selector)
    elif labels is not None:
        out["labelSelector"] = {"matchLabels": dict(labels)}
    if namespaces is not None:
        out["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        out["namespaceSelector"] = dict(namespace_selector)
    return out


def spread(key: str, max_skew: int = 1, *, when: str = "DoNotSchedule", labels: Mapping[str, str] | None = APP,
           selector: Mapping[str, Any] | None = None, min_domains: int | None = None,
           match_label_keys: Sequence[str] | None = None, node_affinity_policy: str | None = None,
           node_taints_policy: str | None = None) -> dict[str, Any]:
    """A ``topologySpreadConstraints`` entry (``labels=None`` and no ``selector``: no labelSelector)."""
    out: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        out["labelSelector"] = dict(selector)
    elif labels is not None:
        out["labelSelector"] = {"matchLabels": dict(labels)}
    if min_domains is not None:
        out["minDomains"] = min_domains
    if match_label_keys:
        out["matchLabelKeys"] = list(match_label_keys)
    if node_affinity_policy:
        out["nodeAffinityPolicy"] = node_affinity_policy
    if node_taints_policy:
        out["nodeTaintsPolicy"] = node_taints_policy
    return out


def pod_spec(
    *,
    cpu: Any = None,
    memory: Any = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    node_selector: Mapping[str, str] | None = None,
    required: Sequence[Mapping[str, Any]] | None = None,
    required_terms: Sequence[Sequence[Mapping[str, Any]]] = (),
    preferred: Sequence[tuple[int, Sequence[Mapping[str, Any]]]] = (),
    prefer: Sequence[Mapping[str, Any]] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    spreads: Sequence[Mapping[str, Any]] = (),
    affinity: Sequence[Mapping[str, Any]] = (),
    anti_affinity: Sequence[Mapping[str, Any]] = (),
    preferred_affinity: Sequence[tuple[int, Mapping[str, Any]]] = (),
    preferred_anti_affinity: Sequence[tuple[int, Mapping[str, Any]]] = (),
    host_ports: Sequence[int] = (),
    init_containers: Sequence[Mapping[str, Any]] = (),
    containers: Sequence[Mapping[str, Any]] | None = None,
    node_name: str | None = None,
    volumes: Sequence[Mapping[str, Any]] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod spec. ``required`` is one required node-affinity term, ``required_terms`` several ORed ones,
    ``prefer`` one preferred term of weight 1."""
    res = resources(cpu, memory, **{k: v for k, v in (requests or {}).items()})
    if limits:
        res["limits"] = {k: str(v) for k, v in limits.items()}
    container: dict[str, Any] = {"name": "app", "image": "public.ecr.aws/docker/library/busybox:latest"}
    if res:
        container["resources"] = res
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
    spec: dict[str, Any] = {"containers": list(containers) if containers is not None else [container]}
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    terms = list(required_terms) + ([required] if required else [])
    prefs = list(preferred) + ([(1, prefer)] if prefer else [])
    aff: dict[str, Any] = {}
    if terms or prefs:
        aff["nodeAffinity"] = node_affinity(terms, prefs)
    if affinity or preferred_affinity:
        aff["podAffinity"] = _pod_affinity(affinity, preferred_affinity)
    if anti_affinity or preferred_anti_affinity:
        aff["podAntiAffinity"] = _pod_affinity(anti_affinity, preferred_anti_affinity)
    if aff:
        spec["affinity"] = aff
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if spreads:
        spec["topologySpreadConstraints"] = list(spreads)
    if node_name:
        spec["nodeName"] = node_name
    if volumes:
        spec["volumes"] = list(volumes)
    if extra:
        spec.update(extra)
    return spec


def _pod_affinity(required: Sequence[Mapping[str, Any]],
                  preferred: Sequence[tuple[int, Mapping[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if required:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = list(required)
    if preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "podAffinityTerm": dict(t)} for w, t in preferred]
    return out


def pod(
    name: str | None = None,
    *,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: tuple[str, str] | None = None,
    phase: str | None = None,
    deleting: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    """A ``v1/Pod`` (pending unless ``node_name``); ``spec`` keywords go to :func:`pod_spec`."""
    meta: dict[str, Any] = {"name": name or f"pod-{next(_names)}", "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1],
                                    "uid": f"uid-{owner[1]}", "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec(**spec)}
    if phase:
        doc["status"] = {"phase": phase}
    return doc


def pods(count: int, prefix: str | None = None, **kw: Any) -> list[dict[str, Any]]:
    """``count`` identical pods named ``<prefix>-<i>``."""
    base = prefix or f"pods{next(_names)}"
    return [pod(f"{base}-{i}", **kw) for i in range(count)]


def daemonset(name: str = "ds", *, namespace: str = "default", labels: Mapping[str, str] | None = None,
              **spec: Any) -> dict[str, Any]:
    """An ``apps/v1`` DaemonSet; ``spec`` keywords go to :func:`pod_spec` for its template."""
    tlabels = dict(labels or {"ds": name})
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": tlabels},
                 "template": {"metadata": {"labels": tlabels}, "spec": pod_spec(**spec)}},
    }


# --- nodes already in the cluster --------------------------------------------------------------


@cache
def _catalog() -> dict[str, Any]:
    return {t.name: t for t in load_instance_types(REGION)}


def allocatable_of(instance_type: str) -> dict[str, int]:
    """Catalog allocatable of a real type (cpu millicores, memory bytes, pods, ...)."""
    return dict(_catalog()[instance_type].allocatable())


def node(
    name: str,
    *,
    instance_type: str | None = "m5.xlarge",
    zone: str | None = Z1,
    capacity_type: str | None = "on-demand",
    nodepool_name: str | None = "default",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    allocatable: Mapping[str, Any] | None = None,
    initialized: bool = True,
    deleting: bool = False,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A ``v1/Node``. Managed by ``nodepool_name`` (None: not Karpenter's), with the well-known labels of
    ``instance_type`` and the catalog's allocatable unless ``allocatable`` is given. ``initialized=False`` makes
    it an in-flight node (no ``karpenter.sh/initialized``, not Ready)."""
    lab: dict[str, str] = {HOSTNAME: name, OS: "linux"}
    if instance_type:
        t = _catalog()[instance_type]
        lab.update({k: str(v) for k, v in t.labels.items()})
    if zone:
        lab[ZONE] = zone
        lab["topology.kubernetes.io/region"] = REGION
    if capacity_type:
        lab[CAPACITY_TYPE] = capacity_type
    if nodepool_name:
        lab[NODEPOOL] = nodepool_name
        lab[REGISTERED] = "true"
        if initialized:
            lab[INITIALIZED] = "true"
    lab.update(labels or {})
    if allocatable is None:
        alloc = _catalog()[instance_type].allocatable() if instance_type else {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}
        alloc_doc = {k: f"{v}m" if k == "cpu" else str(v) for k, v in alloc.items()}
    else:
        alloc_doc = {k: str(v) for k, v in allocatable.items()}
    meta: dict[str, Any] = {"name": name, "labels": lab}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        meta["finalizers"] = ["karpenter.sh/termination"]
    spec: dict[str, Any] = {"providerID": f"aws:///{zone or Z1}/i-{zlib.crc32(name.encode()):017x}"}
    if taints:
        spec["taints"] = list(taints)
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {"allocatable": alloc_doc, "capacity": alloc_doc}
    if initialized:
        status["conditions"] = [{"type": "Ready", "status": "True"}]
    else:
        status["conditions"] = [{"type": "Ready", "status": "False"}]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def pdb(name: str, labels: Mapping[str, str], *, max_unavailable: Any = None, min_available: Any = None,
        namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": dict(labels)}}
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if min_available is not None:
        spec["minAvailable"] = min_available
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def namespace(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def limit_range(name: str = "defaults", *, namespace: str = "default", default_request: Mapping[str, Any] | None = None,
                default: Mapping[str, Any] | None = None) -> dict[str, Any]:
    limit: dict[str, Any] = {"type": "Container"}
    if default_request:
        limit["defaultRequest"] = {k: str(v) for k, v in default_request.items()}
    if default:
        limit["default"] = {k: str(v) for k, v in default.items()}
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": namespace},
            "spec": {"limits": [limit]}}


def storage_class(name: str, *, zones: Sequence[str] | None = None, binding: str = "WaitForFirstConsumer",
                  provisioner: str = "ebs.csi.aws.com", default: bool = False,
                  allowed_topologies: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    doc: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
                           "provisioner": provisioner, "volumeBindingMode": binding}
    if allowed_topologies is not None:
        doc["allowedTopologies"] = list(allowed_topologies)
    elif zones:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}]
    return doc


def persistent_volume(name: str, *, zones: Sequence[str] | None = None,
                      terms: Sequence[Sequence[Mapping[str, Any]]] | None = None,
                      storage_class_name: str = "", driver: str = "ebs.csi.aws.com") -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                            "storageClassName": storage_class_name,
                            "csi": {"driver": driver, "volumeHandle": f"vol-{name}"}}
    if terms is None and zones:
        terms = [[expr(ZONE, "In", *zones)]]
    if terms:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def pvc(name: str, *, storage_class_name: str | None = None, volume_name: str | None = None,
        namespace: str = "default", phase: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if storage_class_name is not None:
        spec["storageClassName"] = storage_class_name
    if volume_name:
        spec["volumeName"] = volume_name
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                           "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    if volume_name:
        doc["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        doc["status"] = {"phase": phase or "Bound"}
    elif phase:
        doc["status"] = {"phase": phase}
    return doc


def claim_volume(claim: str) -> dict[str, Any]:
    """A pod volume mounting PVC ``claim``."""
    return {"name": claim, "persistentVolumeClaim": {"claimName": claim}}


# --- reading a decision ------------------------------------------------------------------------


@dataclass
class Decision:
    """The decision JSON plus the input documents it was made for.

    A pod's *node* is either ``("new", i)`` (the i-th new NodeClaim) or ``("existing", name)``.
    """

    raw: dict[str, Any]
    docs: list[Mapping[str, Any]]
    _where: dict[str, tuple[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for i, nc in enumerate(self.raw["nodeclaims"]):
            for key in nc["pods"]:
                self._where[key] = ("new", i)
        for entry in self.raw["existing"]:
            for key in entry["pods"]:
                self._where[key] = ("existing", entry["node"])

    # what was decided
    @property
    def claims(self) -> list[dict[str, Any]]:
        return list(self.raw["nodeclaims"])

    @property
    def unschedulable(self) -> dict[str, str]:
        return {u["pod"]: u["reason"] for u in self.raw["unschedulable"]}

    @staticmethod
    def key(p: Mapping[str, Any] | str) -> str:
        if isinstance(p, str):
            return p if "/" in p else f"default/{p}"
        meta = p["metadata"]
        return f"{meta.get('namespace') or 'default'}/{meta['name']}"

    def scheduled(self, p: Mapping[str, Any] | str) -> bool:
        return self.key(p) in self._where

    def where(self, p: Mapping[str, Any] | str) -> tuple[str, Any]:
        k = self.key(p)
        assert k in self._where, f"{k} was not scheduled: {self.unschedulable.get(k, 'not in the decision')}"
        return self._where[k]

    def claim_of(self, p: Mapping[str, Any] | str) -> dict[str, Any]:
        kind, ref = self.where(p)
        assert kind == "new", f"{self.key(p)} went to existing node {ref}, not a new NodeClaim"
        return dict(self.raw["nodeclaims"][ref])

    def labels_of(self, p: Mapping[str, Any] | str) -> dict[str, str]:
        """Labels of the node ``p`` lands on (a new NodeClaim's labels or the existing Node's)."""
        kind, ref = self.where(p)
        if kind == "new":
            return dict(self.raw["nodeclaims"][ref]["labels"])
        return dict(self._node_doc(ref)["metadata"].get("labels") or {})

    def same_node(self, *ps: Mapping[str, Any] | str) -> bool:
        return len({self.where(p) for p in ps}) == 1

    def node_count(self, ps: Iterable[Mapping[str, Any] | str]) -> int:
        return len({self.where(p) for p in ps})

    def _node_doc(self, name: str) -> Mapping[str, Any]:
        return next(d for d in self.docs if d.get("kind") == "Node" and d["metadata"]["name"] == name)

    def _pod_docs(self) -> dict[str, Mapping[str, Any]]:
        return {self.key(d): d for d in self.docs if d.get("kind") == "Pod"}

    def skew(self, key: str, labels: Mapping[str, str] | None = APP, namespace: str = "default") -> list[int]:
        """Pods matching ``labels`` (None: every pod) in ``namespace`` per ``key`` domain, bound before plus placed
        now, sorted descending -- Karpenter's ``ExpectSkew`` (terminal and terminating pods ignored)."""
        return sorted(self._counts(key, labels, namespace).values(), reverse=True)

    def _counts(self, key: str, labels: Mapping[str, str] | None, namespace: str = "default") -> Counter[str]:
        counts: Counter[str] = Counter()

        def selected(d: Mapping[str, Any]) -> bool:
            meta = d["metadata"]
            if (meta.get("namespace") or "default") != namespace or meta.get("deletionTimestamp"):
                return False
            if (d.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return False
            have = meta.get("labels") or {}
            return all(have.get(k) == v for k, v in (labels or {}).items())

        for k, d in self._pod_docs().items():
            if not selected(d):
                continue
            bound = (d.get("spec") or {}).get("nodeName")
            if bound:
                domain = self._domain(("existing", bound), key)
            elif k in self._where:
                domain = self._domain(self._where[k], key)
            else:
                continue
            if domain is not None:
                counts[domain] += 1
        return counts

    def _domain(self, where: tuple[str, Any], key: str) -> str | None:
        kind, ref = where
        if key == HOSTNAME:
            return f"{kind}:{ref}"
        if kind == "new":
            return self.raw["nodeclaims"][ref]["labels"].get(key)
        return (self._node_doc(ref)["metadata"].get("labels") or {}).get(key)

    def max_skew(self, key: str, labels: Mapping[str, str] | None = APP, domains: Sequence[str] = ()) -> int:
        """Largest minus smallest count over the domains holding a selected pod plus ``domains`` (counted as 0
        when empty) -- Karpenter's ``ExpectMaxSkew``."""
        counts = dict(self._counts(key, labels))
        for dom in domains:
            counts.setdefault(dom, 0)
        return max(counts.values()) - min(counts.values()) if counts else 0

    def as_cluster(self, prefix: str = "node") -> list[dict[str, Any]]:
        """The cluster after this decision, for the next round: every Node given (with its bound pods), each new
        NodeClaim as a registered Node named ``<prefix>-<i>`` with the catalog allocatable of its type, and every
        placed pod bound by ``spec.nodeName``. Unschedulable pods are dropped (Karpenter's tests delete or
        re-create them)."""
        out: list[dict[str, Any]] = []
        names: dict[int, str] = {}
        for i, nc in enumerate(self.raw["nodeclaims"]):
            names[i] = f"{prefix}-{i}"
            doc = node(names[i], instance_type=nc["instance_type"], zone=nc["zone"], capacity_type=nc["capacity_type"],
                       nodepool_name=nc["nodepool"], labels=nc["labels"], taints=nc["taints"])
            out.append(doc)
        for d in self.docs:
            kind = d.get("kind")
            if kind == "Node":
                out.append(dict(d))
            elif kind in ("Pod",):
                k = self.key(d)
                if (d.get("spec") or {}).get("nodeName"):
                    out.append(dict(d))
                elif k in self._where:
                    where_kind, ref = self._where[k]
                    bound = {**d, "spec": {**d["spec"], "nodeName": names[ref] if where_kind == "new" else ref}}
                    out.append(bound)
            elif kind in ("NodePool", "EC2NodeClass"):
                continue
            else:
                out.append(dict(d))
        return out

    def domains_of(self, key: str, ps: Iterable[Mapping[str, Any] | str]) -> list[str | None]:
        return [self._domain(self.where(p), key) for p in ps]


# --- catalog facts (to check a decision against the bundled EC2 data) ---------------------------


def type_labels(name: str) -> dict[str, str]:
    """The well-known labels of a real instance type (arch, os, family, size, cpu, ...)."""
    return {k: str(v) for k, v in _catalog()[name].labels.items()}


def has_offering(name: str, *, zone: str | None = None, capacity_type: str | None = None) -> bool:
    """Whether the type is offered in ``zone`` with ``capacity_type`` (None: any)."""
    return any((zone is None or o.zone == zone) and (capacity_type is None or o.capacity_type == capacity_type)
               for o in _catalog()[name].offerings)


def cheapest_price(*, families: Sequence[str] | None = FAMILIES, zones: Sequence[str] = ZONES,
                   capacity_types: Sequence[str] = ("spot", "on-demand"), labels: Mapping[str, str] | None = None,
                   needs: Mapping[str, int] | None = None) -> float:
    """USD/hour of the cheapest catalog offering among types of ``families`` carrying ``labels`` whose
    allocatable covers ``needs`` (cpu millicores, memory bytes, ...), in ``zones`` x ``capacity_types``."""
    best = float("inf")
    for t in _catalog().values():
        tl = type_labels(t.name)
        if families is not None and tl.get(FAMILY) not in families:
            continue
        if any(tl.get(k) != v for k, v in (labels or {}).items()):
            continue
        if any(t.allocatable().get(k, 0) < v for k, v in (needs or {}).items()):
            continue
        for o in t.offerings:
            if o.zone in zones and o.capacity_type in capacity_types:
                best = min(best, o.price)
    return best


def fits(claim: Mapping[str, Any]) -> bool:
    """Whether a NodeClaim's requests (pods + daemonset overhead) fit its most likely type's allocatable."""
    alloc = _catalog()[claim["instance_type"]].allocatable()
    return all(v <= alloc.get(k, 0) for k, v in claim["requests"].items())


GIB = 2**30
MIB = 2**20


# --- NodeOverlay (karpenter.sh/v1alpha1) ------------------------------------------------------------

#: Controller settings with Karpenter's NodeOverlay gate on (``run(..., settings=OVERLAYS_ON)``).
OVERLAYS_ON = {"FEATURE_GATES": "NodeOverlay=true"}


def nodeoverlay(name: str, *requirements: Mapping[str, Any], weight: int | None = None, price: str | None = None,
                price_adjustment: str | None = None, capacity: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``karpenter.sh/v1alpha1`` NodeOverlay (Karpenter's ``test.NodeOverlay``)."""
    spec: dict[str, Any] = {"requirements": [dict(r) for r in requirements]}
    for key, value in (("weight", weight), ("price", price), ("priceAdjustment", price_adjustment)):
        if value is not None:
            spec[key] = value
    if capacity is not None:
        spec["capacity"] = {k: str(v) for k, v in capacity.items()}
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": spec}


def overlay_status(*docs: Mapping[str, Any] | Iterable[Mapping[str, Any]],
                   region: str = REGION) -> dict[str, dict[str, tuple[str, str]]]:
    """NodeOverlay name -> condition type -> (status, reason) after one pass of the NodeOverlay status controller
    (gate on) over ``docs`` in an in-memory cluster with the simulated cloud of ``region``: Karpenter's
    ``ExpectReconciled(nodeOverlayController)`` then ``StatusConditions()``. NodeOverlays are stored as given (an
    invalid one is judged by the controller, as runtime validation)."""
    import random

    from nodewright.api.manifests import parse_documents
    from nodewright.cloud.catalog import region_zones
    from nodewright.cloud.overlay import OverlayStore
    from nodewright.cloud.simulated import LatencyDistribution, SimulatedCloudProvider, SimulatedEC2
    from nodewright.controllers.common import Context
    from nodewright.controllers.nodeoverlay import NodeOverlayStatusController
    from nodewright.kube.memory import InMemoryCluster
    from nodewright.metrics import Metrics
    from nodewright.sim.decision import load_cluster
    from nodewright.state.cluster import snapshot
    from nodewright.state.models import models_for

    flat = _flatten(docs)
    overlays = [d for d in flat if d.get("kind") == "NodeOverlay"]
    clock = lambda: 1_767_225_600.0  # noqa: E731  # 2026-01-01
    cluster = InMemoryCluster(clock, seed=0)
    load_cluster(parse_documents([dict(d) for d in flat if d.get("kind") != "NodeOverlay"]), cluster, warn=False)
    for overlay in overlays:
        cluster.create(kinds.NODEOVERLAYS, dict(overlay))
    ec2 = SimulatedEC2(clock, random.Random(0), LatencyDistribution(30.0, 30.0))
    cloud = SimulatedCloudProvider(ec2, region, region_zones(region),
                                   lambda name: cluster.get(kinds.EC2NODECLASSES, name), models_for(cluster).kubelet)
    ctx = Context(cluster, cloud, clock, Metrics(), "conformance", overlays=OverlayStore(enabled=True))
    NodeOverlayStatusController(ctx).reconcile(snapshot(cluster))
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for obj in cluster.list(kinds.NODEOVERLAYS):
        conds = (obj.get("status") or {}).get("conditions") or []
        out[obj["metadata"]["name"]] = {c["type"]: (c["status"], c["reason"]) for c in conds}
    return out
