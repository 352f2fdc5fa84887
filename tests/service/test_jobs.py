"""The job board: job records are bounded, and their results go with them."""

from __future__ import annotations

import time
from pathlib import Path

from ncompass.analysis.providers import BuiltinProvider
from ncompass.service.jobs import Job, JobBoard
from ncompass.service.limits import ServiceLimits
from ncompass.service.storage import TraceStore
from tests.traces.builders import TraceBuilder


def finish(board: JobBoard, job: Job) -> Job:
    deadline = time.monotonic() + 20
    while (current := board.get(job.job_id)) is not None and current.status in (
        "queued",
        "running",
    ):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert current is not None
    return current


def test_old_finished_jobs_are_forgotten_with_their_results(tmp_path: Path) -> None:
    limits = ServiceLimits(max_kept_jobs=2)
    store = TraceStore(tmp_path / "store", limits)
    board = JobBoard(BuiltinProvider(), store, limits)
    try:
        trace = TraceBuilder().marker("step", 0, 10).write(tmp_path / "t.json")
        sink = store.open_upload("t.json")
        sink.write(trace.read_bytes())
        upload_id = sink.commit().item_id
        jobs = []
        for _ in range(4):
            jobs.append(finish(board, board.submit("summarize", upload_id, {"top": 3})))
        assert all(job.status == "done" for job in jobs)
        # Each submission forgot the oldest finished jobs: 2 records at most.
        assert board.get(jobs[0].job_id) is None and board.get(jobs[1].job_id) is None
        assert store.get(jobs[0].job_id, "result") is None
        assert board.get(jobs[3].job_id) is not None
        assert store.get(jobs[3].job_id, "result") is not None
        assert sum(board.counts().values()) == 2
    finally:
        board.close()
