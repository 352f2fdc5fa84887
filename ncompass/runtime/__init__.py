"""Range contexts called by rewritten code (torch, nvtx, torch+nvtx, noop, custom), near free when idle."""
