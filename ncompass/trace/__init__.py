"""Compatibility surface of the seed nCompass SDK (`ncompass.trace`): re-exports only."""
