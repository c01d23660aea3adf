"""values.schema.json: wrong types, unknown keys and bad formats are rejected by helm with a message
naming the key; the shipped values files pass it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from chart_helpers import CHART, ROOT, render_chart

pytestmark = pytest.mark.chart

SCHEMA = json.loads((CHART / "values.schema.json").read_text())

# (values YAML, text helm's error must contain: the JSON pointer of the offending key, and why)
BAD_VALUES = [
    ("replicas: two", "at '/replicas': got string, want integer"),
    ("replica: 2", "additional properties 'replica' not allowed"),
    ("settings: {logLevel: verbose}", "at '/settings/logLevel': value must be one of"),
    ("settings: {batchMaxDuration: 10}", "at '/settings/batchMaxDuration': got number, want string"),
    ("settings: {batchIdleDuration: 1 second}", "at '/settings/batchIdleDuration'"),
    ("settings: {disruptionPollPeriod: 10 seconds}", "at '/settings/disruptionPollPeriod'"),
    ("settings: {multiNodeConsolidationTimeout: 60}", "at '/settings/multiNodeConsolidationTimeout'"),
    ("settings: {multiNodeConsolidationCandidates: 1}", "at '/settings/multiNodeConsolidationCandidates'"),
    ("settings: {consolidationReplacementPodShare: 10%}", "at '/settings/consolidationReplacementPodShare'"),
    ("settings: {consolidationReplacementPodShare: 1.5}", "at '/settings/consolidationReplacementPodShare'"),
    ("settings: {consolidationReplacementPodShare: '1.5'}", "at '/settings/consolidationReplacementPodShare'"),
    ("settings: {clusterEndpoint: 'http://insecure'}", "at '/settings/clusterEndpoint'"),
    ("settings: {interruptionQueue: 'https://sqs.ap-northeast-2.amazonaws.com/1/q'}", "at '/settings/interruptionQueue'"),
    ("serviceAccount: {create: 'yes'}", "at '/serviceAccount/create': got string, want boolean"),
    ("serviceAccount: {annotations: [eks.amazonaws.com/role-arn]}", "at '/serviceAccount/annotations': got array, want object"),
    ("nodeRole: 'arn:aws:iam::111122223333:role/node'", "at '/nodeRole'"),
    ("image: {digest: 'sha256:abc'}", "at '/image/digest'"),
    ("image: {pullPolicy: Sometimes}", "at '/image/pullPolicy'"),
    ("nodePools: {service: {annotations: {nodewright.io/target-utilization: 0.8}}}",
     "at '/nodePools/service/annotations/nodewright.io~1target-utilization': got number, want string"),
    ("nodePools: {service: {annotations: {nodewright.io/target-utilization: '120%'}, targetUtilization: null}}",
     "at '/nodePools/service/annotations/nodewright.io~1target-utilization': '120%' does not match pattern"),
    ("nodePools: {platform: {targetUtilization: 1.5}}", "at '/nodePools/platform/targetUtilization'"),
    ("nodePools: {platform: {targetUtilization: 0}}", "at '/nodePools/platform/targetUtilization'"),
    ("nodePools: {platform: {targetUtilization: abc}}", "at '/nodePools/platform/targetUtilization'"),
    ("nodePools: {low-spot: {requirements: [{key: kubernetes.io/arch, operator: Within, values: [arm64]}]}}",
     "at '/nodePools/low-spot/requirements/0/operator'"),
    ("nodePools: {low-spot: {taints: [{key: a, effect: NoScheduled}]}}", "at '/nodePools/low-spot/taints/0/effect'"),
    ("nodePools: {platform: {disruption: {consolidationPolicy: WhenUnderutilized}}}",
     "at '/nodePools/platform/disruption/consolidationPolicy'"),
    ("nodePools: {platform: {disruption: {budgets: [{nodes: '150%'}]}}}", "at '/nodePools/platform/disruption/budgets/0/nodes'"),
    ("nodePools: {platform: {weight: 0}}", "at '/nodePools/platform/weight'"),
    ("nodePools: {platform: {limits: {cpu: lots}}}", "at '/nodePools/platform/limits/cpu'"),
    ("nodePools: {platform: {ttlSecondsAfterEmpty: 30}}", "additional properties 'ttlSecondsAfterEmpty' not allowed"),
    ("nodePools: {Team_1: {enabled: true}}", "Team_1"),
    ("nodeClassDefaults: {metadataOptions: {httpTokens: optionall}}", "at '/nodeClassDefaults/metadataOptions/httpTokens'"),
    ("nodeClassDefaults: {amiSelectorTerms: [{alias: al2023}]}", "at '/nodeClassDefaults/amiSelectorTerms/0/alias'"),
    ("settings: {pricingPolicy: examples/pricing/savings-plan.yaml}", "at '/settings/pricingPolicy': got string, want object"),
    ("settings: {pricingPolicy: {apiVersion: v1, kind: PricingPolicy, spec: {}}}", "at '/settings/pricingPolicy/apiVersion'"),
    ("settings: {pricingPolicy: {kind: PricingPolicy, spec: {}}}", "at '/settings/pricingPolicy': missing property 'apiVersion'"),
    ("settings: {pricingPolicy: {apiVersion: nodewright.io/v1alpha1, kind: PricingPolicy, spec: {savingPlans: []}}}",
     "additional properties 'savingPlans' not allowed"),
]


@pytest.mark.parametrize(("values", "expected"), BAD_VALUES, ids=[v for v, _ in BAD_VALUES])
def test_bad_values_are_rejected_naming_the_key(helm, tmp_path, values, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(values + "\n")
    with pytest.raises(render_chart.HelmError) as err:
        render_chart.render([render_chart.EXAMPLE_VALUES / "minimal.yaml", path], include_crds=False)
    message = str(err.value)
    assert "values don't meet the specifications of the schema" in message
    assert expected in message


@pytest.mark.parametrize("path", [CHART / "values.yaml", *sorted((ROOT / "examples" / "values").glob("*.yaml"))],
                         ids=lambda p: Path(p).name)
def test_shipped_values_pass_the_schema_with_a_second_validator(path):
    # helm validates with its own Go library; jsonschema (Python) must agree on our files.
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    errors = [f"{e.json_path}: {e.message}" for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(
        yaml.safe_load(path.read_text()))]
    assert errors == []


def test_schema_keeps_the_infrastructure_contract():
    # The stacks set exactly these keys; renaming one would break the release silently.
    props = SCHEMA["properties"]
    assert SCHEMA["additionalProperties"] is False
    assert {"clusterName", "clusterEndpoint", "interruptionQueue", "batchIdleDuration", "batchMaxDuration",
            "logLevel", "featureGates"} <= set(props["settings"]["properties"])
    assert {"create", "name", "annotations"} <= set(props["serviceAccount"]["properties"])
    assert {"repository", "tag", "digest"} <= set(props["image"]["properties"])
    assert "nodeRole" in props
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert defaults["serviceAccount"]["name"] == "nodewright"
