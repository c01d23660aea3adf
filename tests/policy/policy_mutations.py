"""In-memory mutations of synthesized stacks and rendered manifests: the regression variants.

Each mutation edits the documents in place and returns how many places it changed; a mutation that
changes nothing raises ``AssertionError`` (the stacks changed shape, and the test would prove nothing).
Policy documents are edited whether they are JSON strings in a resource (IAM JSON, ``Action``...) or
``aws_iam_policy_document`` data sources (``actions``...), so the same mutation works on the hand-written
fixture and on the real synthesis.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import yaml

POLICY_ATTRS = {
    "aws_iam_policy": ("policy", "identity"),
    "aws_iam_role_policy": ("policy", "identity"),
    "aws_iam_role": ("assume_role_policy", "trust"),
}
Docs = dict[str, dict[str, Any]]


class St:
    """One statement of either style: ``json`` (IAM JSON) or ``data`` (aws_iam_policy_document)."""

    def __init__(self, raw: dict[str, Any], style: str) -> None:
        self.raw, self.style = raw, style

    def _key(self, json_key: str, data_key: str) -> str:
        return json_key if self.style == "json" else data_key

    @property
    def actions(self) -> list[str]:
        value = self.raw.get(self._key("Action", "actions"), [])
        return [value] if isinstance(value, str) else list(value)

    @actions.setter
    def actions(self, value: list[str]) -> None:
        self.raw[self._key("Action", "actions")] = value

    @property
    def resources(self) -> list[str]:
        value = self.raw.get(self._key("Resource", "resources"), [])
        return [value] if isinstance(value, str) else list(value)

    @resources.setter
    def resources(self, value: list[str]) -> None:
        self.raw[self._key("Resource", "resources")] = value

    def drop_conditions(self, key_suffix: str) -> int:
        """Remove condition tests whose key ends with ``key_suffix``; return how many."""
        removed = 0
        if self.style == "json":
            for op, tests in list(self.raw.get("Condition", {}).items()):
                for key in [k for k in tests if k.endswith(key_suffix)]:
                    del tests[key]
                    removed += 1
                if not tests:
                    del self.raw["Condition"][op]
            if "Condition" in self.raw and not self.raw["Condition"]:
                del self.raw["Condition"]
        else:
            kept = [c for c in self.raw.get("condition", []) if not c["variable"].endswith(key_suffix)]
            removed = len(self.raw.get("condition", [])) - len(kept)
            self.raw["condition"] = kept
        return removed


def _holders(doc: dict[str, Any], kind: str) -> Iterator[tuple[dict[str, Any], str]]:
    """(conf, attribute) of every resource attribute holding a policy of ``kind``."""
    for type_, (attr, attr_kind) in POLICY_ATTRS.items():
        if attr_kind != kind:
            continue
        for conf in (doc.get("resource", {}).get(type_) or {}).values():
            if isinstance(conf.get(attr), str):
                yield conf, attr


def edit_statements(docs: Docs, kind: str, fn: Callable[[list[St]], list[St] | None]) -> int:
    """Apply ``fn`` to the statement list of every ``kind`` ("identity"/"trust") policy document.

    ``fn`` returns the new list (or None for unchanged). Returns how many documents changed.
    """
    changed = 0
    for doc in docs.values():
        for conf, attr in _holders(doc, kind):
            text = conf[attr]
            if text.startswith("${data.aws_iam_policy_document."):
                name = text.split(".")[2]
                data = doc["data"]["aws_iam_policy_document"][name]
                new = fn([St(s, "data") for s in data["statement"]])
                if new is not None:
                    data["statement"] = [s.raw for s in new]
                    changed += 1
            elif text.lstrip().startswith("{"):
                policy = json.loads(text)
                stmts = policy["Statement"] if isinstance(policy["Statement"], list) else [policy["Statement"]]
                new = fn([St(s, "json") for s in stmts])
                if new is not None:
                    policy["Statement"] = [s.raw for s in new]
                    conf[attr] = json.dumps(policy)
                    changed += 1
    assert changed, f"mutation changed no {kind} policy"
    return changed


def _grants_passrole(st: St) -> bool:
    return any(a.lower() == "iam:passrole" for a in st.actions)


def passrole_removed(docs: Docs) -> int:
    """The first field report's bug: the controller policy without iam:PassRole."""
    def fn(sts: list[St]) -> list[St] | None:
        kept = [s for s in sts if not _grants_passrole(s)]
        return kept if len(kept) != len(sts) else None
    return edit_statements(docs, "identity", fn)


