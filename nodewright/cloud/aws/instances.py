"""EC2 instances: launch through ``CreateFleet`` (type ``instant``), get, list by tags, terminate.

Launch (Karpenter's fleet strategy): one ``instant`` fleet with target capacity 1 whose overrides are the
cheapest up to 60 candidate (instance type x subnet) pairs of one capacity type -- spot when any spot
candidate remains (``price-capacity-optimized``), else on-demand (``lowest-price``) -- grouped by launch
template. Every fleet ``Errors`` entry with a capacity code (``InsufficientInstanceCapacity``,
``Unsupported``, ``MaxSpotInstanceCountExceeded``, ``VcpuLimitExceeded``...) marks its offering unavailable
for 3 minutes and the launch retries with what is left; when nothing is left the launch fails with
:class:`~nodewright.cloud.provider.InsufficientCapacityError` listing every reason.

Never twice: before launching, an instance already tagged with the NodeClaim's name is returned instead;
and each fleet request carries a ``ClientToken`` derived from the NodeClaim and the attempt number, so
EC2 itself answers a retried request (after a crash between the call and its response) with the first
result rather than a second instance.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api import labels
from nodewright.cloud.aws.errors import (
    authorization_error,
    error_code,
    is_authorization_error,
    is_not_found_error,
    translate,
)
from nodewright.cloud.aws.filters import tag_list, tags_dict
from nodewright.cloud.instancetype import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
)
from nodewright.cloud.provider import (
    InsufficientCapacityError,
    LaunchError,
    NodeClaimNotFoundError,
    UnavailableOffering,
)
from nodewright.cloud.unavailable import CAPACITY_ERROR_CODES, UnavailableOfferings, key_for_error

log = logging.getLogger(__name__)

#: Karpenter caps a fleet request at 60 instance types; we cap overrides (type x subnet) the same.
MAX_OVERRIDES = 60
MAX_LAUNCH_ATTEMPTS = 10
LIVE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")


@dataclass(frozen=True, slots=True)
class FleetCandidate:
    """One offering a fleet may launch: instance type in a subnet (zone), capacity type, USD/hour, template, and
    for ``reserved`` the capacity reservation its template targets. ``effective_price``: with a PricingPolicy,
    the USD/hour it adds to the bill (its marginal price, :mod:`nodewright.pricing.engine`); None: list price."""

    instance_type: str
    zone: str
    subnet_id: str
    capacity_type: str
    price: float
    launch_template: str
    reservation_id: str = ""
    effective_price: float | None = None

    @property
    def cost(self) -> float:
        """USD/hour the launch is ranked by: the effective price when known, else the list price."""
        return self.price if self.effective_price is None else self.effective_price


@dataclass(frozen=True)
class LaunchRequest:
    """What to launch for one NodeClaim.

    Attributes:
        nodeclaim: NodeClaim name (tag ``karpenter.sh/nodeclaim`` and the ``Name`` tag).
        token_seed: stable identity of the NodeClaim (its uid, else its name) for idempotency tokens.
        candidates: offerings allowed by the NodeClaim's requirements, any order.
        tags: tags for the instance, its volumes and the fleet.
    """

    nodeclaim: str
    token_seed: str
    candidates: Sequence[FleetCandidate]
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Instance:
    """A live (or terminated) EC2 instance as DescribeInstances reports it."""

    id: str
    instance_type: str
    zone: str
    capacity_type: str
    state: str
    image_id: str = ""
    subnet_id: str = ""
    security_group_ids: tuple[str, ...] = ()
    launch_time: dt.datetime | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    capacity_reservation_id: str = ""


def idempotency_token(seed: str, attempt: int) -> str:
    """``ClientToken`` for a NodeClaim's ``attempt``-th fleet request (64 ASCII characters at most)."""
    return "nodewright-" + hashlib.sha256(f"{seed}/{attempt}".encode()).hexdigest()[:40]


