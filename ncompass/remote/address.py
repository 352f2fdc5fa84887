"""Which Ray cluster to talk to, how to authenticate, and whether anything answers there.

ncompass speaks only HTTP to the cluster's dashboard (Ray's Jobs API and log API, port 8265 by
default): no Ray Client port, no GCS port, and nothing listening on this machine.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ncompass import environment_variables
from ncompass.remote.config import ConfigFile
from ncompass.remote.errors import ClusterUnreachableError, RemoteError

ADDRESS_ENV = "RAY_ADDRESS"
TOKEN_ENV = environment_variables.NCOMPASS_REMOTE_TOKEN
DEFAULT_DASHBOARD_PORT = 8265
_GCS_PORT = 6379
CONNECT_TIMEOUT_S = 5.0

_HOW_TO_CHOOSE = (
    "pass --address http://HEAD:8265, set RAY_ADDRESS, or save one with "
    "`ncompass jobs connect http://HEAD:8265`"
)


@dataclass(frozen=True)
class Cluster:
    """A Ray cluster's dashboard, where its address came from, and the headers it needs.

    Attributes:
        url: ``http(s)://host:port`` of the dashboard, without a trailing slash.
        source: Where the address came from (``--address``, ``RAY_ADDRESS`` or a file).
        headers: HTTP headers for every request (the token, if any).
    """

    url: str
    source: str
    headers: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def host(self) -> str:
        """The dashboard's host name or IP."""
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        """The dashboard's TCP port."""
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    def describe(self) -> str:
        """``URL (from SOURCE)`` for messages."""
        return f"{self.url} (from {self.source})"


def resolve_cluster(explicit: str | None, settings: ConfigFile) -> Cluster:
    """The cluster to use: ``explicit`` (``--address``), else ``$RAY_ADDRESS``, else the file.

    The token comes from ``$NCOMPASS_REMOTE_TOKEN``, else the settings file; it is sent as
    ``Authorization: Bearer TOKEN`` (Ray's token authentication and most proxies accept it).
    The settings file's token and ``headers`` belong to its ``address``: they are sent only to
    that same scheme, host and port (see :func:`saved_headers`), never to another cluster.

    Raises:
        RemoteError: no address anywhere, or an address that is not a dashboard URL.
    """
    if explicit:
        text, source = explicit, "--address"
    elif os.environ.get(ADDRESS_ENV):
        text, source = os.environ[ADDRESS_ENV], ADDRESS_ENV
    elif settings.config.address:
        text, source = settings.config.address, str(settings.path)
    else:
        raise RemoteError(f"no Ray cluster address: {_HOW_TO_CHOOSE}")
    url = normalize_address(text, source)
    headers = saved_headers(settings, url)
    token = os.environ.get(TOKEN_ENV)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return Cluster(url, source, headers)


def saved_headers(settings: ConfigFile, url: str) -> dict[str, str]:
    """The settings file's headers and token, if it saved them for ``url``; else none.

    A saved credential belongs to the saved ``address``: it goes to that scheme, host and port
    only, whichever way the address of the command was given (``--address``, ``RAY_ADDRESS``).
    """
    saved = settings.config.address
    if not saved or not same_origin(normalize_address(saved, str(settings.path)), url):
        return {}
    headers = dict(settings.config.headers)
    if settings.config.token:
        headers["Authorization"] = f"Bearer {settings.config.token}"
    return headers


def same_origin(first: str, second: str) -> bool:
    """Whether two dashboard URLs have the same scheme, host and port (a path does not count)."""
    return _origin(first) == _origin(second)


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def normalize_address(text: str, source: str = "--address") -> str:
    """A dashboard URL from what the user typed (``host``, ``host:port`` or a URL).

    A bare host gets the dashboard's default port (8265); a full URL is kept as written.

    Raises:
        RemoteError: a Ray Client (``ray://``) or GCS address, or something that is no address.
    """
    value = text.strip().rstrip("/")
    if value.startswith("ray://"):
        raise RemoteError(
            f"{value} (from {source}) is a Ray Client address; ncompass uses the Jobs API on "
            f"the dashboard: http://HOST:{DEFAULT_DASHBOARD_PORT}"
        )
    if value in ("auto", "local", ""):
        raise RemoteError(
            f"{value or 'an empty address'} (from {source}) does not name a dashboard; "
            f"{_HOW_TO_CHOOSE}"
        )
    bare = "://" not in value
    if bare:
        value = f"http://{value}"
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteError(f"{text} (from {source}) is not an http(s) dashboard address")
    try:
        port = parts.port
    except ValueError:
        raise RemoteError(f"{text} (from {source}) has an invalid port") from None
    if port == _GCS_PORT:
        raise RemoteError(
            f"{value} (from {source}) is Ray's GCS port; the Jobs API is on the dashboard port "
            f"({DEFAULT_DASHBOARD_PORT} unless `ray start --dashboard-port` chose another)"
        )
    if port is None and bare:
        # A bare host means the dashboard's own port; a full URL (a proxy, an ingress) is kept.
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        value = f"http://{host}:{DEFAULT_DASHBOARD_PORT}{parts.path}"
    return value


def check_reachable(cluster: Cluster, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast, naming the address, when nothing accepts connections at the dashboard.

    Raises:
        ClusterUnreachableError: connection refused, unknown host, or no answer in time.
    """
    try:
        with socket.create_connection((cluster.host, cluster.port), timeout=timeout_s):
            return
    except TimeoutError:
        reason = f"no answer within {timeout_s:g} s"
    except OSError as error:
        reason = error.strerror or str(error)
    raise ClusterUnreachableError(unreachable_message(cluster, reason))


def unreachable_message(cluster: Cluster, reason: str) -> str:
    """The one-line explanation of a cluster that does not answer."""
    return (
        f"cannot reach the Ray cluster at {cluster.describe()}: {reason}. Is the cluster up "
        f"and its dashboard reachable from here? Otherwise {_HOW_TO_CHOOSE}"
    )


__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_DASHBOARD_PORT",
    "TOKEN_ENV",
    "Cluster",
    "check_reachable",
    "normalize_address",
    "resolve_cluster",
    "same_origin",
    "saved_headers",
    "unreachable_message",
]