def _passrole_on(docs: Docs, resource: str) -> int:
    def fn(sts: list[St]) -> list[St] | None:
        hits = [s for s in sts if _grants_passrole(s)]
        for s in hits:
            s.resources = [resource]
        return sts if hits else None
    return edit_statements(docs, "identity", fn)


def passrole_on_star(docs: Docs) -> int:
    """iam:PassRole on Resource "*"."""
    return _passrole_on(docs, "*")


def passrole_without_condition(docs: Docs) -> int:
    """iam:PassRole without the iam:PassedToService condition."""
    def fn(sts: list[St]) -> list[St] | None:
        removed = sum(s.drop_conditions("iam:PassedToService") for s in sts if _grants_passrole(s))
        return sts if removed else None
    return edit_statements(docs, "identity", fn)


def trust_without_sub(docs: Docs) -> int:
    """The IRSA trust without its ``:sub`` condition (any service account could assume the role)."""
    def fn(sts: list[St]) -> list[St] | None:
        removed = sum(s.drop_conditions(":sub") for s in sts)
        return sts if removed else None
    return edit_statements(docs, "trust", fn)


def ec2_star(docs: Docs) -> int:
    """``ec2:*`` added to the first launch statement of the controller policy."""
    def fn(sts: list[St]) -> list[St] | None:
        for s in sts:
            if any(a.lower() == "ec2:runinstances" for a in s.actions):
                s.actions = [*s.actions, "ec2:*"]
                return sts
        return None
    return edit_statements(docs, "identity", fn)


def _controller_policy(sts: list[St]) -> bool:
    return any(a.lower() in ("ec2:runinstances", "ec2:createfleet") for s in sts for a in s.actions)


def _add_statement(docs: Docs, statement: dict[str, Any]) -> int:
    """Append ``statement`` (IAM JSON shape) to the first controller policy document (a launching one)."""
    done: list[bool] = []

    def fn(sts: list[St]) -> list[St] | None:
        if done or not _controller_policy(sts):
            return None
        done.append(True)
        style = sts[0].style
        if style == "json":
            return [*sts, St(dict(statement), "json")]
        data: dict[str, Any] = {"sid": statement.get("Sid", ""), "effect": statement["Effect"],
                                "actions": statement["Action"], "resources": statement["Resource"]}
        data["condition"] = [{"test": op, "variable": k, "values": v if isinstance(v, list) else [v]}
                             for op, tests in statement.get("Condition", {}).items() for k, v in tests.items()]
        return [*sts, St(data, "data")]
    return edit_statements(docs, "identity", fn)


def instance_profile_create_unscoped(docs: Docs) -> int:
    """iam:CreateInstanceProfile on any resource, without the ownership request tag."""
    return _add_statement(docs, {"Sid": "CreateProfiles", "Effect": "Allow", "Action": ["iam:CreateInstanceProfile"],
                                 "Resource": ["*"]})


def instance_profile_actions_unscoped(docs: Docs) -> int:
    """Add/remove roles and delete any instance profile of the account (no ownership resource tag)."""
    return _add_statement(docs, {
        "Sid": "ManageProfiles", "Effect": "Allow",
        "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
        "Resource": ["arn:aws:iam::111122223333:instance-profile/*"]})


def passrole_prefix_wildcard(docs: Docs) -> int:
    """iam:PassRole on ``role/nodewright-*``: the node role, but also the controller role and any later one."""
    return _passrole_on(docs, "arn:aws:iam::111122223333:role/nodewright-*")


def policy_without_version(docs: Docs) -> int:
    """A JSON policy document without ``Version`` (IAM then reads it with the 2008 grammar)."""
    for doc in docs.values():
        for conf, attr in _holders(doc, "trust"):
            text = conf[attr]
            if text.lstrip().startswith("{") and '"Version"' in text:
                policy = json.loads(text)
                del policy["Version"]
                conf[attr] = json.dumps(policy)
                return 1
    raise AssertionError("no JSON trust policy with a Version")


