"""The settings object: defaults, cdktf.json context, environment overrides, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodewright.errors import NodewrightValidationError
from stacks.settings import EndpointAccess, IdentityMode, load_settings

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_need_no_aws_and_follow_the_field_reports():
    s = load_settings()
    assert s.cluster_name == "nodewright"
    assert s.region == "ap-northeast-2"
    assert s.az_count == 3
    assert s.zones == ["ap-northeast-2a", "ap-northeast-2b", "ap-northeast-2c"]
    assert s.identity_mode is IdentityMode.IRSA
    assert s.endpoint_access is EndpointAccess.PRIVATE
    assert s.state_backend.type == "local"
    assert s.workload.timezone == "Asia/Seoul"
    assert s.interruption_queue_name == "nodewright-nodewright-interruption"
    assert s.node_role_name == "nodewright-nodewright-node"
    assert s.controller_subject == "system:serviceaccount:kube-system:nodewright"


def test_project_file_context_is_valid_and_read_by_main():
    project = json.loads((ROOT / "cdktf.json").read_text())
    assert project["targetVersions"] == {"terraform": ">=1.10.0"}
    s = load_settings(project["context"]["nodewright"], {})
    assert (s.cluster_name, s.region, s.identity_mode) == ("nodewright", "ap-northeast-2", IdentityMode.IRSA)


def test_environment_overrides_context_including_nested_and_list_fields():
    context = {"cluster_name": "shop", "image": {"tag": "1.0.0"}, "identity_mode": "irsa"}
    environ = {
        "NODEWRIGHT_INFRA_IDENTITY_MODE": "pod-identity",
        "NODEWRIGHT_INFRA_IMAGE__TAG": "1.2.3",
        "NODEWRIGHT_INFRA_ENDPOINT_ACCESS": "public-and-private",
        "NODEWRIGHT_INFRA_PUBLIC_ACCESS_CIDRS": "203.0.113.0/24, 198.51.100.7/32",
        "NODEWRIGHT_INFRA_SYSTEM_NODES__INSTANCE_TYPES": '["m7g.large", "m6g.large"]',
        "NODEWRIGHT_INFRA_WORKLOAD__DESIRED_REPLICAS": "8",
        "NODEWRIGHT_CLUSTER_NAME": "ignored-not-the-infra-prefix",
    }
    s = load_settings(context, environ)
    assert s.cluster_name == "shop"
    assert s.identity_mode is IdentityMode.POD_IDENTITY
    assert s.image.tag == "1.2.3"
    assert s.public_access_cidrs == ["203.0.113.0/24", "198.51.100.7/32"]
    assert s.system_nodes.instance_types == ["m7g.large", "m6g.large"]
    assert s.workload.desired_replicas == 8


def test_nested_environment_list_as_commas_and_nested_typo():
    s = load_settings({}, {"NODEWRIGHT_INFRA_SYSTEM_NODES__INSTANCE_TYPES": "m7g.large, m6g.large",
                           "nodewright_infra_workload__min_replicas": "3"})
    assert s.system_nodes.instance_types == ["m7g.large", "m6g.large"]
    assert s.workload.min_replicas == 3  # pydantic-settings reads the names case-insensitively
    with pytest.raises(NodewrightValidationError) as info:
        load_settings({}, {"NODEWRIGHT_INFRA_IMAGE__TAGG": "1.0"})
    assert info.value.path == "image.tagg"


@pytest.mark.parametrize(("context", "environ", "path", "reason_part"), [
    ({"cluster_name": "9lives"}, {}, "cluster_name", "start with a letter"),
    ({"cluster_name": "a" * 39}, {}, "cluster_name", "1-38"),
    ({"region": "mars-east-1"}, {}, "region", "not an AWS region"),
    ({"kubernetes_version": "1.29"}, {}, "kubernetes_version", ">= 1.30"),
    ({"vpc_cidr": "10.0.0.0/8"}, {}, "vpc_cidr", "/16 to /22"),
    ({"az_count": 1}, {}, "az_count", "greater than or equal to 2"),
    ({"endpoint_access": "public-and-private"}, {}, "public_access_cidrs", "at least one allowed CIDR"),
    ({"endpoint_access": "public-and-private", "public_access_cidrs": ["10.1.0.0/16", "0.0.0.0/0"]}, {},
     "public_access_cidrs[1]", "whole internet"),
    ({"public_access_cidrs": ["203.0.113.0/24"]}, {}, "public_access_cidrs", "only used with"),
    ({"identity_mode": "kiam"}, {}, "identity_mode", "'irsa' or 'pod-identity'"),
    ({"image": {"digest": "sha256:abc"}}, {}, "image.digest", "64 lowercase hex"),
    ({"state_backend": {"type": "s3"}}, {}, "state_backend.bucket", "valid bucket name"),
    ({"log_retention_days": 10}, {}, "log_retention_days", "CloudWatch Logs values"),
    ({"availability_zones": ["ap-northeast-2a", "us-east-1b", "ap-northeast-2c"]}, {}, "availability_zones",
     "not a zone of ap-northeast-2"),
    ({"workload": {"cron_start": "61 19 * * *"}}, {}, "workload.cron_start", "5-field cron"),
    ({"workload": {"cron_end": "0 0 0 19 * * *"}}, {}, "workload.cron_end", "5-field cron"),
    ({"workload": {"cron_start": "0 20 * * *", "cron_end": "0  20 * * *"}}, {}, "workload.cron_end", "must differ"),
    ({"workload": {"timezone": "Asia/Busan"}}, {}, "workload.timezone", "IANA time zone"),
    ({"workload": {"desired_replicas": 50}}, {}, "workload.desired_replicas", "between min_replicas and max"),
    ({}, {"NODEWRIGHT_INFRA_CLUSTER_NAMES": "x"}, "NODEWRIGHT_INFRA_CLUSTER_NAMES", "unknown setting"),
    ({}, {"NODEWRIGHT_INFRA_TAGS": "{not json"}, "NODEWRIGHT_INFRA_TAGS", "invalid JSON"),
    ({"colour": "blue"}, {}, "colour", "Extra inputs are not permitted"),
])
def test_invalid_settings_name_the_field(context, environ, path, reason_part):
    with pytest.raises(NodewrightValidationError) as info:
        load_settings(context, environ)
    assert info.value.path == path
    assert reason_part in info.value.reason
    assert "\n" not in str(info.value)


def test_context_must_be_an_object():
    with pytest.raises(NodewrightValidationError) as info:
        load_settings(["cluster_name", "x"], {})  # type: ignore[arg-type]
    assert info.value.path == "nodewright"


def test_main_prints_one_line_and_exits_2_on_invalid_settings(tmp_path):
    env = {**os.environ, "NODEWRIGHT_INFRA_WORKLOAD__TIMEZONE": "Mars/Olympus", "CDKTF_OUTDIR": str(tmp_path / "out")}
    done = subprocess.run([sys.executable, str(ROOT / "main.py")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: workload.timezone: 'Mars/Olympus' is not an IANA time zone name like 'Asia/Seoul'"]
    assert not (tmp_path / "out").exists()
