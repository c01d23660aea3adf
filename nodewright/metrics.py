"""Prometheus metrics with Karpenter's names, and the HTTP endpoints for metrics and health probes.

Metric names and labels follow Karpenter main's reference (2026-08-20, the newest source here: "Metrics" page of
the Karpenter docs plus its source; the facts are kept in ``tests/fixtures/karpenter_metrics_main-2026-08-20.json``),
so its Grafana dashboards keep working:
``karpenter_nodeclaims_created_total``, ``karpenter_nodes_allocatable``, ``karpenter_pods_state``,
``karpenter_scheduler_scheduling_duration_seconds``, ``karpenter_nodepools_cost_total``, ...
nodewright's additions live under ``nodewright_`` (``nodewright_nodepool_cost_per_hour_usd``,
``nodewright_pricing_fallback``, ``nodewright_leader``).

Each :class:`Metrics` owns its own ``CollectorRegistry`` so tests and simulations can create many.
"""

from __future__ import annotations

import os
import platform
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
#: Node launch and pod startup latencies, seconds (EC2 boot + kubelet join is typically 30-90 s).
_LATENCY_BUCKETS = (1, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800, 3600)
#: Node lifetimes, seconds (minutes to a month).
_LIFETIME_BUCKETS = (60, 300, 900, 1800, 3600, 7200, 21600, 43200, 86400, 172800, 604800, 1209600, 2592000)
#: The well-known node labels of Karpenter's AWS provider (kubernetes-sigs/karpenter ``v1.WellKnownLabels`` plus
#: the ones aws/karpenter-provider-aws adds in ``pkg/apis/v1/labels.go``), in a fixed order.
_WELL_KNOWN_NODE_LABELS = (
    "karpenter.sh/nodepool", "node.kubernetes.io/instance-type", "karpenter.sh/capacity-type",
    "topology.kubernetes.io/zone", "topology.kubernetes.io/region", "kubernetes.io/arch", "kubernetes.io/os",
    "node.kubernetes.io/windows-build", "topology.k8s.aws/zone-id",
    "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-interruptible", "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category",
    "karpenter.k8s.aws/instance-capability-flex", "karpenter.k8s.aws/instance-family",
    "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-size",
    "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-cpu",
    "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
)
#: Node label -> metric label of Karpenter's node metrics: the part after ``/``, lower case, ``-`` -> ``_``
#: (``getWellKnownLabels`` in kubernetes-sigs/karpenter ``pkg/controllers/metrics/node``).
NODE_METRIC_LABELS: dict[str, str] = {key: key.split("/", 1)[1].lower().replace("-", "_")
                                      for key in _WELL_KNOWN_NODE_LABELS}
#: Label names of ``karpenter_nodes_*`` per-node gauges (Karpenter's order does not matter to Prometheus).
NODE_LABEL_NAMES = (*NODE_METRIC_LABELS.values(), "node_name", "phase", "managed")
#: ``karpenter_pods_state`` labels (``labelNames`` in Karpenter's ``pkg/controllers/metrics/pod``).
POD_STATE_LABELS = ("name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type",
                    "instance_type", "phase", "ready", "managed")


class InstanceTypeCollector:
    """``karpenter_cloudprovider_instance_type_{cpu_cores,memory_bytes}{instance_type}`` and
    ``..._offering_{price_estimate,available}{instance_type, capacity_type, zone}``, computed when scraped from
    the last instance types the provisioner saw (``InstanceType``: ``capacity`` cpu millicores / memory bytes,
    ``offerings`` with zone, capacity type, USD/h price, available). Source: aws/karpenter-provider-aws
    ``pkg/providers/instancetype/metrics.go`` and ``pkg/controllers/metrics``."""

    FAMILIES = (("karpenter_cloudprovider_instance_type_cpu_cores", "vCPUs of an instance type.", ("instance_type",)),
                ("karpenter_cloudprovider_instance_type_memory_bytes", "Memory of an instance type, bytes.",
                 ("instance_type",)),
                ("karpenter_cloudprovider_instance_type_offering_price_estimate",
                 "Price of an offering, USD per hour.", ("instance_type", "capacity_type", "zone")),
                ("karpenter_cloudprovider_instance_type_offering_available",
                 "1 when the offering can be launched now (0: recently out of capacity).",
                 ("instance_type", "capacity_type", "zone")))

    def __init__(self) -> None:
        self.types: list[Any] = []

    def _families(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(name, doc, labels=list(labels)) for name, doc, labels in self.FAMILIES]

    def describe(self) -> list[GaugeMetricFamily]:
        return self._families()

    def collect(self) -> list[GaugeMetricFamily]:
        cpu, memory, price, available = families = self._families()
        for it in self.types:
            cpu.add_metric([it.name], it.capacity.get("cpu", 0) / 1000.0)
            memory.add_metric([it.name], float(it.capacity.get("memory", 0)))
            for o in it.offerings:
                labels = [it.name, o.capacity_type, o.zone]
                price.add_metric(labels, float(o.price))
                available.add_metric(labels, 1.0 if o.available else 0.0)
        return families


