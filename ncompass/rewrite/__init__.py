"""The libcst rewriter: locate targets, plan markers, transform, and map lines back to the original."""
