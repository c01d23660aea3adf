"""``nodewright diff``: two revisions of NodePools on a snapshot; gates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from nodewright.cli import cli
from tests.unit.whatif.cluster import nodeclass, nodepool

REPO = Path(__file__).parents[3]


def manifest(doc: dict[str, Any]) -> dict[str, Any]:
    """What a GitOps repository holds: no status, no server metadata."""
    return {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "metadata": {"name": doc["metadata"]["name"]},
            "spec": doc["spec"]}


def revision(path: Path, *docs: dict[str, Any]) -> Path:
    path.mkdir(parents=True)
    (path / "pools.yaml").write_text(yaml.safe_dump_all([manifest(d) for d in docs]))
    return path


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_same_manifests_change_nothing(tmp_path: Path, snapshot_file: Path) -> None:
    base = revision(tmp_path / "a", nodepool(), nodeclass())
    head = revision(tmp_path / "b", nodepool(), nodeclass())
    result = run("diff", "--base", str(base), "--head", str(head), "--snapshot", str(snapshot_file), "-o", "json",
                 "--max-cost-increase", "0%", "--max-evictions", "0")
    assert result.exit_code == 0, result.output
    change = json.loads(result.output)["change"]
    assert (change["price_per_hour"], change["nodes_replaced"], change["pods_evicted"]) == (0.0, 0, 0)


def test_narrower_requirements_drift_every_node(tmp_path: Path, snapshot_file: Path) -> None:
    base = revision(tmp_path / "a", nodepool(), nodeclass())
    head = revision(tmp_path / "b", nodepool(categories=("c",)), nodeclass())
    result = run("diff", "--base", str(base), "--head", str(head), "--snapshot", str(snapshot_file), "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["base"]["instance_types"] == {"c6a.2xlarge": 1, "m5.2xlarge": 1, "m5.large": 1, "m5.xlarge": 2}
    assert doc["head"]["instance_types"] == {"c6a.2xlarge": 1, "c6a.xlarge": 1}
    assert (doc["base"]["price_per_hour"], doc["head"]["price_per_hour"]) == (1.17, 0.459)
    change = doc["change"]
    assert change["nodes_replaced"] == 4 and change["nodes_waiting"] == 2 and change["pods_evicted"] == 4
    assert change["drift_reasons"] == {"RequirementsDrifted": 4}
    assert change["pace"] == "general: 4 at most 4 at a time (1 round(s))"


def test_budget_paces_the_drift(tmp_path: Path, snapshot_file: Path) -> None:
    base = revision(tmp_path / "a", nodepool(), nodeclass())
    head = revision(tmp_path / "b", nodepool(budget="1", categories=("c",)), nodeclass())
    doc = json.loads(run("diff", "--base", str(base), "--head", str(head), "--snapshot", str(snapshot_file),
                         "-o", "json").output)
    assert doc["change"]["rounds"] == 4
    assert doc["change"]["pace"] == "general: 4 at most 1 at a time (4 round(s))"


def test_ami_change_drifts_the_class_nodes_and_the_gates_fail(tmp_path: Path, snapshot_file: Path) -> None:
    base = revision(tmp_path / "a", nodepool(), nodeclass())
    head = revision(tmp_path / "b", nodepool(), nodeclass(ami="al2023@v20260701"))
    result = run("diff", "--base", str(base), "--head", str(head), "--snapshot", str(snapshot_file),
                 "--max-evictions", "3", "--max-cost-increase", "5%")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert "gate: 4 pod(s) evicted, more than --max-evictions 3" in lines
    assert any(line.startswith("drift: nodes replaced") and "4 AMIDrift" in line for line in lines)


def test_scenario_replay_compares_both_revisions(tmp_path: Path) -> None:
    scenario = REPO / "examples" / "scenarios"
    files = sorted(scenario.glob("*.yaml"))
    assert files  # the bundled scenarios
    base = revision(tmp_path / "a", nodepool(), nodeclass())
    head = revision(tmp_path / "b", nodepool(categories=("c",)), nodeclass())
    small = tmp_path / "s.yaml"
    small.write_text(yaml.safe_dump({
        "apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "tiny"},
        "spec": {"duration": "10m", "region": "us-west-2", "manifests": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
             "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
                 "metadata": {"labels": {"app": "web"}},
                 "spec": {"containers": [{"name": "c", "image": "x",
                                          "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}]}}))
    result = run("diff", "--base", str(base), "--head", str(head), "--scenario", str(small), "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["evaluated_on"] == {"scenario": str(small)}
    assert doc["base"]["pending_pods"] == 0 and doc["head"]["pending_pods"] == 0
    assert doc["base"]["price_per_hour"] > 0 and doc["head"]["price_per_hour"] > 0
    assert set(doc["change"]) >= {"price_per_hour", "nodes", "pods_evicted"}


def test_bad_inputs_are_one_line(tmp_path: Path, snapshot_file: Path) -> None:
    base = revision(tmp_path / "a", nodepool(), nodeclass())
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("diff", "--base", str(base), "--head", str(empty), "--snapshot", str(snapshot_file))
    assert (result.exit_code, result.output.splitlines()) == (2, [
        f"error: {empty}: no *.yaml, *.yml or *.json manifest files"])
    result = run("diff", "--base", str(base), "--head", str(base))
    assert result.output.splitlines() == ["error: --snapshot: give exactly one of --snapshot FILE or --scenario FILE"]
    result = run("diff", "--base", str(base), "--head", str(base), "--snapshot", str(snapshot_file),
                 "--max-cost-increase", "lots")
    assert result.output.splitlines() == ["error: --max-cost-increase: expected a percentage like 5%, got 'lots'"]


def test_kept_nodes_the_head_pool_no_longer_lists_still_bill_their_price(tmp_path: Path, snapshot_file: Path) -> None:
    """A narrowed requirement on a label the nodes lack drifts nothing, but the kept nodes' types leave the head
    pool's instance types: they still cost their list price (found by a new-user trial: the head showed only the
    new node, -47.69%, and the 5% gate passed a +26% change)."""
    base = revision(tmp_path / "a", nodepool(), nodeclass())
    sized = nodepool()
    sized["spec"]["template"]["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["4xlarge"]})
    head = revision(tmp_path / "b", sized, nodeclass())
    result = run("diff", "--base", str(base), "--head", str(head), "--snapshot", str(snapshot_file), "-o", "json",
                 "--max-cost-increase", "5%")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.output.split("\ngate:")[0])
    assert doc["head"]["instance_types"] == {"c6a.4xlarge": 1, "m5.2xlarge": 1, "m5.large": 1, "m5.xlarge": 2}
    assert (doc["base"]["price_per_hour"], doc["head"]["price_per_hour"]) == (1.17, 1.476)
    assert doc["change"]["nodes_replaced"] == 0


def test_a_nodepool_without_its_ec2nodeclass_is_named_once_per_revision(tmp_path: Path, snapshot_file: Path) -> None:
    """Head's NodePools name an EC2NodeClass that neither the snapshot nor the head directory has: the
    provisioner's "nodepool general cannot launch: EC2NodeClass 'other' not found" came once per NodePool per
    revision on stderr (and the pace said "deleted with the NodePool"); now the table names each NodePool once, per
    revision, as simulate --snapshot does (whatif/dryrun.launch_batch), and stderr has no such line."""
    base = revision(tmp_path / "a", nodepool(), nodeclass())
    broken = nodepool()
    broken["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "other"
    also = nodepool("batch")
    also["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "other"
    head = revision(tmp_path / "b", broken, also)
    result = run("diff", "--base", str(base), "--head", str(head), "--snapshot", str(snapshot_file))
    assert result.exit_code == 0, result.output
    assert "cannot launch" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == (f"head: NodePools 'batch', 'general' cannot launch: EC2NodeClass 'other' is not in the "
                         f"snapshot or {head} (its EC2NodeClasses: default): Karpenter holds such a NodePool not "
                         "Ready (NodeClassNotFound)")
    assert [line for line in lines if line.startswith(("base:", "head:"))] == [lines[-1]]
    assert "general: 4 with no replacement (the NodePool cannot launch)" in lines[-2]
    doc = json.loads(run("diff", "--base", str(base), "--head", str(head), "--snapshot", str(snapshot_file),
                         "-o", "json").stdout)
    assert (doc["base"]["not_ready"], sorted(doc["head"]["not_ready"])) == ({}, ["batch", "general"])
    markdown = run("diff", "--base", str(base), "--head", str(head), "--snapshot", str(snapshot_file), "-o", "markdown")
    assert markdown.stdout.splitlines()[-1] == f"- {lines[-1]}"
    # --scenario: the replay launched nothing for head, silently (a $0/h head); now the same line, from the review.
    small = tmp_path / "s.yaml"
    small.write_text(yaml.safe_dump({
        "apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "tiny"},
        "spec": {"duration": "5m", "region": "us-west-2", "manifests": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}]}}))
    replay = run("diff", "--base", str(base), "--head", str(head), "--scenario", str(small))
    assert replay.exit_code == 0, replay.output
    assert replay.stdout.splitlines()[-1] == ("head: NodePools 'batch', 'general' cannot launch: its EC2NodeClass "
                                              "'other' is not in the input (it has no EC2NodeClass)")
    assert json.loads(run("diff", "--base", str(base), "--head", str(head), "--scenario", str(small), "-o", "json")
                      .stdout)["head"]["pending_pods"] == 1


def test_a_base_that_is_not_what_the_snapshot_runs_is_one_warning(tmp_path: Path, snapshot_file: Path) -> None:
    """``--base`` stands for what the cluster runs: its NodePools replace the snapshot's, so a base that differs makes
    the BASE column another cluster and "triggered" counts from it. Before, nothing said so."""
    same = revision(tmp_path / "same", nodepool(), nodeclass())
    result = run("diff", "--base", str(same), "--head", str(same), "--snapshot", str(snapshot_file))
    assert result.exit_code == 0 and result.stderr == ""  # defaults the API server filled are no difference
    capped = nodepool()
    capped["spec"]["limits"] = {"cpu": "8"}
    base = revision(tmp_path / "a", capped, nodepool("gpu"), nodeclass(), nodeclass("extra"))
    result = run("diff", "--base", str(base), "--head", str(same), "--snapshot", str(snapshot_file))
    assert result.exit_code == 0, result.output
    tail = "; so the BASE column is not the cluster as it runs, and what is 'triggered' is counted from it"
    assert result.stderr.splitlines() == [
        f"warning: --base {base} does not match the snapshot {snapshot_file}: NodePools only in --base: gpu; "
        "NodePools not as in the snapshot: general (spec.limits.cpu); EC2NodeClasses only in --base: extra" + tail]
    other = nodepool("prod-general")
    result = run("diff", "--base", str(revision(tmp_path / "b", other, nodeclass())), "--head", str(same),
                 "--snapshot", str(snapshot_file), "-o", "markdown")
    warning = (f"--base {tmp_path / 'b'} does not match the snapshot {snapshot_file}: it shares no NodePool with the "
               "snapshot (snapshot: general; --base: prod-general): is the snapshot of another cluster?" + tail)
    assert result.stderr.splitlines() == [f"warning: {warning}"]
    assert f"> **warning**: {warning}" in result.stdout.splitlines()
    redacted = tmp_path / "redacted.yaml"
    assert run("snapshot", "--from-file", str(snapshot_file), "-o", str(redacted), "--redact").exit_code == 0
    result = run("diff", "--base", str(same), "--head", str(same), "--snapshot", str(redacted), "-o", "json")
    assert "the snapshot is redacted (--redact hashes names), take one without --redact for diff" in \
        json.loads(result.stdout)["warnings"][0]
