"""The cluster facts a node needs to join: API server endpoint, CA bundle and service CIDR.

AL2023's nodeadm ``NodeConfig`` requires ``cluster.apiServerEndpoint``, ``cluster.certificateAuthority`` and
``cluster.cidr``; Bottlerocket's ``[settings.kubernetes]`` needs ``api-server`` and ``cluster-certificate``.
Configured values win (``CLUSTER_ENDPOINT``, ``CLUSTER_CA_BUNDLE``, ``CLUSTER_CIDR``); whatever is missing comes
from one ``eks:DescribeCluster`` call at start (``cluster.endpoint``, ``cluster.certificateAuthority.data``,
``cluster.kubernetesNetworkConfig.serviceIpv4Cidr`` or ``serviceIpv6Cidr`` -- AWS EKS API reference).

Karpenter behaves the same for the endpoint (``DescribeCluster`` when ``CLUSTER_ENDPOINT`` is unset, fatal when
that fails) and for the service CIDR (``DescribeCluster``, IPv4 before IPv6); for the CA bundle it reads its
own Kubernetes client configuration instead, which on EKS holds the same cluster CA that ``DescribeCluster``
returns. The controller's policy already allows ``eks:DescribeCluster`` on the cluster (``stacks/policies.py``).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import ClientError

from nodewright.cloud.aws.clients import AWSClients
from nodewright.cloud.aws.errors import error_code, error_message, is_authorization_error, translate
from nodewright.cloud.provider import AuthorizationError, CloudProviderError
from nodewright.errors import NodewrightValidationError

log = logging.getLogger(__name__)

#: How a user avoids the call altogether; appended to every discovery error.
CONFIGURE_HINT = ("or set CLUSTER_ENDPOINT, CLUSTER_CA_BUNDLE and CLUSTER_CIDR (chart values settings.clusterEndpoint, "
                  "settings.clusterCABundle, settings.clusterCIDR)")


class ClusterDiscoveryError(CloudProviderError):
    """``eks:DescribeCluster`` failed for a reason other than authorization, or returned an incomplete cluster
    (not found, still creating, no service CIDR). The message names the cluster, the region and the fix."""


@dataclass(frozen=True, slots=True)
class ClusterFacts:
    """What a node's bootstrap needs from the cluster.

    Attributes:
        endpoint: API server URL, ``https://<id>.<suffix>.<region>.eks.amazonaws.com``.
        ca_bundle: base64 of the cluster CA certificate PEM (the form ``DescribeCluster`` returns and both
            nodeadm's ``certificateAuthority`` and Bottlerocket's ``cluster-certificate`` take).
        service_cidr: Kubernetes service CIDR, e.g. ``"10.100.0.0/16"`` or an IPv6 ``"fd00:10:96::/112"``.
    """

    endpoint: str = ""
    ca_bundle: str = ""
    service_cidr: str = ""

    def missing(self) -> tuple[str, ...]:
        """Names of the empty fields, in declaration order."""
        return tuple(name for name in ("endpoint", "ca_bundle", "service_cidr") if not getattr(self, name))

    def merged_over(self, discovered: ClusterFacts) -> ClusterFacts:
        """These facts, with empty fields taken from ``discovered`` (configured values win)."""
        return replace(self, endpoint=self.endpoint or discovered.endpoint,
                       ca_bundle=self.ca_bundle or discovered.ca_bundle,
                       service_cidr=self.service_cidr or discovered.service_cidr)


def normalize_ca_bundle(value: str, setting: str = "CLUSTER_CA_BUNDLE") -> str:
    """The base64 CA bundle of a configured value: base64 text as given (whitespace removed), or a PEM text
    (``-----BEGIN CERTIFICATE-----...``), which is base64-encoded. ``""`` stays ``""``.

    Raises:
        NodewrightValidationError: ``value`` is neither PEM nor base64 of a PEM certificate.
    """
    text = value.strip()
    if not text:
        return ""
    if text.startswith("-----BEGIN"):
        return base64.b64encode(text.encode() + b"\n").decode()
    compact = "".join(text.split())
    try:
        decoded = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise NodewrightValidationError(
            setting, "is neither a PEM certificate nor its base64 (use the certificateAuthority.data that "
                     "`aws eks describe-cluster` prints)") from None
    if b"-----BEGIN CERTIFICATE-----" not in decoded:
        raise NodewrightValidationError(setting, "decodes from base64 but holds no PEM certificate "
                                                 "(-----BEGIN CERTIFICATE-----)")
    return compact


def normalize_service_cidr(value: str, setting: str = "CLUSTER_CIDR") -> str:
    """A configured service CIDR in canonical form (``"10.100.0.0/16"``); ``""`` stays ``""``.

    Raises:
        NodewrightValidationError: ``value`` is not an IPv4 or IPv6 network.
    """
    text = value.strip()
    if not text:
        return ""
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        raise NodewrightValidationError(
            setting, f"{text!r} is not a CIDR; write the cluster's service CIDR, e.g. 10.100.0.0/16") from None


def configured_facts(endpoint: str = "", ca_bundle: str = "", service_cidr: str = "") -> ClusterFacts:
    """Validated facts from settings (``CLUSTER_ENDPOINT``, ``CLUSTER_CA_BUNDLE``, ``CLUSTER_CIDR``).

    Raises:
        NodewrightValidationError: the endpoint is not ``https://``, the CA bundle or the CIDR is malformed.
    """
    endpoint = endpoint.strip().rstrip("/")
    if endpoint and not endpoint.startswith("https://"):
        raise NodewrightValidationError("CLUSTER_ENDPOINT", f"{endpoint!r} must be an https:// URL")
    return ClusterFacts(endpoint, normalize_ca_bundle(ca_bundle), normalize_service_cidr(service_cidr))


def service_cidr_of(network: dict[str, Any]) -> str:
    """The service CIDR in a ``kubernetesNetworkConfig``: the IPv6 one for an ``ipFamily: ipv6`` cluster, else
    ``serviceIpv4Cidr``, else ``serviceIpv6Cidr``; ``""`` when neither is present."""
    v4 = str(network.get("serviceIpv4Cidr") or "")
    v6 = str(network.get("serviceIpv6Cidr") or "")
    if str(network.get("ipFamily") or "").lower() == "ipv6" and v6:
        return v6
    return v4 or v6


def describe_cluster(eks: Any, cluster_name: str, region: str) -> ClusterFacts:
    """Endpoint, CA bundle and service CIDR of ``cluster_name`` from ``eks:DescribeCluster``.

    Args:
        eks: a boto3 EKS client in the cluster's region.
        cluster_name: the EKS cluster name (``CLUSTER_NAME``).
        region: the region, for messages.

    Raises:
        AuthorizationError: the call was denied; the message is the provider's one-sentence decoding
            (principal, action, resource, fix) followed by :data:`CONFIGURE_HINT`.
        ClusterDiscoveryError: the cluster does not exist in ``region``, or any other AWS failure.
    """
    try:
        cluster = eks.describe_cluster(name=cluster_name)["cluster"]
    except ClientError as err:
        raise _discovery_error(err, cluster_name, region) from err
    return ClusterFacts(endpoint=str(cluster.get("endpoint") or ""),
                        ca_bundle=str((cluster.get("certificateAuthority") or {}).get("data") or ""),
                        service_cidr=service_cidr_of(cluster.get("kubernetesNetworkConfig") or {}))


def eks_kubernetes_version(eks: Any, cluster_name: str, region: str) -> str:
    """The cluster's Kubernetes version (``"1.31"``) from ``eks:DescribeCluster`` (Karpenter's
    ``EKS_CONTROL_PLANE=true`` source of the version; otherwise the API server's ``/version``).

    Raises:
        AuthorizationError, ClusterDiscoveryError: as :func:`describe_cluster`, or the answer has no version.
    """
    try:
        version = str(eks.describe_cluster(name=cluster_name)["cluster"].get("version") or "")
    except ClientError as err:
        raise _discovery_error(err, cluster_name, region) from err
    if not version:
        raise ClusterDiscoveryError(f"eks:DescribeCluster {cluster_name!r} in {region} returned no version; "
                                    "unset EKS_CONTROL_PLANE to read it from the API server")
    return version


def _discovery_error(err: ClientError, cluster_name: str, region: str) -> CloudProviderError:
    code = error_code(err)
    if is_authorization_error(code):
        denied = translate(err, operation="eks:DescribeCluster")
        assert isinstance(denied, AuthorizationError)
        return AuthorizationError(f"{denied}; {CONFIGURE_HINT}", action=denied.action,
                                  resource=denied.resource, principal=denied.principal, code=denied.code)
    if code == "ResourceNotFoundException":
        return ClusterDiscoveryError(
            f"EKS cluster {cluster_name!r} not found in {region}: check CLUSTER_NAME and AWS_REGION, {CONFIGURE_HINT}")
    return ClusterDiscoveryError(f"eks:DescribeCluster {cluster_name!r} in {region} failed: {code}: "
                                 f"{error_message(err)}; {CONFIGURE_HINT}")


def resolve_cluster_facts(clients: AWSClients, cluster_name: str, configured: ClusterFacts) -> ClusterFacts:
    """``configured``, completed by ``eks:DescribeCluster`` when any field is empty (no call otherwise).

    Raises:
        AuthorizationError: DescribeCluster was denied (see :func:`describe_cluster`).
        ClusterDiscoveryError: DescribeCluster failed, or left a field empty (cluster still ``CREATING``, no
            service CIDR in its network config).
    """
    if not configured.missing():
        return configured
    region = clients.settings.region
    try:
        facts = configured.merged_over(describe_cluster(clients.eks, cluster_name, region))
    except CloudProviderError as err:
        log.error(str(err), extra={"cluster": cluster_name, "missing": list(configured.missing())})
        raise
    if facts.missing():
        incomplete = ClusterDiscoveryError(
            f"eks:DescribeCluster {cluster_name!r} in {region} returned no {', '.join(facts.missing())} "
            f"(is the cluster ACTIVE?); {CONFIGURE_HINT}")
        log.error(str(incomplete), extra={"cluster": cluster_name})
        raise incomplete
    log.info("discovered cluster facts", extra={"cluster": cluster_name, "endpoint": facts.endpoint,
                                                "service_cidr": facts.service_cidr,
                                                "discovered": list(configured.missing())})
    return facts
