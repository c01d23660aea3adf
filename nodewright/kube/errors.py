"""Errors of the cluster interface, mapped from API server HTTP status codes.

Both the in-memory cluster and the HTTP adapter raise these, so controllers handle one set of errors.
"""

from __future__ import annotations


class KubeError(Exception):
    """An API call failed. ``status`` is the HTTP status code (0 when no response arrived)."""

    status: int = 0

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class NotFoundError(KubeError):
    """404: the object (or resource) does not exist."""

    status = 404


class AlreadyExistsError(KubeError):
    """409 on create: an object with that name exists."""

    status = 409


class ConflictError(KubeError):
    """409 on update: the object changed since the ``resourceVersion`` the write was based on."""

    status = 409


class TooManyRequestsError(KubeError):
    """429: for ``pods/eviction`` this means a PodDisruptionBudget does not allow the disruption now."""

    status = 429


class GoneError(KubeError):
    """410: the requested ``resourceVersion`` is too old to watch from; the caller must relist."""

    status = 410


class InvalidError(KubeError):
    """422 (or 400): the server rejected the object."""

    status = 422


def error_for_status(status: int, message: str, *, creating: bool = False) -> KubeError:
    """The :class:`KubeError` subclass for an HTTP ``status``.

    ``creating`` picks :class:`AlreadyExistsError` over :class:`ConflictError` for a 409.
    """
    if status == 404:
        return NotFoundError(message)
    if status == 409:
        return AlreadyExistsError(message) if creating else ConflictError(message)
    if status == 429:
        return TooManyRequestsError(message)
    if status == 410:
        return GoneError(message)
    if status in (400, 422):
        return InvalidError(message, status)
    return KubeError(message, status)
