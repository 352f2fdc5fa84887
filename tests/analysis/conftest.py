from __future__ import annotations

from tests.traces.conftest import torch_trace

__all__ = ["torch_trace"]
