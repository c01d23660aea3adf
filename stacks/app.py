"""Assemble the six stacks into one CDK Terrain app.

Order (Terraform applies stacks in dependency order; cross-stack references add the edges):
network → interruption → cluster → identity → addons → workloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdktn import App

from stacks.addons import AddonsStack
from stacks.cluster import ClusterStack
from stacks.identity import IdentityStack
from stacks.interruption import InterruptionStack
from stacks.network import NetworkStack
from stacks.settings import InfraSettings
from stacks.workloads import WorkloadsStack

STACK_NAMES = ("network", "interruption", "cluster", "identity", "addons", "workloads")

# cdktn checks backend features against the Terraform versions the project declares;
# S3 native locking (use_lockfile) needs >= 1.10. Kept equal to cdktf.json "targetVersions".
TARGET_VERSIONS = {"terraform": ">=1.10.0"}


@dataclass(frozen=True)
class Stacks:
    """The app's stacks, for tests and for ``main.py``."""

    network: NetworkStack
    interruption: InterruptionStack
    cluster: ClusterStack
    identity: IdentityStack
    addons: AddonsStack
    workloads: WorkloadsStack

    def by_name(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in STACK_NAMES}


def build_stacks(app: App, settings: InfraSettings) -> Stacks:
    """Create every stack in ``app`` from ``settings``.

    Raises:
        NodewrightValidationError: the chart directory is missing (``chart_path``).
    """
    network = NetworkStack(app, "network", settings)
    interruption = InterruptionStack(app, "interruption", settings)
    cluster = ClusterStack(app, "cluster", settings, network)
    identity = IdentityStack(app, "identity", settings, cluster, interruption)
    addons = AddonsStack(app, "addons", settings, cluster, identity, interruption)
    workloads = WorkloadsStack(app, "workloads", settings, cluster)
    # No reference ties workloads to addons, but the ScaledObject needs KEDA's CRDs and the
    # Deployment needs the chart's NodePools.
    workloads.add_dependency(addons)
    return Stacks(network, interruption, cluster, identity, addons, workloads)


def app_context(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """App context: the declared Terraform targets plus any ``extra`` entries."""
    return {"targetVersions": dict(TARGET_VERSIONS), **(extra or {})}
