"""A real Kubernetes control plane on 127.0.0.1 for the opt-in e2e suites, started from binaries you provide.

The envtest convention: nothing is downloaded or built here. The binaries are named by environment variables,
one per component, or found in the directory ``KUBEBUILDER_ASSETS`` names (the layout controller-runtime's
envtest uses: ``etcd``, ``kube-apiserver``, ``kube-scheduler``, ``kube-controller-manager`` side by side):

| component | variable | needed |
|---|---|---|
| etcd | ``NODEWRIGHT_E2E_ETCD`` (else ``$KUBEBUILDER_ASSETS/etcd``, else ``etcd`` on PATH) | always |
| kube-apiserver | ``NODEWRIGHT_E2E_KUBE_APISERVER`` (else ``$KUBEBUILDER_ASSETS/kube-apiserver``) | always |
| kube-scheduler | ``NODEWRIGHT_E2E_KUBE_SCHEDULER`` (else ``$KUBEBUILDER_ASSETS/kube-scheduler``) | suites that let the real scheduler place pods |
| kube-controller-manager | ``NODEWRIGHT_E2E_KUBE_CONTROLLER_MANAGER`` (else ``$KUBEBUILDER_ASSETS/...``) | DaemonSet/ReplicaSet/GC controllers |

``tests/e2e/README.md`` says how to build them locally. What :class:`ControlPlane` starts:

- **etcd** with its data in a temporary directory, client and peer URLs on free loopback ports;
- **kube-apiserver** on ``https://127.0.0.1:<free port>`` (self-signed serving certificate in ``--cert-dir``;
  clients skip verification), ``--authorization-mode=RBAC``, static bearer tokens (``--token-auth-file``) for the
  users in :data:`USERS` so a suite can act as a non-admin identity the server's RBAC judges, and service-account
  signing keys made with ``openssl``;
- optionally **kube-scheduler** (``--leader-elect=false``; ``NODEWRIGHT_E2E_SCHEDULER_VERBOSITY=5`` adds ``-v=5``, which
  logs each scheduling attempt and nomination; an optional ``KubeSchedulerConfiguration`` document, e.g.
  a ``MostAllocated`` profile) and **kube-controller-manager** (``--leader-elect=false``, every default controller,
  ``--node-monitor-grace-period=24h``: no kubelet heart-beats here, so with the default 50 s the node lifecycle
  controller would taint every test Node ``unreachable``; it is still the one that lifts the
  ``node.kubernetes.io/not-ready`` taint admission puts on a new Node once the Node reports Ready).

Every process listens on 127.0.0.1 only, is started with a bounded readiness wait (``start_timeout`` s, default
120), and is stopped (SIGTERM, then SIGKILL after 10 s) by :meth:`ControlPlane.stop`. Logs go to
``<workdir>/<component>.log``; a failed start raises :class:`ControlPlaneError` with the log's last lines.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ENV = {
    "etcd": "NODEWRIGHT_E2E_ETCD",
    "kube-apiserver": "NODEWRIGHT_E2E_KUBE_APISERVER",
    "kube-scheduler": "NODEWRIGHT_E2E_KUBE_SCHEDULER",
    "kube-controller-manager": "NODEWRIGHT_E2E_KUBE_CONTROLLER_MANAGER",
}

# name -> groups. The admin is in system:masters (no RBAC check); the others are judged by the server's RBAC and
# get no permission until a suite binds a Role/ClusterRole to them (e.g. the chart's, for the controller).
USERS: Mapping[str, tuple[str, ...]] = {
    "nodewright-e2e-admin": ("system:masters",),
    "nodewright-controller": ("system:authenticated",),
    "nodewright-reader": ("system:authenticated",),
}
ADMIN = "nodewright-e2e-admin"


class ControlPlaneError(RuntimeError):
    """A component did not start or become ready; the message names it and ends with its log's last lines."""


def binary(component: str) -> str | None:
    """The path of ``component``'s binary from its variable or ``KUBEBUILDER_ASSETS``; None when not provided.

    etcd alone may also come from PATH (Debian's ``etcd-server`` package installs ``/usr/bin/etcd``)."""
    explicit = os.environ.get(ENV[component])
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets and os.access(Path(assets) / component, os.X_OK):
        return str(Path(assets) / component)
    if component == "etcd":
        return shutil.which("etcd")
    return None


