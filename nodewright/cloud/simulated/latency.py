"""Launch latency of a simulated instance: fleet call -> running -> kubelet registered -> node Ready.

The total (fleet call to ``Ready``) is drawn from a log-normal distribution fitted to two percentiles, which
is how field reports describe it ("a node in ~19 s", "Ready in 19-40 s"; Cluster Autoscaler through an Auto
Scaling Group: "~2 minutes"). The phases are fixed fractions of the total: EC2 reports ``running`` after
:data:`RUNNING_FRACTION`, the kubelet registers the Node after :data:`REGISTERED_FRACTION` (boot, nodeadm,
TLS bootstrap), the CNI turns it ``Ready`` at the end.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

#: Share of the total latency until EC2 reports the instance ``running``.
RUNNING_FRACTION = 0.3
#: Share of the total latency until the kubelet has registered the Node object.
REGISTERED_FRACTION = 0.75
#: z-score of the 90th percentile of a standard normal distribution.
_Z90 = 1.2815515655446004


@dataclass(frozen=True, slots=True)
class LaunchPhases:
    """Seconds after the fleet call at which each phase is reached (whole seconds, increasing)."""

    running: float
    registered: float
    ready: float


@dataclass(frozen=True, slots=True)
class LatencyDistribution:
    """Log-normal distribution of the fleet-call-to-Ready latency, in seconds.

    Attributes:
        p50: median seconds.
        p90: 90th percentile seconds; equal to ``p50`` gives a constant latency (tests use that).
        minimum: floor in seconds (no instance boots faster than this).
        maximum: cap in seconds (long tails are cut; 0 means 4 x p90).

    Raises:
        ValueError: from the constructor when ``p50 <= 0`` or ``p90 < p50``.
    """

    p50: float
    p90: float
    minimum: float = 0.0
    maximum: float = 0.0

    def __post_init__(self) -> None:
        if self.p50 <= 0 or self.p90 < self.p50:
            raise ValueError(f"need 0 < p50 <= p90, got p50={self.p50} p90={self.p90}")

    @property
    def sigma(self) -> float:
        """Standard deviation of the underlying normal distribution."""
        return math.log(self.p90 / self.p50) / _Z90

    def sample(self, rng: random.Random) -> float:
        """One total latency in whole seconds (at least 3, so the three phases are distinct seconds)."""
        if self.sigma == 0.0:
            value = self.p50
        else:
            value = rng.lognormvariate(math.log(self.p50), self.sigma)
        cap = self.maximum or 4 * self.p90
        return float(max(3, round(min(cap, max(self.minimum, value)))))

    def phases(self, rng: random.Random) -> LaunchPhases:
        """Sample a total and split it into :class:`LaunchPhases`."""
        total = self.sample(rng)
        running = max(1.0, float(round(total * RUNNING_FRACTION)))
        registered = min(total - 1, max(running + 1, float(round(total * REGISTERED_FRACTION))))
        return LaunchPhases(running, registered, total)


#: nodewright's default: EC2 Fleet straight to a node, Ready in ~19-40 s (first field report: 19 s).
NODEWRIGHT_LAUNCH_LATENCY = LatencyDistribution(p50=25.0, p90=40.0, minimum=19.0)
#: Cluster Autoscaler through an Auto Scaling Group, ~2 minutes end to end (first field report).
ASG_LAUNCH_LATENCY = LatencyDistribution(p50=120.0, p90=150.0, minimum=90.0)
