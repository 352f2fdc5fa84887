"""Every environment variable ncompass reads or sets, named once.

Readers import the name from here instead of spelling the string, so a grep for one constant finds
every place a variable matters. The constants are named after the variables themselves.
"""

from __future__ import annotations

# --- capture and the import hook ---------------------------------------------------------------
NCOMPASS_CONFIG = "NCOMPASS_CONFIG"
"""Spec file(s) for the import hook of a run's process (``os.pathsep``-separated)."""
NCOMPASS_RUNNER = "NCOMPASS_RUNNER"
"""Set to ``1`` while ``ncompass run`` profiles a script (the runner opens the whole-run range)."""
NCOMPASS_PROFILE = "NCOMPASS_PROFILE"
"""Turns ``@capture_trace`` on (``1``) or off when the code runs outside ``ncompass run``."""
NCOMPASS_TRACE_DIR = "NCOMPASS_TRACE_DIR"
"""Where traces are written when no ``--output-dir`` is given."""
NCOMPASS_FOLLOW = "NCOMPASS_FOLLOW"
"""Set in every process of a run that follows its processes: the run's private folder."""
NCOMPASS_NSYS = "NCOMPASS_NSYS"
"""The ``nsys`` executable to export Nsight Systems reports with."""

# --- the NVTX recorder (also read by nvtx_recorder.c) -------------------------------------------
NVTX_INJECTION64_PATH = "NVTX_INJECTION64_PATH"
"""NVTX's own variable: the tool library NVTX loads at a process's first NVTX call."""
NCOMPASS_NVTX_OUTPUT = "NCOMPASS_NVTX_OUTPUT"
"""The recorder's output file pattern (``%p`` is the process id)."""
NCOMPASS_NVTX_MAX_EVENTS = "NCOMPASS_NVTX_MAX_EVENTS"
"""The most ranges the recorder keeps per process."""
NCOMPASS_NVTX_WINDOWS = "NCOMPASS_NVTX_WINDOWS"
"""Set: the recorder records only inside recording windows (opened through ctypes)."""
NCOMPASS_NSYS_WINDOWS = "NCOMPASS_NSYS_WINDOWS"
"""``--nsys`` with windows: the file the child lists windows that started nsys' capture in."""

# --- kernels ------------------------------------------------------------------------------------
NCOMPASS_AUTOTUNE = "NCOMPASS_AUTOTUNE"
"""Turns the Triton kernels' autotuner on or off."""
NCOMPASS_AUTOTUNE_DIR = "NCOMPASS_AUTOTUNE_DIR"
"""Where the autotuner caches its choices."""

# --- efficiency (roofline) ---------------------------------------------------------------------
NCOMPASS_PEAK_FLOPS = "NCOMPASS_PEAK_FLOPS"
"""The device's peak FLOP/s for every dtype, in place of the table or the calibration."""
NCOMPASS_PEAK_BANDWIDTH = "NCOMPASS_PEAK_BANDWIDTH"
"""The device's peak memory bandwidth in bytes/s, in place of the table or the calibration."""
NCOMPASS_PEAKS_DIR = "NCOMPASS_PEAKS_DIR"
"""Where this machine's measured CPU peaks are cached (default ``~/.cache/ncompass/peaks``)."""

# --- analysis providers and the service ---------------------------------------------------------
NCOMPASS_ANALYSIS_URL = "NCOMPASS_ANALYSIS_URL"
"""Base URL of an ``ncompass serve`` service to analyse traces with."""
NCOMPASS_ANALYSIS_TOKEN = "NCOMPASS_ANALYSIS_TOKEN"
"""Bearer token of that service (client and server)."""
NCOMPASS_LLM_URL = "NCOMPASS_LLM_URL"
"""OpenAI-compatible chat endpoint of the LLM provider."""
NCOMPASS_LLM_MODEL = "NCOMPASS_LLM_MODEL"
"""Model name for the LLM provider."""
NCOMPASS_LLM_API_KEY = "NCOMPASS_LLM_API_KEY"
"""API key for the LLM provider."""
NCOMPASS_LLM_TIMEOUT_S = "NCOMPASS_LLM_TIMEOUT_S"
"""Seconds the LLM provider waits for an answer."""

