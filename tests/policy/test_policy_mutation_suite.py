"""The gate's mutation suite, run on the rules directly (fast; the real checkov run over the real outputs is in
``test_policy_gate.py``): every injected mistake is caught by its check, every reasonable configuration passes.

Project: the hand-written synthesis (``fixtures/stacks``) and the chart cut to the checked kinds
(``fixtures/chart/minimal.yaml``, annotated with the stacks' controller role). The catch rate is asserted
exactly: a mistake that slips through fails here with its name.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nw_k8s_rules
import nw_stack_rules
import pytest
import yaml

from . import policy_mutations as mut
from .conftest import FIXTURES, project_of_docs

CHART = [d for d in yaml.safe_load_all((FIXTURES / "chart" / "minimal.yaml").read_text()) if d]


def tf_findings(docs: dict[str, Any]) -> set[str]:
    return {f.check_id for f in nw_stack_rules.analyze(project_of_docs(docs)).findings}


def k8s_findings(objs: list[dict[str, Any]], docs: dict[str, Any]) -> set[str]:
    trusts = nw_stack_rules.irsa_trusts(project_of_docs(docs))
    found = set()
    for obj in objs:
        for check_id, problems in nw_k8s_rules.check(obj).items():
            if check_id == "CKV_NW_12":
                problems = nw_k8s_rules.service_account_problems(obj, trusts) or []
            if problems:
                found.add(check_id)
    return found


def test_the_unmutated_project_and_chart_pass(docs):
    assert tf_findings(docs) == set()
    assert k8s_findings(copy.deepcopy(CHART), docs) == set()


@pytest.mark.parametrize("name", sorted(mut.TF_VARIANTS))
def test_stack_mistake_is_caught_by_its_check(docs, name):
    mutate, check_id = mut.TF_VARIANTS[name]
    assert mutate(docs) >= 1
    assert check_id in tf_findings(docs)


@pytest.mark.parametrize("name", sorted(mut.K8S_VARIANTS))
def test_chart_mistake_is_caught_by_its_check(docs, name):
    mutate, check_id = mut.K8S_VARIANTS[name]
    objs = copy.deepcopy(CHART)
    assert mutate(objs) >= 1
    assert check_id in k8s_findings(objs, docs)


@pytest.mark.parametrize("name", sorted(mut.TF_CONTROLS))
def test_reasonable_stack_configuration_passes(docs, name):
    assert mut.TF_CONTROLS[name](docs) >= 1
    report = nw_stack_rules.analyze(project_of_docs(docs))
    assert report.findings == []
    evaluated = {c for c, _p, _a in report.evaluated}
    assert {"CKV_NW_1", "CKV_NW_2", "CKV_NW_3", "CKV_NW_5", "CKV_NW_6", "CKV_NW_7"} <= evaluated


@pytest.mark.parametrize("name", sorted(mut.K8S_CONTROLS))
def test_reasonable_chart_configuration_passes(docs, name):
    objs = copy.deepcopy(CHART)
    assert mut.K8S_CONTROLS[name](objs) >= 1
    assert k8s_findings(objs, docs) == set()


def test_catch_rate_is_every_mistake(docs):
    caught = []
    for name, (mutate, check_id) in mut.TF_VARIANTS.items():
        variant = copy.deepcopy(docs)
        mutate(variant)
        caught += [name] if check_id in tf_findings(variant) else []
    for name, (mutate, check_id) in mut.K8S_VARIANTS.items():
        objs = copy.deepcopy(CHART)
        mutate(objs)
        caught += [name] if check_id in k8s_findings(objs, docs) else []
    total = len(mut.TF_VARIANTS) + len(mut.K8S_VARIANTS)
    assert (len(caught), total) == (34, 34), sorted((set(mut.TF_VARIANTS) | set(mut.K8S_VARIANTS)) - set(caught))


def test_messages_say_what_is_wrong(docs):
    variant = copy.deepcopy(docs)
    mut.passrole_prefix_wildcard(variant)
    messages = [f.message for f in nw_stack_rules.analyze(project_of_docs(variant)).findings if f.check_id == "CKV_NW_2"]
    assert any("aws_iam_role.controller" in m and "wildcard" in m for m in messages), messages
    objs = copy.deepcopy(CHART)
    mut.chart_service_account_renamed(objs)
    sa = next(o for o in objs if o["kind"] == "ServiceAccount")
    assert nw_k8s_rules.service_account_problems(sa, nw_stack_rules.irsa_trusts(project_of_docs(docs))) == [
        "ServiceAccount system:serviceaccount:kube-system:karpenter is annotated with role nodewright-controller, "
        "whose trust names ['system:serviceaccount:kube-system:nodewright']: sts:AssumeRoleWithWebIdentity will "
        "be denied."]
    assert Path(FIXTURES / "chart" / "minimal.yaml").is_file()


def test_a_literal_role_arn_is_held_to_the_trust_of_a_stack_scanned_in_the_same_run(docs):
    """The release's stack alone (its role lives in another stack): the trusts of the other scanned stacks decide."""
    trusts = nw_stack_rules.irsa_trusts(project_of_docs(docs))
    mut.release_literal_role_arn_service_account_renamed(docs)
    alone = project_of_docs({"addons": docs["addons"]})
    assert nw_stack_rules.analyze(alone).findings == []  # nothing to compare with: not guessed
    (finding,) = nw_stack_rules.analyze(alone, trusts).findings
    assert (finding.check_id, finding.address) == ("CKV_NW_12", "helm_release.nodewright")
    assert finding.message == (
        "The release installs ServiceAccount system:serviceaccount:kube-system:karpenter but role "
        "nodewright-controller (arn:aws:iam::111122223333:role/nodewright-controller, a scanned stack) trusts "
        "['system:serviceaccount:kube-system:nodewright']: sts:AssumeRoleWithWebIdentity will be denied.")
