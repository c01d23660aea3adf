"""Record every Kubernetes API request the controller sends, at the kube adapter, and judge it against the chart.

Hook: :meth:`nodewright.kube.rest.RestClient._send` (the one place every request and watch of the controller
goes through) is wrapped once per test session (:func:`install`). A request counts as the controller's when its
client authenticates with the controller's token (the integration harness's replicas carry
``tests.integration.harness.CONTROLLER_TOKEN``; the tests' own clients carry none), so the tests' seeding and
assertions are not judged. Each request becomes its RBAC authorizations (:mod:`.access`), judged against the
rendered chart's rules (:mod:`.rules`) when the test ends: one line per denied authorization naming verb,
resource, object and the closest rule, which fails the test (``tests/conftest.py``). The session summary lists
every verb+resource used and every rule atom no request used.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .access import Access, UnmappedRequest, accesses
from .rules import Rule, chart_rules, judge, unused

CONTROLLER_TOKEN = "nodewright-controller"


@dataclass
class Tally:
    requests: int = 0
    accesses: set[Access] = field(default_factory=set)
    unmapped: list[str] = field(default_factory=list)


class Recorder:
    """Collects the controller's accesses while :attr:`test` is set."""

    def __init__(self, token: str = CONTROLLER_TOKEN) -> None:
        self.token = token
        self.test: str | None = None
        self.total = Tally()
        self.current = Tally()
        self._lock = threading.Lock()

    def is_controller(self, client: Any) -> bool:
        keys = getattr(getattr(getattr(client, "api_client", None), "configuration", None), "api_key", None) or {}
        return any(self.token in str(v) for v in keys.values())

    def record(self, method: str, path: str, query: Mapping[str, Any] | None, body: Any) -> None:
        if self.test is None:
            return
        try:
            found = accesses(method, path, query, body)
            problem = None
        except UnmappedRequest as err:
            found, problem = [], f"RBAC replay cannot map {err} (in {self.test})"
        with self._lock:
            for tally in (self.total, self.current):
                tally.requests += 1
                tally.accesses.update(found)
                if problem:
                    tally.unmapped.append(problem)

    def begin(self, test: str) -> None:
        with self._lock:
            self.current = Tally()
            self.test = test

    def end(self) -> Tally:
        with self._lock:
            self.test = None
            return self.current

    @staticmethod
    def denials(tally: Tally, test: str, rules: tuple[Rule, ...] | None = None) -> list[str]:
        """One line per access of ``tally`` the rules deny (sorted), then the unmapped requests."""
        rules = chart_rules() if rules is None else rules
        out = []
        for access in sorted(tally.accesses):
            allowed, closest = judge(access, rules)
            if not allowed:
                out.append(f"RBAC replay DENIED {access}: {closest} (in {test})")
        return out + tally.unmapped

    def used_atoms(self) -> set[tuple[str, str, str]]:
        return {(a.group, a.resource, a.verb) for a in self.total.accesses}

    def unused_rules(self) -> list[str]:
        return unused(self.used_atoms(), chart_rules())


RECORDER = Recorder()
_INSTALLED: list[bool] = []


def install() -> None:
    """Wrap ``RestClient._send`` (once) so every request of a controller client is recorded."""
    if _INSTALLED:
        return
    from nodewright.kube.rest import RestClient

    original = RestClient._send

    def send(self: RestClient, method: str, path: str, query: Mapping[str, Any] | None, body: Any,
             content_type: str, timeout: Any) -> Any:
        if RECORDER.test is not None and RECORDER.is_controller(self):
            RECORDER.record(method, path, query, body)
        return original(self, method, path, query, body, content_type, timeout)

    RestClient._send = send  # type: ignore[method-assign]
    _INSTALLED.append(True)
