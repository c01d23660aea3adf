"""The metrics the alerts and the controllers dashboard read that Karpenter exports through controller-runtime
and operator-pkg: reconcile counts/durations per controller, NodeClaim condition ages, termination ages."""

from __future__ import annotations

from nodewright.controllers.common import Context
from nodewright.controllers.condition_metrics import status_rows
from nodewright.controllers.manager import ControllerManager
from nodewright.controllers.state_metrics import StateMetricsController
from nodewright.kube import resources as r
from nodewright.kube.memory import InMemoryCluster
from nodewright.kube.objects import format_time

from .fakes import FakeClock

NOW = 1_800_000_000.0


def claim(name: str, created: float, conditions: list[dict[str, str]], deleted: float | None = None) -> dict:
    metadata = {"name": name, "creationTimestamp": format_time(created)}
    if deleted is not None:
        metadata["deletionTimestamp"] = format_time(deleted)
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": metadata,
            "status": {"conditions": conditions}}


def test_status_rows_count_unwritten_lifecycle_conditions_as_unknown_since_creation() -> None:
    launched = {"type": "Launched", "status": "True", "reason": "Launched", "lastTransitionTime": format_time(NOW - 60)}
    rows, terminating = status_rows([claim("a", NOW - 100, [launched]), claim("b", NOW - 50, [], deleted=NOW - 20)])
    assert rows == [
        ("a", "Launched", "True", "Launched", NOW - 60),
        ("a", "Initialized", "Unknown", "", NOW - 100), ("a", "Ready", "Unknown", "", NOW - 100),
        ("a", "Registered", "Unknown", "", NOW - 100),
        ("b", "Initialized", "Unknown", "", NOW - 50), ("b", "Launched", "Unknown", "", NOW - 50),
        ("b", "Ready", "Unknown", "", NOW - 50), ("b", "Registered", "Unknown", "", NOW - 50),
    ]
    assert terminating == [("b", NOW - 20)]


def test_state_metrics_export_condition_ages_and_drop_deleted_claims(ctx: Context, cluster: InMemoryCluster,
                                                                     clock: FakeClock) -> None:
    cluster.create(r.NODECLAIMS, claim("general-abc", 0, []))  # created now
    clock.advance(300)
    controller = StateMetricsController(ctx)
    controller.reconcile()
    value = ctx.metrics.value
    labels = {"name": "general-abc", "namespace": "", "type": "Ready", "status": "Unknown", "reason": ""}
    assert value("operator_nodeclaim_status_condition_current_status_seconds", labels) == 300.0
    assert value("operator_nodeclaim_status_condition_count", labels) == 1.0
    cluster.delete(r.NODECLAIMS, "general-abc")
    controller.reconcile()
    assert value("operator_nodeclaim_status_condition_count", labels) is None


def test_each_controller_pass_is_counted_with_its_result(ctx: Context) -> None:
    manager = ControllerManager(ctx)
    manager.state_metrics.reconcile = lambda state: (_ for _ in ()).throw(RuntimeError("boom"))  # type: ignore
    manager.step()
    value = manager.ctx.metrics.value
    assert value("controller_runtime_reconcile_total", {"controller": "provisioner", "result": "success"}) == 1.0
    assert value("controller_runtime_reconcile_total", {"controller": "metrics.state", "result": "error"}) == 1.0
    assert value("controller_runtime_reconcile_errors_total", {"controller": "metrics.state"}) == 1.0
    assert value("controller_runtime_reconcile_time_seconds_count", {"controller": "lifecycle"}) == 1.0
