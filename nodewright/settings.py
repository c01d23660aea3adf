"""Controller settings from command-line flags and environment variables.

Names follow Karpenter's where they exist (its ``--flag`` / ``ENV_VAR`` pairs in the Karpenter settings
documentation): ``CLUSTER_NAME``, ``CLUSTER_ENDPOINT``, ``INTERRUPTION_QUEUE``, ``BATCH_IDLE_DURATION``
(default 1s), ``BATCH_MAX_DURATION`` (default 10s), ``LOG_LEVEL``, ``LOG_OUTPUT_PATHS``, ``METRICS_PORT``
(8080), ``HEALTH_PROBE_PORT`` (8081), ``DISABLE_LEADER_ELECTION``, ``LEADER_ELECTION_NAME``,
``LEADER_ELECTION_NAMESPACE``, ``FEATURE_GATES``, ``VM_MEMORY_OVERHEAD_PERCENT``, ``RESERVED_ENIS``,
``ISOLATED_VPC``, ``EKS_CONTROL_PLANE``, ``PREFERENCE_POLICY``, ``MIN_VALUES_POLICY``, ``AWS_REGION``
(Karpenter v1.14 settings reference). nodewright's own additions use the ``NODEWRIGHT_`` prefix or have no
Karpenter counterpart (``BIND_PODS``; ``METRICS_BIND_ADDRESS`` and
``HEALTH_PROBE_BIND_ADDRESS``, controller-runtime's names: Karpenter itself always listens on every interface). A flag wins over its environment variable; a missing or malformed
value is one clear :class:`NodewrightValidationError` naming the variable.

How each Karpenter setting is honoured:

* ``VM_MEMORY_OVERHEAD_PERCENT`` (0.075) and ``RESERVED_ENIS`` (0): the AWS provider's allocatable maths
  (:class:`nodewright.cloud.overhead.KubeletSettings`).
* ``ISOLATED_VPC``: no ``pricing:GetProducts`` call (the AWS Pricing API has no VPC endpoint); on-demand
  prices come from the bundled table.
* ``EKS_CONTROL_PLANE``: the Kubernetes version (for AMI aliases) comes from ``eks:DescribeCluster``
  instead of the API server's ``/version``.
* ``PREFERENCE_POLICY`` (``Respect``, or ``Ignore``: the scheduler drops preferred node affinity, preferred pod
  (anti-)affinity and ``ScheduleAnyway`` spreads; :mod:`nodewright.scheduling.preferences`). Carried to the
  provisioner and the disruption simulations (``ControllerOptions.preference_policy``); ``simulate`` reads the
  same variable (:func:`preference_policy`).
* ``MIN_VALUES_POLICY`` (``Strict``, or ``BestEffort``: relax a ``minValues`` the candidate instance types miss
  instead of launching nothing; :mod:`nodewright.scheduling.minvalues`). Carried to the provisioner
  (``ControllerOptions.min_values_policy``); ``simulate`` reads the same variable (:func:`min_values_policy`).
* ``SCHEDULER_CONFIG`` (Karpenter main's ``--scheduler-config``; empty: none): a YAML/JSON document whose
  ``podTopologySpread.defaultConstraints`` (or ``defaultingType: System``) pods without their own
  ``topologySpreadConstraints`` get in scheduling, as kube-scheduler gives them
  (:mod:`nodewright.state.defaultspread`). Carried to the cluster models (``Runtime``); ``simulate`` reads the
  same variable (:func:`scheduler_config`).
* ``LOG_OUTPUT_PATHS`` (``stdout``): comma-separated ``stdout``, ``stderr`` or file paths.
* ``FEATURE_GATES``: see :class:`FeatureGates`.
* ``AWS_FEATURE_GATES``: see :class:`AwsFeatureGates`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from nodewright.errors import NodewrightValidationError

if TYPE_CHECKING:
    from nodewright.state.defaultspread import SchedulerConfig

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


def _parse_float(name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise NodewrightValidationError(name, f"{text!r} is not a number") from None


#: Go's ``strconv.ParseBool`` spellings, which Karpenter's ``--feature-gates`` parser accepts.
_GO_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_GO_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


@dataclass(frozen=True)
class FeatureGates:
    """Karpenter's feature gates (``FEATURE_GATES``, ``Gate=bool,...``) with its defaults: the same six in v1.14
    and in main of 2026-08-20 (the newest source here; v1.15.1's is assumed to match).

    ``SpotToSpotConsolidation`` (off) allows consolidation to replace a spot node with a cheaper spot node.
    ``ReservedCapacity`` (on): off = ``capacityReservationSelectorTerms`` are ignored (no reserved offerings, no
    launch into a reservation, one warning per EC2NodeClass that has terms;
    :class:`nodewright.cloud.reservations.ReservedCapacityGate`). ``StaticCapacity`` (off): off = static NodePools
    (``spec.replicas``) are not managed (no NodeClaims kept for them, one warning each; still never used by the
    dynamic provisioner, as in Karpenter; :mod:`nodewright.controllers.static`). ``NodeRepair`` (off) runs the node
    health controller (:mod:`nodewright.controllers.repair`: unhealthy Nodes past their cloud provider's toleration
    are replaced). ``CapacityBuffer`` (off) holds the headroom of ``autoscaling.x-k8s.io/v1beta1`` CapacityBuffers
    (:mod:`nodewright.controllers.buffer`; off, they are ignored with one warning). ``NodeOverlay`` (off) applies
    the cluster's NodeOverlays to instance types (:mod:`nodewright.cloud.overlay`; off: they are ignored, with one
    warning).
    Source: ``pkg/operator/options/options.go`` in kubernetes-sigs/karpenter (v1.14 and main) and its settings page.
    """

    node_repair: bool = False
    reserved_capacity: bool = True
    spot_to_spot_consolidation: bool = False
    node_overlay: bool = False
    static_capacity: bool = False
    capacity_buffer: bool = False


#: Karpenter gate name -> (FeatureGates field, why turning it on is refused, or "" when it is honoured).
FEATURE_GATE_NAMES: dict[str, tuple[str, str]] = {
    "NodeRepair": ("node_repair", ""),
    "ReservedCapacity": ("reserved_capacity", ""),
    "SpotToSpotConsolidation": ("spot_to_spot_consolidation", ""),
    "NodeOverlay": ("node_overlay", ""),
    "StaticCapacity": ("static_capacity", ""),
    "CapacityBuffer": ("capacity_buffer", ""),
}
#: Gates Karpenter removed, with what replaced them.
_REMOVED_GATES = {"Drift": "drift is always on since Karpenter v1; limit it with a NodePool disruption budget "
                           "for reason Drifted"}


@dataclass(frozen=True)
class AwsFeatureGates:
    """The AWS provider's own feature gates (``AWS_FEATURE_GATES`` / ``--aws-feature-gates``, Karpenter AWS
    provider v1.15), with its defaults.

    ``NodeClassCEL`` (off) lets EC2NodeClass ``kubelet.maxPods``, ``kubeReserved`` and ``systemReserved`` be CEL
    expressions evaluated per instance type (:mod:`nodewright.cloud.kubeletexpr`); while off, a class using one
    is not Ready (reason ``KubeletExpressionsDisabled``).
    ``RebootForRepair`` (off; with ``NodeRepair=true``) repairs an unhealthy node by ``ec2:RebootInstances`` first
    and replaces it only when it is still unhealthy a toleration later (:mod:`nodewright.controllers.repair`). The
    gate is named in Karpenter v1.15's release (issue 28); the AWS provider source available here (main,
    2026-08-21) has no such gate, so its behaviour is nodewright's own (docs/karpenter-compatibility.md).
    Source: aws/karpenter-provider-aws ``pkg/operator/options`` (``--aws-feature-gates``).
    """

    node_class_cel: bool = False
    reboot_for_repair: bool = False


AWS_FEATURE_GATE_NAMES: dict[str, tuple[str, str]] = {"NodeClassCEL": ("node_class_cel", ""),
                                                       "RebootForRepair": ("reboot_for_repair", "")}


def parse_aws_feature_gates(text: str, name: str = "AWS_FEATURE_GATES") -> AwsFeatureGates:
    """:class:`AwsFeatureGates` from ``"NodeClassCEL=true"``; errors as :func:`parse_feature_gates`."""
    return AwsFeatureGates(**_parse_gates(text, name, AWS_FEATURE_GATE_NAMES))


def parse_feature_gates(text: str, name: str = "FEATURE_GATES") -> FeatureGates:
    """:class:`FeatureGates` from ``"SpotToSpotConsolidation=true,NodeRepair=false"`` (unset gates keep
    Karpenter's defaults).

    Raises:
        NodewrightValidationError: naming ``name`` for an entry that is not ``Gate=bool``, an unknown or removed
            gate, or a gate nodewright cannot honour set to true.
    """
    return FeatureGates(**_parse_gates(text, name, FEATURE_GATE_NAMES))


def _parse_gates(text: str, name: str, table: Mapping[str, tuple[str, str]]) -> dict[str, bool]:
    """Field name -> value of the gates ``text`` sets, for the gate ``table`` (name -> (field, refusal))."""
    values: dict[str, bool] = {}
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        gate, sep, raw = (part.strip() for part in entry.partition("="))
        if not sep or raw not in _GO_TRUE | _GO_FALSE:
            raise NodewrightValidationError(name, f"{entry!r} is not Gate=true or Gate=false")
        if gate in _REMOVED_GATES:
            raise NodewrightValidationError(name, f"feature gate {gate!r} was removed: {_REMOVED_GATES[gate]}")
        if gate not in table:
            raise NodewrightValidationError(
                name, f"unknown feature gate {gate!r}; known gates: {', '.join(sorted(table))}")
        field_name, refusal = table[gate]
        enabled = raw in _GO_TRUE
        if enabled and refusal:
            raise NodewrightValidationError(name, f"{gate}=true is not supported: {refusal}; remove it or set false")
        values[field_name] = enabled
    return values


#: Accepted values of the scheduling policies, first = Karpenter's default.
PREFERENCE_POLICIES = ("Respect", "Ignore")
MIN_VALUES_POLICIES = ("Strict", "BestEffort")


def _policy(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = env.get(name) or choices[0]
    if value not in choices:
        raise NodewrightValidationError(name, f"{value!r} is not one of {', '.join(choices)}")
    return value


def min_values_policy(env: Mapping[str, str]) -> str:
    """Karpenter's ``MinValuesPolicy`` from ``MIN_VALUES_POLICY`` in ``env`` (``Strict`` when unset or empty): how
    ``simulate -f`` and scenario replay read the controller's setting.

    Raises:
        NodewrightValidationError: a value other than Strict or BestEffort.
    """
    return _policy(env, "MIN_VALUES_POLICY", MIN_VALUES_POLICIES)


def feature_gates(env: Mapping[str, str]) -> FeatureGates:
    """Karpenter's ``FEATURE_GATES`` in ``env`` (defaults when unset): how ``simulate -f`` and scenario replay read
    the controller's gates.

    Raises:
        NodewrightValidationError: see :func:`parse_feature_gates`.
    """
    return parse_feature_gates(env.get("FEATURE_GATES", ""))


def nominate_pods(env: Mapping[str, str]) -> bool:
    """``NOMINATE_PODS`` (default true): whether the nomination controller publishes the plan (issue 25).

    Raises:
        NodewrightValidationError: not a boolean.
    """
    return _env_bool(env, "NOMINATE_PODS", True)


def nomination_hold(env: Mapping[str, str]) -> bool:
    """``NOMINATION_HOLD`` (default true): the nomination controller's readiness hold (issue 25).

    Raises:
        NodewrightValidationError: not a boolean.
    """
    return _env_bool(env, "NOMINATION_HOLD", True)


def _env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    text = env.get(name)
    return default if text is None or text == "" else _parse_bool(name, text)


def preference_policy(env: Mapping[str, str]) -> str:
    """Karpenter's ``PreferencePolicy`` from ``PREFERENCE_POLICY`` in ``env`` (``Respect`` when unset or empty): how
    ``simulate -f`` and scenario replay read the controller's setting.

    Raises:
        NodewrightValidationError: a value other than Respect or Ignore.
    """
    return _policy(env, "PREFERENCE_POLICY", PREFERENCE_POLICIES)


def scheduler_config(env: Mapping[str, str]) -> SchedulerConfig | None:
    """Karpenter's ``SCHEDULER_CONFIG`` in ``env`` (None when unset or empty): how ``simulate -f`` and scenario
    replay read the controller's default topology spread.

    Raises:
        NodewrightValidationError: see :func:`nodewright.state.defaultspread.parse_scheduler_config`.
    """
    from nodewright.state.defaultspread import parse_scheduler_config

    return parse_scheduler_config(env.get("SCHEDULER_CONFIG", ""))


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
        leader_election_name: name of the Lease; our own default so nodewright and Karpenter installed side by
            side do not compete for Karpenter's ``karpenter-leader-election``.
        lease_duration: seconds a standby waits after the last renewal before taking over.
        renew_deadline: seconds the leader keeps acting without a successful renewal.
        retry_period: seconds between acquire/renew attempts.
        bind_pods: bind the pods a decision placed on a new node as soon as it registers.
        nominate_pods: set ``status.nominatedNodeName`` of planned pods once their node registers (KEP-5278;
            ``NOMINATE_PODS``, default true; needs ``patch`` on ``pods/status``).
        nomination_hold: the readiness hold: a planned Node registers with
            ``nodewright.io/nominating=<NodeClaim>:NoSchedule``, its pods get the toleration of that taint alone, and
            it is lifted once the pods of its batch are placed (``NOMINATION_HOLD``, default true; needs ``patch``
            on ``pods``, which the chart narrows to that toleration; :mod:`nodewright.controllers.nomination`).
        kubeconfig: path to a kubeconfig (empty: in-cluster, then ``~/.kube/config``).
        reconcile_period: seconds between controller passes in the run loop.
        cluster_ca_bundle: base64 (or PEM) cluster CA for node bootstrap; empty means ``eks:DescribeCluster``.
        cluster_cidr: Kubernetes service CIDR for node bootstrap; empty means ``eks:DescribeCluster``.
        pricing_policy: path of a PricingPolicy file (the chart mounts ``settings.pricingPolicy`` there); empty:
            list prices. Validated at start; see :class:`nodewright.pricing.policy.PolicyFile`.
        feature_gates: Karpenter's feature gates (``FEATURE_GATES``).
        aws_feature_gates: the AWS provider's feature gates (``AWS_FEATURE_GATES``).
        vm_memory_overhead_percent: fraction of an instance's memory the hypervisor keeps (0.075).
        reserved_enis: ENIs kept out of the max-pods calculation (VPC CNI custom networking).
        isolated_vpc: no calls to AWS APIs without a VPC endpoint (the Pricing API).
        eks_control_plane: take the Kubernetes version from ``eks:DescribeCluster``.
        preference_policy: ``Respect`` or ``Ignore`` (Karpenter's ``PreferencePolicy``).
        multi_node_consolidation_timeout, single_node_consolidation_timeout: seconds a multi-node / single-node
            consolidation search may run (Karpenter's fixed ``MultiNodeConsolidationTimeoutDuration`` 1m and
            ``SingleNodeConsolidationTimeoutDuration`` 3m); ``NODEWRIGHT_MULTI_NODE_CONSOLIDATION_TIMEOUT`` /
            ``NODEWRIGHT_SINGLE_NODE_CONSOLIDATION_TIMEOUT``. Multi-node then acts on its best move so far.
        multi_node_consolidation_candidates: the most candidates one multi-node search considers (Karpenter's
            fixed 100); ``NODEWRIGHT_MULTI_NODE_CONSOLIDATION_CANDIDATES``.
        consolidation_replacement_pod_share: the largest share of its NodePool's pods one consolidation
            replacement may take (at least 110 pods); ``NODEWRIGHT_CONSOLIDATION_REPLACEMENT_POD_SHARE``, 0.1.
        min_values_policy: ``Strict`` or ``BestEffort`` (Karpenter's ``MinValuesPolicy``).
        scheduler_config: Karpenter's ``SCHEDULER_CONFIG`` / ``--scheduler-config`` (None: no default topology
            spread; :class:`~nodewright.state.defaultspread.SchedulerConfig`).
        log_output_paths: where logs go: ``stdout``, ``stderr`` or file paths.
        gc_grace_period: seconds an instance with no NodeClaim may exist before garbage collection terminates it
            (``NODEWRIGHT_GC_GRACE_PERIOD``, 30s; Karpenter hard-codes its 30 s grace, no setting).
        gc_period: seconds between garbage-collection passes, each listing every instance (``NODEWRIGHT_GC_PERIOD``,
            30s; Karpenter requeues its GC controller every 2 min, no setting).
        disruption_poll_period: seconds between disruption decisions (``NODEWRIGHT_DISRUPTION_POLL_PERIOD``, 10s:
            Karpenter's constant ``pollingPeriod``).
        disruption_validation_delay: seconds a disruption decision waits before it is validated again and executed
            (``NODEWRIGHT_DISRUPTION_VALIDATION_DELAY``, 15s: Karpenter's constant consolidation TTL).
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
    leader_election_name: str = "nodewright-leader-election"
    lease_duration: float = 10.0
    renew_deadline: float = 7.0
    retry_period: float = 2.0
    bind_pods: bool = False
    nominate_pods: bool = True
    nomination_hold: bool = True
    kubeconfig: str = ""
    reconcile_period: float = 0.25
    cluster_ca_bundle: str = ""
    cluster_cidr: str = ""
    pricing_policy: str = ""
    feature_gates: FeatureGates = FeatureGates()
    aws_feature_gates: AwsFeatureGates = AwsFeatureGates()
    vm_memory_overhead_percent: float = 0.075
    reserved_enis: int = 0
    isolated_vpc: bool = False
    eks_control_plane: bool = False
    preference_policy: str = "Respect"
    min_values_policy: str = "Strict"
    scheduler_config: SchedulerConfig | None = None
    log_output_paths: tuple[str, ...] = ("stdout",)
    multi_node_consolidation_timeout: float = 60.0
    single_node_consolidation_timeout: float = 180.0
    multi_node_consolidation_candidates: int = 100
    consolidation_replacement_pod_share: float = 0.1
    gc_grace_period: float = 30.0
    gc_period: float = 30.0
    disruption_poll_period: float = 10.0
    disruption_validation_delay: float = 15.0


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
    "leader_election_namespace": ("LEADER_ELECTION_NAMESPACE", "str"),
    "leader_election_name": ("LEADER_ELECTION_NAME", "str"),
    "lease_duration": ("NODEWRIGHT_LEASE_DURATION", "duration"),
    "renew_deadline": ("NODEWRIGHT_RENEW_DEADLINE", "duration"),
    "retry_period": ("NODEWRIGHT_RETRY_PERIOD", "duration"),
    "bind_pods": ("BIND_PODS", "bool"),
    "nominate_pods": ("NOMINATE_PODS", "bool"),
    "nomination_hold": ("NOMINATION_HOLD", "bool"),
    "kubeconfig": ("KUBECONFIG", "str"),
    "reconcile_period": ("NODEWRIGHT_RECONCILE_PERIOD", "duration"),
    "cluster_ca_bundle": ("CLUSTER_CA_BUNDLE", "str"),
    "cluster_cidr": ("CLUSTER_CIDR", "str"),
    "pricing_policy": ("NODEWRIGHT_PRICING_POLICY", "str"),
    "feature_gates": ("FEATURE_GATES", "gates"),
    "aws_feature_gates": ("AWS_FEATURE_GATES", "aws_gates"),
    "vm_memory_overhead_percent": ("VM_MEMORY_OVERHEAD_PERCENT", "float"),
    "reserved_enis": ("RESERVED_ENIS", "int"),
    "isolated_vpc": ("ISOLATED_VPC", "bool"),
    "eks_control_plane": ("EKS_CONTROL_PLANE", "bool"),
    "preference_policy": ("PREFERENCE_POLICY", "str"),
    "min_values_policy": ("MIN_VALUES_POLICY", "str"),
    "scheduler_config": ("SCHEDULER_CONFIG", "scheduler_config"),
    "log_output_paths": ("LOG_OUTPUT_PATHS", "list"),
    "multi_node_consolidation_timeout": ("NODEWRIGHT_MULTI_NODE_CONSOLIDATION_TIMEOUT", "duration"),
    "single_node_consolidation_timeout": ("NODEWRIGHT_SINGLE_NODE_CONSOLIDATION_TIMEOUT", "duration"),
    "multi_node_consolidation_candidates": ("NODEWRIGHT_MULTI_NODE_CONSOLIDATION_CANDIDATES", "int"),
    "consolidation_replacement_pod_share": ("NODEWRIGHT_CONSOLIDATION_REPLACEMENT_POD_SHARE", "float"),
    "gc_grace_period": ("NODEWRIGHT_GC_GRACE_PERIOD", "duration"),
    "gc_period": ("NODEWRIGHT_GC_PERIOD", "duration"),
    "disruption_poll_period": ("NODEWRIGHT_DISRUPTION_POLL_PERIOD", "duration"),
    "disruption_validation_delay": ("NODEWRIGHT_DISRUPTION_VALIDATION_DELAY", "duration"),
}
#: Fallback environment variables read when the primary one is unset (older or nodewright-specific names).
ENV_ALIASES: dict[str, tuple[str, ...]] = {
    "aws_region": ("AWS_DEFAULT_REGION",),
    "leader_election_namespace": ("SYSTEM_NAMESPACE",),  # the pod's namespace, set by the chart
    "leader_election_name": ("NODEWRIGHT_LEADER_ELECTION_NAME",),
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
    if kind == "float":
        return _parse_float(env, value)
    if kind == "gates":
        return parse_feature_gates(value, env)
    if kind == "aws_gates":
        return parse_aws_feature_gates(value, env)
    if kind == "scheduler_config":
        from nodewright.state.defaultspread import parse_scheduler_config

        return parse_scheduler_config(value, env)
    if kind == "list":
        return tuple(part.strip() for part in value.split(",") if part.strip())
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
            continue
        for name in (env_name, *ENV_ALIASES.get(field, ())):
            if env.get(name, "") != "":
                values[field] = _convert(field, name, kind, env[name])
                break
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
    if not 0 <= s.vm_memory_overhead_percent < 1:
        raise NodewrightValidationError("VM_MEMORY_OVERHEAD_PERCENT",
                                        f"{s.vm_memory_overhead_percent} is not a fraction in [0, 1) (default 0.075)")
    if s.reserved_enis < 0:
        raise NodewrightValidationError("RESERVED_ENIS", f"{s.reserved_enis} is negative")
    for env_name, value, choices in (("PREFERENCE_POLICY", s.preference_policy, PREFERENCE_POLICIES),
                                     ("MIN_VALUES_POLICY", s.min_values_policy, MIN_VALUES_POLICIES)):
        if value not in choices:
            raise NodewrightValidationError(env_name, f"{value!r} is not one of {', '.join(choices)}")
    for timing in ("gc_grace_period", "gc_period", "disruption_poll_period", "disruption_validation_delay"):
        if getattr(s, timing) <= 0:
            raise NodewrightValidationError(ENV_NAMES[timing][0], f"{getattr(s, timing)}s is not a positive duration")
    if not s.log_output_paths:
        raise NodewrightValidationError("LOG_OUTPUT_PATHS", "give stdout, stderr or a file path")
    for timeout_field in ("multi_node_consolidation_timeout", "single_node_consolidation_timeout"):
        if getattr(s, timeout_field) <= 0:
            raise NodewrightValidationError(ENV_NAMES[timeout_field][0], "must be a positive duration (e.g. 1m)")
    if s.multi_node_consolidation_candidates < 2:
        raise NodewrightValidationError("NODEWRIGHT_MULTI_NODE_CONSOLIDATION_CANDIDATES",
                                        f"{s.multi_node_consolidation_candidates} is below 2 (default 100)")
    if not 0 < s.consolidation_replacement_pod_share <= 1:
        raise NodewrightValidationError("NODEWRIGHT_CONSOLIDATION_REPLACEMENT_POD_SHARE",
                                        f"{s.consolidation_replacement_pod_share} is not a fraction in (0, 1] "
                                        "(default 0.1)")
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
