"""A thin JSON REST layer over the official ``kubernetes`` client's ``ApiClient``.

It reuses the client's configuration, authentication (kubeconfig, in-cluster service account token,
exec plugins), TLS and connection pool, but exchanges plain JSON dicts instead of generated model
classes: one code path serves core resources and CRDs alike, and decoding a 5,000-pod list does not
build 5,000 model objects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from nodewright.kube import resources as r
from nodewright.kube.errors import KubeError, error_for_status

MERGE_PATCH = "application/merge-patch+json"
#: Connections the client keeps: one per watched kind (each informer's watch holds one) and room for the
#: controllers' requests. The client's default (5 per CPU: 10 on 2 cores) is smaller than the informers: every
#: cut or expired watch then handed back more connections than the pool keeps, and urllib3 said "Connection pool
#: is full, discarding connection" for each one (7-8 warnings per cut, issue 32 item 6).
CONNECTION_POOL_SIZE = len(r.ALL) + 16
JSON = "application/json"


def missing_kubeconfig(kubeconfig: str | None) -> str | None:
    """The first path of ``kubeconfig`` (one path, or several joined by ``os.pathsep`` as in ``KUBECONFIG``) when
    none of them exists, else None: the client reads only the paths that exist and then says "Invalid kube-config
    file. No configuration found.", which hides that the file is absent."""
    paths = [p for p in (kubeconfig or "").split(os.pathsep) if p]
    return paths[0] if paths and not any(os.path.exists(os.path.expanduser(p)) for p in paths) else None


def load_api_client(kubeconfig: str | None = None, context: str | None = None) -> k8s_client.ApiClient:
    """An ``ApiClient`` from ``kubeconfig`` (a path), else in-cluster config, else ``$KUBECONFIG`` or
    ``~/.kube/config``.

    Raises:
        KubeError: when no configuration can be loaded (``kubeconfig file '...' not found`` when the file that
            would be read does not exist).
    """
    configuration = k8s_client.Configuration()
    try:
        if kubeconfig:
            k8s_config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)
            except k8s_config.ConfigException:
                k8s_config.load_kube_config(context=context, client_configuration=configuration)
    except (k8s_config.ConfigException, OSError) as err:
        absent = missing_kubeconfig(kubeconfig or os.environ.get("KUBECONFIG"))
        if absent is not None:
            raise KubeError(f"kubeconfig file {absent!r} not found") from err
        raise KubeError(f"cannot load Kubernetes configuration: {err}") from err
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, CONNECTION_POOL_SIZE)
    return k8s_client.ApiClient(configuration)


def _status_message(status: int, body: bytes) -> str:
    try:
        doc = json.loads(body or b"{}")
    except ValueError:
        return f"HTTP {status}: {body[:200]!r}"
    if isinstance(doc, dict) and doc.get("message"):
        return f"HTTP {status} {doc.get('reason', '')}: {doc['message']}"
    return f"HTTP {status}"


class RestClient:
    """JSON requests against the API server.

    Args:
        api_client: a configured ``kubernetes.client.ApiClient``.
        timeout: per-request timeout in seconds for non-watch calls.
    """

    def __init__(self, api_client: k8s_client.ApiClient, timeout: float = 30.0) -> None:
        self.api_client = api_client
        self.timeout = timeout

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float | tuple[float, float],
    ) -> Any:
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        query_params = [(k, v) for k, v in (query or {}).items() if v is not None]
        serialized = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=query_params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        method_, url, header_params, body_, post_params = serialized
        try:
            return self.api_client.call_api(
                method_, url, header_params=header_params, body=body_, post_params=post_params,
                _request_timeout=timeout,
            )
        except k8s_client.ApiException as err:
            raise error_for_status(err.status or 0, str(err.reason)) from err
        except Exception as err:  # urllib3 connection/timeout errors
            raise KubeError(f"{method} {path}: {type(err).__name__}: {err}") from err

    def request(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        *,
        creating: bool = False,
    ) -> dict[str, Any]:
        """One request; returns the decoded JSON body.

        Raises:
            KubeError (or a subclass from :func:`error_for_status`): any non-2xx answer or transport error.
        """
        response = self._send(method, path, query, body, content_type, self.timeout)
        data = response.read()
        if response.status >= 300:
            raise error_for_status(response.status, _status_message(response.status, data), creating=creating)
        if not data:
            return {}
        try:
            doc = json.loads(data)
        except ValueError as err:
            raise KubeError(f"{method} {path}: response is not JSON: {data[:200]!r}") from err
        return doc if isinstance(doc, dict) else {}

    def stream_lines(
        self, path: str, query: Mapping[str, Any], read_timeout: float, connect_timeout: float = 10.0
    ) -> Iterator[dict[str, Any]]:
        """GET a watch stream and yield each JSON line as a dict until the server closes it.

        Raises:
            KubeError: non-2xx status, transport error or read timeout (a silent, dead connection).
        """
        response = self._send("GET", path, query, None, JSON, (connect_timeout, read_timeout))
        raw = response.response
        try:
            if response.status >= 300:
                data = raw.read()
                raise error_for_status(response.status, _status_message(response.status, data))
            buffer = b""
            for chunk in raw.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
        except KubeError:
            raise
        except Exception as err:  # urllib3 ProtocolError/ReadTimeoutError, JSON errors
            raise KubeError(f"watch {path}: {type(err).__name__}: {err}") from err
        finally:
            raw.release_conn()
