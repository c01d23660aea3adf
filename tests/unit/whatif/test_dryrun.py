"""``nodewright simulate --snapshot``: the provisioner's batch and every disruption method on a snapshot of a
Karpenter-run cluster (tests/unit/whatif/cluster.py), through the CLI."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.whatif.dryrun import dry_run
from nodewright.whatif.snapshot import Snapshot
from tests.unit.whatif.cluster import NOW, cluster, nodepool

REPO = Path(__file__).parents[3]
EXPECTED_TABLE = """\
snapshot {path}: 4 node(s), 9 pod(s), taken 2026-07-20T12:00:00Z; fleet $0.8640/h

PROVISIONING (pending pods)
NODEPOOL  TARGET  INSTANCE TYPE  CAPACITY   ZONE        ARCH   PODS  $/H
general   100%    c6a.2xlarge    on-demand  us-west-2a  amd64  1     0.3060
node 1 (c6a.2xlarge): default/big
target utilization per NodePool: general 100%
prices: bundled us-east-1 on-demand prices (AWS Price List API, us-east-1 Linux on-demand, 2026-07-20); us-east-1 \
prices stand in for us-west-2
1 new node(s) for 1 pod(s), 0 pod(s) on existing nodes, 0 unschedulable; total $0.3060/h (us-west-2)

DISRUPTION (dry run at 2026-07-20T12:00:00Z; methods in Karpenter's order, the first with a move acts)
METHOD                     ACTS  DECISION  NODES                    REPLACEMENTS  EVICTS  SAVES $/H
emptiness                  yes   delete    ip-10-0-1-2              -             0       0.1920
drift                            none
multi-node-consolidation         delete    ip-10-0-1-2,ip-10-0-1-1  -             2       0.3840
single-node-consolidation        delete    ip-10-0-1-2              -             0       0.1920
emptiness: Deleting 1 empty node, saving $0.19/h
multi-node-consolidation: Consolidating 2 nodes by deleting them, saving $0.38/h; evicts default/web-5d8f-a, \
default/web-5d8f-b
single-node-consolidation: Consolidating 1 node by deleting it, saving $0.19/h

NODE         NODEPOOL  INSTANCE TYPE  PODS  $/H     DISRUPTED BY / WHY NOT
ip-10-0-1-1  general   m5.xlarge      2     0.1920  multi-node-consolidation
ip-10-0-1-2  general   m5.xlarge      0     0.1920  emptiness
ip-10-0-1-3  general   m5.2xlarge     1     0.3840  pdb default/db prevents pod evictions
ip-10-0-1-4  general   m5.large       1     0.0960  pod default/batch-0 has karpenter.sh/do-not-disrupt
"""


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_simulate_snapshot_table(snapshot_file: Path) -> None:
    result = run("simulate", "--snapshot", str(snapshot_file))
    assert result.exit_code == 0, result.output
    assert result.output == EXPECTED_TABLE.format(path=snapshot_file)


def test_the_example_snapshot_is_the_test_cluster(snapshot_file: Path) -> None:
    """examples/whatif/snapshot.yaml (make pipeline's default) is this cluster, written by write_snapshot."""
    assert (REPO / "examples/whatif/snapshot.yaml").read_text() == snapshot_file.read_text()


def test_simulate_snapshot_json_and_pricing(snapshot_file: Path) -> None:
    result = run("simulate", "--snapshot", str(snapshot_file), "-o", "json",
                 "--pricing", str(REPO / "examples/pricing/savings-plan.yaml"))
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["fleet"] == {"nodes": 4, "price_per_hour": 0.864, "effective_price_per_hour": 0.8208}
    assert doc["disruption"]["acts"] == "emptiness"
    empty = doc["disruption"]["methods"][0]["decision"]
    assert (empty["savings_per_hour"], empty["effective_savings_per_hour"]) == (0.192, 0.1824)
    assert [c["instance_type"] for c in doc["provisioning"]["nodeclaims"]] == ["c6a.2xlarge"]
    assert "effective_price_per_hour" in doc["provisioning"]["nodeclaims"][0]


def test_budget_of_zero_is_the_reason_for_every_candidate() -> None:
    snap = Snapshot(cluster(pools=[nodepool(budget="0")]), NOW)
    nodes = {n["node"]: n["reason"] for n in dry_run(snap)["disruption"]["nodes"]}
    assert nodes == {
        "ip-10-0-1-1": "disruption budget of nodepool 'general' allows 0 Underutilized disruptions now (budgets: 0)",
        "ip-10-0-1-2": "disruption budget of nodepool 'general' allows 0 Empty disruptions now (budgets: 0)",
        "ip-10-0-1-3": "pdb default/db prevents pod evictions",
        "ip-10-0-1-4": "pod default/batch-0 has karpenter.sh/do-not-disrupt",
    }


def test_requirements_drift_replaces_a_node_and_says_which_pods_it_evicts() -> None:
    snap = Snapshot(cluster(pools=[nodepool(categories=("c",))]), NOW)
    methods = {m["method"]: m["decision"] for m in dry_run(snap)["disruption"]["methods"]}
    drift = methods["drift"]
    # The empty drifted node goes first (Karpenter: empty drifted candidates are deleted without simulation).
    assert drift["message"] == "Deleting 1 node (RequirementsDrifted)"
    assert [c["node"] for c in drift["candidates"]] == ["ip-10-0-1-2"]


def test_no_false_drift_on_karpenter_hash_stamps() -> None:
    """Karpenter's stamps (nodepool-hash-version v3, ec2nodeclass-hash-version v4) are never compared with ours."""
    doc = dry_run(Snapshot(cluster(), NOW))
    assert doc["disruption"]["methods"][1] == {"method": "drift", "evaluated": 0, "decision": None, "skipped": [],
                                               "stopped_early": False}


def test_kubectl_output_without_time_is_evaluated_now(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "kubectl.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": cluster()}))
    result = run("simulate", "--snapshot", str(path))
    assert result.exit_code == 0, result.output
    assert "(no snapshot time: now)" in result.output.splitlines()[0]


