"""The controller release: Deployment, ServiceAccount, PDB, Service, ServiceMonitor, namespace."""

from __future__ import annotations

import pytest
from chart_helpers import find, one

pytestmark = pytest.mark.chart

SELECTOR = {"app.kubernetes.io/name": "nodewright", "app.kubernetes.io/instance": "nodewright"}


def _pod(docs):
    return one(docs, "Deployment", "nodewright")["spec"]["template"]["spec"]


def _container(docs):
    containers = _pod(docs)["containers"]
    assert [c["name"] for c in containers] == ["controller"]
    return containers[0]


def _env(docs):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _container(docs)["env"]}


def test_deployment_replicas_rollout_and_placement(rendered):
    deploy = one(rendered["minimal"], "Deployment", "nodewright")
    assert deploy["metadata"]["namespace"] == "kube-system"
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    assert deploy["spec"]["selector"]["matchLabels"] == SELECTOR
    pod = deploy["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["serviceAccountName"] == "nodewright"
    assert pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}
        ]
    }
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": SELECTOR}}
    ]
    assert pod["topologySpreadConstraints"] == [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": SELECTOR}}
    ]


@pytest.mark.parametrize("variant", ["default", "minimal", "production", "bottlerocket", "custom-pools"])
def test_restricted_security_context_in_every_variant(rendered, variant):
    pod = _pod(rendered[variant])
    assert pod["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert _container(rendered[variant])["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
        "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False, "privileged": False,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    # The read-only root filesystem leaves /tmp as the only writable path (production's pricing policy is a
    # read-only ConfigMap mount).
    policy = variant == "production"
    assert _container(rendered[variant])["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}] + (
        [{"name": "pricing-policy", "mountPath": "/etc/nodewright/pricing", "readOnly": True}] if policy else [])
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}] + (
        [{"name": "pricing-policy", "configMap": {"name": "nodewright-pricing-policy"}}] if policy else [])


def test_probes_ports_and_resources(rendered):
    container = _container(rendered["minimal"])
    assert container["ports"] == [
        {"name": "http-metrics", "containerPort": 8080, "protocol": "TCP"},
        {"name": "http", "containerPort": 8081, "protocol": "TCP"},
    ]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"},
                                      "limits": {"cpu": "1", "memory": "1Gi"}}
    assert "args" not in container and "command" not in container  # ENTRYPOINT is `nodewright run`
    assert _container(rendered["production"])["resources"]["limits"] == {"cpu": "1", "memory": "1536Mi"}


def test_settings_become_karpenter_env_vars(rendered):
    assert _env(rendered["minimal"]) == {
        "CLUSTER_NAME": "nodewright",
        "CLUSTER_ENDPOINT": "https://0123456789ABCDEF0123456789ABCDEF.gr7.ap-northeast-2.eks.amazonaws.com",
        "INTERRUPTION_QUEUE": "nodewright-nodewright-interruption",
        "BATCH_IDLE_DURATION": "1s",
        "BATCH_MAX_DURATION": "10s",
        "LOG_LEVEL": "info",
        "LOG_OUTPUT_PATHS": "stdout",
        "PREFERENCE_POLICY": "Respect",
        "MIN_VALUES_POLICY": "Strict",
        "VM_MEMORY_OVERHEAD_PERCENT": "0.075",
        "RESERVED_ENIS": "0",
        # Karpenter 1.14's gates and defaults, sorted by name.
        "FEATURE_GATES": "CapacityBuffer=false,NodeOverlay=false,NodeRepair=false,ReservedCapacity=true,"
                         "SpotToSpotConsolidation=false,StaticCapacity=false",
        "AWS_FEATURE_GATES": "NodeClassCEL=false,RebootForRepair=false",
        "METRICS_PORT": "8080",
        "HEALTH_PROBE_PORT": "8081",
        "SYSTEM_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}},
    }
    env = _env(rendered["production"])
    assert env["CLUSTER_NAME"] == "prod-apne2"
    assert env["INTERRUPTION_QUEUE"] == "prod-apne2-nodewright-interruption"
    assert env["BATCH_IDLE_DURATION"] == "2s"
    assert env["BATCH_MAX_DURATION"] == "15s"
    assert env["LOG_LEVEL"] == "warn"
    # Gates sorted by name, camelCase keys turned into Karpenter's CamelCase gate names.
    assert env["FEATURE_GATES"] == ("CapacityBuffer=false,NodeOverlay=false,NodeRepair=false,ReservedCapacity=true,"
                                    "SpotToSpotConsolidation=true,StaticCapacity=false")
    assert env["AWS_REGION"] == "ap-northeast-2"


