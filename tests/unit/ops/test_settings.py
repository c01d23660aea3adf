"""Karpenter v1.14 settings: feature gates with Karpenter's names and defaults, the settings Karpenter users
set (honoured or refused with a reason), the leader-election Lease name."""

from __future__ import annotations

from typing import Any

import pytest

from nodewright.errors import NodewrightValidationError
from nodewright.settings import (
    FeatureGates,
    feature_gates,
    load_settings,
    min_values_policy,
    parse_feature_gates,
    preference_policy,
)

BASE = {"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1"}


def test_defaults_are_karpenters() -> None:
    s = load_settings(BASE)
    # Karpenter v1.14: NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,
    # StaticCapacity=false,CapacityBuffer=false (pkg/operator/options/options.go).
    assert s.feature_gates == FeatureGates(node_repair=False, reserved_capacity=True,
                                           spot_to_spot_consolidation=False, node_overlay=False,
                                           static_capacity=False, capacity_buffer=False)
    assert (s.vm_memory_overhead_percent, s.reserved_enis, s.isolated_vpc, s.eks_control_plane) == (0.075, 0, False,
                                                                                                  False)
    assert (s.preference_policy, s.min_values_policy, s.log_output_paths) == ("Respect", "Strict", ("stdout",))
    # Our own Lease, so nodewright and Karpenter side by side do not compete for karpenter-leader-election.
    assert (s.leader_election_name, s.leader_election_namespace) == ("nodewright-leader-election", "kube-system")


def test_feature_gates_parse_like_karpenter() -> None:
    assert parse_feature_gates("SpotToSpotConsolidation=true").spot_to_spot_consolidation is True
    gates = parse_feature_gates(" SpotToSpotConsolidation=True , ReservedCapacity=0,NodeRepair=false ")
    assert (gates.spot_to_spot_consolidation, gates.reserved_capacity, gates.node_repair) == (True, False, False)
    assert load_settings({**BASE, "FEATURE_GATES": "SpotToSpotConsolidation=true"}).feature_gates \
        .spot_to_spot_consolidation is True
    assert parse_feature_gates("StaticCapacity=true").static_capacity is True  # static NodePools are honoured
    assert parse_feature_gates("NodeRepair=true").node_repair is True  # the node health controller runs
    aws = load_settings({**BASE, "AWS_FEATURE_GATES": "RebootForRepair=true"}).aws_feature_gates
    assert (aws.reboot_for_repair, aws.node_class_cel) == (True, False)
    assert load_settings({**BASE, "FEATURE_GATES": "CapacityBuffer=true"}).feature_gates.capacity_buffer is True
    assert parse_feature_gates("NodeOverlay=true").node_overlay is True  # nodewright.cloud.overlay
    assert feature_gates({"FEATURE_GATES": "NodeOverlay=true"}).node_overlay and not feature_gates({}).node_overlay


@pytest.mark.parametrize(("text", "reason"), [
    ("SpotToSpot=true", "FEATURE_GATES: unknown feature gate 'SpotToSpot'; known gates: CapacityBuffer, NodeOverlay, "
                        "NodeRepair, ReservedCapacity, SpotToSpotConsolidation, StaticCapacity"),
    ("Drift=true", "FEATURE_GATES: feature gate 'Drift' was removed: drift is always on since Karpenter v1"),
    ("SpotToSpotConsolidation", "FEATURE_GATES: 'SpotToSpotConsolidation' is not Gate=true or Gate=false"),
    ("SpotToSpotConsolidation=yes", "FEATURE_GATES: 'SpotToSpotConsolidation=yes' is not Gate=true or Gate=false"),
])
def test_bad_feature_gates_are_one_line_errors(text: str, reason: str) -> None:
    with pytest.raises(NodewrightValidationError) as err:
        load_settings({**BASE, "FEATURE_GATES": text})
    assert str(err.value).startswith(reason)


def test_honoured_settings_parse() -> None:
    s = load_settings({**BASE, "VM_MEMORY_OVERHEAD_PERCENT": "0.1", "RESERVED_ENIS": "1", "ISOLATED_VPC": "true",
                       "EKS_CONTROL_PLANE": "true", "LOG_OUTPUT_PATHS": "stdout,/tmp/nodewright.log",
                       "PREFERENCE_POLICY": "Respect", "MIN_VALUES_POLICY": "Strict"})
    assert (s.vm_memory_overhead_percent, s.reserved_enis, s.isolated_vpc, s.eks_control_plane) == (0.1, 1, True, True)
    assert s.log_output_paths == ("stdout", "/tmp/nodewright.log")


