from __future__ import annotations

import gzip
import json
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from ncompass.errors import TraceError
from ncompass.traces._inflate import (
    COMPRESSED_READ_SIZE,
    INFLATED_CHUNK_SIZE,
    gunzip,
    inflater,
)
from ncompass.traces.reader import TraceReader
from ncompass.traces.writer import TraceWriter
from tests.traces.builders import shared_trace

LIBRARIES = ["zlib-ng", "zlib fallback"]


def hide_zlib_ng(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``zlib_ng`` and its modules unimportable, as when the package is not installed."""
    for name in ("zlib_ng", "zlib_ng.zlib_ng", "zlib_ng.gzip_ng"):
        monkeypatch.setitem(sys.modules, name, None)
    assert inflater() is zlib


@pytest.fixture(params=LIBRARIES)
def library(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test with zlib-ng, then again as if it were not installed."""
    if request.param == "zlib fallback":
        hide_zlib_ng(monkeypatch)
    else:
        assert inflater().__name__ == "zlib_ng.zlib_ng"
    yield request.param


def amd_events() -> list[dict]:
    return json.loads(gzip.decompress(shared_trace("amd_trace").read_bytes()))["traceEvents"]


def write_gzip(path: Path, events: list[dict]) -> bytes:
    with TraceWriter(path, metadata={"schemaVersion": 1}) as writer:
        writer.write_many(events)
    return path.read_bytes()


def read_events(path: Path) -> list[dict]:
    return list(TraceReader(path, progress=False))


def error_of(path: Path) -> str:
    with pytest.raises(TraceError) as caught:
        read_events(path)
    return str(caught.value)


def errors_with_each_library(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    assert inflater().__name__ == "zlib_ng.zlib_ng"
    found = [error_of(path)]
    with monkeypatch.context() as hidden:
        hide_zlib_ng(hidden)
        found.append(error_of(path))
    return found


def test_real_trace_reads_like_the_json_module(library: str) -> None:
    trace = shared_trace("ns_resolution_trace")
    assert read_events(trace) == json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]


def test_concatenated_members_read_as_one_trace(library: str, tmp_path: Path) -> None:
    text = gzip.decompress(shared_trace("amd_trace").read_bytes())
    middle = len(text) // 2
    path = tmp_path / "two.json.gz"
    path.write_bytes(gzip.compress(text[:middle], 1) + gzip.compress(text[middle:], 9))
    assert read_events(path) == json.loads(text)["traceEvents"]


def test_chunks_stay_small_and_progress_counts_every_compressed_byte(
    library: str, tmp_path: Path
) -> None:
    text = b" " * (100 * INFLATED_CHUNK_SIZE + 123)  # ~1000x: one read would inflate to 64 MB
    path = tmp_path / "spaces.gz"
    path.write_bytes(gzip.compress(text, 9) * 2)
    with open(path, "rb") as handle:
        chunks = list(gunzip(handle, path))
    assert max(len(chunk) for chunk, _ in chunks) <= INFLATED_CHUNK_SIZE
    assert sum(len(chunk) for chunk, _ in chunks) == 2 * len(text)
    assert sum(read for _, read in chunks) == path.stat().st_size


def test_corrupt_gzip_names_the_compressed_byte_whichever_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytearray(shared_trace("ns_resolution_trace").read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    path = tmp_path / "corrupt.json.gz"
    path.write_bytes(data)
    fast, fallback = errors_with_each_library(path, monkeypatch)
    assert fast == fallback
    end_of_that_read = (len(data) // 2 // COMPRESSED_READ_SIZE + 1) * COMPRESSED_READ_SIZE
    assert fast.startswith(
        f"{path}: the gzip data is corrupt near compressed byte {end_of_that_read} "
        "(Error -3 while decompressing data: "
    )


def test_truncated_gzip_names_the_compressed_byte_whichever_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = shared_trace("ns_resolution_trace").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) - 100])
    fast, fallback = errors_with_each_library(path, monkeypatch)
    assert fast == fallback
    assert fast == (
        f"{path}: the gzip data is truncated at compressed byte {len(data) - 100}; "
        "check that the file was copied completely"
    )


def test_written_gzip_opens_with_the_gzip_module(library: str, tmp_path: Path) -> None:
    events = amd_events()
    path = tmp_path / "out.json.gz"
    write_gzip(path, events)
    with gzip.open(path) as handle:
        assert json.load(handle) == {"schemaVersion": 1, "traceEvents": events}
    assert read_events(path) == events


def test_writer_deflates_with_zlib_ng_when_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = amd_events()
    fast = write_gzip(tmp_path / "fast.json.gz", events)
    with monkeypatch.context() as hidden:
        hide_zlib_ng(hidden)
        standard = write_gzip(tmp_path / "standard.json.gz", events)
    assert gzip.decompress(fast) == gzip.decompress(standard)
    assert fast != standard  # zlib-ng finds other matches at the same level
    assert len(fast) <= len(standard) * 1.05
