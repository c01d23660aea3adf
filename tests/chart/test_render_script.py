"""scripts/render_chart.py (`make chart`): writes one manifest per variant and says what it wrote."""

from __future__ import annotations

import pytest
import yaml
from chart_helpers import render_chart

pytestmark = pytest.mark.chart


def test_writes_every_variant_with_crds(helm, tmp_path, capsys):
    assert render_chart.main(["--out", str(tmp_path)]) == 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["bottlerocket.yaml", "custom-pools.yaml", "default.yaml", "minimal.yaml", "production.yaml"]
    minimal = [d for d in yaml.safe_load_all((tmp_path / "minimal.yaml").read_text()) if d]
    kinds = sorted(d["kind"] for d in minimal)
    assert kinds.count("CustomResourceDefinition") == 5  # Karpenter's three, NodeOverlay and CapacityBuffer
    assert kinds.count("NodePool") == 3 and kinds.count("EC2NodeClass") == 3
    # incl. 5 CRDs, the two ValidatingAdmissionPolicies (NodePool annotations, the readiness hold's pin) and their
    # bindings, 5 dashboard ConfigMaps
    assert len(minimal) == 29
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5
    minimal_line = next(line for line in lines if "minimal.yaml" in line)
    assert "29 documents" in minimal_line
    assert "CustomResourceDefinition=5" in minimal_line and "NodePool=3" in minimal_line


def test_no_crds_and_single_values_file(helm, tmp_path, capsys):
    values = render_chart.EXAMPLE_VALUES / "custom-pools.yaml"
    assert render_chart.main(["--out", str(tmp_path), "--no-crds", "--values", str(values)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["custom-pools.yaml"]
    out = capsys.readouterr().out
    assert "23 documents" in out and "CustomResourceDefinition" not in out  # 5 dashboard ConfigMaps


def test_helm_failure_exits_1_with_helms_message(helm, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("replicas: two\n")
    assert render_chart.main(["--out", str(tmp_path / "out"), "--values", str(bad)]) == 1
    assert "at '/replicas': got string, want integer" in capsys.readouterr().err


def test_missing_helm_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NODEWRIGHT_HELM", str(tmp_path / "no-helm"))
    assert render_chart.main(["--out", str(tmp_path)]) == 2
    assert "run `make setup`" in capsys.readouterr().err
