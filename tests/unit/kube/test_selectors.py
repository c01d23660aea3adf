"""Label selectors, the one implementation (``nodewright.selectors``): spread/affinity, PDBs, evictions.

Semantics of ``k8s.io/apimachinery`` ``LabelSelectorAsSelector``: matchLabels AND matchExpressions; a None
selector selects nothing, ``{}`` everything; an unknown operator makes the selector invalid, so it selects
nothing (fail closed: a PodDisruptionBudget with a broken selector protects no pod by accident, and none of
its pods is counted).
"""

from __future__ import annotations

from nodewright.disruption.model import PDB
from nodewright.kube.pdb import blocking_budget, disruptions_allowed
from nodewright.scheduling import Pod
from nodewright.selectors import LabelSelector, selects

WEB = {"app": "web", "tier": "front"}


def test_match_labels_and_expressions_are_anded() -> None:
    sel = {"matchLabels": {"app": "web"},
           "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]},
                                {"key": "canary", "operator": "DoesNotExist"}]}
    assert selects(sel, WEB)
    assert not selects(sel, {**WEB, "canary": "yes"})
    assert not selects(sel, {"app": "web", "tier": "back"})
    assert selects({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["back"]}]}, {})
    assert selects({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, WEB)


def test_none_selects_nothing_and_empty_selects_everything() -> None:
    assert not selects(None, WEB)
    assert selects({}, WEB) and selects({}, {})
    assert LabelSelector.from_dict(None) is None


def test_unknown_operator_selects_nothing() -> None:
    assert not selects({"matchExpressions": [{"key": "app", "operator": "Matches", "values": ["web"]}]}, WEB)


def _pod(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}}


def test_pdbs_use_the_same_rule_in_the_api_server_and_in_disruption() -> None:
    broken = {"metadata": {"name": "broken", "namespace": "default"},
              "spec": {"maxUnavailable": 0, "selector": {"matchExpressions": [
                  {"key": "app", "operator": "Matches", "values": ["web"]}]}}}
    strict = {"metadata": {"name": "strict", "namespace": "default"},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}}
    pods = [_pod("a", WEB), _pod("b", WEB)]
    # The in-memory API server's eviction check and the disruption candidates agree, pod by pod.
    assert blocking_budget(pods[0], [broken], pods) is None
    assert blocking_budget(pods[0], [strict], pods) == "strict"
    assert disruptions_allowed(strict, pods) == 0
    web = Pod("default", "a", {"cpu": 100}, labels=WEB)
    assert not PDB("broken", "default", LabelSelector.from_dict(broken["spec"]["selector"]), 0).selects(web)
    assert PDB("strict", "default", LabelSelector.from_dict(strict["spec"]["selector"]), 0).selects(web)
