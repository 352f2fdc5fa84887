"""Network facts shared by the service and the HTTP clients (standard library only)."""

from __future__ import annotations

import ipaddress

LOOPBACK = "127.0.0.1"
"""Where services listen and clusters start unless told otherwise: this machine only."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an IP address, without brackets) is only reachable from
    this machine: ``localhost`` or a loopback address (``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


__all__ = ["LOOPBACK", "is_loopback"]
