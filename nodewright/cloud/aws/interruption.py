"""The interruption queue: EventBridge events delivered to SQS, parsed into typed messages.

Events handled (AWS EventBridge event shapes, as the EC2 and AWS Health user guides document them):

=====================================================  =============  ======================================
``source`` / ``detail-type``                           kind           action
=====================================================  =============  ======================================
aws.ec2 / EC2 Spot Instance Interruption Warning       spot           cordon-and-drain; spot offering
                                                       interruption   marked unavailable
aws.ec2 / EC2 Instance Rebalance Recommendation        rebalance      event only
aws.ec2 / EC2 Instance State-change Notification       state change   cordon-and-drain for ``stopping``,
                                                                      ``stopped``, ``shutting-down``,
                                                                      ``terminated``; others ignored
aws.health / AWS Health Event (EC2, scheduledChange)   scheduled      cordon-and-drain, every affected
                                                       change         instance
aws.ec2 / EC2 Capacity Reservation Instance            capacity       cordon-and-drain
Interruption Warning                                   reservation
=====================================================  =============  ======================================

:class:`InterruptionQueue` long-polls (``ReceiveMessage`` with ``WaitTimeSeconds=20``, batches of 10),
hands each parsed message to a handler and deletes it once handled. A malformed message is logged and
deleted (it would never parse on redelivery); a handler that raises leaves its message for redelivery after
the visibility timeout. Nothing a message contains can crash the loop.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from nodewright.cloud.aws.errors import TRANSPORT_ERRORS

log = logging.getLogger(__name__)

KIND_SPOT_INTERRUPTION = "SpotInterruption"
KIND_REBALANCE = "RebalanceRecommendation"
KIND_STATE_CHANGE = "StateChange"
KIND_SCHEDULED_CHANGE = "ScheduledChange"
KIND_CAPACITY_RESERVATION = "CapacityReservationInterruption"
KIND_NOOP = "NoOp"

ACTION_CORDON_AND_DRAIN = "CordonAndDrain"
ACTION_EVENT_ONLY = "EventOnly"
ACTION_NONE = "None"

STOPPING_STATES = frozenset({"stopping", "stopped", "shutting-down", "terminated"})
RECEIVE_WAIT_SECONDS = 20
RECEIVE_BATCH = 10


class MalformedMessageError(ValueError):
    """An SQS body that is not an EventBridge event we can read."""


@dataclass(frozen=True, slots=True)
class InterruptionMessage:
    """A parsed interruption event.

    Attributes:
        kind: one of the ``KIND_*`` constants.
        instance_ids: EC2 instance ids the event is about (``i-...``).
        action: ``CordonAndDrain``, ``EventOnly`` or ``None`` (ignored).
        event_id: the EventBridge event ``id``.
        time: the event ``time`` (ISO 8601 text).
        detail: for logs -- e.g. the new instance state or the Health event type code.
        receipt_handle: the SQS receipt handle (set by :meth:`InterruptionQueue.receive`, for ``delete``).
    """

    kind: str
    instance_ids: tuple[str, ...]
    action: str
    event_id: str = ""
    time: str = ""
    detail: str = ""
    receipt_handle: str = ""

    @property
    def actionable(self) -> bool:
        """Whether the instances must be cordoned and drained (action ``CordonAndDrain``)."""
        return self.action == ACTION_CORDON_AND_DRAIN


def _instance_id(detail: Mapping[str, Any]) -> str:
    instance_id = detail.get("instance-id")
    if not isinstance(instance_id, str) or not instance_id.startswith("i-"):
        raise MalformedMessageError(f"detail.instance-id missing or not an instance id: {instance_id!r}")
    return instance_id


def parse_event(body: str) -> InterruptionMessage:
    """Parse one SQS message body (an EventBridge event, JSON).

    Unknown but well-formed events parse as kind ``NoOp`` with action ``None``.

    Raises:
        MalformedMessageError: not JSON, not an object, or missing the fields its type requires.
    """
    try:
        event = json.loads(body)
    except (json.JSONDecodeError, TypeError) as err:
        raise MalformedMessageError(f"body is not JSON: {err}") from err
    if not isinstance(event, dict):
        raise MalformedMessageError("body is not a JSON object")
    source, detail_type = event.get("source"), event.get("detail-type")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise MalformedMessageError(f"event {detail_type!r} has no detail object")
    meta = {"event_id": str(event.get("id", "")), "time": str(event.get("time", ""))}
    if source == "aws.ec2" and detail_type == "EC2 Spot Instance Interruption Warning":
        return InterruptionMessage(KIND_SPOT_INTERRUPTION, (_instance_id(detail),), ACTION_CORDON_AND_DRAIN,
                                   detail=str(detail.get("instance-action", "")), **meta)
    if source == "aws.ec2" and detail_type == "EC2 Instance Rebalance Recommendation":
        return InterruptionMessage(KIND_REBALANCE, (_instance_id(detail),), ACTION_EVENT_ONLY, **meta)
    if source == "aws.ec2" and detail_type == "EC2 Instance State-change Notification":
        state = str(detail.get("state", ""))
        action = ACTION_CORDON_AND_DRAIN if state in STOPPING_STATES else ACTION_NONE
        return InterruptionMessage(KIND_STATE_CHANGE, (_instance_id(detail),), action, detail=state, **meta)
    if source == "aws.ec2" and detail_type == "EC2 Capacity Reservation Instance Interruption Warning":
        return InterruptionMessage(KIND_CAPACITY_RESERVATION, (_instance_id(detail),), ACTION_CORDON_AND_DRAIN,
                                   detail=str(detail.get("instance-action", "")), **meta)
    if source == "aws.health" and detail_type == "AWS Health Event":
        return _health(detail, meta)
    return InterruptionMessage(KIND_NOOP, (), ACTION_NONE, detail=f"{source}/{detail_type}", **meta)


def _health(detail: Mapping[str, Any], meta: dict[str, str]) -> InterruptionMessage:
    if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
        return InterruptionMessage(KIND_NOOP, (), ACTION_NONE, detail=str(detail.get("eventTypeCode", "")), **meta)
    entities = detail.get("affectedEntities")
    if not isinstance(entities, list):
        raise MalformedMessageError("AWS Health scheduledChange event without affectedEntities")
    ids = tuple(str(e.get("entityValue")) for e in entities
                if isinstance(e, dict) and str(e.get("entityValue", "")).startswith("i-"))
    if not ids:
        raise MalformedMessageError("AWS Health scheduledChange event names no EC2 instance")
    return InterruptionMessage(KIND_SCHEDULED_CHANGE, ids, ACTION_CORDON_AND_DRAIN,
                               detail=str(detail.get("eventTypeCode", "")), **meta)


Handler = Callable[[InterruptionMessage], None]


class InterruptionQueue:
    """The interruption queue: pollable (:meth:`receive` + :meth:`delete`, what the controller's run loop and the
    simulator use) or handler-driven (:meth:`poll_once` / :meth:`run` dispatch to ``handler``)."""

    def __init__(self, sqs: Any, queue_url: str, handler: Handler | None = None,
                 wait_seconds: int = RECEIVE_WAIT_SECONDS) -> None:
        self._sqs = sqs
        self.queue_url = queue_url
        self._handler = handler
        self.wait_seconds = wait_seconds
        self.malformed = 0
        """Count of malformed messages deleted (a metric source)."""
        self.receive_failed = False
        """Whether the last ``ReceiveMessage`` failed (the run loop then waits before polling again)."""

    @classmethod
    def from_name(cls, sqs: Any, queue_name: str, handler: Handler | None = None,
                  wait_seconds: int = RECEIVE_WAIT_SECONDS) -> InterruptionQueue:
        """Resolve ``queue_name`` (``INTERRUPTION_QUEUE``) with ``GetQueueUrl``.

        Raises:
            botocore.exceptions.ClientError: the queue does not exist or access is denied.
        """
        return cls(sqs, sqs.get_queue_url(QueueName=queue_name)["QueueUrl"], handler, wait_seconds)

    def receive(self) -> list[InterruptionMessage]:
        """One ``ReceiveMessage`` round (up to 10, ``wait_seconds`` long poll): the parsed messages, each carrying
        its ``receipt_handle``. Malformed messages are deleted at once and not returned. Never raises for SQS
        errors (logged; an empty round)."""
        self.receive_failed = False
        try:
            received = self._sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=RECEIVE_BATCH,
                                                 WaitTimeSeconds=self.wait_seconds).get("Messages", [])
        except (ClientError, *TRANSPORT_ERRORS) as err:
            log.error("receiving from the interruption queue failed", extra={"queue": self.queue_url,
                                                                              "error": str(err)})
            self.receive_failed = True
            return []
        messages: list[InterruptionMessage] = []
        for raw in received:
            try:
                message = parse_event(raw.get("Body", ""))
            except MalformedMessageError as err:
                self.malformed += 1
                log.warning("deleting malformed interruption message",
                            extra={"message_id": raw.get("MessageId", ""), "error": str(err)})
                self._delete(raw)
                continue
            messages.append(replace(message, receipt_handle=str(raw.get("ReceiptHandle", ""))))
        return messages

    def delete(self, message: InterruptionMessage) -> None:
        """``DeleteMessage`` for a message :meth:`receive` returned (handled). Never raises for SQS errors."""
        self._delete({"ReceiptHandle": message.receipt_handle})

    def poll_once(self) -> list[InterruptionMessage]:
        """One ``ReceiveMessage`` round: parse, handle, delete. Returns the messages handled.

        Never raises for message content; SQS errors are logged and yield an empty round.

        Raises:
            ValueError: the queue was built without a handler (use :meth:`receive` instead).
        """
        if self._handler is None:
            raise ValueError("InterruptionQueue.poll_once needs a handler; use receive() and delete()")
        handled: list[InterruptionMessage] = []
        for message in self.receive():
            try:
                self._handler(message)
            except Exception:  # a handler bug must not stop the loop; SQS redelivers later
                log.exception("handling interruption message failed", extra={"kind": message.kind,
                                                                             "instances": list(message.instance_ids)})
                continue
            self.delete(message)
            handled.append(message)
        return handled

    def _delete(self, raw: Mapping[str, Any]) -> None:
        try:
            self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=raw["ReceiptHandle"])
        except (ClientError, *TRANSPORT_ERRORS, KeyError) as err:
            log.error("deleting interruption message failed", extra={"error": str(err)})

    def run(self, stop: threading.Event, error_backoff_seconds: float = 5.0) -> None:
        """Poll until ``stop`` is set (checked between long-polls, so it returns within ``wait_seconds``).

        After a failed receive it waits ``error_backoff_seconds`` so a broken queue is not hammered.
        """
        while not stop.is_set():
            self.poll_once()
            if self.receive_failed:
                stop.wait(error_backoff_seconds)