def policy_over_size(docs: Docs) -> int:
    """The controller policy grown past 6,144 characters (forty more scoped statements)."""
    changed = 0
    for i in range(40):
        changed += _add_statement(docs, {
            "Sid": f"AllowDescribeWithAFairlyLongStatementName{i:02d}", "Effect": "Allow",
            "Action": ["ec2:DescribeInstances"], "Resource": ["*"],
            "Condition": {"StringEquals": {"aws:RequestedRegion": "ap-northeast-2"}}})
    return changed


def _node_role(docs: Docs) -> tuple[str, str]:
    """(stack, resource name) of the role the instance profile (or PassRole) names."""
    for stack, doc in docs.items():
        for conf in (doc.get("resource", {}).get("aws_iam_instance_profile") or {}).values():
            return stack, str(conf["role"]).split(".")[1]
    raise AssertionError("no instance profile")


def _attach(docs: Docs, policy_arn: str) -> int:
    stack, role = _node_role(docs)
    attachments = docs[stack]["resource"].setdefault("aws_iam_role_policy_attachment", {})
    attachments["node_admin"] = {"role": f"${{aws_iam_role.{role}.name}}", "policy_arn": policy_arn}
    return 1


def node_role_administrator(docs: Docs) -> int:
    """AdministratorAccess attached to the node role."""
    return _attach(docs, "arn:aws:iam::aws:policy/AdministratorAccess")


def node_role_poweruser_partition_ref(docs: Docs) -> int:
    """PowerUserAccess attached to the node role, the ARN written with the partition reference."""
    return _attach(docs, "arn:${data.aws_partition.partition.partition}:iam::aws:policy/PowerUserAccess")


def node_role_admin_managed_policy_arns(docs: Docs) -> int:
    """IAMFullAccess through the node role's own ``managed_policy_arns``."""
    stack, role = _node_role(docs)
    docs[stack]["resource"]["aws_iam_role"][role]["managed_policy_arns"] = [
        "arn:${data.aws_partition.partition.partition}:iam::aws:policy/IAMFullAccess"]
    return 1


def node_role_iam_star(docs: Docs) -> int:
    """An inline policy on the node role granting iam:*."""
    stack, role = _node_role(docs)
    docs[stack]["resource"].setdefault("aws_iam_role_policy", {})["node_iam"] = {
        "role": f"${{aws_iam_role.{role}.name}}",
        "policy": json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "iam:*", "Resource": "*"}]})}
    return 1


def _queue(docs: Docs) -> tuple[dict[str, Any], list[tuple[dict[str, Any], str]]]:
    """The interruption queue's configuration and the (conf, attribute) of its policy documents."""
    for doc in docs.values():
        queues = doc.get("resource", {}).get("aws_sqs_queue") or {}
        for conf in queues.values():
            holders = [(conf, "policy")] if isinstance(conf.get("policy"), str) else []
            holders += [(c, "policy") for c in (doc["resource"].get("aws_sqs_queue_policy") or {}).values()]
            return conf, holders
    raise AssertionError("no queue")


def queue_public_send(docs: Docs) -> int:
    """Anyone may sqs:SendMessage to the interruption queue."""
    _conf, holders = _queue(docs)
    conf, attr = holders[0]
    policy = json.loads(conf[attr])
    policy["Statement"].append({"Sid": "AnyoneMaySend", "Effect": "Allow", "Principal": "*",
                                "Action": "sqs:SendMessage", "Resource": "*"})
    conf[attr] = json.dumps(policy)
    return 1


def queue_retention_days(docs: Docs) -> int:
    """The interruption queue keeps messages four days (SQS's default)."""
    conf, _holders = _queue(docs)
    conf["message_retention_seconds"] = 345600
    return 1


def release_service_account_renamed(docs: Docs) -> int:
    """The Terraform copy: the helm_release installs ServiceAccount ``karpenter`` while the trust names
    ``nodewright``."""
    for doc in docs.values():
        for conf in (doc.get("resource", {}).get("helm_release") or {}).values():
            conf.setdefault("set", []).append({"name": "serviceAccount.name", "value": "karpenter"})
            return 1
    raise AssertionError("no helm_release")


