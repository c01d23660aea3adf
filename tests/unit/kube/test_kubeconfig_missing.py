"""A kubeconfig file that does not exist says so (issue #26 item 9), in every command that reads a live cluster
(``nodes``, ``snapshot``, ``explain``), not the client's "Invalid kube-config file. No configuration found.".
``run`` has its own startup line (tests/unit/ops/test_startup.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from nodewright.cli import cli

COMMANDS = [["nodes"], ["snapshot", "-o", "out.yaml"], ["explain", "node", "n1"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_missing_kubeconfig_flag_says_not_found(command: list[str], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "nope.yaml"
    done = CliRunner().invoke(cli, [*command, "--kubeconfig", str(missing)])
    assert done.exit_code == 2, done.output
    assert f"kubeconfig file {str(missing)!r} not found" in done.stderr
    assert "Invalid kube-config" not in done.stderr and "Traceback" not in done.output
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", COMMANDS[:2], ids=lambda c: c[0])  # explain reads a cluster only by flag
def test_a_missing_kubeconfig_env_says_not_found(command: list[str], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "absent"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    done = CliRunner().invoke(cli, command)
    assert done.exit_code == 2, done.output
    assert f"kubeconfig file {str(missing)!r} not found" in done.stderr
    assert "Invalid kube-config" not in done.stderr
