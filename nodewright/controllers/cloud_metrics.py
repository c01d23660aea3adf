"""``karpenter_cloudprovider_duration_seconds{controller, method, provider}``: every CloudProvider call timed.

Karpenter wraps its cloud provider in a metrics decorator (``pkg/cloudprovider/metrics`` in
kubernetes-sigs/karpenter) that observes each method's duration, labelled with the calling controller and the
method's Go name (``Create``, ``Delete``, ``Get``, ``List``, ``GetInstanceTypes``, ``IsDrifted``). This is the
same decorator over our :class:`~nodewright.cloud.provider.CloudProvider`; every other attribute (``name``,
``pricing``, the node-class status source) passes through unchanged. Errors are counted where they are
handled (:meth:`nodewright.controllers.common.Context.cloud_error`), not here, so they are not counted twice.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from nodewright.metrics import Metrics

#: Python method -> Karpenter's method label.
METHODS = {"create": "Create", "delete": "Delete", "get": "Get", "list": "List",
           "get_instance_types": "GetInstanceTypes", "is_drifted": "IsDrifted",
           "reboot": "Reboot"}


class MeteredCloudProvider:
    """``cloud`` with its CloudProvider methods timed into ``metrics``.

    Args:
        cloud: the provider to wrap.
        metrics: where ``karpenter_cloudprovider_duration_seconds`` lives.
        controller: returns the name of the controller running now (the ``controller`` label).
    """

    def __init__(self, cloud: Any, metrics: Metrics, controller: Callable[[], str]) -> None:
        self._cloud = cloud
        self._metrics = metrics
        self._controller = controller

    @property
    def wrapped(self) -> Any:
        """The provider under the decorator."""
        return self._cloud

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._cloud, name)
        method = METHODS.get(name)
        if method is None or not callable(attr):
            return attr

        @functools.wraps(attr)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._metrics.cloudprovider_duration.labels(
                    self._controller(), method, str(getattr(self._cloud, "name", ""))).observe(
                    time.perf_counter() - started)

        return timed
