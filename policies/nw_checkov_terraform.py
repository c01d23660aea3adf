"""checkov checks CKV_NW_1..10 and 12..14 for ``--framework terraform_json`` (synthesized CDK Terrain stacks).

checkov hands a resource check one resource at a time, with references unresolved
(``"${data.aws_iam_policy_document.x.json}"``). Our rules need the whole synthesis (a role, its
attachments, the data source holding its document, outputs of other stacks), so each check reads the
stack file checkov is scanning, and its sibling stacks, and runs ``nw_stack_rules.analyze`` once per
file set (cached). It then reports the verdict of that analysis for the resource at hand.

Locating the file: checkov gives ``/<path relative to the scan root>``; the root is one of the
``-d/--directory`` arguments, ``$NODEWRIGHT_POLICY_ROOT``, or the working directory (``-f``). When the
file cannot be found the resource is analysed alone (references then cannot be followed, and policies
behind them fail CKV_NW_4 as unreadable: the gate fails closed).

A check that raises would be dropped silently by checkov (result UNKNOWN); ours report FAILED with the
error instead.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path
from typing import Any

import nw_catalog
import nw_stack_rules
import nw_tfdoc
from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck

IAM_POLICY_HOLDERS = ["aws_iam_role", "aws_iam_policy", "aws_iam_role_policy", "aws_iam_user_policy",
                      "aws_iam_group_policy"]
RESOURCE_POLICY_HOLDERS = ["aws_sqs_queue", "aws_sqs_queue_policy", "aws_sns_topic_policy", "aws_kms_key"]
SCOPES: dict[str, list[str]] = {
    "CKV_NW_1": ["aws_iam_role"],
    "CKV_NW_2": IAM_POLICY_HOLDERS,
    "CKV_NW_3": ["aws_iam_role"],
    "CKV_NW_4": IAM_POLICY_HOLDERS + RESOURCE_POLICY_HOLDERS,
    "CKV_NW_5": IAM_POLICY_HOLDERS,
    "CKV_NW_6": ["aws_iam_instance_profile", "aws_iam_role"],
    "CKV_NW_7": ["aws_sqs_queue"],
    "CKV_NW_8": ["kubernetes_manifest"],
    "CKV_NW_9": ["kubernetes_manifest"],
    "CKV_NW_10": ["kubernetes_manifest"],
    "CKV_NW_12": ["helm_release", "kubernetes_manifest"],
    "CKV_NW_13": ["kubernetes_manifest"],
    "CKV_NW_14": ["kubernetes_manifest"],
}
_CACHE: dict[tuple[tuple[str, float], ...], nw_catalog.RuleReport] = {}


def _scan_roots() -> list[str]:
    roots = [r for r in os.environ.get("NODEWRIGHT_POLICY_ROOT", "").split(os.pathsep) if r]
    argv = sys.argv
    for i, arg in enumerate(argv):
        if arg in ("-d", "--directory") and i + 1 < len(argv):
            roots.append(argv[i + 1])
        elif arg.startswith("--directory="):
            roots.append(arg.split("=", 1)[1])
    roots.append(os.getcwd())
    return roots


def locate(scanned_file: str) -> Path | None:
    """The stack file behind checkov's ``scanned_file`` (``/relative/path``), or ``None``."""
    relative = scanned_file.lstrip("/")
    for root in _scan_roots():
        candidate = Path(root) / relative
        if candidate.is_file():
            return candidate.resolve()
    absolute = Path(scanned_file)
    return absolute.resolve() if absolute.is_file() else None


def _analysis(stack_file: Path) -> nw_catalog.RuleReport:
    siblings = sorted(stack_file.parent.parent.glob("*/cdk.tf.json")) or [stack_file]
    key = tuple((str(p), p.stat().st_mtime) for p in siblings)
    if key not in _CACHE:
        _CACHE[key] = nw_stack_rules.analyze(nw_tfdoc.project_of(stack_file), nw_stack_rules.scanned_irsa_trusts())
    return _CACHE[key]


def _alone(scanned_file: str, entity_type: str, name: str, conf: dict[str, Any]) -> nw_catalog.RuleReport:
    stack = nw_tfdoc.Stack(name="scanned", path=scanned_file,
                           doc={"resource": {entity_type: {name: nw_tfdoc.clean(conf)}}})
    return nw_stack_rules.analyze(nw_tfdoc.Project(stacks={"scanned": stack}))


class StackRuleCheck(BaseResourceCheck):
    """One nodewright rule, reported per resource from the whole-synthesis analysis."""

    def __init__(self, check_id: str) -> None:
        info = nw_catalog.CHECKS[check_id]
        category = CheckCategories.KUBERNETES if check_id in ("CKV_NW_8", "CKV_NW_9", "CKV_NW_10", "CKV_NW_13",
                                                                            "CKV_NW_14") \
            else CheckCategories.IAM
        super().__init__(name=info.name, id=check_id, categories=[category],
                         supported_resources=SCOPES[check_id], guideline=info.fix)

    def scan_resource_conf(self, conf: dict[str, Any]) -> CheckResult:
        """PASSED/FAILED for this resource when the rule looked at it; UNKNOWN (not reported) otherwise."""
        scanned_file, entity_type, name = self.entity_path.rsplit(":", 2)
        address = f"{entity_type}.{name}"
        try:
            path = locate(scanned_file)
            if path is not None:
                report, key_path = _analysis(path), str(path)
            else:
                report, key_path = _alone(scanned_file, entity_type, name, conf), scanned_file
        except Exception:  # noqa: BLE001 - fail closed, never silently
            self.details = [f"internal error in {self.id}: {traceback.format_exc(limit=3)}"]
            return CheckResult.FAILED
        messages = report.messages(self.id, key_path, address)
        if messages:
            self.details = messages
            return CheckResult.FAILED
        if (self.id, key_path, address) in report.evaluated:
            return CheckResult.PASSED
        return CheckResult.UNKNOWN


checks = [StackRuleCheck(check_id) for check_id in SCOPES]
