"""The catalog-wide list-price index (issue 30 cold start): one answer per list of instance type objects, shared by
every pool and cache, never a different decision, and a new answer for new objects (an overlay's repriced copy)."""

from __future__ import annotations

import dataclasses
import random

from nodewright.cloud.instancetype import InstanceType, Offering
from nodewright.scheduling import catalogindex, schedule
from nodewright.scheduling.cache import SchedulingCache
from nodewright.scheduling.catalogindex import build_ranking, catalog_view, compute_cheapest, offering_filter
from nodewright.scheduling.requirements import Requirements

from .helpers import make_type, pod, pool

TYPES = [
    make_type("c.large", 2, 4, 0.085, spot=0.03),
    make_type("m.large", 2, 8, 0.096, spot=0.035),
    make_type("r.large", 2, 16, 0.126, spot=0.05),
    make_type("c.xlarge", 4, 8, 0.17, spot=0.06),
    make_type("m.xlarge", 4, 16, 0.192, spot=0.03),
]
ANY = offering_filter(Requirements())


def test_ties_go_to_the_first_offering_in_catalog_order_per_capacity_type_and_overall() -> None:
    it = dataclasses.replace(TYPES[0], offerings=(
        Offering("us-east-1b", "on-demand", 2.0),
        Offering("us-east-1a", "spot", 1.0, reservation_id="first"),
        Offering("us-east-1a", "on-demand", 1.0),
        Offering("us-east-1a", "spot", 1.0, reservation_id="second"),
        Offering("us-east-1a", "spot", 0.5, available=False),
    ))
    best = compute_cheapest(it, ANY)
    assert best["spot"].reservation_id == "first"
    assert best["on-demand"] == Offering("us-east-1a", "on-demand", 1.0)
    assert best[None] is best["spot"]  # (1.0, us-east-1a) twice: the spot one comes first in the catalog


def test_a_pool_ranking_is_the_sorted_pool_types() -> None:
    # Random lists with equal prices and repeated names: the filtered catalog order equals sorting the subset.
    rng = random.Random(3)
    for _ in range(200):
        types = [make_type(rng.choice("abcd"), 2, 4, rng.choice([0.1, 0.2, 0.3]), spot=rng.choice([None, 0.05, 0.1]))
                 for _ in range(rng.randrange(1, 12))]
        subset = [t if rng.random() < 0.6 else None for t in types]
        cheapest = [compute_cheapest(t, ANY) for t in types]
        found, ranked, priced = build_ranking([t.name for t in types], cheapest).restrict(subset)
        mine = [(t, c) for t, c in zip(subset, cheapest, strict=True) if t is not None]
        assert found == [t for t, c in sorted(mine, key=lambda r: (r[1][None].price, r[0].name))]
        for ct in ("spot", "on-demand"):  # by that capacity type's price and name, ties in the overall order
            offering = [r for r in mine if ct in r[1]]
            rank = {id(t): k for k, t in enumerate(found)}
            offering.sort(key=lambda r: (r[1][ct].price, r[0].name, rank[id(r[0])]))  # noqa: B023
            assert ranked[ct] == [t for t, _ in offering]
        launch = "spot" if ranked["spot"] else "on-demand"
        assert priced == [(t, compute_cheapest(t, ANY)[launch].price) for t in ranked[launch]]


def test_one_view_per_list_of_the_same_objects_and_a_new_one_for_an_overlaid_copy() -> None:
    catalogindex.clear()
    view = catalog_view(TYPES)
    assert view is not None and catalog_view(list(TYPES)) is view
    # An overlay makes m.xlarge's on-demand the cheapest (dataclasses.replace: new objects, as NodeOverlay does).
    overlaid = [*TYPES[:4], dataclasses.replace(TYPES[4], offerings=tuple(
        dataclasses.replace(o, price=0.01) if o.capacity_type == "on-demand" else o for o in TYPES[4].offerings))]
    other = catalog_view(overlaid)
    assert other is not None and other is not view
    names = lambda v: [v.types[i].name for i in v.ranking(ANY).order]  # noqa: E731
    assert names(view) == ["c.large", "m.xlarge", "m.large", "r.large", "c.xlarge"]  # $0.03 spot twice: by name
    assert names(other) == ["m.xlarge", "c.large", "m.large", "r.large", "c.xlarge"]


def test_decisions_are_the_same_with_the_catalog_indexed_or_not_and_per_overlay() -> None:
    pods = [pod("a", 1500, 1024), pod("b", 500, 6144), pod("c", 3000, 2048)]
    spec = pool("default")
    overlaid = [*TYPES[:4], dataclasses.replace(TYPES[4], offerings=tuple(
        dataclasses.replace(o, price=0.01) for o in TYPES[4].offerings))]

    def plan(types: list[InstanceType]) -> list[tuple[str, str, float]]:
        result = schedule(pods, [], [spec], {spec.name: types}, cache=SchedulingCache())
        return sorted((p.instance_type.name, p.offering.capacity_type, p.price) for p in result.new_nodeclaims)

    catalogindex.clear()
    first = plan(TYPES)
    assert plan(TYPES) == first  # a new cache over the indexed catalog
    assert plan(overlaid) == [("m.xlarge", "spot", 0.01)] * 2  # the overlay makes the 4-vCPU type the cheapest
    assert plan(TYPES) == first == [("c.large", "spot", 0.03), ("m.xlarge", "spot", 0.03)]
