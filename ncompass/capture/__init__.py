"""Profiler lifecycle (torch profiler, nvtx, none), the capture_trace decorator and trace file naming."""