def test_snapshot_with_other_inputs_is_refused(snapshot_file: Path) -> None:
    result = run("simulate", "--snapshot", str(snapshot_file), "-f", "x.yaml")
    assert result.exit_code == 2
    assert result.output.splitlines() == ["error: --snapshot: give --snapshot alone (with --region, --output, "
                                          "--pricing, --fail-on-unschedulable)"]


def test_a_move_below_the_minimum_saving_is_the_reason() -> None:
    pool = nodepool()
    pool["metadata"]["annotations"]["nodewright.io/consolidation-minimum-saving"] = "1"
    nodes = {n["node"]: n["reason"] for n in dry_run(Snapshot(cluster(pools=[pool]), NOW))["disruption"]["nodes"]}
    assert nodes["ip-10-0-1-1"] == ("consolidation skipped: Not consolidating 2 nodes (ip-10-0-1-2, ip-10-0-1-1) by "
                                    "deleting them: it would save $0.3840/h, below the minimum $1.0000/h")


def test_pods_that_fit_nowhere_else_are_the_reason() -> None:
    objects = cluster()
    for obj in objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith("web-"):
            obj["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "ip-10-0-1-1"}
    nodes = {n["node"]: n["reason"] for n in dry_run(Snapshot(objects, NOW))["disruption"]["nodes"]}
    assert nodes["ip-10-0-1-1"] == ("not all pods would schedule elsewhere: default/web-5d8f-a: incompatible with "
                                    "nodepool \"general\", label 'kubernetes.io/hostname' does not have known values")


def test_expired_nodes_are_disrupted_by_expiration() -> None:
    objects = cluster()
    for obj in objects:
        if obj["kind"] == "NodeClaim" and obj["metadata"]["name"] == "general-00003":
            obj["spec"]["expireAfter"] = "24h"  # created 48h before the snapshot
    doc = dry_run(Snapshot(objects, NOW))
    assert doc["disruption"]["expiration"]["message"] == "Expiring 1 node"
    node = next(n for n in doc["disruption"]["nodes"] if n["node"] == "ip-10-0-1-3")
    assert (node["disrupted_by"], node["reason"]) == ("expiration", "disrupted by expiration")


def test_unschedulable_pods_are_not_repeated_on_stderr(tmp_path: Path) -> None:
    """The provisioner logs each unschedulable pod ("Could not schedule pod ...") as an error record; the dry run's
    output already names them, so the what-if commands print none of those records (a scenario or a large snapshot
    printed hundreds of lines). A child process: pytest's log capture would hide Python's last-resort handler."""
    import subprocess
    import sys

    from nodewright.whatif.snapshot import write_snapshot
    from tests.unit.whatif.cluster import pod

    path = tmp_path / "snap.yaml"
    write_snapshot(path, cluster() + [pod("huge", None, "1000", "1Gi", {"app": "huge"}, owner=None)], time=NOW)
    for args in (["simulate", "--snapshot", str(path)], ["explain", "pod", "huge", "--snapshot", str(path)]):
        done = subprocess.run([sys.executable, "-m", "nodewright.cli", *args], capture_output=True, text=True,
                              cwd=REPO)
        assert done.returncode == 0, done.stderr
        assert "default/huge" in done.stdout
        assert done.stderr == ""


BUFFER_TEMPLATE = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "web", "namespace": "default"},
                   "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                       {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}


