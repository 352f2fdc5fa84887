"""The service's store: ids, safe names, the byte budget and retention."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from ncompass.service.limits import ServiceLimits
from ncompass.service.storage import (
    NotATrace,
    StorageFull,
    TraceStore,
    is_id,
    new_id,
    safe_file_name,
)

TRACE = b'{"traceEvents": []}'


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def store_in(tmp_path: Path, clock: Clock, **limits: float) -> TraceStore:
    options = {"max_upload_bytes": 100, "max_storage_bytes": 250, "retention_s": 60.0}
    return TraceStore(tmp_path / "store", ServiceLimits(**{**options, **limits}), clock=clock)


def put(store: TraceStore, size: int = 100, name: str = "t.json") -> str:
    sink = store.open_upload(name)
    sink.write(b"{" + b" " * (size - 2) + b"}")
    return sink.commit().item_id


def test_ids_are_random_hex_and_nothing_else_passes_for_one() -> None:
    first, second = new_id(), new_id()
    assert first != second and is_id(first) and is_id(second)
    for text in ("", "../" + first[3:], first.upper(), first + "0", "/etc/passwd"):
        assert not is_id(text)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("run.json.gz", "run.json.gz"),
        ("../../etc/passwd", "passwd"),
        ("C:\\traces\\rank 0.json", "rank_0.json"),
        (".hidden.json", "hidden.json"),
        ("..", "trace.json"),
        (None, "trace.json"),
        ("a" * 300 + ".json", "a" * 120),
    ],
)
def test_client_names_only_keep_a_harmless_base_name(given: str | None, kept: str) -> None:
    assert safe_file_name(given, "trace.json") == kept


def test_uploads_must_look_like_traces(tmp_path: Path) -> None:
    store = store_in(tmp_path, Clock())
    for body in (b"", b"\x00\x01binary", b"PK\x03\x04"):
        sink = store.open_upload("x.json")
        sink.write(body)
        with pytest.raises(NotATrace):
            sink.commit()
    assert not list((tmp_path / "store" / "uploads").iterdir())
    for body in (TRACE, b"\n  [", gzip.compress(TRACE), b"\xef\xbb\xbf{"):
        sink = store.open_upload("x.json")
        sink.write(body)
        assert sink.commit().gzip == body.startswith(b"\x1f\x8b")


def test_a_full_budget_deletes_the_oldest_unused_upload_first(tmp_path: Path) -> None:
    clock = Clock()
    store = store_in(tmp_path, clock)
    first = put(store)
    clock.now += 1
    second = put(store)
    clock.now += 1
    third = put(store)  # 300 bytes would not fit in 250: the oldest goes
    assert store.get(first, "upload") is None and not (tmp_path / "store/uploads" / first).exists()
    assert store.get(second, "upload") is not None and store.get(third, "upload") is not None
    assert store.used_bytes == 200


def test_uploads_in_use_are_never_deleted(tmp_path: Path) -> None:
    clock = Clock()
    store = store_in(tmp_path, clock)
    first, second = put(store), put(store)
    assert store.pin(first) and store.pin(second)
    sink = store.open_upload("third.json")
    with pytest.raises(StorageFull, match="--max-storage-mb"):
        sink.write(b"{" + b" " * 98 + b"}")
    sink.discard()
    store.unpin(second)
    put(store)
    assert store.get(first, "upload") is not None and store.get(second, "upload") is None
    assert not store.delete(first)  # still pinned


def test_uploads_still_arriving_count_against_the_budget(tmp_path: Path) -> None:
    store = store_in(tmp_path, Clock(), max_storage_bytes=150)
    arriving = store.open_upload("a.json")
    arriving.write(b"{" + b" " * 80)
    other = store.open_upload("b.json")
    with pytest.raises(StorageFull):
        other.write(b"{" + b" " * 80)
    other.discard()
    arriving.write(b"}")
    assert arriving.commit().size == 82


def test_items_expire_after_the_retention_time(tmp_path: Path) -> None:
    clock = Clock()
    store = store_in(tmp_path, clock)
    upload_id = put(store)
    result = store.reserve_result("f" * 32, "result.json")
    result.write_bytes(b"{}")
    store.commit_result("f" * 32, result)
    clock.now += 59
    store.sweep()
    assert store.get(upload_id, "upload") and store.get("f" * 32, "result")
    clock.now += 2
    assert store.get(upload_id, "upload") is None and store.get("f" * 32, "result") is None
    assert not list((tmp_path / "store" / "uploads").iterdir())
    assert not list((tmp_path / "store" / "results").iterdir())


def test_a_store_starts_empty_even_in_a_used_folder(tmp_path: Path) -> None:
    store = store_in(tmp_path, Clock())
    put(store)
    again = store_in(tmp_path, Clock())
    assert again.used_bytes == 0 and not list((tmp_path / "store" / "uploads").iterdir())
