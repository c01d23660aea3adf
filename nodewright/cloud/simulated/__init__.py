"""nodewright.cloud.simulated: an in-memory EC2 for ``nodewright simulate``.

* :mod:`.latency` -- launch latency distributions (fleet call -> running -> registered -> Ready).
* :mod:`.ec2` -- :class:`SimulatedEC2`: instances, timed transitions, spot interruptions, billing.
* :mod:`.provider` -- :class:`SimulatedCloudProvider`, the ``CloudProvider`` the controllers use.
* :mod:`.interruption` -- :class:`SimulatedInterruptionQueue`, the interruption controller's message source.
"""

from nodewright.cloud.simulated.ec2 import SPOT_INTERRUPTION_WARNING_SECONDS, SimInstance, SimulatedEC2
from nodewright.cloud.simulated.interruption import SimulatedInterruptionQueue
from nodewright.cloud.simulated.latency import (
    ASG_LAUNCH_LATENCY,
    NODEWRIGHT_LAUNCH_LATENCY,
    LatencyDistribution,
    LaunchPhases,
)
from nodewright.cloud.simulated.provider import SimulatedCloudProvider

__all__ = [
    "ASG_LAUNCH_LATENCY",
    "NODEWRIGHT_LAUNCH_LATENCY",
    "SPOT_INTERRUPTION_WARNING_SECONDS",
    "LatencyDistribution",
    "LaunchPhases",
    "SimInstance",
    "SimulatedCloudProvider",
    "SimulatedEC2",
    "SimulatedInterruptionQueue",
]
