"""Every nodewright rule over a synthesized project: the entry point of the Terraform side.

``analyze(project)`` runs the IAM rules (CKV_NW_1..6), the interruption queue rule (CKV_NW_7), the
Kubernetes object rules on ``kubernetes_manifest`` resources (CKV_NW_8..10, 12..14), and the Helm release wiring
of CKV_NW_12: the release of the nodewright chart annotates its ServiceAccount with the ARN of the IRSA
role whose trust names that very ServiceAccount (Helm provider ``helm_release``: ``values`` YAML strings,
then ``set`` entries, later wins).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import nw_iam_model
import nw_iam_rules
import nw_k8s_rules
import nw_queue_rules
import yaml
from nw_catalog import RuleReport
from nw_iam_model import IamModel
from nw_tfdoc import Project, Stack, clean, dict_list, project_of, scalar

CHART_DEFAULT_SA = "nodewright"
_UNESCAPED_DOT = re.compile(r"(?<!\\)\.")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def release_values(conf: dict[str, Any]) -> dict[str, Any]:
    """The values a ``helm_release`` passes: its ``values`` documents merged, then ``set`` entries."""
    merged: dict[str, Any] = {}
    values = conf.get("values")
    for text in values if isinstance(values, list) else [values]:
        text = scalar(text)
        if isinstance(text, str) and text.strip():
            try:
                loaded = yaml.safe_load(text)
            except yaml.YAMLError:
                continue
            if isinstance(loaded, dict):
                merged = _deep_merge(merged, loaded)
    for entry in dict_list(conf.get("set")) + dict_list(conf.get("set_sensitive")):
        name = scalar(entry.get("name"))
        if not isinstance(name, str) or "[" in name:
            continue
        keys = [k.replace("\\.", ".") for k in _UNESCAPED_DOT.split(name)]
        nested: dict[str, Any] = {keys[-1]: scalar(entry.get("value"))}
        for key in reversed(keys[:-1]):
            nested = {key: nested}
        merged = _deep_merge(merged, nested)
    return merged


def _sa_annotation(project: Project, namespace: str, name: str, values: dict[str, Any]) -> Any:
    sa = _dict(values.get("serviceAccount"))
    if sa.get("create", True) not in (False, "false"):
        return _dict(sa.get("annotations")).get(nw_k8s_rules.ROLE_ARN_ANNOTATION)
    for type_ in ("kubernetes_service_account", "kubernetes_service_account_v1"):
        for _s, _n, conf in project.all_resources(type_):
            meta = _dict(clean(scalar(conf.get("metadata"))))
            if meta.get("name") == name and meta.get("namespace", "default") == namespace:
                return _dict(meta.get("annotations")).get(nw_k8s_rules.ROLE_ARN_ANNOTATION)
    return None


def _release_problems(project: Project, model: IamModel, stack: Stack, conf: dict[str, Any],
                      trusts: dict[str, list[str]] | None = None) -> list[str]:
    values = release_values(conf)
    namespace = str(values.get("namespaceOverride") or scalar(conf.get("namespace")) or "default")
    namespace = "kube-system" if namespace == "default" else namespace  # the chart's own rule (values.yaml)
    sa = _dict(values.get("serviceAccount"))
    name = str(sa.get("name") or CHART_DEFAULT_SA)
    subject = f"system:serviceaccount:{namespace}:{name}"
    annotation = scalar(_sa_annotation(project, namespace, name, values))
    irsa = [r for r in model.controllers() if r.is_web_identity()]
    pod_identity = [r for r in model.controllers() if r.is_pod_identity()]
    if not annotation:
        for role in pod_identity:
            subjects = nw_iam_rules.pod_identity_subjects(project, role)
            if subject not in subjects:
                return [f"The release installs ServiceAccount {subject} but the Pod Identity association of "
                        f"{role.address} names {subjects}: the controller gets no AWS credentials."]
        if irsa:
            return [f"IRSA is used ({irsa[0].address} trusts {nw_iam_rules.irsa_subjects(irsa[0])}) but the release "
                    f"does not annotate ServiceAccount {namespace}/{name} with {nw_k8s_rules.ROLE_ARN_ANNOTATION}: "
                    f"the controller gets no AWS credentials."]
        return []
    ref = project.resolve(stack.name, annotation)
    if ref is None:
        if not nw_k8s_rules.ROLE_ARN.match(str(annotation)):
            return [f"{nw_k8s_rules.ROLE_ARN_ANNOTATION}={annotation!r} is not an IAM role ARN."]
        # A literal ARN (values written for a role another stack or account manages): held to the trust of the
        # stacks' role of that name, when there is one.
        # A literal ARN (values written for a role another stack manages): held to the trust of the role of that
        # name in this project, else in any stack scanned in the same run (``trusts``).
        named = str(annotation).rsplit("/", 1)[-1]
        literal = [r for r in model.roles.values() if r.role_name == named and r.is_web_identity()]
        subjects = [s for r in literal for s in nw_iam_rules.irsa_subjects(r)]
        where = literal[0].address if literal else "a scanned stack"
        if not literal and trusts and named in trusts:
            subjects = trusts[named]
        if (literal or (trusts and named in trusts)) and subject not in subjects:
            return [f"The release installs ServiceAccount {subject} but role {named} ({annotation}, {where}) "
                    f"trusts {subjects}: sts:AssumeRoleWithWebIdentity will be denied."]
        return []
    annotated = model.roles.get((ref.stack, ref.name)) if ref.type == "aws_iam_role" and ref.attr == "arn" else None
    if annotated is None:
        return [f"{nw_k8s_rules.ROLE_ARN_ANNOTATION} is {annotation!r}, not the ARN of a role in the stacks."]
    subjects = nw_iam_rules.irsa_subjects(annotated)
    if subject not in subjects:
        return [f"The release installs ServiceAccount {subject} but {annotated.address} trusts {subjects}: "
                f"sts:AssumeRoleWithWebIdentity will be denied."]
    return []


def check_releases(project: Project, model: IamModel, report: RuleReport,
                   trusts: dict[str, list[str]] | None = None) -> None:
    """CKV_NW_12 on every ``helm_release`` of the nodewright chart (``trusts``: IRSA role name -> subjects of every
    stack scanned in the same run, :func:`scanned_irsa_trusts`)."""
    for stack, name, conf in project.all_resources("helm_release"):
        chart = str(scalar(conf.get("chart")) or "")
        if "nodewright" not in chart and scalar(conf.get("name")) != "nodewright":
            continue
        address = f"helm_release.{name}"
        report.passed("CKV_NW_12", stack.path, address)
        for problem in _release_problems(project, model, stack, conf, trusts):
            report.failed("CKV_NW_12", stack.path, address, problem)


def check_manifests(project: Project, report: RuleReport) -> None:
    """CKV_NW_8, 9, 10 and 12 on the objects of ``kubernetes_manifest`` resources."""
    for stack, name, conf in project.all_resources("kubernetes_manifest"):
        manifest = clean(scalar(conf.get("manifest")))
        if not isinstance(manifest, dict):
            continue
        address = f"kubernetes_manifest.{name}"
        for check_id, problems in nw_k8s_rules.check(manifest).items():
            if check_id == "CKV_NW_11":  # workloads the stacks deploy are not the controller (the chart's is)
                continue
            report.passed(check_id, stack.path, address)
            for problem in problems:
                report.failed(check_id, stack.path, address, problem)


def irsa_trusts(project: Project) -> dict[str, list[str]]:
    """IAM role name -> the ``system:serviceaccount:<ns>:<name>`` subjects its IRSA trust names, for every role
    of the project with a literal name and a web-identity trust (what a chart's ``eks.amazonaws.com/role-arn``
    annotation is checked against, CKV_NW_12 on the rendered ServiceAccount)."""
    out: dict[str, list[str]] = {}
    for role in nw_iam_model.build(project).roles.values():
        if role.role_name and role.is_web_identity():
            out.setdefault(role.role_name, []).extend(nw_iam_rules.irsa_subjects(role))
    return out


def irsa_trusts_of_files(stack_files: list[str]) -> dict[str, list[str]]:
    """:func:`irsa_trusts` over every project the given ``cdk.tf.json`` files belong to (merged)."""
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for file in stack_files:
        root = str(Path(file).resolve().parent.parent)
        if root in seen or not Path(file).is_file():
            continue
        seen.add(root)
        for name, subjects in irsa_trusts(project_of(file)).items():
            out.setdefault(name, []).extend(s for s in subjects if s not in out.get(name, []))
    return out


_SCANNED_TRUSTS: list[dict[str, list[str]]] = []


def scanned_irsa_trusts() -> dict[str, list[str]]:
    """IRSA trusts (role name -> subjects) of every stack scanned in this checkov run (the ``cdk.tf.json`` files
    among ``-f`` arguments, or under ``$NODEWRIGHT_POLICY_STACKS``), read once."""
    if not _SCANNED_TRUSTS:
        argv = sys.argv
        files = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-f", "--file")]
        files += [str(p) for d in os.environ.get("NODEWRIGHT_POLICY_STACKS", "").split(os.pathsep) if d
                  for p in sorted(Path(d).glob("*/cdk.tf.json"))]
        _SCANNED_TRUSTS.append(irsa_trusts_of_files([f for f in files if f.endswith("cdk.tf.json")]))
    return _SCANNED_TRUSTS[0]


def analyze(project: Project, trusts: dict[str, list[str]] | None = None) -> RuleReport:
    """Every Terraform-side rule over ``project`` (``trusts``: see :func:`check_releases`)."""
    model = nw_iam_model.build(project)
    report = nw_iam_rules.run(project, model)
    report.extend(nw_queue_rules.run(project))
    check_releases(project, model, report, trusts)
    check_manifests(project, report)
    return report
