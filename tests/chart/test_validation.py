"""Every rendered object validates: built-in kinds with kubernetes-validate --strict for Kubernetes
1.31 through 1.34; NodePools and EC2NodeClasses against our own CRDs' openAPIV3Schema (jsonschema)
and against the API models the CRDs are generated from."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from chart_helpers import CHART, find

pytestmark = pytest.mark.chart

KUBERNETES_VERSIONS = ["1.31", "1.32", "1.33", "1.34"]
# Custom resources: ours are checked against our CRDs below; the ServiceMonitor's fields are
# asserted in test_controller.py (its CRD belongs to prometheus-operator).
CUSTOM_KINDS = {"NodePool", "EC2NodeClass", "ServiceMonitor"}
CRD_FILES = {
    "NodePool": "karpenter.sh_nodepools.yaml",
    "EC2NodeClass": "karpenter.k8s.aws_ec2nodeclasses.yaml",
}


def _builtin_objects(rendered: dict[str, list[dict]]) -> list[dict]:
    """Distinct built-in objects over all variants (identical ones validated once)."""
    seen: dict[str, dict] = {}
    for docs in rendered.values():
        for doc in docs:
            if doc["kind"] not in CUSTOM_KINDS:
                seen.setdefault(json.dumps(doc, sort_keys=True), doc)
    return list(seen.values())


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_builtin_objects_validate_strictly(rendered, version):
    objects = _builtin_objects(rendered)
    kinds = {d["kind"] for d in objects}
    assert kinds == {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                     "RoleBinding", "Service", "PodDisruptionBudget", "ConfigMap", "NetworkPolicy",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    errors = []
    for doc in objects:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(f"{doc['kind']}/{doc['metadata']['name']}: {'.'.join(map(str, err.path))}: {err.message}")
    assert errors == []


def test_strict_validation_catches_an_unknown_field(rendered):
    # Negative control: the validator really rejects what the API server would.
    deploy = copy.deepcopy(find(rendered["minimal"], "Deployment")[0])
    deploy["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFS"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deploy, "1.31", strict=True)


def test_crds_validate_as_builtin_objects():
    for path in sorted((CHART / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in KUBERNETES_VERSIONS:
            kubernetes_validate.validate(crd, version, strict=True)


def _strict(schema: Any) -> Any:
    """Close every object schema that lists properties, as `kubectl apply --validate=strict` does
    for custom resources (unknown fields are errors, not silently pruned)."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) if key != "properties" else {k: _strict(v) for k, v in value.items()}
           for key, value in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def _crd_validator(kind: str) -> jsonschema.Draft7Validator:
    path: Path = CHART / "crds" / CRD_FILES[kind]
    if not path.exists():
        pytest.skip(f"{path} is missing: run `make crds` (nodewright crds --output-dir helm/nodewright/crds)")
    crd = yaml.safe_load(path.read_text())
    assert crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return jsonschema.Draft7Validator(_strict(served["schema"]["openAPIV3Schema"]))


@pytest.fixture(scope="module")
def crd_validators() -> dict[str, jsonschema.Draft7Validator]:
    return {kind: _crd_validator(kind) for kind in CRD_FILES}


def test_nodepools_and_nodeclasses_match_our_crds(rendered, crd_validators):
    checked = 0
    errors = []
    for variant, docs in rendered.items():
        for kind, validator in crd_validators.items():
            for doc in find(docs, kind):
                checked += 1
                errors += [f"{variant} {kind}/{doc['metadata']['name']}: {e.json_path}: {e.message}"
                           for e in validator.iter_errors(doc)]
    assert errors == []
    # minimal, production, bottlerocket: 3 pools + 3 classes; custom-pools: 3 pools + 2 classes.
    assert checked == 3 * 6 + 5


def test_crd_schema_rejects_a_broken_nodepool(rendered, crd_validators):
    pool = copy.deepcopy(find(rendered["minimal"], "NodePool", "low-spot")[0])
    pool["spec"]["template"]["spec"]["requirements"][0]["operator"] = "Within"
    pool["spec"]["disruption"]["consolidationPolicy"] = "WhenUnderutilized"  # v1beta1 spelling
    messages = [e.message for e in crd_validators["NodePool"].iter_errors(pool)]
    assert len(messages) == 2, messages


def test_nodepools_and_nodeclasses_parse_with_the_api_models(rendered):
    # The models also enforce what the CRDs express as CEL rules (role xor instanceProfile, ...).
    api = pytest.importorskip("nodewright.api")
    for docs in rendered.values():
        for doc in find(docs, "NodePool"):
            pool = api.parse_nodepool(doc)
            assert pool.metadata.name == doc["metadata"]["name"]
        for doc in find(docs, "EC2NodeClass"):
            node_class = api.parse_ec2nodeclass(doc)
            assert node_class.spec.role == doc["spec"]["role"]
