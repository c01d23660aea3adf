"""The controller's IAM documents exactly as the stacks synthesize them, bound to the test account.

Source of truth: the ``identity`` stack's ``cdk.tf.json`` (``aws_iam_policy.*.policy`` attached to the controller
role, and ``aws_iam_role.controller_role.assume_role_policy``), synthesized by the same code path as
``tests/infra`` (:func:`infra.conftest.synthesize`) for each identity mode with the replay's cluster and region.
Nothing here calls :mod:`stacks.policies`: a change in how the stack builds, splits, attaches or serializes the
documents is what the replay judges.

Synthesis costs ~25 s per mode (jsii), so the documents are cached in
``.pytest_cache/iamreplay/<digest>/<mode>.json``, the digest covering every file under ``stacks/`` plus
``main.py`` and ``cdktf.json``: an edit to the stacks re-synthesizes.

Each Terraform reference is then replaced the way ``terraform apply`` would, by the test account's values
(:class:`Binding`): cross-stack references (``${data.terraform_remote_state.cross-stack-reference-input-<stack>
.outputs.<name>}``) are followed to the producing stack's output expression, and each expression
(``${aws_eks_cluster.cluster.arn}``, ``${data.aws_caller_identity.caller.account_id}``...) is bound by resource
type and attribute. A reference with no binding raises ``ValueError`` (never a silent pass).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the stacks package sits at the repository root, beside main.py
    sys.path.insert(0, str(ROOT))

from stacks.settings import CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT  # noqa: E402

Document = dict[str, Any]

IDENTITY_MODES = ("irsa", "pod-identity")
CACHE = ROOT / ".pytest_cache" / "iamreplay"
_REMOTE = re.compile(r"\$\{data\.terraform_remote_state\.cross-stack-reference-input-(?P<stack>[a-z]+)"
                     r"\.outputs\.(?P<output>[^}]+)\}")
_REFERENCE = re.compile(r"\$\{[^}]+\}")


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
    def cluster_arn(self) -> str:
        return f"arn:{self.partition}:eks:{self.region}:{self.account}:cluster/{self.cluster}"

    @property
    def oidc_provider_arn(self) -> str:
        return f"arn:{self.partition}:iam::{self.account}:oidc-provider/{self.oidc_issuer_host}"

    @property
    def values(self) -> dict[str, str]:
        """Terraform expression (resource type/data source + attribute) -> value at apply time."""
        return {
            "${data.aws_partition.partition.partition}": self.partition,
            "${data.aws_caller_identity.caller.account_id}": self.account,
            "${aws_iam_role.node_role.arn}": f"arn:{self.partition}:iam::{self.account}:role/{self.node_role}",
            "${aws_eks_cluster.cluster.arn}": self.cluster_arn,
            "${aws_sqs_queue.queue.arn}": f"arn:{self.partition}:sqs:{self.region}:{self.account}:{self.queue}",
            "${aws_iam_openid_connect_provider.oidc_provider.arn}": self.oidc_provider_arn,
            "${local.oidc_issuer_host}": self.oidc_issuer_host,
        }

    @property
    def controller_role_arn(self) -> str:
        return f"arn:{self.partition}:iam::{self.account}:role/{self.cluster}-nodewright-controller"

    @property
    def subject(self) -> str:
        return f"system:serviceaccount:{CONTROLLER_NAMESPACE}:{CONTROLLER_SERVICE_ACCOUNT}"


def _digest() -> str:
    files = sorted((ROOT / "stacks").rglob("*.py")) + [ROOT / "main.py", ROOT / "cdktf.json"]
    sha = hashlib.sha256()
    for path in files:
        if path.is_file():
            sha.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()[:16]


def synthesized_stacks(mode: str, binding: Binding) -> dict[str, Document]:
    """``{stack name: cdk.tf.json}`` of the app synthesized for ``mode`` with ``binding``'s cluster and region
    (cached, see the module docstring)."""
    path = CACHE / _digest() / f"{binding.cluster}-{binding.region}-{mode}.json"
    if path.is_file():
        cached: dict[str, Document] = json.loads(path.read_text())
        return cached
    import tempfile

    from infra.conftest import synthesize

    with tempfile.TemporaryDirectory() as out:
        synth = synthesize(Path(out), {"cluster_name": binding.cluster, "region": binding.region,
                                       "identity_mode": mode})
        docs = synth.docs
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(docs))
    tmp.replace(path)
    return docs


def bind(text: str, stacks: dict[str, Document], binding: Binding) -> str:
    """``text`` with every Terraform reference replaced by its apply-time value.

    Raises:
        ValueError: a reference has no binding (the message shows it).
    """
    def remote(match: re.Match[str]) -> str:
        outputs = stacks.get(match["stack"], {}).get("output", {})
        if match["output"] not in outputs:
            raise ValueError(f"stack {match['stack']} has no output {match['output']}")
        return str(outputs[match["output"]]["value"])

    text = _REMOTE.sub(remote, text)
    values = binding.values

    def local(match: re.Match[str]) -> str:
        if match[0] not in values:
            raise ValueError(f"unbound Terraform reference {match[0]} (teach tests/iamreplay/policy.py Binding)")
        return values[match[0]]

    return _REFERENCE.sub(local, text)


def controller_documents(mode: str, binding: Binding,
                         stacks: dict[str, Document] | None = None) -> tuple[dict[str, Document], Document]:
    """``({managed policy name: document}, trust document)`` of the controller role in identity ``mode``, bound.

    The permission documents are the ``aws_iam_policy`` resources of the identity stack that an
    ``aws_iam_role_policy_attachment`` attaches to ``controller_role``, named as the stack names them
    (``<cluster>-nodewright-controller-<part>``).

    Args:
        stacks: already synthesized documents (tests mutate a copy); default :func:`synthesized_stacks`.
    """
    stacks = stacks if stacks is not None else synthesized_stacks(mode, binding)
    identity = stacks["identity"]["resource"]
    attached = {a["policy_arn"] for a in identity.get("aws_iam_role_policy_attachment", {}).values()
                if a.get("role") == "${aws_iam_role.controller_role.name}"}
    permissions: dict[str, Document] = {}
    for logical, policy in identity.get("aws_iam_policy", {}).items():
        if f"${{aws_iam_policy.{logical}.arn}}" in attached:
            permissions[policy["name"]] = json.loads(bind(policy["policy"], stacks, binding))
    trust = json.loads(bind(identity["aws_iam_role"]["controller_role"]["assume_role_policy"], stacks, binding))
    return permissions, trust
