"""CRDs generated from the models: committed files match, the CRDs are valid Kubernetes objects
with structural schemas, and the schemas accept the expected v1 fixtures and reject bad input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from click.testing import CliRunner

from nodewright.api import crds, load_manifests
from nodewright.cli import cli

from .helpers import ec2nodeclass, nodeclaim, nodepool

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "helm" / "nodewright" / "crds"
EXPECTED = Path(__file__).parent / "expected"


@pytest.mark.parametrize("spec", crds.CRD_SPECS, ids=lambda s: s.kind)
def test_committed_crd_matches_models(spec: crds.CRDSpec) -> None:
    path = CRD_DIR / spec.filename
    assert path.exists(), f"{path} missing: run `make crds`"
    assert path.read_text() == crds.render_crd(crds.generate_crd(spec)), f"{path} drifted: run `make crds`"


def test_no_stray_files_in_crd_dir() -> None:
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(s.filename for s in crds.CRD_SPECS)


@pytest.mark.parametrize("crd", crds.generate_crds(), ids=lambda c: c["metadata"]["name"])
def test_crd_is_a_valid_kubernetes_object(crd: dict[str, Any]) -> None:
    kubernetes_validate.validate(crd, "1.31", strict=True)


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        out.append((path, node))
        for key in ("properties",):
            for name, child in node.get(key, {}).items():
                out += _walk(child, f"{path}.{name}")
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                out += _walk(node[key], f"{path}[{key}]")
    return out


@pytest.mark.parametrize("crd", crds.generate_crds(), ids=lambda c: c["metadata"]["name"])
def test_schema_is_structural(crd: dict[str, Any]) -> None:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert "$ref" not in node and "title" not in node and "propertyNames" not in node, path
        assert node.get("additionalProperties") is not False, path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
        else:
            assert "type" in node, f"{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path


def _schema(kind: str) -> dict[str, Any]:
    crd = next(c for c in crds.generate_crds() if c["spec"]["names"]["kind"] == kind)
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("name", sorted(p.name for p in EXPECTED.glob("*.yaml")))
def test_expected_fixtures_satisfy_crd_schemas(name: str) -> None:
    for doc in load_manifests((EXPECTED / name).read_text()):
        if doc["kind"] in ("NodePool", "EC2NodeClass"):
            jsonschema.validate(doc, _schema(doc["kind"]))


def test_helper_objects_satisfy_crd_schemas() -> None:
    jsonschema.validate(nodepool(), _schema("NodePool"))
    jsonschema.validate(ec2nodeclass(), _schema("EC2NodeClass"))
    jsonschema.validate(nodeclaim(), _schema("NodeClaim"))


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("NodePool", ("spec", "weight"), 101),
        ("NodePool", ("spec", "disruption", "consolidateAfter"), "5 minutes"),
        ("NodePool", ("spec", "disruption", "budgets"), [{"nodes": "101%"}]),
        ("NodePool", ("spec", "template", "spec", "requirements"), [{"key": "a", "operator": "Like"}]),
        ("NodePool", ("spec", "limits", "cpu"), "lots"),
        ("EC2NodeClass", ("spec", "amiSelectorTerms"), []),
        ("EC2NodeClass", ("spec", "metadataOptions", "httpTokens"), "sometimes"),
    ],
)
def test_crd_schema_rejects_what_the_models_reject(kind: str, path: tuple[str, ...], value: Any) -> None:
    doc = nodepool() if kind == "NodePool" else ec2nodeclass()
    target = doc
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, _schema(kind))


def test_printer_columns_like_karpenter() -> None:
    columns = {c["spec"]["names"]["kind"]: [(col["name"], col.get("priority", 0))
                                            for col in c["spec"]["versions"][0]["additionalPrinterColumns"]]
               for c in crds.generate_crds()}
    assert [n for n, p in columns["NodePool"] if p == 0] == ["NodeClass", "Nodes", "Ready", "Age"]
    # -o wide: Karpenter's, plus nodewright's packing target (status.targetUtilization).
    assert [n for n, p in columns["NodePool"] if p == 1] == ["Weight", "CPU", "Memory", "Target"]
    assert [n for n, p in columns["NodeClaim"] if p == 0] == ["Type", "Capacity", "Zone", "Node", "Ready", "Age"]
    assert [n for n, p in columns["EC2NodeClass"] if p == 0] == ["Ready", "Age"]


def test_defaults_and_cel_rules_are_in_the_schema() -> None:
    spec = _schema("NodePool")["properties"]["spec"]
    assert spec["properties"]["disruption"]["default"] == {"consolidateAfter": "0s"}
    disruption = spec["properties"]["disruption"]["properties"]
    assert disruption["consolidationPolicy"]["default"] == "WhenEmptyOrUnderutilized"
    assert disruption["budgets"]["default"] == [{"nodes": "10%"}]
    assert disruption["budgets"]["maxItems"] == 50
    assert disruption["budgets"]["items"]["x-kubernetes-validations"] == [
        {"message": "'schedule' must be set with 'duration'", "rule": "has(self.schedule) == has(self.duration)"}
    ]
    tspec = spec["properties"]["template"]["properties"]["spec"]
    assert tspec["properties"]["expireAfter"]["default"] == "720h"
    assert tspec["properties"]["requirements"]["maxItems"] == 100
    ec2 = _schema("EC2NodeClass")["properties"]["spec"]
    assert ec2["properties"]["metadataOptions"]["default"]["httpPutResponseHopLimit"] == 1
    assert "must specify exactly one of ['role', 'instanceProfile']" in [
        v["message"] for v in ec2["x-kubernetes-validations"]
    ]


def test_cli_crds_prints_and_writes(tmp_path: Path) -> None:
    printed = CliRunner().invoke(cli, ["crds"])
    assert printed.exit_code == 0
    assert [d["metadata"]["name"] for d in load_manifests(printed.output)] == [
        "nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws",
        "capacitybuffers.autoscaling.x-k8s.io", "nodeoverlays.karpenter.sh"]
    written = CliRunner().invoke(cli, ["crds", "--output-dir", str(tmp_path / "crds")])
    assert written.exit_code == 0
    for spec in crds.CRD_SPECS:
        assert (tmp_path / "crds" / spec.filename).read_text() == (CRD_DIR / spec.filename).read_text()
