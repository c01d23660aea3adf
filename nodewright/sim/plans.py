"""Did kube-scheduler keep the plan? The replay's ``plan kept: N of M pods`` and ``extra nodes`` (issue 25).

:class:`PlanTracker` watches one replay: every pod the provisioner plans (a nomination to a new NodeClaim or to an
existing Node, :attr:`nodewright.controllers.provisioning.Provisioner.nominations`) has a *first plan*. When the
simulated kube-scheduler (:mod:`nodewright.sim.kubescheduler`) binds the pod, the plan was *kept* if the node is
the planned Node or the Node of the planned NodeClaim. A pod planned again later (its node was Ready and
kube-scheduler put something else there, or its nomination expired) is *re-planned*; a NodeClaim opened for a
re-planned pod is an *extra node*: capacity a plan the scheduler followed would not have needed. Its instance's
bill over the run is the ``$ over the plan``.
"""

from __future__ import annotations

from typing import Any

from nodewright.cloud.provider import parse_provider_id
from nodewright.controllers.provisioning import Provisioner
from nodewright.kube import resources as r
from nodewright.kube.objects import Obj, name_of
from nodewright.kube.resources import ResourceKind
from nodewright.sim.world import World
from nodewright.state.cluster import provider_id_of
from nodewright.state.pods import node_name, pod_key


class PlanTracker:
    """Counts kept plans, re-plans and extra NodeClaims of one replay (see module docstring).

    Args:
        world: the replay's world (its cluster is watched, its EC2 bills the extra nodes).
        provisioner: whose nominations are the plan.
    """

    def __init__(self, world: World, provisioner: Provisioner) -> None:
        self.world = world
        self.provisioner = provisioner
        self.first: dict[str, str] = {}  # pod key -> first planned target (NodeClaim or Node name)
        self.current: dict[str, str] = {}  # pod key -> latest planned target
        self.outcome: dict[str, bool] = {}  # pod key -> bound where first planned
        self.replanned: set[str] = set()
        self.extra_claims: set[str] = set()
        self._claim_by_provider: dict[str, str] = {}
        world.cluster.add_listener(self._on_change)

    def observe(self) -> None:
        """Read the provisioner's nominations after a controller step (new plans, re-plans, extra NodeClaims)."""
        for key, nom in self.provisioner.nominations.items():
            if self.current.get(key) == nom.target or key in self.outcome:
                continue
            self.current[key] = nom.target
            if key not in self.first:
                self.first[key] = nom.target
                continue
            self.replanned.add(key)
            if nom.on_nodeclaim:
                self.extra_claims.add(nom.target)

    def _on_change(self, kind: ResourceKind, event: str, obj: Obj) -> None:
        if kind == r.NODECLAIMS and event != "DELETED":
            pid = provider_id_of(obj)
            if pid:
                self._claim_by_provider[pid] = name_of(obj)
        elif kind == r.PODS and event == "MODIFIED":
            key = pod_key(obj)
            host = node_name(obj)
            if host and key in self.first and key not in self.outcome:
                node = self.world.cluster.get(r.NODES, host)
                claim = self._claim_by_provider.get(provider_id_of(node)) if node is not None else None
                self.outcome[key] = self.first[key] in (host, claim)

    def summary(self, now: float) -> dict[str, Any]:
        """``planned_pods``, ``plan_kept_pods``, ``plan_kept`` ("N of M pods"), ``replanned_pods``,
        ``extra_nodes`` and ``extra_node_cost_usd`` (the extra NodeClaims' instances billed until ``now``)."""
        kept = sum(1 for ok in self.outcome.values() if ok)
        planned = len(self.first)
        cost = 0.0
        instances = self.world.ec2.instances
        providers = {claim: pid for pid, claim in self._claim_by_provider.items()}
        for claim in self.extra_claims:
            pid = providers.get(claim)
            instance = instances.get(parse_provider_id(pid)[1]) if pid else None
            if instance is not None:
                cost += instance.price * instance.billed_seconds(now) / 3600.0
        return {"planned_pods": planned, "plan_kept_pods": kept, "plan_kept": f"{kept} of {planned} pod{'' if planned == 1 else 's'}",
                "replanned_pods": len(self.replanned), "extra_nodes": len(self.extra_claims),
                "extra_node_cost_usd": round(cost, 4)}
