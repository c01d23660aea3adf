"""The field reports' manifests convert to hand-written v1 documents (exact equality)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from nodewright.api import convert_documents, load_manifests, parse_documents
from nodewright.cli import cli

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "tests" / "fixtures" / "examples"
EXPECTED = Path(__file__).parent / "expected"
NAMES = [
    "provisioner-v1alpha5-default.yaml",
    "team1-alternative-provisioner.yaml",
    "nodepools-v1beta1-priority.yaml",
]


@pytest.mark.parametrize("name", NAMES)
def test_example_converts_to_expected_v1(name: str) -> None:
    source = load_manifests((EXAMPLES / name).read_text())
    expected = load_manifests((EXPECTED / name).read_text())
    assert convert_documents(source) == expected


@pytest.mark.parametrize("name", NAMES)
def test_cli_convert_prints_expected_v1(name: str) -> None:
    result = CliRunner().invoke(cli, ["convert", "-f", str(EXAMPLES / name)])
    assert result.exit_code == 0, result.output
    assert list(yaml.safe_load_all(result.stdout)) == load_manifests((EXPECTED / name).read_text())


def test_cli_convert_reads_several_files_in_order() -> None:
    result = CliRunner().invoke(
        cli, ["convert", "-f", str(EXAMPLES / NAMES[0]), "-f", str(EXAMPLES / NAMES[1])]
    )
    assert result.exit_code == 0, result.output
    kinds = [(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(result.stdout)]
    assert kinds == [
        ("NodePool", "default"),
        ("NodePool", "compute"),
        ("NodePool", "team1"),
        ("EC2NodeClass", "team1"),
        ("Deployment", "inflate-team1"),
    ]


def test_default_provisioner_in_detail() -> None:
    """The issue's example: WhenEmpty/30s, limits cpu 1000 / memory 1000Gi, EC2NodeClass default."""
    docs = load_manifests((EXAMPLES / NAMES[0]).read_text())
    pool = parse_documents(docs).nodepools[0]
    assert pool.name == "default"
    assert pool.spec.disruption.consolidation_policy == "WhenEmpty"
    assert pool.spec.disruption.consolidate_after == "30s"
    assert pool.spec.limits == {"cpu": "1000", "memory": "1000Gi"}
    ref = pool.spec.template.spec.node_class_ref
    assert (ref.group, ref.kind, ref.name) == ("karpenter.k8s.aws", "EC2NodeClass", "default")
    # Defaults filled in by the model, as the API server would.
    assert [b.nodes for b in pool.spec.disruption.budgets] == ["10%"]


def test_team1_nodeclass_in_detail() -> None:
    docs = load_manifests((EXAMPLES / NAMES[1]).read_text())
    objects = parse_documents(docs)
    nodeclass = objects.ec2nodeclasses[0]
    assert [t.alias for t in nodeclass.spec.ami_selector_terms] == ["bottlerocket@latest"]
    assert nodeclass.spec.resolved_ami_family == "Bottlerocket"
    assert nodeclass.spec.user_data == "[settings.kubernetes]\nkube-api-qps = 30\n"
    assert nodeclass.spec.metadata_options.http_tokens == "required"
    assert nodeclass.spec.metadata_options.http_put_response_hop_limit == 1
    assert [d["kind"] for d in objects.others] == ["Deployment"]


def test_cli_convert_warns_on_stderr_when_it_writes_the_placeholder_role() -> None:
    """team1's AWSNodeTemplate names no role: the output carries the placeholder and stderr says so."""
    result = CliRunner().invoke(cli, ["convert", "-f", str(EXAMPLES / "team1-alternative-provisioner.yaml")])
    assert result.exit_code == 0
    assert result.stderr == (
        "warning: EC2NodeClass 'team1' named no node role; wrote the placeholder "
        "'KarpenterNodeRole-${CLUSTER_NAME}': substitute it, or convert again with --node-role or --instance-profile\n"
    )
    quiet = CliRunner().invoke(
        cli, ["convert", "-f", str(EXAMPLES / "team1-alternative-provisioner.yaml"), "--node-role", "nodes"]
    )
    assert quiet.exit_code == 0 and quiet.stderr == ""
