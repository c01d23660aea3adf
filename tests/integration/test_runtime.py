"""Production wiring: ``runtime.build_runtime``/``serve`` probes and metrics, and ``nodewright run`` under SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from nodewright.cloud.aws.interruption import InterruptionQueue
from nodewright.kube.client import KubernetesCluster
from nodewright.runtime import build_runtime

from .awsmoto import CREDENTIALS, QUEUE, SERVICE_CIDR, Account
from .emulator import EmulatorThread
from .harness import fast_settings, wait_for


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_probes_follow_cache_sync_and_loop_liveness(kube: EmulatorThread, account: Account,
                                                    tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(kube.kubeconfig(), encoding="utf-8")
    runtime = build_runtime(fast_settings(str(config), interruption_queue=QUEUE),
                            aws_clients=account.controller_clients(), host="127.0.0.1", identity="probe-test")
    assert isinstance(runtime.cluster, KubernetesCluster)
    assert isinstance(runtime.interruption, InterruptionQueue)
    assert runtime.interruption.queue_url == account.queue_url and runtime.interruption.wait_seconds == 0
    provider = runtime.cloud.settings  # type: ignore[attr-defined]
    assert provider.kubernetes_version == "1.31"  # from GET /version
    assert provider.cluster_endpoint == "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"  # configured wins
    assert provider.cluster_cidr == SERVICE_CIDR and provider.ca_bundle  # the rest from eks:DescribeCluster
    runtime.start_endpoints()
    metrics_port, health_port = (e.port for e in runtime.endpoints)
    health = f"http://127.0.0.1:{health_port}"
    loop = threading.Thread(target=runtime.run, daemon=True)
    try:
        assert get(f"{health}/healthz") == (200, "ok\n")
        assert get(f"{health}/readyz") == (500, "not ok\n")  # informers not started
        runtime.cluster.start(runtime.stop)
        wait_for(lambda: get(f"{health}/readyz")[0] == 200, 10, "readiness")
        runtime._last_loop = time.monotonic() - 61  # as if the loop had not turned for over a minute
        assert get(f"{health}/healthz") == (500, "not ok\n")
        loop.start()
        wait_for(lambda: runtime.is_leader, 5, "leadership")
        assert get(f"{health}/healthz") == (200, "ok\n")
        status, text = get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200
        assert "nodewright_leader 1.0" in text and "karpenter_cluster_state_synced 1.0" in text
        assert get(f"{health}/nothing")[0] == 404
    finally:
        runtime.stop.set()
        if loop.is_alive():
            loop.join(5)
    assert not loop.is_alive()
    lease = kube.emulator.peek("leases", "nodewright-leader-election", "kube-system")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""  # released on the way out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nodewright_run_serves_probes_and_releases_the_lease_on_sigterm(kube: EmulatorThread, account: Account,
                                                                        tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(kube.kubeconfig(), encoding="utf-8")
    metrics_port, health_port = _free_port(), _free_port()
    env = {**os.environ, **CREDENTIALS, "CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1", "POD_NAME": "karpenter-0",
           "NODEWRIGHT_LOG_FORMAT": "json", "NODEWRIGHT_LEASE_DURATION": "2s", "NODEWRIGHT_RENEW_DEADLINE": "1500ms",
           "NODEWRIGHT_RETRY_PERIOD": "200ms", "INTERRUPTION_QUEUE": QUEUE}
    command = [sys.executable, "-c", "from nodewright.cli import main; main()", "run", "--kubeconfig", str(config),
               "--aws-endpoint-url", account.url, "--metrics-port", str(metrics_port),
               "--health-probe-port", str(health_port)]
    log_path = tmp_path / "controller.log"  # a file, not a pipe: a full pipe would block the controller
    with open(log_path, "w", encoding="utf-8") as log_file:
        process = subprocess.Popen(command, env=env, stdout=log_file, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: process.poll() is not None or get(f"http://127.0.0.1:{health_port}/readyz")[0] == 200
                 if _listening(health_port) else process.poll() is not None, 20, "the controller to be ready")
        assert process.poll() is None, log_path.read_text(encoding="utf-8")

        def holder() -> str:
            lease = kube.emulator.peek("leases", "nodewright-leader-election", "kube-system") or {}
            return str((lease.get("spec") or {}).get("holderIdentity") or "")

        wait_for(lambda: holder().startswith("karpenter-0_"), 10, "the lease")
        assert "nodewright_leader 1.0" in get(f"http://127.0.0.1:{metrics_port}/metrics")[1]
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(5)
    output = log_path.read_text(encoding="utf-8")
    assert process.returncode == 0, output
    assert holder() == ""
    logs = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    messages = [doc.get("msg") or doc.get("message") for doc in logs]
    assert "nodewright controller started" in messages and "received signal 15, shutting down" in messages


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0
