"""Our ``karpenter_*`` metrics against Karpenter main's metrics reference (2026-08-20; v1.15.1's source was not
available), kept as a fixture of facts (``tests/fixtures/karpenter_metrics_main-2026-08-20.json``: names from its
docs page, ``source_only`` families its source defines but the page does not list yet, label names from its
source)."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client import REGISTRY
from prometheus_client.metrics import MetricWrapperBase

from nodewright.metrics import Metrics

FIXTURE = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "karpenter_metrics_main-2026-08-20.json")
                     .read_text(encoding="utf-8"))


def exported() -> dict[str, list[str]]:
    """Exported family name (counters with ``_total``) -> label names, for every metric of :class:`Metrics`."""
    out: dict[str, list[str]] = {}
    for value in vars(Metrics()).values():
        if isinstance(value, MetricWrapperBase):
            name = value._name + ("_total" if value._type == "counter" else "")
            out[name] = sorted(value._labelnames)
        elif hasattr(value, "describe"):  # a collector computing its families at scrape time
            for family in value.describe():
                out[family.name] = sorted(family._labelnames)
    return out


def test_fixture_is_karpenters_reference() -> None:
    names = FIXTURE["names"]
    assert len(names) == 127 and len(set(names)) == 127
    assert sum(n.startswith("karpenter_") for n in names) == 72
    assert FIXTURE["source_only"] == ["karpenter_pods_disruption_initiated_total"]
    assert set(FIXTURE["labels"]) == {n for n in [*names, *FIXTURE["source_only"]] if n.startswith("karpenter_")}
    assert FIXTURE["labels"]["karpenter_nodeclaims_disrupted_total"] == [
        "capacity_type", "consolidation_policy", "nodepool", "reason", "termination_mode"]
    assert "karpenter_provisioner_scheduling_duration_seconds" not in names  # dropped in v1


def test_every_karpenter_family_we_export_has_karpenters_name_and_labels() -> None:
    ours = {name: labels for name, labels in exported().items() if name.startswith("karpenter_")}
    unknown = sorted(set(ours) - set(FIXTURE["names"]) - set(FIXTURE["source_only"]))
    assert unknown == [], f"not in Karpenter main's reference: {unknown}"
    wrong = {name: (labels, FIXTURE["labels"][name]) for name, labels in ours.items()
             if labels != FIXTURE["labels"][name]}
    assert wrong == {}, "label names differ from Karpenter's (ours, theirs)"


def test_the_families_the_issue_asked_for_are_exported() -> None:
    ours = exported()
    for name in ("karpenter_scheduler_scheduling_duration_seconds", "karpenter_scheduler_unschedulable_pods_count",
                 "karpenter_nodepools_cost_total", "karpenter_build_info", "karpenter_cluster_state_unsynced_time_seconds",
                 "karpenter_interruption_message_queue_duration_seconds", "karpenter_cloudprovider_duration_seconds",
                 "karpenter_nodeclaims_termination_duration_seconds", "karpenter_nodes_lifetime_duration_seconds",
                 "karpenter_nodes_drained_total", "karpenter_voluntary_disruption_failed_validations_total",
                 "karpenter_nodepools_allowed_disruptions", "karpenter_nodepools_nodes_consuming_budgets",
                 "karpenter_voluntary_disruption_eligible_nodes",
                 "karpenter_voluntary_disruption_consolidation_timeouts_total", "karpenter_scheduler_queue_depth",
                 "karpenter_scheduler_unfinished_work_seconds", "karpenter_scheduler_ignored_pods_count",
                 "karpenter_pods_drained_total", "karpenter_pods_scheduling_decision_duration_seconds",
                 "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
                 "karpenter_pods_provisioning_bound_duration_seconds", "karpenter_pods_provisioning_unbound_time_seconds",
                 "karpenter_pods_provisioning_startup_duration_seconds",
                 "karpenter_pods_provisioning_unstarted_time_seconds",
                 "karpenter_nodeclaims_instance_termination_duration_seconds",
                 "karpenter_voluntary_disruption_queue_failures_total",
                 # issue 28 (Karpenter main): pods per disruption, the AWS provider's launch/termination failures and
                 # user data size
                 "karpenter_pods_disruption_initiated_total", "karpenter_cloudprovider_instance_launch_failures_total",
                 "karpenter_cloudprovider_instance_termination_failures_total",
                 "karpenter_ec2nodeclasses_userdata_bytes"):
        assert name in ours, name
    assert "karpenter_provisioner_scheduling_duration_seconds" not in ours
    count = sum(name in ours for name in FIXTURE["names"] if name.startswith("karpenter_"))
    assert count >= 64, count  # was 19 of Karpenter's 67 karpenter_* names before issue 18


def test_pricing_fallback_lives_in_the_controllers_registry() -> None:
    class Pricing:
        on_demand_fallback, spot_fallback = True, False

    metrics = Metrics()
    metrics.observe_pricing(Pricing())
    assert b'nodewright_pricing_fallback{kind="on-demand"} 1.0' in metrics.render()
    assert REGISTRY.get_sample_value("nodewright_pricing_fallback", {"kind": "on-demand"}) is None


def test_build_info_is_one_constant_series() -> None:
    samples = [s for f in Metrics().registry.collect() if f.name == "karpenter_build_info" for s in f.samples]
    assert len(samples) == 1 and samples[0].value == 1.0
    assert samples[0].labels["version"] == "0.1.0" and samples[0].labels["goversion"].startswith("python3.")
