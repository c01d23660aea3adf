"""Every manifest of Karpenter's ``examples/v1/`` (aws/karpenter-provider-aws, copied as fixtures) drops into
``nodewright simulate`` unchanged: five 1-vCPU / 1.5Gi pods (Windows pods for the Windows pools) get nodes of the
example's pool, with no warning (Windows: one, that ``run`` cannot boot Windows yet) and no error -- except where
Karpenter's own CRD rejects the example."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from nodewright.cli import cli

EXAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "karpenter-examples-v1"
FILES = sorted(p.name for p in EXAMPLES.glob("*.yaml"))
#: Examples Karpenter's own v1 CRDs reject, with the line nodewright prints.
REJECTED = {
    "windows-custom-userdata.yaml": "#documents[0].spec.template.spec.nodeClassRef.group: String should match "
                                    "pattern '^[^/]*$', got 'karpenter.k8s.aws/v1' (in NodePool 'windows2022')",
}


def _workload(os: str) -> str:
    return ("---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: inflate}\nspec:\n  replicas: 5\n"
            f"  template:\n    spec:\n      nodeSelector: {{kubernetes.io/os: {os}}}\n"
            "      tolerations: [{operator: Exists}]\n"
            "      containers: [{name: c, image: x, resources: {requests: {cpu: '1', memory: 1536Mi}}}]\n")


def test_all_22_examples_are_here() -> None:
    assert len(FILES) == 22 and "windows-2025.yaml" in FILES and "custom-family-with-alias.yaml" in FILES


@pytest.mark.parametrize("name", FILES)
def test_example_simulates(name: str, tmp_path: Path) -> None:
    text = (EXAMPLES / name).read_text()
    docs = [d for d in yaml.safe_load_all(text) if d]
    pools = {d["metadata"]["name"]: d for d in docs if d["kind"] == "NodePool"}
    windows = any(r["key"] == "kubernetes.io/os" and r.get("values") == ["windows"]
                  for p in pools.values() for r in p["spec"]["template"]["spec"]["requirements"])
    path = tmp_path / name
    path.write_text(text + "\n" + _workload("windows" if windows else "linux"))
    out = CliRunner().invoke(cli, ["simulate", "-f", str(path), "-o", "json"])
    if name in REJECTED:
        assert out.exit_code == 2 and out.stderr == f"error: {path}{REJECTED[name]}\n"
        return
    assert out.exit_code == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    if windows:  # the one thing nodewright says about them: `run` cannot boot Windows yet
        assert len(warnings) == 1 and "nodewright run cannot launch Windows nodes yet" in warnings[0]
    else:
        assert warnings == []
    decision = json.loads(out.stdout)
    assert decision["unschedulable"] == []
    claims = decision["nodeclaims"]
    assert sum(len(c["pods"]) for c in claims) == 5
    for claim in claims:
        assert claim["nodepool"] in pools
        assert claim["labels"]["kubernetes.io/os"] == ("windows" if windows else "linux")
        if windows:
            assert claim["arch"] == "amd64" and claim["labels"]["node.kubernetes.io/windows-build"] == {
                "windows-2019.yaml": "10.0.17763", "windows-2022.yaml": "10.0.20348", "windows-2025.yaml": "10.0.26100",
            }[name]
        for req in pools[claim["nodepool"]]["spec"]["template"]["spec"]["requirements"]:
            if req["operator"] == "In" and req["key"] in claim["labels"]:
                assert claim["labels"][req["key"]] in req["values"], (req, claim["labels"])
            if req["key"] == "karpenter.sh/capacity-type":
                assert claim["capacity_type"] in req["values"]


WORKLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "karpenter-examples-workloads"
WORKLOAD_FILES = sorted(p.name for p in WORKLOADS.glob("*.yaml"))
#: Workloads whose pods need accelerators the general-purpose pool (instance-category c, m, r) does not offer.
NEEDS_ACCELERATORS = {"gpu-amd.yaml", "gpu-nvidia.yaml", "neuron.yaml"}
#: The examples/v1 NodePool each workload is scheduled beside (default: general-purpose.yaml).
POOL_FOR = {"arm64.yaml": "multiple-arch.yaml", "spot.yaml": "spot.yaml"}


def test_all_11_workload_examples_are_here() -> None:
    assert len(WORKLOAD_FILES) == 11 and "spread-hostname-zone.yaml" in WORKLOAD_FILES


@pytest.mark.parametrize("name", WORKLOAD_FILES)
def test_workload_example_simulates_beside_an_example_pool(name: str, tmp_path: Path) -> None:
    """Each of Karpenter's workload examples (replicas 0 raised to 3, else unchanged) beside an examples/v1 NodePool
    (:data:`POOL_FOR`): accepted with no warning; every pod gets a node unless it needs an accelerator the pool
    lacks."""
    docs = [d for d in yaml.safe_load_all((WORKLOADS / name).read_text()) if d]
    for doc in docs:
        if doc["kind"] == "Deployment" and not doc["spec"].get("replicas"):
            doc["spec"]["replicas"] = 3
    path = tmp_path / name
    pool = EXAMPLES / POOL_FOR.get(name, "general-purpose.yaml")
    path.write_text(pool.read_text() + "\n---\n" + yaml.safe_dump_all(docs))
    out = CliRunner().invoke(cli, ["simulate", "-f", str(path), "-o", "json"])
    assert out.exit_code == 0, out.stderr
    assert [line for line in out.stderr.splitlines() if line.startswith(("warning:", "error:"))] == []
    decision = json.loads(out.stdout)
    pods = sum(d["spec"]["replicas"] for d in docs if d["kind"] == "Deployment")
    placed = sum(len(c["pods"]) for c in decision["nodeclaims"])
    if name in NEEDS_ACCELERATORS:
        assert placed == 0 and len(decision["unschedulable"]) == pods
    else:
        assert placed == pods and decision["unschedulable"] == []
