"""interruption: the SQS queue the controller polls and the EventBridge rules that feed it.

Five event types, as Karpenter's interruption handling consumes (EventBridge event reference for
EC2 and AWS Health): spot interruption warnings (2 minutes' notice), rebalance recommendations,
instance state changes, AWS Health scheduled changes and capacity reservation interruptions.
"""

from __future__ import annotations

import json

from cdktn import TerraformOutput
from cdktn_provider_aws.cloudwatch_event_rule import CloudwatchEventRule
from cdktn_provider_aws.cloudwatch_event_target import CloudwatchEventTarget
from cdktn_provider_aws.sqs_queue import SqsQueue
from cdktn_provider_aws.sqs_queue_policy import SqsQueuePolicy
from constructs import Construct

from stacks import policies
from stacks.base import NodewrightStack, to_json
from stacks.settings import InfraSettings

# rule key -> (event source, detail-type)
INTERRUPTION_EVENTS: dict[str, tuple[str, str]] = {
    "spot-interruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "state-change": ("aws.ec2", "EC2 Instance State-change Notification"),
    "scheduled-change": ("aws.health", "AWS Health Event"),
    "capacity-reservation": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
}

# Interruption notices are useless after a few minutes (a spot warning gives two): Karpenter's
# queue keeps messages 300 s.
MESSAGE_RETENTION_SECONDS = 300


class InterruptionStack(NodewrightStack):
    """The interruption queue.

    Attributes:
        queue: the SQS queue; its *name* goes to the chart's ``settings.interruptionQueue``.
        rules: the EventBridge rules by key of :data:`INTERRUPTION_EVENTS`.
    """

    def __init__(self, scope: Construct, stack_id: str, settings: InfraSettings) -> None:
        super().__init__(scope, stack_id, settings)
        self.queue = SqsQueue(self, "queue", name=settings.interruption_queue_name,
                              message_retention_seconds=MESSAGE_RETENTION_SECONDS, sqs_managed_sse_enabled=True)
        self.rules: dict[str, CloudwatchEventRule] = {}
        # Rule names stop at 64 characters: cluster (<= 38) + "-nw-" + key (<= 20).
        for key, (source, detail_type) in INTERRUPTION_EVENTS.items():
            construct_id = key.replace("-", "_")
            rule = CloudwatchEventRule(
                self, f"rule_{construct_id}", name=f"{settings.cluster_name}-nw-{key}",
                description=f"nodewright interruption handling: {detail_type}",
                event_pattern=json.dumps({"source": [source], "detail-type": [detail_type]}))
            CloudwatchEventTarget(self, f"target_{construct_id}", rule=rule.name, target_id="nodewright-queue",
                                  arn=self.queue.arn)
            self.rules[key] = rule
        SqsQueuePolicy(self, "queue_policy", queue_url=self.queue.url,
                       policy=to_json(policies.interruption_queue_policy(
                           self.queue.arn, [rule.arn for rule in self.rules.values()])))
        TerraformOutput(self, "queue_name", value=self.queue.name)
        TerraformOutput(self, "queue_arn", value=self.queue.arn)
        TerraformOutput(self, "queue_url", value=self.queue.url)
