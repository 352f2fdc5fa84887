"""A stand-in for an initialised CUDA, for programs run under the fake ``nsys``.

There is no GPU here. A test program runs :data:`PRETEND_CUDA` first: torch then says CUDA is
available and initialised, and ``torch.cuda.profiler.start``/``stop`` (what ncompass calls at a
window's open and close) append ``start``/``stop`` to the file the fake nsys reads
(``$FAKE_NSYS_CUDA_PROFILER``), as the real ones reach nsys through the CUDA profiler API.
"""

PRETEND_CUDA = """
import os
import torch
import torch.cuda.profiler

def _cuda_profiler(action):
    def call():
        with open(os.environ["FAKE_NSYS_CUDA_PROFILER"], "a") as calls:
            calls.write(action + "\\n")
    return call

torch.cuda.is_available = lambda: True
torch.cuda.is_initialized = lambda: True
torch.cuda.profiler.start = _cuda_profiler("start")
torch.cuda.profiler.stop = _cuda_profiler("stop")
"""
"""Lines a test program runs before its work."""
