"""Instance profiles for nodes: from ``EC2NodeClass.spec.role`` (managed) or ``spec.instanceProfile`` (as given).

A managed profile is named deterministically from the cluster, region and EC2NodeClass
(``<cluster>_<16 hex>``, within IAM's 128-character limit, as Karpenter does), tagged, and holds exactly the
node role. Adding the role needs ``iam:PassRole`` on it: a denial there surfaces as the one-sentence
:class:`~nodewright.cloud.provider.AuthorizationError`.

Refresh policy: a profile verified to hold the right role is trusted for 15 minutes.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from nodewright.cloud.aws.cache import Clock, TTLCache
from nodewright.cloud.aws.errors import error_code, translate
from nodewright.cloud.aws.filters import tag_list
from nodewright.cloud.aws.tags import instance_profile_tags

log = logging.getLogger(__name__)

INSTANCE_PROFILE_TTL_SECONDS = 900.0


def profile_name(cluster_name: str, region: str, nodeclass: str) -> str:
    """``<cluster>_<sha256(region/nodeclass)[:16]>``, cut to IAM's 128 characters."""
    digest = hashlib.sha256(f"{region}/{nodeclass}".encode()).hexdigest()[:16]
    return f"{cluster_name[:111]}_{digest}"


def role_name(role: str) -> str:
    """The role name of ``spec.role``, which may be a name or an ARN (``arn:aws:iam::1:role/path/name``)."""
    return role.rsplit("/", 1)[-1] if role.startswith("arn:") else role


class InstanceProfileProvider:
    """Creates, tags and reuses managed instance profiles."""

    def __init__(self, iam: Any, cluster_name: str, region: str, clock: Clock = time.monotonic,
                 ttl: float = INSTANCE_PROFILE_TTL_SECONDS) -> None:
        self._iam = iam
        self.cluster_name = cluster_name
        self.region = region
        self._ready: TTLCache[str] = TTLCache(ttl, clock)

    def resolve(self, nodeclass: str, role: str | None, instance_profile: str | None,
                nodeclass_tags: Mapping[str, str] | None = None) -> str:
        """The instance profile name for an EC2NodeClass: ``instance_profile`` as given, or the managed one
        (created with :func:`~nodewright.cloud.aws.tags.instance_profile_tags`, ``nodeclass_tags`` included).

        Raises:
            AuthorizationError: an IAM call was denied (typically ``iam:PassRole`` on the role).
            LaunchError: any other IAM error.
        """
        if instance_profile:
            return instance_profile
        if not role:
            raise ValueError("EC2NodeClass needs spec.role or spec.instanceProfile")
        name = profile_name(self.cluster_name, self.region, nodeclass)
        wanted = role_name(role)
        cached = self._ready.get(name)
        if cached == wanted:
            return name
        self._ensure(name, nodeclass, wanted, nodeclass_tags)
        self._ready.put(name, wanted)
        return name

    def _ensure(self, name: str, nodeclass: str, role: str, nodeclass_tags: Mapping[str, str] | None) -> None:
        try:
            profile = self._get(name) or self._create(name, nodeclass, nodeclass_tags)
            current = [r["RoleName"] for r in profile.get("Roles", [])]
            for other in current:
                if other != role:
                    self._iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=other)
            if role not in current:
                self._iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=role)
                log.info("added role to instance profile", extra={"instance_profile": name, "role": role})
        except ClientError as err:
            operation = err.operation_name if hasattr(err, "operation_name") else "IAM"
            raise translate(err, operation=f"iam:{operation}") from err

    def _get(self, name: str) -> dict[str, Any] | None:
        try:
            profile: dict[str, Any] = self._iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
            return profile
        except ClientError as err:
            if error_code(err) == "NoSuchEntity":
                return None
            raise

    def _create(self, name: str, nodeclass: str, nodeclass_tags: Mapping[str, str] | None) -> dict[str, Any]:
        tags = instance_profile_tags(self.cluster_name, self.region, nodeclass, nodeclass_tags)
        try:
            created: dict[str, Any] = self._iam.create_instance_profile(
                InstanceProfileName=name, Tags=tag_list(tags))["InstanceProfile"]
        except ClientError as err:
            if error_code(err) == "EntityAlreadyExists":
                return self._get(name) or {}
            raise
        log.info("created instance profile", extra={"instance_profile": name, "nodeclass": nodeclass})
        return created

    def delete(self, nodeclass: str) -> None:
        """Delete the managed profile of ``nodeclass`` (roles removed first); no error when absent.

        Called by the EC2NodeClass termination finalizer (:mod:`nodewright.controllers.nodeclass`) for a class
        with ``spec.role`` (Karpenter ``instanceprofile.Provider.Delete``); a ``spec.instanceProfile`` is the
        user's and is never deleted."""
        name = profile_name(self.cluster_name, self.region, nodeclass)
        try:
            profile = self._get(name)
            if profile is None:
                return
            for r in profile.get("Roles", []):
                self._iam.remove_role_from_instance_profile(InstanceProfileName=name, RoleName=r["RoleName"])
            self._iam.delete_instance_profile(InstanceProfileName=name)
        except ClientError as err:
            raise translate(err, operation="iam:DeleteInstanceProfile") from err
        self._ready.delete(name)
