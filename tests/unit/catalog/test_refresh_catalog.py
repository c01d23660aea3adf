"""scripts/refresh_catalog.py against moto reproduces the bundled catalog byte for byte."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
BUNDLED = ROOT / "nodewright" / "data" / "catalog"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("refresh_catalog", ROOT / "scripts" / "refresh_catalog.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_moto_refresh_of_ap_northeast_2_matches_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_script()
    assert script.main(["--moto", "--regions", "ap-northeast-2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ap-northeast-2    4 zones   755 types offered" in out
    assert "1400 instance types" in out  # moto's 1,395 + 5 g4ad sizes from the supplement
    specs = json.loads(gzip.decompress((tmp_path / "instance-types.json.gz").read_bytes()))
    bundled = json.loads(gzip.decompress((BUNDLED / "instance-types.json.gz").read_bytes()))
    # A bundle refreshed from real AWS (--aws) legitimately differs from moto's snapshot.
    if bundled["source"].startswith("moto"):
        fresh = tmp_path / "offerings" / "ap-northeast-2.json.gz"
        assert fresh.read_bytes() == (BUNDLED / "offerings" / "ap-northeast-2.json.gz").read_bytes()
        assert specs == bundled
    m5 = next(r for r in specs["instance_types"] if r["InstanceType"] == "m5.large")
    assert m5["NetworkInfo"]["MaximumNetworkInterfaces"] == 3
    assert "PlacementGroupInfo" not in m5 and "ConnectionTrackingConfiguration" not in m5["NetworkInfo"]


def test_aws_mode_without_credentials_exits_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    # Never ask the instance metadata service (no network beyond 127.0.0.1).
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    script = load_script()
    assert script.main(["--aws", "--regions", "us-east-1", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "instance-types.json.gz").exists()