def missing(components: Sequence[str] = ("etcd", "kube-apiserver")) -> list[str]:
    """The components of ``components`` whose binary is not provided (empty: the control plane can start)."""
    return [c for c in components if binary(c) is None]


def skip_reason(components: Sequence[str] = ("etcd", "kube-apiserver")) -> str:
    gone = missing(components)
    return ("set " + ", ".join(ENV[c] for c in gone) + " (or KUBEBUILDER_ASSETS) to run against a real "
            + "/".join(gone)) if gone else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ControlPlane:
    """A running control plane. ``url`` is the API server; ``kubeconfig`` the admin's kubeconfig file."""

    workdir: Path
    url: str = ""
    tokens: dict[str, str] = field(default_factory=dict)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    # --- start -------------------------------------------------------------------------------------------------

    @classmethod
    def start(cls, workdir: Path, *, scheduler: bool = False, controller_manager: bool = False,
              scheduler_config: Mapping[str, object] | None = None,
              controllers: str = "*", start_timeout: float = 120.0) -> ControlPlane:
        """Start etcd and kube-apiserver (and the scheduler / controller-manager when asked); ControlPlaneError
        when a binary is missing or a component is not ready within ``start_timeout`` s."""
        wanted = ["etcd", "kube-apiserver"] + (["kube-scheduler"] if scheduler else []) + \
                 (["kube-controller-manager"] if controller_manager else [])
        if missing(wanted):
            raise ControlPlaneError(skip_reason(wanted))
        workdir.mkdir(parents=True, exist_ok=True)
        plane = cls(workdir=workdir, tokens={user: secrets.token_hex(16) for user in USERS})
        try:
            plane._start_etcd(start_timeout)
            plane._start_apiserver(start_timeout)
            if scheduler:
                plane._start_scheduler(scheduler_config, start_timeout)
            if controller_manager:
                plane._start_controller_manager(controllers, start_timeout)
        except BaseException:
            plane.stop()
            raise
        return plane

    def _spawn(self, component: str, args: list[str]) -> subprocess.Popen[bytes]:
        exe = binary(component)
        assert exe is not None
        log = open(self.workdir / f"{component}.log", "wb")  # noqa: SIM115 - owned by the process below
        proc = subprocess.Popen([exe, *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=self.workdir, start_new_session=True)
        self.processes[component] = proc
        return proc

    def _fail(self, component: str, why: str) -> ControlPlaneError:
        path = self.workdir / f"{component}.log"
        tail = path.read_text(errors="replace").splitlines()[-15:] if path.exists() else []
        return ControlPlaneError(f"{component} {why}; last lines of {path}:\n" + "\n".join(tail))

    def _wait(self, component: str, ready: str, timeout: float, token: str | None = None) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.processes[component]
            if proc.poll() is not None:
                raise self._fail(component, f"exited with {proc.returncode}")
            request = urllib.request.Request(ready)
            if token:
                request.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        raise self._fail(component, f"not ready at {ready} after {timeout:.0f} s")

    def _start_etcd(self, timeout: float) -> None:
        client, peer = free_port(), free_port()
        self._spawn("etcd", [
            "--data-dir", str(self.workdir / "etcd"), "--name", "e2e",
            "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"e2e=http://127.0.0.1:{peer}", "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}",
            "--unsafe-no-fsync",
        ])
        self.etcd_url = f"http://127.0.0.1:{client}"
        self._wait("etcd", f"{self.etcd_url}/health", timeout)

    def _start_apiserver(self, timeout: float) -> None:
        key = self.workdir / "sa.key"
        pub = self.workdir / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(pub)], check=True, capture_output=True)
        tokens = self.workdir / "tokens.csv"
        tokens.write_text("".join(f'{self.tokens[u]},{u},{u},"{",".join(g)}"\n' for u, g in USERS.items()))
        port = free_port()
        self._spawn("kube-apiserver", [
            "--etcd-servers", self.etcd_url, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(port), "--cert-dir", str(self.workdir / "certs"),
            "--token-auth-file", str(tokens), "--authorization-mode", "RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", str(pub),
            "--service-account-signing-key-file", str(key), "--service-cluster-ip-range", "10.96.0.0/24",
            "--allow-privileged", "--disable-admission-plugins", "ServiceAccount",
        ])
        self.url = f"https://127.0.0.1:{port}"
        self._wait("kube-apiserver", f"{self.url}/readyz", timeout, token=self.tokens[ADMIN])
        self.kubeconfig = self.kubeconfig_for(ADMIN)

    def _start_scheduler(self, config: Mapping[str, object] | None, timeout: float) -> None:
        port = free_port()
        args = ["--kubeconfig", self.kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1",
                "--secure-port", str(port), "--authentication-skip-lookup=true",
                "--authorization-always-allow-paths", "/healthz,/readyz,/livez",
                "--authentication-kubeconfig", self.kubeconfig, "--authorization-kubeconfig", self.kubeconfig]
        if config is not None:
            document = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                        "leaderElection": {"leaderElect": False}, "clientConnection": {"kubeconfig": self.kubeconfig},
                        **config}
            path = self.workdir / "scheduler-config.yaml"
            path.write_text(yaml.safe_dump(document))
            args = ["--config", str(path), "--bind-address", "127.0.0.1", "--secure-port", str(port),
                    "--authorization-always-allow-paths", "/healthz,/readyz,/livez",
                    "--authentication-kubeconfig", self.kubeconfig, "--authorization-kubeconfig", self.kubeconfig]
        verbosity = os.environ.get("NODEWRIGHT_E2E_SCHEDULER_VERBOSITY")  # e.g. 5: each attempt and nomination
        if verbosity:
            args.append(f"-v={int(verbosity)}")
        self._spawn("kube-scheduler", args)
        self._wait("kube-scheduler", f"https://127.0.0.1:{port}/healthz", timeout)

    def _start_controller_manager(self, controllers: str, timeout: float) -> None:
        port = free_port()
        self._spawn("kube-controller-manager", [
            "--kubeconfig", self.kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1",
            "--secure-port", str(port), "--controllers", controllers, "--use-service-account-credentials=false",
            "--service-account-private-key-file", str(self.workdir / "sa.key"),
            "--authorization-always-allow-paths", "/healthz,/readyz,/livez",
            "--authentication-kubeconfig", self.kubeconfig, "--authorization-kubeconfig", self.kubeconfig,
            "--node-monitor-grace-period", "24h",
        ])
        self._wait("kube-controller-manager", f"https://127.0.0.1:{port}/healthz", timeout)

    # --- use ---------------------------------------------------------------------------------------------------

    def kubeconfig_for(self, user: str) -> str:
        """A kubeconfig file for one of :data:`USERS` (bearer token; TLS verification off: self-signed server)."""
        path = self.workdir / f"kubeconfig-{user}"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
            "clusters": [{"name": "e2e", "cluster": {"server": self.url, "insecure-skip-tls-verify": True}}],
            "users": [{"name": user, "user": {"token": self.tokens[user]}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        }))
        return str(path)

    def stop(self) -> None:
        """Stop every component (reverse start order): SIGTERM, then SIGKILL after 10 s."""
        for name in reversed(list(self.processes)):
            proc = self.processes[name]
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
        self.processes.clear()


def chart_documents(*set_values: str) -> list[dict[str, Any]]:
    """The chart as the RBAC replay renders it (``minimal`` values, release namespace ``kube-system``, no CRDs) with
    ``set_values``; the test is skipped when ``.tools/helm`` is missing (``make setup`` installs it)."""
    import pytest
    from rbacreplay.rules import NAMESPACE, _render_module

    render = _render_module()
    try:
        render.helm_binary()
    except FileNotFoundError as err:
        pytest.skip(str(err))
    docs: list[dict[str, Any]] = render.documents(render.render(render.variants()["minimal"], include_crds=False,
                                                                set_values=list(set_values), namespace=NAMESPACE))
    return docs
