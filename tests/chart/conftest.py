"""Fixtures for the Helm chart tests: the helm binary, and each variant rendered once per session.

The rendering goes through ``scripts/render_chart.py`` (what ``make chart`` and the policy gate
use), so the tests exercise the same code path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from chart_helpers import Doc, render_chart


@pytest.fixture(scope="session")
def helm() -> Path:
    """The helm binary; a clear failure (not a skip) when `make setup` has not installed it."""
    try:
        return render_chart.helm_binary()
    except FileNotFoundError as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="session")
def rendered(helm: Path) -> dict[str, list[Doc]]:
    """Variant name -> parsed documents (without CRDs), rendered once for the whole session."""
    return {
        name: render_chart.documents(render_chart.render(values, include_crds=False))
        for name, values in render_chart.variants().items()
    }


@pytest.fixture(scope="session")
def render(helm: Path) -> Callable[..., list[Doc]]:
    """Render the chart with extra ``--set`` strings on top of values files (by variant name)."""

    def _render(*set_values: str, variant: str = "minimal", namespace: str = "kube-system") -> list[Doc]:
        values = render_chart.variants()[variant]
        manifest = render_chart.render(values, include_crds=False, set_values=list(set_values),
                                       namespace=namespace)
        return render_chart.documents(manifest)

    return _render
