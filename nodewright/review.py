"""What the CLI tells a user about input that is valid but probably not what they meant.

:func:`review_documents` looks at decoded manifests (``load_manifest_files``) and their parsed form
(``parse_documents``) and returns :class:`Review`: one :class:`Finding` per problem (printed as one
``warning:`` line each; ``--strict`` makes them errors), the kinds ``simulate`` does not need (skipped with
one summary line), and which documents a decision should use.

Findings (each names ``documents[i]``, the field and the object, so the CLI can name the file):

- a NodePool whose ``nodeClassRef`` is not a ``karpenter.k8s.aws`` ``EC2NodeClass``, or names a class absent
  from input that defines EC2NodeClasses: Karpenter would hold it not Ready (``NodeClassReady=False``), so it
  launches nothing here either (left out of the decision);
- two NodePools (or EC2NodeClasses) with one name: the later one wins, as with ``kubectl apply``;
- requirement, nodeSelector and required node-affinity values of well-known labels that exist nowhere in the
  bundled catalog (``m5.larg``, ``spto``), with the closest real value;
- fields of v1alpha5 ``Provisioner`` / v1alpha1 ``AWSNodeTemplate`` / v1beta1 ``EC2NodeClass`` that conversion
  does not know (``ttlSecondsAfterEmty``) and would drop, and (for ``simulate``) fields of the pods and workloads
  it reads that Kubernetes does not have (``replica``, ``nodeSelecter``, ``resources.request``: the decision
  ignores them, ``kubectl apply`` refuses them), each with the closest known field (:func:`_unknown_fields`);
- NodePool ``spec.limits`` keys that cap nothing (``memry``, ``nvidia.com/gpus``:
  :func:`nodewright.api.nodepool.limit_key_problem`);
- (LimitRange is applied to workloads by :mod:`nodewright.admission`, neither skipped nor warned.)
- Karpenter fields that ``run`` will not use as given (kubelet fields the AMI family cannot apply, kubelet
  expressions that need the ``NodeClassCEL`` gate, Windows families in ``run``),
  and kinds that change scheduling but are not modelled (ResourceQuota: its warning names it, the skipped-kinds
  line does not again).

Every kind ``simulate`` leaves out is named once, in the skipped-kinds line (:func:`skipped_kinds_line`): kinds it
does not read, and Services unless ``SCHEDULER_CONFIG`` gives default topology spread constraints
(:data:`SETTING_KINDS`); CapacityBuffers and PodTemplates are read (their virtual pods join the batch).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nodewright.api import labels as wk
from nodewright.api.ec2nodeclass import WINDOWS_FAMILIES
from nodewright.api.manifests import KarpenterObjects

#: Kinds ``simulate -f`` reads for a provisioning decision (Karpenter kinds of every version, workloads, nodes).
USED_KINDS = frozenset({
    "NodePool", "EC2NodeClass", "NodeClaim", "NodeOverlay", "Provisioner", "AWSNodeTemplate",
    "Pod", "Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob", "DaemonSet", "Node",
    "PodDisruptionBudget", "Namespace", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "RuntimeClass",
    "CSINode", "ReplicationController", "CapacityBuffer", "PodTemplate",
})
#: Kinds read only under a setting -> why they are skipped without it (named in the skipped-kinds line).
SETTING_KINDS: Mapping[str, str] = {
    "Service": "read only for SCHEDULER_CONFIG's default topology spread",  # nodewright.state.defaultspread
}
#: Kinds applied to the others before a decision (:mod:`nodewright.admission`), not passed on themselves.
ADMISSION_KINDS = frozenset({"LimitRange"})
#: Pod autoscalers: read to size their targets (:func:`nodewright.sim.autoscaling.size_autoscaled_workloads`),
#: not passed on themselves.
SIZING_KINDS = frozenset({"HorizontalPodAutoscaler", "ScaledObject"})
#: Kinds that change where or whether pods schedule, which ``simulate -f`` does not model: a warning each (and
#: not counted again in the skipped-kinds line).
NOT_MODELLED_KINDS: Mapping[str, str] = {
    "ResourceQuota": "quotas are not enforced",
}

# Fields conversion reads from older Karpenter kinds; anything else is dropped on conversion.
_PROVISIONER_FIELDS = frozenset({
    "annotations", "labels", "taints", "startupTaints", "requirements", "kubeletConfiguration", "provider",
    "providerRef", "ttlSecondsAfterEmpty", "ttlSecondsUntilExpired", "limits", "weight", "consolidation",
})
_NODE_TEMPLATE_FIELDS = frozenset({
    "subnetSelector", "securityGroupSelector", "amiSelector", "amiFamily", "instanceProfile", "userData", "tags",
    "blockDeviceMappings", "metadataOptions", "detailedMonitoring", "context", "instanceStorePolicy",
    "associatePublicIPAddress", "launchTemplate", "launchTemplateName",
})
_V1BETA1_NODECLASS_FIELDS = frozenset({
    "subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms", "amiFamily", "role",
    "instanceProfile", "userData", "tags", "blockDeviceMappings", "metadataOptions", "detailedMonitoring",
    "context", "instanceStorePolicy", "associatePublicIPAddress",
})
#: A field schema: field -> the schema of its value (a mapping, or each mapping of a list, is checked against it),
#: or None (not checked further: free-form maps such as labels, structures read whole, or fields not modelled).
FieldSchema = Mapping[str, "FieldSchema | None"]


def _fields(names: str, **nested: FieldSchema) -> FieldSchema:
    """``names`` (space-separated) unchecked below them, plus the ``nested`` fields with a schema of their own."""
    return {**dict.fromkeys(names.split()), **nested}


# Kubernetes v1.36 (k8s.io/api core/v1, apps/v1, batch/v1 and apimachinery meta/v1 types.go, the JSON names of
# each struct): the fields a strict decoder (kubectl apply's default --validate=strict) accepts, down to the
# containers' resources. ``workloadRef`` is v1.35's alpha name of ``schedulingGroup``.
_OBJECT_META = _fields("name generateName namespace selfLink uid resourceVersion generation creationTimestamp "
                       "deletionTimestamp deletionGracePeriodSeconds labels annotations ownerReferences finalizers "
                       "managedFields")
_RESOURCES = _fields("limits requests claims")
_CONTAINER = _fields("name image command args workingDir ports envFrom env resizePolicy restartPolicy "
                     "restartPolicyRules volumeMounts volumeDevices livenessProbe readinessProbe startupProbe lifecycle "
                     "terminationMessagePath terminationMessagePolicy imagePullPolicy securityContext stdin stdinOnce "
                     "tty", resources=_RESOURCES)
_POD_SPEC = _fields(
    "volumes ephemeralContainers restartPolicy terminationGracePeriodSeconds activeDeadlineSeconds dnsPolicy "
    "nodeSelector serviceAccountName serviceAccount automountServiceAccountToken nodeName hostNetwork hostPID hostIPC "
    "shareProcessNamespace securityContext imagePullSecrets hostname subdomain affinity schedulerName tolerations "
    "hostAliases priorityClassName priority dnsConfig readinessGates runtimeClassName enableServiceLinks "
    "preemptionPolicy overhead topologySpreadConstraints setHostnameAsFQDN os hostUsers schedulingGates "
    "resourceClaims hostnameOverride schedulingGroup workloadRef",
    containers=_CONTAINER, initContainers=_CONTAINER, resources=_RESOURCES)
_POD_TEMPLATE = _fields("", metadata=_OBJECT_META, spec=_POD_SPEC)
_JOB_SPEC = _fields("parallelism completions activeDeadlineSeconds podFailurePolicy successPolicy backoffLimit "
                    "backoffLimitPerIndex maxFailedIndexes selector manualSelector ttlSecondsAfterFinished "
                    "completionMode suspend podReplacementPolicy managedBy", template=_POD_TEMPLATE)


def _object(spec: FieldSchema) -> FieldSchema:
    return _fields("apiVersion kind status", metadata=_OBJECT_META, spec=spec)


#: Workload kinds ``simulate`` reads (as ``kind`` of these API versions) -> their fields.
WORKLOAD_SCHEMAS: Mapping[tuple[str, str], FieldSchema] = {
    ("v1", "Pod"): _object(_POD_SPEC),
    ("apps/v1", "Deployment"): _object(_fields("replicas selector strategy minReadySeconds revisionHistoryLimit "
                                               "paused progressDeadlineSeconds", template=_POD_TEMPLATE)),
    ("apps/v1", "StatefulSet"): _object(_fields(
        "replicas selector volumeClaimTemplates serviceName podManagementPolicy updateStrategy revisionHistoryLimit "
        "minReadySeconds persistentVolumeClaimRetentionPolicy ordinals", template=_POD_TEMPLATE)),
    ("apps/v1", "ReplicaSet"): _object(_fields("replicas minReadySeconds selector", template=_POD_TEMPLATE)),
    ("apps/v1", "DaemonSet"): _object(_fields("selector updateStrategy minReadySeconds revisionHistoryLimit",
                                              template=_POD_TEMPLATE)),
    ("batch/v1", "Job"): _object(_JOB_SPEC),
    ("batch/v1", "CronJob"): _object(_fields(
        "schedule timeZone startingDeadlineSeconds concurrencyPolicy suspend successfulJobsHistoryLimit "
        "failedJobsHistoryLimit", jobTemplate=_fields("", metadata=_OBJECT_META, spec=_JOB_SPEC))),
}
#: Older Karpenter kinds -> the ``spec`` fields conversion reads (anything else is dropped on conversion).
_OLD_SPECS: Mapping[tuple[str, str], FieldSchema] = {
    ("karpenter.sh/v1alpha5", "Provisioner"): _fields(" ".join(_PROVISIONER_FIELDS),
                                                      provider=dict.fromkeys(_NODE_TEMPLATE_FIELDS)),
    ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"): dict.fromkeys(_NODE_TEMPLATE_FIELDS),
    ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"): dict.fromkeys(_V1BETA1_NODECLASS_FIELDS),
}
_AS_V1 = {"Provisioner": "NodePool", "AWSNodeTemplate": "EC2NodeClass"}


@dataclass(frozen=True)
class Finding:
    """One warning: ``path`` starts with ``documents[i]`` (input index) when it is about a document."""

    path: str
    reason: str

    def line(self, prefix: str = "warning") -> str:
        """``"warning: <path>: <reason>"``."""
        return f"{prefix}: {self.path}: {self.reason}" if self.path else f"{prefix}: {self.reason}"


@dataclass
class Review:
    """The result of :func:`review_documents`.

    Attributes:
        findings: warnings, in input order.
        skipped: kind -> count of documents ``simulate`` does not need (left out silently but for the summary).
        keep: input indices of the documents a decision should use (skipped kinds, NodePools that cannot launch
            and documents replaced by a later one of the same kind and name are left out).
        not_ready: NodePool name -> why it launches nothing (its EC2NodeClass is missing, a foreign node class).
    """

    findings: list[Finding] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    keep: list[int] = field(default_factory=list)
    not_ready: dict[str, str] = field(default_factory=dict)

    def no_pool_reason(self) -> str | None:
        """When every NodePool of the input is not ready: one sentence naming each and why (the decision would
        otherwise end with "no NodePool in the input"), else None."""
        if not self.not_ready:
            return None
        why = "; ".join(f"NodePool {name!r} is not ready: {reason}" for name, reason in sorted(self.not_ready.items()))
        return f"no NodePool can launch nodes: {why}"

    def skipped_line(self) -> str | None:
        """``"skipped 7 objects simulate does not need: ServiceAccount x2, Ingress x1, ..."`` (most frequent
        first), or None when nothing was skipped (:func:`skipped_kinds_line`)."""
        return skipped_kinds_line(self.skipped, "simulate does not need")


def skipped_kinds_line(counts: Mapping[str, int], what: str) -> str | None:
    """The one line naming every kind left out, once each: ``"skipped 3 objects <what>: Ingress x2, Service x1
    (read only for SCHEDULER_CONFIG's default topology spread)"`` (most frequent first, then by name; a kind of
    :data:`SETTING_KINDS` says which setting would read it), or None when ``counts`` is empty. ``simulate -f``
    (:meth:`Review.skipped_line`) and ``simulate --scenario`` (``what``: "the simulation does not play") share it."""
    if not counts:
        return None
    total = sum(counts.values())
    kinds = ", ".join(f"{kind} x{count}" + (f" ({SETTING_KINDS[kind]})" if kind in SETTING_KINDS else "")
                      for kind, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"skipped {total} object{'s' if total != 1 else ''} {what}: {kinds}"


def object_name(doc: Mapping[str, Any]) -> str:
    """``metadata.name`` as text, ``"?"`` when missing or malformed."""
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return str(name) if name is not None else "?"


def _closest(value: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` naming the closest of ``known`` (difflib, ratio >= 0.6), else ``""``."""
    match = difflib.get_close_matches(value, sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


def review_documents(docs: Sequence[Mapping[str, Any]], objects: KarpenterObjects | None = None,
                     *, for_simulate: bool = True, default_spread: bool = False,
                     default_class: bool = True) -> Review:
    """Review decoded manifests (``docs``, input order) and, when given, their parsed form.

    Args:
        docs: the documents as read (any Karpenter version).
        objects: ``parse_documents(docs)``; enables the checks on parsed v1 NodePools and EC2NodeClasses.
        for_simulate: also classify kinds (skipped / not modelled) and check values against the catalog.
        default_spread: ``SCHEDULER_CONFIG`` gives default topology spread constraints, whose selectors Services
            deduce (without it, Services are skipped: :data:`SETTING_KINDS`).
        default_class: a NodePool naming an EC2NodeClass of an input that has none gets one with the defaults
            (``simulate -f``); False (a scenario's world, where it launches nothing): such a NodePool is not ready.
    """
    review = Review()
    used = USED_KINDS | (frozenset(SETTING_KINDS) if default_spread else frozenset())
    latest: dict[tuple[str, str], int] = {}
    for index, doc in enumerate(docs):
        kind = str(doc.get("kind"))
        review.findings.extend(_unknown_fields(index, doc, workloads=for_simulate))
        if kind in ("NodePool", "Provisioner", "EC2NodeClass", "AWSNodeTemplate"):
            key = (_AS_V1.get(kind, kind), object_name(doc))
            if key in latest:
                review.findings.append(Finding(
                    f"documents[{index}].metadata.name",
                    f"{key[0]} {key[1]!r} is defined again (first at documents[{latest[key]}]): the later one "
                    "replaces the earlier, as kubectl apply would",
                ))
            latest[key] = index
        if for_simulate and kind not in used and kind not in ADMISSION_KINDS and kind not in SIZING_KINDS:
            if kind in NOT_MODELLED_KINDS:  # named by its own warning, not again in the skipped-kinds line
                review.findings.append(Finding(
                    f"documents[{index}]", f"{kind} {object_name(doc)!r} is not modelled by simulate: {NOT_MODELLED_KINDS[kind]}"
                ))
            else:
                review.skipped[kind] += 1
    unusable = _unusable_nodepools(docs, objects, review, default_class) if objects is not None else set()
    if objects is not None:
        review.findings.extend(_limit_keys(docs, objects))
        review.findings.extend(_not_yet_honoured(docs, objects))
    if for_simulate:
        review.findings.extend(_unknown_values(docs))
        review.findings.extend(_pod_findings(docs))
    winners = set(latest.values())
    for index, doc in enumerate(docs):
        kind = str(doc.get("kind"))
        if for_simulate and kind not in used:
            continue  # skipped, or (LimitRange) already applied by nodewright.admission
        key = (_AS_V1.get(kind, kind), object_name(doc))
        if key in latest and index not in winners:
            continue
        if key[0] == "NodePool" and key[1] in unusable:
            continue
        review.keep.append(index)
    return review


#: Why an unknown field of a workload matters, by where the document comes from: manifests a user wrote
#: (``simulate -f``, a scenario's ``spec.manifests``), or objects an API server served (a snapshot).
UNKNOWN_FIELD_WHY = {
    "manifest": "unknown field: simulate ignores it (kubectl apply would refuse it: strict field validation)",
    "served": ("unknown field: simulate ignores it (not a Kubernetes v1.36 field: a newer API server's, or the file "
               "was edited)"),
}


def unknown_field_findings(docs: Sequence[Mapping[str, Any]], source: str = "manifest") -> list[Finding]:
    """One finding (``documents[i].<path>``) per unknown field of each of ``docs``, as :func:`review_documents`
    finds them for ``simulate -f`` (:func:`_unknown_fields`: older Karpenter kinds' ``spec`` and the workloads of
    :data:`WORKLOAD_SCHEMAS`), for the other readers of such documents: scenario manifests and (``source``
    ``"served"``, :data:`UNKNOWN_FIELD_WHY`) snapshot items. Warnings only: the field is ignored."""
    return [f for index, doc in enumerate(docs) for f in _unknown_fields(index, doc, True, UNKNOWN_FIELD_WHY[source])]


def _unknown_fields(index: int, doc: Mapping[str, Any], workloads: bool,
                    workload_why: str = UNKNOWN_FIELD_WHY["manifest"]) -> Iterator[Finding]:
    """One finding per field of ``doc`` its kind's schema lacks, with the closest known field (difflib): the
    ``spec`` of an older Karpenter kind (:data:`_OLD_SPECS`: conversion drops the field) and, with ``workloads``,
    the pods and workloads ``simulate`` reads (:data:`WORKLOAD_SCHEMAS`: the decision ignores the field, which a
    strict decoder -- ``kubectl apply``, ``--validate=strict`` by default -- refuses: ``replica``,
    ``nodeSelecter``, ``resources.request``). v1 Karpenter kinds need none: their models refuse unknown fields
    (:class:`nodewright.api.base.KubeModel`)."""
    key = (str(doc.get("apiVersion")), str(doc.get("kind")))
    if key in _OLD_SPECS:
        spec = doc.get("spec")
        found = _walk(spec, _OLD_SPECS[key], "spec") if isinstance(spec, dict) else iter(())
        why = f"unknown {key[0]} {key[1]} field: conversion drops it"
    elif workloads and key in WORKLOAD_SCHEMAS:
        found = _walk(doc, WORKLOAD_SCHEMAS[key], "")
        why = workload_why
    else:
        return
    for path, name, known in found:
        yield Finding(f"documents[{index}].{path}",
                      f"{why}{_closest(name, known)} (in {key[1]} {object_name(doc)!r})")


def _walk(value: Any, schema: FieldSchema, path: str) -> Iterator[tuple[str, str, Collection[str]]]:
    """``(path, field, the fields known there)`` of every field of ``value`` (a mapping, or each mapping of a
    list) that ``schema`` lacks, depth first in document order."""
    items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
    for i, item in items:
        if not isinstance(item, dict):
            continue  # a value of the wrong type: the decision reports it ("malformed Kind")
        here = path if i is None else f"{path}[{i}]"
        for key, sub in item.items():
            where = f"{here}.{key}" if here else str(key)
            if key not in schema:
                yield where, str(key), schema.keys()
            elif schema[key] is not None:
                yield from _walk(sub, schema[key] or {}, where)


def _index_of(docs: Sequence[Mapping[str, Any]], kind: str, name: str) -> int | None:
    found = None
    for index, doc in enumerate(docs):
        if _AS_V1.get(str(doc.get("kind")), str(doc.get("kind"))) == kind and object_name(doc) == name:
            found = index
    return found


def _where(docs: Sequence[Mapping[str, Any]], kind: str, name: str, path: str) -> str:
    index = _index_of(docs, kind, name)
    return f"documents[{index}].{path}" if index is not None else path


def _unusable_nodepools(docs: Sequence[Mapping[str, Any]], objects: KarpenterObjects, review: Review,
                        default_class: bool = True) -> set[str]:
    """Names of the NodePools that launch nothing (recorded in ``review.not_ready`` with a finding each). Only
    the NodePool that wins each name counts, the last one, as ``kubectl apply`` leaves it (:func:`_where` names
    that document)."""
    classes = {nc.name for nc in objects.ec2nodeclasses}
    winners = {pool.name: pool for pool in objects.nodepools}
    for pool in winners.values():
        ref = pool.spec.template.spec.node_class_ref
        path = _where(docs, "NodePool", pool.name, "spec.template.spec.nodeClassRef")
        if (ref.group, ref.kind) != (wk.AWS_GROUP, "EC2NodeClass"):
            why = (f"{ref.group}/{ref.kind} is not a node class nodewright can launch (only "
                   f"{wk.AWS_GROUP}/EC2NodeClass)")
            reason = f"{why}: this NodePool launches nothing (in NodePool {pool.name!r})"
        elif (classes or not default_class) and ref.name not in classes:
            known = f"classes: {', '.join(sorted(classes))}" if classes else "it has no EC2NodeClass"
            why = f"its EC2NodeClass {ref.name!r} is not in the input ({known})"
            reason = (f"EC2NodeClass {ref.name!r} is not in the input ({known}): Karpenter would keep this NodePool "
                      f"not Ready, so it launches nothing (in NodePool {pool.name!r})")
        else:
            continue
        review.not_ready[pool.name] = why
        review.findings.append(Finding(path, reason))
    return set(review.not_ready)


def _limit_keys(docs: Sequence[Mapping[str, Any]], objects: KarpenterObjects) -> Iterator[Finding]:
    """``spec.limits`` keys of the NodePools that cap nothing (:func:`nodewright.api.nodepool.limit_key_problem`:
    ``memry``, ``nvidia.com/gpus``), of the NodePool that wins each name (as :func:`_unusable_nodepools`)."""
    from nodewright.api.nodepool import limit_key_problem

    for pool in {pool.name: pool for pool in objects.nodepools}.values():
        for key in pool.spec.limits or {}:
            problem = limit_key_problem(key)
            if problem is not None:
                field = f"spec.limits[{key}]" if "/" in key or "." in key else f"spec.limits.{key}"
                yield Finding(_where(docs, "NodePool", pool.name, field), f"{problem} (in NodePool {pool.name!r})")


def _not_yet_honoured(docs: Sequence[Mapping[str, Any]], objects: KarpenterObjects) -> Iterator[Finding]:
    for nc in objects.ec2nodeclasses:
        if nc.spec.resolved_ami_family in WINDOWS_FAMILIES:
            yield Finding(
                _where(docs, "EC2NodeClass", nc.name, "spec.amiSelectorTerms"),
                f"{nc.spec.resolved_ami_family} is modelled by simulate (amd64 types, kubernetes.io/os: windows, "
                "licensed prices) but nodewright run cannot launch Windows nodes yet: it has no Windows AMI lookup "
                f"or bootstrap (in EC2NodeClass {nc.name!r})",
            )
        if nc.spec.kubelet is None:
            continue
        from nodewright.cloud.aws.userdata import unsupported_kubelet_fields

        for problem in unsupported_kubelet_fields(nc.spec.resolved_ami_family,
                                                  nc.spec.kubelet.model_dump(by_alias=True, exclude_none=True)):
            path, _, why = problem.partition(": ")
            yield Finding(_where(docs, "EC2NodeClass", nc.name, f"spec.{path}"),
                          f"{why}: nodewright run (like Karpenter v1.15) reports the class Ready=False, reason "
                          f"UnsupportedKubeletConfiguration, and launches nothing from it (in EC2NodeClass {nc.name!r})")
        for path in sorted(nc.spec.kubelet.expressions()):
            yield Finding(_where(docs, "EC2NodeClass", nc.name, f"spec.{path}"),
                          "a CEL expression: simulate evaluates it per instance type; nodewright run needs the AWS "
                          "feature gate NodeClassCEL=true (AWS_FEATURE_GATES, chart settings.awsFeatureGates."
                          f"nodeClassCEL), else the class is not Ready (in EC2NodeClass {nc.name!r})")


def _pod_metadata(doc: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    """``(path, metadata)`` of the pods ``doc`` stands for: a Pod's own, a workload's pod template's."""
    kind = doc.get("kind")
    spec = doc.get("spec")
    if kind == "Pod":
        meta = doc.get("metadata")
        return ("metadata", meta) if isinstance(meta, dict) else None
    if not isinstance(spec, dict) or kind not in ("Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob"):
        return None
    base = "spec"
    if kind == "CronJob":
        spec, base = ((spec.get("jobTemplate") or {}).get("spec") or {}), "spec.jobTemplate.spec"
    template = spec.get("template") if isinstance(spec, dict) else None
    meta = template.get("metadata") if isinstance(template, dict) else None
    return (f"{base}.template.metadata", meta) if isinstance(meta, dict) else None


def _pod_findings(docs: Sequence[Mapping[str, Any]]) -> Iterator[Finding]:
    """Pods (of a Pod or a workload's template) that two PodDisruptionBudgets select, whose eviction the Eviction
    API refuses (:func:`nodewright.kube.pdb.overlapping_budgets`, the rule the controller's disruption follows),
    and pods annotated with the v1alpha5 ``karpenter.sh/do-not-evict`` (Karpenter v1 ignores it; nodewright
    honours it, docs/karpenter-compatibility.md)."""
    from nodewright.kube.pdb import overlapping_budgets

    pdbs = [d for d in docs if d.get("kind") == "PodDisruptionBudget"]
    for index, doc in enumerate(docs):
        found = _pod_metadata(doc)
        if found is None:
            continue
        path, meta = found
        what = f"{doc.get('kind')} {object_name(doc)!r}"
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and str(annotations.get(wk.V1ALPHA5_DO_NOT_EVICT)) == "true":
            yield Finding(
                f"documents[{index}].{path}.annotations[{wk.V1ALPHA5_DO_NOT_EVICT}]",
                f"the v1alpha5 annotation: Karpenter v1 ignores it; nodewright honours it as {wk.DO_NOT_DISRUPT} "
                f"(its node is not disrupted voluntarily); annotate {wk.DO_NOT_DISRUPT}: \"true\" instead (in {what})",
            )
        if len(pdbs) < 2:
            continue
        namespace = (doc.get("metadata") or {}).get("namespace") if isinstance(doc.get("metadata"), dict) else None
        labels = meta.get("labels")
        pod = {"metadata": {"name": object_name(doc), "namespace": namespace or "default",
                            "labels": labels if isinstance(labels, dict) else {}}}
        budgets = [b if (b.get("metadata") or {}).get("namespace") else
                   {**b, "metadata": {**(b.get("metadata") or {}), "namespace": "default"}} for b in pdbs]
        for names in overlapping_budgets(budgets, [pod]).values():
            yield Finding(
                f"documents[{index}].{path}.labels",
                f"its pods are selected by more than one PodDisruptionBudget ({', '.join(names)}): the Eviction API "
                f"refuses to evict such pods, so their nodes are never disrupted voluntarily (consolidation, drift) "
                f"(in {what})",
            )


def _pod_spec(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    kind = doc.get("kind")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return None
    if kind == "Pod":
        return spec
    if kind == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec") or {})
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    return pod if isinstance(pod, dict) else None


def _requirement_values(doc: Mapping[str, Any]) -> Iterator[tuple[str, str, list[Any]]]:
    """``(path, key, values)`` of every In/NotIn requirement and nodeSelector entry in ``doc``."""
    kind = doc.get("kind")
    spec = doc.get("spec")
    if kind in ("NodePool", "Provisioner") and isinstance(spec, dict):
        tspec = ((spec.get("template") or {}).get("spec") or {}) if kind == "NodePool" else spec
        base = "spec.template.spec" if kind == "NodePool" else "spec"
        yield from _terms(tspec.get("requirements") if isinstance(tspec, dict) else None, f"{base}.requirements")
        return
    pod = _pod_spec(doc)
    if pod is None:
        return
    base = "spec" if kind == "Pod" else ("spec.jobTemplate.spec.template.spec" if kind == "CronJob" else "spec.template.spec")
    selector = pod.get("nodeSelector")
    if isinstance(selector, dict):
        for key, value in selector.items():
            yield f"{base}.nodeSelector[{key}]", str(key), [value]
    affinity = ((pod.get("affinity") or {}).get("nodeAffinity") or {}) if isinstance(pod.get("affinity"), dict) else {}
    required = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}) if isinstance(affinity, dict) else {}
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    for t, term in enumerate(terms if isinstance(terms, list) else []):
        if isinstance(term, dict):
            path = f"{base}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{t}]"
            yield from _terms(term.get("matchExpressions"), f"{path}.matchExpressions")


def _terms(requirements: Any, path: str) -> Iterator[tuple[str, str, list[Any]]]:
    for i, req in enumerate(requirements if isinstance(requirements, list) else []):
        if isinstance(req, dict) and req.get("operator") in ("In", "NotIn") and isinstance(req.get("values"), list):
            yield f"{path}[{i}].values", str(req.get("key")), list(req["values"])


def _unknown_values(docs: Sequence[Mapping[str, Any]]) -> Iterator[Finding]:
    known: Mapping[str, frozenset[str]] | None = None
    for index, doc in enumerate(docs):
        for path, key, values in _requirement_values(doc):
            key = wk.NORMALIZED_LABELS.get(key, key)
            if known is None:
                from nodewright.cloud.catalog import CATEGORICAL_LABELS, known_label_values

                if key not in CATEGORICAL_LABELS:
                    continue
                known = known_label_values()
            domain = known.get(key)
            if domain is None:
                continue
            for value in values:
                if str(value) not in domain:
                    yield Finding(
                        f"documents[{index}].{path}",
                        f"{str(value)!r} is not a {key} value anywhere in the bundled catalog, so no node can match "
                        f"it{_closest(str(value), domain)} (in {doc.get('kind')} {object_name(doc)!r})",
                    )
