"""Fixtures of the opt-in e2e suites: a real control plane from binaries you provide (``controlplane.py``).

``control_plane`` is one etcd + kube-apiserver + kube-scheduler + kube-controller-manager for the session (the
scheduler and controller-manager only when their binaries are provided too); a test that needs the real
scheduler asks for ``real_scheduler``. ``e2e_kubeconfig`` is ``NODEWRIGHT_E2E_KUBECONFIG`` when set (your own
cluster), else the admin kubeconfig of ``control_plane``; both skip with the reason when neither is available.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .controlplane import ControlPlane, binary, skip_reason


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    plane = ControlPlane.start(tmp_path_factory.mktemp("controlplane"),
                               scheduler=binary("kube-scheduler") is not None,
                               controller_manager=binary("kube-controller-manager") is not None)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def real_scheduler(control_plane: ControlPlane) -> ControlPlane:
    """``control_plane`` with a running kube-scheduler (skips when its binary is not provided)."""
    if "kube-scheduler" not in control_plane.processes:
        pytest.skip(skip_reason(("kube-scheduler",)))
    return control_plane


@pytest.fixture(scope="session")
def e2e_kubeconfig(request: pytest.FixtureRequest) -> str:
    mine = os.environ.get("NODEWRIGHT_E2E_KUBECONFIG")
    if mine:
        return mine
    plane: ControlPlane = request.getfixturevalue("control_plane")
    return plane.kubeconfig


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The control plane's serving certificate is self-signed (clients skip verification): one warning per request
    # would bury the suite's output.
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"))
