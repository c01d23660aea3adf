"""nodewright.quantities: the one quantity parser, shared by the scheduler, the catalog and the API models."""

import subprocess
import sys

import pytest

from nodewright import quantities
from nodewright.api import base
from nodewright.cloud import overhead
from nodewright.errors import NodewrightValidationError
from nodewright.scheduling import quantities as scheduling_quantities

MIB = 2**20


@pytest.mark.parametrize(
    ("text", "resource", "expected"),
    [
        ("1780m", "cpu", 1780),
        ("1.5", "cpu", 1500),
        (2, "cpu", 2000),
        ("1e-3", "cpu", 1),
        ("3448Mi", "memory", 3448 * MIB),
        (".5Gi", "memory", 512 * MIB),
        ("256M", "memory", 256_000_000),
        ("1e3", "memory", 1000),
        ("1E", "memory", 10**18),
        ("100m", "memory", 1),
        ("4", "nvidia.com/gpu", 4),
    ],
)
def test_parse_quantity_canonical_units(text: object, resource: str, expected: int) -> None:
    assert quantities.parse_quantity(text, resource) == expected


@pytest.mark.parametrize("bad", ["1e3Mi", "abc", "", "12Qi", "1.2.3", "1e", True])
def test_parse_quantity_rejects_what_kubernetes_rejects(bad: object) -> None:
    with pytest.raises(NodewrightValidationError, match="spec.x"):
        quantities.parse_quantity(bad, "memory", "spec.x")
    assert not quantities.is_quantity(str(bad)) or isinstance(bad, bool)


def test_negative_quantity_rejected() -> None:
    with pytest.raises(NodewrightValidationError, match="negative"):
        quantities.parse_quantity("-1", "cpu", "spec.x")


def test_one_implementation_behind_every_entry_point() -> None:
    assert scheduling_quantities.parse_quantity is quantities.parse_quantity
    assert scheduling_quantities.format_resources is quantities.format_resources
    assert base._QUANTITY_RE.pattern == quantities.QUANTITY_PATTERN
    # The catalog's (resource, value) spelling delegates; ints there are canonical units already.
    assert overhead.parse_quantity("cpu", "250m") == 250
    assert overhead.parse_quantity("memory", "1.5Gi") == 1536 * MIB
    assert overhead.parse_quantity("cpu", 250) == 250
    with pytest.raises(NodewrightValidationError, match="kubelet.kubeReserved.cpu"):
        overhead.parse_quantity("cpu", "-5m", "kubelet.kubeReserved.cpu")


def test_quantities_module_is_neutral() -> None:
    code = (
        "import sys, nodewright.quantities\n"
        "bad = [m for m in sys.modules if m.startswith(('nodewright.scheduling', 'nodewright.cloud', 'nodewright.api'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
