"""A stand-in for Nsight Systems' ``nsys`` command line, for machines without it.

The tests copy this file to ``<bin>/nsys`` (with a shebang for the running Python) and put
``<bin>`` first on PATH. It understands what ncompass runs:

- ``nsys profile [OPTIONS] COMMAND...``: runs COMMAND with an NVTX tool "attached" (it sets
  ``NVTX_INJECTION64_PATH`` to a library that does not exist, which NVTX ignores), then writes
  the report ``<--output>.nsys-rep``: a copy of the SQLite file named by
  ``$FAKE_NSYS_EXPORT`` (a real report is a different format; only this fake's ``export``
  reads it). Exits with COMMAND's exit code, as nsys does.
- With ``--capture-range=cudaProfilerApi`` it records only between the CUDA profiler API's
  start and stop. There is no GPU here, so a program stands in for CUDA by appending ``start``
  and ``stop`` lines to the file named by ``$FAKE_NSYS_CUDA_PROFILER`` (set for COMMAND; see
  ``tests/nsys/fake_cuda.py``). ``--capture-range-end=stop`` writes ``<--output>.nsys-rep``
  for the first range only, ``repeat`` one report per range, ``<--output>.N.nsys-rep``, as
  nsys does; no range, no report. ``$FAKE_NSYS_EXPORT`` may list several SQLite files
  (``os.pathsep``-separated): report N is a copy of the N-th (the last one when fewer).
- ``nsys export --type=sqlite --output=FILE [--force-overwrite=true] REPORT``: copies the
  "report" to FILE.
- ``nsys --version``.

Every invocation is appended to ``<bin>/nsys.log`` as one JSON line: ``{"argv": [...]}``.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_VALUED = {"-t", "--trace", "-o", "--output", "-f", "--force-overwrite", "--type", "-s", "-c"}


def _options(args):
    """Split ``[OPTIONS] REST`` into a dict of options and the rest."""
    options, index = {}, 0
    while index < len(args) and args[index].startswith("-"):
        name, _, value = args[index].partition("=")
        if not value and name in _VALUED:
            index += 1
            value = args[index]
        options[name] = value
        index += 1
    return options, args[index:]


def _ranges(calls):
    """How many start..stop ranges the program's CUDA profiler calls made."""
    lines = calls.read_text().split() if calls.exists() else []
    ranges, started = 0, False
    for line in lines:
        if line == "start" and not started:
            started = True
        elif line == "stop" and started:
            started, ranges = False, ranges + 1
    return ranges + (1 if started else 0)  # a range still open at exit ends there


def _reports(options, output, ranges):
    """(number, path) of each report nsys writes."""
    if options.get("--capture-range", options.get("-c")) != "cudaProfilerApi":
        return [(1, f"{output}.nsys-rep")]
    end = options.get("--capture-range-end", "stop")
    if end == "stop":
        return [(1, f"{output}.nsys-rep")] if ranges else []
    if end == "repeat":
        return [(n, f"{output}.{n}.nsys-rep") for n in range(1, ranges + 1)]
    raise SystemExit(f"fake nsys: unsupported --capture-range-end={end}")


def main(argv):
    with open(HERE / "nsys.log", "a") as log:
        log.write(json.dumps({"argv": argv}) + "\n")
    if argv[:1] == ["--version"]:
        print("NVIDIA Nsight Systems version 2024.6.2.225-246235244400v0 (fake)")
        return 0
    if argv[:1] == ["profile"]:
        options, command = _options(argv[1:])
        output = options.get("--output") or options.get("-o") or "report1"
        calls = HERE / "cuda-profiler.log"
        calls.unlink(missing_ok=True)
        env = {
            **os.environ,
            "NVTX_INJECTION64_PATH": str(HERE / "libNotThere.so"),
            "FAKE_NSYS_CUDA_PROFILER": str(calls),
        }
        code = subprocess.run(command, env=env, check=False).returncode
        exports = os.environ["FAKE_NSYS_EXPORT"].split(os.pathsep)
        for number, report in _reports(options, output, _ranges(calls)):
            shutil.copyfile(exports[min(number, len(exports)) - 1], report)
            print(f"Generated:\n    {report}", file=sys.stderr)
        return code
    if argv[:1] == ["export"]:
        options, rest = _options(argv[1:])
        if options.get("--type") != "sqlite" or len(rest) != 1:
            print(f"fake nsys: unsupported export {argv}", file=sys.stderr)
            return 1
        if not Path(rest[0]).is_file():
            print(f"Report file {rest[0]} does not exist.", file=sys.stderr)
            return 1
        shutil.copyfile(rest[0], options["--output"])
        return 0
    print(f"fake nsys: unsupported command {argv}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
