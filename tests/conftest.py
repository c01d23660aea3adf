"""Suite-wide hooks: the IAM replay (``tests/iamreplay``) over the AWS unit tests and the integration tests.

Every AWS call the controller makes in ``tests/unit/aws`` and ``tests/integration`` is evaluated, as it happens,
against the controller policies the stacks synthesize, in both identity modes. A test whose calls IAM would deny
fails at teardown with one line per denial (call, resource, the statement expected to allow it and why it did
not). The terminal summary prints the totals.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from iamreplay.recorder import RECORDER, install

# Property tests are deterministic: the same examples on every machine and every run (no example database, so
# a failure found in one checkout cannot make another red or green). Explore with HYPOTHESIS_PROFILE=explore.
settings.register_profile("ci", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", database=None, deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

install()  # before any test module creates its botocore session

_REPLAYED = tuple(str(Path(__file__).resolve().parent / d) for d in ("unit/aws", "integration", "iamreplay"))


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


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
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