def test_unset_optional_settings_are_left_out(rendered):
    env = _env(rendered["default"])
    assert env["CLUSTER_NAME"] == ""
    assert "CLUSTER_ENDPOINT" not in env and "INTERRUPTION_QUEUE" not in env and "AWS_REGION" not in env


def test_feature_gates_string_passes_through_and_empty_map_is_omitted(render):
    env = _env(render("settings.featureGates=Foo=true"))
    assert env["FEATURE_GATES"] == "Foo=true"
    env = _env(render("settings.featureGates=null"))
    assert "FEATURE_GATES" not in env


def test_the_capacity_buffer_gate_can_be_turned_on(render):
    env = _env(render("settings.featureGates.capacityBuffer=true"))
    assert "CapacityBuffer=true" in env["FEATURE_GATES"].split(",")


def test_image_by_tag_or_digest(rendered, render):
    assert _container(rendered["default"])["image"] == "nodewright:0.1.0"  # appVersion
    assert _container(rendered["minimal"])["image"] == (
        "111122223333.dkr.ecr.ap-northeast-2.amazonaws.com/nodewright:0.1.0")
    digest = "sha256:4b1c5a2f1f0e7d9c3b2a19087f6e5d4c3b2a1908f7e6d5c4b3a29180f7e6d5c4"
    assert _container(rendered["production"])["image"] == (
        f"111122223333.dkr.ecr.ap-northeast-2.amazonaws.com/nodewright@{digest}")
    # The stacks pass tag and digest together: the digest wins.
    both = _container(render(f"image.digest={digest}", "image.tag=0.2.0"))
    assert both["image"] == f"111122223333.dkr.ecr.ap-northeast-2.amazonaws.com/nodewright@{digest}"


def test_bind_mode_adds_the_flag(rendered):
    assert _container(rendered["production"])["args"] == ["--bind-pods"]


def test_service_account_carries_the_irsa_annotation(rendered):
    sa = one(rendered["minimal"], "ServiceAccount", "nodewright")
    assert sa["metadata"]["namespace"] == "kube-system"
    assert sa["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/nodewright-nodewright-controller"
    }
    assert "annotations" not in one(rendered["default"], "ServiceAccount")["metadata"]


