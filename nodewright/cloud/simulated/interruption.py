"""A simulated SQS interruption queue: the messages EventBridge would forward for simulated instances."""

from __future__ import annotations

from nodewright.cloud.aws.interruption import ACTION_CORDON_AND_DRAIN
from nodewright.controllers.interruption import SPOT_INTERRUPTION, InterruptionMessage


class SimulatedInterruptionQueue:
    """:class:`~nodewright.controllers.interruption.InterruptionSource` fed by the simulator.

    Attributes:
        pending: messages not yet received.
        received: count of messages handed to the controller.
        deleted: count of messages acknowledged.
    """

    def __init__(self) -> None:
        self.pending: list[InterruptionMessage] = []
        self.received = 0
        self.deleted = 0

    def spot_interruption(self, instance_id: str) -> None:
        """Queue an "EC2 Spot Instance Interruption Warning" for ``instance_id``."""
        self.pending.append(InterruptionMessage(SPOT_INTERRUPTION, (instance_id,), ACTION_CORDON_AND_DRAIN,
                                                receipt_handle=f"sim-{instance_id}"))

    def receive(self) -> list[InterruptionMessage]:
        """Every queued message (like a receive of up to all visible messages)."""
        out, self.pending = self.pending, []
        self.received += len(out)
        return out

    def delete(self, message: InterruptionMessage) -> None:
        """Acknowledge ``message``."""
        self.deleted += 1
