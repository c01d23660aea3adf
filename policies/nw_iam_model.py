"""Who holds which IAM document in a synthesized project: roles, their trust, their permissions.

Permissions of a role come from (Terraform AWS provider resources): ``aws_iam_role.inline_policy``,
``aws_iam_role_policy``, ``aws_iam_role_policy_attachment`` / ``aws_iam_policy_attachment`` of an
``aws_iam_policy`` in the project. AWS-managed policy ARNs cannot be read offline and are not counted.
Resource policies (SQS, SNS, KMS) are collected too, for the wildcard rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nw_iampolicy import PolicyError, Statement, document_facts, parse_policy
from nw_tfdoc import Project, Ref, dict_list, scalar, str_list

LAUNCH_ACTIONS = ("ec2:RunInstances", "ec2:CreateFleet")

# (resource type, policy attribute) of resource-based policies.
RESOURCE_POLICY_ATTRS = (
    ("aws_sqs_queue", "policy"),
    ("aws_sqs_queue_policy", "policy"),
    ("aws_sns_topic_policy", "policy"),
    ("aws_kms_key", "policy"),
)
IDENTITY_POLICY_TYPES = ("aws_iam_policy", "aws_iam_role_policy", "aws_iam_user_policy", "aws_iam_group_policy")


@dataclass
class PolicyDoc:
    """One policy document: the ``stack`` and ``address`` holding it, its ``kind`` ("identity",
    "trust" or "resource"), its statements, or the ``error`` that kept it from being read; its ``version``
    and estimated size in ``chars`` when they can be known offline."""

    stack: str
    address: str
    kind: str
    statements: list[Statement] = field(default_factory=list)
    error: str | None = None
    version: str | None = None
    chars: int | None = None


@dataclass
class Role:
    """An ``aws_iam_role``: where it is, its configuration, trust document and permission documents."""

    stack: str
    name: str
    conf: dict[str, Any]
    trust: PolicyDoc
    permissions: list[PolicyDoc] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        """``(stack, resource name)``: identity of the role within the project."""
        return (self.stack, self.name)

    @property
    def address(self) -> str:
        """Terraform address ``aws_iam_role.<name>``."""
        return f"aws_iam_role.{self.name}"

    @property
    def role_name(self) -> str | None:
        """The IAM role name when it is a literal (not a reference), else ``None``."""
        name = scalar(self.conf.get("name"))
        return name if isinstance(name, str) and "${" not in name else None

    def allowed(self) -> list[Statement]:
        """Every Allow statement of the role's permission documents."""
        return [s for doc in self.permissions for s in doc.statements if s.allows]

    def is_launcher(self) -> bool:
        """True when the role may launch instances (ec2:RunInstances or ec2:CreateFleet): the
        node autoscaler's controller role."""
        return any(s.grants(a) for s in self.allowed() for a in LAUNCH_ACTIONS)

    def is_pod_identity(self) -> bool:
        """True when the trust lets EKS Pod Identity (``pods.eks.amazonaws.com``) assume it."""
        return any(s.allows and "pods.eks.amazonaws.com" in s.principals.get("Service", [])
                   for s in self.trust.statements)

    def is_web_identity(self) -> bool:
        """True when the trust lets a web identity (IRSA: the cluster's OIDC provider) assume it."""
        return any(
            s.allows and ("Federated" in s.principals or s.grants("sts:AssumeRoleWithWebIdentity"))
            for s in self.trust.statements
        )


@dataclass
class IamModel:
    """Every role and policy document of a project."""

    roles: dict[tuple[str, str], Role] = field(default_factory=dict)
    documents: list[PolicyDoc] = field(default_factory=list)

    def controllers(self) -> list[Role]:
        """The node autoscaler's roles: roles that may launch instances (``Role.is_launcher``) and that pods
        assume (IRSA or EKS Pod Identity). When no launcher is assumed by pods, every launcher counts (fail
        closed). Another role that launches instances (a CI or image-builder role) is not the controller."""
        launchers = [r for r in self.roles.values() if r.is_launcher()]
        by_pods = [r for r in launchers if r.is_web_identity() or r.is_pod_identity()]
        return by_pods or launchers


def read_doc(project: Project, stack: str, address: str, kind: str, value: Any) -> PolicyDoc:
    """Parse a policy value into a ``PolicyDoc``; parse errors are kept in ``error``."""
    version, chars = document_facts(project, stack, value)
    try:
        return PolicyDoc(stack, address, kind, parse_policy(project, stack, value), version=version, chars=chars)
    except PolicyError as exc:
        return PolicyDoc(stack, address, kind, error=str(exc), version=version, chars=chars)


def find_role(project: Project, model: IamModel, stack: str, value: Any) -> Role | None:
    """The role a ``role`` attribute names: a reference (any attribute) or a literal role name."""
    ref = project.resolve(stack, value)
    if ref is not None:
        return model.roles.get((ref.stack, ref.name)) if ref.type == "aws_iam_role" else None
    literal = scalar(value)
    for role in model.roles.values():
        if isinstance(literal, str) and role.role_name == literal:
            return role
    return None


def _policy_ref(project: Project, stack: str, value: Any) -> Ref | None:
    ref = project.resolve(stack, value)
    return ref if ref is not None and ref.kind == "resource" and ref.type == "aws_iam_policy" else None


def build(project: Project) -> IamModel:
    """The IAM model of a project (never raises for odd documents: see ``PolicyDoc.error``)."""
    model = IamModel()
    for stack, name, conf in project.all_resources("aws_iam_role"):
        address = f"aws_iam_role.{name}"
        trust = read_doc(project, stack.name, address, "trust", conf.get("assume_role_policy"))
        role = Role(stack.name, name, conf, trust)
        model.roles[role.key] = role
        model.documents.append(trust)
        for inline in dict_list(conf.get("inline_policy")):
            if scalar(inline.get("policy")) is not None:
                doc = read_doc(project, stack.name, address, "identity", inline.get("policy"))
                role.permissions.append(doc)
                model.documents.append(doc)

    managed: dict[tuple[str, str], PolicyDoc] = {}
    for type_ in IDENTITY_POLICY_TYPES:
        for stack, name, conf in project.all_resources(type_):
            doc = read_doc(project, stack.name, f"{type_}.{name}", "identity", conf.get("policy"))
            model.documents.append(doc)
            if type_ == "aws_iam_policy":
                managed[(stack.name, name)] = doc
            elif type_ == "aws_iam_role_policy":
                target = find_role(project, model, stack.name, conf.get("role"))
                if target is not None:
                    target.permissions.append(doc)

    for type_, role_attr in (("aws_iam_role_policy_attachment", "role"), ("aws_iam_policy_attachment", "roles")):
        for stack, _name, conf in project.all_resources(type_):
            ref = _policy_ref(project, stack.name, conf.get("policy_arn"))
            attached = managed.get((ref.stack, ref.name)) if ref else None
            if attached is None:
                continue
            for value in str_list(conf.get(role_attr)):
                target = find_role(project, model, stack.name, value)
                if target is not None and attached not in target.permissions:
                    target.permissions.append(attached)

    for type_, attr in RESOURCE_POLICY_ATTRS:
        for stack, name, conf in project.all_resources(type_):
            if scalar(conf.get(attr)) is not None:
                model.documents.append(read_doc(project, stack.name, f"{type_}.{name}", "resource", conf.get(attr)))
    return model
