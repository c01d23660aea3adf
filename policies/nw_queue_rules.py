"""CKV_NW_7: the interruption queue and the EventBridge rules that feed it.

Facts (Karpenter's interruption handling and AWS docs):
- EC2 sends "EC2 Spot Instance Interruption Warning" two minutes before reclaiming a spot instance and
  "EC2 Instance State-change Notification" on stopping/terminating (source ``aws.ec2``); Karpenter also
  listens to "EC2 Instance Rebalance Recommendation" and AWS Health scheduled changes.
- EventBridge delivers to SQS only when the queue policy allows ``events.amazonaws.com`` to
  ``sqs:SendMessage`` (EventBridge user guide, "Permissions for Amazon SQS").
- TLS-only access is a Deny on ``aws:SecureTransport = false`` (SQS developer guide, security best practices),
  written with ``Bool`` (AWS's examples) or ``StringEquals`` (terraform-aws-eks's Karpenter module).
- Only the rules may send: an ``Allow sqs:SendMessage`` to Principal ``*`` without a source condition lets
  anyone inject fake interruption events (and make the controller drain nodes).
- A service principal (``events.amazonaws.com``, ``sqs.amazonaws.com``...) allowed to send without ``aws:SourceArn`` /
  ``aws:SourceAccount`` is the confused deputy: any account's EventBridge rule may target the queue (IAM user
  guide, "The confused deputy problem"; EventBridge user guide's SQS queue policy example names the rule ARN).
- A spot interruption warning is useful for two minutes; Karpenter keeps messages 300 s. A queue that keeps
  them much longer (SQS's default is 4 days) replays stale interruptions after a controller outage.
"""

from __future__ import annotations

import json
from typing import Any

from nw_catalog import RuleReport
from nw_iam_model import read_doc
from nw_iampolicy import Statement
from nw_tfdoc import Project, Stack, scalar, str_list

REQUIRED_DETAIL_TYPES = ("EC2 Spot Instance Interruption Warning", "EC2 Instance State-change Notification")
#: Longest acceptable message retention: three times Karpenter's 300 s.
MAX_RETENTION_SECONDS = 900
SQS_DEFAULT_RETENTION_SECONDS = 345600
SOURCE_KEYS = ("aws:sourcearn", "aws:sourceaccount", "aws:sourceowner", "aws:principalorgid",
               "aws:principalaccount", "aws:principalarn", "aws:sourcevpc", "aws:sourcevpce")


def _truthy(value: Any) -> bool:
    v = scalar(value)
    return v is True or (isinstance(v, str) and v.lower() == "true")


def _points_at(project: Project, stack: str, value: Any, type_: str, target: tuple[str, str]) -> bool:
    ref = project.resolve(stack, value)
    return ref is not None and ref.type == type_ and (ref.stack, ref.name) == target


def _queue_policies(project: Project, stack: Stack, name: str, conf: dict[str, Any]) -> list[Statement]:
    statements: list[Statement] = []
    values = [(stack.name, conf.get("policy"))] if scalar(conf.get("policy")) is not None else []
    for other, _n, pconf in project.all_resources("aws_sqs_queue_policy"):
        if _points_at(project, other.name, pconf.get("queue_url"), "aws_sqs_queue", (stack.name, name)):
            values.append((other.name, pconf.get("policy")))
    for where, value in values:
        statements.extend(read_doc(project, where, "", "resource", value).statements)
    return statements


def _denies_plain_http(st: Statement) -> bool:
    everyone = st.principals.get("*") or "*" in st.principals.get("AWS", [])
    insecure = any(tuple(x.lower() for x in v) == ("false",) for v in st.condition_values(
        "aws:SecureTransport", ("Bool", "StringEquals", "StringEqualsIgnoreCase", "BoolIfExists")))
    return (not st.allows and bool(everyone) and insecure
            and st.grants("sqs:SendMessage") and st.grants("sqs:ReceiveMessage"))


def _public_send(st: Statement) -> bool:
    everyone = st.principals.get("*") or "*" in st.principals.get("AWS", [])
    narrowed = any(c.key.lower() in SOURCE_KEYS for c in st.conditions)
    return st.allows and bool(everyone) and st.grants("sqs:SendMessage") and not narrowed


def _unscoped_service_send(st: Statement) -> list[str]:
    """The service principals a statement lets sqs:SendMessage without a source condition."""
    services = st.principals.get("Service", [])
    narrowed = any(c.key.lower() in SOURCE_KEYS for c in st.conditions)
    return list(services) if st.allows and services and st.grants("sqs:SendMessage") and not narrowed else []


