"""CapacityBuffers through the controllers: the buffer controller's status, the provisioner launching for virtual
pods (never nominating them), refill when real pods take the room, the gate off, and the consolidation guard."""

from __future__ import annotations

import logging
from typing import Any

from nodewright.api import capacitybuffer as cb
from nodewright.api import labels as L
from nodewright.controllers.buffer import CapacityBufferController
from nodewright.controllers.common import Context
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.kube import resources as r
from nodewright.kube.objects import condition
from nodewright.state.cluster import snapshot

from .conftest import pending_pod

TEMPLATE = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "web", "namespace": "default"},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}}}


def capacity_buffer(replicas: int = 2) -> dict[str, Any]:
    return {"apiVersion": cb.API_VERSION, "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "default"},
            "spec": {"podTemplateRef": {"name": "web"}, "replicas": replicas}}


def ready_node(name: str = "ip-10-0-0-9.ec2.internal", cpu: str = "4") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {L.HOSTNAME: name, L.ZONE: "us-east-1a", "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"}},
            "spec": {}, "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


class Harness:
    def __init__(self, ctx: Context, enabled: bool = True) -> None:
        self.ctx = ctx
        self.buffers = CapacityBufferController(ctx, enabled=enabled)
        self.prov = Provisioner(ctx, Batcher(1.0, 10.0), buffers=self.buffers)

    def step(self):
        state = snapshot(self.ctx.cluster)
        self.buffers.reconcile(state)
        return self.prov.reconcile(snapshot(self.ctx.cluster))

    def buffer(self) -> dict[str, Any]:
        return self.ctx.cluster.get(r.CAPACITYBUFFERS, "headroom", "default")


def test_a_buffer_alone_launches_capacity_and_reports_requires_new_capacity(ctx, cluster) -> None:
    cluster.create(r.PODTEMPLATES, TEMPLATE)
    cluster.create(r.CAPACITYBUFFERS, capacity_buffer(2))
    h = Harness(ctx)
    result = h.step()  # a new buffer runs at once: no batch window to wait for
    assert result is not None and len(result.new_nodeclaims) == 1
    assert sorted(p.key for p in result.new_nodeclaims[0].pods) == [
        "default/capacity-buffer-headroom-1", "default/capacity-buffer-headroom-2"]
    claims = cluster.list(r.NODECLAIMS)
    assert len(claims) == 1 and claims[0]["spec"]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi", "pods": "2"}
    assert h.prov.nominations == {}  # virtual pods are never nominated (nor bound)
    assert cluster.list(r.PODS) == []
    status = h.buffer()["status"]
    assert status["replicas"] == 2 and status["podTemplateRef"] == {"name": "web"}
    assert status["provisioningStrategy"] == cb.ACTIVE_CAPACITY
    ready = condition(h.buffer(), cb.READY_FOR_PROVISIONING)
    assert (ready["status"], ready["reason"]) == ("True", "Resolved")
    prov = condition(h.buffer(), cb.PROVISIONING)
    assert (prov["status"], prov["reason"], prov["message"]) == (
        "False", "RequiresNewCapacity", "2/2 virtual pods required new capacity, 0 failed")
    # Next pass: the in-flight NodeClaim's room holds the buffer; nothing more is launched.
    assert h.step() is None and len(cluster.list(r.NODECLAIMS)) == 1


def test_existing_room_holds_the_buffer_and_real_pods_taking_it_trigger_a_refill(ctx, cluster, clock) -> None:
    cluster.create(r.NODES, ready_node(cpu="4"))
    cluster.create(r.PODTEMPLATES, TEMPLATE)
    cluster.create(r.CAPACITYBUFFERS, capacity_buffer(2))
    h = Harness(ctx)
    result = h.step()
    assert result is not None and result.new_nodeclaims == []
    assert sorted(p.key for p in result.existing["ip-10-0-0-9.ec2.internal"]) == [
        "default/capacity-buffer-headroom-1", "default/capacity-buffer-headroom-2"]
    prov = condition(h.buffer(), cb.PROVISIONING)
    assert (prov["status"], prov["reason"], prov["message"]) == (
        "True", "FitsExistingCapacity", "All 2 virtual pods fit on existing capacity")
    assert [p.key for p in h.buffers.held()["ip-10-0-0-9.ec2.internal"]] == [
        "default/capacity-buffer-headroom-1", "default/capacity-buffer-headroom-2"]
    clock.advance(5)
    assert h.step() is None  # nothing changed: the next buffer-only run waits for the 30 s refresh
    # A real pod lands in the buffered room at once (kube-scheduler binds it: the room looks free).
    pod = pending_pod("burst", cpu="3500m")
    pod["spec"]["nodeName"] = "ip-10-0-0-9.ec2.internal"
    pod["status"] = {"phase": "Running"}
    cluster.create(r.PODS, pod)
    clock.advance(1)
    result = h.step()  # the hold is gone: a refill run at once, for new capacity
    assert result is not None and len(result.new_nodeclaims) == 1
    assert len(cluster.list(r.NODECLAIMS)) == 1
    assert condition(h.buffer(), cb.PROVISIONING)["reason"] == "RequiresNewCapacity"


