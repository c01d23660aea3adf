"""The generated CRDs reject what the models reject: 78 documents, each judged by the model (``parse_*``) and by
the CRD as the API server would (defaults, OpenAPI schema, CEL rules; see ``crd_verdict``), with the
expected verdict stated. Rules and limits are Karpenter v1.14's CRDs' (kubernetes-sigs/karpenter
``pkg/apis/crds``, aws/karpenter-provider-aws ``pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from nodewright.api import parse_ec2nodeclass, parse_nodeclaim, parse_nodepool
from nodewright.api.manifests import parse_nodeoverlay
from nodewright.errors import NodewrightValidationError

from .crd_verdict import crd_errors, evaluate
from .helpers import ec2nodeclass, nodeclaim, nodepool

Doc = dict[str, Any]
PARSERS: dict[str, Callable[[Doc], object]] = {
    "NodePool": parse_nodepool, "EC2NodeClass": parse_ec2nodeclass, "NodeClaim": parse_nodeclaim,
    "NodeOverlay": parse_nodeoverlay}


def pool(**changes: Any) -> Doc:
    """A valid NodePool with ``changes`` applied at dotted paths under ``spec`` (None deletes)."""
    return _changed(nodepool(), changes)


def nc(**changes: Any) -> Doc:
    return _changed(ec2nodeclass(), changes)


def claim(**changes: Any) -> Doc:
    return _changed(nodeclaim(), changes)


def overlay(**spec: Any) -> Doc:
    """A NodeOverlay (karpenter.sh/v1alpha1) with ``spec`` (``requirements`` empty unless given)."""
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "o"},
            "spec": {"requirements": [], **spec}}


def _changed(doc: Doc, changes: dict[str, Any]) -> Doc:
    for dotted, value in changes.items():
        target = doc["spec"]
        *parents, last = dotted.split("__")
        for part in parents:
            target = target.setdefault(part, {})
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return doc


def budgets(*items: Doc) -> Doc:
    return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m", "budgets": list(items)}


def requirement(key: str = "kubernetes.io/arch", operator: str = "In", values: Any = ("arm64",), **extra: Any) -> Doc:
    out: Doc = {"key": key, "operator": operator, **extra}
    if values is not None:
        out["values"] = list(values)
    return out


SUBNETS = [{"tags": {"karpenter.sh/discovery": "demo"}}]

CASES: list[tuple[str, Doc, bool]] = [
    # --- NodePool -------------------------------------------------------------------------------------------
    ("nodepool as given", pool(), True),
    ("budget on weekdays", pool(disruption=budgets({"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h"})),
     True),
    ("budget macro", pool(disruption=budgets({"nodes": "10%", "schedule": "@daily", "duration": "1h30m"})), True),
    ("budget steps and lists", pool(disruption=budgets({"nodes": "1", "schedule": "*/15 0-6,22,23 * JAN-MAR 1-5",
                                                        "duration": "30m"})), True),
    ("cron minute 60", pool(disruption=budgets({"nodes": "0", "schedule": "60 9 * * *", "duration": "1h"})), False),
    ("cron hour 24", pool(disruption=budgets({"nodes": "0", "schedule": "0 24 * * *", "duration": "1h"})), False),
    ("cron four fields", pool(disruption=budgets({"nodes": "0", "schedule": "0 9 * *", "duration": "1h"})), False),
    ("cron words", pool(disruption=budgets({"nodes": "0", "schedule": "every day at nine", "duration": "1h"})),
     False),
    ("cron step zero", pool(disruption=budgets({"nodes": "0", "schedule": "*/0 * * * *", "duration": "1h"})), False),
    ("cron day 32", pool(disruption=budgets({"nodes": "0", "schedule": "0 0 32 * *", "duration": "1h"})), False),
    ("cron bad weekday name", pool(disruption=budgets({"nodes": "0", "schedule": "0 9 * * funday",
                                                       "duration": "1h"})), False),
    ("schedule without duration", pool(disruption=budgets({"nodes": "0", "schedule": "@daily"})), False),
    ("budget 101%", pool(disruption=budgets({"nodes": "101%"})), False),
    ("budget duration in seconds", pool(disruption=budgets({"nodes": "1", "schedule": "@daily", "duration": "90s"})),
     False),
    ("51 budgets", pool(disruption=budgets(*[{"nodes": "1"}] * 51)), False),
    ("weight 101", pool(weight=101), False),
    ("weight 0", pool(weight=0), False),
    ("consolidateAfter Never", pool(disruption={"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}),
     True),
    ("consolidateAfter in words", pool(disruption={"consolidateAfter": "5 minutes"}), False),
    ("hostname requirement", pool(template__spec__requirements=[requirement("kubernetes.io/hostname")]), False),
    # Karpenter v1.9+ allows kubernetes.io / k8s.io keys (and subdomains); karpenter.sh stays restricted.
    ("kubernetes.io requirement", pool(template__spec__requirements=[requirement("kubernetes.io/test")]), True),
    ("k8s.io subdomain requirement", pool(template__spec__requirements=[requirement("sub.k8s.io/test")]), True),
    ("karpenter.sh requirement", pool(template__spec__requirements=[requirement("karpenter.sh/test")]), False),
    ("karpenter.k8s.aws subdomain label", pool(template__metadata={"labels": {"x.karpenter.k8s.aws/t": "v"}}), False),
    ("subdomain.kubernetes.io label", pool(template__metadata={"labels": {"subdomain.kubernetes.io/test": "v"}}), True),
    ("In without values", pool(template__spec__requirements=[requirement(values=())]), False),
    ("Exists with values", pool(template__spec__requirements=[requirement(operator="Exists")]), False),
    ("Gt with two values", pool(template__spec__requirements=[
        requirement("karpenter.k8s.aws/instance-cpu", "Gt", ("4", "8"))]), False),
    ("Gt negative", pool(template__spec__requirements=[requirement("karpenter.k8s.aws/instance-cpu", "Gt", ("-1",))]),
     False),
    ("minValues above values", pool(template__spec__requirements=[requirement(values=("arm64",), minValues=2)]),
     False),
    ("requirement key too long", pool(template__spec__requirements=[requirement("a" * 64)]), False),
    ("restricted template label", pool(template__metadata={"labels": {"karpenter.sh/nodepool": "x"}}), False),
    ("template label value too long", pool(template__metadata={"labels": {"team": "x" * 64}}), False),
    ("101 template labels", pool(template__metadata={"labels": {f"k{i}": "v" for i in range(101)}}), False),
    # --- EC2NodeClass -----------------------------------------------------------------------------------------
    ("nodeclass as given", nc(), True),
    ("bottlerocket alias", nc(amiSelectorTerms=[{"alias": "bottlerocket@v1.20.0"}]), True),
    ("ubuntu alias", nc(amiSelectorTerms=[{"alias": "ubuntu@latest"}]), False),
    ("alias without version", nc(amiSelectorTerms=[{"alias": "al2023"}]), False),
    ("windows alias pinned", nc(amiSelectorTerms=[{"alias": "windows2022@2024.01.01"}]), False),
    ("alias too long", nc(amiSelectorTerms=[{"alias": "al2023@" + "v" * 30}]), False),
    ("alias with Custom family", nc(amiFamily="Custom", userData="#!/bin/bash\n"), True),
    ("alias contradicting family", nc(amiFamily="Bottlerocket"), False),
    ("alias with other terms", nc(amiSelectorTerms=[{"alias": "al2023@latest"}, {"id": "ami-0123"}]), False),
    ("ami id without family", nc(amiSelectorTerms=[{"id": "ami-0123"}]), False),
    ("ami tags with family", nc(amiSelectorTerms=[{"tags": {"team": "platform"}}], amiFamily="AL2023"), True),
    ("empty subnet tag value", nc(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": ""}}]), False),
    ("21 subnet tags", nc(subnetSelectorTerms=[{"tags": {f"k{i}": "v" for i in range(21)}}]), False),
    ("role and instance profile", nc(instanceProfile="profile"), False),
    ("restricted user tag", nc(tags={"karpenter.sh/nodepool": "x"}), False),
    ("two root volumes", nc(blockDeviceMappings=[
        {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}},
        {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "20Gi"}}]), False),
    ("no subnet terms", nc(subnetSelectorTerms=[]), False),
    ("empty role", nc(role=""), False),
    ("negative kubeReserved", nc(kubelet={"kubeReserved": {"cpu": "-1"}}), False),
    ("kubeReserved as given", nc(kubelet={"kubeReserved": {"cpu": "250m", "memory": 1073741824}}), True),
    ("ebs without size or snapshot", nc(blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}]),
     False),
    ("ebs from a snapshot", nc(blockDeviceMappings=[{"deviceName": "/dev/xvda", "ebs": {"snapshotID": "snap-0123"}}]),
     True),
    ("subnet id and tags", nc(subnetSelectorTerms=[{"id": "subnet-0123", **SUBNETS[0]}]), False),
    # --- NodeClaim --------------------------------------------------------------------------------------------
    ("nodeclaim as given", claim(), True),
    ("nodeclaim Lt with letters", claim(requirements=[requirement("karpenter.k8s.aws/instance-cpu", "Lt", ("x",))]),
     False),
    # --- NodeOverlay (Karpenter main nodeoverlay_validation_test.go) --------------------------------------------
    ("overlay price", overlay(price="34.43", weight=10), True),
    ("overlay priceAdjustment -100%", overlay(priceAdjustment="-100%"), True),
    ("overlay priceAdjustment +298%", overlay(priceAdjustment="+298%"), True),
    ("overlay priceAdjustment -34.43", overlay(priceAdjustment="-34.43"), True),
    ("overlay extended capacity", overlay(capacity={"smarter-devices/fuse": "1"}), True),
    ("overlay nodepool and capacity-type keys", overlay(requirements=[requirement("karpenter.sh/nodepool"),
                                                                      requirement("karpenter.sh/capacity-type")]), True),
    ("overlay price and priceAdjustment", overlay(price="0.432", priceAdjustment="+10%"), False),
    ("overlay signed price", overlay(price="+42"), False),
    ("overlay price .5", overlay(price=".5"), False),
    ("overlay price 1e10", overlay(price="1e10"), False),
    ("overlay unsigned priceAdjustment", overlay(priceAdjustment="1%"), False),
    ("overlay priceAdjustment -101.1%", overlay(priceAdjustment="-101.1%"), False),
    ("overlay cpu capacity", overlay(capacity={"cpu": "1"}), False),
    ("overlay weight 0", overlay(weight=0), False),
    ("overlay weight 10001", overlay(weight=10001), False),
    ("overlay NotIn without values", overlay(requirements=[requirement("test", "NotIn", None)]), False),
    ("overlay Gt -1", overlay(requirements=[requirement("topology.kubernetes.io/zone", "Gt", ("-1",))]), False),
    ("overlay karpenter.sh domain", overlay(requirements=[requirement("karpenter.sh/test", "Exists", None)]), False),
    ("overlay hostname", overlay(requirements=[requirement("kubernetes.io/hostname", "Exists", None)]), False),
]


def model_accepts(doc: Doc) -> bool:
    try:
        PARSERS[doc["kind"]](doc)
    except NodewrightValidationError:
        return False
    return True


def test_about_forty_documents() -> None:
    assert len(CASES) >= 40
    assert sum(ok for _, _, ok in CASES) >= 8 and sum(not ok for _, _, ok in CASES) >= 30


@pytest.mark.parametrize(("doc", "valid"), [(d, v) for _, d, v in CASES], ids=[n for n, _, _ in CASES])
def test_the_crd_and_the_model_give_the_same_verdict(doc: Doc, valid: bool) -> None:
    errors = crd_errors(doc)
    assert model_accepts(doc) is valid
    assert (not errors) is valid, errors


def test_rejections_carry_karpenters_messages() -> None:
    assert crd_errors(nc(amiSelectorTerms=[{"alias": "ubuntu@latest"}])) == [
        ".spec.amiSelectorTerms[0].alias: family is not supported, must be one of the following: 'al2', 'al2023', "
        "'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"]
    assert crd_errors(pool(disruption=budgets({"nodes": "0", "schedule": "61 * * * *", "duration": "1h"}))) == [
        ".spec.disruption.budgets[0].schedule: schedule must be a 5-field cron expression (minute hour day-of-month "
        "month day-of-week) or an @daily-style macro"]


def test_the_kubernetes_extension_functions_of_the_helper() -> None:
    assert evaluate("self.split('@')[1] == 'latest'", "al2023@latest")
    assert evaluate("self.find('^[^@]+') == 'bottlerocket'", "bottlerocket@v1")
    assert evaluate("self.find('[0-9]+') == ''", "none")
