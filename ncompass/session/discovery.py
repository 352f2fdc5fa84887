"""The discovery run: ``ncompass run`` with a stack sampler beside the profiler.

``python -m ncompass.session.discovery [--config SPEC] [--full-trace] -o DIR --trace-name NAME
[--force-overwrite] SCRIPT [ARGS]`` runs SCRIPT exactly as ``ncompass run`` does (same
rewrites, same torch profiler, same sidecar), and writes the sampled Python stacks beside the
trace (``NAME.stacks.json``), so one run shows the whole call tree, down to the line, whatever
markers exist.

Every process the run follows (a ``multiprocessing`` child, a DataLoader worker, a ``torchrun``
rank) samples its own stacks once it starts its work (:mod:`ncompass.session.child_sampling`);
``NAME.stacks.json`` holds them all, each sample with its pid.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ncompass.errors import NcompassError
from ncompass.session import child_sampling
from ncompass.session.sampler import DEFAULT_INTERVAL_S, StackSampler, stacks_path
from ncompass.session.tether import end_with_parent

USER_ERROR = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ncompass.session.discovery")
    parser.add_argument("--config", action="append", default=[])
    parser.add_argument("--output-dir", "-o", required=True)
    parser.add_argument("--trace-name", required=True)
    parser.add_argument("--force-overwrite", action="store_true")
    parser.add_argument("--full-trace", action="store_true")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S)
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the discovery run; returns the script's exit code (2: ncompass could not run it)."""
    from ncompass.capture.follow.tree import processes_folder
    from ncompass.capture.runner import RunOptions, run

    options = _parser().parse_args(argv)
    # where each followed process writes its samples: beside its own trace
    folder = processes_folder(Path(options.output_dir) / f"{options.trace_name}.json")
    sampler = StackSampler(interval_s=options.interval)
    sampler.start()
    try:
        result = run(
            RunOptions(
                specs=list(options.config),
                script=options.script,
                args=list(options.args),
                output_dir=options.output_dir,
                trace_name=options.trace_name,
                force_overwrite=options.force_overwrite,
                full_trace=options.full_trace,
                process_hooks={
                    child_sampling.HOOK: child_sampling.hook_options(folder, options.interval)
                },
            )
        )
    except NcompassError as error:
        sampler.stop()
        print(f"ncompass: error: {error}", file=sys.stderr)
        return USER_ERROR
    samples = child_sampling.merge_processes(
        sampler.stop(), os.getpid(), child_sampling.read_processes(folder)
    )
    if result.trace_path is not None:
        samples.write(stacks_path(Path(result.trace_path)))
    return result.exit_code


if __name__ == "__main__":
    end_with_parent()  # the session's run ends with the session
    sys.exit(main())