def _allows_eventbridge(st: Statement) -> bool:
    return st.allows and "events.amazonaws.com" in st.principals.get("Service", []) and st.grants("sqs:SendMessage")


def _rule_detail_types(project: Project, stack: Stack, name: str) -> list[str] | None:
    """Detail types the rules targeting queue ``name`` match; ``None`` means "every aws.ec2 event"."""
    covered: list[str] = []
    for tstack, _t, target in project.all_resources("aws_cloudwatch_event_target"):
        if not _points_at(project, tstack.name, target.get("arn"), "aws_sqs_queue", (stack.name, name)):
            continue
        rule_ref = project.resolve(tstack.name, target.get("rule"))
        rule = project.conf(rule_ref) if rule_ref else _rule_by_name(project, scalar(target.get("rule")))
        pattern = _event_pattern(rule.get("event_pattern") if rule else None)
        if "aws.ec2" not in str_list(pattern.get("source")):
            continue
        types = str_list(pattern.get("detail-type"))
        if not types:
            return None
        covered.extend(types)
    return covered


def _rule_by_name(project: Project, name: Any) -> dict[str, Any] | None:
    for _s, _n, conf in project.all_resources("aws_cloudwatch_event_rule"):
        if scalar(conf.get("name")) == name:
            return conf
    return None


def _event_pattern(value: Any) -> dict[str, Any]:
    value = scalar(value)
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def is_interruption_queue(project: Project, stack: Stack, name: str, conf: dict[str, Any]) -> bool:
    """A queue an EventBridge target delivers to, or one named for interruption."""
    label = f"{name} {scalar(conf.get('name')) or ''} {scalar(conf.get('name_prefix')) or ''}".lower()
    if "interruption" in label:
        return True
    return any(_points_at(project, s.name, t.get("arn"), "aws_sqs_queue", (stack.name, name))
               for s, _n, t in project.all_resources("aws_cloudwatch_event_target"))


def queue_problems(project: Project, stack: Stack, name: str, conf: dict[str, Any]) -> list[str]:
    """What is wrong with one interruption queue (empty: nothing)."""
    problems = []
    if not (_truthy(conf.get("sqs_managed_sse_enabled")) or scalar(conf.get("kms_master_key_id"))):
        problems.append("is not encrypted (set sqs_managed_sse_enabled = true or kms_master_key_id)")
    statements = _queue_policies(project, stack, name, conf)
    if not any(_denies_plain_http(s) for s in statements):
        problems.append("has no queue policy denying sqs:* to everyone when aws:SecureTransport is false")
    if any(_public_send(s) for s in statements):
        problems.append("lets Principal '*' sqs:SendMessage without a source condition (aws:SourceArn of the "
                        "rules): anyone could send fake interruptions")
    unscoped = sorted({p for s in statements for p in _unscoped_service_send(s)})
    if unscoped:
        problems.append(f"lets {unscoped} sqs:SendMessage without aws:SourceArn or aws:SourceAccount: any account's "
                        f"rule could send fake interruptions (confused deputy)")
    retention = scalar(conf.get("message_retention_seconds"))
    seconds = int(retention) if isinstance(retention, (int, float)) or str(retention).isdigit() else None
    if retention is None or (seconds is not None and seconds > MAX_RETENTION_SECONDS):
        shown = f"{seconds} s" if retention is not None else f"unset (SQS keeps {SQS_DEFAULT_RETENTION_SECONDS} s)"
        problems.append(f"keeps messages {shown}, far above the interruption window: set "
                        f"message_retention_seconds <= {MAX_RETENTION_SECONDS} (Karpenter uses 300)")
    if not any(_allows_eventbridge(s) for s in statements):
        problems.append("does not allow events.amazonaws.com to sqs:SendMessage: interruption events never arrive")
    covered = _rule_detail_types(project, stack, name)
    if covered is not None:
        missing = [t for t in REQUIRED_DETAIL_TYPES if t not in covered]
        if missing:
            problems.append(f"receives no EventBridge rule (source aws.ec2) for {missing}")
    return problems


def run(project: Project) -> RuleReport:
    """CKV_NW_7 over every interruption queue of a project."""
    report = RuleReport()
    for stack, name, conf in project.all_resources("aws_sqs_queue"):
        if not is_interruption_queue(project, stack, name, conf):
            continue
        address = f"aws_sqs_queue.{name}"
        report.passed("CKV_NW_7", stack.path, address)
        for problem in queue_problems(project, stack, name, conf):
            report.failed("CKV_NW_7", stack.path, address, f"Interruption queue {address} {problem}.")
    return report
