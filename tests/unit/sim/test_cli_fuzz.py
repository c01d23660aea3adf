"""Fuzzing the CLI entry points in-process (``nodewright.cli.main``): random bytes, random YAML and mutated valid
manifests never produce a traceback; invalid input exits 2 with ``error:`` lines only.

Bounded and deterministic (``derandomize=True``, modest ``max_examples``, no deadline): the same examples every run.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import sys
import tempfile
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodewright.cli import main

SETTINGS = settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

VALID: list[dict[str, Any]] = [
    {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
     "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
              "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}},
    {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
     "spec": {"limits": {"cpu": "100"}, "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m"},
              "template": {"metadata": {"labels": {"team": "a"}}, "spec": {
                  "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
                                   {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["1"]}],
                  "taints": [{"key": "a", "value": "b", "effect": "NoSchedule"}],
                  "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
     "spec": {"replicas": 3, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
         "tolerations": [{"key": "a", "operator": "Exists"}],
         "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                        "whenUnsatisfiable": "DoNotSchedule",
                                        "labelSelector": {"matchLabels": {"app": "web"}}}],
         "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}}},
    {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults", "namespace": "shop"},
     "spec": {"limits": [{"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"memory": "1Gi"}}]}},
    {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "old"},
     "spec": {"providerRef": {"name": "default"}, "ttlSecondsAfterEmpty": 30,
              "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]}},
]


def invoke(args: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    """Run ``main(args)`` in-process; returns (exit code, stdout, stderr). Any exception other than SystemExit
    propagates and fails the test: that is the traceback a user would have seen."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(args)
                code = 0
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def assert_honest(code: int, stderr: str) -> None:
    assert "Traceback" not in stderr
    assert code in (0, 2, 3), (code, stderr)
    if code == 2:
        lines = [line for line in stderr.splitlines() if not line.startswith(("warning:", "skipped "))]
        assert lines and all(line.startswith("error: ") for line in lines), stderr


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_on_stdin(data: bytes) -> None:
    code, _, stderr = invoke(["simulate", "-f", "-"], data)
    assert_honest(code, stderr)
    assert code == 2  # no NodePool can come out of 300 random bytes
    code, _, stderr = invoke(["convert", "-f", "-"], data)
    assert_honest(code, stderr)  # convert of nothing (b"", comments) is an empty, valid output


yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
                         st.text(max_size=12), st.sampled_from(["1Ei", "-1", "NodePool", "karpenter.sh/v1", "In",
                                                                "Never", "1e400", ".inf", "~", "0x1F"]))
yaml_values = st.recursive(yaml_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=20)


@SETTINGS
@given(st.lists(yaml_values, min_size=1, max_size=4))
def test_random_yaml_documents(docs: list[Any]) -> None:
    text = yaml.safe_dump_all(docs, sort_keys=False)
    for command in ("simulate", "convert"):
        code, _, stderr = invoke([command, "-f", "-"], text.encode())
        assert_honest(code, stderr)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_paths(value, (*prefix, i)))
    return out


ALL_PATHS = [(d, *p) for d, doc in enumerate(VALID) for p in _paths(doc)]


@st.composite
def mutated(draw: st.DrawFn) -> list[dict[str, Any]]:
    docs = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(ALL_PATHS))
        replace = draw(st.booleans())
        value = draw(yaml_values) if replace else None
        with contextlib.suppress(IndexError, KeyError, TypeError):  # an earlier mutation removed the path
            parent: Any = docs
            for part in path[:-1]:
                parent = parent[part]
            if replace:
                parent[path[-1]] = value
            elif isinstance(parent, dict):
                del parent[path[-1]]
    return docs


@SETTINGS
@given(mutated())
def test_mutated_valid_manifests(docs: list[dict[str, Any]]) -> None:
    fd, path = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump_all(docs, fh, sort_keys=False)
        for args in (["simulate", "-f", path, "-o", "json"], ["simulate", "--strict", "-f", path],
                     ["convert", "-f", path]):
            code, _, stderr = invoke(args)
            assert_honest(code, stderr)
    finally:
        os.unlink(path)


def test_the_unmutated_manifests_simulate() -> None:
    fd, path = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump_all(VALID, fh, sort_keys=False)
        code, stdout, stderr = invoke(["simulate", "-f", path])
        assert code == 0, stderr
        assert "3 pod(s)" in stdout.splitlines()[-1] and "0 unschedulable" in stdout.splitlines()[-1]
    finally:
        os.unlink(path)


SCENARIO: dict[str, Any] = {
    "apiVersion": "nodewright.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "fuzz"},
    "spec": {"duration": "2m", "region": "us-east-1", "zones": ["us-east-1a"], "seed": 1,
             "launchLatency": {"p50": "20s", "p90": "40s"}, "manifests": VALID[:3],
             "events": [{"at": "1m", "scale": {"deployment": "web", "replicas": 5}},
                        {"at": "1m", "interruptSpot": {"count": 1}},
                        {"at": "1m", "insufficientCapacity": {"instanceType": "m6g.large", "zone": "us-east-1a",
                                                              "capacityType": "spot"}}]},
}
SCENARIO_PATHS = [p for p in _paths(SCENARIO) if p[:2] != ("spec", "manifests")]


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(SCENARIO_PATHS), yaml_values), min_size=1, max_size=2))
def test_mutated_scenarios(changes: list[tuple[tuple[Any, ...], Any]]) -> None:
    doc = copy.deepcopy(SCENARIO)
    for path, value in changes:
        with contextlib.suppress(IndexError, KeyError, TypeError):
            parent: Any = doc
            for part in path[:-1]:
                parent = parent[part]
            parent[path[-1]] = value
    fd, path_ = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "w") as fh:
            yaml.safe_dump(doc, fh)
        code, _, stderr = invoke(["simulate", "--scenario", path_, "-o", "json"])
        assert_honest(code, stderr)
    finally:
        os.unlink(path_)
