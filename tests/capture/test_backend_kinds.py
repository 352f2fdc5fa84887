"""The backend kinds: every ``--profiler`` value has one, and the capabilities hang together."""

from __future__ import annotations

import pytest

from ncompass.capture.backends.base import make_profiler
from ncompass.capture.backends.kinds import KINDS, PROFILERS, kind_of
from ncompass.errors import CaptureError


def test_every_profiler_value_has_a_kind_whose_backend_agrees(tmp_path):
    for name in PROFILERS:
        kind = kind_of(name)
        if kind.fresh_process:
            continue  # built in the re-executed child, with the recorder loaded
        backend = make_profiler(name, tmp_path / "t.json")
        assert (backend.name, backend.marker_context) == (kind.name, kind.marker_context)


def test_nsys_is_a_kind_of_its_own_chosen_by_the_flag():
    assert kind_of("nvtx", nsys=True) is KINDS["nsys"]
    assert KINDS["nsys"].fresh_process and KINDS["nsys"].cuts_window_traces


def test_windows_end_as_traces_only_where_some_part_writes_them():
    written = {name for name, kind in KINDS.items() if kind.writes_window_traces}
    assert written == {"torch", "nvtx-trace", "nsys"}
    assert not KINDS["none"].records_windows


def test_an_unknown_profiler_names_the_choices():
    with pytest.raises(CaptureError, match="choose one of torch, nvtx, nvtx-trace, none"):
        kind_of("perf")


def test_every_backend_answers_the_whole_contract_so_nobody_probes(tmp_path):
    """What a backend does not do is the base class's no-op, called like any other method."""
    from ncompass.capture.backends.backend import ProfilerBackend
    from ncompass.capture.recording_windows import NvtxWindowRange

    backends = [make_profiler(name, tmp_path / f"{name}.json") for name in PROFILERS]
    backends.append(NvtxWindowRange("ncompass.recording-window#1", 1))
    for backend in backends:
        assert isinstance(backend, ProfilerBackend)
        assert backend.kind is kind_of(backend.name)
        assert backend.compiled_kernels == []
    for backend in (make_profiler("none", tmp_path / "n.json"), make_profiler("nvtx", tmp_path)):
        backend.prepare()
        backend.start()
        backend.add_metadata("key", {"value": 1})
        with backend.room_for_code_profiler(before_stepping_aside=lambda: None):
            pass
        backend.stop_and_discard()  # the base's: stop(), writing nothing
    assert not list(tmp_path.iterdir())


def test_the_windows_profilers_and_the_default_come_from_the_kinds():
    from ncompass.capture.backends.kinds import DEFAULT_PROFILER, WINDOW_PROFILERS

    assert WINDOW_PROFILERS == ("torch", "nvtx", "nvtx-trace")
    assert DEFAULT_PROFILER in PROFILERS and KINDS[DEFAULT_PROFILER].records_ops
