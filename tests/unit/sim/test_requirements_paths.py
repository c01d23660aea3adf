"""Issue 14, requirements and labels: ``simulate -f``, a scenario replay's first batch and the controller's
provisioner create identical NodeClaims for ``minValues`` on any key (with Karpenter's ``MinValuesPolicy``), for
requirement keys that resolve to a label value, and for kubernetes.io-domain labels (Karpenter v1.9+).

c6g (Graviton) has no offering in us-east-1e in the bundled catalog, so a pool asking ``zone In [1a, 1b, 1e]``
with ``minValues: 3`` can only be met in two zones.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.controllers.manager import ControllerOptions
from nodewright.errors import NodewrightValidationError
from nodewright.sim.decision import decide

from .test_one_path import NODECLASS, REGION, _controller, _nodepool, _scenario_first_batch, _simulate_f

RELAXED = "karpenter.sh/nodeclaim-min-values-relaxed"
GRAVITON = {"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["c6g"]}
THREE_ZONES = {"key": L.ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b", "us-east-1e"], "minValues": 3}


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "900m", "memory": "1Gi"}}}],
                     **spec}}


def _every_path(docs: list[dict[str, Any]], policy: str = "Strict",
                monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The decision of ``simulate -f`` and the NodeClaims it created, after checking that the scenario replay
    and the controller create the same ones. ``simulate`` and scenario replay read ``MIN_VALUES_POLICY`` from the
    environment; the controller from its settings."""
    if monkeypatch is not None:
        monkeypatch.setenv("MIN_VALUES_POLICY", policy)
    decision, claims = _simulate_f(docs)
    assert _scenario_first_batch(docs) == claims
    assert _controller(docs, options=ControllerOptions(min_values_policy=policy)) == claims
    return decision, claims


def _requirement(claim: dict[str, Any], key: str) -> dict[str, Any]:
    return next(r for r in claim["spec"]["requirements"] if r["key"] == key)


def test_zone_min_values_strict_launches_nothing_and_says_why() -> None:
    docs = [NODECLASS, _nodepool("arm", [GRAVITON, THREE_ZONES]), _pod("p")]
    decision, claims = _every_path(docs)
    assert claims == [] and decision["nodeclaims"] == []
    (entry,) = decision["unschedulable"]
    assert entry["pod"] == "default/p"
    assert "minValues requirement is not met for label(s) [topology.kubernetes.io/zone (2 of 3 values)]" in entry["reason"]


def test_zone_min_values_best_effort_relaxes_and_annotates(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [NODECLASS, _nodepool("arm", [GRAVITON, THREE_ZONES]), _pod("p")]
    decision, claims = _every_path(docs, "BestEffort", monkeypatch)
    (plan,) = decision["nodeclaims"]
    # c6g.medium fits 900m/1Gi: with maxPods 110 on AL2023, kube-reserved memory still counts the 8 ENI-limited pods
    # (Karpenter UsesENILimitedMemoryOverhead), leaving 1392Mi.
    assert plan["instance_type"] == "c6g.medium" and plan["zone"] in ("us-east-1a", "us-east-1b")
    (claim,) = claims
    assert claim["annotations"][RELAXED] == "true"
    assert _requirement(claim, L.ZONE) == {"key": L.ZONE, "operator": "In", "minValues": 2,
                                           "values": ["us-east-1a", "us-east-1b", "us-east-1e"]}


def test_best_effort_relaxes_before_a_lower_weight_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Karpenter's order: the heavier NodePool relaxes its minValues before a lighter one is tried."""
    heavy = _nodepool("heavy", [GRAVITON, THREE_ZONES], weight=100)
    light = _nodepool("light", [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}], weight=10)
    decision, claims = _every_path([NODECLASS, heavy, light, _pod("p")], "BestEffort", monkeypatch)
    assert [plan["nodepool"] for plan in decision["nodeclaims"]] == ["heavy"]
    # Strict: the heavy pool cannot meet minValues, so the light one launches (no relaxation).
    decision, claims = _every_path([NODECLASS, heavy, light, _pod("p")], "Strict", monkeypatch)
    assert [(plan["nodepool"], plan["instance_type"]) for plan in decision["nodeclaims"]] == [("light", "m5.large")]
    assert claims[0]["annotations"][RELAXED] == "false"


