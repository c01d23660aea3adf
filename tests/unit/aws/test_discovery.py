"""Subnet and security-group discovery from selector terms (moto)."""

from __future__ import annotations

from typing import Any

import boto3

from aws.conftest import CLUSTER, REGION, Cluster
from nodewright.api.ec2nodeclass import SecurityGroupSelectorTerm, SubnetSelectorTerm
from nodewright.cloud.aws.filters import tag_filters
from nodewright.cloud.aws.securitygroups import SecurityGroupProvider
from nodewright.cloud.aws.subnets import SubnetProvider


def test_tag_filters_turn_star_into_tag_key() -> None:
    assert tag_filters({"karpenter.sh/discovery": "demo", "kubernetes.io/role/internal-elb": "*"}) == [
        {"Name": "tag:karpenter.sh/discovery", "Values": ["demo"]},
        {"Name": "tag-key", "Values": ["kubernetes.io/role/internal-elb"]}]


def test_subnets_ranked_by_free_ips_and_best_per_zone(cluster: Cluster) -> None:
    provider = SubnetProvider(boto3.client("ec2", region_name=REGION))
    terms = [SubnetSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})]
    subnets = provider.resolve(terms)
    # /24, /25, /26 minus the 5 addresses AWS reserves in each.
    assert [(s.zone, s.available_ips) for s in subnets] == [("us-east-1a", 251), ("us-east-1b", 123),
                                                           ("us-east-1c", 59)]
    assert {z: s.id for z, s in provider.zonal(terms).items()} == cluster.subnets


def test_star_value_id_term_and_or_semantics(cluster: Cluster) -> None:
    provider = SubnetProvider(boto3.client("ec2", region_name=REGION))
    by_key = provider.resolve([SubnetSelectorTerm(tags={"karpenter.sh/discovery": "*"})])
    assert len(by_key) == 3  # the untagged decoy is not matched
    mixed = provider.resolve([SubnetSelectorTerm(id=cluster.subnets["us-east-1c"]),
                              SubnetSelectorTerm(tags={"karpenter.sh/discovery": "other-cluster"})])
    assert [s.id for s in mixed] == [cluster.subnets["us-east-1c"]]


def test_subnet_results_are_cached_until_ttl(cluster: Cluster) -> None:
    now = [0.0]
    calls: list[Any] = []
    ec2 = boto3.client("ec2", region_name=REGION)
    ec2.meta.events.register("before-call.ec2.DescribeSubnets", lambda **kw: calls.append(1))
    provider = SubnetProvider(ec2, clock=lambda: now[0], ttl=60)
    terms = [SubnetSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})]
    provider.resolve(terms)
    now[0] = 59.0
    provider.resolve(terms)
    assert len(calls) == 1
    now[0] = 60.0
    provider.resolve(terms)
    assert len(calls) == 2


def test_security_groups_by_tag_name_and_id(cluster: Cluster) -> None:
    provider = SecurityGroupProvider(boto3.client("ec2", region_name=REGION))
    by_tag = provider.resolve([SecurityGroupSelectorTerm(tags={"karpenter.sh/discovery": CLUSTER})])
    assert [(g.id, g.name) for g in by_tag] == [(cluster.security_group, "nodes")]
    assert [g.id for g in provider.resolve([SecurityGroupSelectorTerm(name="nodes")])] == [cluster.security_group]
    assert [g.id for g in provider.resolve([SecurityGroupSelectorTerm(id=cluster.security_group)])] == \
        [cluster.security_group]