class NodeClaimStatusCollector:
    """operator-pkg's status metrics of NodeClaims, computed when scraped from the rows the state metrics
    controller hands over each pass (:func:`nodewright.controllers.condition_metrics.status_rows`):

    * ``operator_nodeclaim_status_condition_count{name, namespace, type, status, reason}``: 1 per NodeClaim and
      condition;
    * ``operator_nodeclaim_status_condition_current_status_seconds{...same}``: seconds since the condition took
      its current status (now - ``lastTransitionTime``);
    * ``operator_nodeclaim_termination_current_time_seconds{name, namespace}``: seconds since a deleting
      NodeClaim's ``deletionTimestamp``.

    Series exist only for live NodeClaims (a deleted one is gone at the next pass): the cardinality is bounded
    by the NodeClaims in the cluster x their conditions. Source: awslabs/operatorpkg ``status/metrics.go``
    (``ConditionCount``, ``ConditionCurrentStatusSeconds``, ``TerminationCurrentTimeSeconds``), with
    NodeClaims' empty namespace.
    """

    CONDITION_LABELS = ("name", "namespace", "type", "status", "reason")

    def __init__(self) -> None:
        #: (name, type, status, reason, since epoch seconds) per NodeClaim condition.
        self.conditions: list[tuple[str, str, str, str, float]] = []
        #: (name, deletion epoch seconds) per deleting NodeClaim.
        self.terminating: list[tuple[str, float]] = []
        self.clock: Callable[[], float] = lambda: 0.0

    def _families(self) -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily("operator_nodeclaim_status_condition_count",
                                  "NodeClaim conditions, 1 per NodeClaim and condition type.",
                                  labels=list(self.CONDITION_LABELS)),
                GaugeMetricFamily("operator_nodeclaim_status_condition_current_status_seconds",
                                  "Seconds a NodeClaim condition has held its current status.",
                                  labels=list(self.CONDITION_LABELS)),
                GaugeMetricFamily("operator_nodeclaim_termination_current_time_seconds",
                                  "Seconds since a deleting NodeClaim's deletionTimestamp.",
                                  labels=["name", "namespace"])]

    def describe(self) -> list[GaugeMetricFamily]:
        return self._families()

    def collect(self) -> list[GaugeMetricFamily]:
        count, current, terminating = families = self._families()
        now = self.clock()
        for name, type_, status, reason, since in self.conditions:
            labels = [name, "", type_, status, reason]
            count.add_metric(labels, 1.0)
            current.add_metric(labels, max(0.0, now - since))
        for name, since in self.terminating:
            terminating.add_metric([name, ""], max(0.0, now - since))
        return families


