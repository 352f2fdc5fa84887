from __future__ import annotations

from pathlib import Path

import pytest

from tests.traces.builders import record_torch_trace


@pytest.fixture(scope="session")
def torch_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real torch.profiler CPU trace with nested markers (made once per test session)."""
    pytest.importorskip("torch")
    return record_torch_trace(tmp_path_factory.mktemp("torch") / "model.json")
