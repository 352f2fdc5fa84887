"""``ncompass jobs connect``: check that an address is a Ray dashboard and save it as the default.

The settings file is written owner-only (see :func:`ncompass.remote.config.save_config`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ncompass.remote.address import Cluster, check_reachable, normalize_address, same_origin
from ncompass.remote.config import ConfigFile, load_config, save_config
from ncompass.remote.dashboard import Dashboard


@dataclass(frozen=True)
class Connection:
    """A cluster saved as the default.

    Attributes:
        url: Its dashboard.
        ray_version: The Ray version it runs.
        settings_path: The settings file it was saved in.
        with_token: Whether a token was saved with it.
    """

    url: str
    ray_version: str
    settings_path: Path
    with_token: bool


def connect(
    address: str,
    *,
    token: str | None = None,
    gpu_resource: str | None = None,
    settings: ConfigFile | None = None,
) -> Connection:
    """Check that ``address`` answers as a Ray dashboard, then save it as the default cluster.

    Args:
        address: The dashboard, ``HOST``, ``HOST:PORT`` or a URL.
        token: The cluster's token ("" for none); None keeps the token already saved for this
            same address (a token saved for another cluster is not sent to this one).
            Saved ``headers`` are kept only when the address stays the same (scheme, host, port).
        gpu_resource: A default GPU resource to save as well.
        settings: The settings to update [default: the settings file].

    Raises:
        RemoteError: the address is not a dashboard URL, does not answer, or the settings
            cannot be written.
    """
    settings = settings or load_config()
    url = normalize_address(address)
    # The saved token and headers belong to the saved address; another address starts without.
    same = bool(settings.config.address) and same_origin(
        normalize_address(settings.config.address or "", str(settings.path)), url
    )
    if token is None:
        token = settings.config.token if same else None
    headers = dict(settings.config.headers) if same else {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    cluster = Cluster(url, "ncompass jobs connect", headers)
    check_reachable(cluster)
    version = Dashboard(cluster).ray_version()
    update: dict[str, object] = {
        "address": url,
        "token": token or None,
        "headers": settings.config.headers if same else {},
    }
    if gpu_resource:
        update["gpu_resource"] = gpu_resource
    path = save_config(settings.config.model_copy(update=update), settings.path)
    return Connection(url, version, path, bool(token))


__all__ = ["Connection", "connect"]
