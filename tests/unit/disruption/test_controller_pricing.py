"""The disruption controller with a PricingPolicy (read each pass, as ``nodewright run --pricing-policy`` reloads
it) and the NodePool minimum-saving annotations: ConsolidationSkipped events once per change. Real us-east-1
prices: c5.large $0.085/h, c5.xlarge $0.17/h, m6i.large $0.096/h."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.api.annotations import CONSOLIDATION_MINIMUM_SAVING, CONSOLIDATION_MINIMUM_SAVING_PERCENT
from nodewright.controllers.common import Context
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.controllers.termination import Terminator
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics
from nodewright.pricing import PricingPolicy

from .real import TYPES, policy
from .test_controller import NODEPOOL, Clock, add_node

OFFERED = {name: TYPES[name] for name in ("c5.large", "c5.xlarge", "m6i.large")}
M6I_PLAN = policy({"savingsPlans": [{"type": "EC2Instance", "family": "m6i", "region": "us-east-1",
                                     "commitmentUsdPerHour": 0.1, "discountPercent": 40}]})


class RealCloud:
    name = "test"

    def get_instance_types(self, nodepool: Any) -> list[Any]:
        return list(OFFERED.values())

    def is_drifted(self, nodeclaim: Any) -> str | None:
        return None


class Env:
    def __init__(self) -> None:
        self.clock = Clock()
        self.cluster = InMemoryCluster(self.clock, seed=3)
        self.cluster.create(r.NODEPOOLS, NODEPOOL)
        self.policy: PricingPolicy | None = None
        ctx = Context(self.cluster, RealCloud(), self.clock, Metrics(), "demo")  # type: ignore[arg-type]
        self.controller = DisruptionController(ctx, Terminator(ctx), pricing_policy=lambda: self.policy)
        add_node(self.cluster, "a", "c5.xlarge", [1500], types=OFFERED)

    def annotate(self, annotations: dict[str, str | None]) -> None:
        self.cluster.patch(r.NODEPOOLS, "default", {"metadata": {"annotations": annotations}})

    def skipped(self) -> list[tuple[str, str, str]]:
        return [(e["kind"], e["name"], e["message"]) for e in self.cluster.events if e["reason"] == "ConsolidationSkipped"]

    def next_pass(self) -> None:
        self.clock.now += 10
        self.controller.reconcile()


@pytest.fixture
def env() -> Env:
    return Env()


def test_the_policy_in_force_decides_and_revalidates(env: Env) -> None:
    env.policy = M6I_PLAN
    env.controller.reconcile()
    command = env.controller.command
    assert command is not None
    assert command.decision.message() == "Consolidating 1 node into 1 m6i.large, saving $0.17/h at effective prices"
    # The policy file is replaced by one without the plan before validation: at list prices the move would only
    # save $0.085/h with a c5.large, less than decided, so it is dropped.
    env.policy = None
    env.clock.now += 15
    env.controller.reconcile()
    assert env.controller.command is None
    env.next_pass()
    command = env.controller.command
    assert command is not None and command.decision.message() == "Consolidating 1 node into 1 c5.large, saving $0.09/h"


def test_a_move_below_the_minimum_is_skipped_with_one_event_per_change(env: Env) -> None:
    env.annotate({CONSOLIDATION_MINIMUM_SAVING: "0.1"})
    env.controller.reconcile()
    assert env.controller.command is None
    first = ("NodePool", "default",
             "Not consolidating 1 node (a) into 1 c5.large: it would save $0.0850/h, below the minimum $0.1000/h")
    assert env.skipped() == [first]
    env.next_pass()
    env.next_pass()
    assert env.skipped() == [first]  # the same skip: no new event
    env.annotate({CONSOLIDATION_MINIMUM_SAVING: None, CONSOLIDATION_MINIMUM_SAVING_PERCENT: "60"})
    env.next_pass()
    assert env.skipped() == [first, (
        "NodePool", "default", "Not consolidating 1 node (a) into 1 c5.large: it would save 50% of the $0.1700/h the "
        "nodes it removes cost, below the minimum 60%")]
    # A full search that finds no skip (consolidation switched off) forgets it: when it comes back it is
    # reported again.
    env.cluster.patch(r.NODEPOOLS, "default", {"spec": {"disruption": {"consolidationPolicy": "WhenEmpty"}}})
    env.next_pass()
    assert env.controller.command is None and len(env.skipped()) == 2
    env.cluster.patch(r.NODEPOOLS, "default",
                      {"spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"}}})
    env.next_pass()
    assert len(env.skipped()) == 3 and env.skipped()[-1] == env.skipped()[-2]
    # Under the Savings Plan the move saves all $0.17/h (an m6i.large under the commitment): taken.
    env.policy = M6I_PLAN
    env.next_pass()
    command = env.controller.command
    assert command is not None and command.decision.replacements[0].instance_type.name == "m6i.large"
    assert len(env.skipped()) == 3


def test_the_manager_gives_disruption_the_provisioners_policy() -> None:
    clock = Clock()
    cluster = InMemoryCluster(clock, seed=3)
    ctx = Context(cluster, RealCloud(), clock, Metrics(), "demo")  # type: ignore[arg-type]

    def current() -> PricingPolicy:
        return M6I_PLAN

    manager = ControllerManager(ctx, ControllerOptions(pricing_policy=current))
    assert manager.disruption.pricing_policy is current is manager.provisioner.pricing_policy
    assert manager.disruption.decision_options().consolidation.pricing is M6I_PLAN
