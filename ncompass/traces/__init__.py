"""Streaming Chrome/Kineto trace reading and writing, filtering, linking and merging."""

from ncompass.traces.filter import filter_trace
from ncompass.traces.link import LinkedTrace, Marker, fold_path, link_trace
from ncompass.traces.merge import merge_traces
from ncompass.traces.reader import CorruptTraceError, TraceReader, TraceValueError, read_metadata
from ncompass.traces.writer import TraceWriter

__all__ = [
    "CorruptTraceError",
    "LinkedTrace",
    "Marker",
    "TraceReader",
    "TraceValueError",
    "TraceWriter",
    "filter_trace",
    "fold_path",
    "link_trace",
    "merge_traces",
    "read_metadata",
]