def _buffer(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "default"},
            "spec": {"podTemplateRef": {"name": "web"}, "replicas": replicas}}


def test_capacity_buffers_hold_room_under_the_gate(monkeypatch: Any, caplog: Any) -> None:
    """Gate on: the buffer's virtual pods join the batch (free room on existing nodes first) and join the nodes'
    pods in the disruption view, so the empty node holding two of them is no longer empty; nodes given only
    virtual pods are not nominated (the controller never nominates them). Gate off: ignored with one warning."""
    snap = Snapshot(cluster() + [BUFFER_TEMPLATE, _buffer(5)], NOW)
    monkeypatch.setenv("FEATURE_GATES", "CapacityBuffer=true")
    doc = dry_run(snap)
    assert doc["provisioning"]["existing"] == [
        {"node": "ip-10-0-1-1", "pods": [f"default/capacity-buffer-headroom-{i}" for i in (1, 2, 3)]},
        {"node": "ip-10-0-1-2", "pods": ["default/capacity-buffer-headroom-4", "default/capacity-buffer-headroom-5"]}]
    methods = {m["method"]: m["decision"] for m in doc["disruption"]["methods"]}
    assert methods["emptiness"] is None  # ip-10-0-1-2 holds buffered room
    nodes = {n["node"]: (n["pods"], n.get("buffer_pods"), n["disrupted_by"]) for n in doc["disruption"]["nodes"]}
    assert nodes["ip-10-0-1-1"] == (2, 3, "multi-node-consolidation")  # not nominated for its virtual pods
    assert nodes["ip-10-0-1-2"] == (0, 2, "multi-node-consolidation")
    move = methods["multi-node-consolidation"]
    # Virtual pods are re-placed, never evicted.
    assert (move["evicted_pods"], move["buffer_pods"]) == (["default/web-5d8f-a", "default/web-5d8f-b"], 5)
    monkeypatch.delenv("FEATURE_GATES")
    caplog.clear()  # what the gate-on run logged (INFO when an earlier test left the logger there)
    with caplog.at_level("WARNING", logger="nodewright"):
        off = dry_run(snap)
    assert off["provisioning"]["existing"] == []
    assert off["disruption"]["acts"] == "emptiness"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        "1 CapacityBuffer(s) ignored (default/headroom): the CapacityBuffer feature gate is off; set "
        "FEATURE_GATES=CapacityBuffer=true to decide as a controller with the gate on"]


def test_no_cheaper_replacement_and_a_node_annotation_are_the_reasons() -> None:
    """The web pods need an m5.xlarge in us-west-2a (their node's type and zone); the other m5.xlarge carries
    karpenter.sh/do-not-disrupt and is in us-west-2b: the only move is a replacement at the same price."""
    objects = cluster()
    for obj in objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"].startswith("web-"):
            obj["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": "m5.xlarge",
                                           "topology.kubernetes.io/zone": "us-west-2a"}
            obj["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1500m"
        if obj["kind"] == "Node" and obj["metadata"]["name"] == "ip-10-0-1-2":
            obj["metadata"].setdefault("annotations", {})["karpenter.sh/do-not-disrupt"] = "true"
    doc = dry_run(Snapshot(objects, NOW))
    assert doc["disruption"]["acts"] is None
    assert {n["node"]: n["reason"] for n in doc["disruption"]["nodes"]} == {
        "ip-10-0-1-1": "Can't replace with a cheaper node: cheapest replacement m5.xlarge $0.1920/h, the node costs "
                       "$0.1920/h",
        "ip-10-0-1-2": "node has karpenter.sh/do-not-disrupt",
        "ip-10-0-1-3": "pdb default/db prevents pod evictions",
        "ip-10-0-1-4": "pod default/batch-0 has karpenter.sh/do-not-disrupt",
    }
