"""Errors shared across nodewright.

One validation error type for every piece of user input (NodePools, EC2NodeClasses, manifests,
scenarios, settings), so the CLI can print it on one line and exit 2.
"""

from __future__ import annotations


class NodewrightValidationError(ValueError):
    """Invalid user input: names the field path and the reason.

    ``str(err)`` reads ``"<path>: <reason>"``, e.g.
    ``"spec.template.spec.requirements[2].values: Gt needs one integer, got 'abc'"``.

    Attributes:
        path: dotted field path with ``[i]`` list indices; empty when the whole document is wrong.
        reason: one sentence saying what is wrong and, where possible, what would be right.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)
