"""addons: the Helm releases of the nodewright chart (local, ``helm/nodewright``) and of KEDA.

The chart's values are wired from the other stacks; the chart honours exactly these keys:
``settings.clusterName``, ``settings.clusterEndpoint``, ``settings.interruptionQueue`` (queue
name), ``settings.awsRegion``, ``serviceAccount.name`` (``nodewright`` in ``kube-system``),
``serviceAccount.annotations."eks.amazonaws.com/role-arn"`` (IRSA only), ``nodeRole`` (the node
role *name*; the chart's EC2NodeClasses select subnets and security groups by the
``karpenter.sh/discovery`` tag) and ``image.repository`` / ``image.tag`` / ``image.digest``.
The three NodePools (low-spot, platform, service) come from the chart's own value defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdktn import AssetType, TerraformAsset, TerraformOutput
from cdktn_provider_helm.provider import HelmProvider, HelmProviderKubernetes, HelmProviderKubernetesExec
from cdktn_provider_helm.release import Release
from constructs import Construct

from nodewright.errors import NodewrightValidationError
from stacks.base import NodewrightStack, to_json
from stacks.cluster import ClusterStack
from stacks.identity import IdentityStack
from stacks.interruption import InterruptionStack
from stacks.kube_access import EXEC_API_VERSION, kube_access
from stacks.settings import CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT, IdentityMode, InfraSettings

REPOSITORY_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CHART_PATH = REPOSITORY_ROOT / "helm" / "nodewright"
IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
KEDA_NAMESPACE = "keda"


def nodewright_values(settings: InfraSettings, *, cluster_endpoint: str, queue_name: str,
                      controller_role_arn: str, node_role_name: str) -> dict[str, Any]:
    """The chart values the stacks set (the contract above); everything else keeps chart defaults.

    Args:
        settings: validated settings (cluster name, region, identity mode, image).
        cluster_endpoint: API server URL (a reference).
        queue_name: interruption queue name (a reference).
        controller_role_arn: the controller role's ARN (a reference), annotated for IRSA.
        node_role_name: node role name (a reference).

    Returns:
        A values mapping, JSON-serializable.
    """
    annotations = ({IRSA_ANNOTATION: controller_role_arn}
                   if settings.identity_mode is IdentityMode.IRSA else {})
    return {
        "settings": {
            "clusterName": settings.cluster_name,
            "clusterEndpoint": cluster_endpoint,
            "interruptionQueue": queue_name,
            # Pod Identity injects credentials but no region; set it for both modes.
            "awsRegion": settings.region,
        },
        "serviceAccount": {"name": CONTROLLER_SERVICE_ACCOUNT, "annotations": annotations},
        "nodeRole": node_role_name,
        "image": {"repository": settings.image.repository, "tag": settings.image.tag,
                  "digest": settings.image.digest},
    }


class AddonsStack(NodewrightStack):
    """Helm releases into the cluster.

    Attributes:
        nodewright: the controller's release (namespace ``kube-system``).
        keda: KEDA from its official chart repository, pinned (namespace ``keda``).
    """

    def __init__(self, scope: Construct, stack_id: str, settings: InfraSettings, cluster: ClusterStack,
                 identity: IdentityStack, interruption: InterruptionStack) -> None:
        super().__init__(scope, stack_id, settings, aws=False)
        access = kube_access(cluster)
        HelmProvider(self, "helm", kubernetes=HelmProviderKubernetes(
            host=access.host, cluster_ca_certificate=access.cluster_ca_certificate,
            exec=HelmProviderKubernetesExec(api_version=EXEC_API_VERSION, command="aws", args=access.exec_args)))
        chart_dir = Path(settings.chart_path) if settings.chart_path else DEFAULT_CHART_PATH
        if not (chart_dir / "Chart.yaml").is_file():
            raise NodewrightValidationError("chart_path", f"no Helm chart (Chart.yaml) in {chart_dir}")
        # Copied into cdktf.out/stacks/addons/assets/: the synthesized stack is self-contained
        # (a pipeline can apply it without the repository), and a chart change changes the path,
        # which makes Terraform upgrade the release.
        chart = TerraformAsset(self, "nodewright_chart", path=str(chart_dir), type=AssetType.DIRECTORY)
        values = nodewright_values(settings, cluster_endpoint=cluster.cluster.endpoint,
                                   queue_name=interruption.queue.name,
                                   controller_role_arn=identity.controller_role.arn,
                                   node_role_name=identity.node_role.name)
        self.nodewright = Release(self, "nodewright", name="nodewright", chart=chart.path,
                                  namespace=CONTROLLER_NAMESPACE, values=[to_json(values)],
                                  atomic=True, wait=True, timeout=600, max_history=10)
        # KEDA's operator lands on the untainted platform NodePool, which needs the controller
        # running first to get a node.
        self.keda = Release(self, "keda", name="keda", repository=settings.keda_chart_repository, chart="keda",
                            version=settings.keda_chart_version, namespace=KEDA_NAMESPACE, create_namespace=True,
                            atomic=True, wait=True, timeout=900, max_history=10, depends_on=[self.nodewright])
        TerraformOutput(self, "nodewright_release", value=self.nodewright.name)
        TerraformOutput(self, "keda_chart_version", value=self.keda.version)
