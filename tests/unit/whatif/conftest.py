from __future__ import annotations

from pathlib import Path

import pytest

from nodewright.whatif.snapshot import write_snapshot
from tests.unit.whatif.cluster import NOW, cluster


@pytest.fixture
def snapshot_file(tmp_path: Path) -> Path:
    """The Karpenter-run cluster of :mod:`tests.unit.whatif.cluster` as a snapshot file."""
    path = tmp_path / "snap.yaml"
    write_snapshot(path, cluster(), time=NOW)
    return path
