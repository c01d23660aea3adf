"""PromQL references, read without a PromQL parser (none ships for Python): which metrics a query selects and
which labels it matches, groups or joins on; and the series :class:`nodewright.metrics.Metrics` registers. Used by
the dashboard tests (``test_dashboard_metrics.py``) and the alert tests (``tests/alerts``).

Selectors ``metric{label op "value"}``, aggregations ``sum by (labels) (...)`` / ``sum (...) by (labels)``,
functions, ranges ``[...]`` and Grafana's ``label_values(metric, label)`` template queries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.metrics import MetricWrapperBase

from nodewright.metrics import Metrics

DASHBOARDS = sorted((Path(__file__).resolve().parents[2] / "helm" / "nodewright" / "dashboards").glob("*.json"))
AGGREGATIONS = {"sum", "min", "max", "avg", "count", "stddev", "stdvar", "group", "topk", "bottomk",
                "quantile", "count_values"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or",
            "unless"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|(?P<range>\[[^\]]*\])'
                    r'|(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)|(?P<num>\d+(?:\.\d+)?)|(?P<op>=~|!~|!=|==|>=|<=|.))')


@dataclass
class MetricRef:
    """One metric selector in a query and the labels the query uses on it."""

    name: str
    labels: set[str] = field(default_factory=set)


def tokenize(expr: str) -> list[tuple[str, str]]:
    """``(kind, text)`` tokens: str, range, ident, num, op."""
    tokens = []
    for match in _TOKEN.finditer(expr.strip()):
        kind = match.lastgroup
        if kind is not None:
            tokens.append((kind, match.group(kind)))
    return tokens


def _names_until(tokens: list[tuple[str, str]], i: int, close: str) -> tuple[set[str], int]:
    """Identifiers between ``tokens[i]`` (an opening ``(`` or ``{``) and ``close``: the labels of ``( a, b )``
    or the label names of ``{a="x", b=~"y"}``; returns them and the index after ``close``."""
    labels, i = set(), i + 1
    while tokens[i][1] != close:
        if tokens[i][0] == "ident":
            labels.add(tokens[i][1])
        i += 1
    return labels, i + 1


def _label_list(tokens: list[tuple[str, str]], i: int) -> tuple[set[str], int]:
    return _names_until(tokens, i, ")")


def _matchers(tokens: list[tuple[str, str]], i: int) -> tuple[set[str], int]:
    return _names_until(tokens, i, "}")


def metric_refs(expr: str) -> list[MetricRef]:
    """Every metric selector of a PromQL expression with the labels matched on it and grouped by around it."""
    tokens = tokenize(expr)
    # Frames of open parentheses: (metrics inside, grouping labels, opened by an aggregation).
    stack: list[tuple[list[MetricRef], set[str], bool]] = [([], set(), False)]
    pending_group: set[str] | None = None
    pending_aggregation = False
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind == "ident" and text in ("by", "without") and nxt == "(" and pending_aggregation:
            pending_group, i = _label_list(tokens, i + 1)  # sum by (a) (...)
            continue
        if kind == "ident" and text in KEYWORDS:  # on (a), ignoring (a), group_left (a): vector matching
            i = _label_list(tokens, i + 1)[1] if nxt == "(" else i + 1
            continue
        if kind == "ident" and i > 0 and tokens[i - 1][0] == "num":  # a duration unit (offset 5m)
            i += 1
            continue
        if kind == "ident" and (nxt == "(" or (text in AGGREGATIONS and nxt in ("by", "without"))):
            # a function or an aggregation (whose "by (...)" may come first)
            pending_aggregation = text in AGGREGATIONS
            pending_group = set() if pending_aggregation else None
            i += 1
            continue
        if kind == "ident":
            ref = MetricRef(text)
            i += 1
            if nxt == "{":
                ref.labels, i = _matchers(tokens, i)
            stack[-1][0].append(ref)
            continue
        if text == "(":
            stack.append(([], pending_group or set(), pending_aggregation))
            pending_group, pending_aggregation = None, False
        elif text == ")":
            refs, group, aggregation = stack.pop()
            if aggregation and i + 1 < len(tokens) and tokens[i + 1][1] in ("by", "without"):
                more, i = _label_list(tokens, i + 2)  # sum (...) by (a)
                group, i = group | more, i - 1
            for ref in refs:
                ref.labels |= group
            stack[-1][0].extend(refs)
        i += 1
    return stack[0][0]


def value_selectors(expr: str) -> list[str]:
    """The selectors of ``expr`` that pin a label to literal values, reduced to those matchers:
    ``metric{reason="empty",nodepool=~"$nodepool"}`` -> ``metric{reason="empty"}``. Negative matchers (``!=``,
    ``!~``) and values holding a Grafana variable are left out (they filter nothing out of a scrape that has
    the value). A dashboard or alert that filters on a value the controller never writes (a label value renamed,
    ``Empty`` -> ``empty``) silently returns nothing; querying these selectors against a real scrape finds it."""
    tokens = tokenize(expr)
    out = []
    for i, (kind, text) in enumerate(tokens[:-1]):
        if kind != "ident" or tokens[i + 1][1] != "{" or (i > 0 and tokens[i - 1][1] in ("by", "without")):
            continue
        matchers, j = [], i + 2
        while j + 2 < len(tokens) and tokens[j][1] != "}":
            label, op, value = tokens[j][1], tokens[j + 1][1], tokens[j + 2][1]
            if tokens[j][0] == "ident" and op in ("=", "=~") and tokens[j + 2][0] == "str" and "$" not in value:
                matchers.append(f"{label}{op}{value}")
            j += 3 if tokens[j][0] == "ident" else 1
        if matchers:
            out.append(f"{text}{{{','.join(matchers)}}}")
    return out


def template_refs(query: str) -> list[MetricRef]:
    """Grafana's ``label_values(metric, label)`` template query, else the query as PromQL."""
    match = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{[^}]*\})?\s*,\s*(\w+)\s*\)\s*", query)
    if match:
        return [MetricRef(match.group(1), {match.group(2)})]
    return metric_refs(query)


