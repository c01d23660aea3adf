"""CKV_NW_8..12 on single Kubernetes objects: today's v1 and the field reports' older APIs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nw_k8s_rules as k8s
import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "examples"

POOL: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "low-spot"},
    "spec": {"template": {"spec": {
        "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}],
        "taints": [{"key": "nodewright.io/priority", "value": "low", "effect": "NoSchedule"}]}},
        "limits": {"cpu": "1000", "memory": "1000Gi"}},
}
NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "low-spot"},
    "spec": {"metadataOptions": {"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}},
}
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nodewright", "namespace": "kube-system"},
    "spec": {"template": {"spec": {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532},
        "containers": [{"name": "controller", "image": "nodewright:0.1.0",
                        "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}}}]}}},
}


def example(name: str) -> dict[str, dict[str, Any]]:
    docs = yaml.safe_load_all((EXAMPLES / name).read_text())
    return {d["metadata"]["name"]: d for d in docs if d}


def test_compliant_objects_pass_every_rule_in_scope():
    assert k8s.check(POOL) == {"CKV_NW_8": [], "CKV_NW_9": []}
    assert k8s.check(NODECLASS) == {"CKV_NW_10": []}
    assert k8s.check(DEPLOYMENT) == {"CKV_NW_11": []}
    assert k8s.check({"kind": "ConfigMap"}) == {}


def test_pool_without_limits_and_spot_without_taint():
    pool = copy.deepcopy(POOL)
    del pool["spec"]["limits"]
    pool["spec"]["template"]["spec"]["taints"] = [{"key": "x", "effect": "PreferNoSchedule"}]
    assert k8s.check(pool) == {
        "CKV_NW_8": ["NodePool 'low-spot' has no limits (spec.limits cpu/memory): nothing bounds how many nodes it launches."],
        "CKV_NW_9": ["NodePool 'low-spot' allows spot capacity but carries no NoSchedule taint: pods that cannot take "
                     "a two-minute interruption would land on spot without opting in."]}


@pytest.mark.parametrize(("requirement", "spot"), [
    (None, False),                                                       # Karpenter's default: on-demand
    ({"operator": "In", "values": ["on-demand"]}, False),
    ({"operator": "NotIn", "values": ["on-demand"]}, True),
    ({"operator": "NotIn", "values": ["spot"]}, False),
    ({"operator": "Exists"}, True),
    ({"operator": "DoesNotExist"}, False),
])
def test_which_pools_allow_spot(requirement, spot):
    pool = copy.deepcopy(POOL)
    reqs = [{"key": "karpenter.sh/capacity-type", **requirement}] if requirement else []
    pool["spec"]["template"]["spec"]["requirements"] = reqs
    assert k8s.allows_spot(pool) is spot


def test_no_execute_taint_is_also_opt_in():
    pool = copy.deepcopy(POOL)
    pool["spec"]["template"]["spec"]["taints"][0]["effect"] = "NoExecute"
    assert k8s.spot_taint_problems(pool) == []


def test_field_report_v1beta1_pools_have_no_limits_but_the_spot_one_is_tainted():
    pools = example("nodepools-v1beta1-priority.yaml")
    low, platform = pools["low-priority-arm"], pools["platform-priority-arm"]
    assert k8s.spot_taint_problems(low) == [] and k8s.allows_spot(low)
    assert k8s.spot_taint_problems(platform) == [] and not k8s.allows_spot(platform)
    assert len(k8s.limits_problems(low)) == 1 and len(k8s.limits_problems(platform)) == 1


def test_field_report_v1alpha5_provisioners():
    provisioners = example("provisioner-v1alpha5-default.yaml")
    assert k8s.limits_problems(provisioners["default"]) == []      # limits.resources: 1000 CPU, 1000Gi
    assert k8s.limits_problems(provisioners["compute"]) == [
        "Provisioner 'compute' has no limits (spec.limits cpu/memory): nothing bounds how many nodes it launches."]
    team1 = example("team1-alternative-provisioner.yaml")
    # No metadataOptions: AWSNodeTemplate defaulted to httpTokens required, hop limit 2 (Karpenter v0.31 docs,
    # "Node Templates"), so the defaults are safe and the gate must not fail them.
    assert k8s.imds_problems(team1["team1"]) == []


@pytest.mark.parametrize(("options", "count"), [
    ({"httpTokens": "required"}, 0),                       # hop limit defaults to 1
    ({"httpTokens": "required", "httpPutResponseHopLimit": 2}, 0),
    ({"httpTokens": "required", "httpPutResponseHopLimit": 3}, 1),
    ({"httpTokens": "optional", "httpPutResponseHopLimit": 64}, 2),
    ({"httpEndpoint": "disabled", "httpTokens": "optional"}, 0),  # no metadata service at all
])
def test_imds_options(options, count):
    nodeclass = copy.deepcopy(NODECLASS)
    nodeclass["spec"]["metadataOptions"] = options
    assert len(k8s.imds_problems(nodeclass)) == count


def test_container_as_root_writable_and_escalating():
    deployment = copy.deepcopy(DEPLOYMENT)
    pod = deployment["spec"]["template"]["spec"]
    pod["securityContext"] = {"runAsUser": 0}
    pod["initContainers"] = [{"name": "init", "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True,
                                                                   "allowPrivilegeEscalation": False, "privileged": True}}]
    del pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"]
    assert k8s.container_problems(deployment) == [
        "Deployment 'nodewright' container 'controller' may run as root (runAsNonRoot is not true).",
        "Deployment 'nodewright' container 'controller' runs as root (runAsUser: 0).",
        "Deployment 'nodewright' container 'controller' allows privilege escalation (allowPrivilegeEscalation is not false).",
        "Deployment 'nodewright' container 'init' runs as root (runAsUser: 0).",
        "Deployment 'nodewright' container 'init' is privileged.",
    ]


@pytest.mark.parametrize(("annotations", "expected"), [
    (None, None),                                                           # not IRSA-annotated: out of scope
    ({"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/nodewright-controller"}, []),
    ({"eks.amazonaws.com/role-arn": ""}, ["ServiceAccount 'nodewright' has eks.amazonaws.com/role-arn='', not an IAM role ARN."]),
])
def test_service_account_annotation(annotations, expected):
    sa = {"kind": "ServiceAccount", "metadata": {"name": "nodewright", "namespace": "kube-system"}}
    if annotations is not None:
        sa["metadata"]["annotations"] = annotations
    assert k8s.service_account_problems(sa) == expected


def test_service_account_annotations_as_checkov_hands_them_over():
    """checkov's kubernetes parser turns ``metadata.annotations`` into a one-element list: before this was read,
    CKV_NW_12 silently saw no annotation on every rendered ServiceAccount (UNKNOWN, never reported)."""
    sa = {"kind": "ServiceAccount", "metadata": {"name": "karpenter", "namespace": "kube-system", "annotations": [
        {"eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/shop-nodewright-controller"}]}}
    trusts = {"shop-nodewright-controller": ["system:serviceaccount:kube-system:nodewright"]}
    assert k8s.service_account_problems(sa, trusts) == [
        "ServiceAccount system:serviceaccount:kube-system:karpenter is annotated with role shop-nodewright-controller, "
        "whose trust names ['system:serviceaccount:kube-system:nodewright']: sts:AssumeRoleWithWebIdentity will be "
        "denied."]
    assert k8s.service_account_problems(sa, {}) == []
