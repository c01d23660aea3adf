"""Interruption handling: EC2 spot interruption warnings, scheduled maintenance and instance state changes.

Karpenter's AWS interruption controller: EventBridge rules forward EC2 events to an SQS queue
(``INTERRUPTION_QUEUE``); for a spot interruption warning (2 minutes' notice), an AWS Health scheduled
change, a capacity reservation interruption, or an instance state change to ``stopping``/``stopped``/
``shutting-down``/``terminated``, the NodeClaim of that instance is cordoned and drained (its Node tainted
``karpenter.sh/disrupted:NoSchedule``, the NodeClaim deleted); the provisioner launches replacements for its
pods while it drains. A spot interruption also keeps that spot offering out of launches for a while (the
cloud provider's ``mark_spot_interrupted``). Rebalance recommendations are only recorded as
events. Messages are deleted from the queue once handled.

There is one parser of the EventBridge messages: :func:`nodewright.cloud.aws.interruption.parse_event`; the
production source is :class:`nodewright.cloud.aws.interruption.InterruptionQueue` (its ``receive``/``delete``),
tests and the simulator pass any :class:`InterruptionSource`.
"""

from __future__ import annotations

from typing import Protocol

from nodewright.api import labels as L
from nodewright.cloud.aws.interruption import (
    KIND_CAPACITY_RESERVATION,
    KIND_REBALANCE,
    KIND_SCHEDULED_CHANGE,
    KIND_SPOT_INTERRUPTION,
    KIND_STATE_CHANGE,
    InterruptionMessage,
)
from nodewright.controllers.common import Context, log
from nodewright.controllers.termination import Terminator
from nodewright.kube.errors import KubeError
from nodewright.kube.objects import labels_of, name_of, parse_time
from nodewright.state.cluster import ClusterState, provider_id_of, snapshot

__all__ = [
    "CAPACITY_RESERVATION", "REBALANCE", "SCHEDULED_CHANGE", "SPOT_INTERRUPTION", "STATE_CHANGE",
    "InterruptionController", "InterruptionMessage", "InterruptionSource",
]

SPOT_INTERRUPTION = KIND_SPOT_INTERRUPTION
SCHEDULED_CHANGE = KIND_SCHEDULED_CHANGE
STATE_CHANGE = KIND_STATE_CHANGE
REBALANCE = KIND_REBALANCE
CAPACITY_RESERVATION = KIND_CAPACITY_RESERVATION


class InterruptionSource(Protocol):
    """Where interruption messages come from (SQS in production, a list in tests and the simulator)."""

    def receive(self) -> list[InterruptionMessage]:
        """Messages available now (may be empty); must not block for long."""
        ...

    def delete(self, message: InterruptionMessage) -> None:
        """Acknowledge a handled message."""
        ...


class InterruptionController:
    """Drains the NodeClaims of interrupted instances (see module docstring)."""

    def __init__(self, ctx: Context, source: InterruptionSource, terminator: Terminator | None = None) -> None:
        self.ctx = ctx
        self.source = source
        self.terminator = terminator or Terminator(ctx)

    def reconcile(self, state: ClusterState | None = None) -> int:
        """Handle every available message; returns how many NodeClaims were disrupted."""
        try:
            messages = self.source.receive()
        except Exception as err:  # boto3 raises many types; a failed poll is retried next pass
            log.warning("receiving interruption messages failed: %s", err)
            return 0
        if not messages:
            return 0
        state = state or snapshot(self.ctx.cluster)
        by_instance = {provider_id_of(c).rsplit("/", 1)[-1]: c for c in state.nodeclaims.values()
                       if provider_id_of(c)}
        disrupted = 0
        for message in messages:
            self.ctx.metrics.interruption_received.labels(message.kind).inc()
            sent = parse_time(message.time)
            if sent is not None:  # Karpenter: from the event's time until it is handled
                self.ctx.metrics.interruption_queue_duration.observe(max(0.0, self.ctx.clock() - sent))
            for instance_id in message.instance_ids:
                claim = by_instance.get(instance_id)
                if claim is None:
                    continue
                if not message.actionable:
                    self.ctx.event(claim, message.kind, f"{message.kind} for {instance_id}")
                    continue
                log.info("interruption: %s for instance %s, draining nodeclaim %s", message.kind, instance_id,
                         name_of(claim), extra={"nodeclaim": name_of(claim), "detail": message.detail})
                if message.kind == SPOT_INTERRUPTION:
                    self._mark_spot_interrupted(claim)
                try:
                    if self.terminator.delete_nodeclaim(name_of(claim), "Interrupted", message.kind):
                        disrupted += 1
                except KubeError as err:
                    log.warning("disrupting %s failed: %s", name_of(claim), err)
                    continue
            try:
                self.source.delete(message)
                self.ctx.metrics.interruption_deleted.inc()
            except Exception as err:  # the message reappears after its visibility timeout: harmless
                log.warning("deleting interruption message failed: %s", err)
        return disrupted

    def _mark_spot_interrupted(self, claim: dict[str, object]) -> None:
        """Tell the cloud provider the claim's spot offering was interrupted (AWS keeps it out for a while)."""
        labels = labels_of(claim)
        if labels.get(L.INSTANCE_TYPE) and labels.get(L.ZONE):
            self.ctx.cloud.mark_spot_interrupted(labels[L.INSTANCE_TYPE], labels[L.ZONE])
