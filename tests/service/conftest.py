"""The analysis service on a loopback port, and traces to send it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.traces.conftest import torch_trace

if TYPE_CHECKING:
    from ncompass.service import BackgroundService

SERVER_EXTRA = "the service needs the server extra: pip install -e '.[server]'"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[BackgroundService]:
    """A real uvicorn server with default limits, storing under tmp_path."""
    pytest.importorskip("fastapi", reason=SERVER_EXTRA)
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "store") as running:
        yield running


__all__ = ["SERVER_EXTRA", "service", "torch_trace"]
