"""IAM rules CKV_NW_1..6 over a synthesized project (see nw_catalog for each rule's one-liner).

Facts they encode:
- EC2 checks ``iam:PassRole`` on the instance profile's role when RunInstances/CreateFleet launch with
  it; without it every launch fails with ``UnauthorizedOperation ... iam:PassRole`` (the first field
  report; AWS "Using an IAM role to grant permissions to applications running on Amazon EC2").
- IRSA: the pod's projected token is exchanged by ``sts:AssumeRoleWithWebIdentity``; the token's ``sub``
  is ``system:serviceaccount:<namespace>:<name>`` and ``aud`` is ``sts.amazonaws.com`` (EKS user guide,
  "IAM roles for service accounts"). EKS Pod Identity instead trusts ``pods.eks.amazonaws.com`` for
  ``sts:AssumeRole`` + ``sts:TagSession`` and binds the role to one service account through an
  ``aws_eks_pod_identity_association`` (EKS user guide, "EKS Pod Identity").
- Karpenter's controller policy conditions creation on ``aws:RequestTag/kubernetes.io/cluster/<cluster>
  = owned`` and termination on ``aws:ResourceTag/...``; RunInstances also authorises on the image,
  snapshot, subnet and security group, which carry no request tags (Karpenter's CloudFormation template).
"""

from __future__ import annotations

import fnmatch
import re

from nw_catalog import RuleReport
from nw_iam_model import IamModel, PolicyDoc, Role, find_role
from nw_iampolicy import Statement
from nw_tfdoc import Project, scalar

