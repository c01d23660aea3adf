"""Invalid input raises NodewrightValidationError naming the field path and the reason."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from nodewright.api import (
    labels,
    load_manifests,
    parse_documents,
    parse_ec2nodeclass,
    parse_nodeclaim,
    parse_nodepool,
)
from nodewright.cli import cli
from nodewright.errors import NodewrightValidationError

from .helpers import ec2nodeclass, nodeclaim, nodepool

Mutation = Callable[[dict[str, Any]], None]


def _tspec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = doc["spec"]["template"]["spec"]
    return spec


def _req(i: int, **fields: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        reqs = _tspec(doc)["requirements"]
        while len(reqs) <= i:
            reqs.append({"key": "example.com/x", "operator": "Exists"})
        reqs[i] = fields

    return mutate


NODEPOOL_CASES: list[tuple[str, Mutation, str]] = [
    (
        "gt-not-integer",
        _req(2, key="karpenter.k8s.aws/instance-cpu", operator="Gt", values=["abc"]),
        "spec.template.spec.requirements[2].values: Gt needs one integer, got 'abc'",
    ),
    (
        "lt-two-values",
        _req(1, key="karpenter.k8s.aws/instance-cpu", operator="Lt", values=["4", "8"]),
        "spec.template.spec.requirements[1].values: Lt needs one integer, got 2 values",
    ),
    (
        "gte-negative",
        _req(0, key="karpenter.k8s.aws/instance-memory", operator="Gte", values=["-1"]),
        "spec.template.spec.requirements[0].values: Gte needs one integer, got '-1'",
    ),
    (
        "in-without-values",
        _req(1, key="kubernetes.io/arch", operator="In", values=[]),
        "spec.template.spec.requirements[1].values: In needs at least one value",
    ),
    (
        "exists-with-values",
        _req(0, key="example.com/team", operator="Exists", values=["a"]),
        "spec.template.spec.requirements[0].values: Exists takes no values, got ['a']",
    ),
    (
        "unknown-operator",
        _req(0, key="kubernetes.io/arch", operator="Like", values=["arm64"]),
        "spec.template.spec.requirements[0].operator: Input should be 'In', 'NotIn', 'Exists', "
        "'DoesNotExist', 'Gt', 'Lt', 'Gte' or 'Lte', got 'Like'",
    ),
    (
        "min-values-above-values",
        _req(0, key="node.kubernetes.io/instance-type", operator="In", values=["m5.large"], minValues=2),
        "spec.template.spec.requirements[0].minValues: minValues 2 needs at least that many values, got 1",
    ),
    (
        "min-values-too-big",
        _req(0, key="node.kubernetes.io/instance-type", operator="Exists", minValues=51),
        "spec.template.spec.requirements[0].minValues: Input should be less than or equal to 50, got 51",
    ),
    (
        "hostname-restricted",
        _req(0, key="kubernetes.io/hostname", operator="In", values=["a"]),
        "spec.template.spec.requirements[0].key: 'kubernetes.io/hostname' is restricted: Karpenter picks the hostname",
    ),
    (
        "nodepool-key-restricted",
        _req(1, key="karpenter.sh/nodepool", operator="In", values=["other"]),
        "spec.template.spec.requirements[1].key: label 'karpenter.sh/nodepool' is restricted: Karpenter sets it itself",
    ),
    (
        "unknown-karpenter-label",
        _req(0, key="karpenter.k8s.aws/instance-colour", operator="In", values=["blue"]),
        "spec.template.spec.requirements[0].key: label domain 'karpenter.k8s.aws' is restricted "
        "(key 'karpenter.k8s.aws/instance-colour' is not a well-known label)",
    ),
    (
        "bad-label-value",
        _req(0, key="example.com/team", operator="In", values=["has space"]),
        "spec.template.spec.requirements[0].values[0]: 'has space' is not a valid label value: at most 63 "
        "alphanumerics, '-', '_' or '.', starting and ending alphanumeric",
    ),
    (
        "too-many-requirements",
        lambda d: _tspec(d).__setitem__(
            "requirements", [{"key": f"example.com/k{i}", "operator": "Exists"} for i in range(101)]
        ),
        "spec.template.spec.requirements: List should have at most 100 items after validation, not 101",
    ),
    (
        "template-label-restricted",
        lambda d: d["spec"]["template"]["metadata"]["labels"].__setitem__("kubernetes.io/hostname", "x"),
        "spec.template.metadata.labels[kubernetes.io/hostname]: label 'kubernetes.io/hostname' is restricted: "
        "Karpenter sets it itself",
    ),
    (
        "weight-zero",
        lambda d: d["spec"].__setitem__("weight", 0),
        "spec.weight: Input should be greater than or equal to 1, got 0",
    ),
    (
        "weight-too-big",
        lambda d: d["spec"].__setitem__("weight", 101),
        "spec.weight: Input should be less than or equal to 100, got 101",
    ),
    (
        "bad-policy",
        lambda d: d["spec"]["disruption"].__setitem__("consolidationPolicy", "WhenUnderutilized"),
        "spec.disruption.consolidationPolicy: Input should be 'WhenEmpty', 'WhenEmptyOrUnderutilized' or "
        "'Balanced', got 'WhenUnderutilized'",
    ),
    (
        "bad-consolidate-after",
        lambda d: d["spec"]["disruption"].__setitem__("consolidateAfter", "5 minutes"),
        "spec.disruption.consolidateAfter: '5 minutes' is not a duration: use e.g. '30s', '15m', '720h', or 'Never'",
    ),
    (
        "bad-expire-after",
        lambda d: _tspec(d).__setitem__("expireAfter", "30d"),
        "spec.template.spec.expireAfter: '30d' is not a duration: use e.g. '30s', '15m', '720h', or 'Never'",
    ),
    (
        "termination-grace-never",
        lambda d: _tspec(d).__setitem__("terminationGracePeriod", "Never"),
        "spec.template.spec.terminationGracePeriod: 'Never' is not a duration: use e.g. '30s', '15m', '720h' or '1h30m'",
    ),
    (
        "budget-schedule-without-duration",
        lambda d: d["spec"]["disruption"].__setitem__("budgets", [{"nodes": "0", "schedule": "0 9 * * mon-fri"}]),
        "spec.disruption.budgets[0].duration: 'schedule' must be set with 'duration'",
    ),
    (
        "budget-duration-without-schedule",
        lambda d: d["spec"]["disruption"].__setitem__("budgets", [{"nodes": "10%"}, {"nodes": "0", "duration": "8h"}]),
        "spec.disruption.budgets[1].schedule: 'schedule' must be set with 'duration'",
    ),
    (
        "budget-bad-cron",
        lambda d: d["spec"]["disruption"].__setitem__(
            "budgets", [{"nodes": "0", "schedule": "every day", "duration": "8h"}]
        ),
        "spec.disruption.budgets[0].schedule: 'every day' is not a 5-field cron expression or @daily-style macro",
    ),
    (
        "budget-seconds-duration",
        lambda d: d["spec"]["disruption"].__setitem__(
            "budgets", [{"nodes": "0", "schedule": "@daily", "duration": "30s"}]
        ),
        "spec.disruption.budgets[0].duration: '30s' is not a budget duration: minutes and hours only, e.g. '8h', '1h30m'",
    ),
    (
        "budget-nodes-percent",
        lambda d: d["spec"]["disruption"].__setitem__("budgets", [{"nodes": "101%"}]),
        "spec.disruption.budgets[0].nodes: nodes must be an integer or a percentage 0%..100%, got '101%'",
    ),
    (
        "budget-bad-reason",
        lambda d: d["spec"]["disruption"].__setitem__("budgets", [{"nodes": "1", "reasons": ["Expired"]}]),
        "spec.disruption.budgets[0].reasons[0]: Input should be 'Underutilized', 'Empty' or 'Drifted', got 'Expired'",
    ),
    (
        "too-many-budgets",
        lambda d: d["spec"]["disruption"].__setitem__("budgets", [{"nodes": "1"}] * 51),
        "spec.disruption.budgets: List should have at most 50 items after validation, not 51",
    ),
    (
        "bad-limit-quantity",
        lambda d: d["spec"]["limits"].__setitem__("memory", "lots"),
        "spec.limits.memory: 'lots' is not a quantity: expected a number with an optional suffix like m, Gi, G",
    ),
    (
        "taint-effect",
        lambda d: _tspec(d).__setitem__("taints", [{"key": "team", "effect": "NoRun"}]),
        "spec.template.spec.taints[0].effect: Input should be 'NoSchedule', 'PreferNoSchedule' or 'NoExecute', "
        "got 'NoRun'",
    ),
    (
        "taint-bool-value",
        lambda d: _tspec(d).__setitem__("taints", [{"key": "team", "value": True, "effect": "NoSchedule"}]),
        "spec.template.spec.taints[0].value: must be a string, got True: quote it ('\"true\"')",
    ),
    (
        "node-class-ref-missing-group",
        lambda d: _tspec(d)["nodeClassRef"].pop("group"),
        "spec.template.spec.nodeClassRef.group: required field is missing",
    ),
    (
        "unknown-field",
        lambda d: d["spec"].__setitem__("ttlSecondsAfterEmpty", 30),
        "spec.ttlSecondsAfterEmpty: unknown field",
    ),
    (
        "missing-name",
        lambda d: d["metadata"].pop("name"),
        "metadata.name: required field is missing",
    ),
    (
        "bad-name",
        lambda d: d["metadata"].__setitem__("name", "General_Pool"),
        "metadata.name: 'General_Pool' is not a valid name: lowercase alphanumerics, '-' and '.', at most 253",
    ),
    (
        "old-api-version",
        lambda d: d.__setitem__("apiVersion", "karpenter.sh/v1beta1"),
        "apiVersion: expected 'karpenter.sh/v1', got 'karpenter.sh/v1beta1' "
        "(run 'nodewright convert' or use convert_documents first)",
    ),
]


@pytest.mark.parametrize(("mutate", "message"), [c[1:] for c in NODEPOOL_CASES], ids=[c[0] for c in NODEPOOL_CASES])
def test_invalid_nodepool_names_path_and_reason(mutate: Mutation, message: str) -> None:
    doc = nodepool()
    mutate(doc)
    with pytest.raises(NodewrightValidationError) as info:
        parse_nodepool(doc)
    assert str(info.value) == message


def test_error_carries_path_and_reason_separately() -> None:
    doc = nodepool()
    _req(2, key="karpenter.k8s.aws/instance-cpu", operator="Gt", values=["abc"])(doc)
    with pytest.raises(NodewrightValidationError) as info:
        parse_nodepool(doc)
    assert info.value.path == "spec.template.spec.requirements[2].values"
    assert info.value.reason == "Gt needs one integer, got 'abc'"


def test_valid_nodepool_defaults() -> None:
    doc = nodepool()
    del doc["spec"]["disruption"]
    pool = parse_nodepool(doc)
    assert pool.spec.template.spec.expire_after == "720h"
    assert pool.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert pool.spec.disruption.consolidate_after == "0s"
    assert [b.nodes for b in pool.spec.disruption.budgets] == ["10%"]
    assert pool.spec.weight == 10
    assert pool.requirements[2].integer_value() == 5


def test_yaml_integers_become_strings() -> None:
    doc = nodepool()
    _tspec(doc)["requirements"][2]["values"] = [5]
    doc["spec"]["limits"] = {"cpu": 1000, "nodes": 20}
    doc["spec"]["disruption"]["budgets"] = [{"nodes": 3}]
    pool = parse_nodepool(doc)
    assert pool.requirements[2].values == ["5"]
    assert pool.spec.limits == {"cpu": "1000", "nodes": "20"}
    assert pool.spec.disruption.budgets[0].nodes == "3"
    assert pool.spec.disruption.budgets[0].percent() is None


def test_budget_with_schedule_and_reasons_is_valid() -> None:
    doc = nodepool()
    doc["spec"]["disruption"]["budgets"] = [
        {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Underutilized", "Drifted"]},
        {"nodes": "20%"},
    ]
    budgets = parse_nodepool(doc).spec.disruption.budgets
    assert budgets[0].reasons == ["Underutilized", "Drifted"]
    assert budgets[1].percent() == 20


EC2NODECLASS_CASES: list[tuple[str, Mutation, str]] = [
    (
        "role-and-profile",
        lambda d: d["spec"].__setitem__("instanceProfile", "KarpenterNodeInstanceProfile"),
        "spec.role: must specify exactly one of ['role', 'instanceProfile']",
    ),
    (
        "neither-role-nor-profile",
        lambda d: d["spec"].pop("role"),
        "spec.role: must specify exactly one of ['role', 'instanceProfile']",
    ),
    (
        "alias-with-other-term",
        lambda d: d["spec"]["amiSelectorTerms"].append({"id": "ami-0123456789abcdef0"}),
        "spec.amiSelectorTerms[0].alias: 'alias' is mutually exclusive, cannot be set with a combination of "
        "other amiSelectorTerms",
    ),
    (
        "alias-with-tags-in-term",
        lambda d: d["spec"]["amiSelectorTerms"][0].__setitem__("tags", {"team": "a"}),
        "spec.amiSelectorTerms[0].alias: 'alias' is mutually exclusive, cannot be set with a combination of "
        "other fields",
    ),
    (
        "alias-unknown-family",
        lambda d: d["spec"]["amiSelectorTerms"][0].__setitem__("alias", "ubuntu@latest"),
        "spec.amiSelectorTerms[0].alias: alias must be '<family>@<version>' with family one of "
        "['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'], got 'ubuntu@latest'",
    ),
    (
        "family-missing-without-alias",
        lambda d: d["spec"].__setitem__("amiSelectorTerms", [{"tags": {"team": "a"}}]),
        "spec.amiFamily: amiFamily is required when amiSelectorTerms does not contain an alias",
    ),
    (
        "family-contradicts-alias",
        lambda d: d["spec"].__setitem__("amiFamily", "AL2"),
        "spec.amiFamily: amiFamily 'AL2' contradicts alias 'al2023@latest': with an alias, amiFamily must be "
        "'AL2023' or 'Custom'",
    ),
    (
        "no-subnet-terms",
        lambda d: d["spec"].__setitem__("subnetSelectorTerms", []),
        "spec.subnetSelectorTerms: List should have at least 1 item after validation, not 0",
    ),
    (
        "subnet-id-and-tags",
        lambda d: d["spec"]["subnetSelectorTerms"][0].__setitem__("id", "subnet-0abc"),
        "spec.subnetSelectorTerms[0].id: 'id' is mutually exclusive, cannot be set with a combination of other fields",
    ),
    (
        "empty-subnet-term",
        lambda d: d["spec"].__setitem__("subnetSelectorTerms", [{}]),
        "spec.subnetSelectorTerms[0]: expected at least one of 'tags' or 'id'",
    ),
    (
        "two-root-volumes",
        lambda d: d["spec"].__setitem__(
            "blockDeviceMappings",
            [
                {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "20Gi", "volumeType": "gp3"}},
                {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": {"volumeSize": "100Gi"}},
            ],
        ),
        "spec.blockDeviceMappings[1].rootVolume: must have only one blockDeviceMappings with rootVolume",
    ),
    (
        "restricted-tag",
        lambda d: d["spec"].__setitem__("tags", {"kubernetes.io/cluster/demo": "owned"}),
        "spec.tags: tag contains a restricted tag 'kubernetes.io/cluster/demo': Karpenter sets it itself",
    ),
    (
        "hop-limit",
        lambda d: d["spec"].__setitem__("metadataOptions", {"httpPutResponseHopLimit": 65}),
        "spec.metadataOptions.httpPutResponseHopLimit: Input should be less than or equal to 64, got 65",
    ),
    (
        "kubelet-bad-reserved-key",
        lambda d: d["spec"].__setitem__("kubelet", {"kubeReserved": {"gpu": "1"}}),
        "spec.kubelet.kubeReserved.gpu: Input should be 'cpu', 'memory', 'ephemeral-storage' or 'pid', got 'gpu'",
    ),
    (
        "kubelet-soft-without-grace",
        lambda d: d["spec"].__setitem__("kubelet", {"evictionSoft": {"memory.available": "500Mi"}}),
        "spec.kubelet.evictionSoftGracePeriod: evictionSoft and evictionSoftGracePeriod must name the same "
        "signals, got ['memory.available'] and []",
    ),
    (
        "kubelet-gc-thresholds",
        lambda d: d["spec"].__setitem__(
            "kubelet", {"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 80}
        ),
        "spec.kubelet.imageGCLowThresholdPercent: imageGCLowThresholdPercent (80) must not exceed "
        "imageGCHighThresholdPercent (50)",
    ),
    (
        "kubelet-max-pods",
        lambda d: d["spec"].__setitem__("kubelet", {"maxPods": -1}),
        "spec.kubelet.maxPods: Input should be greater than or equal to 0, got -1",
    ),
    (
        "ebs-size",
        lambda d: d["spec"].__setitem__("blockDeviceMappings", [{"ebs": {"volumeSize": "20MiB"}}]),
        "spec.blockDeviceMappings[0].ebs.volumeSize: volumeSize must be a whole size in Gi, G, Ti or T, got '20MiB'",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "message"), [c[1:] for c in EC2NODECLASS_CASES], ids=[c[0] for c in EC2NODECLASS_CASES]
)
def test_invalid_ec2nodeclass_names_path_and_reason(mutate: Mutation, message: str) -> None:
    doc = ec2nodeclass()
    mutate(doc)
    with pytest.raises(NodewrightValidationError) as info:
        parse_ec2nodeclass(doc)
    assert str(info.value) == message


def test_ec2nodeclass_defaults_and_full_spec() -> None:
    doc = ec2nodeclass()
    doc["spec"].update(
        {
            "amiFamily": "AL2023",
            "kubelet": {
                "maxPods": 110,
                "kubeReserved": {"cpu": "100m", "memory": "500Mi"},
                "evictionHard": {"memory.available": "5%"},
                "evictionSoft": {"memory.available": "500Mi"},
                "evictionSoftGracePeriod": {"memory.available": "1m"},
                "clusterDNS": ["10.100.0.10"],
            },
            "blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": "50Gi", "volumeType": "gp3",
                                                                         "encrypted": True, "kmsKeyID": "k"}}
            ],
            "associatePublicIPAddress": False,
            "detailedMonitoring": True,
            "tags": {"team": "web"},
        }
    )
    nodeclass = parse_ec2nodeclass(doc)
    assert nodeclass.spec.metadata_options.to_manifest() == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }
    manifest = nodeclass.to_manifest()
    assert manifest["spec"]["kubelet"]["clusterDNS"] == ["10.100.0.10"]
    assert manifest["spec"]["blockDeviceMappings"][0]["ebs"]["kmsKeyID"] == "k"
    assert manifest["spec"]["associatePublicIPAddress"] is False
    assert nodeclass.spec.kubelet is not None and nodeclass.spec.kubelet.max_pods == 110


def test_nodeclaim_round_trip_and_status() -> None:
    claim = parse_nodeclaim(nodeclaim())
    assert claim.nodepool == "general"
    assert claim.status is not None
    assert claim.status.provider_id == "aws:///us-east-1a/i-0123456789abcdef0"
    assert claim.status.is_true(labels.CONDITION_READY)
    assert not claim.status.is_true(labels.CONDITION_DRIFTED)
    # The nodepool label is allowed in a NodeClaim's requirements (only NodePools restrict it).
    assert claim.spec.requirements[0].key == labels.NODEPOOL
    assert claim.spec.expire_after == "720h"
    manifest = claim.to_manifest()
    assert manifest["status"]["imageID"] == "ami-0123456789abcdef0"
    assert parse_nodeclaim(manifest) == claim


def test_nodeclaim_hostname_requirement_rejected() -> None:
    doc = nodeclaim()
    doc["spec"]["requirements"].append({"key": "kubernetes.io/hostname", "operator": "Exists"})
    with pytest.raises(NodewrightValidationError) as info:
        parse_nodeclaim(doc)
    assert info.value.path == "spec.requirements[2].key"


def test_wrong_kind_and_non_mapping() -> None:
    with pytest.raises(NodewrightValidationError, match=r"^kind: expected 'NodePool', got 'EC2NodeClass'$"):
        parse_nodepool(ec2nodeclass())
    with pytest.raises(NodewrightValidationError, match=r"^expected a NodePool mapping, got list$"):
        parse_nodepool([])  # type: ignore[arg-type]


def test_load_manifests_skips_empty_documents_and_names_bad_ones() -> None:
    text = "---\n# only a comment\n---\nkind: A\n---\n\n---\nkind: B\n...\n"
    assert load_manifests(text) == [{"kind": "A"}, {"kind": "B"}]
    with pytest.raises(NodewrightValidationError) as info:
        load_manifests("kind: A\n---\nkind: B\n---\nkind: [C\n")
    assert info.value.path == "documents[2]"
    assert info.value.reason.startswith("invalid YAML at line 2 of the document")
    with pytest.raises(NodewrightValidationError, match=r"^documents\[1\]: expected a Kubernetes object"):
        load_manifests("kind: A\n---\n- a\n- b\n")


def test_parse_documents_prefixes_document_index() -> None:
    bad = nodepool()
    bad["spec"]["weight"] = 0
    with pytest.raises(NodewrightValidationError) as info:
        parse_documents([ec2nodeclass(), bad])
    assert str(info.value) == (
        "documents[1].spec.weight: Input should be greater than or equal to 1, got 0 (in NodePool 'general')"
    )


def test_cli_prints_one_line_and_exits_2(tmp_path: Any) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: x}\nspec:\n"
        "  providerRef: {name: d}\n  requirements:\n"
        "  - {key: example.com/a, operator: Exists}\n"
        "  - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: [abc]}\n"
    )
    result = CliRunner().invoke(cli, ["convert", "-f", str(path)])
    assert result.exit_code == 2
    assert result.output == (
        f"error: {path}#documents[0].spec.template.spec.requirements[1].values: Gt needs one integer, "
        "got 'abc' (in the v1 NodePool converted from Provisioner 'x')\n"
    )


def test_cli_missing_file_exits_2(tmp_path: Any) -> None:
    result = CliRunner().invoke(cli, ["convert", "-f", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert result.output == f"error: {tmp_path / 'nope.yaml'}: cannot read file: No such file or directory\n"


def test_restricted_label_rules() -> None:
    assert labels.is_restricted_label("example.com/team") is None
    assert labels.is_restricted_label("team") is None
    assert labels.is_restricted_label("node.kubernetes.io/lifecycle") is None
    assert labels.is_restricted_label("kops.k8s.io/instancegroup") is None
    assert labels.is_restricted_label(labels.INSTANCE_FAMILY) is None
    assert labels.is_restricted_label("karpenter.sh/nodepool") is not None
    assert labels.is_restricted_label("kubernetes.io/hostname") is not None
    # Karpenter v1.9+ allows the kubernetes.io and k8s.io domains and their subdomains.
    for key in ("kubernetes.io/test", "k8s.io/test", "sub.kubernetes.io/thing", "subdomain.k8s.io/test"):
        assert labels.is_restricted_label(key) is None, key
    assert labels.is_restricted_label("karpenter.sh/custom") is not None
    assert labels.is_restricted_label("sub.karpenter.sh/custom") is not None
    assert labels.is_restricted_label("karpenter.k8s.aws/custom") is not None


def test_convert_rejects_an_invalid_v1_nodepool_it_would_pass_through() -> None:
    """A v1 NodePool needs no conversion, but `convert` must not echo it back when it is invalid."""
    from nodewright.api import convert_documents

    bad = nodepool()
    bad["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["abc"]}
    ]
    with pytest.raises(NodewrightValidationError) as info:
        convert_documents([bad])
    assert str(info.value) == (
        "documents[0].spec.template.spec.requirements[0].values: Gt needs one integer, got 'abc'"
        " (in NodePool 'general')"
    )
