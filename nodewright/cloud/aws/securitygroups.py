"""Security groups of an EC2NodeClass, from its ``securityGroupSelectorTerms`` (tags incl. ``*``, id, name).

Refresh policy: cached per set of terms for 5 minutes (security groups rarely change; drift detection
compares against this view).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from nodewright.api.ec2nodeclass import SecurityGroupSelectorTerm
from nodewright.cloud.aws.cache import Clock, TTLCache
from nodewright.cloud.aws.errors import translate
from nodewright.cloud.aws.filters import tag_filters, tags_dict

SECURITY_GROUP_TTL_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class SecurityGroup:
    """A resolved security group."""

    id: str
    name: str
    tags: dict[str, str]

    def status(self) -> dict[str, object]:
        """``EC2NodeClass.status.securityGroups[]`` entry (Karpenter: id, name)."""
        return {"id": self.id, "name": self.name}


def _term_filters(term: SecurityGroupSelectorTerm) -> list[dict[str, Any]]:
    if term.id:
        return [{"Name": "group-id", "Values": [term.id]}]
    if term.name:
        return [{"Name": "group-name", "Values": [term.name]}]
    return tag_filters(term.tags)


class SecurityGroupProvider:
    """Resolves security-group selector terms against ``ec2:DescribeSecurityGroups``."""

    def __init__(self, ec2: Any, clock: Clock = time.monotonic, ttl: float = SECURITY_GROUP_TTL_SECONDS) -> None:
        self._ec2 = ec2
        self._cache: TTLCache[list[SecurityGroup]] = TTLCache(ttl, clock)

    def resolve(self, terms: Sequence[SecurityGroupSelectorTerm]) -> list[SecurityGroup]:
        """Every group matching any term, sorted by id.

        Raises:
            AuthorizationError: ``ec2:DescribeSecurityGroups`` denied.
            LaunchError: any other AWS error.
        """
        key = json.dumps([t.to_manifest() for t in terms], sort_keys=True)
        return self._cache.get_or_load(key, lambda: self._describe(terms))

    def _describe(self, terms: Sequence[SecurityGroupSelectorTerm]) -> list[SecurityGroup]:
        found: dict[str, SecurityGroup] = {}
        try:
            paginator = self._ec2.get_paginator("describe_security_groups")
            for term in terms:
                for page in paginator.paginate(Filters=_term_filters(term)):
                    for raw in page.get("SecurityGroups", []):
                        found[raw["GroupId"]] = SecurityGroup(raw["GroupId"], raw.get("GroupName", ""),
                                                              tags_dict(raw.get("Tags")))
        except ClientError as err:
            raise translate(err, operation="ec2:DescribeSecurityGroups") from err
        return sorted(found.values(), key=lambda g: g.id)
