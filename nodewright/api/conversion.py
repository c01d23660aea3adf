"""Conversion of older Karpenter manifests to ``karpenter.sh/v1`` / ``karpenter.k8s.aws/v1``.

Inputs: v1alpha5 ``Provisioner``, v1alpha1 ``AWSNodeTemplate``, v1beta1 ``NodePool``,
``EC2NodeClass`` and ``NodeClaim``, and workloads (Pod, Deployment, StatefulSet, DaemonSet,
ReplicaSet, ReplicationController, Job, CronJob, PodTemplate) and Nodes that use the old
``karpenter.sh/provisioner-name`` label. Everything else, and anything already v1, is returned as
given (the same object).

Rules (Karpenter's v1alpha5 -> v1beta1 migration guide, its v1beta1 -> v1 conversion webhook and
upgrade guide):

- Provisioner -> NodePool: ``spec.labels``/``annotations`` -> ``template.metadata``;
  ``requirements``/``taints``/``startupTaints`` -> ``template.spec``; ``providerRef`` ->
  ``nodeClassRef{group: karpenter.k8s.aws, kind: EC2NodeClass, name}``; ``limits.resources`` ->
  ``limits``; ``weight`` kept; ``ttlSecondsAfterEmpty: N`` -> ``WhenEmpty`` + ``consolidateAfter:
  Ns``; ``consolidation.enabled: true`` -> ``WhenEmptyOrUnderutilized`` + ``0s``; neither ->
  ``WhenEmpty`` + ``Never`` (v1alpha5 then never removed nodes); ``ttlSecondsUntilExpired: N`` ->
  ``template.spec.expireAfter: Ns``, absent -> ``Never`` (v1alpha5 nodes then never expired);
  ``kubeletConfiguration`` -> the EC2NodeClass's ``kubelet``; an inline ``spec.provider`` becomes
  an EC2NodeClass named after the Provisioner, emitted right after the NodePool.
- AWSNodeTemplate / v1beta1 EC2NodeClass -> EC2NodeClass: ``amiFamily`` without AMI selectors ->
  ``amiSelectorTerms: [{alias: <family>@latest}]`` (amiFamily then implied); ``subnetSelector`` /
  ``securityGroupSelector`` / ``amiSelector`` maps -> selector terms (``aws-ids``/``aws::ids``
  -> one ``id`` term each, other keys -> ``tags``, an empty tag value -> ``*``); no role nor
  instance profile -> the ``node_role`` / ``instance_profile`` given to
  :func:`convert_documents`, else the placeholder role :data:`PLACEHOLDER_NODE_ROLE`.
- v1beta1 NodePool: ``nodeClassRef.apiVersion`` -> ``group``; ``WhenUnderutilized`` ->
  ``WhenEmptyOrUnderutilized`` with ``consolidateAfter: 0s`` (``WhenUnderutilized`` with a ``consolidateAfter`` duration is
  rejected, as v1beta1 did); ``disruption.expireAfter`` ->
  ``template.spec.expireAfter``; ``template.spec.kubelet`` -> the referenced EC2NodeClass (when it
  is converted in the same call) or the ``compatibility.karpenter.sh/v1beta1-kubelet-conversion``
  annotation (JSON), as Karpenter's webhook does; ``template.spec.resources`` dropped.
- Workloads and Nodes: label ``karpenter.sh/provisioner-name`` -> ``karpenter.sh/nodepool`` in
  nodeSelector, node affinity, topology keys and Node labels; pod annotation
  ``karpenter.sh/do-not-evict`` and node annotation ``karpenter.sh/do-not-consolidate`` ->
  ``karpenter.sh/do-not-disrupt``.

Every converted Karpenter object is validated against the v1 models.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels
from nodewright.errors import NodewrightValidationError, combine, prefixed

PLACEHOLDER_NODE_ROLE = "KarpenterNodeRole-${CLUSTER_NAME}"
"""Role written when an old node template names neither role nor instance profile (v1alpha5 took
it from the controller's ``aws.defaultInstanceProfile`` setting). The name is Karpenter's
getting-started convention; substitute it (``envsubst``) or pass ``node_role``."""

_V1 = labels.API_VERSION
_AWS_V1 = labels.AWS_API_VERSION
_ALIASABLE = {"AL2": "al2", "AL2023": "al2023", "Bottlerocket": "bottlerocket",
              "Windows2019": "windows2019", "Windows2022": "windows2022", "Windows2025": "windows2025"}
# Metadata the API server owns: it describes the old object and must not be re-applied.
_SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
                    "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_NODECLASS_PASSTHROUGH = ("userData", "tags", "blockDeviceMappings", "metadataOptions", "detailedMonitoring",
                          "context", "instanceStorePolicy", "associatePublicIPAddress")
_POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}


@dataclass
class _KubeletClaim:
    """A kubelet block that must land on an EC2NodeClass, and where it came from."""

    kubelet: dict[str, Any]
    source_index: int
    source_path: str
    source_name: str


@dataclass
class _Context:
    node_role: str | None
    instance_profile: str | None
    # EC2NodeClass name -> index in the output list, for the classes converted in this call.
    converted_classes: dict[str, int] = field(default_factory=dict)
    kubelets: dict[str, list[_KubeletClaim]] = field(default_factory=dict)


def convert_documents(
    docs: list[dict[str, Any]],
    *,
    node_role: str | None = None,
    instance_profile: str | None = None,
) -> list[dict[str, Any]]:
    """Convert every document to Karpenter v1; pass the others through unchanged.

    Args:
        docs: decoded manifests (see :func:`nodewright.api.load_manifests`).
        node_role: IAM role name for converted node templates that name neither a role nor an
            instance profile.
        instance_profile: instance profile name for the same case (wins over ``node_role``).

    Returns:
        One document per input, in order, except that a Provisioner with an inline
        ``spec.provider`` yields its NodePool followed by a new EC2NodeClass.

    Raises:
        NodewrightValidationError: path ``documents[i]...`` when a document cannot be converted
        or its conversion is not a valid v1 object.
    """
    ctx = _Context(node_role=node_role, instance_profile=instance_profile)
    out: list[dict[str, Any]] = []
    origins: list[tuple[int, str]] = []  # (input index, what it was), per output document
    errors: list[NodewrightValidationError] = []
    for index, doc in enumerate(docs):
        prefix = f"documents[{index}]"
        if not isinstance(doc, dict):
            raise NodewrightValidationError(prefix, f"expected a mapping, got {type(doc).__name__}")
        try:
            converted_docs = _convert_one(doc, index, prefix, ctx)
        except NodewrightValidationError as err:
            errors.append(err)  # report it with the other documents' problems
            continue
        for converted in converted_docs:
            if converted.get("kind") == "EC2NodeClass" and converted is not doc:
                ctx.converted_classes[converted["metadata"]["name"]] = len(out)
            out.append(converted)
            origins.append((index, _describe(doc)))
    _place_kubelets(out, ctx)
    for position, converted in enumerate(out):
        # Pass-through v1 documents are validated too: bad input is reported, never echoed as if fine.
        passed_through = converted is docs[origins[position][0]]
        try:
            _validate(converted, *origins[position], passed_through=passed_through)
        except NodewrightValidationError as err:
            errors.append(err)  # every invalid document is reported, not only the first
    if errors:
        raise combine(errors)
    return out


def _describe(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{doc.get('kind')} {name!r}" if name is not None else f"an unnamed {doc.get('kind')}"


def _convert_one(doc: dict[str, Any], index: int, prefix: str, ctx: _Context) -> list[dict[str, Any]]:
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return [doc]
    if api_version == "karpenter.sh/v1alpha5" and kind == "Provisioner":
        return _provisioner(doc, index, prefix, ctx)
    if api_version == "karpenter.k8s.aws/v1alpha1" and kind == "AWSNodeTemplate":
        return [_node_template(doc, prefix, ctx, old_selectors=True)]
    if api_version == "karpenter.k8s.aws/v1beta1" and kind == "EC2NodeClass":
        return [_node_template(doc, prefix, ctx, old_selectors=False)]
    if api_version == "karpenter.sh/v1beta1" and kind == "NodePool":
        return [_v1beta1_nodepool(doc, index, prefix, ctx)]
    if api_version == "karpenter.sh/v1beta1" and kind == "NodeClaim":
        return [_v1beta1_nodeclaim(doc, prefix)]
    if kind == "Pod" and api_version == "v1":
        return [_rewrite_workload(doc, ("",))]
    if kind in _POD_TEMPLATE_PATHS:
        return [_rewrite_workload(doc, _POD_TEMPLATE_PATHS[str(kind)])]
    if kind == "Node" and api_version == "v1":
        return [_rewrite_node(doc)]
    return [doc]


# --- helpers ------------------------------------------------------------------------------------


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NodewrightValidationError(path, f"expected a mapping, got {type(value).__name__}")
    return value


def _metadata(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    meta = copy.deepcopy(_mapping(doc.get("metadata"), f"{prefix}.metadata"))
    for key in _SERVER_METADATA + ("namespace",):
        meta.pop(key, None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        annotations.pop(_LAST_APPLIED, None)
        if not annotations:
            meta.pop("annotations")
    if not meta.get("name"):
        raise NodewrightValidationError(f"{prefix}.metadata.name", "required field is missing")
    if not isinstance(meta["name"], str):
        raise NodewrightValidationError(f"{prefix}.metadata.name", f"expected a string, got {meta['name']!r}")
    return meta


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise NodewrightValidationError(path, f"expected a list, got {type(value).__name__}")
    return value


def _seconds(value: Any, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NodewrightValidationError(path, f"expected a whole number of seconds >= 0, got {value!r}")
    return f"{value}s"


def _node_class_ref(name: Any, path: str) -> dict[str, Any]:
    if not isinstance(name, str) or not name:
        raise NodewrightValidationError(path, "expected the name of the node class")
    return {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": name}


def _set_if(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        target[key] = copy.deepcopy(value)


# --- Provisioner (v1alpha5) ---------------------------------------------------------------------


def _provisioner(doc: dict[str, Any], index: int, prefix: str, ctx: _Context) -> list[dict[str, Any]]:
    spec = _mapping(doc.get("spec"), f"{prefix}.spec")
    meta = _metadata(doc, prefix)
    name = meta["name"]
    extra: list[dict[str, Any]] = []
    if spec.get("providerRef") is not None:
        ref = _mapping(spec["providerRef"], f"{prefix}.spec.providerRef")
        node_class_ref = _node_class_ref(ref.get("name"), f"{prefix}.spec.providerRef.name")
    elif spec.get("provider") is not None:
        provider = _mapping(spec["provider"], f"{prefix}.spec.provider")
        inline = {"apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate",
                  "metadata": {"name": name}, "spec": provider}
        extra.append(_node_template(inline, f"{prefix}.spec.provider", ctx, old_selectors=True))
        node_class_ref = _node_class_ref(name, f"{prefix}.metadata.name")
    else:
        raise NodewrightValidationError(
            f"{prefix}.spec.providerRef", "a Provisioner needs providerRef (or an inline provider) to convert"
        )
    for key in _list(spec.get("requirements"), f"{prefix}.spec.requirements"):
        if isinstance(key, dict) and key.get("key") == labels.V1ALPHA5_PROVISIONER_NAME:
            raise NodewrightValidationError(f"{prefix}.spec.requirements", "karpenter.sh/provisioner-name is restricted")

    template_meta: dict[str, Any] = {}
    _set_if(template_meta, "labels", spec.get("labels"))
    _set_if(template_meta, "annotations", spec.get("annotations"))
    template_spec: dict[str, Any] = {"requirements": copy.deepcopy(spec.get("requirements") or [])}
    template_spec["nodeClassRef"] = node_class_ref
    _set_if(template_spec, "taints", spec.get("taints"))
    _set_if(template_spec, "startupTaints", spec.get("startupTaints"))
    expiry = spec.get("ttlSecondsUntilExpired")
    template_spec["expireAfter"] = (
        "Never" if expiry is None else _seconds(expiry, f"{prefix}.spec.ttlSecondsUntilExpired")
    )
    template: dict[str, Any] = {}
    if template_meta:
        template["metadata"] = template_meta
    template["spec"] = template_spec

    out_spec: dict[str, Any] = {"template": template, "disruption": _provisioner_disruption(spec, prefix)}
    limits = _mapping(spec.get("limits"), f"{prefix}.spec.limits")
    if limits.get("resources"):
        out_spec["limits"] = copy.deepcopy(limits["resources"])
    _set_if(out_spec, "weight", spec.get("weight"))
    if spec.get("kubeletConfiguration"):
        kubelet = _kubelet(spec["kubeletConfiguration"], f"{prefix}.spec.kubeletConfiguration")
        ctx.kubelets.setdefault(node_class_ref["name"], []).append(
            _KubeletClaim(kubelet, index, f"{prefix}.spec.kubeletConfiguration", name)
        )
    nodepool = {"apiVersion": _V1, "kind": "NodePool", "metadata": meta, "spec": out_spec}
    return [nodepool, *extra]


def _provisioner_disruption(spec: dict[str, Any], prefix: str) -> dict[str, Any]:
    consolidation = _mapping(spec.get("consolidation"), f"{prefix}.spec.consolidation")
    empty_ttl = spec.get("ttlSecondsAfterEmpty")
    if consolidation.get("enabled") is True:
        if empty_ttl is not None:
            raise NodewrightValidationError(
                f"{prefix}.spec.ttlSecondsAfterEmpty", "cannot be combined with consolidation.enabled: true"
            )
        return {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
    if empty_ttl is not None:
        return {"consolidationPolicy": "WhenEmpty",
                "consolidateAfter": _seconds(empty_ttl, f"{prefix}.spec.ttlSecondsAfterEmpty")}
    return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}


_KUBELET_FIELDS = ("clusterDNS", "maxPods", "podsPerCore", "systemReserved", "kubeReserved", "evictionHard",
                   "evictionSoft", "evictionSoftGracePeriod", "evictionMaxPodGracePeriod",
                   "imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "cpuCFSQuota")


def _kubelet(value: Any, path: str) -> dict[str, Any]:
    kubelet = _mapping(value, path)
    # containerRuntime is gone in v1 (containerd only); other unknown keys are the user's mistake
    # and are left for validation to report.
    return {k: copy.deepcopy(v) for k, v in kubelet.items() if k != "containerRuntime"}


# --- node templates (AWSNodeTemplate v1alpha1, EC2NodeClass v1beta1) ----------------------------


def _split_ids(value: Any, path: str) -> list[str]:
    if not isinstance(value, str):
        raise NodewrightValidationError(path, f"expected comma-separated IDs, got {value!r}")
    return [part.strip() for part in value.split(",") if part.strip()]


def _tag_map(selector: dict[str, Any]) -> dict[str, str]:
    # v1alpha1 treated an empty tag value as "any value"; v1 spells that "*".
    return {str(k): ("*" if v in ("", None) else str(v)) for k, v in selector.items()}


def _selector_terms(selector: Any, ids_key: str, path: str) -> list[dict[str, Any]]:
    selector = _mapping(selector, path)
    if not selector:
        raise NodewrightValidationError(path, "required to convert: selects nothing")
    if ids_key in selector:
        if len(selector) > 1:
            raise NodewrightValidationError(path, f"{ids_key!r} cannot be combined with tag selectors in v1")
        return [{"id": i} for i in _split_ids(selector[ids_key], f"{path}[{ids_key}]")]
    return [{"tags": _tag_map(selector)}]


def _ami_terms(selector: dict[str, Any], path: str) -> list[dict[str, Any]]:
    selector = dict(selector)
    if "aws::ids" in selector:
        if len(selector) > 1:
            raise NodewrightValidationError(path, "'aws::ids' cannot be combined with other AMI selectors in v1")
        return [{"id": i} for i in _split_ids(selector["aws::ids"], f"{path}[aws::ids]")]
    base: dict[str, Any] = {}
    if "aws::name" in selector:
        base["name"] = str(selector.pop("aws::name"))
    owners = _split_ids(selector.pop("aws::owners"), f"{path}[aws::owners]") if "aws::owners" in selector else []
    if selector:
        base["tags"] = _tag_map(selector)
    if not owners:
        return [base]
    return [{**copy.deepcopy(base), "owner": owner} for owner in owners]


def _ami_selection(spec: dict[str, Any], prefix: str, old_selectors: bool) -> dict[str, Any]:
    family = spec.get("amiFamily") or "AL2"  # the v1alpha5/v1beta1 default
    if not isinstance(family, str):
        raise NodewrightValidationError(f"{prefix}.spec.amiFamily", f"expected a string, got {family!r}")
    if old_selectors:
        selector = _mapping(spec.get("amiSelector"), f"{prefix}.spec.amiSelector")
        terms = _ami_terms(selector, f"{prefix}.spec.amiSelector") if selector else []
    else:
        terms = copy.deepcopy(spec.get("amiSelectorTerms") or [])
    if family == "Ubuntu":
        if not terms:
            raise NodewrightValidationError(
                f"{prefix}.spec.amiFamily",
                "Ubuntu was removed in v1: select the Ubuntu AMI with amiSelectorTerms and amiFamily AL2",
            )
        family = "AL2"  # Karpenter's upgrade guide: Ubuntu AMIs bootstrap like AL2
    if terms:
        return {"amiSelectorTerms": terms, "amiFamily": family}
    if family not in _ALIASABLE:
        raise NodewrightValidationError(
            f"{prefix}.spec.amiFamily", f"amiFamily {family} needs AMI selectors: there is no '{family}@latest' alias"
        )
    return {"amiSelectorTerms": [{"alias": f"{_ALIASABLE[family]}@latest"}]}


def _node_template(doc: dict[str, Any], prefix: str, ctx: _Context, old_selectors: bool) -> dict[str, Any]:
    spec = _mapping(doc.get("spec"), f"{prefix}.spec")
    meta = _metadata(doc, prefix)
    if spec.get("launchTemplate") or spec.get("launchTemplateName"):
        raise NodewrightValidationError(
            f"{prefix}.spec.launchTemplate", "custom launch templates are not supported in v1: use userData and blockDeviceMappings"
        )
    out: dict[str, Any] = {}
    if old_selectors:
        out["subnetSelectorTerms"] = _selector_terms(spec.get("subnetSelector"), "aws-ids", f"{prefix}.spec.subnetSelector")
        out["securityGroupSelectorTerms"] = _selector_terms(
            spec.get("securityGroupSelector"), "aws-ids", f"{prefix}.spec.securityGroupSelector"
        )
    else:
        _set_if(out, "subnetSelectorTerms", spec.get("subnetSelectorTerms"))
        _set_if(out, "securityGroupSelectorTerms", spec.get("securityGroupSelectorTerms"))
    out.update(_ami_selection(spec, prefix, old_selectors))
    if spec.get("role"):
        out["role"] = spec["role"]
    elif spec.get("instanceProfile"):
        out["instanceProfile"] = spec["instanceProfile"]
    elif ctx.instance_profile:
        out["instanceProfile"] = ctx.instance_profile
    else:
        out["role"] = ctx.node_role or PLACEHOLDER_NODE_ROLE
    for key in _NODECLASS_PASSTHROUGH:
        _set_if(out, key, spec.get(key))
    return {"apiVersion": _AWS_V1, "kind": "EC2NodeClass", "metadata": meta, "spec": out}


# --- v1beta1 NodePool / NodeClaim ---------------------------------------------------------------


def _v1beta1_ref(ref: Any, path: str) -> dict[str, Any]:
    ref = _mapping(ref, path)
    api_version = ref.get("apiVersion") or labels.AWS_GROUP
    return {
        "group": str(api_version).split("/")[0],
        "kind": ref.get("kind") or "EC2NodeClass",
        "name": _node_class_ref(ref.get("name"), f"{path}.name")["name"],
    }


def _v1beta1_nodepool(doc: dict[str, Any], index: int, prefix: str, ctx: _Context) -> dict[str, Any]:
    spec = copy.deepcopy(_mapping(doc.get("spec"), f"{prefix}.spec"))
    template = _mapping(spec.get("template"), f"{prefix}.spec.template")
    tspec = _mapping(template.get("spec"), f"{prefix}.spec.template.spec")
    meta = _metadata(doc, prefix)
    ref_path = f"{prefix}.spec.template.spec.nodeClassRef"
    tspec["nodeClassRef"] = _v1beta1_ref(tspec.get("nodeClassRef"), ref_path)
    tspec.pop("resources", None)
    disruption = _mapping(spec.get("disruption"), f"{prefix}.spec.disruption")
    if "expireAfter" in disruption:
        tspec["expireAfter"] = disruption.pop("expireAfter")
    if disruption.get("consolidationPolicy") == "WhenUnderutilized":
        # v1beta1's CRD (CEL) and webhook refused this pair; only "Never" (no duration) passed.
        if disruption.get("consolidateAfter") not in (None, "Never"):
            raise NodewrightValidationError(
                f"{prefix}.spec.disruption.consolidateAfter",
                "cannot be combined with consolidationPolicy=WhenUnderutilized (v1beta1 rejects it: that policy "
                "consolidates as soon as it can); remove consolidateAfter, or use consolidationPolicy: WhenEmpty")
        disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
        disruption["consolidateAfter"] = "0s"
    if disruption:
        disruption.setdefault("consolidateAfter", "0s")
        spec["disruption"] = disruption
    else:
        spec.pop("disruption", None)
    kubelet = tspec.pop("kubelet", None)
    if kubelet:
        claim = _KubeletClaim(_kubelet(kubelet, f"{prefix}.spec.template.spec.kubelet"), index,
                              f"{prefix}.spec.template.spec.kubelet", meta["name"])
        ctx.kubelets.setdefault(tspec["nodeClassRef"]["name"], []).append(claim)
    template["spec"] = tspec
    spec["template"] = template
    return {"apiVersion": _V1, "kind": "NodePool", "metadata": meta, "spec": spec}


def _v1beta1_nodeclaim(doc: dict[str, Any], prefix: str) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out["apiVersion"] = _V1
    spec = _mapping(out.get("spec"), f"{prefix}.spec")
    spec["nodeClassRef"] = _v1beta1_ref(spec.get("nodeClassRef"), f"{prefix}.spec.nodeClassRef")
    spec.pop("kubelet", None)
    out["spec"] = spec
    return out


def _place_kubelets(out: list[dict[str, Any]], ctx: _Context) -> None:
    for class_name, claims in ctx.kubelets.items():
        first = claims[0]
        for other in claims[1:]:
            if other.kubelet != first.kubelet:
                raise NodewrightValidationError(
                    other.source_path,
                    f"differs from the kubelet of {first.source_name!r}, which uses the same EC2NodeClass "
                    f"{class_name!r}: v1 keeps kubelet settings on the EC2NodeClass, so give each its own",
                )
        position = ctx.converted_classes.get(class_name)
        if position is not None:
            out[position]["spec"]["kubelet"] = copy.deepcopy(first.kubelet)
            continue
        # The class is not being converted here: park the settings where Karpenter's webhook does.
        for claim in claims:
            for doc in out:
                if doc.get("kind") == "NodePool" and doc.get("apiVersion") == _V1 and \
                        doc["metadata"].get("name") == claim.source_name and "template" in doc["spec"]:
                    annotations = doc["metadata"].setdefault("annotations", {})
                    annotations[labels.V1BETA1_KUBELET_CONVERSION] = json.dumps(claim.kubelet, sort_keys=True)


# --- workloads and nodes ------------------------------------------------------------------------


def _rename_key(mapping: Any) -> None:
    if isinstance(mapping, dict) and labels.V1ALPHA5_PROVISIONER_NAME in mapping:
        value = mapping.pop(labels.V1ALPHA5_PROVISIONER_NAME)
        mapping.setdefault(labels.NODEPOOL, value)


def _rename_expressions(terms: Any) -> None:
    for term in terms if isinstance(terms, list) else []:
        expressions = term.get("matchExpressions") if isinstance(term, dict) else None
        for expr in expressions if isinstance(expressions, list) else []:
            if isinstance(expr, dict) and expr.get("key") == labels.V1ALPHA5_PROVISIONER_NAME:
                expr["key"] = labels.NODEPOOL


def _rename_topology(terms: Any) -> None:
    for term in terms if isinstance(terms, list) else []:
        if isinstance(term, dict):
            target = term.get("podAffinityTerm", term)
            if isinstance(target, dict) and target.get("topologyKey") == labels.V1ALPHA5_PROVISIONER_NAME:
                target["topologyKey"] = labels.NODEPOOL


def _sub(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def _rewrite_pod_spec(pod_spec: Any) -> None:
    if not isinstance(pod_spec, dict):
        return
    _rename_key(pod_spec.get("nodeSelector"))
    affinity = _sub(pod_spec, "affinity")
    node_affinity = _sub(affinity, "nodeAffinity")
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if isinstance(required, dict):
        _rename_expressions(required.get("nodeSelectorTerms"))
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    if isinstance(preferred, list):
        _rename_expressions([p.get("preference") for p in preferred if isinstance(p, dict)])
    for kind in ("podAffinity", "podAntiAffinity"):
        block = _sub(affinity, kind)
        _rename_topology(block.get("requiredDuringSchedulingIgnoredDuringExecution"))
        _rename_topology(block.get("preferredDuringSchedulingIgnoredDuringExecution"))
    _rename_topology(pod_spec.get("topologySpreadConstraints"))


def _rename_annotation(meta: Any, old: str) -> None:
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict) and old in annotations:
        value = annotations.pop(old)
        annotations.setdefault(labels.DO_NOT_DISRUPT, value)


def _rewrite_workload(doc: dict[str, Any], template_path: tuple[str, ...]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    template: Any = out
    if template_path != ("",):
        for key in template_path:
            template = template.get(key) if isinstance(template, dict) else None
    if isinstance(template, dict):
        _rewrite_pod_spec(template.get("spec"))
        _rename_annotation(template.get("metadata"), labels.V1ALPHA5_DO_NOT_EVICT)
    return doc if out == doc else out


def _rewrite_node(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        _rename_key(meta.get("labels"))
        _rename_annotation(meta, labels.V1ALPHA5_DO_NOT_CONSOLIDATE)
    return doc if out == doc else out


# --- validation of the result -------------------------------------------------------------------


def _validate(doc: dict[str, Any], index: int, origin: str, *, passed_through: bool = False) -> None:
    from nodewright.api.manifests import parse_ec2nodeclass, parse_nodeclaim, parse_nodepool

    parsers = {"NodePool": parse_nodepool, "EC2NodeClass": parse_ec2nodeclass, "NodeClaim": parse_nodeclaim}
    parser = parsers.get(str(doc.get("kind")))
    if parser is None or doc.get("apiVersion") not in (_V1, _AWS_V1):
        return
    try:
        parser(doc)
    except NodewrightValidationError as err:
        where = f"in {origin}" if passed_through else f"in the v1 {doc['kind']} converted from {origin}"
        raise prefixed(err, f"documents[{index}]", f" ({where})") from None
