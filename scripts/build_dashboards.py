"""Write the chart's generated Grafana dashboards: performance, controllers, allocation and cost.

Karpenter publishes four dashboards (capacity, performance, controllers, controllers/allocation); nodewright's
are written here from our metric names (Karpenter's, docs/dashboards.md), panel by panel, plus a cost dashboard
with list and effective prices. The capacity dashboard (``nodewright-capacity.json``) is kept by hand.

    python scripts/build_dashboards.py           # rewrite helm/nodewright/dashboards/nodewright-{...}.json
    python scripts/build_dashboards.py --check   # exit 1 when a committed file differs (tests run this)

Output is deterministic (sorted keys off, fixed ids and grid positions), so the files diff cleanly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "helm" / "nodewright" / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
RATE = "$__rate_interval"
#: cpu requested on each NodePool's nodes: pods' plus DaemonSet pods' requests (``or ... * 0``: a pool without
#: DaemonSet pods has no daemon series, and ``a + nothing`` would be nothing).
_POD_CPU = 'sum by (nodepool) (karpenter_nodes_total_pod_requests{resource_type="cpu",nodepool=~"$nodepool"})'
_DAEMON_CPU = 'sum by (nodepool) (karpenter_nodes_total_daemon_requests{resource_type="cpu",nodepool=~"$nodepool"})'
CPU_REQUESTED = f"({_POD_CPU} + ({_DAEMON_CPU} or {_POD_CPU} * 0))"


def variable(name: str, label: str, query: str) -> dict[str, Any]:
    """A multi-value query variable (``All`` = ``.*``)."""
    return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
            "query": {"query": query, "refId": name}, "definition": query, "includeAll": True, "multi": True,
            "allValue": ".*", "refresh": 2, "sort": 1, "current": {}, "hide": 0}


def target(expr: str, legend: str, ref: str, instant: bool = False, fmt: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"datasource": DATASOURCE, "refId": ref, "expr": expr, "legendFormat": legend,
                           "range": not instant, "instant": instant}
    if fmt:
        out["format"] = fmt
    return out


def quantiles(metric: str, by: str = "", where: str = "", qs: tuple[float, ...] = (0.5, 0.9, 0.99)) -> list[dict[str, Any]]:
    """``histogram_quantile`` targets of ``metric`` (a histogram's base name) at each quantile."""
    group = f"le, {by}" if by else "le"
    selector = f"{metric}_bucket{{{where}}}" if where else f"{metric}_bucket"
    legend = f"p{{q}} {{{{{by}}}}}" if by else "p{q}"
    return [target(f"histogram_quantile({q}, sum by ({group}) (rate({selector}[{RATE}])))",
                   legend.format(q=round(q * 100)), chr(ord("A") + i)) for i, q in enumerate(qs)]


class Board:
    """Panels laid out left to right on a 24-column grid."""

    def __init__(self, uid: str, title: str, description: str, variables: list[dict[str, Any]]) -> None:
        self.doc: dict[str, Any] = {
            "title": title, "uid": uid, "description": description,
            "tags": ["nodewright", "karpenter", uid.removeprefix("nodewright-")], "editable": True,
            "schemaVersion": 39, "version": 1, "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
            "timezone": "browser", "graphTooltip": 1,
            "templating": {"list": [{"name": "datasource", "label": "Data source", "type": "datasource",
                                     "query": "prometheus", "current": {}, "hide": 0}, *variables]},
            "annotations": {"list": []}, "panels": []}
        self.x = self.y = self.row_height = 0

    def panel(self, kind: str, title: str, description: str, targets: list[dict[str, Any]], unit: str = "none",
              width: int = 12, height: int = 8, options: dict[str, Any] | None = None) -> None:
        if self.x + width > 24:
            self.x, self.y, self.row_height = 0, self.y + self.row_height, 0
        panel: dict[str, Any] = {
            "id": len(self.doc["panels"]) + 1, "type": kind, "title": title, "description": description,
            "datasource": DATASOURCE, "gridPos": {"x": self.x, "y": self.y, "w": width, "h": height},
            "targets": targets, "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": options if options is not None else (
                {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull", "max"]},
                 "tooltip": {"mode": "multi", "sort": "desc"}} if kind == "timeseries" else {})}
        self.doc["panels"].append(panel)
        self.x += width
        self.row_height = max(self.row_height, height)

    def stat(self, title: str, description: str, expr: str, unit: str = "none", width: int = 6) -> None:
        self.panel("stat", title, description, [target(expr, title, "A", instant=True)], unit, width, 4)


def performance() -> dict[str, Any]:
    """Karpenter's "Performance" dashboard: termination, pod startup and reconcile latencies, plus scheduling,
    disruption and cloud-provider call latencies."""
    b = Board("nodewright-performance", "nodewright performance",
              "Latencies: node termination, pod startup, NodeClaim launch-to-ready, controller passes, scheduling "
              "simulations, disruption evaluation and cloud provider calls (Karpenter's Performance dashboard).",
              [variable("controller", "Controller", "label_values(controller_runtime_reconcile_total, controller)")])
    b.panel("timeseries", "Node termination latency", "Seconds from a Node's deletion request to its finalizer "
            "release (drain included).", quantiles("karpenter_nodes_termination_duration_seconds"), "s", 24, 9)
    b.panel("timeseries", "Pod startup latency", "Seconds from pod creation until it ran, for pods seen pending.",
            quantiles("karpenter_pods_startup_duration_seconds"), "s")
    b.panel("timeseries", "NodeClaim launch-to-ready latency", "Seconds a NodeClaim's Ready condition stayed "
            "Unknown (creation to Ready).", quantiles("operator_nodeclaim_status_condition_transition_seconds",
                                                      where='type="Ready",status="Unknown"'), "s")
    b.panel("timeseries", "Controller reconciliation latency [$controller]", "Seconds one controller pass took.",
            quantiles("controller_runtime_reconcile_time_seconds", by="controller",
                      where='controller=~"$controller"'), "s", 13)
    b.panel("bargauge", "Controller reconciliation rate", "Controller passes per second.",
            [target(f"sum by (controller) (rate(controller_runtime_reconcile_total{{controller=~\"$controller\"}}[{RATE}]))",
                    "{{controller}}", "A", instant=True)], "reqps", 11,
            options={"displayMode": "gradient", "orientation": "horizontal",
                     "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}})
    b.panel("timeseries", "Scheduling simulation duration", "Seconds one scheduling simulation took, by "
            "controller (provisioner, disruption).", quantiles("karpenter_scheduler_scheduling_duration_seconds",
                                                                by="controller"), "s")
    b.panel("timeseries", "Disruption evaluation duration", "Seconds one pass of disruption decisions took.",
            quantiles("karpenter_voluntary_disruption_decision_evaluation_duration_seconds"), "s")
    b.panel("timeseries", "NodeClaim termination latency", "Seconds from a NodeClaim's deletion until its "
            "finalizer was released, and until its instance was gone.",
            [*quantiles("karpenter_nodeclaims_termination_duration_seconds", qs=(0.5, 0.9)),
             target(f"histogram_quantile(0.9, sum by (le) (rate(karpenter_nodeclaims_instance_termination_duration_"
                    f"seconds_bucket[{RATE}])))", "instance p90", "C")], "s")
    b.panel("timeseries", "Cloud provider call latency (p90)", "Seconds per cloud provider call, by method.",
            quantiles("karpenter_cloudprovider_duration_seconds", by="method", qs=(0.9,)), "s")
    return b.doc


def controllers() -> dict[str, Any]:
    """Karpenter's "Controllers" dashboard (reconciles by result, durations), plus leadership, sync, cloud
    provider errors, interruption and pricing health."""
    b = Board("nodewright-controllers", "nodewright controllers",
              "Controller passes by result, their durations and errors; leader, cluster state sync, cloud "
              "provider errors, interruption messages, evictions and pricing fallback (Karpenter's Controllers "
              "dashboard).",
              [variable("controller", "Controller", "label_values(controller_runtime_reconcile_total, controller)")])
    b.stat("Leader replicas", "Replicas holding the leader Lease (1 expected).", "sum(nodewright_leader)")
    b.stat("Cluster state synced", "1 when every informer has synced.", "min(karpenter_cluster_state_synced)")
    b.stat("Nodes tracked", "Nodes the controller tracks.", "max(karpenter_cluster_state_node_count)")
    b.stat("Pricing fallback", "1 while prices come from the bundled table or model.",
           "max(nodewright_pricing_fallback)")
    b.panel("timeseries", "Reconciliations per minute", "Controller passes per minute, by result.",
            [target(f"sum by (controller, result) (rate(controller_runtime_reconcile_total{{controller=~\"$controller\"}}"
                    f"[{RATE}])) * 60", "{{controller}} {{result}}", "A")], "none", 8)
    b.panel("timeseries", "Reconciliation errors", "Controller passes that raised.",
            [target(f"sum by (controller) (increase(controller_runtime_reconcile_errors_total{{controller=~\"$controller\"}}"
                    f"[{RATE}]))", "{{controller}}", "A")], "none", 8)
    b.panel("heatmap", "Reconciliation duration", "Controller passes by duration bucket.",
            [target(f"sum by (le) (increase(controller_runtime_reconcile_time_seconds_bucket{{controller=~\"$controller\"}}"
                    f"[{RATE}]))", "{{le}}", "A", fmt="heatmap")], "s", 8,
            options={"calculate": False, "yAxis": {"unit": "s"}})
    b.panel("timeseries", "Cloud provider errors", "Failed cloud provider calls, by method and error.",
            [target(f"sum by (method, error) (increase(karpenter_cloudprovider_errors_total[{RATE}]))",
                    "{{method}} {{error}}", "A")])
    b.panel("timeseries", "Cloud provider calls", "Cloud provider calls per second, by method.",
            [target(f"sum by (method) (rate(karpenter_cloudprovider_duration_seconds_count[{RATE}]))", "{{method}}",
                    "A")], "reqps")
    b.panel("timeseries", "Interruption messages", "Interruption messages received by type, and deleted.",
            [target(f"sum by (message_type) (increase(karpenter_interruption_received_messages_total[{RATE}]))",
                    "{{message_type}}", "A"),
             target(f"sum(increase(karpenter_interruption_deleted_messages_total[{RATE}]))", "deleted", "B")])
    b.panel("timeseries", "Interruption handling delay", "Seconds from an interruption event until it was "
            "handled.", quantiles("karpenter_interruption_message_queue_duration_seconds", qs=(0.5, 0.9)), "s")
    b.panel("timeseries", "Eviction requests", "Eviction requests while draining, by HTTP code (429: a "
            "PodDisruptionBudget said not now).",
            [target(f"sum by (code) (increase(karpenter_pods_eviction_requests_total[{RATE}]))", "{{code}}", "A")])
    b.panel("table", "Build", "The running version.",
            [target("max by (version, goversion, commit) (karpenter_build_info)", "{{version}}", "A", instant=True,
                    fmt="table")])
    return b.doc


def allocation() -> dict[str, Any]:
    """Karpenter's "Controllers / Allocation" dashboard (bind and scheduling durations), plus the scheduler's
    queue, unschedulable pods, pod wait times and requests against allocatable."""
    b = Board("nodewright-allocation", "nodewright allocation",
              "Scheduling and binding: simulation durations, queue depth, unschedulable pods, decision and bind "
              "latencies, requests vs allocatable (Karpenter's Controllers / Allocation dashboard).",
              [variable("nodepool", "NodePool", "label_values(karpenter_nodepools_usage, nodepool)")])
    b.stat("Pods in the last batch", "Pods handed to the last scheduling simulation.",
           "sum(karpenter_scheduler_queue_depth)")
    b.stat("Unschedulable pods", "Pods the last simulation could not place.",
           "sum(karpenter_scheduler_unschedulable_pods_count)")
    b.stat("Ignored pods", "Pending pods ignored because they could not be read.",
           "max(karpenter_scheduler_ignored_pods_count)")
    b.stat("Oldest undecided pod", "Seconds the oldest pending pod has waited for a scheduling decision.",
           "max(karpenter_pods_provisioning_scheduling_undecided_time_seconds) or vector(0)", "s")
    b.panel("heatmap", "Scheduling duration", "Scheduling simulations by duration bucket (Karpenter's scheduling "
            "and binpack durations).",
            [target(f"sum by (le) (increase(karpenter_scheduler_scheduling_duration_seconds_bucket[{RATE}]))",
                    "{{le}}", "A", fmt="heatmap")], "s", 24, options={"calculate": False})
    b.panel("heatmap", "Bind duration", "Seconds from pod creation until bound to a node, by bucket.",
            [target(f"sum by (le) (increase(karpenter_pods_bound_duration_seconds_bucket[{RATE}]))", "{{le}}", "A",
                    fmt="heatmap")], "s", 24, options={"calculate": False})
    b.panel("timeseries", "Scheduling decision latency", "Seconds from when the provisioner first saw a pod "
            "pending until its first scheduling decision, and from placement to bound.",
            [*quantiles("karpenter_pods_scheduling_decision_duration_seconds", qs=(0.5, 0.9)),
             target(f"histogram_quantile(0.9, sum by (le) (rate(karpenter_pods_provisioning_bound_duration_seconds_bucket[{RATE}])))",
                    "placed to bound p90", "C")], "s")
    b.panel("timeseries", "Pods waiting", "Longest wait of a pending pod: unbound, and not started.",
            [target("max(karpenter_pods_unbound_time_seconds)", "unbound", "A"),
             target("max(karpenter_pods_unstarted_time_seconds)", "unstarted", "B")], "s")
    b.panel("timeseries", "Cluster utilization", "Pod requests as a percentage of allocatable over all nodes.",
            [target("max by (resource_type) (karpenter_cluster_utilization_percent)", "{{resource_type}}", "A")],
            "percent")
    b.panel("timeseries", "CPU requests vs allocatable by NodePool", "Pod and DaemonSet cpu requests over "
            "allocatable cpu of each NodePool's nodes.",
            [target(f"{CPU_REQUESTED} / sum by (nodepool) "
                    '(karpenter_nodes_allocatable{resource_type="cpu",nodepool=~"$nodepool"})', "{{nodepool}}", "A")],
            "percentunit")
    b.panel("timeseries", "NodeClaims created by reason", "NodeClaims created per interval, by reason.",
            [target(f"sum by (nodepool, reason) (increase(karpenter_nodeclaims_created_total{{nodepool=~\"$nodepool\"}}"
                    f"[{RATE}]))", "{{nodepool}} {{reason}}", "A")])
    b.panel("table", "Pods by phase and NodePool", "Pods now, by phase and their node's NodePool.",
            [target('sum by (nodepool, phase) (karpenter_pods_state{nodepool=~"$nodepool|"})', "", "A", instant=True,
                    fmt="table")])
    return b.doc


def cost() -> dict[str, Any]:
    """List and effective $/h: per NodePool, per capacity type, per vCPU, idle share and savings."""
    list_ = 'nodewright_nodepool_cost_per_hour_usd{price="list",nodepool=~"$nodepool"}'
    effective = 'nodewright_nodepool_cost_per_hour_usd{price="effective",nodepool=~"$nodepool"}'
    b = Board("nodewright-cost", "nodewright cost",
              "What the nodes cost per hour at list prices and, under a PricingPolicy (Savings Plans, RIs, "
              "discounts), effective prices; by NodePool and capacity type, per vCPU, and the idle share.",
              [variable("nodepool", "NodePool", "label_values(karpenter_nodepools_usage, nodepool)")])
    b.stat("List $/h", "The NodePools' NodeClaims at on-demand/spot list prices.", f"sum({list_})", "currencyUSD")
    b.stat("Effective $/h", "Their share of the fleet's bill under the PricingPolicy (absent without one).",
           f"sum({effective})", "currencyUSD")
    b.stat("Saved by the policy", "1 - effective / list.", f"1 - sum({effective}) / sum({list_})", "percentunit")
    b.stat("List $ per month", "List $/h x 730 hours.", f"sum({list_}) * 730", "currencyUSD")
    b.panel("timeseries", "$/h per NodePool, list and effective", "Each NodePool's cost per hour.",
            [target(f"sum by (nodepool) ({list_})", "{{nodepool}} list", "A"),
             target(f"sum by (nodepool) ({effective})", "{{nodepool}} effective", "B")], "currencyUSD")
    b.panel("timeseries", "List $/h by capacity type", "Nodes x their offering's list price, by capacity type "
            "(nodes nodewright launched).",
            [target('sum by (capacity_type) (count by (instance_type, capacity_type, zone) '
                    '(karpenter_nodes_allocatable{resource_type="cpu",nodepool=~"$nodepool"}) * on (instance_type, '
                    'capacity_type, zone) group_left max by (instance_type, capacity_type, zone) '
                    '(karpenter_cloudprovider_instance_type_offering_price_estimate))', "{{capacity_type}}", "A")],
            "currencyUSD")
    b.panel("timeseries", "$/h per allocatable vCPU", "Cost per hour over allocatable cpu cores, list and "
            "effective.",
            [target(f'sum({list_}) / sum(karpenter_nodes_allocatable{{resource_type="cpu",nodepool=~"$nodepool"}})',
                    "list", "A"),
             target(f'sum({effective}) / sum(karpenter_nodes_allocatable{{resource_type="cpu",nodepool=~"$nodepool"}})',
                    "effective", "B")], "currencyUSD")
    b.panel("timeseries", "Idle $/h by NodePool (cpu)", "List $/h times the share of allocatable cpu no pod "
            "requests.",
            [target(f"sum by (nodepool) ({list_}) * (1 - {CPU_REQUESTED} / sum by (nodepool) "
                    '(karpenter_nodes_allocatable{resource_type="cpu",nodepool=~"$nodepool"}))', "{{nodepool}}", "A")],
            "currencyUSD")
    b.panel("table", "Cost by NodePool", "Karpenter's karpenter_nodepools_cost_total and nodewright's list and "
            "effective $/h.",
            [target('sum by (nodepool) (karpenter_nodepools_cost_total{nodepool=~"$nodepool"})', "", "A",
                    instant=True, fmt="table"),
             target(f"sum by (nodepool) ({effective})", "", "B", instant=True, fmt="table")], "currencyUSD")
    b.panel("table", "Cheapest available offerings", "The 15 lowest list prices among offerings the NodePools "
            "may launch now.",
            [target("bottomk(15, karpenter_cloudprovider_instance_type_offering_price_estimate * on (instance_type, "
                    "capacity_type, zone) (karpenter_cloudprovider_instance_type_offering_available == 1))", "", "A",
                    instant=True, fmt="table")], "currencyUSD")
    return b.doc


DASHBOARDS = {"nodewright-performance.json": performance, "nodewright-controllers.json": controllers,
              "nodewright-allocation.json": allocation, "nodewright-cost.json": cost}


def render(build: Any) -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a committed dashboard differs")
    args = parser.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        path, text = OUT / name, render(build)
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"stale: {', '.join(stale)}; run python scripts/build_dashboards.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
