"""EC2 ``Filters`` built from EC2NodeClass selector terms (Karpenter selector semantics).

Within one term every condition must hold (the filters are ANDed by EC2); separate terms are ORed, so each
term is its own Describe call and the results are unioned. A tag value of ``"*"`` matches any value: it
becomes a ``tag-key`` filter instead of ``tag:<key>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def tag_filters(tags: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """``[{"Name": "tag:<k>", "Values": [v]}...]``, with ``{"Name": "tag-key", "Values": [k]}`` for ``"*"``."""
    filters: list[dict[str, Any]] = []
    for key, value in sorted((tags or {}).items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [value]})
    return filters


def tags_dict(tags: list[dict[str, str]] | None) -> dict[str, str]:
    """EC2's ``[{"Key": k, "Value": v}]`` as ``{k: v}``."""
    return {t["Key"]: t.get("Value", "") for t in tags or []}


def tag_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """``{k: v}`` as EC2's ``[{"Key": k, "Value": v}]``, sorted by key (stable documents and hashes)."""
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]
