"""How many worker processes ``map_traces`` starts: per core, but none for small inputs."""

from __future__ import annotations

from pathlib import Path

from ncompass.traces.parallel import MIN_JSON_BYTES_FOR_WORKERS, default_jobs, worker_count

HTA = Path(__file__).parents[1] / "data" / "traces" / "hta"
RANKS = [HTA / "trace_filter" / f"sampled_rank-{rank}.json.gz" for rank in (0, 1)]


def sized(path: Path, size: int) -> Path:
    """A file of ``size`` bytes that takes no disk space (only its size is looked at)."""
    with path.open("wb") as file:
        file.truncate(size)
    return path


def test_small_traces_are_read_in_this_process_by_default() -> None:
    assert worker_count(None, RANKS) == 1


def test_small_traces_still_get_the_workers_asked_for() -> None:
    assert worker_count(2, RANKS) == 2
    assert worker_count(8, RANKS) == 2  # never more workers than files


def test_large_traces_get_one_worker_per_core(tmp_path: Path) -> None:
    half = MIN_JSON_BYTES_FOR_WORKERS // 2 + 1
    plain = [sized(tmp_path / f"rank{rank}.json", half) for rank in range(2)]
    assert worker_count(None, plain) == min(default_jobs(), 2)
    # gzip'd traces count for the JSON they expand to
    packed = [sized(tmp_path / f"rank{rank}.json.gz", half // 8) for rank in range(2)]
    assert worker_count(None, packed) == min(default_jobs(), 2)
    assert worker_count(None, [sized(tmp_path / "small.json", half // 8)] * 2) == 1


def test_a_count_of_files_alone_gives_one_worker_per_core() -> None:
    assert worker_count(None, 3) == min(default_jobs(), 3)
    assert worker_count(None, 1) == 1
