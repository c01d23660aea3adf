"""Issue 14, capacity reservations within one batch: ``simulate -f``, a scenario replay's first batch and the
controller's provisioner create identical NodeClaims when pods need more nodes than a reservation has room for.

Karpenter's provisioner (``ReservedOfferingModeStrict``) creates at most as many reserved NodeClaims as the
reservation can take, narrows each to ``capacity-type In [reserved]`` and ``capacity-reservation-id In [<id>]``,
and defers the other pods to a later batch instead of launching on-demand for them now
(:mod:`nodewright.scheduling.reservations`). Three 3-vCPU replicas each need their own m5.xlarge (3.92 vCPU
allocatable); the reservation has one instance left.
"""

from __future__ import annotations

import copy
from typing import Any

from nodewright.api import labels as L

from .test_one_path import NODECLASS, _controller, _nodepool, _scenario_first_batch, _simulate_f

CR = "cr-0123456789abcdef0"
RESERVED_CLASS = copy.deepcopy(NODECLASS)
RESERVED_CLASS["spec"]["capacityReservationSelectorTerms"] = [{"id": CR}]
RESERVED_CLASS["status"] = {"capacityReservations": [
    {"id": CR, "instanceType": "m5.xlarge", "availabilityZone": "us-east-1a", "ownerID": "123456789012",
     "instanceMatchCriteria": "targeted", "reservationType": "default", "state": "active",
     "availableInstanceCount": 1}]}
POOL = _nodepool("general", [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge"]},
                             {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["reserved", "on-demand"]}])
APP = {"app": "batch"}
JOBS = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "batch", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": APP}, "template": {"metadata": {"labels": APP}, "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "3", "memory": "4Gi"}}}]}}}}
DOCS = [RESERVED_CLASS, POOL, JOBS]


def _requirement(claim: dict[str, Any], key: str) -> dict[str, Any]:
    return next(r for r in claim["spec"]["requirements"] if r["key"] == key)


def test_one_reserved_nodeclaim_per_free_instance_on_every_path() -> None:
    decision, claims = _simulate_f(DOCS)
    assert _scenario_first_batch(DOCS) == claims
    assert _controller(DOCS) == claims
    (plan,) = decision["nodeclaims"]
    assert (plan["instance_type"], plan["capacity_type"], plan["zone"], len(plan["pods"])) == (
        "m5.xlarge", "reserved", "us-east-1a", 1)
    assert plan["labels"][L.CAPACITY_RESERVATION_ID] == CR
    assert [u["reason"] for u in decision["unschedulable"]] == [
        "one or more instance types with compatible reserved offerings are available, but could not be reserved; "
        "deferring the pod to a later scheduling decision"] * 2
    (claim,) = claims
    assert _requirement(claim, L.CAPACITY_TYPE) == {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["reserved"]}
    assert _requirement(claim, L.CAPACITY_RESERVATION_ID) == {"key": L.CAPACITY_RESERVATION_ID, "operator": "In",
                                                               "values": [CR]}


def test_without_room_in_the_reservation_every_pod_launches_on_demand() -> None:
    """Once EC2 reports the reservation full, the offering is gone and nothing is deferred (Karpenter's
    fallback in the next batch)."""
    full = copy.deepcopy(RESERVED_CLASS)
    full["status"]["capacityReservations"][0]["availableInstanceCount"] = 0
    docs = [full, POOL, JOBS]
    decision, claims = _simulate_f(docs)
    assert _scenario_first_batch(docs) == claims
    assert _controller(docs) == claims
    assert [(p["instance_type"], p["capacity_type"]) for p in decision["nodeclaims"]] == [("m5.xlarge", "on-demand")] * 3
    assert decision["unschedulable"] == []
