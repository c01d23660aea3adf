"""Interruption handling: EC2 spot interruption warnings, scheduled maintenance and instance state changes.

Karpenter's AWS interruption controller: EventBridge rules forward EC2 events to an SQS queue
(``INTERRUPTION_QUEUE``); for a spot interruption warning (2 minutes' notice), an AWS Health scheduled
change, or an instance state change to ``stopping``/``stopped``/``shutting-down``/``terminated``, the
NodeClaim of that instance is cordoned and drained (its Node tainted ``karpenter.sh/disrupted:NoSchedule``,
the NodeClaim deleted); the provisioner launches replacements for its pods while it drains. Rebalance
recommendations are only recorded. Messages are deleted from the queue once handled (or unparseable).

Event shapes: "EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation",
"EC2 Instance State-change Notification" and "AWS Health Event" (source ``aws.health``), as documented in
the Amazon EC2 and AWS Health EventBridge references.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from nodewright.controllers.common import Context, log
from nodewright.controllers.termination import Terminator
from nodewright.kube.errors import KubeError
from nodewright.kube.objects import name_of
from nodewright.state.cluster import ClusterState, provider_id_of, snapshot

SPOT_INTERRUPTION = "SpotInterruption"
SCHEDULED_CHANGE = "ScheduledChange"
STATE_CHANGE = "StateChange"
REBALANCE = "RebalanceRecommendation"
#: Instance states that mean the node is going away (Karpenter acts on these).
ACTIONABLE_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})


@dataclass(frozen=True)
class InterruptionMessage:
    """One parsed queue message.

    Attributes:
        kind: :data:`SPOT_INTERRUPTION`, :data:`SCHEDULED_CHANGE`, :data:`STATE_CHANGE`, :data:`REBALANCE`
            or ``"NoOp"`` (an event we do not act on).
        instance_ids: EC2 instance ids concerned.
        state: for state changes, the new instance state.
        handle: the queue's receipt handle (to delete the message).
    """

    kind: str
    instance_ids: tuple[str, ...]
    state: str = ""
    handle: str = ""

    @property
    def actionable(self) -> bool:
        """Whether the instances must be drained."""
        if self.kind == STATE_CHANGE:
            return self.state in ACTIONABLE_STATES
        return self.kind in (SPOT_INTERRUPTION, SCHEDULED_CHANGE)


def parse_event(body: Mapping[str, Any], handle: str = "") -> InterruptionMessage:
    """An :class:`InterruptionMessage` from an EventBridge event (the SQS message body, decoded)."""
    detail_type = str(body.get("detail-type") or "")
    detail = body.get("detail") or {}
    if body.get("source") == "aws.health" or detail_type == "AWS Health Event":
        ids = tuple(str(e.get("entityValue")) for e in detail.get("affectedEntities") or [] if e.get("entityValue"))
        return InterruptionMessage(SCHEDULED_CHANGE, ids, handle=handle)
    instance = str(detail.get("instance-id") or "")
    ids = (instance,) if instance else ()
    if detail_type == "EC2 Spot Instance Interruption Warning":
        return InterruptionMessage(SPOT_INTERRUPTION, ids, handle=handle)
    if detail_type == "EC2 Instance Rebalance Recommendation":
        return InterruptionMessage(REBALANCE, ids, handle=handle)
    if detail_type == "EC2 Instance State-change Notification":
        return InterruptionMessage(STATE_CHANGE, ids, state=str(detail.get("state") or ""), handle=handle)
    return InterruptionMessage("NoOp", ids, handle=handle)


class InterruptionSource(Protocol):
    """Where interruption messages come from (SQS in production, a list in tests and the simulator)."""

    def receive(self) -> list[InterruptionMessage]:
        """Messages available now (may be empty); must not block for long."""
        ...

    def delete(self, message: InterruptionMessage) -> None:
        """Acknowledge a handled message."""
        ...


class SQSInterruptionQueue:
    """:class:`InterruptionSource` over an SQS queue (boto3 client).

    Args:
        sqs: a boto3 ``sqs`` client.
        queue_url: the queue URL (``GetQueueUrl`` of ``INTERRUPTION_QUEUE``).
        wait_seconds: long-poll seconds per receive (0-20); the run loop calls from its own thread.
    """

    def __init__(self, sqs: Any, queue_url: str, wait_seconds: int = 0) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        self.wait_seconds = wait_seconds

    @classmethod
    def from_name(cls, sqs: Any, queue_name: str, wait_seconds: int = 0) -> SQSInterruptionQueue:
        """Resolve ``queue_name`` to its URL."""
        return cls(sqs, sqs.get_queue_url(QueueName=queue_name)["QueueUrl"], wait_seconds)

    def receive(self) -> list[InterruptionMessage]:
        """Up to 10 messages (``ReceiveMessage``); unparseable bodies become ``NoOp`` messages."""
        reply = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10,
                                         WaitTimeSeconds=self.wait_seconds)
        out = []
        for msg in reply.get("Messages") or []:
            try:
                body = json.loads(msg.get("Body") or "{}")
            except ValueError:
                body = {}
            out.append(parse_event(body if isinstance(body, dict) else {}, msg["ReceiptHandle"]))
        return out

    def delete(self, message: InterruptionMessage) -> None:
        """``DeleteMessage`` by receipt handle."""
        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message.handle)


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
            for instance_id in message.instance_ids:
                claim = by_instance.get(instance_id)
                if claim is None:
                    continue
                if not message.actionable:
                    self.ctx.event(claim, message.kind, f"{message.kind} for {instance_id}")
                    continue
                log.info("interruption: %s for instance %s, draining nodeclaim %s", message.kind, instance_id,
                         name_of(claim), extra={"nodeclaim": name_of(claim), "state": message.state})
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
