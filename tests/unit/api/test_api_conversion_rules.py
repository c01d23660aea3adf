"""Each conversion rule on its own, with exact expected documents."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodewright.api import PLACEHOLDER_NODE_ROLE, convert_documents, labels
from nodewright.errors import NodewrightValidationError

from .helpers import ec2nodeclass, nodepool

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
REQ = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]


def provisioner(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"providerRef": {"name": "default"}, "requirements": REQ}
    base.update(spec)
    return {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "p"}, "spec": base}


def template(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.k8s.aws/v1alpha1", "kind": "AWSNodeTemplate", "metadata": {"name": "default"},
            "spec": {"subnetSelector": {"team": "a"}, "securityGroupSelector": {"team": "a"}, **spec}}


def v1beta1_pool(**disruption: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1beta1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "template": {"spec": {"requirements": REQ,
                                  "nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass",
                                                   "name": "default"}}},
            **({"disruption": disruption} if disruption else {}),
        },
    }


def test_consolidation_enabled_and_expiry() -> None:
    [pool] = convert_documents([provisioner(consolidation={"enabled": True}, ttlSecondsUntilExpired=2592000,
                                            weight=50, annotations={"team": "a"}, startupTaints=[
                                                {"key": "cilium.io/agent-not-ready", "effect": "NoExecute"}])])
    assert pool == {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "template": {
                "metadata": {"annotations": {"team": "a"}},
                "spec": {"requirements": REQ, "nodeClassRef": REF, "expireAfter": "2592000s",
                         "startupTaints": [{"key": "cilium.io/agent-not-ready", "effect": "NoExecute"}]},
            },
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
            "weight": 50,
        },
    }


def test_ttl_after_empty_with_consolidation_is_an_error() -> None:
    with pytest.raises(NodewrightValidationError) as info:
        convert_documents([provisioner(consolidation={"enabled": True}, ttlSecondsAfterEmpty=30)])
    assert str(info.value) == "documents[0].spec.ttlSecondsAfterEmpty: cannot be combined with consolidation.enabled: true"


def test_server_metadata_is_dropped() -> None:
    doc = provisioner()
    doc["metadata"] = {"name": "p", "uid": "1", "resourceVersion": "9", "generation": 3, "labels": {"a": "b"},
                       "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}
    [pool] = convert_documents([doc])
    assert pool["metadata"] == {"name": "p", "labels": {"a": "b"}}


def test_inline_provider_becomes_a_nodeclass_after_the_nodepool() -> None:
    doc = provisioner(provider={"subnetSelector": {"aws-ids": "subnet-0a, subnet-0b"},
                                "securityGroupSelector": {"kubernetes.io/cluster/demo": ""},
                                "instanceProfile": "KarpenterNodeInstanceProfile-demo"})
    del doc["spec"]["providerRef"]
    pool, nodeclass = convert_documents([doc])
    assert pool["spec"]["template"]["spec"]["nodeClassRef"] == {**REF, "name": "p"}
    assert nodeclass == {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "p"},
        "spec": {
            "subnetSelectorTerms": [{"id": "subnet-0a"}, {"id": "subnet-0b"}],
            "securityGroupSelectorTerms": [{"tags": {"kubernetes.io/cluster/demo": "*"}}],
            "amiSelectorTerms": [{"alias": "al2@latest"}],
            "instanceProfile": "KarpenterNodeInstanceProfile-demo",
        },
    }


def test_provisioner_without_node_class_is_an_error() -> None:
    doc = provisioner()
    del doc["spec"]["providerRef"]
    with pytest.raises(NodewrightValidationError, match=r"^documents\[0\]\.spec\.providerRef: a Provisioner needs"):
        convert_documents([doc])


def test_ami_selector_map_becomes_terms_with_family() -> None:
    [nodeclass] = convert_documents([template(amiFamily="AL2", amiSelector={
        "aws::name": "my-ami-*", "aws::owners": "self,123456789012", "team": "a"})], node_role="NodeRole")
    assert nodeclass["spec"]["amiSelectorTerms"] == [
        {"name": "my-ami-*", "tags": {"team": "a"}, "owner": "self"},
        {"name": "my-ami-*", "tags": {"team": "a"}, "owner": "123456789012"},
    ]
    assert nodeclass["spec"]["amiFamily"] == "AL2"
    assert nodeclass["spec"]["role"] == "NodeRole"


def test_ami_ids_and_missing_family_default_to_al2() -> None:
    [nodeclass] = convert_documents([template(amiSelector={"aws::ids": "ami-0a,ami-0b"})], instance_profile="IP")
    assert nodeclass["spec"]["amiSelectorTerms"] == [{"id": "ami-0a"}, {"id": "ami-0b"}]
    assert nodeclass["spec"]["amiFamily"] == "AL2"
    assert nodeclass["spec"]["instanceProfile"] == "IP"
    assert "role" not in nodeclass["spec"]


@pytest.mark.parametrize(("family", "alias"), [("AL2023", "al2023@latest"), ("Bottlerocket", "bottlerocket@latest"),
                                                ("AL2", "al2@latest"), ("Windows2022", "windows2022@latest")])
def test_family_without_selectors_becomes_alias(family: str, alias: str) -> None:
    [nodeclass] = convert_documents([template(amiFamily=family)])
    assert nodeclass["spec"]["amiSelectorTerms"] == [{"alias": alias}]
    assert "amiFamily" not in nodeclass["spec"]
    assert nodeclass["spec"]["role"] == PLACEHOLDER_NODE_ROLE


@pytest.mark.parametrize(("family", "reason"), [
    ("Custom", "amiFamily Custom needs AMI selectors: there is no 'Custom@latest' alias"),
    ("Ubuntu", "Ubuntu was removed in v1: select the Ubuntu AMI with amiSelectorTerms and amiFamily AL2"),
])
def test_families_without_alias_need_selectors(family: str, reason: str) -> None:
    with pytest.raises(NodewrightValidationError) as info:
        convert_documents([template(amiFamily=family)])
    assert str(info.value) == f"documents[0].spec.amiFamily: {reason}"


def test_launch_template_is_rejected() -> None:
    with pytest.raises(NodewrightValidationError, match=r"^documents\[0\]\.spec\.launchTemplate: custom launch"):
        convert_documents([template(launchTemplate="my-lt")])


def test_v1beta1_nodeclass_keeps_terms_and_fields() -> None:
    doc = {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
           "spec": {"amiFamily": "AL2023", "role": "R", "subnetSelectorTerms": [{"tags": {"a": "b"}}],
                    "securityGroupSelectorTerms": [{"name": "sg"}], "userData": "x",
                    "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2},
                    "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "40Gi"}}]}}
    [nodeclass] = convert_documents([doc])
    assert nodeclass == {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {"subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"name": "sg"}],
                 "amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "R", "userData": "x",
                 "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "40Gi"}}],
                 "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2}},
    }


def test_v1beta1_kubelet_moves_to_the_nodeclass_converted_with_it() -> None:
    pool = v1beta1_pool(consolidationPolicy="WhenUnderutilized", expireAfter="Never")
    pool["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 110}
    nodeclass = {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
                 "spec": {"amiFamily": "Bottlerocket", "role": "R", "subnetSelectorTerms": [{"id": "subnet-0a"}],
                          "securityGroupSelectorTerms": [{"id": "sg-0a"}]}}
    out_pool, out_class = convert_documents([pool, nodeclass])
    assert out_pool["spec"] == {
        "template": {"spec": {"requirements": REQ, "nodeClassRef": REF, "expireAfter": "Never"}},
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"},
    }
    assert out_class["spec"]["kubelet"] == {"maxPods": 110}
    assert "annotations" not in out_pool["metadata"]


def test_v1beta1_kubelet_without_its_nodeclass_goes_to_the_annotation() -> None:
    pool = v1beta1_pool(consolidationPolicy="WhenEmpty", consolidateAfter="30s")
    pool["spec"]["template"]["spec"]["kubelet"] = {"maxPods": 58, "kubeReserved": {"cpu": "200m"}}
    [out] = convert_documents([pool])
    assert out["metadata"]["annotations"] == {
        labels.V1BETA1_KUBELET_CONVERSION: json.dumps({"kubeReserved": {"cpu": "200m"}, "maxPods": 58}, sort_keys=True)
    }
    assert out["spec"]["disruption"] == {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}


def test_conflicting_kubelets_for_one_nodeclass_are_an_error() -> None:
    a = provisioner(kubeletConfiguration={"maxPods": 20})
    b = provisioner(kubeletConfiguration={"maxPods": 30, "containerRuntime": "containerd"})
    b["metadata"]["name"] = "q"
    with pytest.raises(NodewrightValidationError) as info:
        convert_documents([a, b, template()])
    assert info.value.path == "documents[1].spec.kubeletConfiguration"
    assert info.value.reason.startswith("differs from the kubelet of 'p', which uses the same EC2NodeClass 'default'")


def test_provisioner_kubelet_lands_on_awsnodetemplate() -> None:
    out = convert_documents([provisioner(kubeletConfiguration={"maxPods": 20, "containerRuntime": "containerd"}),
                             template()])
    assert out[1]["spec"]["kubelet"] == {"maxPods": 20}


def test_v1beta1_without_disruption_block_stays_without() -> None:
    [out] = convert_documents([v1beta1_pool()])
    assert "disruption" not in out["spec"]


def test_v1_and_unknown_documents_pass_through_as_the_same_objects() -> None:
    docs = [nodepool(), ec2nodeclass(), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
            {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"karpenter.sh/provisioner-name": "x"}},
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
             "spec": {"template": {"spec": {"nodeSelector": {"karpenter.sh/nodepool": "a"}}}}}]
    out = convert_documents(docs)
    assert len(out) == len(docs)
    assert all(a is b for a, b in zip(out, docs, strict=True))


def test_pod_selectors_affinity_and_annotations_are_renamed() -> None:
    old = labels.V1ALPHA5_PROVISIONER_NAME
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"karpenter.sh/do-not-evict": "true"}},
        "spec": {
            "nodeSelector": {old: "team1"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": old, "operator": "In", "values": ["team1"]}]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "preference": {"matchExpressions": [{"key": old, "operator": "Exists"}]}}],
                },
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": old, "labelSelector": {}}}]},
            },
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": old, "whenUnsatisfiable": "DoNotSchedule"}],
        },
    }
    [out] = convert_documents([pod])
    new = labels.NODEPOOL
    assert out["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert out["spec"]["nodeSelector"] == {new: "team1"}
    node_affinity = out["spec"]["affinity"]["nodeAffinity"]
    assert node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"] == [{"key": new, "operator": "In", "values": ["team1"]}]
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"][
        "matchExpressions"] == [{"key": new, "operator": "Exists"}]
    assert out["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0][
        "podAffinityTerm"]["topologyKey"] == new
    assert out["spec"]["topologySpreadConstraints"][0]["topologyKey"] == new
    assert pod["spec"]["nodeSelector"] == {old: "team1"}  # input untouched


def test_cronjob_and_node_are_renamed() -> None:
    cronjob = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
               "spec": {"schedule": "*/10 * * * *", "jobTemplate": {"spec": {"template": {
                   "metadata": {"annotations": {"karpenter.sh/do-not-evict": "true"}},
                   "spec": {"nodeSelector": {labels.V1ALPHA5_PROVISIONER_NAME: "low"}}}}}}}
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {labels.V1ALPHA5_PROVISIONER_NAME: "low"},
                         "annotations": {"karpenter.sh/do-not-consolidate": "true"}}}
    out_cron, out_node = convert_documents([cronjob, node])
    pod_template = out_cron["spec"]["jobTemplate"]["spec"]["template"]
    assert pod_template["spec"]["nodeSelector"] == {labels.NODEPOOL: "low"}
    assert pod_template["metadata"]["annotations"] == {labels.DO_NOT_DISRUPT: "true"}
    assert out_node["metadata"] == {"name": "n", "labels": {labels.NODEPOOL: "low"},
                                    "annotations": {labels.DO_NOT_DISRUPT: "true"}}


def test_v1beta1_nodeclaim_converts() -> None:
    claim = {"apiVersion": "karpenter.sh/v1beta1", "kind": "NodeClaim", "metadata": {"name": "c-1"},
             "spec": {"requirements": REQ, "kubelet": {"maxPods": 10},
                      "nodeClassRef": {"apiVersion": "karpenter.k8s.aws/v1beta1", "kind": "EC2NodeClass",
                                       "name": "default"}}}
    [out] = convert_documents([claim])
    assert out == {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "c-1"},
                   "spec": {"requirements": REQ, "nodeClassRef": REF}}


def test_non_mapping_document_is_an_error() -> None:
    with pytest.raises(NodewrightValidationError, match=r"^documents\[1\]: expected a mapping, got str$"):
        convert_documents([nodepool(), "text"])  # type: ignore[list-item]


def test_v1beta1_when_underutilized_with_consolidate_after_is_rejected_as_v1beta1_did() -> None:
    # Karpenter v1beta1's NodePool webhook and CRD rule: "consolidateAfter cannot be combined with
    # consolidationPolicy=WhenUnderutilized"; only a nil duration ("Never") passed.
    with pytest.raises(NodewrightValidationError) as err:
        convert_documents([v1beta1_pool(consolidationPolicy="WhenUnderutilized", consolidateAfter="30s")])
    assert err.value.path.endswith("spec.disruption.consolidateAfter")
    assert "cannot be combined with consolidationPolicy=WhenUnderutilized" in str(err.value)
    [out] = convert_documents([v1beta1_pool(consolidationPolicy="WhenUnderutilized", consolidateAfter="Never")])
    assert out["spec"]["disruption"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
