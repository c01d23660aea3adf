"""``nodewright run``: wire settings, adapters and controllers, elect a leader, loop until SIGTERM.

Threads: one per informer (list+watch), one for the metrics endpoint, one for the health endpoint, one for
leader election (:meth:`~nodewright.kube.leaderelection.LeaderElector.run`: acquire/renew every
``retry_period``, whatever the controllers are doing), and the main loop, which runs
:meth:`~nodewright.controllers.manager.ControllerManager.step` every ``reconcile_period`` while leading. A
pass checks leadership between controllers, so a replica whose renewals fail for ``renew_deadline`` stops
acting within one controller of it. SIGTERM/SIGINT set the stop event: the loop finishes its controller,
stops the election thread, releases the Lease (so the standby takes over at once) and stops the endpoints.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nodewright.cloud.overlay import OverlayStore
from nodewright.cloud.provider import CloudProvider
from nodewright.controllers.cloud_metrics import MeteredCloudProvider
from nodewright.controllers.common import Context
from nodewright.controllers.interruption import InterruptionSource
from nodewright.controllers.manager import ControllerManager, ControllerOptions
from nodewright.controllers.provisioning import launch_pricing_hook
from nodewright.disruption import ConsolidationOptions
from nodewright.kube import resources as r
from nodewright.kube.client import KubernetesCluster
from nodewright.kube.cluster import Clock, Cluster
from nodewright.kube.leaderelection import LeaderElector, LeaseConfig
from nodewright.metrics import HttpEndpoint, Metrics, health_endpoint, metrics_endpoint
from nodewright.pricing.policy import PolicyFile
from nodewright.settings import Settings
from nodewright.state.models import models_for

log = logging.getLogger("nodewright.runtime")


def default_identity() -> str:
    """``<hostname>_<random>``: unique per process, like client-go's leader election identities."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass
