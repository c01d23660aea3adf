"""How the helm and kubernetes providers reach the cluster: its endpoint and CA from the cluster
stack, and a short-lived token from ``aws eks get-token`` on every Terraform run (an exec plugin,
so a long apply never outlives a 15-minute token and no token lands in the state)."""

from __future__ import annotations

from dataclasses import dataclass

from cdktn import Fn

from stacks.cluster import ClusterStack

EXEC_API_VERSION = "client.authentication.k8s.io/v1beta1"


@dataclass(frozen=True)
class KubeAccess:
    """Connection settings shared by the helm and kubernetes providers.

    Attributes:
        host: API server URL (a reference to the cluster stack's output).
        cluster_ca_certificate: PEM of the cluster CA (a Terraform expression).
        exec_args: arguments of ``aws`` that print an ExecCredential.
    """

    host: str
    cluster_ca_certificate: str
    exec_args: list[str]


def kube_access(cluster: ClusterStack) -> KubeAccess:
    settings = cluster.settings
    return KubeAccess(
        host=cluster.cluster.endpoint,
        cluster_ca_certificate=Fn.base64decode(cluster.certificate_authority),
        exec_args=["eks", "get-token", "--cluster-name", settings.cluster_name, "--region", settings.region,
                   "--output", "json"],
    )
