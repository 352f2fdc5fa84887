"""``--jobs``: several real rank traces read in worker processes give what one by one gives."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from ncompass.errors import TraceError
from ncompass.traces.parallel import map_traces

HTA = Path(__file__).parents[1] / "data" / "traces" / "hta"
# Four traces of four different ranks (0, 1, 34, and the AMD one placed by position).
RANKS = [
    HTA / "trace_filter" / "sampled_rank-0.json.gz",
    HTA / "trace_filter" / "sampled_rank-1.json.gz",
    HTA / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    HTA / "amd_trace" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(ncompass_cli, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def corrupt_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rank trace cut short in the middle of its gzip stream."""
    path = tmp_path_factory.mktemp("corrupt") / "rank-1.json.gz"
    path.write_bytes(RANKS[1].read_bytes()[:5000])
    return path


def test_breakdown_with_two_jobs_prints_the_same_json_as_one() -> None:
    one = run("breakdown", *RANKS, "--json", "--jobs", "1")
    two = run("breakdown", *RANKS, "--json", "--jobs", "2")
    assert one[0] == 0, one[2]
    assert two == one
    assert '"34"' in one[1]  # every rank was read


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_merge_with_two_jobs_writes_the_same_bytes_as_one(suffix: str, tmp_path: Path) -> None:
    outputs = [tmp_path / f"jobs{jobs}{suffix}" for jobs in (1, 2)]
    for jobs, output in zip((1, 2), outputs, strict=True):
        code, _, err = run("merge", *RANKS, "-o", output, "--jobs", str(jobs))
        assert code == 0, err
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    # no fragments left behind
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(path.name for path in outputs)


@pytest.mark.parametrize("command", ["breakdown", "merge"])
def test_a_corrupt_trace_among_them_fails_in_one_line_as_with_one_job(
    command: str, corrupt_trace: Path, tmp_path: Path
) -> None:
    inputs = [RANKS[0], corrupt_trace, RANKS[2]]
    results = []
    for jobs in ("1", "2"):
        output = ["-o", str(tmp_path / f"merged{jobs}.json")] if command == "merge" else []
        results.append(run(command, *inputs, *output, "--jobs", jobs))
    assert results[0] == results[1]
    code, _, err = results[1]
    assert code == 2
    assert err.count("\n") == 1 and str(corrupt_trace) in err and "truncated" in err
    assert list(tmp_path.iterdir()) == []  # nothing half-written, no fragments


def test_two_files_of_one_rank_are_refused_as_with_one_job() -> None:
    same_rank = [
        RANKS[0],
        HTA / "ns_resolution_trace" / "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    ]
    one = run("breakdown", *same_rank, "--jobs", "1")
    two = run("breakdown", *same_rank, "--jobs", "2")
    assert two == one
    assert one[0] == 2 and "both rank 0" in one[2]


def fail_first_and_hang_on_the_rest(path: str | Path, position: int, progress: bool | None) -> int:
    """A reader (run in workers) whose first file is corrupt and whose others take minutes."""
    if position == 0:
        raise TraceError(f"{path}: corrupt")
    time.sleep(120)
    return position


def test_an_error_ends_the_files_still_in_flight_at_once() -> None:
    before = set(multiprocessing.active_children())
    started = time.perf_counter()
    with pytest.raises(TraceError, match=r"first\.json: corrupt"):
        list(map_traces(fail_first_and_hang_on_the_rest, ["first.json", "slow.json"], jobs=2))
    assert time.perf_counter() - started < 30
    # the workers are gone: ended, not left sleeping (a loaded machine may take a moment to
    # reap them, far less than the two minutes a worker left running would take)
    deadline = time.perf_counter() + 15
    while not set(multiprocessing.active_children()) <= before and time.perf_counter() < deadline:
        time.sleep(0.1)
    assert set(multiprocessing.active_children()) <= before
