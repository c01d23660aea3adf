"""``nodewright simulate``: the field reports end to end through the CLI and the JSON contract."""

import json
from pathlib import Path

from click.testing import CliRunner

from nodewright.cli import cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "examples"

# The first field report: four pods plus five daemonsets requesting 1780m / 3448Mi in total (9 pods).
FIRST_REPORT_WORKLOADS = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate}
spec:
  replicas: 4
  template:
    metadata: {labels: {app: inflate}}
    spec:
      containers:
        - name: c
          resources: {requests: {cpu: 250m, memory: 262Mi}}
"""


def _daemonset(name: str, cpu: str, mem: str) -> str:
    return f"""---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: {name}, namespace: kube-system}}
spec:
  template:
    spec:
      tolerations: [{{operator: Exists}}]
      containers:
        - name: c
          resources: {{requests: {{cpu: {cpu}, memory: {mem}}}}}
"""


def _first_report_files(tmp_path: Path) -> list[str]:
    workloads = tmp_path / "workloads.yaml"
    workloads.write_text(
        FIRST_REPORT_WORKLOADS
        + _daemonset("aws-node", "200m", "800Mi")
        + _daemonset("kube-proxy", "200m", "600Mi")
        + _daemonset("ebs-csi", "180m", "500Mi")
        + _daemonset("fluent-bit", "100m", "300Mi")
        + _daemonset("node-exporter", "100m", "200Mi")
    )
    # Only the report's "default" Provisioner (the fixture's second one, "compute", sorts first by name).
    provisioner = tmp_path / "default.yaml"
    provisioner.write_text((FIXTURES / "provisioner-v1alpha5-default.yaml").read_text().split("\n---\n")[0])
    return ["-f", str(provisioner), "-f", str(workloads)]


def test_first_field_report_one_node_four_candidates(tmp_path: Path) -> None:
    out = CliRunner().invoke(cli, ["simulate", *_first_report_files(tmp_path), "--output", "json"])
    assert out.exit_code == 0, out.output
    decision = json.loads(out.stdout)
    assert decision["region"] == "ap-northeast-2"
    (nc,) = decision["nodeclaims"]
    assert nc["nodepool"] == "default"
    # t3.medium and c5.large (4 GiB) cannot hold 3448Mi; the rest ordered by price.
    assert nc["instance_types"] == ["t3.large", "m5.large", "t3.xlarge", "m5.xlarge"]
    assert nc["instance_type"] == "t3.large" and nc["capacity_type"] == "on-demand"
    assert nc["zone"] in ("ap-northeast-2a", "ap-northeast-2c") and nc["arch"] == "amd64"
    assert nc["price_per_hour"] == 0.0832 and decision["total_price_per_hour"] == 0.0832
    assert nc["pods"] == [f"default/inflate-{i}" for i in range(4)]
    assert decision["unschedulable"] == [] and decision["existing"] == []
    assert decision["events"][:3] == [
        "Found 4 provisionable pod(s)",
        "Computed 1 new node(s) will fit 4 pod(s)",
        "Launching node with 4 pods requesting {cpu: 1780m, memory: 3448Mi, pods: 9} from types "
        "t3.large, m5.large, t3.xlarge, m5.xlarge",
    ]


def test_team1_zone_spread_table_output() -> None:
    out = CliRunner().invoke(
        cli, ["simulate", "-f", str(FIXTURES / "team1-alternative-provisioner.yaml"), "--region", "us-east-1"]
    )
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NODEPOOL", "TARGET", "INSTANCE", "TYPE", "CAPACITY", "ZONE", "ARCH", "PODS", "$/H"]
    assert lines[1].split()[1] == "100%"
    assert lines[-3] == "target utilization per NodePool: team1 100%"
    assert lines[-2] == ("prices: bundled us-east-1 on-demand prices (AWS Price List API, us-east-1 Linux on-demand, "
                         "2026-07-20)")
    assert lines[-1].startswith("4 new node(s) for 4 pod(s), 0 pod(s) on existing nodes, 0 unschedulable; total $")


def test_invalid_input_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Deployment\nmetadata: {name: x}\nspec: {replicas: -1, template: {spec: {}}}\n")
    out = CliRunner().invoke(
        cli, ["simulate", "-f", str(FIXTURES / "team1-alternative-provisioner.yaml"), "-f", str(bad)]
    )
    assert out.exit_code == 2
    assert out.stderr.strip() == (
        f"error: {bad}#documents[0].spec.replicas: must be a non-negative integer, got -1 (in Deployment 'x')"
    )


def test_no_nodepool_is_invalid(tmp_path: Path) -> None:
    only = tmp_path / "pods.yaml"
    only.write_text(FIRST_REPORT_WORKLOADS)
    out = CliRunner().invoke(cli, ["simulate", "-f", str(only)])
    assert out.exit_code == 2 and "no NodePool or Provisioner" in out.stderr


def test_existing_node_absorbs_pod(tmp_path: Path) -> None:
    node = tmp_path / "node.yaml"
    node.write_text(
        """apiVersion: v1
kind: Node
metadata: {name: ip-10-0-0-1, labels: {topology.kubernetes.io/zone: us-east-1a, kubernetes.io/arch: amd64}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "58"}}
---
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  tolerations: [{key: team1, operator: Exists}]
  containers: [{name: c, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
"""
    )
    out = CliRunner().invoke(
        cli, ["simulate", "-f", str(FIXTURES / "team1-alternative-provisioner.yaml"), "-f", str(node), "-o", "json"]
    )
    decision = json.loads(out.stdout)
    assert decision["existing"] == [{"node": "ip-10-0-0-1", "pods": ["default/solo"]}]
    assert len(decision["nodeclaims"]) == 4


def test_unschedulable_pod_is_reported_once_by_name(tmp_path: Path) -> None:
    """A pod no instance type can hold: one line naming it (the table's, not repeated on stderr), listed in the
    JSON, exit 0."""
    manifests = tmp_path / "huge.yaml"
    manifests.write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: small}\nspec:\n  template:\n    spec:\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}\n      requirements:\n"
        "      - {key: node.kubernetes.io/instance-type, operator: In, values: [t3.small]}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: huge, namespace: default}\nspec:\n"
        "  containers: [{name: c, resources: {requests: {cpu: '64', memory: 1Gi}}}]\n"
    )
    out = CliRunner().invoke(cli, ["simulate", "-f", str(manifests)])
    assert out.exit_code == 0
    assert "Could not schedule pod" not in out.stderr
    errors = [line for line in out.output.splitlines() if "default/huge" in line]
    assert len(errors) == 1 and errors[0].startswith("unschedulable (1 pod: default/huge): ")
    decision = json.loads(CliRunner().invoke(cli, ["simulate", "-f", str(manifests), "-o", "json"]).stdout)
    assert [u["pod"] for u in decision["unschedulable"]] == ["default/huge"]
    assert decision["nodeclaims"] == [] and decision["total_price_per_hour"] == 0
