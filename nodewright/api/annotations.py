"""nodewright's own NodePool annotations (``nodewright.io/*``): the one validator, and their values.

Karpenter has no knob for these; nodewright reads them from NodePool ``metadata.annotations``:

=========================================  =====================================================  ==========
annotation                                 accepted values (the whole string must match)          default
=========================================  =====================================================  ==========
``nodewright.io/target-utilization``       a number in (0, 1] (``"0.8"``, ``".75"``, ``"1"``) or   1 (pack
                                           a percentage in (0%, 100%] (``"80%"``, ``"72.5%"``)      fully)
``nodewright.io/consolidation-hysteresis`` a number in [0, 1] (``"0.1"``) or a percentage in        0.1
                                           [0%, 100%] (``"10%"``)
``nodewright.io/min-node-lifetime``        a duration of whole ``h``/``m``/``s`` parts (``"1h"``,   0s
                                           ``"1h30m"``, ``"90s"``), Karpenter's duration grammar
``nodewright.io/consolidation-minimum-     USD per hour a consolidation move must save at least,   none
saving``                                   a number >= 0 (``"0.05"``, ``".5"``, ``"0"``)
``nodewright.io/consolidation-minimum-     percent of what the removed nodes cost a move must      none
saving-percent``                           save at least, in [0, 100] (``"10"``, ``"12.5%"``)
=========================================  =====================================================  ==========

The two minimum-saving annotations gate consolidation (delete and replace, single- and multi-node) at the prices
in force (effective marginal prices under a ``PricingPolicy``, list prices otherwise); a move spanning NodePools
must clear the strictest of each (:func:`nodewright.disruption.pricing.move_threshold`; ``docs/pricing.md``).

Numbers are plain decimals: digits with at most one ``.`` (a leading ``.`` is fine, ``"1."`` is not); no sign,
exponent, spaces, ``inf``/``nan``, and no empty string. Any other ``nodewright.io/`` key on a NodePool is
rejected as unknown (a typo such as ``target-utilisation`` would otherwise be silently ignored).

The same rules are enforced in three places, with the same message (:func:`annotation_problem`):

* at admission, by the chart's ValidatingAdmissionPolicy
  (``helm/nodewright/templates/validatingadmissionpolicy.yaml``), whose CEL uses the regular expressions of
  :data:`RULES` verbatim (RE2 and Python ``re`` agree on them; ``tests/unit/api/test_annotations.py`` evaluates
  the rendered CEL with ``cel-python`` against the same table of values as this module);
* in the controller (``nodewright.controllers.nodepool_status``): a NodePool with a malformed annotation keeps
  working with that annotation's default, and gets ``ValidationSucceeded=False`` (reason ``InvalidAnnotation``)
  and a Warning Event;
* in ``nodewright simulate`` and ``nodewright convert``: one ``warning:`` line on stderr per problem.

Readers never raise: :func:`target_utilization`, :func:`consolidation_hysteresis` and :func:`min_node_lifetime`
return the default for a malformed value, so a typo never drops a pool (its pods would go pending).
A target utilization of exactly 1 is returned as ``None``: the same as no annotation (full packing, and
consolidation without the hysteresis threshold), so ``"1"`` and ``"100%"`` mean "behave like Karpenter".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nodewright.api.durations import to_seconds
from nodewright.errors import NodewrightValidationError

PREFIX = "nodewright.io/"
TARGET_UTILIZATION = "nodewright.io/target-utilization"
CONSOLIDATION_HYSTERESIS = "nodewright.io/consolidation-hysteresis"
MIN_NODE_LIFETIME = "nodewright.io/min-node-lifetime"
CONSOLIDATION_MINIMUM_SAVING = "nodewright.io/consolidation-minimum-saving"
CONSOLIDATION_MINIMUM_SAVING_PERCENT = "nodewright.io/consolidation-minimum-saving-percent"

#: Hysteresis used when the annotation is absent or malformed (fraction of allocatable).
DEFAULT_HYSTERESIS = 0.1

# Plain decimals only. Each alternative is written so that the regular expression alone decides the range,
# which keeps the admission policy's CEL to ``matches()`` (no string-to-number conversion in CEL).
_OPEN_FRACTION = r"0*1(\.0+)?|0*\.[0-9]*[1-9][0-9]*"  # (0, 1]
_OPEN_PERCENT = r"(0*100(\.0+)?|0*[1-9][0-9]?(\.[0-9]+)?|0*\.[0-9]*[1-9][0-9]*)%"  # (0%, 100%]
_CLOSED_FRACTION = r"0*1(\.0+)?|0*\.[0-9]+|0+"  # [0, 1]
_CLOSED_PERCENT = r"(0*100(\.0+)?|0*[0-9]?[0-9](\.[0-9]+)?|0*\.[0-9]+)%"  # [0%, 100%]
_DURATION = r"([0-9]+(s|m|h))+"  # Karpenter's duration parts, without "Never"
_NON_NEGATIVE = r"[0-9]+(\.[0-9]+)?|\.[0-9]+"  # [0, inf): USD/hour
_PERCENT_NUMBER = r"(0*100(\.0+)?|0*[0-9]?[0-9](\.[0-9]+)?|0*\.[0-9]+)%?"  # [0, 100], "%" optional


@dataclass(frozen=True)
class AnnotationRule:
    """One ``nodewright.io/*`` NodePool annotation.

    Attributes:
        key: the annotation key.
        pattern: anchored regular expression (RE2 and Python syntax) the whole value must match.
        accepted: the accepted form, in words, as every rejection message ends.
    """

    key: str
    pattern: str
    accepted: str

    def matches(self, value: str) -> bool:
        """True when ``value`` is accepted."""
        return re.fullmatch(self.pattern, value) is not None


RULES: dict[str, AnnotationRule] = {
    rule.key: rule
    for rule in (
        AnnotationRule(TARGET_UTILIZATION, f"^({_OPEN_FRACTION}|{_OPEN_PERCENT})$",
                       'a number in (0, 1] like "0.8", or a percentage in (0%, 100%] like "80%"'),
        AnnotationRule(CONSOLIDATION_HYSTERESIS, f"^({_CLOSED_FRACTION}|{_CLOSED_PERCENT})$",
                       'a number in [0, 1] like "0.1", or a percentage in [0%, 100%] like "10%"'),
        AnnotationRule(MIN_NODE_LIFETIME, f"^{_DURATION}$",
                       'a duration of whole h/m/s parts like "1h", "30m" or "1h30m"'),
        AnnotationRule(CONSOLIDATION_MINIMUM_SAVING, f"^({_NON_NEGATIVE})$",
                       'USD per hour, a number >= 0 like "0.05"'),
        AnnotationRule(CONSOLIDATION_MINIMUM_SAVING_PERCENT, f"^{_PERCENT_NUMBER}$",
                       'a percentage in [0, 100] like "10" or "10%"'),
    )
}

#: Known keys, sorted (the admission policy lists them in its unknown-key rule).
KNOWN = tuple(sorted(RULES))

UNKNOWN_REASON = "unknown nodewright.io annotation on a NodePool; known: " + ", ".join(KNOWN)


def path_of(key: str) -> str:
    """Field path of an annotation, as every message names it: ``metadata.annotations[<key>]``."""
    return f"metadata.annotations[{key}]"


def annotation_problem(key: str, value: str) -> NodewrightValidationError | None:
    """Why ``key: value`` is not an acceptable NodePool annotation, or None (not ours, or fine).

    ``str()`` of the error is the exact message the admission policy answers with, e.g.
    ``metadata.annotations[nodewright.io/target-utilization]: "120%" is not accepted; want a number in (0, 1]
    like "0.8", or a percentage in (0%, 100%] like "80%"``.
    """
    if not key.startswith(PREFIX):
        return None
    rule = RULES.get(key)
    if rule is None:
        return NodewrightValidationError(path_of(key), UNKNOWN_REASON)
    if rule.matches(value):
        return None
    if "\n" in value or "\r" in value:  # one line, as the admission policy must answer (no line break)
        return NodewrightValidationError(path_of(key), f"a value with a line break is not accepted; want {rule.accepted}")
    return NodewrightValidationError(path_of(key), f'"{value}" is not accepted; want {rule.accepted}')


def nodepool_annotation_problems(annotations: Mapping[str, object] | None) -> list[NodewrightValidationError]:
    """Every malformed or unknown ``nodewright.io/*`` annotation of a NodePool, in key order (empty: all fine).

    Non-string values (a YAML number the API server would refuse) are judged by their ``str()``.
    """
    problems = []
    for key in sorted(annotations or {}):
        problem = annotation_problem(str(key), str((annotations or {})[key]))
        if problem is not None:
            problems.append(problem)
    return problems


def _fraction(value: str) -> float:
    """An accepted fraction or percentage as a fraction (``"80%"`` -> 0.8)."""
    return float(value[:-1]) / 100 if value.endswith("%") else float(value)


def _accepted(annotations: Mapping[str, object] | None, key: str) -> str | None:
    raw = (annotations or {}).get(key)
    if raw is None:
        return None
    value = str(raw)
    return value if RULES[key].matches(value) else None


def target_utilization(annotations: Mapping[str, object] | None) -> float | None:
    """``nodewright.io/target-utilization`` as a fraction in (0, 1); None = pack fully.

    None when the annotation is absent, malformed (reported by :func:`nodepool_annotation_problems`) or exactly
    1 / 100%.
    """
    value = _accepted(annotations, TARGET_UTILIZATION)
    if value is None:
        return None
    fraction = _fraction(value)
    return None if fraction >= 1.0 else fraction


def consolidation_hysteresis(annotations: Mapping[str, object] | None) -> float:
    """``nodewright.io/consolidation-hysteresis`` as a fraction in [0, 1]; :data:`DEFAULT_HYSTERESIS` when
    absent or malformed."""
    value = _accepted(annotations, CONSOLIDATION_HYSTERESIS)
    return DEFAULT_HYSTERESIS if value is None else _fraction(value)


def min_node_lifetime(annotations: Mapping[str, object] | None) -> float:
    """``nodewright.io/min-node-lifetime`` in seconds; 0 when absent or malformed."""
    value = _accepted(annotations, MIN_NODE_LIFETIME)
    return 0.0 if value is None else float(to_seconds(value) or 0)


def consolidation_minimum_saving(annotations: Mapping[str, object] | None) -> tuple[float | None, float | None]:
    """(``nodewright.io/consolidation-minimum-saving`` in USD/hour, ``...-minimum-saving-percent`` in percent);
    each None when absent or malformed (malformed values are reported by :func:`nodepool_annotation_problems`,
    and the move is then gated by the other limit, or by "saves something" alone)."""
    usd = _accepted(annotations, CONSOLIDATION_MINIMUM_SAVING)
    percent = _accepted(annotations, CONSOLIDATION_MINIMUM_SAVING_PERCENT)
    return (None if usd is None else float(usd),
            None if percent is None else float(percent.rstrip("%")))


def format_target(fraction: float | None) -> str:
    """How the effective target utilization is shown (simulate, NodePool status): ``"0.8"``, ``"1"``."""
    return "1" if fraction is None else f"{fraction:g}"


#: Kinds whose ``nodewright.io/*`` annotations are judged (a v1alpha5 Provisioner becomes a NodePool, keeping them).
NODEPOOL_KINDS = ("NodePool", "Provisioner")

#: What a CLI warning adds: the run goes on with the default, as the controller would.
FALLBACK_NOTE = "using the default for that annotation (target-utilization: pack fully), as the controller would"


def document_annotation_problems(documents: Sequence[Mapping[str, Any]]) -> list[NodewrightValidationError]:
    """Annotation problems of every NodePool/Provisioner in ``documents``, each path prefixed with
    ``documents[i]`` (so :meth:`nodewright.api.manifests.ManifestFiles.locate` can name the file) and the kind
    and name: ``documents[3]: NodePool service: metadata.annotations[...]: ...``."""
    out = []
    for index, doc in enumerate(documents):
        kind = doc.get("kind")
        if kind not in NODEPOOL_KINDS:
            continue
        raw = doc.get("metadata")
        meta: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        for problem in nodepool_annotation_problems(meta.get("annotations")):
            where = f"{kind} {meta.get('name', '')}: {problem.path}"
            out.append(NodewrightValidationError(f"documents[{index}]", f"{where}: {problem.reason}; {FALLBACK_NOTE}"))
    return out
