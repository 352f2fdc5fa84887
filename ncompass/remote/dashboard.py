"""The dashboard's HTTP endpoints ncompass reads directly: nodes, and files of their log folders.

These are the endpoints behind ``ray list nodes`` and ``ray logs`` (Ray's state API). They are
called here with the standard library, with the cluster's headers (its token) on every request
and a timeout on every socket operation, so a slow or dead cluster ends in a clear error.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ncompass.remote.address import Cluster, same_origin, unreachable_message
from ncompass.remote.errors import ClusterUnreachableError, RemoteError

HTTP_TIMEOUT_S = 30.0
_BLOCK = 1 << 20


@dataclass(frozen=True)
class NodeInfo:
    """One node of the cluster."""

    node_id: str
    node_ip: str
    alive: bool
    is_head: bool
    resources: dict[str, float]


class FileMissingError(RemoteError):
    """A file asked for is not in the node's log folder."""


class HttpStatusError(RemoteError):
    """The dashboard answered with an HTTP error status.

    Attributes:
        status: The HTTP status code.
    """

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Dashboard:
    """The cluster dashboard's node and log-file endpoints."""

    def __init__(self, cluster: Cluster, timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s

    def ray_version(self) -> str:
        """The cluster's Ray version; proves the address is a dashboard that takes our token.

        Raises:
            ClusterUnreachableError: nothing answers, or it is not a Ray dashboard.
            RemoteError: the token is missing or refused.
        """
        try:
            body = self._json("/api/version", {})
        except HttpStatusError as error:
            if error.status in (401, 403):
                raise
            raise ClusterUnreachableError(
                f"{self.cluster.describe()} does not answer like a Ray dashboard ({error}); "
                "the Jobs API is on the dashboard port (http://HEAD:8265)"
            ) from None
        if "ray_version" not in body:
            raise ClusterUnreachableError(
                f"{self.cluster.describe()} is not a Ray dashboard (its /api/version has no "
                "ray_version)"
            )
        return str(body["ray_version"])

    def job_status(self, job_id: str) -> str | None:
        """The job's status (``RUNNING``, ``SUCCEEDED``, ...); None for a job the cluster lacks."""
        try:
            body = self._json(f"/api/jobs/{urllib.parse.quote(job_id, safe='')}", {})
        except HttpStatusError as error:
            if error.status == 404:
                return None
            raise
        status = body.get("status")
        return None if status is None else str(status)

    def nodes(self) -> list[NodeInfo]:
        """Every node the cluster knows (alive or not)."""
        body = self._json("/api/v0/nodes", {"limit": "10000", "detail": "false"})
        rows = body.get("data", {}).get("result", {}).get("result", [])
        return [
            NodeInfo(
                node_id=str(row.get("node_id")),
                node_ip=str(row.get("node_ip")),
                alive=row.get("state") == "ALIVE",
                is_head=bool(row.get("is_head_node")),
                resources={
                    str(key): float(value)
                    for key, value in (row.get("resources_total") or {}).items()
                    if not str(key).startswith("node:")
                },
            )
            for row in rows
        ]

    def list_files(self, node_id: str, pattern: str) -> list[str]:
        """Files (not folders) of a node's log folder matching a glob, relative to it."""
        body = self._json("/api/v0/logs", {"node_id": node_id, "glob": pattern})
        groups = body.get("data", {}).get("result", {})
        names = [name for group in groups.values() for name in group]
        return sorted(name for name in names if not name.endswith("/"))

    def read_file(self, node_id: str, filename: str) -> Iterator[bytes]:
        """Stream one (non-empty) file of a node's log folder, as raw bytes.

        Raises:
            FileMissingError: no such file on that node.
        """
        query = {"node_id": node_id, "filename": filename, "lines": "-1"}
        response = self._open("/api/v0/logs/file", query, missing_ok=True)
        with response:
            first = response.read(_BLOCK)
            # Ray answers a missing file with 500 "A file is not found at ...", and, under
            # concurrent requests, sometimes with an empty 200 (measured: 85 of 300). Nothing
            # ncompass reads is empty (manifests, chunks), so an empty answer means missing.
            if response.status != 200 or not first or _reports_missing(first):
                raise FileMissingError(f"{filename} is not on node {node_id[:12]}")
            if first:
                yield first
            while block := response.read(_BLOCK):
                yield block

    def _json(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        with self._open(path, query) as response:
            raw = response.read()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            raise RemoteError(
                f"{self.cluster.url}{path} did not answer with JSON: is {self.cluster.url} a Ray "
                "dashboard?"
            ) from None
        if not isinstance(body, dict) or body.get("result") is False:
            # The state API wraps answers in {"result": bool, "msg": ..., "data": ...}.
            message = body.get("msg") if isinstance(body, dict) else body
            raise RemoteError(f"the dashboard at {self.cluster.url} failed: {message}")
        return body

    def _open(self, path: str, query: dict[str, str], *, missing_ok: bool = False) -> Any:
        url = f"{self.cluster.url}{path}"
        if query:
            url += f"?{urllib.parse.urlencode(query)}"
        request = urllib.request.Request(url, headers=self.cluster.headers)
        try:
            return _OPENER.open(request, timeout=self.timeout_s)
        except urllib.error.HTTPError as error:
            if missing_ok and error.code in (404, 500):
                # Ray answers a missing log file with 500 and "A file is not found at: ...".
                return error
            raise http_error(self.cluster, error.code, _text(error)) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ClusterUnreachableError(unreachable_message(self.cluster, str(reason))) from None


class _CredentialsStayHome(urllib.request.HTTPRedirectHandler):
    """Follows redirects, but sends no headers of ours to another scheme, host or port.

    urllib copies every header of a request onto its redirect, wherever it points; the
    cluster's token and headers belong to the cluster's address only.
    """

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: Any,
        code: int,
        msg: str,
        headers: Any,
        newurl: str,
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and not same_origin(req.full_url, new.full_url):
            for name in list(new.headers):
                new.remove_header(name)
        return new


_OPENER = urllib.request.build_opener(_CredentialsStayHome)


def http_error(cluster: Cluster, status: int, text: str) -> HttpStatusError:
    """The error for an HTTP failure, with what to do about authentication ones."""
    if status in (401, 403):
        having = "the token" if "Authorization" in cluster.headers else "no token"
        return HttpStatusError(
            f"the Ray cluster at {cluster.describe()} refused the request ({status}: "
            f"{text.strip()[:200]}); ncompass sent {having}. Set the cluster's token with "
            "`ncompass jobs connect URL --token-stdin` or $NCOMPASS_REMOTE_TOKEN",
            status,
        )
    return HttpStatusError(
        f"the Ray cluster at {cluster.url} answered {status}: {text.strip()[:300]}", status
    )


def _reports_missing(first: bytes) -> bool:
    return first.startswith(b"A file is not found at") or first.startswith(b"Unable to find")


def _text(error: urllib.error.HTTPError) -> str:
    try:
        return error.read().decode("utf-8", "replace")
    except OSError:
        return error.reason if isinstance(error.reason, str) else ""


__all__ = ["Dashboard", "FileMissingError", "HttpStatusError", "NodeInfo", "http_error"]
