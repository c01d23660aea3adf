"""From one request the controller sends to the API server to the RBAC authorizations it needs.

Source: Kubernetes "Authorization" (request verbs from the HTTP method: GET of an object ``get``, of a collection
``list``, with ``watch=true`` ``watch``; POST ``create``; PUT ``update``; PATCH ``patch``; DELETE of an object
``delete``, of a collection ``deletecollection``), "Using RBAC Authorization" (``resources`` name
``<resource>/<subresource>``; ``resourceNames`` cannot restrict ``create``, ``list``, ``watch`` or
``deletecollection``) and "Admission controllers: OwnerReferencesPermissionEnforcement" (setting
``blockOwnerDeletion`` on an ownerReference needs ``update`` on the owner's ``<resource>/finalizers``).
Paths: ``/api/v1[/namespaces/<ns>]/<resource>[/<name>[/<subresource>]]`` and
``/apis/<group>/<version>[/namespaces/<ns>]/<resource>[/<name>[/<subresource>]]``.

A path this module cannot parse raises :class:`UnmappedRequest` (the test that sent it fails).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nodewright.kube import resources as r

#: Kind -> plural, for the owners named by ownerReferences.
_PLURALS = {k.kind: k.plural for k in vars(r).values() if isinstance(k, r.ResourceKind)}


#: Non-resource URLs the controller reads (client version negotiation); every authenticated user may ``get``
#: them through the default ClusterRoles ``system:discovery`` and ``system:public-info-viewer`` (Kubernetes
#: "Using RBAC Authorization", "Default roles and role bindings").
NON_RESOURCE_PATHS = frozenset({"/version", "/api", "/apis", "/healthz", "/livez", "/readyz"})


class UnmappedRequest(Exception):
    """A request whose path is not a Kubernetes resource path."""


@dataclass(frozen=True, order=True)
class Access:
    """One authorization: ``verb`` on ``group``/``resource`` (``pods/eviction``), in ``namespace`` ("" at the
    cluster scope), of object ``name`` ("" for collections); ``why`` says what implied it (empty: the request)."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""
    why: str = ""

    def __str__(self) -> str:
        group = self.group or "core"
        where = f" in {self.namespace}" if self.namespace else ""
        target = f" {self.name}" if self.name else ""
        return f"{self.verb} {group}/{self.resource}{target}{where}{f' ({self.why})' if self.why else ''}"


def accesses(method: str, path: str, query: Mapping[str, Any] | None = None, body: Any = None) -> list[Access]:
    """The authorizations of one request (the request's own, then any it implies).

    Raises:
        UnmappedRequest: ``path`` is not a resource path.
    """
    bare = "/" + "/".join(p for p in path.split("?", 1)[0].split("/") if p)
    if bare in NON_RESOURCE_PATHS:
        return [Access("get" if method.upper() == "GET" else method.lower(), "", f"nonResourceURL:{bare}")]
    parts = [p for p in bare.split("/") if p]
    if parts[:2] == ["api", "v1"] and len(parts) > 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        raise UnmappedRequest(f"{method} {path}: not a Kubernetes resource path")
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not 1 <= len(rest) <= 3:
        raise UnmappedRequest(f"{method} {path}: expected <resource>[/<name>[/<subresource>]]")
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    name = rest[1] if len(rest) >= 2 else ""
    method = method.upper()
    if method == "GET":
        watch = str((query or {}).get("watch", "")).lower() in ("true", "1")
        verb = "get" if name else ("watch" if watch else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verbs = {"POST": "create", "PUT": "update", "PATCH": "patch"}
        if method not in verbs:
            raise UnmappedRequest(f"{method} {path}: no RBAC verb for {method}")
        verb = verbs[method]
    if verb == "create" and len(rest) == 1:
        name = ""  # a create names no object (RBAC cannot restrict it by name)
    out = [Access(verb, group, resource, namespace, name)]
    if method in ("POST", "PUT", "PATCH") and isinstance(body, Mapping):
        for ref in ((body.get("metadata") or {}).get("ownerReferences") or []):
            if not ref.get("blockOwnerDeletion"):
                continue
            owner_group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            plural = _PLURALS.get(str(ref.get("kind")), f"{str(ref.get('kind', '')).lower()}s")
            out.append(Access("update", owner_group, f"{plural}/finalizers", "", str(ref.get("name", "")),
                              why=f"blockOwnerDeletion on {verb} {resource}"))
    return out
