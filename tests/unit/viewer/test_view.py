"""``nodewright nodes`` from a snapshot, through the command a user runs (``--once``) and the view it draws:
exact requests, prices (list, modelled spot, effective under a PricingPolicy), pool limits, pending reasons,
paging at 1,000 nodes, and one-line errors for bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from nodewright.cli import cli
from nodewright.state.cluster import snapshot
from nodewright.viewer.render import Style, render
from nodewright.viewer.source import load_snapshot
from nodewright.viewer.view import Pricer, build_view, parse_sort

TAKEN = "2026-12-01T12:00:00Z"
POLICY = """apiVersion: nodewright.io/v1alpha1
kind: PricingPolicy
metadata: {name: acme}
spec:
  discounts:
    - match: {family: m5}
      percent: 10
  reservedInstances:
    - {instanceType: m5.large, zone: us-east-1a, count: 1, usdPerHour: 0.06}
"""


def node(name: str, instance_type: str, capacity_type: str, zone: str, cpu: str, memory: str,
         pool: str | None = "general", created: str = "2026-12-01T09:00:00Z") -> dict[str, Any]:
    labels = {"node.kubernetes.io/instance-type": instance_type, "karpenter.sh/capacity-type": capacity_type,
              "topology.kubernetes.io/zone": zone}
    if pool:
        labels["karpenter.sh/nodepool"] = pool
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": created, "labels": labels},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "29"},
                       "allocatable": {"cpu": cpu, "memory": memory, "pods": "29"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: str, memory: str, on: str | None = None, **status: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if on:
        spec["nodeName"] = on
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec, "status": {"phase": "Running" if on else "Pending", **status},
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-12-01T11:58:00Z"}}


def nodepool(name: str, limits: dict[str, str], resources: dict[str, str] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
                           "spec": {"limits": limits, "template": {"spec": {"requirements": [], "nodeClassRef": {
                               "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}
    if resources:
        doc["status"] = {"resources": resources}
    return doc


def write(tmp_path: Path, items: list[dict[str, Any]]) -> str:
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"annotations": {
        "nodewright.io/snapshot-version": "1", "nodewright.io/snapshot-time": TAKEN,
        "nodewright.io/karpenter-version": "v1.14"}}}))
    return str(path)


@pytest.fixture
def cluster(tmp_path: Path) -> str:
    unschedulable = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": "0/3 nodes are available:\n 3 Insufficient cpu."}]}
    return write(tmp_path, [
        nodepool("general", {"cpu": "100", "memory": "400Gi"}, {"cpu": "6", "memory": "24Gi", "nodes": "2"}),
        nodepool("gpu", {"cpu": "64"}),
        node("ip-a", "m5.large", "on-demand", "us-east-1a", "2", "8Gi"),
        node("ip-b", "m5.xlarge", "spot", "us-east-1b", "4", "16Gi", created="2026-12-01T11:55:00Z"),
        node("ip-c", "c5.large", "on-demand", "us-east-1c", "2", "4Gi", pool=None),
        pod("web-1", "1", "2Gi", on="ip-a"), pod("web-2", "500m", "1Gi", on="ip-a"),
        pod("done", "4", "1Gi", on="ip-b") | {"status": {"phase": "Succeeded"}},
        pod("big-1", "8", "2Gi", **unschedulable),
        pod("bad", "lots", "1Gi"),
    ])


def once(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["nodes", "--once", *args])
    return result.exit_code, result.output


def test_once_from_a_snapshot_shows_every_column(cluster: str) -> None:
    code, out = once("--snapshot", cluster)
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == ("nodewright nodes  3 nodes  2 NodePools  2 pending pods  $0.2502/h list  (sort creation)")
    assert lines[1] == "Pending pods (2)"
    assert lines[4].split() == ["default/big-1", "2m", "8", "2Gi", "Unschedulable:", "0/3", "nodes", "are",
                                "available:", "3", "Insufficient", "cpu."]  # one line, whitespace folded
    assert lines[3] == ("default/bad    2m   0    0       spec.containers[0].resources.requests.cpu: 'lots' is not a "
                        "quantity like '500m', '2' or '4Gi'")  # why nodewright cannot place it
    rows = {line.split()[0]: line.split() for line in lines[5:]}
    assert rows["general"][:3] == ["general", "(2", "nodes)"]
    assert rows["general"][-5:] == ["limits", "cpu", "6/100,", "memory", "24Gi/400Gi"]  # status.resources
    assert rows["ip-a"] == ["ip-a", "m5.large", "on-demand", "us-east-1a", "3h", "[########--]", "75%",
                            "[####------]", "38%", "2/29", "0.0960", "Ready"]
    assert rows["ip-b"] == ["ip-b", "m5.xlarge", "spot", "us-east-1b", "5m", "[----------]", "0%",
                            "[----------]", "0%", "0/29", "0.0692", "Ready"]  # the Succeeded pod does not count
    assert rows["gpu"][-4:] == ["0.0000", "limits", "cpu", "0/64"]  # an empty NodePool is listed too
    assert rows["(no"][-2:] == ["0", "0.0850"]  # c5.large on-demand, a node nodewright did not launch
    assert [line.split()[0] for line in lines[5:]] == ["NODE", "general", "ip-a", "ip-b", "gpu", "(no", "ip-c"]


def test_effective_prices_under_a_pricing_policy(cluster: str, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    code, out = once("--snapshot", cluster, "--pricing", str(policy), "--sort", "price=desc")
    assert code == 0, out
    assert "$0.2502/h list  $0.2072/h effective" in out.splitlines()[0]
    rows = {line.split()[0]: line.split() for line in out.splitlines()}
    assert rows["ip-a"][-3:] == ["0.0960", "0.0600", "Ready"]  # the zonal RI's amortised $/h
    assert rows["ip-b"][-3:] == ["0.0692", "0.0622", "Ready"]  # spot: 10% off the modelled spot price
    assert rows["ip-c"][-3:] == ["0.0850", "0.0850", "Ready"]  # no discount for c5
    order = [line.split()[0] for line in out.splitlines() if line.startswith("  ip-")]
    assert order[:2] == ["ip-a", "ip-b"]  # price=desc within the pool


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    path = write(tmp_path, [nodepool("general", {"cpu": "10"}),
                            node("ip-a", "m5.large", "on-demand", "us-east-1a", "2", "8Gi"),
                            pod("big-1", "8", "2Gi")])
    code, out = once("--snapshot", path)
    assert code == 0, out
    assert out.splitlines()[0] == "nodewright nodes  1 node  1 NodePool  1 pending pod  $0.0960/h list  (sort creation)"


def test_node_selector_and_label_sort(cluster: str) -> None:
    code, out = once("--snapshot", cluster, "-l", "karpenter.sh/capacity-type!=spot",
                     "--sort", "topology.kubernetes.io/zone=desc")
    assert code == 0, out
    assert "2 nodes" in out.splitlines()[0] and "(1 node hidden)" in out.splitlines()[0]
    assert [line.split()[0] for line in out.splitlines() if line.startswith("  ip-")] == ["ip-a", "ip-c"]


@pytest.mark.parametrize(("args", "message"), [
    (["--sort", "cpu=up"], "error: --sort: 'cpu=up': order must be asc or desc, not 'up'"),
    (["-l", "a in (b"], "error: --node-selector: malformed set in label selector term 'a in (b'"),
])
def test_bad_flags_are_one_line(cluster: str, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["nodes", "--once", "--snapshot", cluster, *args])
    assert result.exit_code == 2 and result.output.strip() == message


def test_bad_snapshots_are_one_line_each(tmp_path: Path) -> None:
    """Read by the one snapshot reader (nodewright.whatif.snapshot): file, place and reason on one line."""
    path = tmp_path / "s.yaml"
    path.write_text('{"kind": "List", "items": [{"kind": "Node"}]}')
    result = CliRunner().invoke(cli, ["nodes", "--once", "--snapshot", str(path)])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path}#items[0]: Node None has apiVersion None; expected 'v1'"
    path.write_text("a: [1, 2")
    result = CliRunner().invoke(cli, ["nodes", "--once", "--snapshot", str(path)])
    assert result.output.strip() == (f"error: {path}: not valid YAML at line 2: did not find expected ',' or ']' "
                                     "(truncated or corrupted?)")


def test_a_thousand_nodes_page_on_one_screen(tmp_path: Path) -> None:
    items: list[dict[str, Any]] = [nodepool(f"pool-{p}", {"cpu": "2000"}) for p in range(4)]
    for i in range(1000):
        name = f"ip-10-0-{i // 250}-{i % 250}"
        items.append(node(name, "m5.large", "on-demand", "us-east-1a", "2", "8Gi", pool=f"pool-{i % 4}"))
        items.append(pod(f"p-{i}", "500m", "1Gi", on=name))
    source = load_snapshot(write(tmp_path, items))
    view = build_view(snapshot(source), Pricer(), 1_765_000_000.0)
    assert len(view.nodes) == 1000 and [len(p.nodes) for p in view.pools] == [250] * 4
    assert view.list_price == 96.0  # 1,000 x m5.large at $0.096/h
    console = Console(file=io.StringIO(), width=180, height=40, color_system=None)
    renderable, pages = render(view, Style(plain=True), height=40, page=3)
    console.print(renderable)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 39 and pages == 32  # 32 node rows a page: 40 lines - summary, header, 4 pools, footer, 1
    assert sum(1 for line in lines if line.startswith("pool-")) == 4  # every pool total stays on screen
    assert lines[-1].startswith(f"page 4/{pages}")


def test_sort_keys() -> None:
    assert parse_sort("creation") == ("creation", False)
    assert parse_sort("cpu=dsc") == ("cpu", True)  # eks-node-viewer's spelling
    assert parse_sort("label:karpenter.sh/nodepool=asc") == ("karpenter.sh/nodepool", False)
