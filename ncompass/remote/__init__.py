"""Remote runs on a Ray cluster: submit a profiled run, follow it, fetch its traces back."""
