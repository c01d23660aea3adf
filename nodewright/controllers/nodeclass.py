"""EC2NodeClass status: resolve each EC2NodeClass against the cloud and write what it resolved to back.

Karpenter's ``nodeclass`` controller: for every EC2NodeClass it resolves the subnets (id, zone, zoneID), security
groups (id, name), AMIs (id, name, requirements) and the instance profile -- creating or reusing the managed
profile from ``spec.role`` (``nodewright.cloud.aws.instanceprofiles``), or taking ``spec.instanceProfile`` as
given -- and patches ``status`` with them and a ``Ready`` condition. When something does not resolve, ``Ready`` is
False with the cloud's reason (``NodeClassNotReady``, ``Unauthorized``) and its one-sentence message, and the
resolved lists are removed (drift then compares nothing rather than stale ids). An EC2NodeClass that does not
validate gets ``Ready=False`` with reason ``ValidationFailed``.

The NodePool status controller (:mod:`nodewright.controllers.nodepool_status`) reads this ``Ready`` condition:
a NodePool whose EC2NodeClass is not ready reports ``NodeClassReady=False`` and ``Ready=False`` with the
nodeclass's message.

Timing (seconds, from the injected clock): an EC2NodeClass is resolved when first seen, as soon as its spec
changes, and otherwise every :attr:`NodeClassController.period` (60 s: tags on subnets or a new AMI release
show up without a spec change; the provider's own caches bound the AWS calls). A transient cloud failure
(throttling, timeout) keeps the last written status and retries with per-nodeclass exponential backoff.
The status is patched only when it changed (conditions compared without ``lastTransitionTime``).

Termination (Karpenter's ``nodeclass`` termination controller, ``pkg/controllers/nodeclass/termination.go``): every
EC2NodeClass gets the ``karpenter.k8s.aws/termination`` finalizer. Once it is being deleted, the controller waits
while any NodeClaim references it (an event ``WaitingOnNodeClaimTermination`` names them, Karpenter's wording),
then deletes the class's managed instance profile and every launch template tagged with it (the cloud's
:meth:`NodeClassResources.delete_nodeclass_resources`) and removes the finalizer. A cloud failure keeps the
finalizer and retries with the same backoff.

The status comes from the cloud provider's ``nodeclass_status(nodeclass)`` (see :class:`NodeClassStatusSource`;
``AWSCloudProvider`` implements it). With a cloud that has none (the simulator's, test fakes) this controller
does nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from nodewright.api import labels as L
from nodewright.api.ec2nodeclass import EC2NodeClass
from nodewright.api.manifests import parse_ec2nodeclass
from nodewright.backoff import Backoff
from nodewright.cloud.provider import CloudProviderError
from nodewright.controllers.common import Context, log, remove_finalizer
from nodewright.errors import NodewrightValidationError
from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, NotFoundError
from nodewright.kube.objects import Obj, finalizers_of, is_deleting, meta, name_of, set_condition
from nodewright.state.cluster import ClusterState, snapshot

#: The ``status`` fields this controller owns; a field missing from a new status is removed from the object.
MANAGED_FIELDS = ("subnets", "securityGroups", "amis", "instanceProfile")

REASON_VALIDATION_FAILED = "ValidationFailed"
REASON_RESOLUTION_FAILED = "ResolutionFailed"


@runtime_checkable
class NodeClassStatusSource(Protocol):
    """A cloud that can resolve an EC2NodeClass into its ``status`` document."""

    def nodeclass_status(self, nodeclass: EC2NodeClass) -> dict[str, object]:
        """``{"subnets": [...], "securityGroups": [...], "amis": [...], "instanceProfile": str, "conditions":
        [{"type": "Ready", "status": "True"|"False", "reason": str, "message": str}]}`` -- only
        ``conditions`` when not ready. Raises only for failures it cannot explain (transient AWS errors)."""
        ...


@runtime_checkable
class NodeClassResources(Protocol):
    """A cloud that owns per-EC2NodeClass resources to delete when the class goes."""

    def delete_nodeclass_resources(self, nodeclass: str) -> None:
        """Delete the managed instance profile and the launch templates of ``nodeclass`` (no error when absent).

        Raises:
            CloudProviderError: a delete failed (the finalizer stays; retried with backoff)."""
        ...


@dataclass
class _Seen:
    spec: str  # the spec as sorted JSON when last resolved
    due: float  # epoch seconds of the next periodic resolution


class NodeClassController:
    """Writes every EC2NodeClass's ``status`` (see module docstring).

    Args:
        ctx: dependencies; ``ctx.cloud`` is the status source unless ``source`` is given.
        period: seconds between resolutions of an unchanged EC2NodeClass.
        source: the status source (default ``ctx.cloud`` when it implements :class:`NodeClassStatusSource`).

    Attributes:
        patched: names of the EC2NodeClasses whose status was written, in order (for tests and the simulator).
        finalized: names of the EC2NodeClasses whose resources were deleted and finalizer released, in order.
    """

    def __init__(self, ctx: Context, period: float = 60.0, source: NodeClassStatusSource | None = None) -> None:
        self.ctx = ctx
        self.period = period
        cloud = ctx.cloud
        self.source = source if source is not None else (cloud if isinstance(cloud, NodeClassStatusSource) else None)
        self.cleanup = cloud if isinstance(cloud, NodeClassResources) else None
        self.backoff = Backoff(initial=5.0, maximum=300.0)
        self._seen: dict[str, _Seen] = {}
        self._waiting: dict[str, list[str]] = {}
        self.patched: list[str] = []
        self.finalized: list[str] = []

    def reconcile(self, state: ClusterState | None = None, force: bool = False) -> None:
        """Resolve the EC2NodeClasses that are new, changed or due (all of them with ``force``)."""
        if self.source is None and self.cleanup is None:
            return
        now = self.ctx.clock()
        state = state or snapshot(self.ctx.cluster)
        for name, doc in sorted(state.nodeclasses.items()):
            if is_deleting(doc):
                self._finalize(doc, state, now)
                continue
            self._add_finalizer(doc)
            if self.source is None:
                continue
            spec = json.dumps(doc.get("spec") or {}, sort_keys=True)
            seen = self._seen.get(name)
            pending = seen is None or seen.spec != spec or now >= seen.due
            # A transient failure backs off even for a new spec: no retry storm against a throttling API.
            if not force and not (pending and self.backoff.ready(name, now)):
                continue
            if self._reconcile_one(doc, now):
                self._seen[name] = _Seen(spec, now + self.period)
        for gone in set(self._seen) - set(state.nodeclasses):
            del self._seen[gone]
        self.backoff.prune(lambda key: key.removeprefix("finalize/") in state.nodeclasses)

    def _add_finalizer(self, doc: Obj) -> None:
        """Put ``karpenter.k8s.aws/termination`` on a class (guarded by its resourceVersion; retried next pass)."""
        if self.cleanup is None or L.AWS_TERMINATION_FINALIZER in finalizers_of(doc):
            return
        patch = {"metadata": {"finalizers": [*finalizers_of(doc), L.AWS_TERMINATION_FINALIZER],
                              "resourceVersion": meta(doc).get("resourceVersion")}}
        try:
            self.ctx.cluster.patch(r.EC2NODECLASSES, name_of(doc), patch)
        except KubeError as err:
            log.info("adding the termination finalizer to ec2nodeclass %s failed, retrying: %s", name_of(doc), err,
                     extra={"ec2nodeclass": name_of(doc)})

    def _finalize(self, doc: Obj, state: ClusterState, now: float) -> None:
        """Release a deleted class once no NodeClaim uses it, after deleting its cloud resources."""
        name = name_of(doc)
        key = f"finalize/{name}"
        if self.cleanup is None or L.AWS_TERMINATION_FINALIZER not in finalizers_of(doc) \
                or not self.backoff.ready(key, now):
            return
        users = state.nodeclaims_of_nodeclass(name)
        if users:
            if self._waiting.get(name) != users:
                self._waiting[name] = users
                self.ctx.event(doc, "WaitingOnNodeClaimTermination",
                               f"Waiting on NodeClaim termination for {', '.join(users)}")
            return
        try:
            self.cleanup.delete_nodeclass_resources(name)
        except CloudProviderError as err:
            delay = self.backoff.failed(key, now)
            self.ctx.cloud_error("nodeclass.termination", "DeleteNodeClassResources", err)
            log.warning("deleting the resources of ec2nodeclass %s failed, retrying in %.0fs: %s", name, delay, err,
                        extra={"ec2nodeclass": name})
            return
        self.backoff.succeeded(key)
        self._waiting.pop(name, None)
        if remove_finalizer(self.ctx, r.EC2NODECLASSES, doc, L.AWS_TERMINATION_FINALIZER):
            self.finalized.append(name)
            log.info("ec2nodeclass %s: deleted its instance profile and launch templates", name,
                     extra={"ec2nodeclass": name})

    def _reconcile_one(self, doc: Obj, now: float) -> bool:
        """Resolve and write one EC2NodeClass; False when a transient failure left it for a retry."""
        name = name_of(doc)
        assert self.source is not None
        try:
            desired = self.source.nodeclass_status(parse_ec2nodeclass(doc))
        except NodewrightValidationError as err:
            desired = {"conditions": [{"type": L.CONDITION_READY, "status": "False",
                                       "reason": REASON_VALIDATION_FAILED, "message": str(err)}]}
        except CloudProviderError as err:
            delay = self.backoff.failed(name, now)
            self.ctx.cloud_error("nodeclass", "NodeClassStatus", err)
            log.warning("resolving ec2nodeclass %s failed, retrying in %.0fs: %s", name, delay, err,
                        extra={"ec2nodeclass": name})
            return False
        except Exception:  # e.g. a botocore connection error: one EC2NodeClass must not stall the others
            delay = self.backoff.failed(name, now)
            log.exception("resolving ec2nodeclass %s failed, retrying in %.0fs", name, delay,
                          extra={"ec2nodeclass": name})
            return False
        self.backoff.succeeded(name)
        try:
            self._write(doc, desired, now)
        except NotFoundError:
            return True  # deleted meanwhile
        except KubeError as err:
            delay = self.backoff.failed(name, now)
            log.warning("ec2nodeclass %s status write failed, retrying in %.0fs: %s", name, delay, err,
                        extra={"ec2nodeclass": name})
            return False
        return True

    def _write(self, doc: Obj, desired: Mapping[str, Any], now: float) -> None:
        name = name_of(doc)
        status = doc.get("status") or {}
        conditions = _conditions(status.get("conditions") or [], desired.get("conditions") or [], now,
                                 meta(doc).get("generation"))
        patch: dict[str, Any] = {field: desired.get(field) for field in MANAGED_FIELDS}
        patch["conditions"] = conditions
        current = {field: status.get(field) for field in MANAGED_FIELDS}
        if current == {f: patch[f] for f in MANAGED_FIELDS} and _same(status.get("conditions") or [], conditions):
            return
        # A merge patch with None removes a field that no longer resolves.
        self.ctx.cluster.patch_status(r.EC2NODECLASSES, name, patch)
        self.patched.append(name)
        self._announce(doc, status.get("conditions") or [], conditions)

    def _announce(self, doc: Obj, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
        """Log and record an Event when Ready flips (or is first written)."""
        before = _ready(old)
        after = _ready(new)
        if after is None or (before is not None and before.get("status") == after.get("status")
                             and before.get("message") == after.get("message")):
            return
        name = name_of(doc)
        if after.get("status") == "True":
            log.info("ec2nodeclass %s is ready", name, extra={"ec2nodeclass": name})
            self.ctx.event(doc, "NodeClassReady", f"EC2NodeClass {name} resolved")
        else:
            message = str(after.get("message") or "")
            log.error("ec2nodeclass %s is not ready: %s", name, message,
                      extra={"ec2nodeclass": name, "reason": after.get("reason")})
            self.ctx.event(doc, str(after.get("reason") or "NodeClassNotReady"), message, warning=True)


def _conditions(old: list[dict[str, Any]], desired: list[Any], now: float, generation: Any) -> list[dict[str, Any]]:
    """``old`` with each desired condition set (``lastTransitionTime`` kept unless the status flips) and
    ``observedGeneration`` stamped, as Karpenter's status conditions carry it."""
    conditions = [dict(c) for c in old]
    for cond in desired:
        conditions = set_condition(conditions, str(cond["type"]), cond.get("status") == "True", now,
                                   str(cond.get("reason") or ""), str(cond.get("message") or ""))
    if generation is not None:
        for cond in conditions:
            cond["observedGeneration"] = generation
    return conditions


def _ready(conditions: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == L.CONDITION_READY), None)


def _same(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> bool:
    def strip(conds: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return sorted((c.get("type"), c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
                      for c in conds)

    return strip(old) == strip(new)
