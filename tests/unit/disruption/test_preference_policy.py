"""Karpenter's disruption simulations follow ``PREFERENCE_POLICY`` as the provisioner does (``SimulateScheduling``
passes ``IgnorePreferences``): a pod that prefers its current, dearer type keeps its node under ``Respect`` (the
replacement would have to be that type again) and is consolidated onto the cheapest type under ``Ignore``."""

from __future__ import annotations

import random

from nodewright.api import labels as L
from nodewright.cloud.simulated import LatencyDistribution, SimulatedCloudProvider, SimulatedEC2
from nodewright.controllers.common import Context
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.disruption import decide
from nodewright.disruption.model import ClusterView
from nodewright.kube.memory import InMemoryCluster
from nodewright.metrics import Metrics
from nodewright.scheduling.pods import Affinity, NodeSelectorTerm, PreferredSchedulingTerm

from .helpers import LARGE, NOW, cluster, node, pod

PREFERS_LARGE = Affinity(node_preferred=(
    PreferredSchedulingTerm(10, NodeSelectorTerm(((L.INSTANCE_TYPE, "In", ("c.large",)),))),))


def _view(policy: str) -> ClusterView:
    return cluster([node("big", LARGE, [pod("web-0", 500, affinity=PREFERS_LARGE)])], preference_policy=policy)


def test_respect_keeps_the_preferred_type() -> None:
    assert decide(_view("Respect"), NOW) is None


def test_ignore_consolidates_onto_the_cheapest_type() -> None:
    d = decide(_view("Ignore"), NOW)
    assert d is not None and d.method == "single-node-consolidation"
    assert [r.instance_type.name for r in d.replacements] == ["c.small"]
    assert d.replacements[0].pods[0].key == "default/web-0"


def test_the_controller_passes_its_setting_to_the_disruption_simulations() -> None:
    def clock() -> float:
        return NOW

    cluster_ = InMemoryCluster(clock, seed=1)
    cloud = SimulatedCloudProvider(SimulatedEC2(clock, random.Random(0), LatencyDistribution(30.0, 30.0)), "us-east-1",
                                   ["us-east-1a"], lambda name: None)
    manager = ControllerManager(Context(cluster_, cloud, clock, Metrics(), "test"),
                                ControllerOptions(preference_policy="Ignore"))
    assert (manager.provisioner.preference_policy, manager.disruption.preference_policy) == ("Ignore", "Ignore")
