"""checkov checks CKV_NW_8..14 for ``--framework kubernetes`` (the rendered Helm chart).

Each wraps one function of ``nw_k8s_rules`` over the single object checkov hands over. A rule that
raises reports FAILED with the error (checkov would drop it silently). CKV_NW_12 compares an annotated
ServiceAccount with the IRSA trusts of the stacks scanned in the same run (the ``cdk.tf.json`` files among
checkov's ``-f`` arguments, or under ``$NODEWRIGHT_POLICY_STACKS``), so the chart's copy of the service
account name is held to the trust as the Terraform copy is.
"""

from __future__ import annotations

import traceback
from typing import Any

import nw_catalog
import nw_k8s_rules
import nw_stack_rules
import nw_tfdoc
from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.kubernetes.checks.resource.base_spec_check import BaseK8Check


def stack_trusts() -> dict[str, list[str]]:
    """IRSA trusts (role name -> subjects) of the stacks scanned alongside the manifests, read once."""
    return nw_stack_rules.scanned_irsa_trusts()


class ObjectRuleCheck(BaseK8Check):
    """One nodewright rule on one Kubernetes object."""

    def __init__(self, check_id: str) -> None:
        info = nw_catalog.CHECKS[check_id]
        super().__init__(name=info.name, id=check_id, categories=[CheckCategories.KUBERNETES],
                         supported_entities=list(nw_k8s_rules.KINDS[check_id]), guideline=info.fix)

    def scan_spec_conf(self, conf: dict[str, Any]) -> CheckResult:
        """PASSED, FAILED (details: the problems), or UNKNOWN when the object is not in scope."""
        try:
            obj = nw_tfdoc.clean(conf)
            problems = nw_k8s_rules.service_account_problems(obj, stack_trusts()) if self.id == "CKV_NW_12" \
                else nw_k8s_rules.RULES[self.id](obj)
        except Exception:  # noqa: BLE001 - fail closed, never silently
            self.details = [f"internal error in {self.id}: {traceback.format_exc(limit=3)}"]
            return CheckResult.FAILED
        if problems is None:
            return CheckResult.UNKNOWN
        if problems:
            self.details = problems
            return CheckResult.FAILED
        return CheckResult.PASSED


checks = [ObjectRuleCheck(check_id) for check_id in nw_k8s_rules.RULES]