class Runtime:
    """A running controller replica.

    Args:
        cluster: the cluster interface (a :class:`KubernetesCluster` in production).
        cloud: the cloud provider.
        settings: settings (timings, ports, leader election).
        clock: epoch seconds (``time.time``).
        interruption: interruption messages source, or None.
        identity: leader election identity.
        host: bind address of both the metrics and health endpoints, overriding the settings'
            ``metrics_bind_address`` / ``health_probe_bind_address`` (None: use those).
        sleep: the main loop's pause between passes (default ``stop.wait``).
        election_wait: the election thread's pause between attempts, ``wait(seconds) -> stop requested``
            (default: the election stop event's ``wait``; tests inject a stepped one).
    """

    cluster: Cluster
    cloud: CloudProvider
    settings: Settings
    clock: Clock = time.time
    interruption: InterruptionSource | None = None
    identity: str = field(default_factory=default_identity)
    host: str | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    sleep: Callable[[float], Any] | None = None
    election_wait: Callable[[float], bool] | None = None

    def __post_init__(self) -> None:
        s = self.settings
        self.metrics = Metrics()
        pricing = getattr(self.cloud, "pricing", None)
        if pricing is not None and hasattr(pricing, "on_demand_fallback"):
            self.metrics.observe_pricing(pricing)
        attach = getattr(self.cloud, "attach_metrics", None)
        if callable(attach):  # the AWS provider's own families (launch/termination failures, user data size)
            attach(self.metrics)
        cloud = MeteredCloudProvider(self.cloud, self.metrics, lambda: self.manager.current)
        self.ctx = Context(self.cluster, cloud, self.clock, self.metrics, s.cluster_name,
                           overlays=OverlayStore(enabled=s.feature_gates.node_overlay))
        policy = PolicyFile(s.pricing_policy) if s.pricing_policy else None
        if policy is not None and hasattr(self.cloud, "launch_pricing"):
            # The fleet request ranks its overrides by the same marginal prices the provisioner chose by.
            self.cloud.launch_pricing = launch_pricing_hook(policy.current, self.cluster)
        options = ControllerOptions(batch_idle_duration=s.batch_idle_duration,
                                    batch_max_duration=s.batch_max_duration, bind_pods=s.bind_pods,
                                    nominate_pods=s.nominate_pods, nomination_hold=s.nomination_hold,
                                    spot_to_spot_consolidation=s.feature_gates.spot_to_spot_consolidation,
                                    capacity_buffer=s.feature_gates.capacity_buffer,
                                    static_capacity=s.feature_gates.static_capacity,
                                    preference_policy=s.preference_policy, min_values_policy=s.min_values_policy,
                                    pricing_policy=policy.current if policy else None,
                                    consolidation=ConsolidationOptions(
                                        multi_node_timeout=s.multi_node_consolidation_timeout,
                                        single_node_timeout=s.single_node_consolidation_timeout,
                                        max_candidates=s.multi_node_consolidation_candidates,
                                        window=min(s.multi_node_consolidation_candidates, 100),
                                        max_replacement_pod_share=s.consolidation_replacement_pod_share),
                                    gc_grace=s.gc_grace_period, gc_period=s.gc_period,
                                    disruption_poll_period=s.disruption_poll_period,
                                    disruption_validation_delay=s.disruption_validation_delay,
                                    node_repair=s.feature_gates.node_repair,
                                    reboot_for_repair=s.aws_feature_gates.reboot_for_repair)
        if s.aws_feature_gates.reboot_for_repair and not s.feature_gates.node_repair:
            log.warning("AWS_FEATURE_GATES RebootForRepair=true has no effect without FEATURE_GATES NodeRepair=true")
        if s.scheduler_config is not None and s.scheduler_config.constraints:
            log.info("SCHEDULER_CONFIG is set: pods without their own topologySpreadConstraints get these default "
                     "constraints in scheduling", extra={"default_topology_spread_constraints":
                                                         list(s.scheduler_config.constraints)})
        models_for(self.cluster).use_scheduler_config(s.scheduler_config)
        self.manager = ControllerManager(self.ctx, options, self.interruption)
        self.elector = LeaderElector(
            self.cluster, self.identity,
            LeaseConfig(s.leader_election_namespace, s.leader_election_name, s.lease_duration,
                        s.renew_deadline, s.retry_period),
            self.clock,
        ) if s.leader_election else None
        # Read at scrape time: leadership changes on the election thread, between the loop's passes.
        self.metrics.leader.set_function(lambda: 1.0 if self.is_leader else 0.0)
        self.endpoints: list[HttpEndpoint] = []
        self.steps = 0
        self._last_loop = time.monotonic()
        self._unsynced_since: float | None = None

    # --- probes ------------------------------------------------------------------------------

    def live(self) -> bool:
        """Liveness: the main loop turned within the last minute."""
        return time.monotonic() - self._last_loop < 60.0

    def ready(self) -> bool:
        """Readiness: caches synced (standbys are ready too, so a rollout can proceed)."""
        synced = getattr(self.cluster, "has_synced", None)
        return bool(synced()) if callable(synced) else True

    @property
    def is_leader(self) -> bool:
        """Whether this replica acts now."""
        return self.elector.is_leader if self.elector else True

    # --- loop --------------------------------------------------------------------------------

    def _observe_sync(self) -> None:
        """``karpenter_cluster_state_synced`` and ``_unsynced_time_seconds`` (0 while synced)."""
        synced = getattr(self.cluster, "has_synced", None)
        is_synced = not callable(synced) or bool(synced())
        self.metrics.cluster_state_synced.set(1 if is_synced else 0)
        if is_synced:
            self._unsynced_since = None
        elif self._unsynced_since is None:
            self._unsynced_since = self.clock()
        self.metrics.cluster_state_unsynced_time.set(
            0.0 if self._unsynced_since is None else max(0.0, self.clock() - self._unsynced_since))

    def start_endpoints(self) -> None:
        """Serve ``/metrics`` and ``/healthz`` + ``/readyz`` (ports from settings; 0 picks free ports)."""
        self.endpoints = [
            metrics_endpoint(self.metrics, self.host or self.settings.metrics_bind_address,
                             self.settings.metrics_port).start(),
            health_endpoint(self.live, self.ready, self.host or self.settings.health_probe_bind_address,
                            self.settings.health_probe_port).start(),
        ]

    def run(self) -> None:
        """Loop until :attr:`stop` is set, then stop the election thread, release the Lease, stop the endpoints."""
        wait = self.sleep or self.stop.wait
        election_stop = threading.Event()
        election = None
        if self.elector is not None:
            wait_election = self.election_wait or (lambda seconds: self.stop.wait(seconds) or election_stop.is_set())
            election = self.elector.start(election_stop, wait_election)
        try:
            while not self.stop.is_set():
                self._last_loop = time.monotonic()
                self._observe_sync()
                if self.is_leader and self.ready():
                    self.manager.step(keep_going=lambda: self.is_leader and not self.stop.is_set())
                    self.steps += 1
                wait(self.settings.reconcile_period)
        finally:
            election_stop.set()
            if election is not None:
                election.join(max(self.settings.retry_period, 1.0) * 5)
            if self.elector is not None:
                self.elector.release()
            for endpoint in self.endpoints:
                endpoint.stop()
            log.info("stopped", extra={"identity": self.identity})


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT set ``stop`` (graceful shutdown)."""

    def handler(signum: int, _frame: Any) -> None:
        log.info("received signal %d, shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def build_runtime(
    settings: Settings,
    stop: threading.Event | None = None,
    aws_endpoint_url: str | None = None,
    aws_clients: Any = None,
    host: str | None = None,
    identity: str | None = None,
) -> Runtime:
    """Production wiring without blocking: the official Kubernetes client (informers not started yet), the AWS
    provider, the SQS interruption queue when ``settings.interruption_queue`` is set, and a :class:`Runtime`.

    Args:
        settings: the controller settings.
        stop: the shutdown event (a new one when None).
        aws_endpoint_url: endpoint override for every AWS service (a local emulator), else AWS itself.
        aws_clients: ready :class:`~nodewright.cloud.aws.clients.AWSClients` (tests), else built from settings.
        host: bind address of both endpoints, overriding the settings' bind addresses (None: use those).
        identity: leader election identity (default :func:`default_identity`).

    Raises:
        StartupError: the region is not a region name, the Kubernetes configuration cannot be loaded, or no AWS
            credentials are found (:mod:`nodewright.startup` classes ``aws-region``, ``kubeconfig``,
            ``aws-credentials``).
        KubeError: ``GET /version`` fails (unreachable API server, credentials refused).
        NodewrightValidationError: ``CLUSTER_ENDPOINT``, ``CLUSTER_CA_BUNDLE`` or ``CLUSTER_CIDR`` is malformed.
        AuthorizationError, ClusterDiscoveryError: one of them is unset and ``eks:DescribeCluster`` was denied or
            failed (:mod:`nodewright.cloud.aws.cluster`).
        :func:`nodewright.startup.classify` maps each of these to its exit code.
    """
    import boto3

    from nodewright.api.manifests import parse_ec2nodeclass
    from nodewright.cloud.aws.clients import AWSClients, ClientSettings
    from nodewright.cloud.aws.cluster import configured_facts, eks_kubernetes_version, resolve_cluster_facts
    from nodewright.cloud.aws.interruption import InterruptionQueue
    from nodewright.cloud.aws.provider import AWSCloudProvider, AWSProviderSettings
    from nodewright.kube.errors import KubeError
    from nodewright.kube.rest import RestClient, load_api_client
    from nodewright.startup import (
        check_capacity_buffer_crd,
        check_credentials,
        check_region,
        kubeconfig_error,
    )

    check_region(settings.aws_region)
    try:
        api_client = load_api_client(settings.kubeconfig or None)
    except KubeError as err:
        raise kubeconfig_error(err, settings.kubeconfig) from err
    rest = RestClient(api_client)
    # CapacityBuffers and what they reference are watched only with the gate on (the CRD may not be installed).
    kinds = (*r.WATCHED, *r.BUFFER_WATCHED) if settings.feature_gates.capacity_buffer else r.WATCHED
    if settings.scheduler_config is not None and settings.scheduler_config.constraints:
        # Services and pod controllers deduce the selector of the default spread constraints.
        kinds = (*kinds, *(k for k in r.SPREAD_WATCHED if k not in kinds))
    cluster = KubernetesCluster(rest, time.time, kinds=kinds)

    def nodeclass(name: str) -> Any:
        doc = cluster.get(r.EC2NODECLASSES, name)
        return parse_ec2nodeclass(doc) if doc else None

    version = rest.request("GET", "/version")  # also proves the API server is reachable and accepts us
    k8s_version = f"{version.get('major', '1')}.{str(version.get('minor', '31')).rstrip('+')}"
    if settings.feature_gates.capacity_buffer:
        check_capacity_buffer_crd(rest)
    if aws_clients is None:
        session = boto3.session.Session()
        check_credentials(session)
        aws_clients = AWSClients(ClientSettings(region=settings.aws_region, endpoint_url=aws_endpoint_url), session)
    clients = aws_clients
    if settings.eks_control_plane:
        k8s_version = eks_kubernetes_version(clients.eks, settings.cluster_name, settings.aws_region)
    # Node bootstrap facts: configured values win, eks:DescribeCluster fills the rest (fails fast, one sentence).
    facts = resolve_cluster_facts(clients, settings.cluster_name, configured_facts(
        settings.cluster_endpoint, settings.cluster_ca_bundle, settings.cluster_cidr))
    cloud = AWSCloudProvider(
        AWSProviderSettings(settings.cluster_name, facts.endpoint, settings.aws_region, k8s_version,
                            ca_bundle=facts.ca_bundle, cluster_cidr=facts.service_cidr,
                            vm_memory_overhead_percent=settings.vm_memory_overhead_percent,
                            reserved_enis=settings.reserved_enis, isolated_vpc=settings.isolated_vpc,
                            node_class_cel=settings.aws_feature_gates.node_class_cel,
                            reserved_capacity=settings.feature_gates.reserved_capacity),
        clients, nodeclass)
    # Short polls: the run loop receives between controller passes and must not block for 20 s.
    interruption = (InterruptionQueue.from_name(clients.sqs, settings.interruption_queue, wait_seconds=0)
                    if settings.interruption_queue else None)
    return Runtime(cluster, cloud, settings, interruption=interruption, identity=identity or default_identity(),
                   host=host, stop=stop or threading.Event())


def serve(runtime: Runtime, sync_timeout: float = 60.0) -> None:
    """Start the informers and the endpoints, wait for the caches (at most ``sync_timeout`` s), run until stopped."""
    if isinstance(runtime.cluster, KubernetesCluster):
        runtime.cluster.start(runtime.stop)
    runtime.start_endpoints()
    log.info("nodewright controller started", extra={"cluster": runtime.settings.cluster_name,
                                                     "identity": runtime.identity,
                                                     "region": runtime.settings.aws_region})
    if isinstance(runtime.cluster, KubernetesCluster):
        runtime.cluster.wait_for_sync(sync_timeout)
    runtime.run()


def build_and_run(settings: Settings, aws_endpoint_url: str | None = None) -> None:
    """``nodewright run``: :func:`build_runtime`, SIGTERM/SIGINT handlers, :func:`serve`; blocks until a signal.

    Raises:
        StartupError: building the runtime failed (every cause classified by :func:`nodewright.startup.classify`).
    """
    from nodewright.startup import classify

    stop = threading.Event()
    install_signal_handlers(stop)
    try:
        runtime = build_runtime(settings, stop, aws_endpoint_url)
    except Exception as err:
        raise classify(err) from err
    serve(runtime)