# --- the profiling session ----------------------------------------------------------------------
NCOMPASS_SESSION_PARENT = "NCOMPASS_SESSION_PARENT"
"""Set on a session's ``ncompass run`` child: the session's pid, which the child ends with."""

# --- remote runs ----------------------------------------------------------------------------------
NCOMPASS_REMOTE = "NCOMPASS_REMOTE"
"""Set on a remote job's ranks: the run happens on a Ray cluster."""
NCOMPASS_JOB_ID = "NCOMPASS_JOB_ID"
"""The remote job's id, set on its ranks."""
NCOMPASS_REMOTE_CONFIG = "NCOMPASS_REMOTE_CONFIG"
"""Path of the remote-cluster configuration file."""
NCOMPASS_REMOTE_TOKEN = "NCOMPASS_REMOTE_TOKEN"
"""Bearer token of the Ray dashboard."""
NCOMPASS_REMOTE_CHUNK_BYTES = "NCOMPASS_REMOTE_CHUNK_BYTES"
"""Chunk size of trace transfers through Ray's log API."""
NCOMPASS_REMOTE_LOGS_DIR = "NCOMPASS_REMOTE_LOGS_DIR"
"""The cluster's log directory the trace chunks are written to."""
NCOMPASS_REMOTE_FAILURE_GRACE_S = "NCOMPASS_REMOTE_FAILURE_GRACE_S"
"""Seconds a node's supervisor waits for the other ranks after one failed."""
NCOMPASS_REMOTE_PLACEMENT_TIMEOUT_S = "NCOMPASS_REMOTE_PLACEMENT_TIMEOUT_S"
"""Seconds a multi-node job waits for Ray to place its nodes."""
NCOMPASS_REMOTE_PLACEMENT_STRATEGY = "NCOMPASS_REMOTE_PLACEMENT_STRATEGY"
"""Ray placement-group strategy of a multi-node job."""

# --- other tools' variables ncompass reads ------------------------------------------------------
KINETO_USE_DAEMON = "KINETO_USE_DAEMON"
"""Kineto's daemon mode (on-demand tracing), which the torch range context must respect."""
TRITON_INTERPRET = "TRITON_INTERPRET"
"""Triton's interpreter switch: the kernels run on CPU when it is ``1``."""
TORCHINDUCTOR_CACHE_DIR = "TORCHINDUCTOR_CACHE_DIR"
"""Inductor's cache folder, where compiled code's source lives."""

__all__ = [
    "KINETO_USE_DAEMON",
    "NCOMPASS_ANALYSIS_TOKEN",
    "NCOMPASS_ANALYSIS_URL",
    "NCOMPASS_AUTOTUNE",
    "NCOMPASS_AUTOTUNE_DIR",
    "NCOMPASS_CONFIG",
    "NCOMPASS_FOLLOW",
    "NCOMPASS_JOB_ID",
    "NCOMPASS_LLM_API_KEY",
    "NCOMPASS_LLM_MODEL",
    "NCOMPASS_LLM_TIMEOUT_S",
    "NCOMPASS_LLM_URL",
    "NCOMPASS_NSYS",
    "NCOMPASS_NSYS_WINDOWS",
    "NCOMPASS_NVTX_MAX_EVENTS",
    "NCOMPASS_NVTX_OUTPUT",
    "NCOMPASS_NVTX_WINDOWS",
    "NCOMPASS_PEAKS_DIR",
    "NCOMPASS_PEAK_BANDWIDTH",
    "NCOMPASS_PEAK_FLOPS",
    "NCOMPASS_PROFILE",
    "NCOMPASS_REMOTE",
    "NCOMPASS_REMOTE_CHUNK_BYTES",
    "NCOMPASS_REMOTE_CONFIG",
    "NCOMPASS_REMOTE_FAILURE_GRACE_S",
    "NCOMPASS_REMOTE_LOGS_DIR",
    "NCOMPASS_REMOTE_PLACEMENT_STRATEGY",
    "NCOMPASS_REMOTE_PLACEMENT_TIMEOUT_S",
    "NCOMPASS_REMOTE_TOKEN",
    "NCOMPASS_RUNNER",
    "NCOMPASS_SESSION_PARENT",
    "NCOMPASS_TRACE_DIR",
    "NVTX_INJECTION64_PATH",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_INTERPRET",
]
