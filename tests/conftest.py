"""Suite-wide hooks: the IAM replay (``tests/iamreplay``) over the AWS unit tests and the integration tests, and
the RBAC replay (``tests/rbacreplay``) over the integration and e2e tests.

Every AWS call the controller makes in ``tests/unit/aws`` and ``tests/integration`` is evaluated, as it happens,
against the controller policies the stacks synthesize, in both identity modes. A test whose calls IAM would deny
fails at teardown with one line per denial (call, resource, the statement expected to allow it and why it did
not). The terminal summary prints the totals.

Every Kubernetes request the controller sends in ``tests/integration`` and ``tests/e2e`` is recorded at the kube
adapter and judged, when the test ends, against the RBAC rules of the rendered chart: a test whose controller
sent a request the chart's ClusterRole/Role would refuse fails with one line per denied verb+resource. The
summary lists the verbs+resources used and the rules no request used.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from iamreplay.recorder import RECORDER, install
from rbacreplay import recorder as rbac

# Property tests are deterministic: the same examples on every machine and every run (no example database, so
# a failure found in one checkout cannot make another red or green). Explore with HYPOTHESIS_PROFILE=explore.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", database=None, deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

install()  # before any test module creates its botocore session
rbac.install()

_REPLAYED = tuple(str(Path(__file__).resolve().parent / d) for d in ("unit/aws", "integration", "iamreplay"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Synthesize the stacks' IAM documents before the first replayed test (outside every test's timeout)."""
    if any(str(item.path).startswith(_REPLAYED) for item in session.items):
        RECORDER.prepare()


@pytest.fixture(autouse=True)
def _iam_replay(request: pytest.FixtureRequest) -> Iterator[None]:
    if not str(request.node.path).startswith(_REPLAYED) or request.node.get_closest_marker("no_iam_replay"):
        yield
        return
    RECORDER.begin(request.node.nodeid)
    yield
    tally = RECORDER.end()
    if tally.denials:
        pytest.fail("\n".join(tally.denials[:20]), pytrace=False)


_RBAC_REPLAYED = tuple(str(Path(__file__).resolve().parent / d) for d in ("integration", "e2e"))


@pytest.fixture(autouse=True)
def _rbac_replay(request: pytest.FixtureRequest) -> Iterator[None]:
    if not str(request.node.path).startswith(_RBAC_REPLAYED):
        yield
        return
    rbac.RECORDER.begin(request.node.nodeid)
    yield
    tally = rbac.RECORDER.end()
    if tally.accesses or tally.unmapped:
        try:
            denials = rbac.RECORDER.denials(tally, request.node.nodeid)
        except FileNotFoundError as err:  # helm not installed: the replay cannot render the chart
            terminal = request.config.pluginmanager.get_plugin("terminalreporter")
            if terminal is not None:
                terminal.write_line(f"RBAC replay skipped: {err}")
            return
        if denials:
            pytest.fail("\n".join(denials[:20]), pytrace=False)


def _rbac_summary(terminalreporter: pytest.TerminalReporter) -> None:
    total = rbac.RECORDER.total
    if not total.requests:
        return
    used = sorted({f"{a.verb} {a.group or 'core'}/{a.resource}" for a in total.accesses})
    terminalreporter.write_line(f"RBAC replay: {total.requests} controller Kubernetes requests, {len(used)} distinct "
                                f"verb+resource: {', '.join(used)}")
    try:
        unused = rbac.RECORDER.unused_rules()
    except FileNotFoundError:
        return
    terminalreporter.write_line(f"RBAC replay: chart rules no request used: {', '.join(unused) or 'none'}")
    from rbacreplay.recorded import RECORDED

    listed = {(g, r, v) for v, g, r, _ in RECORDED}
    new = sorted(f"{v} {g or 'core'}/{r}" for g, r, v in rbac.RECORDER.used_atoms() - listed
                 if not r.startswith("nonResourceURL:"))
    if new:
        terminalreporter.write_line(f"RBAC replay: sent but not in tests/rbacreplay/recorded.py (add them there and "
                                    f"to the chart's contract): {', '.join(new)}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    _rbac_summary(terminalreporter)
    total = RECORDER.total
    if not total.evaluated:
        return
    terminalreporter.write_line(
        f"IAM replay: {total.calls} controller AWS calls, {total.evaluated} authorizations evaluated against the "
        f"stacks' controller policies and trusts (IRSA and Pod Identity): {len(total.denials)} denied, "
        f"{len(total.unresolved)} calls on resources not in the account (not evaluable offline)")
    unused = RECORDER.unused_statements()
    if unused and total.calls:
        terminalreporter.write_line(f"IAM replay: statements no judged call needed: {', '.join(unused)}")
    if terminalreporter.config.getoption("verbose") > 0:
        for name, count in sorted(total.by_call.items()):
            terminalreporter.write_line(f"  {name}: {count}")
