"""Decode event batches into what the fold reads fastest, holding only the fields linking reads.

With the C extension built, :data:`decode_link_events` reads a batch's text into one
``EventText`` (``_fold.parse_events``): compact records, no Python object per common event.
Where it cannot (a batch with anything unusual in it), and without the extension,
``msgspec`` decodes the batch into :class:`LinkEvent` structs in C, skipping every other key
(stacks, flow ids, most of ``args``), about four times faster than one dict per event
(:data:`decode_link_structs`). Both are optional: without msgspec they are None and the
reader hands out dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ncompass.traces.events import Event

try:
    import msgspec
except ImportError:  # pragma: no cover - exercised by the fallback test with the module hidden
    msgspec = None  # type: ignore[assignment]

try:
    from ncompass.traces import _fold
except ImportError:  # built without a C compiler: batches are decoded into structs
    _fold = None  # type: ignore[assignment]


if msgspec is not None:

    class LinkArgs(msgspec.Struct, gc=False):
        """The keys of an event's ``args`` that linking reads (None when absent)."""

        correlation: Any = None
        bytes: Any = None
        name: Any = None
        overlap_of_tid: Any = None

        def get(self, key: str) -> Any:
            """The value of ``key`` (None when absent), as ``dict.get`` reads an args dict."""
            return getattr(self, key)

    class LinkEvent(msgspec.Struct, gc=False):
        """The keys of one event that linking reads (None when absent); types as in the JSON."""

        ph: Any = None
        cat: Any = None
        name: Any = None
        pid: Any = None
        tid: Any = None
        ts: Any = None
        dur: Any = None
        args: LinkArgs | None = None

    _DECODER = msgspec.json.Decoder(list[LinkEvent])
    _DECODE_ERRORS: tuple[type[BaseException], ...] = (
        msgspec.MsgspecError,
        ValueError,  # invalid UTF-8 surfaces as UnicodeDecodeError
        RecursionError,  # deeply nested values in skipped keys
    )

    def _decode(text: bytes) -> list[Any] | None:
        try:
            return _DECODER.decode(text)
        except _DECODE_ERRORS:
            return None

    def as_event(event: Any) -> Event:
        """The plain dict :class:`LinkEvent` stands for (absent keys left out)."""
        decoded: Event = {
            key: value
            for key in ("ph", "cat", "name", "pid", "tid", "ts", "dur")
            if (value := getattr(event, key)) is not None
        }
        if event.args is not None:
            decoded["args"] = {
                key: value
                for key in ("correlation", "bytes", "name", "overlap_of_tid")
                if (value := getattr(event.args, key)) is not None
            }
        return decoded

    def _read_or_decode(text: bytes) -> list[Any] | None:
        # One EventText for the whole batch where the C reader takes the text, else structs.
        batch = _fold.parse_events(text, _decode)  # type: ignore[union-attr]
        return [batch] if batch is not None else _decode(text)

    link_event_type: Any = LinkEvent  # Any: checking ``type(x) is`` it keeps x's attributes
    link_args_type: Any = LinkArgs
    decode_link_structs: Callable[[bytes], list[Any] | None] | None = _decode
    decode_link_events: Callable[[bytes], list[Any] | None] | None = (
        _decode if _fold is None else _read_or_decode
    )
else:  # pragma: no cover - msgspec is a declared dependency
    link_event_type = None
    link_args_type = None
    decode_link_structs = None
    decode_link_events = None

    def as_event(event: Any) -> Event:
        """Unreachable without msgspec: events are already dicts."""
        return dict(event)
