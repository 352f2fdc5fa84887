"""Profiler lifecycle (torch profiler, nvtx, none), ``capture_trace`` and trace file naming."""
