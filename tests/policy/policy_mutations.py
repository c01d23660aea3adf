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


def passrole_on_star(docs: Docs) -> int:
    """iam:PassRole on Resource "*"."""
    def fn(sts: list[St]) -> list[St] | None:
        hits = [s for s in sts if _grants_passrole(s)]
        for s in hits:
            s.resources = ["*"]
        return sts if hits else None
    return edit_statements(docs, "identity", fn)


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


def nodepool_without_limits(objs: list[dict[str, Any]]) -> int:
    """A NodePool without limits."""
    pools = [o for o in objs if o.get("kind") == "NodePool"]
    assert pools and "limits" in pools[0]["spec"], "no NodePool with limits to mutate"
    del pools[0]["spec"]["limits"]
    return 1


def imdsv1_allowed(objs: list[dict[str, Any]]) -> int:
    """An EC2NodeClass that allows IMDSv1 (httpTokens: optional)."""
    classes = [o for o in objs if o.get("kind") == "EC2NodeClass"]
    assert classes, "no EC2NodeClass to mutate"
    classes[0]["spec"].setdefault("metadataOptions", {})["httpTokens"] = "optional"
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


TF_VARIANTS: dict[str, tuple[Callable[[Docs], int], str]] = {
    "passrole-removed": (passrole_removed, "CKV_NW_1"),
    "passrole-on-star": (passrole_on_star, "CKV_NW_2"),
    "passrole-without-condition": (passrole_without_condition, "CKV_NW_2"),
    "trust-without-sub": (trust_without_sub, "CKV_NW_3"),
    "ec2-star": (ec2_star, "CKV_NW_4"),
}
K8S_VARIANTS: dict[str, tuple[Callable[[list[dict[str, Any]]], int], str]] = {
    "spot-without-taint": (spot_pool_without_taint, "CKV_NW_9"),
    "nodepool-without-limits": (nodepool_without_limits, "CKV_NW_8"),
    "imdsv1": (imdsv1_allowed, "CKV_NW_10"),
    "container-as-root": (container_as_root, "CKV_NW_11"),
}
