"""Cluster-default pod topology spread (Karpenter main #3205, RFC #3183 "Default Pod Topology Spread Awareness").

kube-scheduler's ``PodTopologySpread`` plugin gives every pod that declares no ``topologySpreadConstraints`` of
its own the cluster's default constraints. Karpenter main mirrors the plugin when told the defaults through
``--scheduler-config`` / ``SCHEDULER_CONFIG``: a YAML or JSON document (inline, not a file path) of its own shape::

    podTopologySpread:
      defaultConstraints:          # kube-scheduler's PodTopologySpread args, pasted as they are
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: DoNotSchedule
      defaultingType: List         # nodewright's addition (kube-scheduler's field): List (default) or System

Rules (Karpenter main ``pkg/operator/options/options.go`` ``ParseSchedulerConfiguration`` and
``pkg/controllers/provisioning/scheduling/defaultconstraints.go``):

* unset or empty: no defaults (today's behaviour). Unknown fields are errors.
* each constraint as kube-scheduler's ``ValidatePodTopologySpreadArgs``: ``maxSkew`` > 0, ``topologyKey`` a
  label name, ``whenUnsatisfiable`` DoNotSchedule or ScheduleAnyway, no ``labelSelector`` and no
  ``matchLabelKeys`` (the selector is deduced per pod), no two with the same (topologyKey, whenUnsatisfiable).
* ``defaultingType: System`` (nodewright only; Karpenter main has no such field and leaves kube-scheduler's
  built-in defaults as an open question of the RFC) applies kube-scheduler's built-in set instead:
  ``kubernetes.io/hostname`` maxSkew 3 and ``topology.kubernetes.io/zone`` maxSkew 5, both ScheduleAnyway
  (:data:`SYSTEM_DEFAULT_CONSTRAINTS`); ``defaultConstraints`` must then be empty, as kube-scheduler requires.
* all or nothing: a pod with any constraint of its own keeps exactly its own.
* the selector of every injected constraint is deduced per pod as kube-scheduler's ``helper.DefaultSelector``:
  the ``spec.selector`` of every Service in the pod's namespace that selects the pod (equality labels, a later
  Service winning a shared key), then the pod's controller if it is a ReplicationController (its selector
  overwrites those labels) or a ReplicaSet or StatefulSet (its selector is ANDed on). A Service with no selector
  contributes nothing; a controller that is missing contributes nothing. No selector, no defaults (an empty one
  would count every pod of the namespace).
* ``simulate -f`` has no ReplicaSets: a Deployment's pods name the Deployment as their controller, and the
  Deployment's selector stands for its ReplicaSet's (which adds only ``pod-template-hash``).

The constraints are written into the pod spec before conversion (:meth:`ClusterModels._build_pod
<nodewright.state.models.ClusterModels>`), so they are indistinguishable from the pod's own afterwards:
ScheduleAnyway ones are preferences relaxed as any other (``PREFERENCE_POLICY``), and the simulated kube-scheduler
enforces them too. Nothing is written back to the API server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from nodewright.api import labels as wk
from nodewright.api.manifests import SAFE_LOADER
from nodewright.errors import NodewrightValidationError
from nodewright.kube.objects import Obj
from nodewright.scheduling.pods import spread_from_dict

#: kube-scheduler's built-in default constraints (``defaultingType: System``; ``systemDefaultConstraints`` in
#: ``pkg/scheduler/framework/plugins/podtopologyspread``).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[dict[str, Any], ...] = (
    {"maxSkew": 3, "topologyKey": wk.HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"},
    {"maxSkew": 5, "topologyKey": wk.ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
)
DEFAULTING_TYPES = ("List", "System")
_CONSTRAINT_FIELDS = frozenset({"maxSkew", "topologyKey", "whenUnsatisfiable", "minDomains", "nodeAffinityPolicy",
                                "nodeTaintsPolicy", "labelSelector", "matchLabelKeys"})
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
#: The controller kinds (apiVersion, kind) whose selectors kube-scheduler's DefaultSelector reads; Deployment
#: only for ``simulate -f`` (see module docstring).
OWNER_KINDS = {("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet"),
               ("apps/v1", "Deployment")}


@dataclass(frozen=True)
class SchedulerConfig:
    """The parsed ``SCHEDULER_CONFIG``.

    Attributes:
        default_constraints: ``podTopologySpread.defaultConstraints`` as given (JSON objects, no selector).
        defaulting_type: ``List`` (the constraints above) or ``System`` (:data:`SYSTEM_DEFAULT_CONSTRAINTS`).
    """

    default_constraints: tuple[Mapping[str, Any], ...] = ()
    defaulting_type: str = "List"

    @property
    def constraints(self) -> tuple[Mapping[str, Any], ...]:
        """The constraints a pod without its own gets (selector still to deduce); () = no defaulting."""
        return SYSTEM_DEFAULT_CONSTRAINTS if self.defaulting_type == "System" else self.default_constraints

    def key(self) -> str:
        """A stable text of the effective constraints (cache key)."""
        return json.dumps(self.constraints, sort_keys=True)


def parse_scheduler_config(text: str, name: str = "SCHEDULER_CONFIG") -> SchedulerConfig | None:
    """``SCHEDULER_CONFIG`` (YAML or JSON) as a :class:`SchedulerConfig`; None when empty.

    Raises:
        NodewrightValidationError: path ``<name> podTopologySpread...`` naming the field and why (bad YAML,
            unknown field, or a constraint kube-scheduler would refuse).
    """
    if not text or not text.strip():
        return None

    def bad(path: str, reason: str) -> NodewrightValidationError:
        return NodewrightValidationError(f"{name} {path}".rstrip(), reason)

    try:
        doc = yaml.load(text, Loader=SAFE_LOADER)  # safe: api.manifests
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise bad("", f"not valid YAML or JSON{where}: {getattr(err, 'problem', None) or err}") from None
    if doc is None:
        return None
    if not isinstance(doc, Mapping):
        raise bad("", f"expected a mapping with podTopologySpread, got {type(doc).__name__}")
    _only(doc, {"podTopologySpread"}, "", bad)
    spread = doc.get("podTopologySpread")
    if spread is None:
        return SchedulerConfig()
    if not isinstance(spread, Mapping):
        raise bad("podTopologySpread", "expected a mapping with defaultConstraints")
    _only(spread, {"defaultConstraints", "defaultingType"}, "podTopologySpread.", bad)
    defaulting = spread.get("defaultingType") or "List"
    if defaulting not in DEFAULTING_TYPES:
        raise bad("podTopologySpread.defaultingType", f"{defaulting!r} is not List or System")
    raw = spread.get("defaultConstraints") or []
    if not isinstance(raw, list):
        raise bad("podTopologySpread.defaultConstraints", "expected a list of topology spread constraints")
    if defaulting == "System" and raw:
        raise bad("podTopologySpread.defaultConstraints",
                  "must be empty when defaultingType is System (kube-scheduler's rule)")
    seen: dict[tuple[str, str], int] = {}
    for i, tsc in enumerate(raw):
        path = f"podTopologySpread.defaultConstraints[{i}]"
        if not isinstance(tsc, Mapping):
            raise bad(path, "expected a topology spread constraint mapping")
        _only(tsc, _CONSTRAINT_FIELDS, path + ".", bad)
        if "labelSelector" in tsc:
            raise bad(f"{path}.labelSelector", "must not be set: the selector is deduced for each pod")
        if "matchLabelKeys" in tsc:
            raise bad(f"{path}.matchLabelKeys", "must not be set: it has no effect on default constraints")
        try:
            spread_from_dict(tsc, {}, path)
        except NodewrightValidationError as err:
            raise bad(err.path, err.reason) from None
        key = str(tsc.get("topologyKey") or "")
        if not _QUALIFIED.match(key):
            raise bad(f"{path}.topologyKey", f"{key!r} is not a valid label name")
        if "whenUnsatisfiable" not in tsc:
            raise bad(f"{path}.whenUnsatisfiable", "required: DoNotSchedule or ScheduleAnyway")
        pair = (key, str(tsc["whenUnsatisfiable"]))
        if pair in seen:
            raise bad(path, f"duplicates defaultConstraints[{seen[pair]}] ({pair[0]}, {pair[1]})")
        seen[pair] = i
    return SchedulerConfig(tuple(dict(t) for t in raw), defaulting)


def _only(doc: Mapping[str, Any], allowed: Iterable[str], prefix: str, bad: Any) -> None:
    allowed = set(allowed)
    for k in doc:
        if k not in allowed:
            raise bad(f"{prefix}{k}", f"unknown field; expected one of {', '.join(sorted(allowed))}")


@dataclass(frozen=True)
class _Owner:
    labels: tuple[tuple[str, str], ...] = ()  # a ReplicationController's selector (overwrites Service labels)
    expressions: tuple[dict[str, Any], ...] = ()  # a ReplicaSet/StatefulSet selector as requirements (ANDed)


def _requirements(selector: Mapping[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """A LabelSelector as matchExpressions (each matchLabels entry a one-value ``In``)."""
    if not isinstance(selector, Mapping):
        return ()
    out = [{"key": str(k), "operator": "In", "values": [str(v)]} for k, v in sorted((selector.get("matchLabels") or {}).items())]
    out += [{"key": str(e.get("key", "")), "operator": str(e.get("operator", "")),
             "values": [str(v) for v in e.get("values") or []]} for e in selector.get("matchExpressions") or []]
    return tuple(out)


@dataclass
class SpreadSelectors:
    """What deduces a pod's default selector: Service selectors by namespace and controller selectors by
    ``(namespace, apiVersion, kind, name)``; built by :meth:`build` from the cluster's objects."""

    services: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    owners: dict[tuple[str, str, str, str], _Owner] = field(default_factory=dict)

    @classmethod
    def build(cls, services: Sequence[Obj], controllers: Iterable[Obj]) -> SpreadSelectors:
        """From Service objects and ReplicationController/ReplicaSet/StatefulSet/Deployment objects."""
        out = cls()
        for svc in services:
            meta = svc.get("metadata") or {}
            selector = (svc.get("spec") or {}).get("selector")
            if selector is None:  # a nil selector selects no pods (headless or external services)
                continue
            ns = str(meta.get("namespace") or "default")
            out.services.setdefault(ns, []).append({str(k): str(v) for k, v in selector.items()})
        for obj in controllers:
            meta = obj.get("metadata") or {}
            kind, api = str(obj.get("kind") or ""), str(obj.get("apiVersion") or "")
            if (api, kind) not in OWNER_KINDS:
                continue
            selector = (obj.get("spec") or {}).get("selector")
            if kind == "ReplicationController":
                owner = _Owner(labels=tuple(sorted((str(k), str(v)) for k, v in (selector or {}).items())))
            else:
                owner = _Owner(expressions=_requirements(selector))
            out.owners[(str(meta.get("namespace") or "default"), api, kind, str(meta.get("name") or ""))] = owner
        return out

    def key(self) -> str:
        """A stable text of every selector (cache key: a ReplicaSet's status changes often, its selector not)."""
        owners = sorted((k, o.labels, json.dumps(o.expressions, sort_keys=True)) for k, o in self.owners.items())
        return json.dumps([sorted((ns, sorted(map(sorted, (s.items() for s in sel)))) for ns, sel in self.services.items()),
                           owners], sort_keys=True, default=str)

    def selector(self, pod: Obj) -> dict[str, Any] | None:
        """The LabelSelector dict kube-scheduler's ``DefaultSelector`` deduces for ``pod``; None when empty."""
        meta = pod.get("metadata") or {}
        ns = str(meta.get("namespace") or "default")
        labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
        match_labels: dict[str, str] = {}
        for selector in self.services.get(ns, ()):
            if all(labels.get(k) == v for k, v in selector.items()):
                match_labels.update(selector)
        expressions: list[dict[str, Any]] = []
        for ref in meta.get("ownerReferences") or []:
            if not ref.get("controller"):
                continue
            owner = self.owners.get((ns, str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""),
                                     str(ref.get("name") or "")))
            if owner is not None:
                match_labels.update(owner.labels)
                expressions.extend(owner.expressions)
            break
        if not match_labels and not expressions:
            return None
        out: dict[str, Any] = {}
        if match_labels:
            out["matchLabels"] = match_labels
        if expressions:
            out["matchExpressions"] = [dict(e) for e in expressions]
        return out


def default_spread(pod: Obj, spec: Mapping[str, Any], config: SchedulerConfig | None,
                   selectors: SpreadSelectors) -> Mapping[str, Any]:
    """``spec`` with the cluster-default constraints when ``pod`` declares none and a selector deduces; else
    ``spec`` itself (unchanged object)."""
    if config is None or not config.constraints or spec.get("topologySpreadConstraints"):
        return spec
    selector = selectors.selector(pod)
    if selector is None:
        return spec
    constraints = [{**c, "labelSelector": selector} for c in config.constraints]
    return {**spec, "topologySpreadConstraints": constraints}