@pytest.mark.parametrize(("env", "field", "reader", "value", "default", "bad", "choices"), [
    ("MIN_VALUES_POLICY", "min_values_policy", min_values_policy, "BestEffort", "Strict", "loose", "Strict, BestEffort"),
    ("PREFERENCE_POLICY", "preference_policy", preference_policy, "Ignore", "Respect", "Prefer", "Respect, Ignore"),
])
def test_scheduling_policies_are_accepted(env: str, field: str, reader: Any, value: str, default: str, bad: str,
                                          choices: str) -> None:
    """Karpenter's MinValuesPolicy (BestEffort) and PreferencePolicy (Ignore) are implemented (issue 14); simulate
    reads the same variables."""
    assert getattr(load_settings({**BASE, env: value}), field) == value
    assert reader({env: value}) == value
    assert reader({}) == default
    with pytest.raises(NodewrightValidationError) as err:
        reader({env: bad})
    assert str(err.value) == f"{env}: {bad!r} is not one of {choices}"


@pytest.mark.parametrize(("env", "message"), [
    ({"VM_MEMORY_OVERHEAD_PERCENT": "7.5"}, "VM_MEMORY_OVERHEAD_PERCENT: 7.5 is not a fraction in [0, 1)"),
    ({"VM_MEMORY_OVERHEAD_PERCENT": "lots"}, "VM_MEMORY_OVERHEAD_PERCENT: 'lots' is not a number"),
    ({"RESERVED_ENIS": "-1"}, "RESERVED_ENIS: -1 is negative"),
    ({"PREFERENCE_POLICY": "ignore"}, "PREFERENCE_POLICY: 'ignore' is not one of Respect, Ignore"),
    ({"MIN_VALUES_POLICY": "Loose"}, "MIN_VALUES_POLICY: 'Loose' is not one of Strict, BestEffort"),
])
def test_refused_settings_say_why(env: dict[str, str], message: str) -> None:
    with pytest.raises(NodewrightValidationError) as err:
        load_settings({**BASE, **env})
    assert str(err.value).startswith(message)


def test_leader_election_names_karpenters_variables_win_over_aliases() -> None:
    s = load_settings({**BASE, "LEADER_ELECTION_NAME": "nw", "LEADER_ELECTION_NAMESPACE": "ops",
                       "SYSTEM_NAMESPACE": "kube-system", "NODEWRIGHT_LEADER_ELECTION_NAME": "old"})
    assert (s.leader_election_name, s.leader_election_namespace) == ("nw", "ops")
    s = load_settings({**BASE, "SYSTEM_NAMESPACE": "karpenter", "NODEWRIGHT_LEADER_ELECTION_NAME": "old"})
    assert (s.leader_election_name, s.leader_election_namespace) == ("old", "karpenter")
    assert load_settings(BASE, {"leader_election_name": "flag"}).leader_election_name == "flag"


def test_overhead_settings_reach_the_aws_providers_allocatable_maths() -> None:
    from nodewright.api.manifests import parse_ec2nodeclass
    from nodewright.cloud.aws.clients import AWSClients, ClientSettings
    from nodewright.cloud.aws.provider import AWSCloudProvider, AWSProviderSettings

    nodeclass = parse_ec2nodeclass({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"k": "v"}}], "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
                 "kubelet": {"maxPods": 50}}})
    clients = AWSClients(ClientSettings(region="us-east-1"))  # clients are created lazily: no AWS call here

    def kubelet(**overrides: object):
        settings = AWSProviderSettings("demo", "https://x", "us-east-1", "1.31", **overrides)  # type: ignore[arg-type]
        return AWSCloudProvider(settings, clients, lambda _name: None)._kubelet(nodeclass)

    custom = kubelet(vm_memory_overhead_percent=0.1, reserved_enis=1)
    assert (custom.max_pods, custom.vm_memory_overhead_percent, custom.reserved_enis) == (50, 0.1, 1)
    default = kubelet()
    assert (default.max_pods, default.vm_memory_overhead_percent, default.reserved_enis) == (50, 0.075, 0)


