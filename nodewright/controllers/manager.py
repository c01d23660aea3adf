"""All controllers behind one synchronous :meth:`ControllerManager.step`.

The run loop (:mod:`nodewright.runtime`) calls :meth:`step` every ``reconcile_period`` while this replica
leads; the simulator calls it on its own clock. Each step takes one snapshot of the cluster and runs the
controllers in dependency order: EC2NodeClass status, static NodePools (``spec.replicas``), CapacityBuffers,
provisioning, nomination,
lifecycle, node repair (gate ``NodeRepair``), termination, interruption, garbage collection (instances, then launch templates), NodePool status, state
metrics. Nothing here sleeps or starts threads.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from nodewright.cloud.provider import CloudProviderError
from nodewright.controllers.buffer import CapacityBufferController
from nodewright.controllers.common import Context, log
from nodewright.controllers.disruption import DisruptionController
from nodewright.controllers.garbagecollection import GarbageCollector, LaunchTemplateGC
from nodewright.controllers.interruption import InterruptionController, InterruptionSource
from nodewright.controllers.lifecycle import LifecycleController
from nodewright.controllers.nodeclass import NodeClassController
from nodewright.controllers.nodeoverlay import NodeOverlayStatusController
from nodewright.controllers.nodepool_status import NodePoolStatusController
from nodewright.controllers.nomination import NominationController
from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.controllers.repair import RepairController
from nodewright.controllers.state_metrics import StateMetricsController
from nodewright.controllers.static import StaticCapacityController
from nodewright.controllers.termination import TerminationController, Terminator
from nodewright.disruption import ConsolidationOptions, DecisionOptions
from nodewright.kube.cluster import Cluster
from nodewright.kube.errors import KubeError
from nodewright.logging import warn_limited
from nodewright.pricing import PricingPolicy
from nodewright.state.cluster import ClusterState, snapshot


@dataclass(frozen=True)
class ControllerOptions:
    """Tunables (seconds) with Karpenter's defaults.

    ``spot_to_spot_consolidation`` is Karpenter's ``SpotToSpotConsolidation`` feature gate (off by default);
    ``static_capacity`` its ``StaticCapacity`` gate (off by default: static NodePools, ``spec.replicas``, are not
    managed; :mod:`nodewright.controllers.static`). ``ReservedCapacity`` is applied by the cloud provider.
    ``preference_policy`` / ``min_values_policy`` carry Karpenter's ``PREFERENCE_POLICY`` / ``MIN_VALUES_POLICY``
    (``ControllerManager.options``); the provisioner's scheduler and the disruption simulations apply both
    (``Strict`` or ``BestEffort``; ``Respect`` or ``Ignore``).
    ``nominate_pods`` (``NOMINATE_PODS``) publishes the plan as ``status.nominatedNodeName`` (controllers/nomination.py);
    ``nomination_hold`` (``NOMINATION_HOLD``, on) adds its readiness hold.
    ``pricing_policy`` returns the PricingPolicy in force (``--pricing-policy``: the file re-read when it changes),
    or None: the provisioner and consolidation then decide on effective marginal prices (docs/pricing.md).
    ``consolidation``: the consolidation searches' time budgets and bounds (its ``spot_to_spot`` is replaced by
    ``spot_to_spot_consolidation``).
    ``node_repair`` is Karpenter's ``NodeRepair`` gate (off): the node health controller
    (:mod:`nodewright.controllers.repair`) runs when it is on and the cloud has repair policies;
    ``reboot_for_repair`` is the AWS gate ``RebootForRepair`` (reboot before replacing).
    ``capacity_buffer`` is Karpenter's ``CapacityBuffer`` gate (off by default): CapacityBuffers hold headroom as
    virtual pods (controllers/buffer.py); off, they are ignored with one warning.
    """

    batch_idle_duration: float = 1.0
    batch_max_duration: float = 10.0
    bind_pods: bool = False
    nominate_pods: bool = True
    nomination_hold: bool = True
    launch_timeout: float = 300.0
    registration_timeout: float = 900.0
    gc_grace: float = 30.0
    gc_period: float = 30.0
    launch_template_gc_period: float = 300.0
    status_period: float = 10.0
    nodeclass_period: float = 60.0
    spot_to_spot_consolidation: bool = False
    static_capacity: bool = False
    preference_policy: str = "Respect"
    min_values_policy: str = "Strict"
    pricing_policy: Callable[[], PricingPolicy | None] | None = None
    consolidation: ConsolidationOptions = ConsolidationOptions()
    disruption_poll_period: float = 10.0
    disruption_validation_delay: float = 15.0
    node_repair: bool = False
    reboot_for_repair: bool = False
    capacity_buffer: bool = False


class ControllerManager:
    """Owns one instance of every controller over a shared :class:`Context`.

    Attributes:
        terminator: the disruption entry point (:class:`~nodewright.controllers.termination.Terminator`).
    """

    def __init__(
        self,
        ctx: Context,
        options: ControllerOptions | None = None,
        interruption: InterruptionSource | None = None,
        snapshotter: Callable[[Cluster], ClusterState] = snapshot,
    ) -> None:
        opts = options or ControllerOptions()
        self.ctx = ctx
        self.options = opts
        #: The controller running now ("" between passes): the ``controller`` label of cloud-provider metrics.
        self.current = ""
        # The simulator passes a snapshotter that reuses one snapshot while the cluster is unchanged.
        self.snapshotter = snapshotter
        self.buffers = CapacityBufferController(ctx, enabled=opts.capacity_buffer)
        self.provisioner = Provisioner(
            ctx, Batcher(opts.batch_idle_duration, opts.batch_max_duration), bind_pods=opts.bind_pods,
            pricing_policy=opts.pricing_policy, min_values_policy=opts.min_values_policy,
            preference_policy=opts.preference_policy, buffers=self.buffers,
        )
        self.nomination = NominationController(ctx, self.provisioner, enabled=opts.nominate_pods,
                                               hold=opts.nomination_hold)
        self.lifecycle = LifecycleController(
            ctx, opts.launch_timeout, opts.registration_timeout, on_registered=self.provisioner.on_registered,
            registration_taints=self.nomination.hold_taints,
        )
        self.termination = TerminationController(ctx)
        self.terminator: Terminator = self.termination.terminator
        self.disruption = DisruptionController(ctx, self.terminator, DecisionOptions(
            consolidation=dataclasses.replace(opts.consolidation, spot_to_spot=opts.spot_to_spot_consolidation)),
            nominated=self.provisioner.nominated_targets, min_values_policy=opts.min_values_policy,
            preference_policy=opts.preference_policy,
            pricing_policy=opts.pricing_policy, poll_period=opts.disruption_poll_period,
            static_capacity=opts.static_capacity,
            validation_delay=opts.disruption_validation_delay, buffers=self.buffers.held)
        self.interruption = InterruptionController(ctx, interruption, self.terminator) if interruption else None
        self.gc = GarbageCollector(ctx, opts.gc_grace, opts.gc_period)
        self.launch_template_gc = LaunchTemplateGC(ctx, opts.launch_template_gc_period)
        self.status = NodePoolStatusController(ctx, opts.status_period, opts.pricing_policy)
        self.nodeclass = NodeClassController(ctx, opts.nodeclass_period)
        self.nodeoverlay = NodeOverlayStatusController(ctx)
        self.state_metrics = StateMetricsController(ctx)
        self.static = StaticCapacityController(ctx, opts.pricing_policy, enabled=opts.static_capacity)
        repair = RepairController(ctx, reboot=opts.reboot_for_repair) if opts.node_repair else None
        #: The node health controller, or None (gate off, or a cloud without repair policies, as in Karpenter).
        self.repair = repair if repair is not None and repair.enabled else None

    def step(self, keep_going: Callable[[], bool] | None = None) -> None:
        """One pass of every controller. A controller's failure is logged and does not stop the others.

        Args:
            keep_going: checked before each controller; the pass ends early when it returns False (the run
                loop passes "still the leader", so a replica that lost its Lease stops acting mid-pass).
        """
        for name, run in (
            ("nodeclass", self.nodeclass.reconcile),  # EC2NodeClass status (and instance profile) first
            ("nodeoverlay", self.nodeoverlay.reconcile),  # NodeOverlay conditions (gate NodeOverlay)
            ("static", self.static.reconcile),  # static NodePools' NodeClaims, before pods are provisioned
            ("capacitybuffer", self.buffers.reconcile),  # virtual pods resolved before the provisioner runs
            ("provisioner", self.provisioner.reconcile),
            # Before lifecycle: a Node that just registered still carries karpenter.sh/unregistered when its
            # pods are nominated to it (issue 25).
            ("nomination", self.nomination.reconcile),
            ("lifecycle", self.lifecycle.reconcile),
            ("node.health", self.repair.reconcile if self.repair else None),  # gate NodeRepair
            ("termination", self.termination.reconcile),
            ("disruption", self.disruption.reconcile),
            ("interruption", self.interruption.reconcile if self.interruption else None),
            ("garbagecollection", self.gc.reconcile),
            ("launchtemplate.garbagecollection", self.launch_template_gc.reconcile),
            ("nodepool.status", self.status.reconcile),
            ("metrics.state", self.state_metrics.reconcile),  # node gauges, pod startups (dashboard)
        ):
            if run is None:
                continue
            if keep_going is not None and not keep_going():
                log.warning("controller pass ended before %s: leadership lost or shutting down", name)
                return
            self.current = name
            started, result = time.perf_counter(), "success"
            try:
                run(self.snapshotter(self.ctx.cluster))
            except (KubeError, CloudProviderError) as err:
                # An API or cloud error no controller handled itself: one line per cause per interval (the next
                # pass retries; the adapters back off per object), never a traceback.
                status = getattr(err, "status", "")
                warn_limited(log, f"controller {name} {type(err).__name__} {status}",
                             "controller %s: %s: %s (retrying next pass)", name, type(err).__name__, err,
                             extra={"controller": name, "status": status})
                result = "error"
                self.ctx.metrics.reconcile_errors.labels(name).inc()
            except Exception:  # one broken controller must not stall the rest of the step
                log.exception("controller %s failed", name)
                result = "error"
                self.ctx.metrics.reconcile_errors.labels(name).inc()
            finally:
                self.current = ""
                # controller-runtime's reconcile metrics (Karpenter's controllers dashboard reads them)
                self.ctx.metrics.reconcile_total.labels(name, result).inc()
                self.ctx.metrics.reconcile_time.labels(name).observe(time.perf_counter() - started)
