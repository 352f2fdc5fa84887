"""Every GPU path of ncompass, run for real on this machine's GPU: one row per check.

    make gpu-check                              # sets up a CUDA build of torch in .venv-gpu first
    python benchmarks/gpu_check.py [--only NAME]... [--json OUT] [--exercise-on-cpu]

Each check (see ``gpu_checks.py``) runs in a process of its own with a time limit, so a CUDA
crash or a hang costs one row, not the run. A row says whether the check **holds**, **falls
short** (with what was measured and what was expected), or was **skipped** (and why: no CUDA
device, no ``nsys``, no NVML). The same rows go to a JSON file (default
``traces/gpu-check/gpu-check.json``). Exit code 1 when a check falls short, else 0: on a machine
without CUDA every check is skipped, with the reason, and the exit code is 0.

``--exercise-on-cpu`` runs each check's code path on the CPU instead of skipping it (what can run
there: the real ``ncompass run``, the analysis, the monitor's CPU backend, Triton's interpreter);
its rows say **exercised**, never **holds**, since nothing GPU-specific was judged. The tests use
it to keep the checks working on machines without a GPU.

The limits add up to 8 minutes; on one GPU the whole run takes less.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))

from gpu_checks import CHECKS, Outcome, cuda_unavailable, run_check  # noqa: E402

DEFAULT_JSON = REPO / "traces" / "gpu-check" / "gpu-check.json"
STATUS_WORDS = {"holds", "falls short", "skipped", "exercised"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(CHECKS), help="repeatable")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where the rows go")
    parser.add_argument("--exercise-on-cpu", action="store_true")
    parser.add_argument(
        "--limit-scale",
        type=float,
        help="multiply every check's time limit (default 1 on a GPU, 6 when exercising on CPU)",
    )
    parser.add_argument("--run-one", help=argparse.SUPPRESS)  # a check's own process
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.run_one:
        return _run_one(arguments.run_one, arguments.device, arguments.result)
    names = arguments.only or list(CHECKS)
    started = time.perf_counter()
    missing = cuda_unavailable()
    device = "cuda" if missing is None else "cpu"
    print(_environment_line(missing, arguments.exercise_on_cpu), flush=True)
    scale = arguments.limit_scale or (1.0 if missing is None else 6.0)
    rows = []
    for name in names:
        rows.append(_row(name, device, missing, arguments.exercise_on_cpu, scale))
        _print_row(rows[-1])
    total = time.perf_counter() - started
    document = {
        "when_unix_s": time.time(),
        "device": device,
        "cuda_unavailable": missing,
        "exercise_on_cpu": arguments.exercise_on_cpu,
        "total_s": round(total, 1),
        "checks": rows,
    }
    arguments.json.parent.mkdir(parents=True, exist_ok=True)
    arguments.json.write_text(json.dumps(document, indent=2) + "\n")
    counts = {word: sum(row["status"] == word for row in rows) for word in sorted(STATUS_WORDS)}
    print(
        f"\n{len(rows)} checks in {total:.0f} s: "
        + ", ".join(f"{count} {word}" for word, count in counts.items() if count)
        + f"; rows written to {arguments.json}"
    )
    return 1 if counts["falls short"] else 0


def _environment_line(missing: str | None, exercise: bool) -> str:
    if missing is None:
        import torch

        name = torch.cuda.get_device_name(0)
        return f"GPU: {name}, {torch.cuda.device_count()} device(s), torch {torch.__version__}"
    if exercise:
        return (
            f"no CUDA ({missing}): every check's path runs on the CPU instead (--exercise-on-cpu)"
        )
    return f"no CUDA ({missing}): every check is skipped"


def _row(
    name: str, device: str, missing: str | None, exercise: bool, scale: float
) -> dict[str, Any]:
    limit = round(CHECKS[name].limit_s * scale)
    if missing is not None and not exercise:
        outcome = Outcome("skipped", "", f"needs CUDA: {missing}")
        return {"name": name, "limit_s": limit, "seconds": 0.0, **outcome.to_dict()}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"gpu-check-{name}-") as folder:
        result = Path(folder) / "result.json"
        command = [sys.executable, str(Path(__file__).resolve()), "--run-one", name]
        command += ["--device", device, "--result", str(result)]
        outcome = _run_limited(command, limit, result)
    seconds = round(time.perf_counter() - started, 1)
    if device == "cpu" and outcome.status == "holds":
        outcome = Outcome("exercised", outcome.figure, outcome.detail)
    return {"name": name, "limit_s": limit, "seconds": seconds, **outcome.to_dict()}


def _run_limited(command: list[str], limit: int, result: Path) -> Outcome:
    """Run one check's process (and all it starts) for at most ``limit`` seconds."""
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": _pythonpath()},
        start_new_session=True,  # its own process group: a timeout ends the programs it ran too
    )
    try:
        stdout, stderr = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return Outcome("falls short", "", f"did not finish in its {limit} s")
    done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    return _read_outcome(result, done)


def _read_outcome(result: Path, done: subprocess.CompletedProcess[str]) -> Outcome:
    try:
        return Outcome(**json.loads(result.read_text()))
    except (OSError, ValueError, TypeError):
        lines = (done.stderr or done.stdout).strip().splitlines()
        last = lines[-1] if lines else "no output"
        return Outcome("falls short", "", f"crashed (exit {done.returncode}): {last[:300]}")


def _run_one(name: str, device: str, result: Path | None) -> int:
    outcome = run_check(name, device)
    if result is not None:
        result.write_text(json.dumps(outcome.to_dict()))
    return 0


def _pythonpath() -> str:
    current = os.environ.get("PYTHONPATH")
    return str(REPO) if not current else f"{REPO}{os.pathsep}{current}"


def _print_row(row: dict[str, Any]) -> None:
    figure = f"  {row['figure']}" if row["figure"] else ""
    detail = f"  ({row['detail']})" if row["detail"] else ""
    print(
        f"{row['name']:<18}{row['status']:<12}{row['seconds']:>6.1f} s{figure}{detail}", flush=True
    )


if __name__ == "__main__":
    sys.exit(main())