def test_real_pending_pods_and_the_buffer_are_planned_together(ctx, cluster, clock) -> None:
    cluster.create(r.PODTEMPLATES, TEMPLATE)
    cluster.create(r.CAPACITYBUFFERS, capacity_buffer(1))
    cluster.create(r.PODS, pending_pod("web-0"))
    h = Harness(ctx)
    assert h.step() is None  # the real pod opened a batch window: the buffer does not cut it short
    clock.advance(1)
    result = h.step()
    planned = sorted(p.key for plan in result.new_nodeclaims for p in plan.pods)
    assert planned == ["default/capacity-buffer-headroom-1", "default/web-0"]
    assert set(h.prov.nominations) == {"default/web-0"}


def test_a_bad_buffer_is_reported_once_and_written_not_ready(ctx, cluster, caplog) -> None:
    cluster.create(r.CAPACITYBUFFERS, capacity_buffer(2))  # no PodTemplate "web"
    h = Harness(ctx)
    caplog.set_level(logging.ERROR, logger="nodewright")
    assert h.step() is None and cluster.list(r.NODECLAIMS) == []
    h.step()
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert errors == ["CapacityBuffer default/headroom: spec.podTemplateRef.name: PodTemplate default/web not found"]
    ready = condition(h.buffer(), cb.READY_FOR_PROVISIONING)
    assert (ready["status"], ready["reason"]) == ("False", "PodTemplateNotFound")


def test_gate_off_ignores_buffers_and_warns_once(ctx, cluster, clock, caplog) -> None:
    cluster.create(r.PODTEMPLATES, TEMPLATE)
    cluster.create(r.CAPACITYBUFFERS, capacity_buffer(2))
    h = Harness(ctx, enabled=False)
    caplog.set_level(logging.WARNING, logger="nodewright")
    for _ in range(3):
        assert h.step() is None
        clock.advance(31)
    assert cluster.list(r.NODECLAIMS) == [] and "status" not in h.buffer()
    warnings = [rec.getMessage() for rec in caplog.records if "CapacityBuffer" in rec.getMessage()]
    assert warnings == ["1 CapacityBuffer(s) ignored (default/headroom): the CapacityBuffer feature gate is off; "
                        "set FEATURE_GATES=CapacityBuffer=true (chart: settings.featureGates.capacityBuffer) to "
                        "hold their headroom"]


def test_a_buffer_is_resolved_again_only_when_its_inputs_change(ctx, cluster, clock, monkeypatch) -> None:
    import nodewright.controllers.buffer as module

    calls: list[str] = []
    real = module.resolve

    def counting(doc, *args, **kwargs):
        calls.append(doc["metadata"]["name"])
        return real(doc, *args, **kwargs)

    monkeypatch.setattr(module, "resolve", counting)
    cluster.create(r.PODTEMPLATES, TEMPLATE)
    cluster.create(r.CAPACITYBUFFERS, capacity_buffer(2))
    h = Harness(ctx)
    for _ in range(3):  # the status writes of the first pass change the buffer's resourceVersion, not its spec
        h.step()
        clock.advance(1)
    assert calls == ["headroom"]
    cluster.patch(r.PODTEMPLATES, "web", {"template": {"metadata": {"labels": {"app": "web", "v": "2"}}}}, "default")
    h.step()
    assert calls == ["headroom", "headroom"]
    assert h.buffers.virtual_pods()[0].labels == {"app": "web", "v": "2"}


def test_status_writes_build_on_the_last_write_not_a_stale_cache(ctx, cluster, clock, monkeypatch) -> None:
    """An informer may serve the buffer without the ReadyForProvisioning condition just written; the Provisioning
    write must not drop it (a merge patch replaces the whole conditions list)."""
    cluster.create(r.PODTEMPLATES, TEMPLATE)
    cluster.create(r.CAPACITYBUFFERS, capacity_buffer(2))
    stale = cluster.get(r.CAPACITYBUFFERS, "headroom", "default")  # before any status
    h = Harness(ctx)
    real_list = cluster.list

    def lagging(kind, *args, **kwargs):
        return [stale] if kind == r.CAPACITYBUFFERS else real_list(kind, *args, **kwargs)

    monkeypatch.setattr(cluster, "list", lagging)
    h.step()
    conditions = {c["type"]: c["status"] for c in h.buffer()["status"]["conditions"]}
    assert conditions == {"ReadyForProvisioning": "True", "Provisioning": "False"}
