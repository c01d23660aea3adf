"""Startup failures of ``nodewright run``: one structured log line saying what to fix, one exit code per class.

Every failure before the controller loop starts is classified into a :class:`StartupError`; the CLI logs it
once (``level=error``, ``logger=nodewright.startup``, fields ``error_class``, ``exit_code``, ``fix``; JSON in
a container) and exits with the class's code, so an operator (or a CrashLoopBackOff reason) tells a missing
kubeconfig from a denied AWS call without reading a traceback:

=====  ================  ==============================================================================
code   class             when
=====  ================  ==============================================================================
1      internal          anything unexpected (the line carries the traceback in ``error``)
2      settings          a flag or environment variable is malformed or missing (not the region)
3      kubeconfig        no in-cluster config, no kubeconfig file, or the file does not load
4      kube-apiserver    ``GET /version`` failed: unreachable, TLS, or credentials refused (401/403)
5      aws-credentials   no AWS credentials found, or AWS rejected them (invalid, expired token)
6      aws-region        ``AWS_REGION`` missing or not a region name
7      aws-cluster       ``eks:DescribeCluster`` denied or the cluster not found (bootstrap facts)
=====  ================  ==============================================================================
"""

from __future__ import annotations

import logging
import re
import traceback
from dataclasses import dataclass
from typing import Any

from nodewright.errors import NodewrightValidationError

log = logging.getLogger("nodewright.startup")

EXIT_CODES: dict[str, int] = {
    "internal": 1,
    "settings": 2,
    "kubeconfig": 3,
    "kube-apiserver": 4,
    "aws-credentials": 5,
    "aws-region": 6,
    "aws-cluster": 7,
}

#: AWS error codes meaning "these credentials are not valid" (STS, EC2, EKS, IAM spellings).
_BAD_CREDENTIAL_CODES = ("UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken",
                         "ExpiredTokenException", "AuthFailure", "InvalidSignatureException",
                         "SignatureDoesNotMatch", "InvalidAccessKeyId")
#: A commercial, GovCloud, China or ISO region name (``us-east-1``, ``us-gov-west-1``, ``cn-north-1``).
REGION_PATTERN = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d{1,2}$")

_CREDENTIALS_FIX = ("give the controller AWS credentials: IRSA (ServiceAccount annotation "
                    "eks.amazonaws.com/role-arn) or EKS Pod Identity in a cluster, AWS_PROFILE or "
                    "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY elsewhere")


@dataclass
class StartupError(Exception):
    """A classified startup failure.

    Attributes:
        error_class: one of :data:`EXIT_CODES`.
        message: what went wrong, one sentence.
        fix: what the operator should do.
    """

    error_class: str
    message: str
    fix: str

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def exit_code(self) -> int:
        """The process exit code of this class."""
        return EXIT_CODES[self.error_class]


def from_validation(err: NodewrightValidationError) -> StartupError:
    """A settings error; ``AWS_REGION`` problems are their own class."""
    if err.path in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        return StartupError("aws-region", str(err), "set AWS_REGION (or --aws-region) to the cluster's region, "
                                                    "e.g. us-east-1")
    return StartupError("settings", str(err), f"correct {err.path}")


def check_region(region: str) -> None:
    """Raises :class:`StartupError` (``aws-region``) unless ``region`` looks like an AWS region name."""
    if not REGION_PATTERN.match(region):
        raise StartupError("aws-region", f"AWS_REGION {region!r} is not an AWS region name",
                           "set AWS_REGION to the cluster's region, e.g. us-east-1 or eu-west-1")


def check_capacity_buffer_crd(rest: Any) -> None:
    """With the ``CapacityBuffer`` gate on: raises :class:`StartupError` (``settings``) when the API server does not
    serve ``capacitybuffers.autoscaling.x-k8s.io/v1beta1`` (the CRD is missing), instead of an informer failing
    its list forever. One ``GET`` of the collection (``limit=1``).

    Args:
        rest: a :class:`~nodewright.kube.rest.RestClient`.
    """
    from nodewright.kube import resources as r
    from nodewright.kube.errors import NotFoundError

    try:
        rest.request("GET", r.CAPACITYBUFFERS.collection_path(), {"limit": "1"})
    except NotFoundError:
        raise StartupError("settings", "FEATURE_GATES has CapacityBuffer=true but the API server does not serve "
                           "capacitybuffers.autoscaling.x-k8s.io/v1beta1 (the CRD is not installed)",
                           "kubectl apply -f helm/nodewright/crds/autoscaling.x-k8s.io_capacitybuffers.yaml (the "
                           "chart's crds/ installs it on first install), or turn the CapacityBuffer gate off") from None