FIELD_REPORT_FAILURE = (
    "launches will fail in production with 'UnauthorizedOperation: You are not authorized to perform: "
    "iam:PassRole on resource <node role>', the first field report's failure"
)
PASSED_TO_SERVICE_OPS = ("StringEquals", "StringLike", "ForAnyValue:StringEquals", "ForAllValues:StringEquals")
EC2_SERVICE = {"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}
POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
SERVICE_ACCOUNT_SUB = re.compile(r"^system:serviceaccount:[a-z0-9]([-a-z0-9]*[a-z0-9])?:[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")
CREATE_ACTIONS = ("ec2:RunInstances", "ec2:CreateFleet")
DESTROY_ACTIONS = ("ec2:TerminateInstances", "ec2:DeleteLaunchTemplate")
# Resource types RunInstances/CreateFleet reference but do not create: they cannot carry request tags.
REFERENCED_EC2_TYPES = ("image", "snapshot", "security-group", "subnet", "capacity-reservation", "placement-group")
_TOKEN = re.compile(r"\$\{[^}]*\}")


def _label(st: Statement, index: int) -> str:
    return f"statement {st.sid!r}" if st.sid else f"statement #{index + 1}"


def _is_wildcard_role_resource(resource: str) -> bool:
    """``*`` or an ARN whose resource part is only a wildcard (``arn:aws:iam::*:role/*``)."""
    tail = resource.strip().split(":")[-1]
    return resource.strip() == "*" or tail in ("*", "role/*", "role*")


def covers_role(project: Project, stack: str, resource: str, role: Role) -> bool:
    """True when an IAM ``Resource`` entry (reference, ARN or ARN pattern) names ``role``."""
    ref = project.resolve(stack, resource)
    if ref is not None:
        return ref.type == "aws_iam_role" and (ref.stack, ref.name) == role.key
    if resource.strip() == "*" or (role.stack == stack and f"aws_iam_role.{role.name}." in resource):
        return True
    name = role.role_name
    if not name:
        return False
    pattern = _TOKEN.sub("*", resource)
    if ":role/" not in pattern:
        return False
    # The account is not known offline: compare the role part (path/name) only.
    role_part = pattern.split(":role/", 1)[1]
    return fnmatch.fnmatchcase(name, role_part) or fnmatch.fnmatchcase(name, role_part.split("/")[-1])


def node_roles(project: Project, model: IamModel) -> list[tuple[str, str, Role | None]]:
    """``(stack, instance profile address, its role or None)`` for every instance profile."""
    out = []
    for stack, name, conf in project.all_resources("aws_iam_instance_profile"):
        out.append((stack.name, f"aws_iam_instance_profile.{name}", find_role(project, model, stack.name, conf.get("role"))))
    return out


# --------------------------------------------------------------------------------------------
# CKV_NW_1: the controller may pass the node role
# --------------------------------------------------------------------------------------------


def check_passrole_present(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_1 on every controller role (a role that may launch instances)."""
    nodes = [role for _, _, role in node_roles(project, model) if role is not None]
    for role in model.controllers():
        path = project.stacks[role.stack].path
        passing = [s for s in role.allowed() if s.grants("iam:PassRole")]
        if not passing:
            report.failed("CKV_NW_1", path, role.address,
                          f"{role.address} may launch instances but its policies do not grant iam:PassRole: "
                          f"{FIELD_REPORT_FAILURE}.")
            continue
        stack_of = {id(s): doc.stack for doc in role.permissions for s in doc.statements}
        missing = [n for n in nodes
                   if not any(covers_role(project, stack_of[id(s)], r, n) for s in passing for r in s.resources)
                   and not any(s.not_resources for s in passing)]
        for node in missing:
            resources = sorted({r for s in passing for r in s.resources})
            report.failed("CKV_NW_1", path, role.address,
                          f"{role.address} grants iam:PassRole on {resources} but not on the node role "
                          f"{node.address} (the instance profile's role): {FIELD_REPORT_FAILURE}.")
        if not missing:
            report.passed("CKV_NW_1", path, role.address)


# --------------------------------------------------------------------------------------------
# CKV_NW_2: PassRole scoped and conditioned
# --------------------------------------------------------------------------------------------


def _passrole_problems(st: Statement) -> list[str]:
    problems = []
    if st.not_resources:
        problems.append("uses NotResource (PassRole on everything else)")
    wild = [r for r in st.resources if _is_wildcard_role_resource(r)]
    if wild:
        problems.append(f"is on {wild[0]!r}: any role, including admin roles, could be passed")
    values = st.condition_values("iam:PassedToService", PASSED_TO_SERVICE_OPS)
    if not values:
        problems.append("has no iam:PassedToService condition (StringEquals ec2.amazonaws.com)")
    elif not any(set(v) and set(v) <= EC2_SERVICE for v in values):
        problems.append(f"lets the role be passed to {sorted({x for v in values for x in v})}, not only ec2.amazonaws.com")
    return problems


def check_passrole_scoped(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_2 on every identity policy document that grants iam:PassRole."""
    for doc in _identity_docs(model):
        path = project.stacks[doc.stack].path
        granting = [(i, s) for i, s in enumerate(doc.statements) if s.allows and s.grants("iam:PassRole")]
        if not granting:
            continue
        report.passed("CKV_NW_2", path, doc.address)
        for i, st in granting:
            for problem in _passrole_problems(st):
                report.failed("CKV_NW_2", path, doc.address, f"iam:PassRole in {_label(st, i)} {problem}.")


# --------------------------------------------------------------------------------------------
# CKV_NW_3: IRSA trust
# --------------------------------------------------------------------------------------------


def _trust_problems(st: Statement) -> list[str]:
    problems = []
    everyone = st.principals.get("*", []) + [p for p in st.principals.get("AWS", []) if p == "*"]
    if everyone:
        problems.append("trusts Principal '*'")
    if "Federated" not in st.principals:
        problems.append("has no Federated (OIDC provider) principal")
    elif any(p == "*" for p in st.principals["Federated"]):
        problems.append("trusts any Federated provider ('*')")
    extra = [a for a in st.actions if a.lower() not in ("sts:assumerolewithwebidentity", "sts:tagsession")]
    if st.not_actions or extra:
        problems.append(f"allows {extra or st.not_actions} besides sts:AssumeRoleWithWebIdentity")
    if not st.grants("sts:AssumeRoleWithWebIdentity"):
        problems.append("does not allow sts:AssumeRoleWithWebIdentity")
    subs = [c for c in st.conditions if c.key.lower().endswith(":sub")]
    exact = [c for c in subs if c.operator.lower() == "stringequals"]
    loose = [c for c in subs if c.operator.lower() != "stringequals" or any("*" in v or "?" in v for v in c.values)]
    if loose:
        problems.append(f"matches the subject with {loose[0].operator} {list(loose[0].values)}: a wildcard subject "
                        f"lets other service accounts assume the role")
    if not exact:
        problems.append("has no StringEquals condition on <issuer>:sub (any service account of the cluster "
                        "could assume the role)")
    for c in exact:
        if len(c.values) != 1 or not SERVICE_ACCOUNT_SUB.match(c.values[0]):
            problems.append(f"must name exactly one service account system:serviceaccount:<ns>:<name> on :sub, "
                            f"got {list(c.values)}")
    auds = [c for c in st.conditions if c.key.lower().endswith(":aud") and c.operator.lower() == "stringequals"]
    if not any(list(c.values) == ["sts.amazonaws.com"] for c in auds):
        problems.append("has no StringEquals <issuer>:aud = sts.amazonaws.com condition")
    return problems


def irsa_subjects(role: Role) -> list[str]:
    """The exact ``system:serviceaccount:<ns>:<name>`` subjects a web-identity trust names."""
    return [v for s in role.trust.statements if s.allows for c in s.conditions
            if c.key.lower().endswith(":sub") and c.operator.lower() == "stringequals" for v in c.values]


def pod_identity_subjects(project: Project, role: Role) -> list[str]:
    """``system:serviceaccount:<ns>:<name>`` of every EKS Pod Identity association of ``role``."""
    subjects = []
    for stack, _name, conf in project.all_resources("aws_eks_pod_identity_association"):
        ref = project.resolve(stack.name, conf.get("role_arn"))
        if ref is not None and ref.type == "aws_iam_role" and (ref.stack, ref.name) == role.key:
            subjects.append(f"system:serviceaccount:{scalar(conf.get('namespace'))}:{scalar(conf.get('service_account'))}")
    return subjects


def _pod_identity_problems(project: Project, role: Role) -> list[str]:
    problems = []
    for i, st in enumerate(s for s in role.trust.statements if s.allows):
        others = {k: v for k, v in st.principals.items() if k != "Service"}
        if others or set(st.principals.get("Service", [])) != {POD_IDENTITY_SERVICE}:
            problems.append(f"Trust {_label(st, i)} trusts {st.principals}, not only Service {POD_IDENTITY_SERVICE}.")
        extra = [a for a in st.actions if a.lower() not in ("sts:assumerole", "sts:tagsession")]
        if extra or st.not_actions:
            problems.append(f"Trust {_label(st, i)} allows {extra or st.not_actions} besides sts:AssumeRole/sts:TagSession.")
    subjects = sorted(set(pod_identity_subjects(project, role)))
    if len(subjects) != 1 or not SERVICE_ACCOUNT_SUB.match(subjects[0]):
        problems.append(f"must be associated (aws_eks_pod_identity_association) with exactly one service account, "
                        f"got {subjects}.")
    return problems


def check_controller_trust(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_3 on every role a web identity (IRSA) or EKS Pod Identity may assume."""
    for role in model.roles.values():
        path = project.stacks[role.stack].path
        if role.is_web_identity():
            report.passed("CKV_NW_3", path, role.address)
            for i, st in enumerate(role.trust.statements):
                if st.allows:
                    for problem in _trust_problems(st):
                        report.failed("CKV_NW_3", path, role.address, f"Trust {_label(st, i)} {problem}.")
        elif role.is_pod_identity():
            report.passed("CKV_NW_3", path, role.address)
            for problem in _pod_identity_problems(project, role):
                report.failed("CKV_NW_3", path, role.address, f"Pod Identity role {role.address}: {problem}")


# --------------------------------------------------------------------------------------------
# CKV_NW_4: no wildcard actions; documents readable
# --------------------------------------------------------------------------------------------


def wildcard_action(pattern: str, kind: str) -> bool:
    """True for an over-broad action: ``*`` and service wildcards everywhere; in identity policies
    also any ``<service>:*``; in trust/resource policies ``ec2:*`` and ``iam:*``."""
    p = pattern.strip().lower()
    if p == "*" or ":" not in p:
        return True
    service, action = p.split(":", 1)
    if "*" in service or "?" in service:
        return True
    if action.strip("*") == "":
        return kind == "identity" or service in ("ec2", "iam")
    return False


def check_wildcards(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_4 on every policy document of the project."""
    for doc in model.documents:
        path = project.stacks[doc.stack].path
        report.passed("CKV_NW_4", path, doc.address)
        if doc.error:
            report.failed("CKV_NW_4", path, doc.address, f"The {doc.kind} policy cannot be checked: {doc.error}.")
            continue
        for i, st in enumerate(doc.statements):
            if not st.allows:
                continue
            if st.not_actions:
                report.failed("CKV_NW_4", path, doc.address,
                              f"{_label(st, i)} allows NotAction {st.not_actions}: every other action is granted.")
            broad = [a for a in st.actions if wildcard_action(a, doc.kind)]
            if broad:
                report.failed("CKV_NW_4", path, doc.address,
                              f"{_label(st, i)} allows wildcard action(s) {broad} in a {doc.kind} policy.")


# --------------------------------------------------------------------------------------------
# CKV_NW_5: launch/terminate conditioned on the ownership tag
# --------------------------------------------------------------------------------------------


def _has_owner_tag(st: Statement, prefix: str) -> bool:
    for c in st.conditions:
        if (c.key.lower().startswith(f"{prefix}/kubernetes.io/cluster/") and c.operator.lower() in ("stringequals", "stringlike")
                and list(c.values) == ["owned"]):
            return True
    return False


def _only_referenced_types(st: Statement) -> bool:
    if not st.resources or st.not_resources:
        return False
    for r in st.resources:
        tail = _TOKEN.sub("x", r).split(":")[-1]
        if not any(tail.startswith(f"{t}/") for t in REFERENCED_EC2_TYPES):
            return False
    return True


def _launch_problems(st: Statement) -> list[str]:
    problems = []
    creates = [a for a in CREATE_ACTIONS if st.grants(a)]
    if creates and not _only_referenced_types(st) and not (
            _has_owner_tag(st, "aws:requesttag") or _has_owner_tag(st, "aws:resourcetag")):
        problems.append(f"allows {creates} without aws:RequestTag/kubernetes.io/cluster/<cluster> = owned")
    destroys = [a for a in DESTROY_ACTIONS if st.grants(a)]
    if destroys and not _has_owner_tag(st, "aws:resourcetag"):
        problems.append(f"allows {destroys} without aws:ResourceTag/kubernetes.io/cluster/<cluster> = owned: "
                        f"it could terminate instances or launch templates of other clusters")
    return problems


def check_launch_conditions(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_5 on every identity policy document that grants a launch or terminate action."""
    for doc in _identity_docs(model):
        path = project.stacks[doc.stack].path
        for i, st in enumerate(doc.statements):
            if not st.allows or not any(st.grants(a) for a in CREATE_ACTIONS + DESTROY_ACTIONS):
                continue
            report.passed("CKV_NW_5", path, doc.address)
            for problem in _launch_problems(st):
                report.failed("CKV_NW_5", path, doc.address, f"{_label(st, i)} {problem}.")


# --------------------------------------------------------------------------------------------
# CKV_NW_6: instance profile -> node role -> trusts EC2 only
# --------------------------------------------------------------------------------------------


def _node_trust_problems(role: Role) -> list[str]:
    if role.trust.error:
        return [f"its trust policy cannot be read: {role.trust.error}"]
    allows = [s for s in role.trust.statements if s.allows]
    if not allows:
        return ["its trust policy allows nobody (EC2 cannot assume it)"]
    problems = []
    for i, st in enumerate(allows):
        others = {k: v for k, v in st.principals.items() if k != "Service"}
        services = set(st.principals.get("Service", []))
        if others or not services or not services <= EC2_SERVICE:
            problems.append(f"trust {_label(st, i)} trusts {st.principals}, not only Service ec2.amazonaws.com")
        extra = [a for a in st.actions if a.lower() not in ("sts:assumerole", "sts:tagsession")]
        if extra or st.not_actions:
            problems.append(f"trust {_label(st, i)} allows {extra or st.not_actions}, not only sts:AssumeRole")
    return problems


def check_instance_profiles(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_6 on every instance profile and the role it holds."""
    controllers = model.controllers()
    for stack, address, role in node_roles(project, model):
        path = project.stacks[stack].path
        report.passed("CKV_NW_6", path, address)
        if role is None:
            report.failed("CKV_NW_6", path, address,
                          "The instance profile's role is not a role of the synthesized stacks, so it cannot be "
                          "shown to be the node role.")
            continue
        if role in controllers or role.is_web_identity() or role.is_pod_identity():
            report.failed("CKV_NW_6", path, address,
                          f"The instance profile holds {role.address}, a controller/IRSA role: nodes would get the "
                          f"controller's permissions.")
        passable = [c for c in controllers if any(
            covers_role(project, doc.stack, r, role) for doc in c.permissions for s in doc.statements
            if s.allows and s.grants("iam:PassRole") for r in s.resources)]
        if controllers and not passable:
            report.failed("CKV_NW_6", path, address,
                          f"The instance profile holds {role.address}, which no controller role may iam:PassRole: "
                          f"it is not the node role, and {FIELD_REPORT_FAILURE}.")
        role_path = project.stacks[role.stack].path
        report.passed("CKV_NW_6", role_path, role.address)
        for problem in _node_trust_problems(role):
            report.failed("CKV_NW_6", role_path, role.address, f"Node role {role.address}: {problem}.")


def _identity_docs(model: IamModel) -> list[PolicyDoc]:
    return [d for d in model.documents if d.kind == "identity" and not d.error]


def run(project: Project, model: IamModel) -> RuleReport:
    """All IAM rules (CKV_NW_1..6) over a project."""
    report = RuleReport()
    for rule in (check_passrole_present, check_passrole_scoped, check_controller_trust, check_wildcards,
                 check_launch_conditions, check_instance_profiles):
        rule(project, model, report)
    return report
