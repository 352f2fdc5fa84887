"""Streaming Chrome/Kineto trace reading and writing, filtering, linking and merging."""
