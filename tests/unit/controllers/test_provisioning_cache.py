"""The provisioner keeps its NodePools' compiled instance types between batches (issue 19): a second batch on
unchanged NodePools reuses them, and decides what a fresh scheduler would."""

from __future__ import annotations

from nodewright.controllers.provisioning import Batcher, Provisioner
from nodewright.kube import resources as r
from nodewright.scheduling import schedule

from .conftest import pending_pod


def _instance_types(claim: dict) -> list[str]:  # type: ignore[type-arg]
    return next(q for q in claim["spec"]["requirements"] if q["key"] == "node.kubernetes.io/instance-type")["values"]


def test_the_next_batch_reuses_the_pools_compiled_types(ctx, cluster, clock) -> None:
    prov = Provisioner(ctx, Batcher(1.0, 10.0), solver=schedule)
    cluster.create(r.PODS, pending_pod("web-0", cpu="3", memory="1Gi"))
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    stats = prov.scheduling_cache.stats
    built, hits = stats.types_built, stats.hits
    assert built > 0 and sorted(prov.scheduling_cache.entries) == ["general"]
    cluster.create(r.PODS, pending_pod("web-1", cpu="3", memory="1Gi"))
    clock.advance(1.0)
    prov.reconcile()
    clock.advance(1.0)
    prov.reconcile()
    assert stats.types_built == built and stats.hits > hits
    first, second = cluster.list(r.NODECLAIMS)
    assert _instance_types(first)[0] == _instance_types(second)[0] == "m5.xlarge"
