"""Monitoring backends: one protocol (``base``), one module per backend, and the selection."""

from ncompass.gpu._backends.base import (
    BackendUnavailable,
    DeviceInfo,
    DeviceNotFound,
    MonitorBackend,
)
from ncompass.gpu._backends.selection import BACKEND_NAMES, OpenedBackend, open_backend

__all__ = [
    "BACKEND_NAMES",
    "BackendUnavailable",
    "DeviceInfo",
    "DeviceNotFound",
    "MonitorBackend",
    "OpenedBackend",
    "open_backend",
]