def test_consolidation_time_budgets_and_bounds_reach_the_disruption_controller() -> None:
    from nodewright.kube.memory import InMemoryCluster
    from nodewright.runtime import Runtime

    s = load_settings({**BASE, "NODEWRIGHT_MULTI_NODE_CONSOLIDATION_TIMEOUT": "30s",
                       "NODEWRIGHT_SINGLE_NODE_CONSOLIDATION_TIMEOUT": "1m30s",
                       "NODEWRIGHT_MULTI_NODE_CONSOLIDATION_CANDIDATES": "50",
                       "NODEWRIGHT_CONSOLIDATION_REPLACEMENT_POD_SHARE": "0.25"})
    runtime = Runtime(InMemoryCluster(lambda: 0.0), object(), s)  # type: ignore[arg-type]
    opts = runtime.manager.disruption.options.consolidation
    assert (opts.multi_node_timeout, opts.single_node_timeout, opts.max_candidates, opts.window,
            opts.max_replacement_pod_share, opts.spot_to_spot) == (30.0, 90.0, 50, 50, 0.25, False)
    defaults = load_settings(BASE)
    assert (defaults.multi_node_consolidation_timeout, defaults.single_node_consolidation_timeout,
            defaults.multi_node_consolidation_candidates, defaults.consolidation_replacement_pod_share) == (
        60.0, 180.0, 100, 0.1)
    for name, value, why in (
            ("NODEWRIGHT_MULTI_NODE_CONSOLIDATION_TIMEOUT", "0s", "must be a positive duration (e.g. 1m)"),
            ("NODEWRIGHT_MULTI_NODE_CONSOLIDATION_CANDIDATES", "1", "1 is below 2 (default 100)"),
            ("NODEWRIGHT_CONSOLIDATION_REPLACEMENT_POD_SHARE", "1.5",
             "1.5 is not a fraction in (0, 1] (default 0.1)")):
        with pytest.raises(NodewrightValidationError) as err:
            load_settings({**BASE, name: value})
        assert str(err.value) == f"{name}: {why}"


def test_timing_settings_reach_garbage_collection_and_disruption() -> None:
    """Issue 32 item 5: GC grace and period, disruption poll and validation wait are settings (Karpenter hard-codes
    them: 30 s, 2 min, 10 s, 15 s), parsed as Go durations and carried to the controllers."""
    from nodewright.controllers.common import Context
    from nodewright.controllers.manager import ControllerManager, ControllerOptions
    from nodewright.kube.memory import InMemoryCluster

    s = load_settings({**BASE, "NODEWRIGHT_GC_GRACE_PERIOD": "1m", "NODEWRIGHT_GC_PERIOD": "2m30s",
                       "NODEWRIGHT_DISRUPTION_POLL_PERIOD": "500ms", "NODEWRIGHT_DISRUPTION_VALIDATION_DELAY": "5s"})
    assert (s.gc_grace_period, s.gc_period, s.disruption_poll_period, s.disruption_validation_delay) == (
        60.0, 150.0, 0.5, 5.0)
    defaults = load_settings(BASE)
    assert (defaults.gc_grace_period, defaults.gc_period, defaults.disruption_poll_period,
            defaults.disruption_validation_delay) == (30.0, 30.0, 10.0, 15.0)
    manager = ControllerManager(Context(InMemoryCluster(lambda: 0.0), None, lambda: 0.0),  # type: ignore[arg-type]
                                ControllerOptions(gc_grace=s.gc_grace_period, gc_period=s.gc_period,
                                                  disruption_poll_period=s.disruption_poll_period,
                                                  disruption_validation_delay=s.disruption_validation_delay))
    assert (manager.gc.grace, manager.gc.period) == (60.0, 150.0)
    assert (manager.disruption.poll_period, manager.disruption.validation_delay) == (0.5, 5.0)
    with pytest.raises(NodewrightValidationError) as err:
        load_settings({**BASE, "NODEWRIGHT_DISRUPTION_POLL_PERIOD": "0s"})
    assert str(err.value).startswith("NODEWRIGHT_DISRUPTION_POLL_PERIOD: 0.0s is not a positive duration")
    with pytest.raises(NodewrightValidationError) as err:
        load_settings({**BASE, "NODEWRIGHT_GC_PERIOD": "soon"})
    assert str(err.value).startswith("NODEWRIGHT_GC_PERIOD: 'soon' is not a duration")
