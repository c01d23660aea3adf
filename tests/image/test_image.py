"""The controller image, built for real when a Docker daemon answers (skipped otherwise).

Runs read-only as UID 65532 (the chart's securityContext): ``--help``, ``--version``, the startup-error path
(no cluster: one JSON line, exit 3), the real package (not a placeholder ``__init__.py``) and no installer
left in the image. Skipped without a daemon, or when the base image is neither local nor pullable.
``NODEWRIGHT_IMAGE_BASE`` replaces the digest-pinned base (e.g. a local stand-in where
Docker Hub is unreachable); ``NODEWRIGHT_IMAGE_BUILD_NETWORK`` sets ``docker build --network``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.image, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]


def _docker_ready() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _default_base() -> str:
    """The ``PYTHON_IMAGE`` ARG default of the Dockerfile (the digest-pinned base)."""
    for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if line.startswith("ARG PYTHON_IMAGE="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("Dockerfile has no ARG PYTHON_IMAGE default")


def _available(image: str) -> bool:
    def ok(*args: str, timeout: float) -> bool:
        try:
            return subprocess.run(["docker", *args], capture_output=True, timeout=timeout).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    return ok("image", "inspect", image, timeout=30) or ok("pull", image, timeout=300)


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    if not _docker_ready():
        pytest.skip("no Docker daemon")
    base = os.environ.get("NODEWRIGHT_IMAGE_BASE") or _default_base()
    if not _available(base):
        pytest.skip(f"base image {base} is neither local nor pullable (set NODEWRIGHT_IMAGE_BASE)")
    tag = f"nodewright-test:{uuid.uuid4().hex[:8]}"
    command = ["docker", "build", "-t", tag, "--build-arg", f"PYTHON_IMAGE={base}"]
    if os.environ.get("NODEWRIGHT_IMAGE_BUILD_NETWORK"):
        command += ["--network", os.environ["NODEWRIGHT_IMAGE_BUILD_NETWORK"]]
    build = subprocess.run([*command, str(ROOT)], capture_output=True, text=True, timeout=1100)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    yield tag
    subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)


def _run(image: str, *args: str, entrypoint: str | None = None, env: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    command = ["docker", "run", "--rm", "--read-only", "--user", "65532:65532", "--network", "none",
               "--tmpfs", "/tmp:size=64m"]
    for key, value in (env or {}).items():
        command += ["-e", f"{key}={value}"]
    if entrypoint:
        command += ["--entrypoint", entrypoint]
    return subprocess.run([*command, image, *args], capture_output=True, text=True, timeout=120)


def test_help_and_version(image: str) -> None:
    help_ = _run(image, "--help")
    assert help_.returncode == 0 and help_.stdout.startswith("Usage: nodewright run [OPTIONS]")
    assert "--feature-gates" in help_.stdout
    version = _run(image, "--version")
    assert version.returncode == 0 and version.stdout.strip() == "nodewright 0.1.0"


def test_startup_error_is_one_json_line(image: str) -> None:
    result = _run(image, env={"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1"})
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert result.returncode == 3 and len(lines) == 1, result.stdout + result.stderr
    line = json.loads(lines[0])
    assert (line["level"], line["logger"], line["error_class"], line["exit_code"]) == (
        "error", "nodewright.startup", "kubeconfig", 3)


def test_real_package_and_no_installers(image: str) -> None:
    probe = ("import importlib.util as u, json, os, nodewright; "
             "print(json.dumps([os.path.getsize(nodewright.__file__), nodewright.__version__, "
             "[m for m in ('pip', 'setuptools', 'wheel', 'packaging') if u.find_spec(m)], os.getuid()]))")
    result = _run(image, "-c", probe, entrypoint="python")
    assert result.returncode == 0, result.stderr
    size, version, installers, uid = json.loads(result.stdout)
    assert size > 0 and version == "0.1.0"  # the real __init__.py, not the empty placeholder
    assert installers == [] and uid == 65532
