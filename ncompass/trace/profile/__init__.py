"""Seed paths of the range context classes (`ncompass.trace.profile.torch`, `.nvtx`)."""
