"""Errors shared across nodewright.

One validation error type for every piece of user input (NodePools, EC2NodeClasses, manifests,
scenarios, settings), so the CLI can print it on one line per problem and exit 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class NodewrightValidationError(ValueError):
    """Invalid user input: names the field path and the reason.

    ``str(err)`` reads ``"<path>: <reason>"``, e.g.
    ``"spec.template.spec.requirements[2].values: Gt needs one integer, got 'abc'"``.

    One error may carry several problems (every invalid field of a document, every invalid
    document of a file): ``path``/``reason`` are the first, :attr:`problems` lists them all, and
    the CLI prints one line per problem.

    Attributes:
        path: dotted field path with ``[i]`` list indices; empty when the whole document is wrong.
        reason: one sentence saying what is wrong and, where possible, what would be right.
    """

    def __init__(self, path: str, reason: str, *, more: Sequence[NodewrightValidationError] = ()) -> None:
        self.path = path
        self.reason = reason
        self._more = [p for m in more for p in m.problems]
        super().__init__(f"{path}: {reason}" if path else reason)

    @property
    def problems(self) -> list[NodewrightValidationError]:
        """Every problem, first one first; each has no further problems of its own."""
        return [NodewrightValidationError(self.path, self.reason), *self._more]

    def rewrite(self, change: Callable[[str, str], tuple[str, str]]) -> NodewrightValidationError:
        """The same problems with ``(path, reason) -> (path, reason)`` applied to each (e.g. a file prefix)."""
        changed = [NodewrightValidationError(*change(p.path, p.reason)) for p in self.problems]
        return combine(changed)


def combine(errors: Sequence[NodewrightValidationError]) -> NodewrightValidationError:
    """One error carrying every problem of ``errors`` (at least one), in order, duplicates dropped."""
    problems: list[NodewrightValidationError] = []
    seen: set[tuple[str, str]] = set()
    for err in errors:
        for problem in err.problems:
            if (problem.path, problem.reason) not in seen:
                seen.add((problem.path, problem.reason))
                problems.append(problem)
    if not problems:
        raise ValueError("combine() needs at least one error")
    first, *rest = problems
    return NodewrightValidationError(first.path, first.reason, more=rest)


def prefixed(err: NodewrightValidationError, prefix: str, suffix: str = "") -> NodewrightValidationError:
    """``err`` with ``prefix`` in front of each problem's path (``documents[2]`` + ``spec.x`` ->
    ``documents[2].spec.x``) and ``suffix`` after each reason."""

    def change(path: str, reason: str) -> tuple[str, str]:
        joined = prefix if not path else (f"{prefix}{path}" if path.startswith("[") or not prefix else f"{prefix}.{path}")
        return joined, reason + suffix

    return err.rewrite(change)
