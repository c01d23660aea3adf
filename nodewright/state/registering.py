"""A Node that has not initialized yet, as Karpenter's cluster state sees it (``state/statenode.go``).

Until ``karpenter.sh/initialized`` is on a managed Node, Karpenter trusts its NodeClaim over the Node:

* ``Taints()``: the NodeClaim's ``spec.startupTaints`` are ignored (they are expected to go away), besides the
  transient taints of a booting node (:meth:`nodewright.scheduling.nodes.ExistingNode.scheduling_taints`);
* ``Allocatable()``/``Capacity()``: a resource the kubelet has not reported yet (missing or zero in the Node's
  status, typically a GPU before its device plugin starts) is taken from the NodeClaim's status.

Where no NodeClaim is known for the Node (``simulate -f`` given only Nodes), the NodePool named by the Node's
``karpenter.sh/nodepool`` label stands in: its template's ``startupTaints``, and the allocatable of the instance
type named by ``node.kubernetes.io/instance-type`` among the pool's types (what its NodeClaim's status would hold).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from nodewright.cloud.instancetype import InstanceType
from nodewright.errors import NodewrightValidationError
from nodewright.quantities import Resources, parse_resource_list
from nodewright.scheduling.nodes import ExistingNode
from nodewright.scheduling.taints import Taint, taint_from_dict

log = logging.getLogger(__name__)

Obj = Mapping[str, Any]


def startup_taints(claim: Obj | None, nodepool: Obj | None) -> tuple[Taint, ...]:
    """The startup taints of a Node: its NodeClaim's ``spec.startupTaints``, else its NodePool template's."""
    if claim is not None:
        raw = (claim.get("spec") or {}).get("startupTaints")
    else:
        raw = ((((nodepool or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get("startupTaints")
    return tuple(taint_from_dict(t) for t in raw or [] if isinstance(t, Mapping))


def _launched_allocatable(node: ExistingNode, claim: Obj | None, types: Sequence[InstanceType]) -> Resources:
    if claim is not None:
        try:
            return parse_resource_list((claim.get("status") or {}).get("allocatable"), "status.allocatable")
        except NodewrightValidationError as err:
            log.debug("nodeclaim of node %s: %s", node.name, err)
            return {}
    match = next((t for t in types if t.name == node.instance_type), None)
    return match.allocatable() if match is not None else {}


def registering_node(node: ExistingNode, claim: Obj | None, nodepool: Obj | None,
                     types: Sequence[InstanceType]) -> ExistingNode:
    """``node`` (a fresh model of a Node) with its NodeClaim's view while it is not initialized (module docstring);
    ``node`` itself when it is initialized or not managed.

    Args:
        claim: the Node's NodeClaim (matched by provider ID), or None.
        nodepool: the NodePool object of the node's ``karpenter.sh/nodepool`` label, or None.
        types: the instance types of that NodePool (for a Node without a NodeClaim).
    """
    if node.initialized or not node.nodepool:
        return node
    launched = _launched_allocatable(node, claim, types)
    allocatable = dict(node.allocatable)
    for name, quantity in launched.items():
        if not allocatable.get(name):
            allocatable[name] = quantity
    return dataclasses.replace(node, allocatable=allocatable, startup_taints=startup_taints(claim, nodepool))


def registering_nodes(nodes: Sequence[ExistingNode], state: Any,
                      instance_types: Mapping[str, Sequence[InstanceType]]) -> list[ExistingNode]:
    """:func:`registering_node` of each model in ``nodes`` (converted from ``state.nodes``, a
    :class:`~nodewright.state.cluster.ClusterState`)."""
    out = []
    for node in nodes:
        doc = state.nodes.get(node.name)
        claim = state.nodeclaim_for(doc) if doc is not None else None
        out.append(registering_node(node, claim, state.nodepools.get(node.nodepool),
                                    instance_types.get(node.nodepool, ())))
    return out
