"""``nodewright.io/*`` NodePool annotations: one table of values, judged by the Python validator and by the
chart's ValidatingAdmissionPolicy (its CEL evaluated offline with cel-python), with the same messages."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from nodewright.api.annotations import (
    CONSOLIDATION_HYSTERESIS,
    CONSOLIDATION_MINIMUM_SAVING,
    CONSOLIDATION_MINIMUM_SAVING_PERCENT,
    MIN_NODE_LIFETIME,
    RULES,
    TARGET_UTILIZATION,
    annotation_problem,
    consolidation_hysteresis,
    consolidation_minimum_saving,
    document_annotation_problems,
    min_node_lifetime,
    nodepool_annotation_problems,
    target_utilization,
)

CHART = Path(__file__).resolve().parents[3] / "helm" / "nodewright"
TU, HY, LT = TARGET_UTILIZATION, CONSOLIDATION_HYSTERESIS, MIN_NODE_LIFETIME
MS, MP = CONSOLIDATION_MINIMUM_SAVING, CONSOLIDATION_MINIMUM_SAVING_PERCENT
TU_WANT = 'want a number in (0, 1] like "0.8", or a percentage in (0%, 100%] like "80%"'

# (key, value, what the reader returns; None = rejected). For target-utilization "pack fully" is None too, so
# accepted full-packing values are written as 1.0 here and mapped below.
TABLE: list[tuple[str, str, float | None]] = [
    (TU, "0.8", 0.8), (TU, ".75", 0.75), (TU, "0.05", 0.05), (TU, "1", 1.0), (TU, "1.0", 1.0), (TU, "01", 1.0),
    (TU, "80%", 0.8), (TU, "72.5%", 0.725), (TU, "100%", 1.0), (TU, "0.5%", 0.005), (TU, "5%", 0.05),
    (TU, "0", None), (TU, "0.0", None), (TU, "1.5", None), (TU, "80", None), (TU, "abc", None), (TU, "", None),
    (TU, "120%", None), (TU, "0%", None), (TU, "100.5%", None), (TU, "-0.5", None), (TU, "+0.8", None),
    (TU, "1e-1", None), (TU, " 0.8", None), (TU, "0.8 ", None), (TU, "1.", None), (TU, "nan", None),
    (TU, "inf", None), (TU, "0,8", None), (TU, "80 %", None), (TU, "%", None),
    (HY, "0.1", 0.1), (HY, "0", 0.0), (HY, "1", 1.0), (HY, "10%", 0.1), (HY, "0%", 0.0), (HY, "100%", 1.0),
    (HY, "1.5", None), (HY, "-0.1", None), (HY, "", None), (HY, "abc", None), (HY, "101%", None),
    (LT, "1h", 3600.0), (LT, "30m", 1800.0), (LT, "1h30m", 5400.0), (LT, "90s", 90.0),
    (LT, "1.5h", None), (LT, "Never", None), (LT, "", None), (LT, "1d", None), (LT, "-1h", None), (LT, "h", None),
    (MS, "0.05", 0.05), (MS, ".5", 0.5), (MS, "0", 0.0), (MS, "2", 2.0), (MS, "0.0125", 0.0125),
    (MS, "-0.05", None), (MS, "$0.05", None), (MS, "0.05/h", None), (MS, "1.", None), (MS, "", None),
    (MS, "5%", None), (MS, "1e-2", None),
    (MP, "10", 10.0), (MP, "10%", 10.0), (MP, "12.5", 12.5), (MP, "0", 0.0), (MP, "100", 100.0), (MP, ".5%", 0.5),
    (MP, "101", None), (MP, "100.5%", None), (MP, "-1", None), (MP, "0.1.", None), (MP, "", None), (MP, "ten", None),
]


def _read(key: str, annotations: dict[str, str]) -> float | None:
    if key in (MS, MP):
        return consolidation_minimum_saving(annotations)[0 if key == MS else 1]
    if key == TU:
        return target_utilization(annotations)
    if key == HY:
        return consolidation_hysteresis(annotations)
    return min_node_lifetime(annotations)


@pytest.mark.parametrize(("key", "value", "parsed"), TABLE)
def test_python_validator_and_readers(key: str, value: str, parsed: float | None) -> None:
    problems = nodepool_annotation_problems({key: value})
    if parsed is None:
        assert len(problems) == 1 and problems[0].path == f"metadata.annotations[{key}]"
        assert str(problems[0]) == (f'metadata.annotations[{key}]: "{value}" is not accepted; '
                                    f"want {RULES[key].accepted}")
        # Never raises: the default the pool keeps working with.
        assert _read(key, {key: value}) == {TU: None, HY: 0.1, LT: 0.0, MS: None, MP: None}[key]
    else:
        assert problems == []
        got = _read(key, {key: value})
        if key == TU and parsed == 1.0:
            assert got is None  # "1" / "100%": pack fully, exactly as without the annotation
        else:
            assert got == pytest.approx(parsed)


def test_the_briefs_malformed_values_get_one_clear_message_each() -> None:
    for value in ("0", "1.5", "abc", "", "120%"):
        (problem,) = nodepool_annotation_problems({TU: value, "other.io/x": "y"})
        assert str(problem) == f'metadata.annotations[nodewright.io/target-utilization]: "{value}" is not accepted; {TU_WANT}'


def test_unknown_nodewright_keys_are_rejected_others_ignored() -> None:
    problem = annotation_problem("nodewright.io/target-utilisation", "0.8")
    assert str(problem) == ("metadata.annotations[nodewright.io/target-utilisation]: unknown nodewright.io annotation "
                            "on a NodePool; known: nodewright.io/consolidation-hysteresis, "
                            "nodewright.io/consolidation-minimum-saving, nodewright.io/consolidation-minimum-saving-percent,"
                            " nodewright.io/min-node-lifetime, nodewright.io/target-utilization")
    assert annotation_problem("karpenter.sh/nodepool-hash", "x") is None
    assert target_utilization(None) is None and consolidation_hysteresis({}) == 0.1 and min_node_lifetime({}) == 0.0


def test_document_problems_name_document_kind_and_name() -> None:
    docs: list[dict[str, Any]] = [
        {"kind": "ConfigMap", "metadata": {"name": "c", "annotations": {TU: "abc"}}},
        {"kind": "NodePool", "metadata": {"name": "service", "annotations": {TU: "0.8"}}},
        {"kind": "Provisioner", "metadata": {"name": "default", "annotations": {TU: "120%", LT: "1d"}}},
    ]
    assert [str(p) for p in document_annotation_problems(docs)] == [
        'documents[2]: Provisioner default: metadata.annotations[nodewright.io/min-node-lifetime]: "1d" is not '
        'accepted; want a duration of whole h/m/s parts like "1h", "30m" or "1h30m"; using the default for that '
        "annotation (target-utilization: pack fully), as the controller would",
        f'documents[2]: Provisioner default: metadata.annotations[nodewright.io/target-utilization]: "120%" is not '
        f"accepted; {TU_WANT}; using the default for that annotation (target-utilization: pack fully), as the "
        "controller would",
    ]


# --- the chart's ValidatingAdmissionPolicy, evaluated with cel-python ------------------------------------------


def _policy() -> tuple[dict[str, Any], dict[str, Any]]:
    text = (CHART / "templates" / "validatingadmissionpolicy.yaml").read_text()
    text = re.sub(r"\{\{-? /\*.*?\*/\}\}", "", text, flags=re.S)  # the template's comment
    text = re.sub(r"\{\{.*?\}\}", "x", text)  # names and labels (not part of the rules)
    policy, binding = yaml.safe_load_all(text)
    return policy, binding


ENV = celpy.Environment()


def _admit(annotations: dict[str, str] | None, old: dict[str, str] | None = None) -> list[str]:
    """Messages of the failing validations for a NodePool with ``annotations`` (CREATE, or UPDATE from ``old``)."""
    policy, _ = _policy()
    obj = {"metadata": {"name": "service", **({"annotations": annotations} if annotations is not None else {})}}
    old_obj = None if old is None else {"metadata": {"name": "service", "annotations": old}}
    activation = {"object": celpy.json_to_cel(obj), "oldObject": celpy.json_to_cel(old_obj),
                  "request": celpy.json_to_cel({"operation": "CREATE" if old is None else "UPDATE"})}
    messages = []
    for rule in policy["spec"]["validations"]:
        if not ENV.program(ENV.compile(rule["expression"])).evaluate(activation):
            message = str(ENV.program(ENV.compile(rule["messageExpression"])).evaluate(activation))
            # The API server drops a messageExpression result that is blank or has a line break: then the
            # static message, else "failed expression: <expression>" (k8s.io/apiserver validating policy).
            if not message.strip() or "\n" in message or "\r" in message:
                message = rule.get("message") or f"failed expression: {rule['expression']}"
            messages.append(message)
    return messages


@pytest.mark.parametrize(("key", "value", "parsed"), TABLE)
def test_admission_policy_agrees_with_the_python_validator(key: str, value: str, parsed: float | None) -> None:
    assert _admit({key: value}) == [str(p) for p in nodepool_annotation_problems({key: value})]
    assert (_admit({key: value}) == []) == (parsed is not None)


@pytest.mark.parametrize("value", ["0.8\n", "abc\ndef", "\r", "80%\r\n"])
@pytest.mark.parametrize("key", [TU, HY, LT, MS, MP])
def test_values_with_a_line_break_keep_the_friendly_message(key: str, value: str) -> None:
    # Issue #26 item 8: the rejection is a sentence (the Python validator's), never the raw CEL expression.
    (message,) = _admit({key: value})
    assert message == str(annotation_problem(key, value))
    assert message.startswith(f"metadata.annotations[{key}]: a value with a line break is not accepted; want ")
    assert "\n" not in message and "\r" not in message


def test_every_rule_has_a_static_message() -> None:
    policy, _ = _policy()
    assert all(rule.get("message", "").startswith("metadata.annotations") for rule in policy["spec"]["validations"])


def test_admission_policy_unknown_key_no_annotations_and_ratcheting() -> None:
    assert _admit(None) == [] and _admit({"app": "x"}) == []
    assert _admit({"nodewright.io/target-utilisation": "0.8"}) == [
        str(annotation_problem("nodewright.io/target-utilisation", "0.8"))]
    # An UPDATE that keeps an old malformed value passes (so other controllers can still update the pool);
    # changing it to another malformed value does not.
    assert _admit({TU: "abc", "team": "a"}, old={TU: "abc"}) == []
    assert _admit({TU: "abcd"}, old={TU: "abc"}) == [
        f'metadata.annotations[nodewright.io/target-utilization]: "abcd" is not accepted; {TU_WANT}']


def test_admission_policy_shape_and_chart_kube_version() -> None:
    policy, binding = _policy()
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [{
        "apiGroups": ["karpenter.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
        "resources": ["nodepools"]}]
    assert policy["spec"]["failurePolicy"] == "Fail" and binding["spec"]["validationActions"] == ["Deny"]
    # Every rule's regular expression is the Python validator's, verbatim.
    text = (CHART / "templates" / "validatingadmissionpolicy.yaml").read_text()
    for rule in RULES.values():
        assert f".matches(r'{rule.pattern}')" in text
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.30.0-0"  # ValidatingAdmissionPolicy v1 is GA since 1.30


def test_values_schema_uses_the_same_patterns() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    pool = schema["definitions"]["nodePool"]["properties"]
    assert {k: v["pattern"] for k, v in pool["annotations"]["properties"].items()} == {
        k: r.pattern for k, r in RULES.items()}
    assert pool["targetUtilization"]["oneOf"][2]["pattern"] == RULES[TU].pattern
