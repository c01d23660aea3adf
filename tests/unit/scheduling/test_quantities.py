"""nodewright.quantities: the one quantity parser, shared by the scheduler, the catalog and the API models."""

import subprocess
import sys

import pytest

from nodewright import quantities
from nodewright.api import base
from nodewright.cloud import overhead
from nodewright.errors import NodewrightValidationError

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


@pytest.mark.parametrize(
    ("resource", "value", "text"),
    [
        ("cpu", 2000, "2"),
        ("cpu", 1780, "1780m"),
        ("cpu", 0, "0"),
        ("memory", 3448 * MIB, "3448Mi"),
        ("memory", 4 * 2**30, "4Gi"),
        ("memory", 100_000_000, "100000000"),  # not a whole KiB multiple of a suffix: plain bytes, never rounded
        ("memory", 1536, "1536"),  # 1.5 KiB
        ("ephemeral-storage", 20 * 2**30, "20Gi"),
        ("hugepages-2Mi", 512 * MIB, "512Mi"),
        ("pods", 110, "110"),
        ("nvidia.com/gpu", 1, "1"),
    ],
)
def test_format_quantity_is_the_canonical_exact_spelling(resource: str, value: int, text: str) -> None:
    assert quantities.format_quantity(resource, value) == text
    assert quantities.parse_quantity(text, resource) == value  # round trip


def test_format_resource_list_and_log_spelling_use_the_one_formatter() -> None:
    resources = {"pods": 9, "memory": 3448 * MIB, "cpu": 1780, "nvidia.com/gpu": 1}
    assert quantities.format_resource_list(resources) == {
        "cpu": "1780m", "memory": "3448Mi", "nvidia.com/gpu": "1", "pods": "9"}
    assert quantities.format_resources(resources) == "{cpu: 1780m, memory: 3448Mi, pods: 9, nvidia.com/gpu: 1}"
