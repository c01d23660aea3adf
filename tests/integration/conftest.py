"""Integration fixtures: the Kubernetes API emulator and the official ``kubernetes`` client pointed at it.

Everything listens on 127.0.0.1 with a free port and is torn down after each test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as k8s

from nodewright.kube.rest import RestClient

from .awsmoto import Account, MotoServer, fresh_account
from .emulator import EmulatorThread, NodewrightKubeEmulator
from .harness import TIMINGS, Replica

INTEGRATION_DIR = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test here ``integration`` and bound it (pytest-timeout turns a hang into a failure)."""
    for item in items:
        if INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(30))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The timings the integration tests recorded (:func:`.harness.record_timing`), with the load average."""
    if not TIMINGS:
        return
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    terminalreporter.write_sep("-", f"integration timings (load average {load})")
    for what, seconds in TIMINGS:
        terminalreporter.write_line(f"{seconds * 1000:9.1f} ms  {what}")


@pytest.fixture
def kube() -> Iterator[EmulatorThread]:
    """A fresh emulator (bookmarks every 0.2 s; a Pod's grace period runs 100x faster, so a default 30 s is
    0.3 s) running in its own event loop thread."""
    with EmulatorThread(NodewrightKubeEmulator(bookmark_interval=0.2, pod_grace_scale=0.01)) as thread:
        yield thread


@pytest.fixture
def api_client(kube: EmulatorThread) -> Iterator[k8s.ApiClient]:
    """The official client's ``ApiClient`` against the emulator."""
    configuration = k8s.Configuration(host=kube.url)
    with k8s.ApiClient(configuration) as client:
        yield client


@pytest.fixture
def core(api_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: k8s.ApiClient) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client)


@pytest.fixture
def replicas(kube: EmulatorThread, account: Account) -> Iterator[list[Replica]]:
    """The controller replicas a test starts (append each); stopped after the test, before the emulator and the
    AWS account go."""
    started: list[Replica] = []
    yield started
    for replica in started:
        if replica.thread.is_alive():
            replica.stop()


@pytest.fixture
def rest(api_client: k8s.ApiClient) -> RestClient:
    """nodewright's JSON REST layer over the same ``ApiClient``."""
    return RestClient(api_client, timeout=5.0)


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """One moto server for the session (started lazily by the first test that needs AWS)."""
    server = MotoServer().start()
    yield server
    server.stop()


@pytest.fixture
def account(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Account]:
    """A freshly reset and seeded moto account offering a few instance types; fake credentials so nothing can
    reach real AWS."""
    with fresh_account(moto_server, monkeypatch.setenv) as account:
        yield account

