"""The disruption orchestration queue, kept in the cluster so a restart resumes or rolls back every command.

Karpenter keeps its orchestration queue (``pkg/controllers/disruption/orchestration/queue.go``) in memory and, at
the start of every disruption pass (``controller.go`` ``Reconcile``), removes ``karpenter.sh/disrupted:NoSchedule``
from nodes the queue does not hold and that are not marked for deletion, clearing their NodeClaims'
``DisruptionReason`` condition. A restart there loses the queue: tainted nodes are untainted, replacements
already launched stay as extra capacity. nodewright writes each command into the cluster before acting, so a new
leader rebuilds the queue from the cluster and ends every command either completed or fully rolled back.

The record (a :class:`CommandRecord`, JSON in the annotation :data:`COMMAND_ANNOTATION` on every candidate
NodeClaim) is written before the first taint; each replacement NodeClaim carries the command id in
:data:`REPLACEMENT_ANNOTATION` and the name the record planned for it (:func:`replacement_name`), so a roll-back
also deletes a replacement whose create went through though its reply was lost. The order of writes and what a restart after each step does
(:func:`resolve`):

========================  =============================================  =====================================
step                      cluster                                        a new leader
========================  =============================================  =====================================
recorded / tainting       records, some taints                           rolls back (untaint, drop records)
replacements launching    fewer replacements than recorded               rolls back (delete the not-Ready ones)
replacements launched     all replacements, not all Ready                waits (timeout from their creation)
replacements Ready        all Ready                                      deletes the candidates (completes)
deleting                  some candidates deleting                       deletes the rest (completes)
========================  =============================================  =====================================

A tainted Node no command holds is stale (:func:`stale_disrupted_nodes`): the disruption controller untaints it
and the provisioner does not count its pods as leaving (:func:`leaving`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from nodewright.controllers.common import has_disrupted_taint, nodeclaim_ready
from nodewright.kube.objects import Obj, annotations_of, is_deleting, meta, name_of, parse_time
from nodewright.state.cluster import ClusterState

#: On each candidate NodeClaim: the command (JSON of :class:`CommandRecord`) that is disrupting it.
COMMAND_ANNOTATION = "nodewright.io/disruption-command"
#: On each replacement NodeClaim: the id of the command it was launched for.
REPLACEMENT_ANNOTATION = "nodewright.io/disruption-replacement-for"

ROLL_BACK = "roll-back"
WAIT = "wait"
COMPLETE = "complete"
DONE = "done"


@dataclass(frozen=True)
class CommandRecord:
    """What a new leader needs to finish or undo a command.

    Attributes:
        id: unique per command (hash of the candidates and the decision time).
        decision: ``delete`` or ``replace`` (Karpenter's ``decision`` metric label).
        reason: ``Empty``, ``Drifted``, ``Underutilized``.
        method: the decision method (``emptiness``, ``single-node``, ...).
        message: the decision's sentence (events, logs).
        candidates: ``[node, nodeclaim]`` pairs to disrupt.
        nodepools: the candidates' NodePools (metrics).
        replacements: how many replacement NodeClaims the command launches.
        decided_at: epoch seconds.
        replacement_names: the names the replacements are created with (:func:`replacement_name`), so a
            roll-back deletes a replacement whose create was written though its reply was lost.
    """

    id: str
    decision: str
    reason: str
    method: str
    message: str
    candidates: tuple[tuple[str, str], ...]
    nodepools: tuple[str, ...] = ()
    replacements: int = 0
    decided_at: float = 0.0
    replacement_names: tuple[str, ...] = ()

    @staticmethod
    def new(decision: str, reason: str, method: str, message: str, candidates: Iterable[tuple[str, str]],
            nodepools: Iterable[str], replacements: int | Iterable[str], decided_at: float) -> CommandRecord:
        """``replacements``: the replacements' NodePools, in order (their names follow from the command id), or
        only how many there are."""
        pairs = tuple((str(n), str(c)) for n, c in candidates)
        digest = hashlib.sha256(json.dumps([pairs, decided_at]).encode()).hexdigest()[:12]
        command_id = f"{int(decided_at)}-{digest}"
        pools = [] if isinstance(replacements, int) else [str(p) for p in replacements]
        names = tuple(replacement_name(command_id, i, pool) for i, pool in enumerate(pools))
        return CommandRecord(command_id, decision, reason, method, message, pairs, tuple(sorted(set(nodepools))),
                             replacements if isinstance(replacements, int) else len(pools), decided_at, names)

    def annotation(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), sort_keys=True)

    @staticmethod
    def parse(text: str) -> CommandRecord | None:
        """The record in an annotation value, or None when it is not one (hand-edited, other version)."""
        try:
            raw = json.loads(text)
            return CommandRecord(str(raw["id"]), str(raw["decision"]), str(raw["reason"]), str(raw["method"]),
                                 str(raw["message"]), tuple((str(n), str(c)) for n, c in raw["candidates"]),
                                 tuple(str(p) for p in raw.get("nodepools", ())), int(raw.get("replacements", 0)),
                                 float(raw.get("decided_at", 0.0)),
                                 tuple(str(n) for n in raw.get("replacement_names", ())))
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def nodeclaims(self) -> list[str]:
        return [claim for _, claim in self.candidates]

    @property
    def nodes(self) -> list[str]:
        return [node for node, _ in self.candidates]


def replacement_name(command_id: str, index: int, nodepool: str) -> str:
    """The name of a command's ``index``-th replacement NodeClaim: ``<nodepool>-<5 hex>``, the shape of a name
    from ``generateName: <nodepool>-``, but known before the create is sent."""
    return f"{nodepool}-{hashlib.sha256(f'{command_id}/{index}'.encode()).hexdigest()[:5]}"


def record_of(claim: Obj) -> CommandRecord | None:
    """The command recorded on a candidate NodeClaim, or None."""
    text = annotations_of(claim).get(COMMAND_ANNOTATION)
    return CommandRecord.parse(text) if text else None


@dataclass
class Recovered:
    """A command rebuilt from the cluster and what to do with it now.

    Attributes:
        record: the command.
        replacements: names of the replacement NodeClaims found (not deleting).
        action: :data:`ROLL_BACK`, :data:`WAIT`, :data:`COMPLETE` or :data:`DONE` (every candidate gone or deleting).
        launched_at: epoch seconds the last replacement was created (for the replacement timeout).
    """

    record: CommandRecord
    replacements: list[str] = field(default_factory=list)
    action: str = ROLL_BACK
    launched_at: float = 0.0


def recorded_commands(state: ClusterState) -> dict[str, CommandRecord]:
    """Every command recorded on a NodeClaim of ``state``, by id."""
    out: dict[str, CommandRecord] = {}
    for claim in state.nodeclaims.values():
        record = record_of(claim)
        if record is not None:
            out.setdefault(record.id, record)
    return out


def resolve(record: CommandRecord, state: ClusterState) -> Recovered:
    """What a command found in the cluster needs (see the module's table)."""
    claims = [state.nodeclaims.get(name) for name in record.nodeclaims]
    live = [c for c in claims if c is not None and not is_deleting(c)]
    if not live:
        return Recovered(record, action=DONE)
    replacements = [c for c in state.nodeclaims.values()
                    if annotations_of(c).get(REPLACEMENT_ANNOTATION) == record.id]
    alive = [c for c in replacements if not is_deleting(c)]
    names = sorted(name_of(c) for c in alive)
    launched = max((parse_time(meta(c).get("creationTimestamp")) or 0.0 for c in alive), default=0.0)
    launched_all = len(alive) >= record.replacements
    ready = launched_all and all(nodeclaim_ready(c) for c in alive)
    if len(live) < len(record.candidates):  # deleting had begun: finish it once the replacements are Ready
        if record.replacements == 0 or ready:
            return Recovered(record, names, COMPLETE, launched)
        return Recovered(record, names, WAIT if launched_all else ROLL_BACK, launched)
    if record.replacements == 0 or not launched_all:
        return Recovered(record, names, ROLL_BACK, launched)
    return Recovered(record, names, COMPLETE if ready else WAIT, launched)


def held_nodes(state: ClusterState, live: CommandRecord | None = None) -> set[str]:
    """Names of the Nodes a command holds: recorded on their NodeClaim, or candidates of ``live``."""
    out = set(live.nodes) if live is not None else set()
    for claim in state.nodeclaims.values():
        record = record_of(claim)
        if record is not None:
            node = state.node_for(claim)
            out.add(name_of(node) if node is not None else "")
            out.update(record.nodes)
    out.discard("")
    return out


def stale_disrupted_nodes(state: ClusterState, live: CommandRecord | None = None) -> list[Obj]:
    """Managed Nodes tainted ``karpenter.sh/disrupted`` that no command holds and that are not being deleted
    (nor their NodeClaim): Karpenter's ``outdatedNodes`` at the start of the disruption ``Reconcile``."""
    held = held_nodes(state, live)
    out = []
    for node in state.managed_nodes():
        if not has_disrupted_taint(node) or is_deleting(node) or name_of(node) in held:
            continue
        claim = state.nodeclaim_for(node)
        if claim is not None and is_deleting(claim):
            continue
        out.append(node)
    return out


def leaving(node: Obj, state: ClusterState) -> bool:
    """Whether a managed Node's pods need a new home: it (or its NodeClaim) is being deleted, or it is tainted
    ``karpenter.sh/disrupted`` by a command recorded on its NodeClaim. A stale taint (no command) does not count:
    the disruption pass removes it, and launching for those pods would duplicate capacity."""
    if is_deleting(node):
        return True
    claim = state.nodeclaim_for(node)
    if claim is not None and is_deleting(claim):
        return True
    return has_disrupted_taint(node) and claim is not None and record_of(claim) is not None
