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


# --- reasonable configurations the gate must pass (controls) --------------------------------


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
}
#: Reasonable configurations the gate must pass (no CKV_NW finding at all).
TF_CONTROLS: dict[str, Callable[[Docs], int]] = {
    "queue-tls-deny-string-equals": queue_tls_deny_string_equals,
    "no-instance-profile": no_instance_profile,
    "unrelated-launcher": unrelated_launcher,
}
K8S_CONTROLS: dict[str, Callable[[list[dict[str, Any]]], int]] = {
    "nodeclass-without-metadata-options": nodeclass_without_metadata_options,
    "nodepool-gpu-limits-only": nodepool_gpu_limits_only,
}