def _instance(raw: Mapping[str, Any]) -> Instance:
    reservation = raw.get("CapacityReservationId") or ""
    capacity_type = CAPACITY_TYPE_SPOT if raw.get("InstanceLifecycle") == "spot" else \
        CAPACITY_TYPE_RESERVED if reservation else CAPACITY_TYPE_ON_DEMAND
    return Instance(
        id=raw["InstanceId"], instance_type=raw.get("InstanceType", ""),
        zone=raw.get("Placement", {}).get("AvailabilityZone", ""), capacity_reservation_id=reservation,
        capacity_type=capacity_type,
        state=raw.get("State", {}).get("Name", ""), image_id=raw.get("ImageId", ""), subnet_id=raw.get("SubnetId", ""),
        security_group_ids=tuple(sorted(g["GroupId"] for g in raw.get("SecurityGroups", []))),
        launch_time=raw.get("LaunchTime"), tags=tags_dict(raw.get("Tags")))


def fleet_request(candidates: Sequence[FleetCandidate], capacity_type: str, tags: Mapping[str, str],
                  token: str) -> dict[str, Any]:
    """The ``CreateFleet`` parameters for ``candidates`` (already filtered to ``capacity_type``, cheapest first).

    ``reserved`` is sent as on-demand capacity (``DefaultTargetCapacityType: on-demand``, lowest-price), each
    candidate's launch template targeting its reservation (Karpenter's ODCR launch).

    On-demand candidates with an ``effective_price`` (a PricingPolicy is set) are sent with
    ``OnDemandOptions.AllocationStrategy: prioritized`` and each override's ``Priority`` = its rank in
    ``candidates`` (0 first; EC2 launches the lowest number it can), so EC2 follows the effective-price order
    instead of its own list-price order (EC2 User Guide, "Allocation strategies for On-Demand Instances")."""
    chosen = candidates[:MAX_OVERRIDES]
    prioritized = capacity_type == CAPACITY_TYPE_ON_DEMAND and any(c.effective_price is not None for c in chosen)
    configs: dict[str, list[dict[str, Any]]] = {}
    for rank, candidate in enumerate(chosen):
        override: dict[str, Any] = {"InstanceType": candidate.instance_type, "SubnetId": candidate.subnet_id}
        if prioritized:
            override["Priority"] = float(rank)
        configs.setdefault(candidate.launch_template, []).append(override)
    # A reservation is on-demand capacity to EC2: the template's CapacityReservationTarget picks it.
    target = CAPACITY_TYPE_ON_DEMAND if capacity_type == CAPACITY_TYPE_RESERVED else capacity_type
    request: dict[str, Any] = {
        "Type": "instant",
        "TargetCapacitySpecification": {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": target},
        "LaunchTemplateConfigs": [
            {"LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"}, "Overrides": overrides}
            for name, overrides in configs.items()],
        "TagSpecifications": [{"ResourceType": kind, "Tags": tag_list(tags)} for kind in ("instance", "volume", "fleet")],
        "ClientToken": token,
    }
    if capacity_type == CAPACITY_TYPE_SPOT:
        request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    else:
        request["OnDemandOptions"] = {"AllocationStrategy": "prioritized" if prioritized else "lowest-price"}
    return request


def launch_capacity_type(candidates: Sequence[FleetCandidate]) -> str:
    """The capacity type of a fleet request. Karpenter's order: a reservation first, then spot when allowed, then
    on-demand. With effective prices (a PricingPolicy), spot only when its cheapest candidate costs no more than
    the cheapest on-demand one, as the scheduler chose (:func:`nodewright.scheduling.nodeclaimtemplate.
    capacity_type_for`)."""
    offered = {c.capacity_type for c in candidates}
    if CAPACITY_TYPE_RESERVED in offered:
        return CAPACITY_TYPE_RESERVED
    if CAPACITY_TYPE_SPOT not in offered:
        return CAPACITY_TYPE_ON_DEMAND
    if CAPACITY_TYPE_ON_DEMAND in offered and any(c.effective_price is not None for c in candidates):
        spot = min(c.cost for c in candidates if c.capacity_type == CAPACITY_TYPE_SPOT)
        on_demand = min(c.cost for c in candidates if c.capacity_type == CAPACITY_TYPE_ON_DEMAND)
        return CAPACITY_TYPE_SPOT if spot <= on_demand else CAPACITY_TYPE_ON_DEMAND
    return CAPACITY_TYPE_SPOT


