"""``nodewright nodes`` as a user runs it: in a pseudo-terminal, against the API emulator, the screen read back by
a VT100 emulator (pyte) and asserted; then refreshed by watch events (a node added, a pending pod deleted), paged
and quit with keys. The plain-text ``--once`` output of the same cluster is checked line by line."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyte
import pytest
from kubernetes import client as k8s

from nodewright.api import labels as L

from .emulator import EmulatorThread

ROOT = Path(__file__).resolve().parents[2]
COLUMNS, LINES = 180, 40


def node(core: k8s.CoreV1Api, name: str, instance_type: str, capacity_type: str, zone: str, cpu: str,
         memory: str, pool: str | None = "general") -> None:
    labels = {L.INSTANCE_TYPE: instance_type, L.CAPACITY_TYPE: capacity_type, L.ZONE: zone,
              L.REGION: "us-east-1", L.HOSTNAME: name}
    if pool:
        labels[L.NODEPOOL] = pool
    core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
    core.patch_node_status(name, {"status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "29"},
                                             "allocatable": {"cpu": cpu, "memory": memory, "pods": "29"},
                                             "conditions": [{"type": "Ready", "status": "True"}]}})


def pod(core: k8s.CoreV1Api, name: str, cpu: str, memory: str, on: str | None = None) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "nginx",
                                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if on:
        spec["nodeName"] = on
    core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                           "spec": spec})
    if on is None:
        core.patch_namespaced_pod_status(name, "default", {"status": {"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/1 nodes are available: 1 Insufficient cpu."}]}})


@pytest.fixture
def cluster(kube: EmulatorThread, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, tmp_path: Path) -> Path:
    custom.create_cluster_custom_object("karpenter.sh", "v1", "nodepools", {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "general"},
        "spec": {"limits": {"cpu": "100"}, "template": {"spec": {
            "requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                 "name": "default"}}}}})
    node(core, "ip-10-0-1-11.ec2.internal", "m5.large", "on-demand", "us-east-1a", "2", "8Gi")
    pod(core, "web-1", "1500m", "2Gi", on="ip-10-0-1-11.ec2.internal")
    pod(core, "big-1", "8", "1Gi")
    config = tmp_path / "kubeconfig"
    config.write_text(kube.kubeconfig(), encoding="utf-8")
    return config


class Terminal:
    """A process on a pseudo-terminal of COLUMNS x LINES and the screen it draws."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS), "LINES": str(LINES),
               "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                        start_new_session=True, close_fds=True)
        os.close(slave)
        self.screen = pyte.Screen(COLUMNS, LINES)
        self.stream = pyte.ByteStream(self.screen)

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:  # the child closed the terminal
                    return
                self.stream.feed(data)
            elif self.process.poll() is not None:
                return

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait(self, predicate: Callable[[str], bool], what: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.pump(0.1)
            if predicate(self.text()):
                return self.text()
            if self.process.poll() is not None:
                break
        raise AssertionError(f"screen never showed {what}:\n{self.text()}")

    def send(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        os.close(self.master)


@pytest.fixture
def terminal(cluster: Path) -> Iterator[Callable[..., Terminal]]:
    opened: list[Terminal] = []

    def start(*args: str) -> Terminal:
        term = Terminal([sys.executable, "-m", "nodewright.cli", "nodes", "--kubeconfig", str(cluster), *args])
        opened.append(term)
        return term

    yield start
    for term in opened:
        term.close()


def row(screen: str, start: str) -> list[str]:
    """The whitespace-separated cells of the first screen line starting with ``start`` (after indentation)."""
    for line in screen.splitlines():
        if line.strip().startswith(start):
            return line.split()
    raise AssertionError(f"no line starting with {start!r}:\n{screen}")


@pytest.mark.timeout(90)
def test_the_viewer_draws_nodes_pools_and_pending_pods_and_follows_watches(
        terminal: Callable[..., Terminal], core: k8s.CoreV1Api, kube: EmulatorThread) -> None:
    term = terminal()
    screen = term.wait(lambda s: "ip-10-0-1-11.ec2.internal" in s and "big-1" in s, "the first view")
    assert "1 node  1 NodePool  1 pending pod  $0.0960/h list" in screen
    assert row(screen, "default/big-1")[2:] == ["8", "1Gi", "Unschedulable:", "0/1", "nodes", "are", "available:",
                                                  "1", "Insufficient", "cpu."]
    cells = row(screen, "ip-10-0-1-11.ec2.internal")
    assert cells[1:4] == ["m5.large", "on-demand", "us-east-1a"]
    assert cells[-4:] == ["25%", "1/29", "0.0960", "Ready"]  # memory: 2Gi of 8Gi
    assert "75%" in cells  # cpu: 1.5 of 2 cores
    pool = row(screen, "general (1 node)")
    assert pool[-3:] == ["limits", "cpu", "2/100"]  # no status.resources yet: the nodes' capacity counts
    header = row(screen, "NODE")
    assert header == ["NODE", "TYPE", "CAPACITY", "ZONE", "AGE", "CPU", "MEMORY", "PODS", "LIST", "$/h", "STATUS"]

    # Watch events redraw the screen: a spot node joins, the pending pod goes.
    node(core, "ip-10-0-2-22.ec2.internal", "c5.xlarge", "spot", "us-east-1b", "4", "8Gi")
    screen = term.wait(lambda s: "ip-10-0-2-22.ec2.internal" in s, "the new node")
    assert row(screen, "ip-10-0-2-22.ec2.internal")[1:4] == ["c5.xlarge", "spot", "us-east-1b"]
    assert "general (2 nodes)" in screen
    core.delete_namespaced_pod("big-1", "default")
    screen = term.wait(lambda s: "big-1" not in s and "0 pending pods" in s, "the pending pod gone")
    assert "Pending pods" not in screen
    # Refreshed from watches, not polled: one LIST of each kind the viewer shows (and of nothing else), then WATCHes.
    term.pump(2)  # two more once-a-second redraws (ages)
    lists = {plural: n for (verb, plural), n in kube.emulator.calls.items() if verb == "list"}
    assert lists == {"pods": 1, "nodes": 1, "nodeclaims": 1, "nodepools": 1}
    assert {plural for (verb, plural) in kube.emulator.calls if verb == "watch"} == set(lists)

    term.send(b"q")
    term.pump(5)
    assert term.process.wait(10) == 0


@pytest.mark.timeout(90)
def test_a_node_selector_and_a_sort_order_on_the_terminal(terminal: Callable[..., Terminal],
                                                          core: k8s.CoreV1Api) -> None:
    node(core, "ip-10-0-3-33.ec2.internal", "m5.xlarge", "on-demand", "us-east-1c", "4", "16Gi", pool=None)
    term = terminal("-l", "node.kubernetes.io/instance-type in (m5.large,m5.xlarge)", "--sort", "name=desc")
    screen = term.wait(lambda s: "ip-10-0-3-33" in s and "ip-10-0-1-11" in s, "both m5 nodes")
    lines = [line.strip() for line in screen.splitlines()]
    pools = [line.split(" (")[0] for line in lines if re.search(r" \(\d+ nodes?\)", line)]
    assert pools == ["general", "(no NodePool)"]  # unmanaged nodes are priced and shown last
    assert "2 nodes  1 NodePool  1 pending pod  $0.2880/h list  (sort name=desc" in screen
    assert row(screen, "ip-10-0-3-33.ec2.internal")[-2:] == ["0.1920", "Ready"]
    term.send(b"q")
    assert term.process.wait(10) == 0


def test_once_prints_plain_text_without_escape_codes(cluster: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "nodewright.cli", "nodes", "--kubeconfig", str(cluster), "--once"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout
    lines = done.stdout.splitlines()
    assert lines[0] == "nodewright nodes  1 node  1 NodePool  1 pending pod  $0.0960/h list  (sort creation)"
    node_line = next(line for line in lines if line.strip().startswith("ip-10-0-1-11"))
    assert "[########--]   75%" in node_line and "[###-------]   25%" in node_line
