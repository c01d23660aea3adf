"""``nodewright simulate -f`` with ``SCHEDULER_CONFIG``: a Deployment without topologySpreadConstraints spreads as
kube-scheduler's cluster defaults ask (Karpenter main #3205; :mod:`nodewright.state.defaultspread`)."""

import json
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from nodewright.cli import cli

INPUT = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: web, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80}]}
"""

LIST_DEFAULTS = """podTopologySpread:
  defaultingType: List
  defaultConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
    - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}
"""


def _simulate(tmp_path: Path, env: dict[str, str]) -> tuple[int, str]:
    path = tmp_path / "in.yaml"
    path.write_text(INPUT)
    out = CliRunner().invoke(cli, ["simulate", "-f", str(path), "--output", "json"], env=env)
    return out.exit_code, out.output


def test_deployment_spreads_over_zones_and_hosts_with_list_defaults(tmp_path: Path) -> None:
    code, output = _simulate(tmp_path, {"SCHEDULER_CONFIG": LIST_DEFAULTS})
    assert code == 0, output
    claims = json.loads(output)["nodeclaims"]
    assert sorted(len(c["pods"]) for c in claims) == [1] * 6  # hostname preference: one pod per node
    assert Counter(c["zone"] for c in claims) == {"us-east-1a": 2, "us-east-1b": 2, "us-east-1c": 2}


def test_deployment_packs_without_defaults(tmp_path: Path) -> None:
    """Without default constraints the Service changes nothing: the skipped-kinds line names it, with why."""
    path = tmp_path / "in.yaml"
    path.write_text(INPUT)
    out = CliRunner().invoke(cli, ["simulate", "-f", str(path), "--output", "json"], env={"SCHEDULER_CONFIG": ""})
    assert out.exit_code == 0, out.output
    (claim,) = json.loads(out.stdout)["nodeclaims"]
    assert len(claim["pods"]) == 6
    assert out.stderr.splitlines() == [
        "skipped 1 object simulate does not need: Service x1 (read only for SCHEDULER_CONFIG's default topology spread)"]


def test_bad_scheduler_config_is_one_line(tmp_path: Path) -> None:
    bad = "podTopologySpread: {defaultConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, " \
          "whenUnsatisfiable: Sometimes}]}"
    code, output = _simulate(tmp_path, {"SCHEDULER_CONFIG": bad})
    assert code == 2
    assert output.strip().splitlines() == [
        "error: SCHEDULER_CONFIG podTopologySpread.defaultConstraints[0].whenUnsatisfiable: must be DoNotSchedule "
        "or ScheduleAnyway, got 'Sometimes'"]
