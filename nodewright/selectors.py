"""Kubernetes label selectors (``metav1.LabelSelector``): the one implementation.

Used by pod (anti-)affinity and topology spread (the scheduler), PodDisruptionBudgets (disruption candidates,
the in-memory API server's evictions) and anything else that selects pods by labels. Semantics follow
``k8s.io/apimachinery`` ``LabelSelectorAsSelector``: ``matchLabels`` and ``matchExpressions`` ANDed; a
``None`` selector selects nothing, an empty one (``{}``) everything; an unknown operator selects nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``: matchLabels AND matchExpressions (In, NotIn, Exists, DoesNotExist).

    An unknown operator matches nothing: Kubernetes rejects such a selector (``LabelSelectorAsSelector``
    returns an error), and a selector that cannot be evaluated must not select pods by accident.
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> LabelSelector | None:
        """None stays None (selects nothing); ``{}`` selects everything."""
        if doc is None:
            return None
        labels = tuple(sorted((str(k), str(v)) for k, v in (doc.get("matchLabels") or {}).items()))
        exprs = tuple(
            (str(e.get("key", "")), str(e.get("operator", "In")), tuple(sorted(str(v) for v in e.get("values") or [])))
            for e in doc.get("matchExpressions") or []
        )
        return cls(labels, exprs)

    def with_labels(self, extra: Iterable[tuple[str, str]]) -> LabelSelector:
        """A copy with more ``matchLabels`` (used for ``matchLabelKeys``)."""
        return LabelSelector(tuple(sorted(set(self.match_labels) | set(extra))), self.match_expressions)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when ``labels`` satisfy every term."""
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for key, op, values in self.match_expressions:
            present = key in labels
            if op == "In":
                if not present or labels[key] not in values:
                    return False
            elif op == "NotIn":
                if present and labels[key] in values:
                    return False
            elif op == "Exists":
                if not present:
                    return False
            elif op == "DoesNotExist":
                if present:
                    return False
            else:
                return False
        return True


def selects(selector: Mapping[str, Any] | LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether a selector (a ``LabelSelector`` dict or model; None selects nothing) matches ``labels``."""
    if selector is None:
        return False
    model = selector if isinstance(selector, LabelSelector) else LabelSelector.from_dict(selector)
    return model is not None and model.matches(labels)
