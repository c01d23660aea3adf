"""Interruption events: one sample body per EventBridge event type (shapes from the EC2 / AWS Health user
guides), and the SQS loop (moto) deleting handled and malformed messages."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from aws.conftest import REGION
from nodewright.cloud.aws.interruption import (
    ACTION_CORDON_AND_DRAIN,
    ACTION_EVENT_ONLY,
    ACTION_NONE,
    InterruptionMessage,
    InterruptionQueue,
    MalformedMessageError,
    parse_event,
)

ACCOUNT = "111122223333"


def _event(source: str, detail_type: str, detail: dict[str, Any], resources: list[str] | None = None) -> str:
    return json.dumps({"version": "0", "id": "7bf73129-1428-4cd3-a780-95db273d1602", "detail-type": detail_type,
                       "source": source, "account": ACCOUNT, "time": "2026-07-20T12:00:00Z", "region": REGION,
                       "resources": resources or [], "detail": detail})


SPOT = _event("aws.ec2", "EC2 Spot Instance Interruption Warning",
              {"instance-id": "i-1234567890abcdef0", "instance-action": "terminate"},
              [f"arn:aws:ec2:us-east-1b:{ACCOUNT}:instance/i-1234567890abcdef0"])
REBALANCE = _event("aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": "i-1234567890abcdef0"})
HEALTH = _event("aws.health", "AWS Health Event", {
    "eventArn": "arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/1",
    "service": "EC2", "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "eventTypeCategory": "scheduledChange",
    "startTime": "Mon, 20 Jul 2026 18:00:00 GMT",
    "affectedEntities": [{"entityValue": "i-0aaa"}, {"entityValue": "i-0bbb"}]})
CAPACITY_RESERVATION = _event("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning",
                              {"instance-id": "i-0ccc", "instance-action": "terminate"})


def _state(state: str) -> str:
    return _event("aws.ec2", "EC2 Instance State-change Notification", {"instance-id": "i-0ddd", "state": state})


def test_spot_interruption_warning() -> None:
    assert parse_event(SPOT) == InterruptionMessage("SpotInterruption", ("i-1234567890abcdef0",),
                                                    ACTION_CORDON_AND_DRAIN, "7bf73129-1428-4cd3-a780-95db273d1602",
                                                    "2026-07-20T12:00:00Z", "terminate")


def test_rebalance_recommendation_is_event_only() -> None:
    message = parse_event(REBALANCE)
    assert (message.kind, message.instance_ids, message.action) == ("RebalanceRecommendation",
                                                                    ("i-1234567890abcdef0",), ACTION_EVENT_ONLY)


@pytest.mark.parametrize(("state", "action"), [("stopping", ACTION_CORDON_AND_DRAIN), ("stopped", ACTION_CORDON_AND_DRAIN),
                                               ("shutting-down", ACTION_CORDON_AND_DRAIN),
                                               ("terminated", ACTION_CORDON_AND_DRAIN), ("running", ACTION_NONE),
                                               ("pending", ACTION_NONE)])
def test_state_change(state: str, action: str) -> None:
    message = parse_event(_state(state))
    assert (message.kind, message.instance_ids, message.action, message.detail) == ("StateChange", ("i-0ddd",),
                                                                                    action, state)


def test_health_scheduled_change_names_every_instance() -> None:
    message = parse_event(HEALTH)
    assert (message.kind, message.instance_ids, message.action, message.detail) == (
        "ScheduledChange", ("i-0aaa", "i-0bbb"), ACTION_CORDON_AND_DRAIN, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED")


def test_capacity_reservation_interruption() -> None:
    message = parse_event(CAPACITY_RESERVATION)
    assert (message.kind, message.instance_ids, message.action) == ("CapacityReservationInterruption", ("i-0ccc",),
                                                                    ACTION_CORDON_AND_DRAIN)


def test_unknown_and_non_ec2_health_events_are_noops() -> None:
    assert parse_event(_event("aws.ec2", "EC2 AMI State Change", {"ImageId": "ami-1"})).action == ACTION_NONE
    other = _event("aws.health", "AWS Health Event", {"service": "RDS", "eventTypeCategory": "scheduledChange"})
    assert parse_event(other).kind == "NoOp"


@pytest.mark.parametrize("body", ["not json", "[1, 2]", _event("aws.ec2", "EC2 Spot Instance Interruption Warning",
                                                                   {"instance-action": "terminate"}),
                                  json.dumps({"source": "aws.ec2", "detail-type": "EC2 Instance Rebalance "
                                              "Recommendation"}),
                                  _event("aws.health", "AWS Health Event", {"service": "EC2",
                                                                            "eventTypeCategory": "scheduledChange"})])
def test_malformed_bodies_raise(body: str) -> None:
    with pytest.raises(MalformedMessageError):
        parse_event(body)


def test_queue_handles_deletes_and_survives_malformed_and_failing_handlers(moto: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="nodewright-demo", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    for body in (SPOT, "{broken", _state("stopping"), REBALANCE):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    seen: list[str] = []

    def handler(message: InterruptionMessage) -> None:
        if message.kind == "RebalanceRecommendation":
            raise RuntimeError("handler bug")
        seen.append(message.kind)

    queue = InterruptionQueue(sqs, url, handler, wait_seconds=0)
    handled = queue.poll_once()
    assert [m.kind for m in handled] == ["SpotInterruption", "StateChange"] == seen
    assert queue.malformed == 1
    left = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["detail-type"] for m in left] == ["EC2 Instance Rebalance Recommendation"]


def test_pull_style_receive_and_delete_by_queue_name(moto: None) -> None:
    sqs = boto3.client("sqs", region_name=REGION)
    sqs.create_queue(QueueName="nodewright-demo", Attributes={"VisibilityTimeout": "0"})
    queue = InterruptionQueue.from_name(sqs, "nodewright-demo", wait_seconds=0)
    for body in (HEALTH, "null"):
        sqs.send_message(QueueUrl=queue.queue_url, MessageBody=body)
    messages = queue.receive()
    assert [(m.kind, m.actionable) for m in messages] == [("ScheduledChange", True)]
    assert messages[0].receipt_handle and queue.malformed == 1
    queue.delete(messages[0])
    assert sqs.receive_message(QueueUrl=queue.queue_url).get("Messages", []) == []


def test_an_unparsable_sqs_answer_is_an_empty_failed_round(moto: None) -> None:
    """Issue 32 item 4: botocore's ResponseParserError is no BotoCoreError; it escaped the receive (and the
    interruption controller's pass, as a traceback) instead of an empty round the loop backs off from."""
    from botocore.parsers import ResponseParserError

    sqs = boto3.client("sqs", region_name=REGION)
    sqs.create_queue(QueueName="nodewright-demo")
    queue = InterruptionQueue.from_name(sqs, "nodewright-demo", wait_seconds=0)

    def unparsable(**_: object) -> None:
        raise ResponseParserError("Unable to parse response (not well-formed), invalid XML received")

    sqs.meta.events.register_first("before-call.sqs.ReceiveMessage", unparsable)
    assert queue.receive() == [] and queue.receive_failed
