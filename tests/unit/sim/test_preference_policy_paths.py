"""Issue 14, Karpenter's ``PREFERENCE_POLICY``: ``simulate -f``, a scenario replay's first batch and the
controller's provisioner create identical NodeClaims under ``Respect`` (preferences treated as required, relaxed
one at a time) and under ``Ignore`` (preferred node affinity, preferred pod anti-affinity and ``ScheduleAnyway``
spreads dropped up front: kubernetes-sigs/karpenter ``scheduler.IgnorePreferences``, v1.14).

Four 500m replicas that prefer separate hosts, a zone spread and zone us-east-1c: respected, they spread over the
three zones on three m5.large; ignored, all four share one m5.xlarge, the cheapest node that holds them.
"""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api import labels as L
from nodewright.controllers.manager import ControllerOptions

from .test_one_path import NODECLASS, _controller, _nodepool, _scenario_first_batch, _simulate_f

POOL = _nodepool("general", [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["m5"]},
                             {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                             {"key": L.ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b", "us-east-1c"]}])
APP = {"app": "web"}
WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
       "spec": {"replicas": 4, "selector": {"matchLabels": APP}, "template": {"metadata": {"labels": APP}, "spec": {
           "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}],
           "affinity": {
               "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                   {"weight": 10, "preference": {"matchExpressions": [
                       {"key": L.ZONE, "operator": "In", "values": ["us-east-1c"]}]}}]},
               "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                   {"weight": 50, "podAffinityTerm": {"topologyKey": L.HOSTNAME,
                                                      "labelSelector": {"matchLabels": APP}}}]}},
           "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                                          "labelSelector": {"matchLabels": APP}}]}}}}
DOCS = [NODECLASS, POOL, WEB]


def _every_path(policy: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``simulate -f``'s decision and NodeClaims, after checking the scenario replay and the controller create the
    same ones. ``simulate`` and scenario replay read ``PREFERENCE_POLICY`` from the environment; the controller
    from its settings."""
    monkeypatch.setenv("PREFERENCE_POLICY", policy)
    decision, claims = _simulate_f(DOCS)
    assert _scenario_first_batch(DOCS) == claims
    assert _controller(DOCS, options=ControllerOptions(preference_policy=policy)) == claims
    return decision, claims


def test_respect_spreads_the_replicas_over_hosts_in_the_preferred_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    decision, claims = _every_path("Respect", monkeypatch)
    """Karpenter's relaxation order (preferred anti-affinity, then node affinity, then ScheduleAnyway spreads):
    the replicas that relax keep the zone spread, so the zones count 2/1/1 on three m5.large."""
    assert sorted((p["instance_type"], p["zone"], len(p["pods"])) for p in decision["nodeclaims"]) == [
        ("m5.large", "us-east-1a", 1), ("m5.large", "us-east-1b", 1), ("m5.large", "us-east-1c", 2)]
    assert len(claims) == 3


def test_ignore_packs_the_replicas_on_one_node(monkeypatch: pytest.MonkeyPatch) -> None:
    decision, claims = _every_path("Ignore", monkeypatch)
    (plan,) = decision["nodeclaims"]
    assert plan["instance_type"] == "m5.xlarge" and len(plan["pods"]) == 4
    assert plan["requests"]["cpu"] == 2000
    (claim,) = claims
    assert claim["labels"][L.NODEPOOL] == "general"

