"""`nodewright run` startup failures: one structured JSON line naming the fix, a distinct exit code per class."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from botocore.exceptions import ClientError
from click.testing import CliRunner

from nodewright.cli import cli
from nodewright.cloud.provider import AuthorizationError
from nodewright.kube.errors import KubeError
from nodewright.kube.rest import RestClient
from nodewright.startup import EXIT_CODES, classify


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """A clean environment: JSON logs, no AWS credentials anywhere, no instance metadata."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_DEFAULT_REGION", "KUBECONFIG", "FEATURE_GATES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NODEWRIGHT_LOG_FORMAT", "json")
    monkeypatch.setenv("CLUSTER_NAME", "demo")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return monkeypatch


def _kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def _run() -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["run"])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output  # one line, not a traceback
    return result.exit_code, json.loads(lines[0])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_missing_region_is_the_region_class(env: pytest.MonkeyPatch) -> None:
    env.delenv("AWS_REGION")
    code, line = _run()
    assert code == 6 and line["error_class"] == "aws-region" and line["exit_code"] == 6
    assert line["level"] == "error" and line["logger"] == "nodewright.startup"
    assert line["fix"].startswith("set AWS_REGION")


def test_malformed_region(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.setenv("AWS_REGION", "us-east")
    env.setenv("KUBECONFIG", _kubeconfig(tmp_path, f"http://127.0.0.1:{_closed_port()}"))
    code, line = _run()
    assert code == 6 and line["message"] == "AWS_REGION 'us-east' is not an AWS region name"


def test_bad_setting_is_the_settings_class(env: pytest.MonkeyPatch) -> None:
    env.setenv("FEATURE_GATES", "Bogus=true")
    code, line = _run()
    assert code == 2 and line["error_class"] == "settings" and line["fix"] == "correct FEATURE_GATES"


def test_missing_kubeconfig(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.setenv("KUBECONFIG", str(tmp_path / "absent"))
    code, line = _run()
    assert code == 3 and line["error_class"] == "kubeconfig"
    # The file's absence, said plainly (issue #26 item 9), not the client's "Invalid kube-config file".
    assert line["message"] == f"kubeconfig file {str(tmp_path / 'absent')!r} not found"
    assert line["fix"].startswith("pass --kubeconfig (or KUBECONFIG) the path of an existing kubeconfig file")


def test_missing_kubeconfig_flag(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["run", "--kubeconfig", str(tmp_path / "nope.yaml")])
    (line,) = [json.loads(x) for x in result.output.splitlines() if x.strip()]
    assert result.exit_code == 3 and line["message"] == f"kubeconfig file {str(tmp_path / 'nope.yaml')!r} not found"


def test_unreachable_api_server(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.setenv("KUBECONFIG", _kubeconfig(tmp_path, f"http://127.0.0.1:{_closed_port()}"))
    code, line = _run()
    assert code == 4 and line["error_class"] == "kube-apiserver"
    assert "Connection refused" in line["message"] or "refused" in line["message"].lower()
    assert line["fix"].startswith("check that the kubeconfig's server URL is reachable")


def test_no_aws_credentials(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env.setenv("KUBECONFIG", _kubeconfig(tmp_path, "http://127.0.0.1:1"))
    env.setattr(RestClient, "request", lambda self, method, path, *a, **k: {"major": "1", "minor": "31"})
    code, line = _run()
    assert code == 5 and line["error_class"] == "aws-credentials"
    assert line["message"] == "no AWS credentials found by the default credential chain"
    assert "IRSA" in line["fix"]


def test_capacity_buffer_gate_without_the_crd_is_one_settings_line(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nodewright.kube.errors import NotFoundError

    def request(self, method, path, *a, **k):
        if path == "/version":
            return {"major": "1", "minor": "31"}
        assert path == "/apis/autoscaling.x-k8s.io/v1beta1/capacitybuffers"
        raise NotFoundError("the server could not find the requested resource", status=404)

    env.setenv("KUBECONFIG", _kubeconfig(tmp_path, "http://127.0.0.1:1"))
    env.setenv("FEATURE_GATES", "CapacityBuffer=true")
    env.setattr(RestClient, "request", request)
    code, line = _run()
    assert code == 2 and line["error_class"] == "settings"
    assert line["message"] == ("FEATURE_GATES has CapacityBuffer=true but the API server does not serve "
                               "capacitybuffers.autoscaling.x-k8s.io/v1beta1 (the CRD is not installed)")
    assert line["fix"].startswith("kubectl apply -f helm/nodewright/crds/autoscaling.x-k8s.io_capacitybuffers.yaml")


def test_classes_of_aws_and_kube_errors() -> None:
    expired = ClientError({"Error": {"Code": "ExpiredTokenException", "Message": "expired"}}, "DescribeCluster")
    assert classify(expired).error_class == "aws-credentials"
    denied = AuthorizationError("the controller role may not eks:DescribeCluster on cluster/demo")
    assert classify(denied).exit_code == 7
    assert classify(KubeError("HTTP 401 Unauthorized", 401)).fix.startswith("the API server refused our credentials")
    assert classify(RuntimeError("boom")).exit_code == 1
    assert sorted(EXIT_CODES.values()) == list(range(1, 8))  # distinct
