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
  Instance profiles are created only with ``aws:RequestTag/kubernetes.io/cluster/<cluster> = owned`` and
  changed or deleted only with that ``aws:ResourceTag``: with ``iam:AddRoleToInstanceProfile`` on any profile a
  controller could put any passable role into a profile of its choosing.
- ``ec2:CreateTags`` is safe only on create (``ec2:CreateAction``, EC2 user guide "Grant permission to tag
  resources during creation") or on resources already tagged ``kubernetes.io/cluster/<cluster> = owned``
  (Karpenter's ``AllowScopedResourceTagging``): otherwise the controller can tag any instance as its own and
  then terminate it.
- A KMS key policy with Principal ``*`` (or ``AWS: *``) and no condition naming the caller's account,
  organization or ARN lets any AWS account use the key (KMS developer guide, "Key policies").
- IAM quotas ("IAM and AWS STS quotas"): a managed policy holds at most 6,144 characters, an inline policy
  10,240, a role trust policy 2,048 by default (4,096 on request), white space not counted; a policy without
  ``Version: 2012-10-17`` is read with the 2008 grammar, in which policy variables are literal text.
"""

from __future__ import annotations

import fnmatch
import re

from nw_catalog import RuleReport
from nw_iam_model import IamModel, PolicyDoc, Role, find_role
from nw_iampolicy import Statement
from nw_tfdoc import Project, scalar, str_list

FIELD_REPORT_FAILURE = (
    "launches will fail in production with 'UnauthorizedOperation: You are not authorized to perform: "
    "iam:PassRole on resource <node role>', the first field report's failure"
)
PASSED_TO_SERVICE_OPS = ("StringEquals", "StringLike", "ForAnyValue:StringEquals", "ForAllValues:StringEquals")
EC2_SERVICE = {"ec2.amazonaws.com", "ec2.amazonaws.com.cn"}
POD_IDENTITY_SERVICE = "pods.eks.amazonaws.com"
SERVICE_ACCOUNT_SUB = re.compile(r"^system:serviceaccount:[a-z0-9]([-a-z0-9]*[a-z0-9])?:[a-z0-9]([-.a-z0-9]*[a-z0-9])?$")
CREATE_ACTIONS = ("ec2:RunInstances", "ec2:CreateFleet")
PROFILE_CREATE_ACTIONS = ("iam:CreateInstanceProfile", "iam:TagInstanceProfile")
PROFILE_CHANGE_ACTIONS = ("iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile",
                          "iam:DeleteInstanceProfile", "iam:TagInstanceProfile", "iam:UntagInstanceProfile")
# AWS managed policies that make a node (and every pod on it) an administrator; any ``*FullAccess`` policy
# (AmazonEC2FullAccess, AmazonS3FullAccess...) gives every pod on the node a whole service.
ADMIN_MANAGED_POLICIES = ("AdministratorAccess", "PowerUserAccess", "IAMFullAccess")
FULL_ACCESS_SUFFIX = "FullAccess"
# EC2 writes a node role never needs (the VPC CNI's ENI actions, e.g. ec2:AssignPrivateIpAddresses and
# ec2:CreateTags on network interfaces, are not in the list): with them a pod on a node launches, stops or
# terminates instances or opens security groups.
NODE_FORBIDDEN_EC2_ACTIONS = (
    "ec2:RunInstances", "ec2:CreateFleet", "ec2:TerminateInstances", "ec2:StopInstances", "ec2:StartInstances",
    "ec2:RebootInstances", "ec2:ModifyInstanceAttribute", "ec2:ModifyInstanceMetadataOptions",
    "ec2:CreateLaunchTemplate", "ec2:CreateLaunchTemplateVersion", "ec2:ModifyLaunchTemplate",
    "ec2:DeleteLaunchTemplate", "ec2:AuthorizeSecurityGroupIngress", "ec2:AuthorizeSecurityGroupEgress",
    "ec2:ModifySecurityGroupRules", "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup", "ec2:DeleteVolume",
    "ec2:DetachVolume", "ec2:DeleteSnapshot")
# Condition keys that pin who may use a key whose policy names Principal "*" (KMS developer guide, "Key policies":
# kms:CallerAccount with kms:ViaService is AWS's own pattern for service-integrated keys).
KMS_NARROWING_KEYS = ("kms:calleraccount", "aws:principalaccount", "aws:principalorgid", "aws:principalarn",
                      "aws:sourceaccount", "aws:sourcearn")
# IAM actions that let a role change IAM itself (escalation from a node).
IAM_ESCALATION_ACTIONS = ("iam:PassRole", "iam:CreateRole", "iam:AttachRolePolicy", "iam:PutRolePolicy",
                          "iam:UpdateAssumeRolePolicy", "iam:CreateAccessKey", "iam:CreatePolicyVersion")
SIZE_LIMITS = {"aws_iam_policy": 6144, "aws_iam_role_policy": 10240, "aws_iam_role": 2048}
# RebootInstances (node repair, AWS gate RebootForRepair): rebooting another cluster's instances is an outage too.
DESTROY_ACTIONS = ("ec2:TerminateInstances", "ec2:DeleteLaunchTemplate", "ec2:RebootInstances")
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


def passed_roles(project: Project, model: IamModel) -> list[Role]:
    """Roles of the project a controller may ``iam:PassRole`` (the node role when the controller creates the
    instance profiles itself, Karpenter v1's default and ours without a Terraform instance profile)."""
    out: list[Role] = []
    for controller in model.controllers():
        for doc in controller.permissions:
            for st in doc.statements:
                if not (st.allows and st.grants("iam:PassRole")):
                    continue
                for role in model.roles.values():
                    if role not in out and role is not controller and any(
                            not _is_wildcard_role_resource(r) and not _role_pattern_wildcard(r)
                            and covers_role(project, doc.stack, r, role)
                            for r in st.resources):
                        out.append(role)
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


def _role_pattern_wildcard(resource: str) -> bool:
    """True when the role path/name part of an ARN (references aside) holds ``*`` or ``?``."""
    text = _TOKEN.sub("x", resource)
    return ":role/" in text and any(c in text.split(":role/", 1)[1] for c in "*?")


def _passrole_problems(st: Statement, project: Project | None = None, stack: str = "",
                       model: IamModel | None = None) -> list[str]:
    problems = []
    if st.not_resources:
        problems.append("uses NotResource (PassRole on everything else)")
    wild = [r for r in st.resources if _is_wildcard_role_resource(r)]
    if wild:
        problems.append(f"is on {wild[0]!r}: any role, including admin roles, could be passed")
    for resource in st.resources:
        if resource in wild or not _role_pattern_wildcard(resource):
            continue
        others = sorted(r.address for r in (model.roles.values() if model else [])
                        if project is not None and covers_role(project, stack, resource, r)
                        and not _is_node_role(project, model, r))
        problems.append(f"is on the wildcard {resource!r}: it matches "
                        + (f"other roles of the stacks ({', '.join(others)}) and " if others else "")
                        + "any role created later with that name; name the node role's ARN exactly")
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
            for problem in _passrole_problems(st, project, doc.stack, model):
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


def _unpinned_everyone(st: Statement) -> bool:
    everyone = bool(st.principals.get("*")) or "*" in st.principals.get("AWS", [])
    return everyone and not any(c.key.lower() in KMS_NARROWING_KEYS for c in st.conditions)


def check_wildcards(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_4 on every policy document of the project."""
    for doc in model.documents:
        path = project.stacks[doc.stack].path
        report.passed("CKV_NW_4", path, doc.address)
        if doc.error:
            report.failed("CKV_NW_4", path, doc.address, f"The {doc.kind} policy cannot be checked: {doc.error}.")
            continue
        if doc.version != "2012-10-17":
            report.failed("CKV_NW_4", path, doc.address,
                          f"The {doc.kind} policy has Version {doc.version!r}, not '2012-10-17': IAM reads it with "
                          f"the 2008 grammar (policy variables become literal text).")
        limit = SIZE_LIMITS.get(doc.address.split(".")[0]) if doc.kind != "resource" else None
        if limit is not None and doc.chars is not None and doc.chars > limit:
            report.failed("CKV_NW_4", path, doc.address,
                          f"The {doc.kind} policy is about {doc.chars} characters (references at their longest), "
                          f"over IAM's limit of {limit}: split it into several managed policies.")
        for i, st in enumerate(doc.statements):
            if not st.allows:
                continue
            if doc.address.startswith("aws_kms_key.") and _unpinned_everyone(st):
                report.failed("CKV_NW_4", path, doc.address,
                              f"The key policy's {_label(st, i)} allows Principal '*' without a condition naming the "
                              f"caller (kms:CallerAccount, aws:PrincipalAccount, aws:PrincipalOrgID...): any AWS "
                              f"account may use the key.")
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
                        f"it could terminate (or reboot) instances or delete launch templates of other clusters")
    if st.grants("ec2:CreateTags") and not any(c.key.lower() == "ec2:createaction" for c in st.conditions) \
            and not _has_owner_tag(st, "aws:resourcetag"):
        problems.append("allows ec2:CreateTags without an ec2:CreateAction condition (tag on create) or "
                        "aws:ResourceTag/kubernetes.io/cluster/<cluster> = owned: the controller could tag any "
                        "instance as its own, then terminate it")
    creates_profiles = [a for a in PROFILE_CREATE_ACTIONS if st.grants(a)]
    changes_profiles = [a for a in PROFILE_CHANGE_ACTIONS if st.grants(a)]
    if creates_profiles or changes_profiles:
        unscoped = [r for r in st.resources if not _TOKEN.sub("x", r).split(":")[-1].startswith("instance-profile/")]
        if st.not_resources or unscoped or not st.resources:
            problems.append(f"allows {creates_profiles + changes_profiles} on {unscoped or st.not_resources or '*'}, "
                            f"not only instance-profile ARNs")
        if "iam:CreateInstanceProfile" in creates_profiles and not _has_owner_tag(st, "aws:requesttag"):
            problems.append("allows iam:CreateInstanceProfile without aws:RequestTag/kubernetes.io/cluster/<cluster> "
                            "= owned")
        if changes_profiles and not _has_owner_tag(st, "aws:resourcetag"):
            problems.append(f"allows {changes_profiles} without aws:ResourceTag/kubernetes.io/cluster/<cluster> = "
                            f"owned: it could put any passable role into any instance profile of the account")
    return problems


def check_launch_conditions(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_5 on every identity policy document of a controller role (or of no role) that grants a launch,
    terminate or instance-profile action. Another role's launches (an image builder's) are its own business."""
    controller_docs = {id(d) for r in model.controllers() for d in r.permissions}
    attached = {id(d) for r in model.roles.values() for d in r.permissions}
    for doc in _identity_docs(model):
        if id(doc) in attached and id(doc) not in controller_docs:
            continue
        path = project.stacks[doc.stack].path
        for i, st in enumerate(doc.statements):
            if not st.allows or not any(st.grants(a) for a in CREATE_ACTIONS + DESTROY_ACTIONS + ("ec2:CreateTags",)
                                        + PROFILE_CREATE_ACTIONS + PROFILE_CHANGE_ACTIONS):
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


def _is_node_role(project: Project, model: IamModel | None, role: Role) -> bool:
    if model is None:
        return False
    return any(r is role for _, _, r in node_roles(project, model)) or role in passed_roles(project, model)


def _managed_policy_arns(project: Project, role: Role) -> list[str]:
    """Policy ARNs attached to ``role`` (attachments and ``managed_policy_arns``), references kept."""
    arns = str_list(role.conf.get("managed_policy_arns"))
    for type_, attr in (("aws_iam_role_policy_attachment", "role"), ("aws_iam_policy_attachment", "roles")):
        for stack, _name, conf in project.all_resources(type_):
            for value in str_list(conf.get(attr)):
                ref = project.resolve(stack.name, value)
                if (ref is not None and ref.type == "aws_iam_role" and (ref.stack, ref.name) == role.key) or (
                        ref is None and role.role_name is not None and value == role.role_name):
                    arns += str_list(conf.get("policy_arn"))
    return arns


def _admin_problems(project: Project, role: Role) -> list[str]:
    problems = []
    for arn in _managed_policy_arns(project, role):
        name = _TOKEN.sub("x", arn).rsplit(":policy/", 1)[-1].split("/")[-1]
        if ":policy/" in _TOKEN.sub("x", arn) and (name in ADMIN_MANAGED_POLICIES or name.endswith(FULL_ACCESS_SUFFIX)):
            problems.append(f"has the AWS managed policy {name} attached ({arn}): every pod on a node gets it")
    escalating = sorted({a for s in role.allowed() for a in IAM_ESCALATION_ACTIONS if s.grants(a)})
    if escalating:
        problems.append(f"may {escalating}: a node could change IAM")
    ec2_writes = sorted({a for s in role.allowed() for a in NODE_FORBIDDEN_EC2_ACTIONS if s.grants(a)})
    if ec2_writes:
        problems.append(f"may {ec2_writes}: any pod on a node could launch, stop or terminate instances or open "
                        f"security groups (only the controller launches)")
    return problems


def check_instance_profiles(project: Project, model: IamModel, report: RuleReport) -> None:
    """CKV_NW_6 on every instance profile and the role it holds; without Terraform instance profiles (the
    controller creates them, Karpenter v1's setup) on the roles the controller may pass."""
    controllers = model.controllers()
    profiled = node_roles(project, model)
    for role in passed_roles(project, model):
        if any(r is role for _, _, r in profiled):
            continue
        role_path = project.stacks[role.stack].path
        report.passed("CKV_NW_6", role_path, role.address)
        for problem in _node_trust_problems(role) + _admin_problems(project, role):
            report.failed("CKV_NW_6", role_path, role.address, f"Node role {role.address}: {problem}.")
    for stack, address, role in profiled:
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
        for problem in _node_trust_problems(role) + _admin_problems(project, role):
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
