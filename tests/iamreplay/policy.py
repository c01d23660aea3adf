"""The controller's IAM documents as the stacks synthesize them, bound to the test account.

The identity stack serializes :func:`stacks.policies.controller_policies` (and the trust of its identity mode)
with Terraform references in place of apply-time values; ``tests/infra/test_synth_irsa.py`` asserts that the
synthesized ``aws_iam_policy`` documents are exactly that function's output. Here the same functions are called
with the same references, and each reference is then replaced the way ``terraform apply`` would, by the test
account's values (:class:`Binding`): partition ``aws``, moto's account, the node role and interruption queue the
tests create, the cluster ``demo`` in ``us-east-1``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the stacks package sits at the repository root, beside main.py
    sys.path.insert(0, str(ROOT))

from stacks import policies  # noqa: E402
from stacks.settings import CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT, load_settings  # noqa: E402

Document = dict[str, Any]

IDENTITY_MODES = ("irsa", "pod-identity")
_PARTITION = "${data.aws_partition.partition.partition}"
_ACCOUNT = "${data.aws_caller_identity.caller.account_id}"
_NODE_ROLE = "${aws_iam_role.node_role.arn}"
_CLUSTER_ARN = "${cluster.arn}"
_QUEUE_ARN = "${queue.arn}"
_OIDC_ARN = "${aws_iam_openid_connect_provider.oidc_provider.arn}"
_ISSUER = "${local.oidc_issuer_host}"


@dataclass(frozen=True)
class Binding:
    """The test account's resources that stand in for the stacks' references."""

    cluster: str = "demo"
    region: str = "us-east-1"
    account: str = "123456789012"
    partition: str = "aws"
    node_role: str = "KarpenterNodeRole-demo"
    queue: str = "nodewright-demo"
    oidc_issuer_host: str = "oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"

    @property
    def values(self) -> dict[str, str]:
        """Terraform reference -> value at apply time."""
        return {
            _PARTITION: self.partition, _ACCOUNT: self.account,
            _NODE_ROLE: f"arn:{self.partition}:iam::{self.account}:role/{self.node_role}",
            _CLUSTER_ARN: f"arn:{self.partition}:eks:{self.region}:{self.account}:cluster/{self.cluster}",
            _QUEUE_ARN: f"arn:{self.partition}:sqs:{self.region}:{self.account}:{self.queue}",
            _OIDC_ARN: f"arn:{self.partition}:iam::{self.account}:oidc-provider/{self.oidc_issuer_host}",
            _ISSUER: self.oidc_issuer_host,
        }

    @property
    def controller_role_arn(self) -> str:
        return f"arn:{self.partition}:iam::{self.account}:role/{self.cluster}-nodewright-controller"


def _bind(document: Document, binding: Binding) -> Document:
    text = json.dumps(document)
    for reference, value in binding.values.items():
        text = text.replace(reference, value)
    if "${" in text:
        raise ValueError(f"unbound Terraform reference in {text[text.index('${'):][:80]}")
    bound: Document = json.loads(text)
    return bound


def controller_documents(mode: str, binding: Binding) -> tuple[dict[str, Document], Document]:
    """``({managed policy name: document}, trust document)`` of the controller role in identity ``mode``, bound.

    The managed policy names are the stack's (``<cluster>-nodewright-controller-<part>``).
    """
    settings = load_settings({"cluster_name": binding.cluster, "region": binding.region, "identity_mode": mode})
    context = policies.ControllerPolicyContext(
        partition=_PARTITION, account_id=_ACCOUNT, region=settings.region, cluster_name=settings.cluster_name,
        cluster_arn=_CLUSTER_ARN, queue_arn=_QUEUE_ARN, node_role_arn=_NODE_ROLE)
    permissions = {f"{settings.controller_role_name}-{part}": _bind(doc, binding)
                   for part, doc in policies.controller_policies(context).items()}
    if mode == "irsa":
        trust = policies.irsa_trust_policy(_OIDC_ARN, _ISSUER, settings.controller_subject)
    else:
        trust = policies.pod_identity_trust_policy(
            _ACCOUNT, policies.pod_identity_association_arns(_PARTITION, settings.region, _ACCOUNT,
                                                             settings.cluster_name),
            settings.cluster_name, CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT)
    return permissions, _bind(trust, binding)