def test_capacity_type_and_custom_key_min_values_are_met() -> None:
    pool = _nodepool("flex", [
        {"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "m5.xlarge"]},
        {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"], "minValues": 2},
        {"key": "team", "operator": "In", "values": ["a", "b"], "minValues": 2}])
    decision, claims = _every_path([NODECLASS, pool, _pod("p")])
    (plan,) = decision["nodeclaims"]
    assert plan["instance_type"] == "m5.large" and plan["capacity_type"] == "spot"
    (claim,) = claims
    assert claim["labels"]["team"] == "a" and claim["annotations"][RELAXED] == "false"
    assert _requirement(claim, "team") == {"key": "team", "operator": "In", "values": ["a", "b"], "minValues": 2}


def test_requirement_keys_that_resolve_label_the_nodeclaim() -> None:
    """Karpenter labels a NodeClaim for every custom key with a value: In, NotIn, Exists, Gt, Lt."""
    pool = _nodepool("labelled", [
        {"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]},
        {"key": "team", "operator": "Exists"}, {"key": "tier", "operator": "NotIn", "values": ["0", "1"]},
        {"key": "rank", "operator": "Gt", "values": ["5"]}, {"key": "size", "operator": "Lt", "values": ["3"]},
        {"key": "legacy", "operator": "DoesNotExist"}])
    pod = _pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "team", "operator": "Exists"}]}]}}})
    decision, claims = _every_path([NODECLASS, pool, pod])
    (plan,) = decision["nodeclaims"]
    expected = {"team": "0", "tier": "2", "rank": "6", "size": "0"}
    assert {k: plan["labels"].get(k) for k in (*expected, "legacy")} == {**expected, "legacy": None}
    (claim,) = claims
    assert {k: claim["labels"].get(k) for k in expected} == expected


def test_kubernetes_io_domain_labels_are_allowed() -> None:
    """Karpenter v1.9+: kubernetes.io and k8s.io keys (and subdomains) in a NodePool's labels and requirements."""
    pool = _nodepool("k8s", [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]},
                             {"key": "subdomain.k8s.io/test", "operator": "In", "values": ["v"]}])
    pool["spec"]["template"]["metadata"]["labels"]["kubernetes.io/test"] = "v"
    pod = _pod("p", nodeSelector={"kubernetes.io/test": "v", "subdomain.k8s.io/test": "v"})
    decision, claims = _every_path([NODECLASS, pool, pod])
    (claim,) = claims
    assert claim["labels"]["kubernetes.io/test"] == "v" and claim["labels"]["subdomain.k8s.io/test"] == "v"
    assert decision["nodeclaims"][0]["pods"] == ["default/p"]


def test_karpenter_domains_stay_restricted() -> None:
    pool = _nodepool("bad", [{"key": "karpenter.sh/custom", "operator": "In", "values": ["v"]}])
    with pytest.raises(NodewrightValidationError) as err:
        decide([copy.deepcopy(NODECLASS), pool, _pod("p")], REGION)
    assert "label domain 'karpenter.sh' is restricted" in str(err.value)


def test_best_effort_relaxes_min_values_before_a_preference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Karpenter relaxes a pod's preferences only when no NodePool can take it; under BestEffort a NodePool
    relaxes its minValues instead, so the preference (family c6g) holds. Under Strict the preference goes."""
    two_families = {"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["c6g", "m6g"], "minValues": 2}
    pool = _nodepool("arm", [two_families, {"key": L.ZONE, "operator": "In", "values": ["us-east-1a"]}])
    prefers_c6g = _pod("p", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": L.INSTANCE_FAMILY, "operator": "In",
                                                           "values": ["c6g"]}]}}]}})
    decision, claims = _every_path([NODECLASS, pool, prefers_c6g], "BestEffort", monkeypatch)
    (claim,) = claims
    assert claim["annotations"][RELAXED] == "true"
    assert _requirement(claim, L.INSTANCE_FAMILY) == {"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["c6g"],
                                                      "minValues": 1}
    decision, claims = _every_path([NODECLASS, pool, prefers_c6g], "Strict", monkeypatch)
    (claim,) = claims
    assert claim["annotations"][RELAXED] == "false"
    assert _requirement(claim, L.INSTANCE_FAMILY) == {"key": L.INSTANCE_FAMILY, "operator": "In",
                                                      "values": ["c6g", "m6g"], "minValues": 2}
    assert {t.split(".")[0] for t in decision["nodeclaims"][0]["instance_types"]} == {"c6g", "m6g"}
