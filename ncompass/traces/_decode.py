"""Decode event batches into what the fold reads fastest, holding only the fields linking reads.

With the C extension built, :data:`decode_link_events` reads a batch's text into one
``EventText`` (``_fold.parse_events``): compact records, no Python object per common event.
Where it cannot (a batch with anything unusual in it), and without the extension,
``msgspec`` decodes the batch into :class:`LinkEvent` structs in C, skipping every other key
(stacks, flow ids, most of ``args``), about four times faster than one dict per event
(:data:`decode_link_structs`). Both are optional: without msgspec they are None and the
reader hands out dicts.

Every decoder reads a value as orjson (the reader's general decoder) does, since which one reads
a batch depends on where the reader cut it: the structs hold only plain values (strings,
numbers, booleans, null; a batch with a list or an object in a field linking reads is left to
orjson's dicts), and an integer beyond 64 bits, which orjson reads as a float, is made that
float (``_scanner.as_orjson_reads``: msgspec would keep it exact).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from ncompass.traces._scanner import as_orjson_reads
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
    # What a struct field holds in the common case: a batch with anything else in a field
    # (an int beyond 64 bits, a list, an object) fails to decode into these
    Plain = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)] | float | str | bool | None
    # and is decoded again into these (a list or an object still fails: dicts read it)
    Loose = int | float | str | bool | None

    class LinkArgs(msgspec.Struct, gc=False):
        """The keys of an event's ``args`` that linking reads (None when absent)."""

        correlation: Plain = None
        bytes: Plain = None
        name: Plain = None
        overlap_of_tid: Plain = None

        def get(self, key: str) -> Any:
            """The value of ``key`` (None when absent), as ``dict.get`` reads an args dict."""
            return getattr(self, key)

    class LinkEvent(msgspec.Struct, gc=False):
        """The keys of one event that linking reads (None when absent); types as in the JSON."""

        ph: Plain = None
        cat: Plain = None
        name: Plain = None
        pid: Plain = None
        tid: Plain = None
        ts: Plain = None
        dur: Plain = None
        args: LinkArgs | None = None

    class LooseArgs(msgspec.Struct, gc=False):
        """:class:`LinkArgs` that holds any integer, decoded only to be made a LinkArgs."""

        correlation: Loose = None
        bytes: Loose = None
        name: Loose = None
        overlap_of_tid: Loose = None

    class LooseEvent(msgspec.Struct, gc=False):
        """:class:`LinkEvent` that holds any integer, decoded only to be made a LinkEvent."""

        ph: Loose = None
        cat: Loose = None
        name: Loose = None
        pid: Loose = None
        tid: Loose = None
        ts: Loose = None
        dur: Loose = None
        args: LooseArgs | None = None

    _DECODER = msgspec.json.Decoder(list[LinkEvent])
    _LOOSE_DECODER = msgspec.json.Decoder(list[LooseEvent])
    _EVENT_FIELDS = LinkEvent.__struct_fields__[:-1]  # all but args
    _ARGS_FIELDS = LinkArgs.__struct_fields__
    _DECODE_ERRORS: tuple[type[BaseException], ...] = (
        msgspec.MsgspecError,
        ValueError,  # invalid UTF-8 surfaces as UnicodeDecodeError
        RecursionError,  # deeply nested values in skipped keys
    )

    def _decode(text: bytes) -> list[Any] | None:
        try:
            return _DECODER.decode(text)
        except msgspec.ValidationError:  # an integer beyond 64 bits, or a list or an object
            pass
        except _DECODE_ERRORS:
            return None
        try:
            loose = _LOOSE_DECODER.decode(text)
        except _DECODE_ERRORS:
            return None
        return [_as_link_event(event) for event in loose]

    def _as_link_event(loose: Any) -> Any:
        """The LinkEvent a LooseEvent stands for, its integers as orjson reads them."""
        event = LinkEvent(*(_plain(getattr(loose, key)) for key in _EVENT_FIELDS))
        if loose.args is not None:
            event.args = LinkArgs(*(_plain(getattr(loose.args, key)) for key in _ARGS_FIELDS))
        return event

    def _plain(value: Any) -> Any:
        return as_orjson_reads(value) if type(value) is int else value

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
