"""settings.pricingPolicy: the PricingPolicy document rendered as a ConfigMap, mounted into the controller as a
directory (the kubelet refreshes it in place; the controller re-reads it) and named by NODEWRIGHT_PRICING_POLICY."""

from __future__ import annotations

import pytest
import yaml
from chart_helpers import ROOT, find, one, render_chart

from nodewright.pricing import load_pricing_policy, parse_pricing_policy

pytestmark = pytest.mark.chart

EXAMPLE = ROOT / "examples" / "pricing" / "savings-plan.yaml"
LABELS = {"helm.sh/chart": "nodewright-0.1.0", "app.kubernetes.io/name": "nodewright",
          "app.kubernetes.io/instance": "nodewright", "app.kubernetes.io/version": "0.1.0",
          "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "nodewright"}


@pytest.fixture(scope="module")
def with_policy(helm, tmp_path_factory) -> list[dict]:
    values = tmp_path_factory.mktemp("values") / "pricing.yaml"
    values.write_text(yaml.safe_dump({"settings": {"pricingPolicy": yaml.safe_load(EXAMPLE.read_text())}}))
    manifest = render_chart.render([render_chart.EXAMPLE_VALUES / "minimal.yaml", values], include_crds=False)
    return render_chart.documents(manifest)


def _controller(docs: list[dict]) -> dict:
    return one(docs, "Deployment", "nodewright")["spec"]["template"]


def test_policy_renders_as_a_configmap_holding_the_document(with_policy) -> None:
    cm = one(with_policy, "ConfigMap", "nodewright-pricing-policy")
    assert cm["metadata"] == {"name": "nodewright-pricing-policy", "namespace": "kube-system", "labels": LABELS}
    assert list(cm["data"]) == ["pricing-policy.yaml"]
    text = cm["data"]["pricing-policy.yaml"]
    assert yaml.safe_load(text) == yaml.safe_load(EXAMPLE.read_text())
    # The controller reads back the same policy the example file gives `simulate --pricing`.
    assert parse_pricing_policy(yaml.safe_load(text)) == load_pricing_policy(EXAMPLE)


def test_controller_mounts_the_directory_and_names_the_file(with_policy) -> None:
    template = _controller(with_policy)
    container = template["spec"]["containers"][0]
    assert {"name": "NODEWRIGHT_PRICING_POLICY", "value": "/etc/nodewright/pricing/pricing-policy.yaml"} in (
        container["env"])
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"},
                                         {"name": "pricing-policy", "mountPath": "/etc/nodewright/pricing",
                                          "readOnly": True}]
    assert template["spec"]["volumes"][1:] == [{"name": "pricing-policy",
                                                "configMap": {"name": "nodewright-pricing-policy"}}]
    # No subPath (the kubelet never refreshes a subPath mount) and no checksum annotation (it would restart the
    # controller on every policy change instead of letting it reload).
    assert all("subPath" not in m for m in container["volumeMounts"])
    assert not any(k.startswith("checksum/") for k in (template["metadata"].get("annotations") or {}))


def test_production_example_policy_is_valid(rendered) -> None:
    cm = one(rendered["production"], "ConfigMap", "nodewright-pricing-policy")
    policy = parse_pricing_policy(yaml.safe_load(cm["data"]["pricing-policy.yaml"]))
    assert [(p.type, p.commitment_usd_per_hour) for p in policy.spec.savings_plans] == [("Compute", 2.5)]


def test_no_policy_renders_nothing(rendered) -> None:
    for name, docs in rendered.items():
        if name == "production":
            continue
        assert find(docs, "ConfigMap", "nodewright-pricing-policy") == []
        container = _controller(docs)["spec"]["containers"][0]
        assert "NODEWRIGHT_PRICING_POLICY" not in {e["name"] for e in container["env"]}
        assert [v["name"] for v in _controller(docs)["spec"]["volumes"]] == ["tmp"]

