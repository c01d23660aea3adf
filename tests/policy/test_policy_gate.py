"""The gate script: its pure parts directly, and two real checkov runs (marked ``policy``).

The checkov runs: (1) the real synthesized stacks, the real rendered chart and the real Dockerfile pass
with zero failures and every CKV_NW check evaluated something; (2) one run over every regression variant
(each in a directory of its own, mutated from the real outputs) plus the hand-written fixture as a
control: the gate exits 1, each variant is caught by its exact check id, the control by nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nw_catalog
import pytest
import yaml

from . import policy_mutations as mut
from .conftest import FIXTURES, ROOT, write_docs

sys.path.insert(0, str(ROOT / "scripts"))
import policy_gate as gate  # noqa: E402


def result(check_id: str, resource: str, file: str, outcome: str = "failed", framework: str = "kubernetes") -> gate.Result:
    return gate.Result(framework, check_id, "", outcome, resource, file, [1, 2])


# --------------------------------------------------------------------------------------------
# Pure parts
# --------------------------------------------------------------------------------------------


def test_repository_skips_all_have_reasons_and_none_skips_our_checks():
    skips = gate.load_skips(gate.SKIPS)
    assert {s.check for s in skips} == {"CKV2_AWS_5", "CKV_K8S_38", "CKV_K8S_43", "CKV_K8S_15", "CKV_DOCKER_7"}
    assert all(len(s.reason) > 80 for s in skips)


@pytest.mark.parametrize(("entry", "error"), [
    ({"check": "CKV_NW_1", "resource": "*", "reason": "because we would rather not fix it today"}, "cannot be skipped"),
    ({"check": "CKV_AWS_1", "resource": "*", "reason": "short"}, "needs a 'reason'"),
    ({"check": "CKV_AWS_1", "reason": "a reason that is long enough to count"}, "needs 'check' and 'resource'"),
])
def test_invalid_skips_stop_the_gate(tmp_path, entry, error):
    path = tmp_path / "skips.toml"
    path.write_text("[[skip]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in entry.items()))
    with pytest.raises(gate.GateError, match=error):
        gate.load_skips(path)


def test_skips_match_check_resource_and_file_and_unused_ones_are_reported():
    skip = gate.Skip("CKV_K8S_43", "Deployment.*.nodewright", "reason " * 5, "*chart/[!p]*.yaml")
    unused = gate.Skip("CKV_K8S_99", "*", "reason " * 5)
    results = [
        result("CKV_K8S_43", "Deployment.kube-system.nodewright", "out/chart/default.yaml"),
        result("CKV_K8S_43", "Deployment.kube-system.nodewright", "out/chart/production.yaml"),
        result("CKV_K8S_43", "Deployment.kube-system.other", "out/chart/default.yaml"),
    ]
    assert gate.apply_skips(results, [skip, unused]) == [unused]
    assert [r.outcome for r in results] == ["skipped", "failed", "failed"]
    assert results[0].skip_reason == skip.reason


def test_coverage_gaps_name_the_checks_that_saw_nothing():
    seen = [result(cid, "x", "f", "passed") for cid in nw_catalog.CHECKS if cid != "CKV_NW_1"]
    gaps = gate.coverage_gaps(seen, ["terraform_json", "kubernetes", "dockerfile"])
    assert len(gaps) == 1 and gaps[0].startswith("CKV_NW_1 evaluated no object")
    only_k8s = [result("CKV_NW_11", "x", "f", "passed")]
    assert {g.split()[0] for g in gate.coverage_gaps(only_k8s, ["kubernetes"])} == {
        "CKV_NW_8", "CKV_NW_9", "CKV_NW_10", "CKV_NW_12", "CKV_NW_13", "CKV_NW_14"}


def test_terraform_addresses_are_rebuilt_from_the_enclosing_block():
    path = FIXTURES / "stacks" / "identity" / "cdk.tf.json"
    lines = path.read_text().splitlines()
    policy_line = next(i for i, line in enumerate(lines, 1) if line.strip() == '"aws_iam_policy": {') + 1
    assert gate.tf_address(path, policy_line, "resource.controller") == "aws_iam_policy.controller"
    assert gate.tf_address(path, policy_line, "aws_iam_policy.controller") == "aws_iam_policy.controller"


def test_results_table_and_failure_text():
    report = {"check_type": "kubernetes", "summary": {"parsing_errors": 1}, "results": {
        "passed_checks": [{"check_id": "CKV_K8S_1", "resource": "Pod.a.b", "file_abs_path": str(ROOT / "x.yaml"),
                           "file_line_range": [1, 9]}],
        "failed_checks": [{"check_id": "CKV_NW_9", "check_name": "spot", "resource": "NodePool.default.low",
                           "file_abs_path": str(ROOT / "out/chart/x.yaml"), "file_line_range": [3, 30]}],
        "skipped_checks": []}}
    results, parsing = gate.to_results([report])
    assert parsing == {"kubernetes": 1}
    assert gate.table(results, ["kubernetes"]).splitlines() == [
        "framework         passed  failed  skipped",
        "kubernetes" + " " * 13 + "1       1        0",
        "total" + " " * 18 + "1       1        0"]
    assert gate.failure_text(results[1]).splitlines() == [
        "FAILED CKV_NW_9  NodePool.default.low  out/chart/x.yaml:3-30", "    spot",
        f"    fix: {nw_catalog.CHECKS['CKV_NW_9'].fix}"]


# --------------------------------------------------------------------------------------------
# Real checkov runs
# --------------------------------------------------------------------------------------------


def run_gate(tmp_path: Path, *args: str) -> tuple[int, str, dict]:
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "policy_gate.py"), "--no-build",
                           "--report", str(report), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    body = json.loads(report.read_text()) if report.is_file() else {}
    return proc.returncode, proc.stdout + proc.stderr, body


@pytest.mark.policy
def test_real_stacks_chart_and_dockerfile_pass_the_gate(real_outputs, tmp_path):
    code, output, report = run_gate(tmp_path, "--stacks-dir", str(real_outputs["stacks"]),
                                    "--manifests-dir", str(real_outputs["chart"]),
                                    "--dockerfile", str(ROOT / "Dockerfile"))
    assert code == 0, output
    assert report["verdict"] == "passed" and report["counts"]["failed"] == 0 and report["gate_problems"] == []
    evaluated = {cid for cid, n in report["nodewright_checks"].items() if n["passed"]}
    assert evaluated == set(nw_catalog.CHECKS)
    assert "policy gate passed: 0 failed check(s), 0 gate problem(s)" in output


@pytest.mark.policy
def test_every_regression_variant_is_caught_by_its_check(real_outputs, tmp_path):
    real_docs = {p.parent.name: json.loads(p.read_text()) for p in real_outputs["stacks"].glob("*/cdk.tf.json")}
    args: list[str] = ["--stacks-dir", str(FIXTURES / "stacks"), "--dockerfile", str(ROOT / "Dockerfile")]
    for name, (mutate, _) in mut.TF_VARIANTS.items():
        docs = json.loads(json.dumps(real_docs))
        mutate(docs)
        changed = {stack: doc for stack, doc in docs.items() if doc != real_docs[stack]}  # scan less, same verdict
        args += ["--stacks-dir", str(write_docs(changed, tmp_path / name / "stacks"))]
    for name, mutate_control in mut.TF_CONTROLS.items():  # reasonable configurations: nothing may fail
        docs = json.loads(json.dumps(real_docs))
        mutate_control(docs)
        changed = {stack: doc for stack, doc in docs.items() if doc != real_docs[stack]}
        args += ["--stacks-dir", str(write_docs(changed, tmp_path / f"control-{name}" / "stacks"))]
    # minimal.yaml is what the stacks install: its ServiceAccount is annotated with the stacks' controller role.
    chart = real_outputs["chart"] / "minimal.yaml"
    assert "NodePool" in chart.read_text() and "spot" in chart.read_text()
    k8s_cases = {**{n: f for n, (f, _) in mut.K8S_VARIANTS.items()},
                 **{f"control-{n}": f for n, f in mut.K8S_CONTROLS.items()}}
    for name, mutate in k8s_cases.items():
        objs = [d for d in yaml.safe_load_all(chart.read_text()) if d]
        mutate(objs)
        (tmp_path / name / "chart").mkdir(parents=True)
        (tmp_path / name / "chart" / chart.name).write_text(yaml.safe_dump_all(objs))
        args += ["--manifests-dir", str(tmp_path / name / "chart")]

    code, output, report = run_gate(tmp_path, *args)
    assert code == 1, output
    caught: dict[str, set[str]] = {}
    for failure in report["failures"]:
        if failure["check_id"].startswith("CKV_NW_"):
            variant = Path(failure["file"]).relative_to(tmp_path).parts[0] if failure["file"].startswith(str(tmp_path)) else "control"
            caught.setdefault(variant, set()).add(failure["check_id"])
    expected = {name: check for name, (_, check) in {**mut.TF_VARIANTS, **mut.K8S_VARIANTS}.items()}
    assert not [v for v in caught if v.startswith("control")], output
    assert set(caught) == set(expected)
    for name, check_id in expected.items():
        assert check_id in caught[name], (name, caught[name])
    assert "FAILED CKV_NW_1" in output and "the first field report's failure" in output
