"""The iterative profiling loop: run, analyse, take feedback, refine the spec, run again."""
