"""The environment variables that attach the NVTX recorder to a child process."""

from __future__ import annotations

import os
from pathlib import Path

from ncompass import environment_variables
from ncompass.capture.nvtx_recorder.build import build_recorder

INJECTION_VARIABLE = environment_variables.NVTX_INJECTION64_PATH
"""Read by every NVTX copy in the process when it first initialises (as Nsight Systems uses)."""

OUTPUT_VARIABLE = environment_variables.NCOMPASS_NVTX_OUTPUT
"""The recorder's output file; ``%p`` in it is replaced by the process id."""

MAX_EVENTS_VARIABLE = environment_variables.NCOMPASS_NVTX_MAX_EVENTS
"""Events kept per process before later ones are counted as dropped (default 8,000,000)."""

OUTPUT_PATTERN = "nvtx-%p.jsonl"
"""File name of each process's recording inside the output directory."""


def environment(
    output_dir: str | os.PathLike[str],
    *,
    library: str | os.PathLike[str] | None = None,
    max_events: int | None = None,
) -> dict[str, str]:
    """Returns the variables to add to a child's environment so its NVTX ranges are recorded.

    Every process of the run that uses NVTX (the child, its forks, its own children) writes
    ``<output_dir>/nvtx-<pid>.jsonl`` when it exits; read them with
    :func:`ncompass.capture.nvtx_recorder.read_recordings`.

    Args:
        output_dir: Directory for the recordings; created if missing.
        library: A built recorder; :func:`build_recorder` is called when omitted.
        max_events: Per-process event budget (about 48 bytes of memory per event).

    Returns:
        ``{"NVTX_INJECTION64_PATH": ..., "NCOMPASS_NVTX_OUTPUT": ...}``, to merge into
        ``os.environ`` for the child.

    Raises:
        CaptureError: The recorder has to be built and cannot be.
    """
    directory = Path(output_dir).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    variables = {
        INJECTION_VARIABLE: str(Path(library) if library is not None else build_recorder()),
        OUTPUT_VARIABLE: str(directory / OUTPUT_PATTERN),
    }
    if max_events is not None:
        variables[MAX_EVENTS_VARIABLE] = str(max_events)
    return variables
