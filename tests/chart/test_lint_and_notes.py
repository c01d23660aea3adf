"""`helm lint --strict` on defaults and every example values file; NOTES.txt after install."""

from __future__ import annotations

import pytest
from chart_helpers import CHART, render_chart

pytestmark = pytest.mark.chart

VARIANTS = list(render_chart.variants().items())


def test_every_example_values_file_is_a_variant():
    assert [name for name, _ in VARIANTS] == ["default", "bottlerocket", "custom-pools", "minimal", "production"]


@pytest.mark.parametrize(("name", "values"), VARIANTS, ids=[name for name, _ in VARIANTS])
def test_helm_lint_strict(helm, name, values):
    args = ["lint", "--strict", str(CHART)]
    for path in values:
        args += ["--values", str(path)]
    out = render_chart.run_helm(args)
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    assert "[WARNING]" not in out and "[ERROR]" not in out


def _notes(*values_args: str) -> str:
    out = render_chart.run_helm(["install", "nodewright", str(CHART), "--dry-run=client", *values_args])
    return out.split("NOTES:\n", 1)[1]


def test_notes_for_a_configured_release(helm):
    notes = _notes("--values", str(render_chart.EXAMPLE_VALUES / "minimal.yaml"))
    assert "installed in namespace kube-system as release nodewright" in notes
    assert "NodePools from values: low-spot, platform, service." in notes
    assert 'untainted "platform" pool' in notes
    assert "--skip-crds" in notes
    assert "WARNING" not in notes


def test_notes_warn_about_missing_settings(helm):
    notes = _notes()
    assert "NodePools from values: none" in notes
    assert "WARNING: settings.clusterName is empty" in notes
    assert "WARNING: serviceAccount.annotations has no eks.amazonaws.com/role-arn" in notes
    assert "platform" not in notes.split("NodePools from values:")[1].split("Metrics:")[0]


def test_notes_name_the_fallback_node_role(helm):
    notes = _notes("--set", "settings.clusterName=blue", "--set",
                   "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/c")
    assert 'the EC2NodeClasses use the node role "blue-nodewright-node"' in notes
    assert "WARNING" not in notes