def create_tags_without_create_action(docs: Docs) -> int:
    """``ec2:CreateTags`` on the created types without the ``ec2:CreateAction`` condition: the controller may tag
    any instance with the ownership tag, then terminate it."""
    def fn(sts: list[St]) -> list[St] | None:
        removed = sum(s.drop_conditions("ec2:CreateAction") for s in sts
                      if any(a.lower() == "ec2:createtags" for a in s.actions))
        return sts if removed else None
    return edit_statements(docs, "identity", fn)


def _queue_statements(docs: Docs, fn: Callable[[dict[str, Any]], bool]) -> int:
    """Apply ``fn`` to every statement of the interruption queue's policies; how many it changed."""
    _conf, holders = _queue(docs)
    changed = 0
    for conf, attr in holders:
        policy = json.loads(conf[attr])
        changed += sum(1 for st in policy["Statement"] if fn(st))
        conf[attr] = json.dumps(policy)
    assert changed, "no queue statement changed"
    return changed


def queue_eventbridge_without_source(docs: Docs) -> int:
    """The EventBridge statement without ``aws:SourceArn`` (Karpenter's CloudFormation writes it so): any account's
    rule may send (confused deputy)."""
    def fn(st: dict[str, Any]) -> bool:
        if "Service" not in (st.get("Principal") or {}) or "Condition" not in st:
            return False
        del st["Condition"]
        return True
    return _queue_statements(docs, fn)


def node_role_ec2_full_access(docs: Docs) -> int:
    """AmazonEC2FullAccess attached to the node role."""
    return _attach(docs, "arn:${data.aws_partition.partition.partition}:iam::aws:policy/AmazonEC2FullAccess")


def node_role_ec2_writes(docs: Docs) -> int:
    """An inline policy on the node role that may launch and terminate instances."""
    stack, role = _node_role(docs)
    docs[stack]["resource"].setdefault("aws_iam_role_policy", {})["node_ec2"] = {
        "role": f"${{aws_iam_role.{role}.name}}",
        "policy": json.dumps({"Version": "2012-10-17", "Statement": [
            {"Sid": "SelfHeal", "Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:TerminateInstances"],
             "Resource": "*"}]})}
    return 1


def _kms_key(docs: Docs, statements: list[dict[str, Any]]) -> int:
    stack, _ = _node_role(docs)
    docs[stack]["resource"].setdefault("aws_kms_key", {})["nodes"] = {
        "description": "node volumes", "enable_key_rotation": True,
        "policy": json.dumps({"Version": "2012-10-17", "Statement": [
            {"Sid": "EnableAccountAdministrationThroughIAM", "Effect": "Allow",
             "Principal": {"AWS": "arn:aws:iam::111122223333:root"}, "Action": "kms:*", "Resource": "*"},
            *statements]})}
    return 1


_KEY_USE = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:CreateGrant",
            "kms:DescribeKey"]


def kms_key_wildcard_principal(docs: Docs) -> int:
    """A KMS key policy letting Principal ``*`` use the key, with no condition on the caller."""
    return _kms_key(docs, [{"Sid": "AllowUse", "Effect": "Allow", "Principal": {"AWS": "*"}, "Action": _KEY_USE,
                            "Resource": "*"}])


def release_literal_role_arn_service_account_renamed(docs: Docs) -> int:
    """The release names the controller role by a literal ARN (values written for a role another stack manages)
    and installs ServiceAccount ``karpenter``, which the role's trust does not name."""
    return _release_literal_role_arn(docs, "karpenter")


def _release_literal_role_arn(docs: Docs, service_account: str) -> int:
    def trust_text(doc: dict[str, Any], conf: dict[str, Any]) -> str:
        text = str(conf.get("assume_role_policy"))
        if text.startswith("${data.aws_iam_policy_document."):
            return json.dumps(doc.get("data", {}).get("aws_iam_policy_document", {}).get(text.split(".")[2]))
        return text

    roles = [conf["name"] for doc in docs.values() for conf in (doc.get("resource", {}).get("aws_iam_role") or {}).values()
             if "AssumeRoleWithWebIdentity" in trust_text(doc, conf) and isinstance(conf.get("name"), str)]
    assert roles, "no IRSA role with a literal name"
    for doc in docs.values():
        for conf in (doc.get("resource", {}).get("helm_release") or {}).values():
            if "nodewright" not in str(conf.get("chart", "")):
                continue
            values = conf.get("values") or ["{}"]
            merged = yaml.safe_load(values[0]) or {}
            merged["serviceAccount"] = {"name": service_account, "annotations": {
                "eks.amazonaws.com/role-arn": f"arn:aws:iam::111122223333:role/{roles[0]}"}}
            conf["values"] = [json.dumps(merged), *values[1:]]
            conf["set"] = [e for e in conf.get("set") or [] if not str(e.get("name", "")).startswith("serviceAccount")]
            return 1
    raise AssertionError("no nodewright helm_release")


