"""Controller settings from command-line flags and environment variables.

Names follow Karpenter's where they exist (its ``--flag`` / ``ENV_VAR`` pairs in the Karpenter settings
documentation): ``CLUSTER_NAME``, ``CLUSTER_ENDPOINT``, ``INTERRUPTION_QUEUE``, ``BATCH_IDLE_DURATION``
(default 1s), ``BATCH_MAX_DURATION`` (default 10s), ``LOG_LEVEL``, ``METRICS_PORT`` (8080),
``HEALTH_PROBE_PORT`` (8081), ``DISABLE_LEADER_ELECTION``, ``AWS_REGION``. nodewright's own additions use
the ``NODEWRIGHT_`` prefix or have no Karpenter counterpart (``BIND_PODS``; ``METRICS_BIND_ADDRESS`` and
``HEALTH_PROBE_BIND_ADDRESS``, controller-runtime's names: Karpenter itself always listens on every interface). A flag wins over its
environment variable; a missing required value is one clear :class:`NodewrightValidationError`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from nodewright.errors import NodewrightValidationError

_GO_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(ms|s|m|h))+$")
_GO_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(name: str, text: str) -> float:
    """Seconds in a Go duration string (``"1s"``, ``"500ms"``, ``"1m30s"``); a bare number is seconds.

    Raises:
        NodewrightValidationError: naming ``name`` when ``text`` is not a duration.
    """
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    if not _GO_DURATION.match(text):
        raise NodewrightValidationError(name, f"{text!r} is not a duration; write e.g. 1s, 500ms or 1m30s")
    return sum(float(n) * _UNIT[u] for n, u in _GO_PART.findall(text))


def _parse_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise NodewrightValidationError(name, f"{text!r} is not a boolean; write true or false")


def _parse_int(name: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise NodewrightValidationError(name, f"{text!r} is not an integer") from None


@dataclass(frozen=True)
class Settings:
    """Everything ``nodewright run`` needs (durations in seconds).

    Attributes:
        cluster_name: EKS cluster name; tags instances (``kubernetes.io/cluster/<name>``). Required.
        cluster_endpoint: API server URL handed to nodes' bootstrap; empty means discover it from EKS.
        interruption_queue: SQS queue name for EC2 interruption events; empty disables interruption handling.
        aws_region: AWS region. Required (``AWS_REGION`` or ``AWS_DEFAULT_REGION``).
        batch_idle_duration: seconds without new pending pods that close a provisioning batch.
        batch_max_duration: longest a provisioning batch stays open, seconds.
        log_level: ``debug``/``info``/``warn``/``error``.
        log_format: ``auto``/``json``/``text``.
        metrics_port: Prometheus ``/metrics`` port.
        health_probe_port: ``/healthz`` and ``/readyz`` port.
        metrics_bind_address: IP address the metrics endpoint listens on (``0.0.0.0``: every interface,
            as Karpenter's ``:METRICS_PORT``); names as controller-runtime's ``--metrics-bind-address``.
        health_probe_bind_address: IP address the health endpoint listens on (``0.0.0.0``).
        leader_election: whether to elect a leader on a Lease (off runs a single active replica).
        leader_election_namespace: namespace of the Lease.
        leader_election_name: name of the Lease (Karpenter's is ``karpenter-leader-election``).
        lease_duration: seconds a standby waits after the last renewal before taking over.
        renew_deadline: seconds the leader keeps acting without a successful renewal.
        retry_period: seconds between acquire/renew attempts.
        bind_pods: bind the pods a decision placed on a new node as soon as it registers.
        kubeconfig: path to a kubeconfig (empty: in-cluster, then ``~/.kube/config``).
        reconcile_period: seconds between controller passes in the run loop.
        cluster_ca_bundle: base64 (or PEM) cluster CA for node bootstrap; empty means ``eks:DescribeCluster``.
        cluster_cidr: Kubernetes service CIDR for node bootstrap; empty means ``eks:DescribeCluster``.
        pricing_policy: path of a PricingPolicy file (the chart mounts ``settings.pricingPolicy`` there); empty:
            list prices. Validated at start; see :class:`nodewright.pricing.policy.PolicyFile`.
    """

    cluster_name: str
    aws_region: str
    cluster_endpoint: str = ""
    interruption_queue: str = ""
    batch_idle_duration: float = 1.0
    batch_max_duration: float = 10.0
    log_level: str = "info"
    log_format: str = "auto"
    metrics_port: int = 8080
    health_probe_port: int = 8081
    metrics_bind_address: str = "0.0.0.0"
    health_probe_bind_address: str = "0.0.0.0"
    leader_election: bool = True
    leader_election_namespace: str = "kube-system"
    leader_election_name: str = "karpenter-leader-election"
    lease_duration: float = 10.0
    renew_deadline: float = 7.0
    retry_period: float = 2.0
    bind_pods: bool = False
    kubeconfig: str = ""
    reconcile_period: float = 0.25
    cluster_ca_bundle: str = ""
    cluster_cidr: str = ""
    pricing_policy: str = ""


#: field -> (environment variable, parser kind). Flags use the field name with dashes.
ENV_NAMES: dict[str, tuple[str, str]] = {
    "cluster_name": ("CLUSTER_NAME", "str"),
    "aws_region": ("AWS_REGION", "str"),
    "cluster_endpoint": ("CLUSTER_ENDPOINT", "str"),
    "interruption_queue": ("INTERRUPTION_QUEUE", "str"),
    "batch_idle_duration": ("BATCH_IDLE_DURATION", "duration"),
    "batch_max_duration": ("BATCH_MAX_DURATION", "duration"),
    "log_level": ("LOG_LEVEL", "str"),
    "log_format": ("NODEWRIGHT_LOG_FORMAT", "str"),
    "metrics_port": ("METRICS_PORT", "int"),
    "health_probe_port": ("HEALTH_PROBE_PORT", "int"),
    "metrics_bind_address": ("METRICS_BIND_ADDRESS", "str"),
    "health_probe_bind_address": ("HEALTH_PROBE_BIND_ADDRESS", "str"),
    "leader_election": ("NODEWRIGHT_LEADER_ELECTION", "bool"),
    "leader_election_namespace": ("SYSTEM_NAMESPACE", "str"),
    "leader_election_name": ("NODEWRIGHT_LEADER_ELECTION_NAME", "str"),
    "lease_duration": ("NODEWRIGHT_LEASE_DURATION", "duration"),
    "renew_deadline": ("NODEWRIGHT_RENEW_DEADLINE", "duration"),
    "retry_period": ("NODEWRIGHT_RETRY_PERIOD", "duration"),
    "bind_pods": ("BIND_PODS", "bool"),
    "kubeconfig": ("KUBECONFIG", "str"),
    "reconcile_period": ("NODEWRIGHT_RECONCILE_PERIOD", "duration"),
    "cluster_ca_bundle": ("CLUSTER_CA_BUNDLE", "str"),
    "cluster_cidr": ("CLUSTER_CIDR", "str"),
    "pricing_policy": ("NODEWRIGHT_PRICING_POLICY", "str"),
}


def _convert(field: str, env: str, kind: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if kind == "duration":
        return parse_go_duration(env, value)
    if kind == "int":
        return _parse_int(env, value)
    if kind == "bool":
        return _parse_bool(env, value)
    return value


def load_settings(env: Mapping[str, str], flags: Mapping[str, Any] | None = None) -> Settings:
    """Build :class:`Settings` from ``flags`` (field name -> value, None means unset) over ``env``.

    ``DISABLE_LEADER_ELECTION=true`` (Karpenter's name) turns leader election off.

    Raises:
        NodewrightValidationError: a required setting is missing or a value does not parse; the path
            names the environment variable, the reason names the flag too.
    """
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    values: dict[str, Any] = {}
    for field, (env_name, kind) in ENV_NAMES.items():
        if field in flags:
            values[field] = _convert(field, env_name, kind, flags[field])
        elif env.get(env_name, "") != "":
            values[field] = _convert(field, env_name, kind, env[env_name])
    if "aws_region" not in values and env.get("AWS_DEFAULT_REGION"):
        values["aws_region"] = env["AWS_DEFAULT_REGION"]
    if "leader_election" not in values and env.get("DISABLE_LEADER_ELECTION"):
        values["leader_election"] = not _parse_bool("DISABLE_LEADER_ELECTION", env["DISABLE_LEADER_ELECTION"])
    for required in ("cluster_name", "aws_region"):
        if not values.get(required):
            env_name = ENV_NAMES[required][0]
            flag = "--" + required.replace("_", "-")
            raise NodewrightValidationError(env_name, f"required: set {flag} or the {env_name} environment variable")
    settings = Settings(**values)
    _check(settings)
    return settings


def _check(s: Settings) -> None:
    if s.batch_idle_duration <= 0 or s.batch_max_duration <= 0:
        raise NodewrightValidationError("BATCH_IDLE_DURATION", "batch durations must be positive")
    if s.batch_idle_duration > s.batch_max_duration:
        raise NodewrightValidationError(
            "BATCH_IDLE_DURATION",
            f"{s.batch_idle_duration}s exceeds BATCH_MAX_DURATION {s.batch_max_duration}s",
        )
    if not s.retry_period < s.renew_deadline < s.lease_duration:
        raise NodewrightValidationError(
            "NODEWRIGHT_LEASE_DURATION", "need retry period < renew deadline < lease duration"
        )
    if s.pricing_policy:
        from nodewright.pricing import load_pricing_policy

        load_pricing_policy(s.pricing_policy)  # a bad file stops the controller at start, one line, exit 2
    for port_field in ("metrics_port", "health_probe_port"):
        port = getattr(s, port_field)
        if not 0 <= port <= 65535:
            raise NodewrightValidationError(ENV_NAMES[port_field][0], f"port {port} is out of range")
    for address_field in ("metrics_bind_address", "health_probe_bind_address"):
        address = getattr(s, address_field)
        try:
            ipaddress.ip_address(address)
        except ValueError:
            env_name = ENV_NAMES[address_field][0]
            raise NodewrightValidationError(
                env_name, f"{address!r} is not an IP address (e.g. 0.0.0.0, 127.0.0.1 or ::); the port is "
                f"{env_name.replace('BIND_ADDRESS', 'PORT')}") from None


def setting_names() -> list[str]:
    """All :class:`Settings` field names (for the CLI's flags)."""
    return [f.name for f in fields(Settings)]
