"""Rules CKV_NW_8..14 on single Kubernetes objects (plain dicts as parsed from YAML).

Each ``*_problems`` function takes one object and returns what is wrong with it (an empty list when
nothing is, ``None`` when the object is not in the rule's scope). The same functions serve the
kubernetes framework (rendered chart) and ``kubernetes_manifest`` resources in the stacks.

Karpenter facts used (karpenter.sh docs, "NodePools" and "EC2NodeClasses"):
- a NodePool without a ``karpenter.sh/capacity-type`` requirement launches on-demand only;
- limits live at ``spec.limits`` (v1, v1beta1) or ``spec.limits.resources`` (v1alpha5 Provisioner);
- taints at ``spec.template.spec.taints`` (v1, v1beta1) or ``spec.taints`` (v1alpha5);
- ``metadataOptions`` at ``spec.metadataOptions`` (EC2NodeClass, AWSNodeTemplate); every API version defaults
  to ``httpTokens: required`` with hop limit 1 (v1) or 2 (v1beta1, v1alpha5), so an unset block is safe;
  ``httpEndpoint: disabled`` turns the metadata service off.
- NodePool ``spec.limits`` bounds any resource: cpu, memory, or an extended resource such as ``nvidia.com/gpu``.
- RBAC: a ``*`` in any rule's verbs, resources or apiGroups grants what the chart never asked for (every rule
  counts, not only the first); a ClusterRole that may get/list/watch ``secrets`` (without ``resourceNames``) reads
  every Secret of every namespace once bound cluster-wide (Kubernetes "RBAC good practices": "Listing secrets").
- EBS: ``blockDeviceMappings[].ebs.encrypted: false`` launches unencrypted volumes (Karpenter's defaults encrypt).
- NetworkPolicy: an ingress rule with neither ``ports`` nor ``from`` (or with a peer that selects everything:
  ``{}``, ``namespaceSelector: {}`` alone, ``ipBlock`` 0.0.0.0/0 or ::/0 without ``except``) admits all traffic
  (Kubernetes "Network Policies": "allow all ingress traffic").
"""

from __future__ import annotations

import re
from typing import Any