def test_existing_service_account_is_used_not_created(render):
    docs = render("serviceAccount.create=false", "serviceAccount.name=karpenter")
    assert find(docs, "ServiceAccount") == []
    assert _pod(docs)["serviceAccountName"] == "karpenter"
    for binding in find(docs, "ClusterRoleBinding") + find(docs, "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "karpenter", "namespace": "kube-system"}]


def test_pdb_and_metrics_service(rendered):
    pdb = one(rendered["minimal"], "PodDisruptionBudget", "nodewright")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": SELECTOR}}
    svc = one(rendered["minimal"], "Service", "nodewright")
    assert svc["spec"]["selector"] == SELECTOR
    assert svc["spec"]["ports"] == [
        {"name": "http-metrics", "port": 8080, "targetPort": "http-metrics", "protocol": "TCP"}
    ]


def test_service_monitor_is_optional(rendered):
    assert find(rendered["minimal"], "ServiceMonitor") == []
    sm = one(rendered["production"], "ServiceMonitor", "nodewright")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["spec"] == {
        "namespaceSelector": {"matchNames": ["kube-system"]},
        "selector": {"matchLabels": SELECTOR},
        "endpoints": [{"port": "http-metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}],
    }


def test_network_policy_admits_only_the_metrics_port(rendered, render):
    policy = one(rendered["minimal"], "NetworkPolicy", "nodewright")
    assert policy["spec"] == {
        "podSelector": {"matchLabels": SELECTOR},
        "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"port": "http-metrics", "protocol": "TCP"}]}],
    }
    peers = render('networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring')
    assert one(peers, "NetworkPolicy")["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    assert find(render("networkPolicy.enabled=false"), "NetworkPolicy") == []


@pytest.mark.parametrize(("namespace", "override", "expected"), [
    ("default", None, "kube-system"),        # helm's default namespace -> kube-system
    ("karpenter", None, "karpenter"),        # an explicit -n is honoured
    ("default", "nodewright-system", "nodewright-system"),
])
def test_namespace(render, namespace, override, expected):
    extra = [f"namespaceOverride={override}"] if override else []
    docs = render(*extra, namespace=namespace)
    namespaced = [d for d in docs if d["kind"] not in {"ClusterRole", "ClusterRoleBinding", "NodePool", "EC2NodeClass",
                                                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}]
    assert {d["metadata"]["namespace"] for d in namespaced} == {expected}
    assert one(docs, "ClusterRoleBinding")["subjects"][0]["namespace"] == expected
    for kind in ("ClusterRole", "NodePool", "EC2NodeClass"):
        assert all("namespace" not in d["metadata"] for d in find(docs, kind))


def test_timing_settings_render_only_when_set(rendered, render):
    """Issue 32 item 5: the four timing values become NODEWRIGHT_* env vars when set; unset, the controller's
    defaults hold and nothing is rendered."""
    assert not any(k.startswith(("NODEWRIGHT_GC", "NODEWRIGHT_DISRUPTION")) for k in _env(rendered["minimal"]))
    env = _env(render("settings.garbageCollectionGracePeriod=1m", "settings.garbageCollectionPeriod=2m",
                      "settings.disruptionPollPeriod=5s", "settings.disruptionValidationDelay=20s"))
    assert {k: v for k, v in env.items() if k.startswith(("NODEWRIGHT_GC", "NODEWRIGHT_DISRUPTION"))} == {
        "NODEWRIGHT_GC_GRACE_PERIOD": "1m", "NODEWRIGHT_GC_PERIOD": "2m",
        "NODEWRIGHT_DISRUPTION_POLL_PERIOD": "5s", "NODEWRIGHT_DISRUPTION_VALIDATION_DELAY": "20s"}


CONSOLIDATION_ENV = ("NODEWRIGHT_MULTI_NODE_CONSOLIDATION", "NODEWRIGHT_SINGLE_NODE_CONSOLIDATION",
                     "NODEWRIGHT_CONSOLIDATION")


def test_consolidation_bounds_render_only_when_set_and_the_controller_reads_them(rendered, render):
    """Issue 30: the consolidation search bounds (time budgets, candidates, replacement pod share) become
    NODEWRIGHT_* env vars when set; unset, nothing is rendered and the controller's defaults hold."""
    from nodewright.settings import load_settings

    assert not any(k.startswith(CONSOLIDATION_ENV) for k in _env(rendered["minimal"]))
    env = _env(render("settings.multiNodeConsolidationTimeout=2m", "settings.singleNodeConsolidationTimeout=90s",
                      "settings.multiNodeConsolidationCandidates=150",
                      "settings.consolidationReplacementPodShare=0.25"))
    bounds = {k: v for k, v in env.items() if k.startswith(CONSOLIDATION_ENV)}
    assert bounds == {
        "NODEWRIGHT_MULTI_NODE_CONSOLIDATION_TIMEOUT": "2m", "NODEWRIGHT_SINGLE_NODE_CONSOLIDATION_TIMEOUT": "90s",
        "NODEWRIGHT_MULTI_NODE_CONSOLIDATION_CANDIDATES": "150",
        "NODEWRIGHT_CONSOLIDATION_REPLACEMENT_POD_SHARE": "0.25"}
    settings = load_settings({"CLUSTER_NAME": "demo", "AWS_REGION": "us-east-1", **bounds})
    assert (settings.multi_node_consolidation_timeout, settings.single_node_consolidation_timeout,
            settings.multi_node_consolidation_candidates, settings.consolidation_replacement_pod_share) == (
        120.0, 90.0, 150, 0.25)


def test_aws_feature_gates_become_karpenters_env_var(render):
    assert _env(render("settings.awsFeatureGates.nodeClassCEL=true"))["AWS_FEATURE_GATES"] == \
        "NodeClassCEL=true,RebootForRepair=false"
    assert _env(render("settings.awsFeatureGates.rebootForRepair=true"))["AWS_FEATURE_GATES"] == \
        "NodeClassCEL=false,RebootForRepair=true"
    assert "AWS_FEATURE_GATES" not in _env(render("settings.awsFeatureGates=null"))