def dashboard_queries(doc: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """``(where, query, is_template)`` for every panel target (rows' nested panels too) and template variable."""
    out: list[tuple[str, str, bool]] = []
    panels = list(doc.get("panels") or [])
    while panels:
        panel = panels.pop(0)
        panels.extend(panel.get("panels") or [])
        for target in panel.get("targets") or []:
            if target.get("expr"):
                out.append((f"panel {panel.get('title')!r}", target["expr"], False))
    for var in (doc.get("templating") or {}).get("list") or []:
        query = var.get("query")
        text = query.get("query") if isinstance(query, dict) else query
        if var.get("type") == "query" and text:
            out.append((f"variable {var.get('name')!r}", text, True))
    return out


def registered_series() -> dict[str, tuple[str, set[str]]]:
    """Series name as PromQL sees it -> (metric type, label names), for every metric ``Metrics`` registers (its
    metric objects and its scrape-time collectors)."""
    metrics = Metrics()
    series: dict[str, tuple[str, set[str]]] = {}
    for collector in vars(metrics).values():
        if not isinstance(collector, MetricWrapperBase):
            for computed in collector.describe() if hasattr(collector, "describe") else ():
                # a collector computing gauge families at scrape time (instance types, NodeClaim conditions)
                series[computed.name] = (computed.type, set(computed._labelnames))
            continue
        family = collector.describe()[0]
        labels = set(collector._labelnames)  # prometheus_client keeps label names only here
        if family.type == "counter":
            series[f"{family.name}_total"] = ("counter", labels)
        elif family.type in ("histogram", "summary"):
            for suffix in HISTOGRAM_SUFFIXES:
                extra = {"le"} if suffix == "_bucket" else set()
                series[f"{family.name}{suffix}"] = (family.type, labels | extra)
        else:
            series[family.name] = (family.type, labels)
    return series


def problems(refs: list[MetricRef], series: dict[str, tuple[str, set[str]]]) -> list[str]:
    """Why the refs do not match the registered metrics (empty when they all do)."""
    out = []
    for ref in refs:
        if ref.name not in series:
            base = next((ref.name[: -len(s)] for s in HISTOGRAM_SUFFIXES if ref.name.endswith(s)), ref.name)
            out.append(f"{ref.name}: metric {base} is not registered by nodewright.metrics")
            continue
        missing = ref.labels - series[ref.name][1]
        if missing:
            out.append(f"{ref.name}: no label(s) {sorted(missing)} (has {sorted(series[ref.name][1])})")
    return out


#: Grafana's interval variables and a stand-in for each; other ``$var``s become ``.*`` (All).
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


def grafana_to_promql(query: str) -> str:
    """A dashboard query as Prometheus receives it: interval variables as durations, every other variable
    (``$nodepool``, ``${controller}``) as ``.*`` (Grafana's All)."""
    for name, value in GRAFANA_INTERVALS.items():
        query = query.replace(name, value)
    return re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", ".*", query)