CAPACITY_TYPE = "karpenter.sh/capacity-type"
ROLE_ARN_ANNOTATION = "eks.amazonaws.com/role-arn"
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
NODEPOOL_KINDS = ("NodePool", "Provisioner")
NODECLASS_KINDS = ("EC2NodeClass", "AWSNodeTemplate")
RBAC_KINDS = ("ClusterRole", "Role")
NETWORK_POLICY_KINDS = ("NetworkPolicy",)
_SECRET_READS = {"get", "list", "watch", "*"}
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_legacy(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "Provisioner"


def pool_requirements(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The NodePool's (or Provisioner's) requirements."""
    path = ("spec", "requirements") if _is_legacy(obj) else ("spec", "template", "spec", "requirements")
    return [r for r in _list(_get(obj, *path)) if isinstance(r, dict)]


def pool_taints(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The taints every node of the pool carries (startup taints excluded: they go away)."""
    path = ("spec", "taints") if _is_legacy(obj) else ("spec", "template", "spec", "taints")
    return [t for t in _list(_get(obj, *path)) if isinstance(t, dict)]


def allows_spot(obj: dict[str, Any]) -> bool:
    """True when the pool may launch spot capacity (every capacity-type requirement admits "spot")."""
    terms = [r for r in pool_requirements(obj) if r.get("key") == CAPACITY_TYPE]
    if not terms:
        return False  # Karpenter defaults to on-demand
    for term in terms:
        op, values = term.get("operator"), [str(v) for v in _list(term.get("values"))]
        admits = {"In": "spot" in values, "NotIn": "spot" not in values, "Exists": True}.get(str(op), False)
        if not admits:
            return False
    return True


def _name(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind')} {_get(obj, 'metadata', 'name')!r}"


def limits_problems(obj: dict[str, Any]) -> list[str] | None:
    """CKV_NW_8: the pool has limits (cpu, memory or any other resource, e.g. ``nvidia.com/gpu``)."""
    if obj.get("kind") not in NODEPOOL_KINDS:
        return None
    limits = _get(obj, "spec", "limits", "resources") if _is_legacy(obj) else _get(obj, "spec", "limits")
    if not isinstance(limits, dict) or not limits:
        return [f"{_name(obj)} has no limits (spec.limits cpu/memory): nothing bounds how many nodes it launches."]
    return []


def spot_taint_problems(obj: dict[str, Any]) -> list[str] | None:
    """CKV_NW_9: a pool that allows spot carries a NoSchedule (or stricter NoExecute) taint."""
    if obj.get("kind") not in NODEPOOL_KINDS:
        return None
    if not allows_spot(obj):
        return []
    if any(t.get("effect") in ("NoSchedule", "NoExecute") for t in pool_taints(obj)):
        return []
    return [f"{_name(obj)} allows spot capacity but carries no NoSchedule taint: pods that cannot take a "
            f"two-minute interruption would land on spot without opting in."]


def _ebs_problems(obj: dict[str, Any]) -> list[str]:
    return [f"{_name(obj)} spec.blockDeviceMappings[{i}] ({_dict(m).get('deviceName', '?')}) sets ebs.encrypted: false: "
            f"node volumes (images, secrets written to disk) would be unencrypted."
            for i, m in enumerate(_list(_get(obj, "spec", "blockDeviceMappings")))
            if str(_dict(_dict(m).get("ebs")).get("encrypted")).lower() == "false"]


def imds_problems(obj: dict[str, Any]) -> list[str] | None:
    """CKV_NW_10: IMDSv2 required (set or defaulted: every version defaults to required) and hop limit at
    most 2; no block device mapping with ``encrypted: false``."""
    if obj.get("kind") not in NODECLASS_KINDS:
        return None
    options = _dict(_get(obj, "spec", "metadataOptions"))
    problems = _ebs_problems(obj)
    if str(options.get("httpEndpoint", "enabled")) == "disabled":
        return problems
    if options.get("httpTokens", "required") != "required":
        problems.append(f"{_name(obj)} allows IMDSv1 (metadataOptions.httpTokens is "
                        f"{options.get('httpTokens', 'not set')!r}, must be 'required').")
    hops = options.get("httpPutResponseHopLimit")
    if hops is not None and (not isinstance(hops, int) or isinstance(hops, bool) or hops > 2):
        problems.append(f"{_name(obj)} sets httpPutResponseHopLimit {hops!r}: above 2, pods behind a NAT hop "
                        f"reach the node's credentials.")
    return problems


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    return _dict(_get(obj, "spec", "template", "spec"))


def container_problems(obj: dict[str, Any]) -> list[str] | None:
    """CKV_NW_11: every container runs non-root, read-only root filesystem, no privilege escalation."""
    if obj.get("kind") not in WORKLOAD_KINDS:
        return None
    pod = _pod_spec(obj)
    pod_ctx = _dict(pod.get("securityContext"))
    problems = []
    for container in _list(pod.get("containers")) + _list(pod.get("initContainers")):
        if not isinstance(container, dict):
            continue
        ctx = _dict(container.get("securityContext"))
        merged = {**pod_ctx, **ctx}
        label = f"{_name(obj)} container {container.get('name')!r}"
        if merged.get("runAsNonRoot") is not True:
            problems.append(f"{label} may run as root (runAsNonRoot is not true).")
        if merged.get("runAsUser") == 0:
            problems.append(f"{label} runs as root (runAsUser: 0).")
        if ctx.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{label} has a writable root filesystem (readOnlyRootFilesystem is not true).")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{label} allows privilege escalation (allowPrivilegeEscalation is not false).")
        if ctx.get("privileged") is True:
            problems.append(f"{label} is privileged.")
    return problems


def rbac_problems(obj: dict[str, Any]) -> list[str] | None:
    """CKV_NW_13: no ``*`` in the verbs, resources or apiGroups of any rule of a Role/ClusterRole."""
    if obj.get("kind") not in RBAC_KINDS:
        return None
    problems = []
    for i, rule in enumerate(_list(obj.get("rules"))):
        for field in ("verbs", "resources", "apiGroups"):
            if "*" in [str(v) for v in _list(_dict(rule).get(field))]:
                problems.append(f"{_name(obj)} rules[{i}].{field} contains '*': it grants every {field[:-1]}.")
        rule = _dict(rule)
        reads = _SECRET_READS & {str(v) for v in _list(rule.get("verbs"))}
        if (obj.get("kind") == "ClusterRole" and reads and "secrets" in [str(v) for v in _list(rule.get("resources"))]
                and {"", "*"} & {str(v) for v in _list(rule.get("apiGroups"))} and not _list(rule.get("resourceNames"))):
            problems.append(f"{_name(obj)} rules[{i}] may {sorted(reads)} secrets in every namespace: use a Role in "
                            f"the namespace that holds the Secret, with resourceNames.")
    return problems


def _admits_everything(peer: Any) -> bool:
    peer = _dict(peer)
    if not peer:
        return True
    block = _dict(peer.get("ipBlock"))
    if block:
        return str(block.get("cidr")) in ("0.0.0.0/0", "::/0") and not _list(block.get("except"))
    namespaces, pods = peer.get("namespaceSelector"), peer.get("podSelector")
    return namespaces == {} and pods in (None, {})


def network_policy_problems(obj: dict[str, Any]) -> list[str] | None:
    """CKV_NW_14: no ingress rule of a NetworkPolicy admits all traffic (every port from every source)."""
    if obj.get("kind") not in NETWORK_POLICY_KINDS:
        return None
    problems = []
    for i, rule in enumerate(_list(_get(obj, "spec", "ingress"))):
        rule = _dict(rule)
        if _list(rule.get("ports")):
            continue
        sources = _list(rule.get("from"))
        if not sources or any(_admits_everything(p) for p in sources):
            problems.append(f"{_name(obj)} spec.ingress[{i}] admits every port from every source: name the ports "
                            f"(and sources) the pods serve.")
    return problems


def service_account_problems(obj: dict[str, Any], trusts: dict[str, list[str]] | None = None) -> list[str] | None:
    """CKV_NW_12 (manifest side): a ServiceAccount that carries the IRSA annotation carries a role ARN, and when
    that role is one of the stacks' (``trusts``: role name -> the ``system:serviceaccount:<ns>:<name>`` subjects
    its trust names), the ServiceAccount is one of those subjects.

    An empty or malformed annotation (a value missed in ``--set``) makes the EKS webhook skip the
    credentials and the controller fail on its first AWS call; a ServiceAccount the trust does not name gets
    ``AccessDenied`` from ``sts:AssumeRoleWithWebIdentity``.
    """
    if obj.get("kind") != "ServiceAccount":
        return None
    annotations = _get(obj, "metadata", "annotations")
    if isinstance(annotations, list):  # checkov's kubernetes parser turns the annotations map into [map]
        annotations = {k: v for item in annotations if isinstance(item, dict) for k, v in item.items()}
    if not isinstance(annotations, dict) or ROLE_ARN_ANNOTATION not in annotations:
        return None
    value = str(annotations.get(ROLE_ARN_ANNOTATION) or "")
    if value.startswith("${") and value.endswith("}"):
        return []
    if ROLE_ARN.match(value):
        role = value.rsplit("/", 1)[-1]
        subject = (f"system:serviceaccount:{_get(obj, 'metadata', 'namespace') or 'default'}:"
                   f"{_get(obj, 'metadata', 'name')}")
        if trusts and role in trusts and subject not in trusts[role]:
            return [f"ServiceAccount {subject} is annotated with role {role}, whose trust names {trusts[role]}: "
                    f"sts:AssumeRoleWithWebIdentity will be denied."]
        return []
    return [f"ServiceAccount {_get(obj, 'metadata', 'name')!r} has {ROLE_ARN_ANNOTATION}={value!r}, not an IAM role ARN."]


RULES = {
    "CKV_NW_8": limits_problems,
    "CKV_NW_9": spot_taint_problems,
    "CKV_NW_10": imds_problems,
    "CKV_NW_11": container_problems,
    "CKV_NW_12": service_account_problems,
    "CKV_NW_13": rbac_problems,
    "CKV_NW_14": network_policy_problems,
}
KINDS = {
    "CKV_NW_8": NODEPOOL_KINDS,
    "CKV_NW_9": NODEPOOL_KINDS,
    "CKV_NW_10": NODECLASS_KINDS,
    "CKV_NW_11": WORKLOAD_KINDS,
    "CKV_NW_12": ("ServiceAccount",),
    "CKV_NW_13": RBAC_KINDS,
    "CKV_NW_14": NETWORK_POLICY_KINDS,
}


def check(obj: dict[str, Any]) -> dict[str, list[str]]:
    """Every rule that applies to ``obj``: check id -> problems (empty list: passed)."""
    out = {}
    for check_id, rule in RULES.items():
        problems = rule(obj)
        if problems is not None:
            out[check_id] = problems
    return out
