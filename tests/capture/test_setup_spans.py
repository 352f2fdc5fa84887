"""Setup spans measured while a program runs (``capture/setup_spans.py``): real imports of
modules written for the test, real ``torch.nn.Module`` constructions."""

from __future__ import annotations

import importlib
import importlib._bootstrap
import sys
import threading
from pathlib import Path

import pytest
import torch
from torch import nn

from ncompass.capture.setup_spans import recorded_setup_spans, recording_setup_spans


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on ``sys.path`` whose modules are forgotten after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_an_import_and_the_imports_it_makes_are_one_span(modules: Path) -> None:
    (modules / "setup_outer_mod.py").write_text("import setup_inner_mod\nimport json\n")
    (modules / "setup_inner_mod.py").write_text("VALUE = 1\n")
    with recording_setup_spans():
        importlib.import_module("setup_outer_mod")
        import setup_outer_mod  # noqa: F401  (already imported: no span)
    spans = recorded_setup_spans()
    assert [(span["kind"], span["label"]) for span in spans] == [("import", "setup_outer_mod")]
    assert spans[0]["end_unix_us"] >= spans[0]["start_unix_us"]
    assert spans[0]["tid"] == threading.get_native_id()


def test_a_nested_construction_counts_once_and_a_class_defined_later_is_measured() -> None:
    with recording_setup_spans():

        class Late(nn.Module):  # defined while recording: wrapped through __init_subclass__
            def __init__(self) -> None:
                super().__init__()
                self.layers = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

        class Holder(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.late = Late()

        Holder()
        Late()
        nn.Linear(2, 2)
    labels = [(span["kind"], span["label"]) for span in recorded_setup_spans()]
    assert labels == [
        ("construction", "Holder"),
        ("construction", "Late"),
        ("construction", "Linear"),
    ]


def test_everything_is_undone_when_the_program_returns() -> None:
    find_and_load = importlib._bootstrap._find_and_load  # type: ignore[attr-defined]
    linear_init = nn.Linear.__init__
    with recording_setup_spans():
        assert nn.Linear.__init__ is not linear_init
        assert "__init_subclass__" in nn.Module.__dict__
    assert nn.Linear.__init__ is linear_init
    assert "__init_subclass__" not in nn.Module.__dict__
    assert importlib._bootstrap._find_and_load is find_and_load  # type: ignore[attr-defined]
    nn.Linear(2, 2)
    assert len(recorded_setup_spans()) == 0


def test_each_thread_has_its_own_outermost_span() -> None:
    with recording_setup_spans():

        def build() -> None:
            nn.Linear(3, 3)

        worker = threading.Thread(target=build)
        worker.start()
        worker.join()
        nn.Linear(3, 3)
    spans = recorded_setup_spans()
    assert len(spans) == 2 and len({span["tid"] for span in spans}) == 2
    assert torch.nn.Linear(1, 1).weight.shape == (1, 1)


def test_an_import_made_while_constructing_is_part_of_the_construction(modules: Path) -> None:
    (modules / "setup_lazy_mod.py").write_text("import json\nWIDTH = 3\n")
    with recording_setup_spans():

        class Lazy(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                import setup_lazy_mod

                self.linear = nn.Linear(setup_lazy_mod.WIDTH, 1)

        Lazy()
    labels = [(span["kind"], span["label"]) for span in recorded_setup_spans()]
    assert labels == [("construction", "Lazy")]


def test_a_construction_inside_fullgraph_compiled_code_still_compiles() -> None:
    """``self.layers[:n]`` inside a compiled forward builds a ``ModuleList``: torch.compile traces
    its (wrapped) constructor, which must hold nothing it cannot trace (Llama's forward, compiled
    with ``fullgraph=True`` as vLLM compiles models, failed on it)."""

    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers[:2]:
                x = layer(x)
            return x

    with recording_setup_spans():
        model = Stack()
        compiled = torch.compile(model, fullgraph=True, backend="eager")
        out = compiled(torch.ones(2, 4))
    assert torch.allclose(out, model(torch.ones(2, 4)))
    constructed = [s["label"] for s in recorded_setup_spans() if s["kind"] == "construction"]
    # the ModuleList built while compiled code ran is no span (torch.compile traced it)
    assert constructed == ["Stack", "OptimizedModule"]
