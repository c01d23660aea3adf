"""NodeOverlays through ``simulate -f`` (the provisioner's batch on the simulated cloud) and through consolidation:
the overlaid price chooses the type and prices the launch, overlay capacity makes an extended-resource pod
schedulable, and the gate off leaves decisions as without overlays (one warning)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nodewright.cli import cli

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5, t3]}
"""


def _deployment(requests: str) -> str:
    return f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: app}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: a}}}}
  template:
    metadata: {{labels: {{app: a}}}}
    spec:
      containers:
      - name: c
        image: x
        resources: {{requests: {requests}, limits: {requests}}}
"""


T3_EXPENSIVE = """---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: t3-expensive}
spec:
  requirements:
  - {key: karpenter.k8s.aws/instance-family, operator: In, values: [t3]}
  price: "9.99"
"""

FUSE_ON_M5 = """---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fuse}
spec:
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}
  capacity:
    smarter-devices/fuse: "2"
"""


def _simulate(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch, gate: bool = True) -> dict:
    monkeypatch.setenv("FEATURE_GATES", f"NodeOverlay={'true' if gate else 'false'}")
    path = tmp_path / "in.yaml"
    path.write_text(text)
    out = CliRunner().invoke(cli, ["simulate", "-f", str(path), "--output", "json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout[out.stdout.index("{"):])


def test_overlay_price_makes_the_cheapest_type_expensive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workload = POOL + _deployment("{cpu: '1', memory: 1Gi}")
    before = _simulate(tmp_path, workload, monkeypatch)
    assert (before["nodeclaims"][0]["instance_type"], before["total_price_per_hour"]) == ("t3.small", 0.0208)
    after = _simulate(tmp_path, workload + T3_EXPENSIVE, monkeypatch)
    claim = after["nodeclaims"][0]
    # Without t3 (9.99/h each now) the cheapest fit is c5.large at its list price.
    assert (claim["instance_type"], claim["price_per_hour"], after["total_price_per_hour"]) == ("c5.large", 0.085, 0.085)
    # The candidates are ranked by the overlaid price: every t3 last.
    assert claim["instance_types"][:2] == ["c5.large", "m5.large"]
    assert sorted(claim["instance_types"][-5:]) == ["t3.2xlarge", "t3.large", "t3.medium", "t3.small", "t3.xlarge"]


def test_gate_off_ignores_overlays_with_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decision = _simulate(tmp_path, POOL + _deployment("{cpu: '1', memory: 1Gi}") + T3_EXPENSIVE, monkeypatch, False)
    assert decision["nodeclaims"][0]["instance_type"] == "t3.small"


def test_overlay_capacity_schedules_an_extended_resource_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workload = POOL + _deployment("{cpu: '1', memory: 1Gi, smarter-devices/fuse: '1'}")
    before = _simulate(tmp_path, workload, monkeypatch)
    assert before["nodeclaims"] == [] and len(before["unschedulable"]) == 1
    after = _simulate(tmp_path, workload + FUSE_ON_M5, monkeypatch)
    assert after["unschedulable"] == []
    (claim,) = after["nodeclaims"]
    assert (claim["instance_type"], claim["instance_types"]) == ("m5.xlarge", ["m5.xlarge"])
    assert claim["price_per_hour"] == 0.192
