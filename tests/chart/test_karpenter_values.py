"""A values file written for Karpenter 1.14.1's chart renders, with Karpenter's meaning for every key
(tests/chart/fixtures/karpenter-1.14.1-values.yaml); typos and settings nodewright cannot honour still fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from chart_helpers import Doc, find, one, render_chart

pytestmark = pytest.mark.chart

VALUES = Path(__file__).parent / "fixtures" / "karpenter-1.14.1-values.yaml"
SELECTOR = {"app.kubernetes.io/name": "nodewright", "app.kubernetes.io/instance": "nodewright"}
DIGEST = "sha256:4b1c5a2f1f0e7d9c3b2a19087f6e5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4"


@pytest.fixture(scope="module")
def docs(helm: Path) -> list[Doc]:
    return render_chart.documents(render_chart.render([VALUES], include_crds=False))


def _pod(docs: list[Doc]) -> dict:
    return one(docs, "Deployment")["spec"]["template"]["spec"]


def _env(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_controller_container(docs: list[Doc]) -> None:
    pod = _pod(docs)
    controller, sidecar = pod["containers"]
    assert controller["name"] == "controller"
    assert controller["image"] == f"111122223333.dkr.ecr.us-west-2.amazonaws.com/nodewright@{DIGEST}"
    assert controller["imagePullPolicy"] == "Always"
    assert controller["envFrom"] == [{"configMapRef": {"name": "controller-extra"}}]
    assert [p["containerPort"] for p in controller["ports"]] == [8000, 8001]
    assert controller["securityContext"]["appArmorProfile"] == {"type": "RuntimeDefault"}
    assert controller["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}  # {} keeps ours
    assert controller["securityContext"]["readOnlyRootFilesystem"] is True
    assert controller["volumeMounts"] == [
        {"name": "tmp", "mountPath": "/tmp"},
        {"name": "aws-iam-token", "mountPath": "/var/run/secrets/eks.amazonaws.com/serviceaccount",
         "readOnly": True}]
    assert sidecar == {"name": "log-shipper", "image": "public.ecr.aws/aws-observability/aws-for-fluent-bit:2.32.0",
                       "volumeMounts": [controller["volumeMounts"][1], {"name": "tmp", "mountPath": "/tmp"}]}


def test_settings_reach_the_controller_with_karpenters_env_names(docs: list[Doc]) -> None:
    env = _env(_pod(docs)["containers"][0])
    assert {k: v for k, v in env.items() if isinstance(v, str)} == {
        "CLUSTER_NAME": "demo",
        "CLUSTER_ENDPOINT": "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
        "INTERRUPTION_QUEUE": "demo",
        "BATCH_IDLE_DURATION": "1s",
        "BATCH_MAX_DURATION": "10s",
        "LOG_LEVEL": "debug",
        "LOG_OUTPUT_PATHS": "stdout",
        "PREFERENCE_POLICY": "Respect",
        "MIN_VALUES_POLICY": "Strict",
        "ISOLATED_VPC": "true",
        "EKS_CONTROL_PLANE": "true",
        "VM_MEMORY_OVERHEAD_PERCENT": "0.075",
        "RESERVED_ENIS": "1",
        "FEATURE_GATES": "CapacityBuffer=false,NodeOverlay=false,NodeRepair=false,ReservedCapacity=true,"
                         "SpotToSpotConsolidation=true,StaticCapacity=false",
        "AWS_FEATURE_GATES": "NodeClassCEL=false,RebootForRepair=false",
        "METRICS_PORT": "8000",
        "HEALTH_PROBE_PORT": "8001",
        "AWS_REGION": "us-west-2",
        "LEADER_ELECTION_NAME": "nodewright-leader",
    }


def test_pod_spec_keys(docs: list[Doc]) -> None:
    deploy = one(docs, "Deployment")
    assert deploy["spec"]["revisionHistoryLimit"] == 5
    assert deploy["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    pod = _pod(docs)
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert pod["dnsConfig"] == {"options": [{"name": "ndots", "value": "2"}]}
    assert pod["schedulerName"] == "default-scheduler"
    assert "terminationGracePeriodSeconds" not in pod  # null in the file: the Kubernetes default
    assert pod["securityContext"] == {"fsGroup": 65532, "runAsGroup": 65532, "runAsNonRoot": True,
                                      "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}
    assert [c["name"] for c in pod["initContainers"]] == ["wait-for-network"]
    assert [v["name"] for v in pod["volumes"]] == ["tmp", "aws-iam-token"]
    assert pod["imagePullSecrets"] == [{"name": "registry-creds"}]
    assert pod["serviceAccountName"] == "karpenter"


def test_affinity_keeps_the_users_terms_and_our_guard(docs: list[Doc]) -> None:
    affinity = _pod(docs)["affinity"]
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [{"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["system"]},
                              {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}]
    assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": SELECTOR}}]
    assert _pod(docs)["topologySpreadConstraints"][0]["labelSelector"] == {"matchLabels": SELECTOR}


def test_annotations_rbac_pdb_and_service_monitor(docs: list[Doc]) -> None:
    for kind in ("Deployment", "ServiceAccount", "Service", "PodDisruptionBudget", "ClusterRole",
                 "ClusterRoleBinding", "Role", "RoleBinding", "NetworkPolicy", "ServiceMonitor"):
        for doc in find(docs, kind):
            assert doc["metadata"]["annotations"]["example.com/owner"] == "platform-team", kind
            assert doc["metadata"]["labels"]["team"] == "platform", kind
    sa = one(docs, "ServiceAccount")
    assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == (
        "arn:aws:iam::111122223333:role/KarpenterControllerRole-demo")
    assert one(docs, "Service")["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert one(docs, "Service")["spec"]["ports"][0]["port"] == 8000
    assert one(docs, "ClusterRole")["rules"][-1] == {"apiGroups": [""], "resources": ["configmaps"],
                                                     "verbs": ["get", "list", "watch"]}
    assert one(docs, "PodDisruptionBudget")["metadata"]["name"] == "karpenter"
    monitor = one(docs, "ServiceMonitor")
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["relabelings"] == [{"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node"}]
    assert endpoint["metricRelabelings"][0]["action"] == "drop"
    assert endpoint["honorLabels"] is True
    assert monitor["spec"]["sampleLimit"] == 50000


@pytest.mark.parametrize(("values", "expected"), [
    ("controler: {containerName: c}", "additional properties 'controler' not allowed"),
    ("settings: {featureGate: {spotToSpotConsolidation: true}}", "additional properties 'featureGate' not allowed"),
    ("settings: {featureGates: {spotToSpot: true}}", "at '/settings/featureGates'"),
    ("settings: {preferencePolicy: Prefer}", "at '/settings/preferencePolicy'"),
    ("settings: {minValuesPolicy: Loose}", "at '/settings/minValuesPolicy'"),
    ("settings: {enableZonalShift: true}", "at '/settings/enableZonalShift'"),
    ("settings: {vmMemoryOverheadPercent: 7.5}", "at '/settings/vmMemoryOverheadPercent'"),
    ("controller: {securityContext: {privileged: true}}", "additional properties 'privileged' not allowed"),
    ("logErrorOutputPaths: [/var/log/errors]", "at '/logErrorOutputPaths/0'"),
    ("serviceMonitor: {relabeling: []}", "additional properties 'relabeling' not allowed"),
])
def test_typos_and_unsupported_settings_are_rejected(helm: Path, tmp_path: Path, values: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(values + "\n")
    with pytest.raises(render_chart.HelmError) as err:
        render_chart.render([VALUES, path], include_crds=False)
    assert expected in str(err.value)


def test_min_values_policy_best_effort_reaches_the_controller(helm: Path, tmp_path: Path) -> None:
    path = tmp_path / "best-effort.yaml"
    path.write_text("settings: {minValuesPolicy: BestEffort}\n")
    rendered = render_chart.documents(render_chart.render([VALUES, path], include_crds=False))
    assert _env(_pod(rendered)["containers"][0])["MIN_VALUES_POLICY"] == "BestEffort"


def test_rendered_builtin_objects_validate_strictly(docs: list[Doc]) -> None:
    import kubernetes_validate

    for doc in docs:
        if doc["apiVersion"].startswith(("karpenter.", "monitoring.coreos.com")):
            continue  # CRs: validated against our CRDs in test_validation.py
        kubernetes_validate.validate(doc, "1.31", strict=True)