# --- reasonable configurations the gate must pass (controls) --------------------------------


def karpenter_resource_tagging(docs: Docs) -> int:
    """Karpenter's ``AllowScopedResourceTagging``: CreateTags on owned instances, only the NodeClaim/Name keys."""
    return _add_statement(docs, {
        "Sid": "AllowScopedResourceTagging", "Effect": "Allow", "Action": ["ec2:CreateTags"],
        "Resource": ["arn:aws:ec2:us-east-1:*:instance/*"],
        "Condition": {"StringEquals": {"aws:ResourceTag/kubernetes.io/cluster/nodewright": "owned"},
                      "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
                      "ForAllValues:StringEquals": {"aws:TagKeys": ["karpenter.sh/nodeclaim", "Name"]}}})


def queue_eventbridge_source_account(docs: Docs) -> int:
    """The EventBridge statement pinned by ``aws:SourceAccount`` instead of the rule ARNs."""
    def fn(st: dict[str, Any]) -> bool:
        if "Service" not in (st.get("Principal") or {}) or "Condition" not in st:
            return False
        st["Condition"] = {"StringEquals": {"aws:SourceAccount": "111122223333"}}
        return True
    return _queue_statements(docs, fn)


def node_role_cni_inline(docs: Docs) -> int:
    """The VPC CNI's ENI actions inline on the node role (what AmazonEKS_CNI_Policy grants), and SSM."""
    stack, role = _node_role(docs)
    resources = docs[stack]["resource"]
    resources.setdefault("aws_iam_role_policy", {})["node_cni"] = {
        "role": f"${{aws_iam_role.{role}.name}}",
        "policy": json.dumps({"Version": "2012-10-17", "Statement": [
            {"Sid": "Eni", "Effect": "Allow", "Resource": "*", "Action": [
                "ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface",
                "ec2:DeleteNetworkInterface", "ec2:DescribeInstances", "ec2:DescribeNetworkInterfaces",
                "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute", "ec2:UnassignPrivateIpAddresses"]},
            {"Sid": "TagEni", "Effect": "Allow", "Action": ["ec2:CreateTags"],
             "Resource": ["arn:aws:ec2:*:*:network-interface/*"]}]})}
    resources["aws_iam_role_policy_attachment"]["node_ssm"] = {
        "role": f"${{aws_iam_role.{role}.name}}",
        "policy_arn": "arn:${data.aws_partition.partition.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"}
    return 1


def kms_key_account_pinned(docs: Docs) -> int:
    """AWS's pattern for a service-integrated key: Principal ``*`` pinned by kms:CallerAccount and kms:ViaService."""
    return _kms_key(docs, [{"Sid": "AllowEbsForAccount", "Effect": "Allow", "Principal": {"AWS": "*"},
                            "Action": _KEY_USE, "Resource": "*", "Condition": {"StringEquals": {
                                "kms:CallerAccount": "111122223333", "kms:ViaService": "ec2.us-east-1.amazonaws.com"}}}])


def release_literal_role_arn(docs: Docs) -> int:
    """The release names the controller role by its literal ARN, with the ServiceAccount its trust names."""
    return _release_literal_role_arn(docs, "nodewright")




def queue_tls_deny_string_equals(docs: Docs) -> int:
    """terraform-aws-eks writes the TLS-only deny with StringEquals rather than Bool."""
    _conf, holders = _queue(docs)
    changed = 0
    for conf, attr in holders:
        policy = json.loads(conf[attr])
        for st in policy["Statement"]:
            cond = st.get("Condition", {})
            if "aws:SecureTransport" in cond.get("Bool", {}):
                cond["StringEquals"] = {"aws:SecureTransport": cond.pop("Bool")["aws:SecureTransport"]}
                changed += 1
        conf[attr] = json.dumps(policy)
    assert changed, "no Bool aws:SecureTransport deny"
    return changed


