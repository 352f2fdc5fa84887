"""Records NVTX ranges without Nsight Systems, through a small NVTX injection library.

Typical use (what ``--profiler nvtx-trace`` does)::

    env = {**os.environ, **environment(output_dir)}
    subprocess.run([sys.executable, "script.py"], env=env)
    trace = to_chrome_trace(read_recordings(output_dir))

The library (C source shipped next to this file) is compiled with the system C compiler on
first use into ``$XDG_CACHE_HOME/ncompass/nvtx_recorder``. Every NVTX copy in the child
(the ``nvtx`` package, torch, CUDA libraries) reports to it, for every domain.
"""

from ncompass.capture.nvtx_recorder.build import (
    build_recorder,
    default_cache_dir,
    find_compiler,
    library_path,
    recorder_source,
)
from ncompass.capture.nvtx_recorder.chrome import to_chrome_events, to_chrome_trace
from ncompass.capture.nvtx_recorder.environment import (
    INJECTION_VARIABLE,
    MAX_EVENTS_VARIABLE,
    OUTPUT_VARIABLE,
    environment,
)
from ncompass.capture.nvtx_recorder.records import (
    NvtxMark,
    NvtxRange,
    NvtxRecording,
    NvtxThread,
    read_recording,
    read_recordings,
)

__all__ = [
    "INJECTION_VARIABLE",
    "MAX_EVENTS_VARIABLE",
    "OUTPUT_VARIABLE",
    "NvtxMark",
    "NvtxRange",
    "NvtxRecording",
    "NvtxThread",
    "build_recorder",
    "default_cache_dir",
    "environment",
    "find_compiler",
    "library_path",
    "read_recording",
    "read_recordings",
    "recorder_source",
    "to_chrome_events",
    "to_chrome_trace",
]
