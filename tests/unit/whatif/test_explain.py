"""``nodewright explain pod|node|nodepool`` on the Karpenter-run test cluster, through the CLI."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.whatif.explain import explain
from nodewright.whatif.snapshot import Snapshot
from tests.unit.whatif.cluster import NOW, cluster, nodeclass, nodepool, pod


def run(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output.splitlines()


def test_pending_pod_gets_a_new_nodeclaim(snapshot_file: Path) -> None:
    assert run("explain", "pod", "default/big", "--snapshot", str(snapshot_file)) == (0, [
        "Pod default/big: phase Pending",
        "  pending; the provisioner launches a NodeClaim for it: nodepool general, c6a.2xlarge on-demand in "
        "us-west-2a, $0.3060/h (1 pod(s) on it)"])


def test_bound_pod_and_its_node(snapshot_file: Path) -> None:
    assert run("explain", "pod", "web-5d8f-a", "--snapshot", str(snapshot_file)) == (0, [
        "Pod default/web-5d8f-a: phase Running",
        "  bound to node ip-10-0-1-1 (nodepool general, m5.xlarge)",
        "  that node: disrupted by multi-node-consolidation"])


def test_unschedulable_pod_each_nodepool_in_the_schedulers_words() -> None:
    pools = [nodepool(), nodepool("compute", categories=("c",))]
    objects = cluster(pools=pools) + [pod("huge", None, "1000", "1Gi", {"app": "huge"}, owner=None)]
    text = explain(Snapshot(objects, NOW, source="s.yaml"), "pod", "huge").splitlines()
    assert text[0] == "Pod default/huge: phase Pending"
    assert text[1].startswith('  pending and unschedulable: incompatible with nodepool "compute", daemonset overhead=')
    assert text[2].startswith('  nodepool general: incompatible with nodepool "general", daemonset overhead={cpu: '
                              '100m, memory: 128Mi, pods: 1}, no instance type satisfied resources {cpu: 1000, '
                              'memory: 1Gi, pods: 1}')
    assert text[3].startswith('  nodepool compute: incompatible with nodepool "compute"')
    assert len(text) == 4


def test_node_blocked_by_a_pdb_and_the_budgets(snapshot_file: Path) -> None:
    assert run("explain", "node", "ip-10-0-1-3", "--snapshot", str(snapshot_file)) == (0, [
        "Node ip-10-0-1-3: nodepool general, m5.2xlarge on-demand in us-west-2a, $0.3840/h, 1 pod(s) that would move",
        "  not disrupted now: pdb default/db prevents pod evictions",
        "  budget allows now: Empty 4, Drifted 4, Underutilized 4"])


def test_empty_node_is_taken_by_emptiness(snapshot_file: Path) -> None:
    code, lines = run("explain", "node", "ip-10-0-1-2", "--snapshot", str(snapshot_file))
    assert code == 0
    assert lines[1] == "  disruption candidate: emptiness would act now: Deleting 1 empty node, saving $0.19/h"


def test_nodepool_costs_and_limits(snapshot_file: Path) -> None:
    assert run("explain", "nodepool", "general", "--snapshot", str(snapshot_file)) == (0, [
        "NodePool general: 4 node(s), $0.8640/h list, 1 x m5.2xlarge, 1 x m5.large, 2 x m5.xlarge",
        "  limits: cpu 20 of 1000",
        "  disruption: consolidationPolicy WhenEmptyOrUnderutilized, consolidateAfter 1m, budgets 100%",
        "  allowed now: Empty 4, Drifted 4, Underutilized 4",
        "  pending pods launch 1 NodeClaim(s) here: c6a.2xlarge $0.3060/h",
        "  disruption now: 2 of its node(s) would be disrupted by some method"])


def test_unknown_name_and_missing_source_are_one_line(snapshot_file: Path) -> None:
    code, lines = run("explain", "node", "nope", "--snapshot", str(snapshot_file))
    assert code == 2 and lines == [f"error: nope: no Node 'nope' in {snapshot_file} (4 Nodes: ip-10-0-1-1, "
                                   "ip-10-0-1-2, ip-10-0-1-3, ip-10-0-1-4)"]
    assert run("explain", "node", "x") == (2, ["error: --snapshot: give exactly one of --snapshot FILE or "
                                               "--kubeconfig PATH"])
    code, lines = run("explain", "nodepool", "generl", "--snapshot", str(snapshot_file))
    assert code == 2 and lines == [f"error: generl: no NodePool 'generl' in {snapshot_file} (1 NodePool: general)"]


DEMO = Path(__file__).parents[3] / "examples/snapshots/viewer-demo.yaml"
MISSING = ("EC2NodeClass 'default' is not in the snapshot (it has no EC2NodeClass): Karpenter holds such a NodePool "
           "not Ready (NodeClassNotFound)")


def test_nodepools_whose_ec2nodeclass_is_missing_say_so_once() -> None:
    """examples/snapshots/viewer-demo.yaml has NodePools but no EC2NodeClass: the output names the cause once, per
    NodePool, and the summary says why nothing launches (no bare $0/h, no repeated stderr lines)."""
    result = CliRunner().invoke(cli, ["simulate", "--snapshot", str(DEMO)])
    assert result.exit_code == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == (f"snapshot {DEMO}: 6 node(s), 12 pod(s), taken 2026-12-01T12:00:00Z; fleet $0.0000/h for "
                        "0 node(s) with a NodeClaim (6 without one: not priced, never disrupted)")
    assert lines[3:5] == [f"NodePools 'batch', 'general' cannot launch: {MISSING}",
                          "unschedulable (1 pod: shop/report-3): no NodePool"]
    assert lines[7] == ("0 new node(s) for 0 pod(s), 0 pod(s) on existing nodes, 1 unschedulable; nothing can launch: "
                        "no NodePool is ready (see above)")
    pod = CliRunner().invoke(cli, ["explain", "pod", "shop/report-3", "--snapshot", str(DEMO)])
    assert pod.exit_code == 0 and pod.stderr == ""
    assert pod.stdout.splitlines() == [
        "Pod shop/report-3: phase Pending",
        "  pending and unschedulable: no NodePool; no NodePool can launch (why, per NodePool, below)",
        f"  nodepool general: cannot launch: {MISSING}",
        f"  nodepool batch: cannot launch: {MISSING}"]
    pool = CliRunner().invoke(cli, ["explain", "nodepool", "batch", "--snapshot", str(DEMO)])
    assert pool.exit_code == 0 and pool.stderr == ""
    assert pool.stdout.splitlines()[:2] == [
        "NodePool batch: 1 node(s) (1 without a NodeClaim: not priced, never disrupted), $0.0000/h list",
        f"  cannot launch: {MISSING}"]


def test_a_nodepool_karpenter_holds_not_ready_says_why() -> None:
    """From a live cluster the NodePool carries Karpenter's Ready=False condition, and the provisioner skips it
    without a word: the reason comes from the condition."""
    held = nodepool()
    held["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "NodeClassNotFound",
                                     "message": "EC2NodeClass 'gone' not found"}]
    snap = Snapshot([held, nodeclass(), pod("big", None, cpu="4")], NOW)
    assert explain(snap, "nodepool", "general").splitlines()[1] == (
        "  cannot launch: it is not Ready (NodeClassNotFound: EC2NodeClass 'gone' not found)")


def test_nodepool_counts_its_nodes_without_a_nodeclaim() -> None:
    """examples/snapshots/viewer-demo.yaml: four Nodes carry ``karpenter.sh/nodepool: general``, none with a
    NodeClaim. ``explain nodepool general`` said "0 node(s)"; it counts them and says why $0/h."""
    code, lines = run("explain", "nodepool", "general", "--snapshot", str(DEMO))
    assert code == 0
    assert lines[0] == "NodePool general: 4 node(s) (4 without a NodeClaim: not priced, never disrupted), $0.0000/h list"
    assert lines[-1] == "  disruption now: 0 of its node(s) would be disrupted by some method"