def no_instance_profile(docs: Docs) -> int:
    """Karpenter v1's setup: no Terraform instance profile (the controller creates them from spec.role)."""
    for doc in docs.values():
        if doc.get("resource", {}).pop("aws_iam_instance_profile", None):
            return 1
    raise AssertionError("no instance profile")


def unrelated_launcher(docs: Docs) -> int:
    """A second role, for a CI image builder, that launches instances tagged its own way and passes its own role."""
    stack, _ = _node_role(docs)
    resources = docs[stack]["resource"]
    resources["aws_iam_role"]["image_builder"] = {
        "name": "image-builder",
        "assume_role_policy": json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "codebuild.amazonaws.com"}, "Action": "sts:AssumeRole"}]})}
    resources["aws_iam_role"]["image_builder_instance"] = {
        "name": "image-builder-instance",
        "assume_role_policy": json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})}
    resources.setdefault("aws_iam_role_policy", {})["image_builder"] = {
        "role": "${aws_iam_role.image_builder.name}",
        "policy": json.dumps({"Version": "2012-10-17", "Statement": [
            {"Sid": "Launch", "Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:TerminateInstances"],
             "Resource": "*", "Condition": {"StringEquals": {"aws:RequestTag/purpose": "image-build"}}},
            {"Sid": "PassOwnInstanceRole", "Effect": "Allow", "Action": "iam:PassRole",
             "Resource": "${aws_iam_role.image_builder_instance.arn}",
             "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}}]})}
    return 1


# --------------------------------------------------------------------------------------------
# Manifests (lists of Kubernetes objects)
# --------------------------------------------------------------------------------------------


def _spot_pools(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o.get("kind") == "NodePool" and any(
        r.get("key") == "karpenter.sh/capacity-type" and "spot" in r.get("values", [])
        for r in o["spec"]["template"]["spec"].get("requirements", []))]


def spot_pool_without_taint(objs: list[dict[str, Any]]) -> int:
    """A spot NodePool without its taint."""
    pools = _spot_pools(objs)
    assert pools, "no spot NodePool to mutate"
    pools[0]["spec"]["template"]["spec"].pop("taints", None)
    return 1


def _first(objs: list[dict[str, Any]], kind: str, spec_field: str | None = None) -> dict[str, Any]:
    """The first object of ``kind`` (whose spec has ``spec_field``, when given); AssertionError when none."""
    found = [o for o in objs if o.get("kind") == kind and (spec_field is None or spec_field in o.get("spec", {}))]
    assert found, f"no {kind}{' with ' + spec_field if spec_field else ''} to mutate"
    return found[0]


def nodepool_without_limits(objs: list[dict[str, Any]]) -> int:
    """A NodePool without limits."""
    del _first(objs, "NodePool", "limits")["spec"]["limits"]
    return 1


def imdsv1_allowed(objs: list[dict[str, Any]]) -> int:
    """An EC2NodeClass that allows IMDSv1 (httpTokens: optional)."""
    _first(objs, "EC2NodeClass")["spec"].setdefault("metadataOptions", {})["httpTokens"] = "optional"
    return 1


def container_as_root(objs: list[dict[str, Any]]) -> int:
    """The controller container as root."""
    deployments = [o for o in objs if o.get("kind") == "Deployment"]
    assert deployments, "no Deployment to mutate"
    pod = deployments[0]["spec"]["template"]["spec"]
    pod.get("securityContext", {}).pop("runAsNonRoot", None)
    container = pod["containers"][0]
    container.setdefault("securityContext", {}).update({"runAsNonRoot": False, "runAsUser": 0})
    return 1


def _cluster_roles(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roles = [o for o in objs if o.get("kind") == "ClusterRole" and len(o.get("rules", [])) > 2]
    assert roles, "no ClusterRole with several rules"
    return roles


def clusterrole_wildcard_verb_in_last_rule(objs: list[dict[str, Any]]) -> int:
    """A ``*`` verb in the ClusterRole's last rule (not its first)."""
    _cluster_roles(objs)[0]["rules"][-1]["verbs"] = ["*"]
    return 1


def clusterrole_wildcard_resource_in_second_rule(objs: list[dict[str, Any]]) -> int:
    """A ``*`` resource in the ClusterRole's second rule."""
    _cluster_roles(objs)[0]["rules"][1]["resources"] = ["*"]
    return 1


def role_wildcard_api_group(objs: list[dict[str, Any]]) -> int:
    """A ``*`` apiGroup in the leader-election Role's rule."""
    _first(objs, "Role")["rules"][-1]["apiGroups"] = ["*"]
    return 1


def chart_service_account_renamed(objs: list[dict[str, Any]]) -> int:
    """The chart copy: the rendered ServiceAccount is ``karpenter``, annotated with the role whose trust names
    ``nodewright``."""
    accounts = [o for o in objs if o.get("kind") == "ServiceAccount"
                and "eks.amazonaws.com/role-arn" in (o["metadata"].get("annotations") or {})]
    assert accounts, "no annotated ServiceAccount"
    accounts[0]["metadata"]["name"] = "karpenter"
    return 1


def clusterrole_reads_secrets(objs: list[dict[str, Any]]) -> int:
    """The ClusterRole may get/list/watch Secrets (every namespace's)."""
    _cluster_roles(objs)[0]["rules"].append({"apiGroups": [""], "resources": ["secrets"],
                                             "verbs": ["get", "list", "watch"]})
    return 1


def _network_policy(ingress: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "nodewright", "namespace": "kube-system"},
            "spec": {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "nodewright"}},
                     "policyTypes": ["Ingress"], "ingress": ingress}}


def network_policy_admits_all(objs: list[dict[str, Any]]) -> int:
    """A NetworkPolicy whose ingress rule is ``{}`` (every port, every source)."""
    objs.append(_network_policy([{}]))
    return 1


def nodeclass_unencrypted_volume(objs: list[dict[str, Any]]) -> int:
    """An EC2NodeClass root volume with ``encrypted: false``."""
    _first(objs, "EC2NodeClass")["spec"]["blockDeviceMappings"] = [
        {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": False}}]
    return 1


def role_reads_named_secret(objs: list[dict[str, Any]]) -> int:
    """Control: a namespaced Role reading one named Secret."""
    objs.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                 "metadata": {"name": "nodewright-webhook", "namespace": "kube-system"},
                 "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                            "resourceNames": ["nodewright-cert"]}]})
    return 1


def network_policy_metrics_port(objs: list[dict[str, Any]]) -> int:
    """Control: the chart's NetworkPolicy: the metrics port from any source, and from a monitoring namespace."""
    objs.append(_network_policy([{"ports": [{"port": "http-metrics", "protocol": "TCP"}]},
                                 {"from": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]}]))
    return 1


def nodeclass_encrypted_with_kms(objs: list[dict[str, Any]]) -> int:
    """Control: an EC2NodeClass root volume encrypted with a customer managed key."""
    _first(objs, "EC2NodeClass")["spec"]["blockDeviceMappings"] = [
        {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi", "encrypted": True,
                                            "kmsKeyID": "arn:aws:kms:us-east-1:111122223333:key/abc"}}]
    return 1


def nodeclass_without_metadata_options(objs: list[dict[str, Any]]) -> int:
    """Control: an EC2NodeClass that leaves metadataOptions to the (safe) defaults."""
    del _first(objs, "EC2NodeClass", "metadataOptions")["spec"]["metadataOptions"]
    return 1


def nodepool_gpu_limits_only(objs: list[dict[str, Any]]) -> int:
    """Control: a GPU NodePool bounded by ``nvidia.com/gpu`` only."""
    _first(objs, "NodePool")["spec"]["limits"] = {"nvidia.com/gpu": "8"}
    return 1


TF_VARIANTS: dict[str, tuple[Callable[[Docs], int], str]] = {
    "passrole-removed": (passrole_removed, "CKV_NW_1"),
    "passrole-on-star": (passrole_on_star, "CKV_NW_2"),
    "passrole-without-condition": (passrole_without_condition, "CKV_NW_2"),
    "trust-without-sub": (trust_without_sub, "CKV_NW_3"),
    "ec2-star": (ec2_star, "CKV_NW_4"),
    "instance-profile-create-unscoped": (instance_profile_create_unscoped, "CKV_NW_5"),
    "instance-profile-actions-unscoped": (instance_profile_actions_unscoped, "CKV_NW_5"),
    "passrole-prefix-wildcard": (passrole_prefix_wildcard, "CKV_NW_2"),
    "policy-without-version": (policy_without_version, "CKV_NW_4"),
    "policy-over-size": (policy_over_size, "CKV_NW_4"),
    "node-role-administrator": (node_role_administrator, "CKV_NW_6"),
    "node-role-poweruser-partition-ref": (node_role_poweruser_partition_ref, "CKV_NW_6"),
    "node-role-admin-managed-policy-arns": (node_role_admin_managed_policy_arns, "CKV_NW_6"),
    "node-role-iam-star": (node_role_iam_star, "CKV_NW_6"),
    "queue-public-send": (queue_public_send, "CKV_NW_7"),
    "queue-retention-days": (queue_retention_days, "CKV_NW_7"),
    "release-service-account-renamed": (release_service_account_renamed, "CKV_NW_12"),
    # issue #27, item 5
    "create-tags-without-create-action": (create_tags_without_create_action, "CKV_NW_5"),
    "queue-eventbridge-without-source": (queue_eventbridge_without_source, "CKV_NW_7"),
    "node-role-ec2-full-access": (node_role_ec2_full_access, "CKV_NW_6"),
    "node-role-ec2-writes": (node_role_ec2_writes, "CKV_NW_6"),
    "kms-key-wildcard-principal": (kms_key_wildcard_principal, "CKV_NW_4"),
    "release-literal-role-arn-service-account-renamed": (release_literal_role_arn_service_account_renamed,
                                                         "CKV_NW_12"),
}
K8S_VARIANTS: dict[str, tuple[Callable[[list[dict[str, Any]]], int], str]] = {
    "spot-without-taint": (spot_pool_without_taint, "CKV_NW_9"),
    "nodepool-without-limits": (nodepool_without_limits, "CKV_NW_8"),
    "imdsv1": (imdsv1_allowed, "CKV_NW_10"),
    "container-as-root": (container_as_root, "CKV_NW_11"),
    "clusterrole-wildcard-verb-last-rule": (clusterrole_wildcard_verb_in_last_rule, "CKV_NW_13"),
    "clusterrole-wildcard-resource-second-rule": (clusterrole_wildcard_resource_in_second_rule, "CKV_NW_13"),
    "role-wildcard-api-group": (role_wildcard_api_group, "CKV_NW_13"),
    "chart-service-account-renamed": (chart_service_account_renamed, "CKV_NW_12"),
    # issue #27, item 5
    "clusterrole-reads-secrets": (clusterrole_reads_secrets, "CKV_NW_13"),
    "networkpolicy-admits-all": (network_policy_admits_all, "CKV_NW_14"),
    "nodeclass-unencrypted-volume": (nodeclass_unencrypted_volume, "CKV_NW_10"),
}
#: Reasonable configurations the gate must pass (no CKV_NW finding at all).
TF_CONTROLS: dict[str, Callable[[Docs], int]] = {
    "queue-tls-deny-string-equals": queue_tls_deny_string_equals,
    "no-instance-profile": no_instance_profile,
    "unrelated-launcher": unrelated_launcher,
    "karpenter-resource-tagging": karpenter_resource_tagging,
    "queue-eventbridge-source-account": queue_eventbridge_source_account,
    "node-role-cni-inline": node_role_cni_inline,
    "kms-key-account-pinned": kms_key_account_pinned,
    "release-literal-role-arn": release_literal_role_arn,
}
K8S_CONTROLS: dict[str, Callable[[list[dict[str, Any]]], int]] = {
    "nodeclass-without-metadata-options": nodeclass_without_metadata_options,
    "nodepool-gpu-limits-only": nodepool_gpu_limits_only,
    "role-reads-named-secret": role_reads_named_secret,
    "networkpolicy-metrics-port": network_policy_metrics_port,
    "nodeclass-encrypted-with-kms": nodeclass_encrypted_with_kms,
}
