"""The chart's RBAC rules as ``helm template`` renders them (``.tools/helm``), and RBAC's matching of them.

Rendered: the ``minimal`` values (``examples/values/minimal.yaml``, exactly what the stacks set) with
``controller.bindPods=true`` and ``controller.nominationHold=true`` (the default; the widest set of rules the chart grants without
``additionalClusterRoleRules``),
in the release namespace ``kube-system``. A ClusterRole's rules hold in every namespace and at the cluster scope;
a Role's only in its namespace (Kubernetes "Using RBAC Authorization": Role and ClusterRole, resourceNames).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .access import Access

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "kube-system"

#: Rule atoms (group, resource, verb) a suite run may leave unused, and why. Keep one line per atom; the
#: ``steer`` branch's pod nomination adds ``pods/status`` ``patch`` (issue #25).
EXPLAINED_UNUSED: dict[tuple[str, str, str], str] = {
    ("", "pods/status", "patch"): "pod nomination (issue #25) patches the nominated pods' status",
    ("", "pods", "patch"): ("the readiness hold (issue #25, controller.nominationHold, on by default) pins planned "
                            "pods with a toleration; the chart's ValidatingAdmissionPolicy <release>-pod-pin narrows "
                            "it to that"),
}


@dataclass(frozen=True)
class Rule:
    """One rule of one role: ``source`` (``ClusterRole/nodewright``, ``Role/nodewright``), ``namespace``
    (Role only), and the rule's lists."""

    source: str
    namespace: str
    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    def allows(self, access: Access) -> bool:
        """RBAC's match: namespace (Role), group, resource (``*``, exact, ``*/<sub>``), verb, resourceNames."""
        if self.namespace and access.namespace != self.namespace:
            return False
        if not ({"*", access.group} & set(self.api_groups)) or not ({"*", access.verb} & set(self.verbs)):
            return False
        sub = access.resource.partition("/")[2]
        if not ({"*", access.resource} & set(self.resources)) and not (sub and f"*/{sub}" in self.resources):
            return False
        return not self.resource_names or (access.name != "" and access.name in self.resource_names)

    def atoms(self) -> list[tuple[str, str, str]]:
        return [(g, res, v) for g in self.api_groups for res in self.resources for v in self.verbs]

    def __str__(self) -> str:
        names = f" resourceNames={list(self.resource_names)}" if self.resource_names else ""
        return f"{self.source}: {list(self.api_groups)} {list(self.resources)} {list(self.verbs)}{names}"


def _render_module() -> Any:
    """``scripts/render_chart.py`` as the chart tests load it (``tests/chart/chart_helpers.py``)."""
    chart_tests = str(ROOT / "tests" / "chart")
    if chart_tests not in sys.path:
        sys.path.insert(0, chart_tests)
    from chart_helpers import render_chart

    return render_chart


def rules_of(documents: list[dict[str, Any]]) -> list[Rule]:
    """The rules of every ClusterRole and Role in rendered ``documents``."""
    out = []
    for doc in documents:
        if doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        namespace = doc["metadata"].get("namespace", NAMESPACE) if doc["kind"] == "Role" else ""
        for rule in doc.get("rules") or []:
            out.append(Rule(f"{doc['kind']}/{doc['metadata']['name']}", namespace, tuple(rule.get("apiGroups", ())),
                            tuple(rule.get("resources", ())), tuple(rule.get("verbs", ())),
                            tuple(rule.get("resourceNames", ()))))
    return out


@lru_cache(maxsize=1)
def chart_rules() -> tuple[Rule, ...]:
    """The rendered chart's rules (see the module docstring).

    Raises:
        FileNotFoundError: helm is not installed (``make setup``).
    """
    render = _render_module()
    render.helm_binary()
    docs = render.documents(render.render(render.variants()["minimal"], include_crds=False,
                                          set_values=["controller.bindPods=true", "controller.nominationHold=true"],
                                          namespace=NAMESPACE))
    return tuple(rules_of(docs))


def judge(access: Access, rules: tuple[Rule, ...] | list[Rule]) -> tuple[bool, str]:
    """``(allowed, closest)``: whether a rule allows ``access``; for a denial, the rule that comes closest (same
    group and resource, or same resource) and why it does not apply. ``get`` of the non-resource URLs in
    :data:`.access.NON_RESOURCE_PATHS` is allowed by the cluster's default roles."""
    if access.resource.startswith("nonResourceURL:"):
        ok = access.verb == "get"
        return ok, "" if ok else f"only get is granted on {access.resource} by the default roles"
    if any(rule.allows(access) for rule in rules):
        return True, ""
    near = [r for r in rules if access.resource in r.resources and access.group in r.api_groups]
    if not near:
        return False, f"no rule names {access.group or 'core'}/{access.resource}"
    rule = near[0]
    if access.verb not in rule.verbs:
        why = f"verbs {list(rule.verbs)} lack {access.verb!r}"
    elif rule.resource_names:
        why = f"resourceNames {list(rule.resource_names)} do not include {access.name!r}"
    else:
        why = f"it applies only in namespace {rule.namespace}"
    return False, f"closest rule {rule} ({why})"


def unused(used: set[tuple[str, str, str]], rules: tuple[Rule, ...] | list[Rule]) -> list[str]:
    """``source group/resource verb`` of every rule atom no recorded access matched, explained ones marked."""
    out = []
    for rule in rules:
        for atom in rule.atoms():
            if atom in used:
                continue
            reason = EXPLAINED_UNUSED.get(atom)
            line = f"{rule.source}: {atom[2]} {atom[0] or 'core'}/{atom[1]}"
            out.append(f"{line} (expected: {reason})" if reason else line)
    return out
