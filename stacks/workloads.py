"""workloads: a sample service on the chart's ``service`` NodePool and the KEDA ScaledObject that
scales it ahead of a known daily event.

The ScaledObject (``keda.sh/v1alpha1``) carries two triggers: a **cron** trigger that holds
``desiredReplicas`` between ``start`` and ``end`` in ``timezone`` (scale out *before* the event,
back in after it; second field report), and a CPU utilization trigger for load outside the
window. KEDA takes the highest replica count any trigger asks for. The NodePools themselves come
from the chart's values (addons stack), not from here.
"""

from __future__ import annotations

from typing import Any

from cdktn_provider_kubernetes.manifest import Manifest
from cdktn_provider_kubernetes.provider import KubernetesProvider, KubernetesProviderExec
from constructs import Construct

from stacks.base import NodewrightStack
from stacks.cluster import ClusterStack
from stacks.kube_access import EXEC_API_VERSION, kube_access
from stacks.settings import InfraSettings, WorkloadSettings

Manifest_ = dict[str, Any]

CONTAINER_PORT = 8080  # nginx-unprivileged listens on 8080 as a non-root user


def _labels(w: WorkloadSettings) -> dict[str, str]:
    return {"app.kubernetes.io/name": w.name, "app.kubernetes.io/part-of": "nodewright-sample"}


def namespace_manifest(w: WorkloadSettings) -> Manifest_:
    """The sample's namespace, enforcing the ``restricted`` Pod Security Standard."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": w.namespace, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}


def deployment_manifest(w: WorkloadSettings) -> Manifest_:
    """The sample service: runs on the ``service`` NodePool (node selector + toleration of its
    taint), spreads over zones, and requests CPU so the CPU trigger has a utilization to use.

    ``spec.replicas`` is left out on purpose: KEDA's HPA owns it, and Terraform would fight it.
    """
    labels = _labels(w)
    container = {
        "name": w.name,
        "image": w.image,
        "ports": [{"name": "http", "containerPort": CONTAINER_PORT}],
        "resources": {"requests": {"cpu": f"{w.cpu_request_millicores}m", "memory": f"{w.memory_request_mib}Mi"},
                      "limits": {"memory": f"{w.memory_request_mib}Mi"}},
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10, "failureThreshold": 6},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": w.name, "namespace": w.namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": w.nodepool},
                    "tolerations": [{"key": w.taint_key, "operator": "Equal", "value": w.nodepool,
                                     "effect": "NoSchedule"}],
                    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                   "whenUnsatisfiable": "ScheduleAnyway",
                                                   "labelSelector": {"matchLabels": labels}}],
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 101, "runAsGroup": 101,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }


def pod_disruption_budget_manifest(w: WorkloadSettings) -> Manifest_:
    """Keeps nodes replaced by consolidation or drift from taking the service down (field report 2)."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": w.name, "namespace": w.namespace, "labels": _labels(w)},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _labels(w)}}}


def scaled_object_manifest(w: WorkloadSettings) -> Manifest_:
    """The KEDA ScaledObject with the cron trigger (KEDA cron scaler: ``timezone``, ``start``,
    ``end``, ``desiredReplicas`` as strings) and the CPU trigger (``metricType: Utilization``)."""
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": w.name, "namespace": w.namespace, "labels": _labels(w)},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": w.name},
            "minReplicaCount": w.min_replicas,
            "maxReplicaCount": w.max_replicas,
            "triggers": [
                {"type": "cron", "name": "daily-event",
                 "metadata": {"timezone": w.timezone, "start": w.cron_start, "end": w.cron_end,
                              "desiredReplicas": str(w.desired_replicas)}},
                {"type": "cpu", "name": "cpu", "metricType": "Utilization",
                 "metadata": {"value": str(w.cpu_utilization_percent)}},
            ],
        },
    }


class WorkloadsStack(NodewrightStack):
    """Kubernetes manifests of the sample service (kubernetes provider ``kubernetes_manifest``).

    Applied after the addons stack: the ScaledObject needs KEDA's CRDs and the Deployment needs
    the chart's ``service`` NodePool.
    """

    def __init__(self, scope: Construct, stack_id: str, settings: InfraSettings, cluster: ClusterStack) -> None:
        super().__init__(scope, stack_id, settings, aws=False)
        access = kube_access(cluster)
        KubernetesProvider(self, "kubernetes", host=access.host,
                           cluster_ca_certificate=access.cluster_ca_certificate,
                           exec=[KubernetesProviderExec(api_version=EXEC_API_VERSION, command="aws",
                                                        args=access.exec_args)])
        w = settings.workload
        namespace = Manifest(self, "namespace", manifest=namespace_manifest(w))
        self.deployment = Manifest(self, "deployment", manifest=deployment_manifest(w), depends_on=[namespace],
                                   wait={"rollout": True})
        Manifest(self, "pdb", manifest=pod_disruption_budget_manifest(w), depends_on=[namespace])
        self.scaled_object = Manifest(self, "scaled_object", manifest=scaled_object_manifest(w),
                                      depends_on=[self.deployment])
