"""boto3 clients for the AWS provider: one session, adaptive retries and timeouts on every call.

Throttling (``RequestLimitExceeded``, ``Throttling``) is absorbed first by botocore's ``adaptive`` retry
mode (client-side rate limiting plus exponential backoff, up to ``max_attempts`` tries); what outlives it
surfaces as a retryable :class:`~nodewright.cloud.provider.LaunchError` and the controller's own requeue
backoff takes over. Connect/read timeouts bound every call so a dead endpoint never hangs a reconcile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

#: The AWS Pricing API is served from us-east-1 whatever the cluster's region (AWS Pricing docs).
PRICING_REGION = "us-east-1"


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """How to reach AWS.

    Attributes:
        region: the cluster's region, e.g. ``"us-east-1"``.
        endpoint_url: override for every service (a moto server on 127.0.0.1 in tests), else None.
        max_attempts: total tries per call in botocore's adaptive retry mode.
        connect_timeout: seconds to open a connection.
        read_timeout: seconds to wait for a response (SQS long-polls 20 s, so keep this above 20).
    """

    region: str
    endpoint_url: str | None = None
    max_attempts: int = 8
    connect_timeout: float = 5.0
    read_timeout: float = 30.0

    def botocore_config(self, region: str | None = None) -> Config:
        """The botocore ``Config`` carrying retry mode, timeouts and our user agent."""
        return Config(
            region_name=region or self.region,
            retries={"mode": "adaptive", "max_attempts": self.max_attempts},
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            user_agent_extra="nodewright",
        )


class AWSClients:
    """Lazily created boto3 clients (ec2, ssm, iam, sqs, pricing, sts, eks) sharing one session.

    Tests may pass ready clients (for example wrapped by ``botocore.stub.Stubber``) through ``overrides``.
    """

    def __init__(self, settings: ClientSettings, session: boto3.session.Session | None = None,
                 overrides: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self._session = session or boto3.session.Session()
        self._clients: dict[str, Any] = dict(overrides or {})

    def _client(self, service: str, region: str | None = None) -> Any:
        if service not in self._clients:
            self._clients[service] = self._session.client(
                service,  # type: ignore[call-overload]
                region_name=region or self.settings.region,
                endpoint_url=self.settings.endpoint_url,
                config=self.settings.botocore_config(region),
            )
        return self._clients[service]

    @property
    def ec2(self) -> Any:
        """EC2 client in the cluster's region."""
        return self._client("ec2")

    @property
    def ssm(self) -> Any:
        """SSM client in the cluster's region (public AMI parameters)."""
        return self._client("ssm")

    @property
    def iam(self) -> Any:
        """IAM client (global service)."""
        return self._client("iam")

    @property
    def sqs(self) -> Any:
        """SQS client in the cluster's region (interruption queue)."""
        return self._client("sqs")

    @property
    def sts(self) -> Any:
        """STS client (caller identity for error messages)."""
        return self._client("sts")

    @property
    def eks(self) -> Any:
        """EKS client in the cluster's region (``DescribeCluster`` for node bootstrap facts)."""
        return self._client("eks")

    @property
    def pricing(self) -> Any:
        """Pricing client, always in :data:`PRICING_REGION`."""
        return self._client("pricing", PRICING_REGION)