class InstanceProvider:
    """Launches and tracks this cluster's instances."""

    def __init__(self, ec2: Any, cluster_name: str, unavailable: UnavailableOfferings,
                 on_missing_launch_template: Callable[[str], None] = lambda name: None,
                 zone_ids: Callable[[], Mapping[str, str]] = dict) -> None:
        self._ec2 = ec2
        self.cluster_name = cluster_name
        self._unavailable = unavailable
        self._on_missing_template = on_missing_launch_template
        self._zone_ids = zone_ids
        #: Set by AWSCloudProvider.attach_metrics: karpenter_cloudprovider_instance_{launch,termination}_failures.
        self.metrics: Any = None

    # --- launch --------------------------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> Instance:
        """Launch one instance for ``request`` (or return the one already launched for it).

        Raises:
            InsufficientCapacityError: every candidate failed with a capacity error (``reasons`` lists them).
            AuthorizationError: EC2 denied the fleet (e.g. ``iam:PassRole`` on the node role).
            LaunchError: no candidates, or other fleet errors left nothing to try.
        """
        existing = self.find_by_nodeclaim(request.nodeclaim)
        if existing is not None:
            log.info("found instance already launched for nodeclaim",
                     extra={"nodeclaim": request.nodeclaim, "instance": existing.id})
            return existing
        reasons: list[UnavailableOffering] = []
        excluded: set[tuple[str, str, str]] = set()
        other_errors: list[str] = []
        for attempt in range(MAX_LAUNCH_ATTEMPTS):
            remaining = [c for c in request.candidates
                         if (c.instance_type, c.zone, c.capacity_type) not in excluded
                         and not self._unavailable.is_unavailable(c.instance_type, c.zone, c.capacity_type)]
            if not remaining:
                break
            capacity_type = launch_capacity_type(remaining)
            chosen = sorted((c for c in remaining if c.capacity_type == capacity_type),
                            key=lambda c: (c.cost, c.price, c.instance_type, c.zone))[:MAX_OVERRIDES]
            response = self._create_fleet(fleet_request(chosen, capacity_type, request.tags,
                                                        idempotency_token(request.token_seed, attempt)))
            instance_ids = [i for item in response.get("Instances", []) for i in item.get("InstanceIds", [])]
            if instance_ids:
                # Karpenter records a fleet's capacity errors even when it launched something
                # (``updateUnavailableOfferingsCache`` runs before the instances are looked at): the next launch
                # must not try the exhausted offerings again.
                self._record_unavailable(response.get("Errors", []), chosen)
                return self._launched(instance_ids[0], chosen, response)
            errors = response.get("Errors", [])
            if not errors:
                raise LaunchError(f"ec2:CreateFleet launched nothing and reported no error for {request.nodeclaim}")
            self._handle_errors(errors, chosen, reasons, excluded, other_errors)
        if other_errors:
            raise LaunchError(f"launching nodeclaim {request.nodeclaim} failed: " + "; ".join(other_errors))
        summary = ", ".join(f"{r.instance_type}/{r.zone}/{r.capacity_type}: {r.error_code}" for r in reasons)
        raise InsufficientCapacityError(
            f"all {len(request.candidates)} offerings for nodeclaim {request.nodeclaim} are unavailable"
            + (f" ({summary})" if summary else ""), reasons)

    def _create_fleet(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            response: dict[str, Any] = self._ec2.create_fleet(**params)
            return response
        except ClientError as err:
            raise translate(err, operation="ec2:CreateFleet") from err

    @staticmethod
    def _affected(error: Mapping[str, Any], chosen: Sequence[FleetCandidate]) -> list[FleetCandidate]:
        """The candidates a fleet ``Errors`` entry names (its override), or all of them when it names none."""
        by_override = {(c.instance_type, c.subnet_id): c for c in chosen}
        overrides = error.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
        return [by_override[k] for k in [(overrides.get("InstanceType"), overrides.get("SubnetId"))]
                if k in by_override] or ([] if overrides else list(chosen))

    def _record_unavailable(self, errors: Sequence[Mapping[str, Any]], chosen: Sequence[FleetCandidate]) -> None:
        """Mark the offerings of the capacity errors a fleet answer carries beside its instances unavailable."""
        for error in errors:
            code = error.get("ErrorCode", "")
            if code not in CAPACITY_ERROR_CODES:
                continue
            for candidate in self._affected(error, chosen):
                self._unavailable.mark(key_for_error(code, candidate.instance_type, candidate.zone,
                                                     candidate.capacity_type), code)
                log.info("offering unavailable (reported beside a launched instance)",
                         extra={"instance-type": candidate.instance_type, "zone": candidate.zone,
                                "capacity-type": candidate.capacity_type, "code": code})

    def _handle_errors(self, errors: Sequence[Mapping[str, Any]], chosen: Sequence[FleetCandidate],
                       reasons: list[UnavailableOffering], excluded: set[tuple[str, str, str]],
                       other_errors: list[str]) -> None:
        for error in errors:
            code, message = error.get("ErrorCode", ""), error.get("ErrorMessage", "")
            if is_authorization_error(code):
                raise authorization_error(code, message, operation="ec2:CreateFleet")
            template = error.get("LaunchTemplateAndOverrides", {}).get("LaunchTemplateSpecification", {})
            affected = self._affected(error, chosen)
            if code.startswith("InvalidLaunchTemplate"):
                self._on_missing_template(template.get("LaunchTemplateName", ""))
            for candidate in affected:
                offering = (candidate.instance_type, candidate.zone, candidate.capacity_type)
                excluded.add(offering)
                if self.metrics is not None:  # Karpenter counts every failed offering of a fleet, by its error code
                    self.metrics.instance_launch_failures.labels(
                        candidate.zone, self._zone_ids().get(candidate.zone, ""), candidate.capacity_type,
                        code).inc()
                if code in CAPACITY_ERROR_CODES:
                    self._unavailable.mark(key_for_error(code, *offering), code)
                    reasons.append(UnavailableOffering(*offering, code, message))
                elif f"{code}: {message}" not in other_errors:
                    other_errors.append(f"{code}: {message}")

    def _launched(self, instance_id: str, chosen: Sequence[FleetCandidate], response: Mapping[str, Any]) -> Instance:
        instance = self.get(instance_id, allow_missing=True)
        if instance is not None and chosen[0].capacity_type == CAPACITY_TYPE_RESERVED \
                and not instance.capacity_reservation_id:
            # The fleet offered only reservations (each template targets one): the instance is in the one of its
            # type and zone, even while DescribeInstances does not say so yet.
            match = next((c for c in chosen if c.instance_type == instance.instance_type and c.zone == instance.zone),
                         None)
            if match is not None:
                return dataclasses.replace(instance, capacity_type=CAPACITY_TYPE_RESERVED,
                                           capacity_reservation_id=match.reservation_id)
        if instance is not None:
            return instance
        # DescribeInstances is eventually consistent right after launch: build the view from the fleet answer.
        item = response["Instances"][0]
        overrides = item.get("LaunchTemplateAndOverrides", {}).get("Overrides", {})
        match = next((c for c in chosen if c.instance_type == item.get("InstanceType", overrides.get("InstanceType"))
                      and c.subnet_id == overrides.get("SubnetId", c.subnet_id)), chosen[0])
        if match.reservation_id:
            return Instance(instance_id, match.instance_type, match.zone, CAPACITY_TYPE_RESERVED, "pending",
                            subnet_id=match.subnet_id, capacity_reservation_id=match.reservation_id)
        return Instance(instance_id, match.instance_type, match.zone,
                        item.get("Lifecycle", match.capacity_type).replace("on-demand", CAPACITY_TYPE_ON_DEMAND),
                        "pending", subnet_id=match.subnet_id)

    # --- read ----------------------------------------------------------------------------------------------

    def get(self, instance_id: str, allow_missing: bool = False) -> Instance | None:
        """The instance, or raise NodeClaimNotFoundError (None with ``allow_missing``) when absent/terminated."""
        try:
            reservations = self._ec2.describe_instances(InstanceIds=[instance_id]).get("Reservations", [])
        except ClientError as err:
            if is_not_found_error(error_code(err)):
                reservations = []
            else:
                raise translate(err, operation="ec2:DescribeInstances") from err
        found = [_instance(raw) for r in reservations for raw in r.get("Instances", [])]
        if not found or found[0].state == "terminated":
            if allow_missing:
                return None
            raise NodeClaimNotFoundError(f"instance {instance_id} not found or terminated")
        return found[0]

    def _describe(self, filters: list[dict[str, Any]]) -> list[Instance]:
        try:
            pages = self._ec2.get_paginator("describe_instances").paginate(Filters=filters)
            return [_instance(raw) for page in pages for r in page.get("Reservations", []) for raw in r["Instances"]]
        except ClientError as err:
            raise translate(err, operation="ec2:DescribeInstances") from err

    def _cluster_filters(self) -> list[dict[str, Any]]:
        return [{"Name": f"tag:{labels.TAG_CLUSTER_PREFIX}{self.cluster_name}", "Values": ["owned"]},
                {"Name": "tag-key", "Values": [labels.TAG_NODEPOOL]},
                {"Name": "instance-state-name", "Values": list(LIVE_STATES)}]

    def list_instances(self) -> list[Instance]:
        """Live instances this cluster's controller launched (tags ``kubernetes.io/cluster/<name>: owned`` and
        ``karpenter.sh/nodepool``), sorted by id."""
        return sorted(self._describe(self._cluster_filters()), key=lambda i: i.id)

    def find_by_nodeclaim(self, nodeclaim: str) -> Instance | None:
        """The live instance tagged ``karpenter.sh/nodeclaim=<nodeclaim>``, if any."""
        filters = [*self._cluster_filters(), {"Name": f"tag:{labels.TAG_NODECLAIM}", "Values": [nodeclaim]}]
        found = [i for i in self._describe(filters) if i.state != "shutting-down"]
        return found[0] if found else None

    def leaked(self, known_ids: set[str], now: dt.datetime, grace_seconds: float = 30.0) -> list[Instance]:
        """Instances of this cluster that no NodeClaim accounts for and that launched more than
        ``grace_seconds`` before ``now`` (input for garbage collection; the grace covers a launch whose
        NodeClaim status is not written yet)."""
        out = []
        for instance in self.list_instances():
            if instance.id in known_ids or instance.state == "shutting-down":
                continue
            launched = instance.launch_time
            if launched is not None and (now - launched).total_seconds() < grace_seconds:
                continue
            out.append(instance)
        return out

    # --- terminate -----------------------------------------------------------------------------------------

    def terminate(self, instance_id: str) -> None:
        """Terminate ``instance_id``; idempotent while it shuts down.

        Raises:
            NodeClaimNotFoundError: the instance no longer exists or is already terminated.
            AuthorizationError: ``ec2:TerminateInstances`` denied.
        """
        instance = self.get(instance_id)
        try:
            self._ec2.terminate_instances(InstanceIds=[instance_id])
        except ClientError as err:
            if is_not_found_error(error_code(err)):
                raise NodeClaimNotFoundError(f"instance {instance_id} not found") from err
            if self.metrics is not None and instance is not None:
                self.metrics.instance_termination_failures.labels(
                    instance.zone, self._zone_ids().get(instance.zone, "")).inc()
            raise translate(err, operation="ec2:TerminateInstances") from err
        log.info("terminated instance", extra={"instance": instance_id})

    # --- reboot --------------------------------------------------------------------------------------------

    def reboot(self, instance_id: str) -> None:
        """Ask EC2 to reboot ``instance_id`` (``ec2:RebootInstances``: queued by EC2, asynchronous; the instance
        keeps its id, volumes and addresses), for node repair with the AWS gate ``RebootForRepair``.

        Raises:
            NodeClaimNotFoundError: the instance no longer exists or is terminated.
            AuthorizationError: ``ec2:RebootInstances`` denied.
        """
        self.get(instance_id)
        try:
            self._ec2.reboot_instances(InstanceIds=[instance_id])
        except ClientError as err:
            if is_not_found_error(error_code(err)):
                raise NodeClaimNotFoundError(f"instance {instance_id} not found") from err
            raise translate(err, operation="ec2:RebootInstances") from err
        log.info("rebooted instance", extra={"instance": instance_id})
