"""Property tests: valid NodePools survive dump -> load unchanged; junk only ever raises
NodewrightValidationError (from parsing, conversion and YAML loading)."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodewright.api import (
    convert_documents,
    load_manifests,
    parse_ec2nodeclass,
    parse_nodeclaim,
    parse_nodepool,
)
from nodewright.errors import NodewrightValidationError

from .helpers import ec2nodeclass, nodeclaim, nodepool

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

names = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,12}[a-z0-9])?", fullmatch=True)
label_values = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?", fullmatch=True)
custom_keys = st.builds(lambda n: f"example.com/{n}", names)
well_known = st.sampled_from([
    "karpenter.sh/capacity-type", "kubernetes.io/arch", "topology.kubernetes.io/zone",
    "node.kubernetes.io/instance-type", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-cpu",
])
keys = st.one_of(custom_keys, well_known)
durations = st.builds(lambda n, u: f"{n}{u}", st.integers(0, 10_000), st.sampled_from("smh"))
nillable = st.one_of(durations, st.just("Never"))
quantities = st.one_of(
    st.builds(str, st.integers(0, 10_000)),
    st.builds(lambda n, s: f"{n}{s}", st.integers(1, 4096), st.sampled_from(["m", "Mi", "Gi", "k", "G"])),
)


@st.composite
def requirements(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]))
    req: dict[str, Any] = {"key": draw(keys), "operator": op}
    if op in ("In", "NotIn"):
        req["values"] = draw(st.lists(label_values, min_size=1 if op == "In" else 0, max_size=4))
    elif op in ("Gt", "Lt", "Gte", "Lte"):
        req["values"] = [str(draw(st.integers(0, 1000)))]
    if op == "In" and draw(st.booleans()):
        req["minValues"] = draw(st.integers(1, len(req["values"])))
    return req


taints = st.builds(
    lambda k, v, e: {"key": k, **({"value": v} if v else {}), "effect": e},
    custom_keys, st.one_of(st.none(), label_values), st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
)
budgets = st.one_of(
    st.builds(lambda n: {"nodes": n}, st.one_of(st.builds(str, st.integers(0, 50)),
                                                 st.builds(lambda p: f"{p}%", st.integers(0, 100)))),
    st.builds(lambda n, s, d, r: {"nodes": n, "schedule": s, "duration": d, **({"reasons": r} if r else {})},
              st.builds(str, st.integers(0, 5)), st.sampled_from(["@daily", "0 9 * * mon-fri", "*/15 * * * *"]),
              st.sampled_from(["8h", "30m", "1h30m"]),
              st.lists(st.sampled_from(["Underutilized", "Empty", "Drifted"]), unique=True, max_size=3)),
)


@st.composite
def nodepools(draw: st.DrawFn) -> dict[str, Any]:
    tspec: dict[str, Any] = {
        "requirements": draw(st.lists(requirements(), max_size=6)),
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": draw(names)},
    }
    if draw(st.booleans()):
        tspec["taints"] = draw(st.lists(taints, max_size=3))
    if draw(st.booleans()):
        tspec["startupTaints"] = draw(st.lists(taints, max_size=2))
    if draw(st.booleans()):
        tspec["expireAfter"] = draw(nillable)
    if draw(st.booleans()):
        tspec["terminationGracePeriod"] = draw(durations)
    template: dict[str, Any] = {"spec": tspec}
    if draw(st.booleans()):
        template["metadata"] = {"labels": draw(st.dictionaries(custom_keys, label_values, max_size=3))}
    spec: dict[str, Any] = {"template": template}
    if draw(st.booleans()):
        disruption: dict[str, Any] = {
            "consolidationPolicy": draw(st.sampled_from(["WhenEmpty", "WhenEmptyOrUnderutilized"])),
            "consolidateAfter": draw(nillable),
        }
        if draw(st.booleans()):
            disruption["budgets"] = draw(st.lists(budgets, max_size=4))
        spec["disruption"] = disruption
    if draw(st.booleans()):
        spec["limits"] = draw(st.dictionaries(st.sampled_from(["cpu", "memory", "nodes", "nvidia.com/gpu"]),
                                              quantities, max_size=4))
    if draw(st.booleans()):
        spec["weight"] = draw(st.integers(1, 100))
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": draw(names)}, "spec": spec}


@SETTINGS
@given(nodepools())
def test_valid_nodepool_survives_dump_and_load(doc: dict[str, Any]) -> None:
    pool = parse_nodepool(doc)
    dumped = pool.to_manifest()
    again = parse_nodepool(dumped)
    assert again == pool
    assert again.to_manifest() == dumped
    # ...and through YAML text, as `kubectl get -o yaml` would hand it back.
    [reloaded] = load_manifests(yaml.safe_dump(dumped))
    assert parse_nodepool(reloaded) == pool
    # What the user wrote is kept; only defaults are added.
    assert dumped["spec"]["template"]["spec"]["requirements"] == doc["spec"]["template"]["spec"]["requirements"]


json_leaves = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False),
                        st.text(max_size=12))
junk = st.recursive(json_leaves, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                    max_leaves=20)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, prefix + (i,))
    return out


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    doc = copy.deepcopy(doc)
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return doc


VALID = {"NodePool": (nodepool, parse_nodepool), "EC2NodeClass": (ec2nodeclass, parse_ec2nodeclass),
         "NodeClaim": (nodeclaim, parse_nodeclaim)}


@SETTINGS
@given(st.sampled_from(sorted(VALID)), st.data(), junk)
def test_junk_inside_valid_objects_raises_only_validation_errors(kind: str, data: st.DataObject, value: Any) -> None:
    make, parse = VALID[kind]
    doc = make()
    path = data.draw(st.sampled_from(_paths(doc)))
    broken = _replace(doc, path, value)
    try:
        parse(broken)
    except NodewrightValidationError as err:
        assert err.reason
    try:
        convert_documents([broken])
    except NodewrightValidationError as err:
        assert err.reason


OLD_KINDS = [("karpenter.sh/v1alpha5", "Provisioner"), ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"),
             ("karpenter.sh/v1beta1", "NodePool"), ("karpenter.k8s.aws/v1beta1", "EC2NodeClass"),
             ("karpenter.sh/v1beta1", "NodeClaim"), ("v1", "Pod"), ("apps/v1", "Deployment"),
             ("batch/v1", "CronJob"), ("v1", "Node")]


@SETTINGS
@given(st.sampled_from(OLD_KINDS), junk, junk)
def test_junk_old_objects_convert_or_raise_validation_errors(kind: tuple[str, str], meta: Any, spec: Any) -> None:
    doc = {"apiVersion": kind[0], "kind": kind[1], "metadata": meta, "spec": spec}
    try:
        convert_documents([doc])
    except NodewrightValidationError as err:
        assert err.path.startswith("documents[0]")


@SETTINGS
@given(junk)
def test_junk_top_level_raises_only_validation_errors(value: Any) -> None:
    for parse in (parse_nodepool, parse_ec2nodeclass, parse_nodeclaim):
        try:
            parse(value)
        except NodewrightValidationError:
            pass


@SETTINGS
@given(st.text(max_size=200))
def test_junk_yaml_text_raises_only_validation_errors(text: str) -> None:
    try:
        docs = load_manifests(text)
    except NodewrightValidationError as err:
        assert err.path.startswith("documents[")
        return
    assert all(isinstance(d, dict) for d in docs)