class Metrics:
    """Every metric the controllers record (units in the metric names: seconds, USD per hour).

    ``karpenter_*`` families carry Karpenter v1.14's names and label names (compared with its metrics
    reference in ``tests/unit/ops/test_metrics_reference.py``); Karpenter's Summaries are Histograms here
    (the same ``_sum``/``_count`` series). A family is registered only where nodewright has the data.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        reg = self.registry
        self.build_info = Gauge(
            "karpenter_build_info", "A constant 1 labeled by the nodewright version it was built from "
            "(goversion/goarch hold the Python version and machine).", ["version", "goversion", "goarch", "commit"],
            registry=reg)
        self.build_info.labels(version=_version(), goversion=f"python{platform.python_version()}",
                               goarch=platform.machine(), commit=os.environ.get("NODEWRIGHT_COMMIT", "")).set(1)
        # --- NodeClaims and nodes (provisioning, lifecycle, termination) ---------------------------------------
        self.nodeclaims_created = Counter(
            "karpenter_nodeclaims_created_total", "NodeClaims created, by reason and NodePool.",
            ["reason", "nodepool", "min_values_relaxed"], registry=reg)
        self.nodeclaims_terminated = Counter(
            "karpenter_nodeclaims_terminated_total", "NodeClaims terminated, by NodePool, capacity type and zone.",
            ["nodepool", "capacity_type", "zone"], registry=reg)
        # Karpenter main (#3179): reason snake_cased, consolidation_policy ("" unless a consolidation disrupted it),
        # termination_mode (graceful | eventual | forceful, from the NodeClaim's terminationGracePeriod).
        disruption_labels = ["reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"]
        self.nodeclaims_disrupted = Counter(
            "karpenter_nodeclaims_disrupted_total", "NodeClaims disrupted, by reason, NodePool, capacity type, "
            "consolidation policy and termination mode.", disruption_labels, registry=reg)
        self.pods_disruption_initiated = Counter(
            "karpenter_pods_disruption_initiated_total", "Pod disruptions initiated: the reschedulable pods (no "
            "DaemonSet or mirror pods) of each disrupted NodeClaim, with its labels.", disruption_labels, registry=reg)
        self.nodeclaims_unhealthy_disrupted = Counter(
            "karpenter_nodeclaims_unhealthy_disrupted_total",
            "Unhealthy NodeClaims node repair disrupted, by the Node condition (snake case), NodePool, capacity type "
            "and image ID.", ["condition", "nodepool", "capacity_type", "image_id"], registry=reg)
        self.nodeclaims_repair_reboots = Counter(
            "nodewright_nodeclaims_repair_reboots_total",
            "Instances node repair rebooted (AWS gate RebootForRepair), by NodePool and Node condition.",
            ["nodepool", "condition"], registry=reg)
        self.nodeclaims_termination_duration = Histogram(
            "karpenter_nodeclaims_termination_duration_seconds",
            "Seconds from a NodeClaim's deletion request until its finalizer was released.",
            ["nodepool"], buckets=_LATENCY_BUCKETS, registry=reg)
        self.nodeclaims_instance_termination_duration = Histogram(
            "karpenter_nodeclaims_instance_termination_duration_seconds",
            "Seconds from the first request to terminate a NodeClaim's instance until the cloud provider reported "
            "it gone.", ["nodepool"], buckets=_LATENCY_BUCKETS, registry=reg)
        self.nodes_created = Counter(
            "karpenter_nodes_created_total", "Nodes registered for NodeClaims, by NodePool and zone.",
            ["nodepool", "zone"], registry=reg)
        self.nodes_terminated = Counter(
            "karpenter_nodes_terminated_total", "Nodes whose termination finalizer was released, by NodePool and zone.",
            ["nodepool", "zone"], registry=reg)
        self.termination_duration = Histogram(
            "karpenter_nodes_termination_duration_seconds", "Seconds from deletion request to finalizer release.",
            ["nodepool"], buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800), registry=reg)
        self.nodes_lifetime = Histogram(
            "karpenter_nodes_lifetime_duration_seconds", "Seconds from a Node's creation until it was terminated.",
            ["nodepool"], buckets=_LIFETIME_BUCKETS, registry=reg)
        self.nodes_drained = Counter(
            "karpenter_nodes_drained_total", "Nodes drained (every evictable pod gone) before termination.",
            ["nodepool"], registry=reg)
        self.pods_drained = Counter(
            "karpenter_pods_drained_total", "Pods evicted while draining a node, by the NodeClaim's disruption "
            "reason (Underutilized|Empty|Drifted|Expired|Interrupted|..., '' when deleted without one).",
            ["reason"], registry=reg)
        self.pods_eviction_requests = Counter(
            "karpenter_pods_eviction_requests_total", "Eviction requests sent while draining, by HTTP code.",
            ["code"], registry=reg)
        # --- pods and the scheduler (provisioning) ----------------------------------------------------------
        self.pods_state = Gauge(
            "karpenter_pods_state", "Pod state (1 per pod) with its node and the node's NodePool, zone and type.",
            list(POD_STATE_LABELS), registry=reg)
        self.pods_startup_duration = Histogram(
            "karpenter_pods_startup_duration_seconds",
            "Seconds from pod creation until the pod is running (Ready), for pods seen pending.",
            buckets=_LATENCY_BUCKETS, registry=reg)
        self.pods_bound_duration = Histogram(
            "karpenter_pods_bound_duration_seconds", "Seconds from pod creation until the pod was bound to a node.",
            buckets=_LATENCY_BUCKETS, registry=reg)
        self.pods_unbound_time = Gauge(
            "karpenter_pods_unbound_time_seconds", "Seconds a pending pod has been without a node.",
            ["name", "namespace"], registry=reg)
        self.pods_unstarted_time = Gauge(
            "karpenter_pods_unstarted_time_seconds", "Seconds a pod has been Pending (not yet running).",
            ["name", "namespace"], registry=reg)
        # pods_provisioning_*: from the provisioner's memory (controllers/pod_provisioning_metrics.py)
        self.pods_scheduling_decision_duration = Histogram(
            "karpenter_pods_scheduling_decision_duration_seconds",
            "Seconds from when the provisioner first saw a pod pending until its first scheduling decision.",
            buckets=_LATENCY_BUCKETS, registry=reg)
        self.pods_provisioning_undecided_time = Gauge(
            "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
            "Seconds since the provisioner first saw a pending pod it has not decided on yet.",
            ["name", "namespace"], registry=reg)
        self.pods_provisioning_bound_duration = Histogram(
            "karpenter_pods_provisioning_bound_duration_seconds",
            "Seconds from the provisioner's first placement of a pod until it was bound.",
            buckets=_LATENCY_BUCKETS, registry=reg)
        self.pods_provisioning_unbound_time = Gauge(
            "karpenter_pods_provisioning_unbound_time_seconds",
            "Seconds since the provisioner placed a pod that is not bound yet.", ["name", "namespace"], registry=reg)
        self.pods_provisioning_startup_duration = Histogram(
            "karpenter_pods_provisioning_startup_duration_seconds",
            "Seconds from the provisioner's first placement of a pod until it ran.",
            buckets=_LATENCY_BUCKETS, registry=reg)
        self.pods_provisioning_unstarted_time = Gauge(
            "karpenter_pods_provisioning_unstarted_time_seconds",
            "Seconds since the provisioner placed a pod that is not running yet.", ["name", "namespace"],
            registry=reg)
        self.scheduling_duration = Histogram(
            "karpenter_scheduler_scheduling_duration_seconds", "Duration of one scheduling simulation.",
            ["controller"], buckets=_DURATION_BUCKETS, registry=reg)
        self.scheduler_queue_depth = Gauge(
            "karpenter_scheduler_queue_depth", "Pods handed to the last scheduling simulation (the batch), one "
            "series per simulation id; the previous run's series is removed when a new run starts.",
            ["controller", "scheduling_id"], registry=reg)
        self.scheduler_unfinished_work = Gauge(
            "karpenter_scheduler_unfinished_work_seconds", "Seconds the running scheduling simulation has taken "
            "so far (present only while one runs).", ["controller", "scheduling_id"], registry=reg)
        self.scheduler_ignored_pods = Gauge(
            "karpenter_scheduler_ignored_pods_count", "Pending pods the last batch ignored because they could not "
            "be read (invalid requests, selectors, ...).", registry=reg)
        self.scheduler_unschedulable_pods = Gauge(
            "karpenter_scheduler_unschedulable_pods_count", "Pods the last scheduling simulation could not place.",
            ["controller"], registry=reg)
        # --- NodePools ---------------------------------------------------------------------------------------
        self.nodepools_usage = Gauge(
            "karpenter_nodepools_usage", "Resources in use by a NodePool's nodes (cpu cores, memory bytes, pods).",
            ["nodepool", "resource_type"], registry=reg)
        self.nodepools_limit = Gauge(
            "karpenter_nodepools_limit", "A NodePool's limits (cpu cores, memory bytes).",
            ["nodepool", "resource_type"], registry=reg)
        self.nodepools_cost_total = Gauge(
            "karpenter_nodepools_cost_total", "Price of a NodePool's running NodeClaims, USD per hour (the cloud "
            "provider's unit, as Karpenter); the same value as nodewright_nodepool_cost_per_hour_usd.",
            ["nodepool"], registry=reg)
        self.nodepool_cost = Gauge(
            "nodewright_nodepool_cost_per_hour_usd", "What a NodePool's running NodeClaims cost, USD per hour: "
            "price=\"list\" at on-demand/spot list prices (always); price=\"effective\" under the PricingPolicy "
            "in force (its share of the fleet's bill after Reserved Instances, Savings Plans and discounts; only "
            "while a policy is set).",
            ["nodepool", "price"], registry=reg)
        # --- cloud provider, interruption, cluster state ------------------------------------------------------
        self.cloudprovider_errors = Counter(
            "karpenter_cloudprovider_errors_total", "Cloud provider calls that failed.",
            ["controller", "method", "provider", "error"], registry=reg)
        # The AWS provider's own (aws/karpenter-provider-aws main pkg/providers/instance, .../launchtemplate),
        # written by it once attached (AWSCloudProvider.attach_metrics).
        self.instance_launch_failures = Counter(
            "karpenter_cloudprovider_instance_launch_failures_total", "CreateFleet offering failures, by zone, zone "
            "ID, capacity type and error code.", ["zone", "zone_id", "capacity_type", "reason"], registry=reg)
        self.instance_termination_failures = Counter(
            "karpenter_cloudprovider_instance_termination_failures_total", "TerminateInstances failures, by zone "
            "and zone ID.", ["zone", "zone_id"], registry=reg)
        self.userdata_bytes = Gauge(
            "karpenter_ec2nodeclasses_userdata_bytes", "Bytes of the rendered user data (before base64) of the "
            "EC2NodeClass's last created launch template.", ["nodeclass"], registry=reg)
        self.cloudprovider_duration = Histogram(
            "karpenter_cloudprovider_duration_seconds", "Duration of cloud provider calls, seconds.",
            ["controller", "method", "provider"], buckets=_DURATION_BUCKETS, registry=reg)
        self.interruption_received = Counter(
            "karpenter_interruption_received_messages_total", "Interruption messages received, by type.",
            ["message_type"], registry=reg)
        self.instance_types = InstanceTypeCollector()
        reg.register(self.instance_types)
        self.interruption_queue_duration = Histogram(
            "karpenter_interruption_message_queue_duration_seconds",
            "Seconds from an interruption event's time until the controller handled it.",
            buckets=_LATENCY_BUCKETS, registry=reg)
        self.interruption_deleted = Counter(
            "karpenter_interruption_deleted_messages_total", "Interruption messages deleted from the queue.",
            registry=reg)
        self.cluster_state_node_count = Gauge(
            "karpenter_cluster_state_node_count", "Nodes the controller tracks.", registry=reg)
        self.cluster_state_synced = Gauge(
            "karpenter_cluster_state_synced", "1 when every informer has synced.", registry=reg)
        self.cluster_state_unsynced_time = Gauge(
            "karpenter_cluster_state_unsynced_time_seconds", "Seconds the cluster state has been unsynced (0 when "
            "synced).", registry=reg)
        self.pricing_fallback = Gauge(
            "nodewright_pricing_fallback",
            "1 while EC2 prices of this kind come from the bundled table or model instead of the live AWS API.",
            ["kind"], registry=reg)
        self.leader = Gauge("nodewright_leader", "1 while this replica holds the leader Lease.", registry=reg)
        # --- disruption (nodewright/controllers/disruption.py) ------------------------------------------------
        self.disruption_decisions = Counter(
            "karpenter_voluntary_disruption_decisions_total",
            "Disruption decisions executed, by decision (delete|replace), reason (empty|drifted|underutilized|"
            "expired) and consolidation type (single|multi|empty, '' outside consolidation).",
            ["decision", "reason", "consolidation_type"], registry=reg)
        self.disruption_decisions_by_nodepool = Counter(
            "karpenter_voluntary_disruption_decisions_by_nodepool_total",
            "Disruption decisions executed, per NodePool of the disrupted nodes.",
            ["nodepool", "decision", "reason", "consolidation_type"], registry=reg)
        self.disruption_replacements = Counter(
            "nodewright_disruption_replacements_total", "Replacement NodeClaims launched by disruption, by reason.",
            ["reason"], registry=reg)
        self.disruption_evaluation_duration = Histogram(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
            "Seconds one pass of disruption decisions took (reason 'all': nodewright evaluates every method in "
            "one pass).", ["reason", "consolidation_type"], buckets=_DURATION_BUCKETS, registry=reg)
        self.disruption_failed_validations = Counter(
            "karpenter_voluntary_disruption_failed_validations_total",
            "Decisions that failed re-validation after the validation delay, by consolidation type.",
            ["consolidation_type"], registry=reg)
        self.nodepools_allowed_disruptions = Gauge(
            "karpenter_nodepools_allowed_disruptions", "Nodes of a NodePool the disruption budgets still allow to "
            "disrupt for a reason (Empty|Drifted|Underutilized, Karpenter's case), before subtracting the nodes "
            "consuming budgets; 2147483647 (Go's MaxInt32, as Karpenter) when no budget is active.",
            ["nodepool", "reason"], registry=reg)
        self.nodepools_nodes_consuming_budgets = Gauge(
            "karpenter_nodepools_nodes_consuming_budgets", "Nodes of a NodePool counted against its disruption "
            "budgets (being deleted or not Ready), per reason (Empty|Drifted|Underutilized).", ["nodepool", "reason"], registry=reg)
        self.disruption_eligible_nodes = Gauge(
            "karpenter_voluntary_disruption_eligible_nodes", "Nodes passing every candidate rule of a disruption "
            "reason (empty|drifted|underutilized) at the last decision pass.", ["reason"], registry=reg)
        self.disruption_queue_failures = Counter(
            "karpenter_voluntary_disruption_queue_failures_total",
            "Replacements that did not become Ready when a disruption command was rolled back, by decision, "
            "reason and consolidation type.", ["decision", "reason", "consolidation_type"], registry=reg)
        self.disruption_consolidation_timeouts = Counter(
            "karpenter_voluntary_disruption_consolidation_timeouts_total",
            "Consolidation searches (multi|single) whose time budget (1 min multi-node, 3 min single-node) ran out "
            "before they were done; multi-node then acts on the best valid move found so far.",
            ["consolidation_type"], registry=reg)
        # --- cluster state (controllers/state_metrics.py) -----------------------------------------------------
        per_node = "per node (cpu cores, memory/ephemeral_storage bytes, pods count)"

        def node_gauge(name: str, what: str) -> Gauge:
            return Gauge(name, f"{what}, {per_node}.", [*NODE_LABEL_NAMES, "resource_type"], registry=reg)

        self.nodes_allocatable = node_gauge("karpenter_nodes_allocatable", "Node allocatable resources")
        self.nodes_total_pod_requests = node_gauge("karpenter_nodes_total_pod_requests",
                                                   "Requests of the node's non-daemon pods")
        self.nodes_total_pod_limits = node_gauge("karpenter_nodes_total_pod_limits",
                                                 "Limits of the node's non-daemon pods")
        self.nodes_total_daemon_requests = node_gauge("karpenter_nodes_total_daemon_requests",
                                                      "Requests of the node's DaemonSet pods")
        self.nodes_total_daemon_limits = node_gauge("karpenter_nodes_total_daemon_limits",
                                                    "Limits of the node's DaemonSet pods")
        self.nodes_system_overhead = node_gauge(
            "karpenter_nodes_system_overhead",
            "Capacity minus allocatable (kubelet and system reserved, eviction threshold)")
        self.nodes_current_lifetime = Gauge(
            "karpenter_nodes_current_lifetime_seconds", "Seconds since the node was created.",
            list(NODE_LABEL_NAMES), registry=reg)
        self.cluster_utilization = Gauge(
            "karpenter_cluster_utilization_percent", "Pod requests as a percentage of allocatable over all nodes.",
            ["resource_type"], registry=reg)
        self.nodeclaim_condition_transition = Histogram(
            "operator_nodeclaim_status_condition_transition_seconds",
            "Seconds a NodeClaim condition spent in a status (status) before transitioning (to_status).",
            ["type", "status", "to_status"], buckets=_LATENCY_BUCKETS, registry=reg)

        self.nodeclaim_status = NodeClaimStatusCollector()
        reg.register(self.nodeclaim_status)
        # --- controllers (controllers/manager.py), controller-runtime's names as Karpenter exports them ---------
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total", "Controller passes, by controller and result (success|error).",
            ["controller", "result"], registry=reg)
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total", "Controller passes that raised, by controller.",
            ["controller"], registry=reg)
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds", "Seconds one controller pass took, by controller.",
            ["controller"], buckets=_DURATION_BUCKETS, registry=reg)

    def observe_instance_types(self, instance_types: Iterable[Any]) -> None:
        """Remember the instance types the NodePools may launch; exported at scrape time (see
        :class:`InstanceTypeCollector`), so a provisioning pass pays nothing for them."""
        self.instance_types.types = list(instance_types)

    def observe_pricing(self, pricing: Any) -> None:
        """Export ``nodewright_pricing_fallback{kind="on-demand"|"spot"}`` = 1 while ``pricing`` (a
        :class:`~nodewright.cloud.aws.pricing.PricingProvider`: ``on_demand_fallback``/``spot_fallback``) uses
        bundled or modelled prices; read at scrape time, in this registry (not the process-global one)."""
        self.pricing_fallback.labels(kind="on-demand").set_function(lambda: float(pricing.on_demand_fallback))
        self.pricing_fallback.labels(kind="spot").set_function(lambda: float(pricing.spot_fallback))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """Current value of one sample (``name`` including ``_total`` for counters); None when absent."""
        return self.registry.get_sample_value(name, labels or {})


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("nodewright")
    except Exception:  # running from a source tree that was never installed
        from nodewright import __version__

        return __version__


def _handler(routes: dict[str, Callable[[], tuple[int, str, bytes]]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            route = routes.get(self.path.split("?", 1)[0])
            status, ctype, body = route() if route else (404, "text/plain", b"not found\n")
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: stay quiet
            return

    return Handler


class HttpEndpoint:
    """A small threaded HTTP server for ``/metrics`` or ``/healthz`` + ``/readyz``.

    Args:
        host: bind address (``0.0.0.0`` in a pod, ``127.0.0.1`` in tests).
        port: TCP port, 0 picks a free one (see :attr:`port`).
        routes: path -> callable returning ``(status, content type, body)``.
    """

    def __init__(self, host: str, port: int, routes: dict[str, Callable[[], tuple[int, str, bytes]]]) -> None:
        self.server = ThreadingHTTPServer((host, port), _handler(routes))
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        # A 0.1 s shutdown poll (default 0.5 s) so a graceful stop hands the Lease over sooner.
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"http-{self.port}", daemon=True)

    def start(self) -> HttpEndpoint:
        """Serve in a daemon thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()


def metrics_endpoint(metrics: Metrics, host: str, port: int) -> HttpEndpoint:
    """``GET /metrics`` with the Prometheus exposition of ``metrics``."""
    return HttpEndpoint(host, port, {"/metrics": lambda: (200, CONTENT_TYPE_LATEST, metrics.render())})


def health_endpoint(live: Callable[[], bool], ready: Callable[[], bool], host: str, port: int) -> HttpEndpoint:
    """``GET /healthz`` (200 while ``live()``) and ``/readyz`` (200 while ``ready()``), else 500."""

    def probe(check: Callable[[], bool]) -> Callable[[], tuple[int, str, bytes]]:
        return lambda: (200, "text/plain", b"ok\n") if check() else (500, "text/plain", b"not ok\n")

    return HttpEndpoint(host, port, {"/healthz": probe(live), "/readyz": probe(ready)})
