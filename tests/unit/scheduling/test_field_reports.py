"""The field reports against the bundled catalog."""

from pathlib import Path

from nodewright.api.manifests import load_manifests, parse_documents
from nodewright.cloud.catalog import load_instance_types
from nodewright.scheduling import nodepool_spec_from_model, pods_from_workload, schedule

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "examples"


def test_team1_four_pods_zone_spread_over_two_zones() -> None:
    objs = parse_documents(load_manifests((FIXTURES / "team1-alternative-provisioner.yaml").read_text()))
    spec = nodepool_spec_from_model(objs.nodepools[0])
    pods = [p for d in objs.others for p in pods_from_workload(d)]
    types = load_instance_types("ap-northeast-2", zones=["ap-northeast-2a", "ap-northeast-2c"])
    r = schedule(pods, [], [spec], {"team1": types})
    assert r.unschedulable == {}
    per_zone: dict[str, int] = {}
    for nc in r.new_nodeclaims:
        per_zone[nc.zone] = per_zone.get(nc.zone, 0) + len(nc.pods)
        assert nc.taints[0].key == "team1" and nc.labels["intent"] == "apps"
        assert nc.capacity_type == "on-demand" and nc.arch == "amd64"
    assert per_zone == {"ap-northeast-2a": 2, "ap-northeast-2c": 2}
    # Greedy placement gives 2 x t3a.xlarge ($0.3008/h); the topology re-pack splits each NodeClaim within its
    # zone: one pod per t3a.micro (allocatable 1930m / 548Mi holds 1 vCPU / 244Mi), skew stays 0.
    assert sorted((nc.zone, nc.instance_type.name, nc.price, len(nc.pods)) for nc in r.new_nodeclaims) == [
        ("ap-northeast-2a", "t3a.micro", 0.0094, 1),
        ("ap-northeast-2a", "t3a.micro", 0.0094, 1),
        ("ap-northeast-2c", "t3a.micro", 0.0094, 1),
        ("ap-northeast-2c", "t3a.micro", 0.0094, 1),
    ]
    assert round(r.total_price, 4) == 0.0376
