"""Compatibility re-export: quantities live in :mod:`nodewright.quantities` (one implementation for the
scheduler, the catalog and the API). Kept so existing ``nodewright.scheduling.quantities`` imports work."""

from nodewright.quantities import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    Resources,
    add,
    fits,
    format_cpu,
    format_memory,
    format_resources,
    maximum,
    parse_quantity,
    parse_resource_list,
    subtract,
)

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "Resources",
    "add",
    "fits",
    "format_cpu",
    "format_memory",
    "format_resources",
    "maximum",
    "parse_quantity",
    "parse_resource_list",
    "subtract",
]