def check_credentials(session: Any) -> None:
    """Raises :class:`StartupError` (``aws-credentials``) when boto3's chain finds no credentials.

    Args:
        session: a ``boto3.session.Session``; its credential chain is resolved without any AWS call.
    """
    if session.get_credentials() is None:
        raise StartupError("aws-credentials", "no AWS credentials found by the default credential chain",
                           _CREDENTIALS_FIX)


def _aws_code(err: BaseException) -> str:
    seen: BaseException | None = err
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            return str((response.get("Error") or {}).get("Code") or "")
        code = getattr(seen, "code", None)
        if isinstance(code, str) and code:
            return code
        seen = seen.__cause__
    return ""


def classify(err: BaseException) -> StartupError:
    """The :class:`StartupError` for any exception raised while building the runtime."""
    from botocore.exceptions import NoCredentialsError, NoRegionError

    from nodewright.cloud.provider import AuthorizationError, CloudProviderError
    from nodewright.kube.errors import KubeError

    if isinstance(err, StartupError):
        return err
    if isinstance(err, NodewrightValidationError):
        return from_validation(err)
    if isinstance(err, NoCredentialsError):
        return StartupError("aws-credentials", str(err), _CREDENTIALS_FIX)
    if isinstance(err, NoRegionError):
        return StartupError("aws-region", str(err), "set AWS_REGION to the cluster's region")
    code = _aws_code(err)
    if code in _BAD_CREDENTIAL_CODES:
        return StartupError("aws-credentials", f"AWS rejected the controller's credentials ({code}): {err}",
                            "refresh or replace the credentials; with IRSA check the role ARN annotation and "
                            "the role's trust policy")
    if isinstance(err, AuthorizationError | CloudProviderError):
        return StartupError("aws-cluster", str(err), "grant eks:DescribeCluster on the cluster to the controller "
                                                     "role, or set CLUSTER_ENDPOINT, CLUSTER_CA_BUNDLE and "
                                                     "CLUSTER_CIDR")
    if isinstance(err, KubeError):
        return StartupError("kube-apiserver", f"the Kubernetes API server did not answer GET /version: {err}",
                            _apiserver_fix(err.status))
    return StartupError("internal", f"{type(err).__name__}: {err}",
                        "report this as a bug with the log line; it is not a configuration error we know")


def kubeconfig_error(err: BaseException, kubeconfig: str) -> StartupError:
    """The ``kubeconfig`` class for a configuration that does not load (a named file that does not exist says
    so, rather than the client's "Invalid kube-config file. No configuration found.")."""
    from nodewright.kube.rest import missing_kubeconfig

    where = f"kubeconfig {kubeconfig!r}" if kubeconfig else "in-cluster config or ~/.kube/config"
    absent = missing_kubeconfig(kubeconfig)
    if absent is not None:
        return StartupError("kubeconfig", f"kubeconfig file {absent!r} not found",
                            "pass --kubeconfig (or KUBECONFIG) the path of an existing kubeconfig file, or run in "
                            "a pod with a ServiceAccount token")
    return StartupError("kubeconfig", f"cannot load the Kubernetes configuration from {where}: {err}",
                        "run in a pod with a ServiceAccount token, or set KUBECONFIG (or --kubeconfig) to a "
                        "readable kubeconfig file")


def _apiserver_fix(status: int) -> str:
    if status in (401, 403):
        return ("the API server refused our credentials: check the kubeconfig user or the ServiceAccount "
                "token and the chart's ClusterRole")
    return "check that the kubeconfig's server URL is reachable from here (network, DNS, TLS CA)"


def report(error: StartupError, cause: BaseException | None = None) -> int:
    """Log ``error`` as one structured line and return its exit code."""
    extra: dict[str, Any] = {"error_class": error.error_class, "exit_code": error.exit_code, "fix": error.fix}
    if error.error_class == "internal" and cause is not None:
        extra["error"] = "".join(traceback.format_exception(cause)).strip()
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO)
    log.error(error.message, extra=extra)
    return error.exit_code
