"""docs/viewer.md's capture is what ``nodewright nodes`` prints for the example snapshot and policy today."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from nodewright.cli import cli

ROOT = Path(__file__).resolve().parents[3]


def test_the_capture_in_the_docs_is_current() -> None:
    result = CliRunner().invoke(cli, ["nodes", "--once", "--snapshot", str(ROOT / "examples/snapshots/viewer-demo.yaml"),
                                      "--pricing", str(ROOT / "examples/pricing/savings-plan.yaml")])
    assert result.exit_code == 0, result.output
    doc = (ROOT / "docs" / "viewer.md").read_text()
    captured = re.search(r"<!-- capture: begin[^\n]*\n```text\n(.*?)```\n<!-- capture: end -->", doc, re.S)
    assert captured is not None
    assert captured.group(1) == result.output
