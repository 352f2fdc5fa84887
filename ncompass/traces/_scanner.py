"""Cut a Chrome trace's JSON text into events, incrementally, without holding the whole file.

The bytes arrive in chunks. Between events the text always looks like ``}`` ``,`` ``{`` (with
optional whitespace), so the scanner guesses the last such boundary in its buffer and asks orjson
to decode everything before it as one array: when the guess is wrong (the boundary was inside a
nested value or a string) the slice is unbalanced JSON and orjson rejects it, so a successful
decode proves the cut. Wrong guesses are rare in real traces; after a few the scanner switches,
for that buffer, to an exact tokenizer that tracks string and bracket depth. Errors carry the byte
offset into the (decompressed) JSON text.

Time and memory stay linear in the longest value: the text is kept in a ``bytearray`` (appending
a chunk and dropping what was consumed cost the chunk, not the buffer), and an event still
unfinished after a chunk's worth of text is an *open event*: each new chunk is only scanned on
(string and bracket state carried over) until the event ends, then that event is decoded once.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any

import orjson

from ncompass.traces.events import Event
from ncompass.traces.raw_json import RAW_VALUE_BYTES, RawJson

try:
    from ncompass.traces import _fold
except ImportError:  # built without a C compiler: headers are decoded whole, as orjson does
    _fold = None  # type: ignore[assignment]

_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
BETWEEN_EVENTS = _BETWEEN_EVENTS
"""What the text between two events looks like (the scanner's guess; a guess can be wrong)."""
_OBJECT_START = re.compile(rb"\s*:\s*\[")
_WHITESPACE = re.compile(rb"[ \t\r\n]*")
_SEPARATORS = re.compile(r"[ \t\r\n,]*")
# A string (possibly cut off by the end of the buffer, even right after a backslash) or one
# structural character. Every '"' must start a match, or finditer would skip it and read the
# string's contents as structure. Runs of plain characters are one step each ("unrolled"), not
# one step a character (which took ~120 bytes of the regex engine's memory per character).
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)|[{}\[\]]', re.DOTALL)
_TRACE_EVENTS_KEY = b'"traceEvents"'
# What the open-event scan stops at outside a string: a string or a bracket.
_STRUCTURE_STOP = re.compile(rb'["{}\[\]]')
_UTF8_BOM = b"\xef\xbb\xbf"

# How many wrong guesses per buffer before the exact tokenizer takes over.
_MAX_GUESSES = 3
# A header (the keys before traceEvents) larger than this is not a trace we can stream.
_MAX_HEADER_BYTES = 256 << 20
# One event larger than this is refused (the largest real ones, with stacks, are a few KiB).
MAX_EVENT_BYTES = 256 << 20
# Unfinished event text beyond this is scanned on as an open event, each chunk once, instead of
# being cut again from its start on every chunk (which is quadratic in the event's length).
OPEN_EVENT_BYTES = 4 << 10
# Unfinished event text beyond this is checked for a syntax error (a stray or missing quote
# turns the rest of the file into one "event"), so a damaged file fails fast and small.
_LARGE_EVENT_BYTES = 4 << 20
# Deepest nesting of arrays and objects inside traceEvents (events are 2-4 deep; orjson stops
# at 1024, the stdlib decoder at Python's recursion limit).
MAX_EVENT_DEPTH = 1000
_TOO_DEEP = (
    f"an event nests arrays or objects more than {MAX_EVENT_DEPTH} levels deep, "
    "which no profiler writes"
)
# Python's int() refuses integers this long (3.10.7 and later), and orjson reads none.
_MAX_DIGITS: int = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
_TOO_LONG = f"an event holds an integer of more than {_MAX_DIGITS} digits, which no profiler writes"

_HEADER, _EVENTS, _TAIL = "header", "events", "tail"


_ORJSON_INTEGERS = range(-(2**63), 2**64)
"""The integers orjson reads as ints; it reads the others as floats (where they fit one)."""


def as_orjson_reads(value: int) -> int | float:
    """An integer as orjson reads its text: beyond 64 bits a float, unless too large for one
    (orjson refuses those, and the standard library's decoder keeps them exact).

    The reader's other decoders (the standard library's, msgspec's) read integers so: which one
    reads an event depends on where a batch was cut, and must not change what it holds.
    """
    if value in _ORJSON_INTEGERS:
        return value
    try:
        return float(value)
    except OverflowError:
        return value


def _read_integer(text: str) -> int | float:
    """``parse_int`` of the standard library's decoder: as orjson reads the integer."""
    return as_orjson_reads(int(text))


class ScanError(Exception):
    """The JSON text is truncated or malformed at ``offset`` (a byte offset into the text)."""

    def __init__(self, offset: int, detail: str) -> None:
        super().__init__(detail)
        self.offset = offset
        self.detail = detail


class EventScanner:
    """Incrementally decode the ``traceEvents`` of a Chrome trace from chunks of its JSON text.

    Feed chunks in order with :meth:`feed`, then call :meth:`close`. Both return the events that
    became complete. :attr:`metadata` holds every top-level key except ``traceEvents`` (the ones
    after the events, such as ``baseTimeNanoseconds``, only once :meth:`close` returned).

    Args:
        fast_decode: Decodes the text of a JSON array of events into other objects (compact
            structs), or returns None when it cannot; batches it decodes hold its objects in
            place of dicts. What counts as a valid cut and every error stay orjson's.
    """

    def __init__(self, fast_decode: Callable[[bytes], list[Any] | None] | None = None) -> None:
        self.metadata: dict[str, Any] = {}
        self._fast_decode = fast_decode
        self._buffer = bytearray()
        self._position = 0  # index in _buffer of the first byte not yet consumed
        self._consumed_before_buffer = 0  # absolute offset of _buffer[0]
        self._state = _HEADER
        self._header_search_from = 0
        self._is_bare_array = False
        self.events_start: int | None = None
        """Byte offset of the first byte after the ``[`` that opens the events, once found."""
        self._saw_any_byte = False
        self._check_large_event_at = _LARGE_EVENT_BYTES
        # the open event (starting at _position), once there is one: how far its text was
        # scanned, its bracket depth, whether that point is inside a string, after a backslash
        self._open_scanned: int | None = None
        self._open_depth = 0
        self._open_in_string = False
        self._open_escaped = False

    @property
    def offset(self) -> int:
        """Absolute byte offset of the first byte not yet turned into events."""
        return self._consumed_before_buffer + self._position

    def feed(self, chunk: bytes) -> list[Event]:
        """Add the next chunk of JSON text; return the events it completed."""
        if not chunk:
            return []
        self._saw_any_byte = True
        if self._position:
            # dropping the front of a bytearray moves its start: no copy of what stays
            del self._buffer[: self._position]
            self._consumed_before_buffer += self._position
            self._header_search_from = max(0, self._header_search_from - self._position)
            if self._open_scanned is not None:
                self._open_scanned -= self._position
            self._position = 0
        self._buffer += chunk
        if self._open_scanned is not None:
            events: list[Event] = []
            if not self._scan_open_event(events):
                return events
            return events + self._advance(final=False)
        return self._advance(final=False)

    def close(self) -> list[Event]:
        """Signal the end of the text; return the last events, or raise :class:`ScanError`."""
        events = self._advance(final=True) if self._open_scanned is None else []
        if self._state == _HEADER:
            self._parse_document_without_events()
        elif self._state == _EVENTS:
            raise self._first_syntax_error(self._position) or ScanError(
                self.offset,
                "the text ends inside the traceEvents array (the file is truncated)",
            )
        else:
            self._parse_tail()
        return events

    # -- states ---------------------------------------------------------------------------------

    def _advance(self, final: bool) -> list[Event]:
        events: list[Event] = []
        if self._state == _HEADER:
            self._find_events_start(final)
        if self._state == _EVENTS:
            self._cut_events(events)
        return events

    def _find_events_start(self, final: bool) -> None:
        buffer = self._buffer
        start = _skip_whitespace(buffer, 0)
        if buffer.startswith(_UTF8_BOM, start):
            start = _skip_whitespace(buffer, start + len(_UTF8_BOM))
        if start >= len(buffer):
            return
        first = buffer[start : start + 1]
        if first == b"[":
            self._is_bare_array = True
            self._enter_events(start + 1)
            return
        if first != b"{":
            raise ScanError(start, "it is not JSON: a trace starts with '{' or '['")
        search_from = max(start, self._header_search_from)
        while True:
            key = buffer.find(_TRACE_EVENTS_KEY, search_from)
            if key < 0:
                self._header_search_from = max(start, len(buffer) - len(_TRACE_EVENTS_KEY))
                if len(buffer) > _MAX_HEADER_BYTES and not final:
                    raise ScanError(start, "no traceEvents array in the first 256 MiB")
                return
            opening = _OBJECT_START.match(buffer, key + len(_TRACE_EVENTS_KEY))
            if opening is not None:
                decoded = _decode_object_before(buffer, start, key)
                if isinstance(decoded, dict):
                    self.metadata.update(decoded)
                    self._enter_events(opening.end())
                    return
            elif key + len(_TRACE_EVENTS_KEY) + 64 > len(buffer) and not final:
                return  # the ':' '[' after the key may still be on its way
            search_from = key + 1

    @property
    def is_bare_array(self) -> bool:
        """Whether the text is a bare array of events (no ``{"traceEvents": ...}`` around it)."""
        return self._is_bare_array

    def _enter_events(self, position: int) -> None:
        self._state = _EVENTS
        self._position = position
        self.events_start = self._consumed_before_buffer + position

    def _cut_events(self, events: list[Event]) -> None:
        buffer = self._buffer
        while True:
            position = _skip_whitespace(buffer, self._position)
            self._position = position
            if position >= len(buffer):
                return
            head = buffer[position]
            if head == 0x5D:  # ']'
                self._state = _TAIL
                self._position = position + 1
                return
            if head == 0x2C:  # the ',' after an event the exact tokenizer cut
                self._position = position + 1
                continue
            if head == 0x7B and self._cut_by_guessing(events):  # '{'
                continue
            if not self._cut_exactly(events):
                if len(buffer) - self._position >= OPEN_EVENT_BYTES:
                    self._open_event(events)
                return

    def _cut_by_guessing(self, events: list[Event]) -> bool:
        buffer = self._buffer
        start = self._position
        high = len(buffer)
        guesses = 0
        while guesses < _MAX_GUESSES:
            close = buffer.rfind(b"}", start, high)
            if close < 0:
                return False
            boundary = _BETWEEN_EVENTS.match(buffer, close)
            high = close
            if boundary is None:
                continue
            guesses += 1
            text = b"[" + buffer[start : close + 1] + b"]"
            fast = self._fast_decode(text) if self._fast_decode is not None else None
            if fast is not None:
                events.extend(fast)
            else:
                try:
                    decoded = orjson.loads(text)
                except orjson.JSONDecodeError:
                    continue
                events.extend(item for item in decoded if isinstance(item, dict))
            self._position = boundary.end() - 1
            return True
        return False

    def _cut_exactly(self, events: list[Event]) -> bool:
        """Find complete events by tokenizing; decode them; False when more text is needed."""
        buffer = self._buffer
        depth = 0
        element_start = -1
        spans: list[tuple[int, int]] = []
        for token in _TOKEN.finditer(buffer, self._position):
            text = token.group()
            if depth == 0:
                between = buffer[self._position if not spans else spans[-1][1] : token.start()]
                if between.strip(b" \t\r\n,"):
                    raise self._first_syntax_error(self._position) or ScanError(
                        self._consumed_before_buffer + token.start(),
                        "traceEvents holds something that is not an event object",
                    )
            if text == b"{" or text == b"[":
                if depth == 0:
                    element_start = token.start()
                depth += 1
                if depth > MAX_EVENT_DEPTH:
                    raise ScanError(self._consumed_before_buffer + token.start(), _TOO_DEEP)
            elif text == b"}" or text == b"]":
                if depth == 0:
                    break  # the ']' that closes traceEvents
                depth -= 1
                if depth == 0:
                    spans.append((element_start, token.end()))
                    if len(spans) >= 4096:
                        break
            elif depth == 0:
                raise self._first_syntax_error(self._position) or ScanError(
                    self._consumed_before_buffer + token.start(),
                    "traceEvents holds a string where an event object belongs",
                )
        if not spans:
            self._check_large_event()
            return False
        for start, end in spans:
            decoded = self._decode_one(start, end)
            if isinstance(decoded, dict):
                events.append(decoded)
        self._position = spans[-1][1]
        return True

    def _decode_one(self, start: int, end: int) -> Any:
        with memoryview(self._buffer) as whole, whole[start:end] as view:
            try:
                return orjson.loads(view)
            except orjson.JSONDecodeError:
                pass
            text = bytes(view)
        # The stdlib decoder accepts what some exporters write and orjson refuses (NaN, Infinity,
        # invalid UTF-8 in names once replaced).
        try:
            return json.loads(text.decode("utf-8", errors="replace"), parse_int=_read_integer)
        except RecursionError:
            raise ScanError(self._consumed_before_buffer + start, _TOO_DEEP) from None
        except json.JSONDecodeError as error:
            raise self._first_syntax_error(start) or ScanError(
                self._consumed_before_buffer + start + error.pos,
                f"malformed JSON in an event ({error.msg})",
            ) from None
        except ValueError:  # an integer too long for int() (orjson refused it as well)
            raise ScanError(self._consumed_before_buffer + start, _TOO_LONG) from None

    def _open_event(self, events: list[Event]) -> None:
        """Scan the unfinished event at ``_position`` from now on a chunk at a time."""
        self._open_scanned = self._position
        self._open_depth = 0
        self._open_in_string = self._open_escaped = False
        self._scan_open_event(events)

    def _scan_open_event(self, events: list[Event]) -> bool:
        """Scan the open event's new text; once it ends, decode it: True (False: it goes on).

        Only the text not scanned yet is read, with the string and bracket state it left off
        in, so an event of any length costs its length once.
        """
        buffer = self._buffer
        size = len(buffer)
        position = self._open_scanned
        assert position is not None
        depth, in_string = self._open_depth, self._open_in_string
        if self._open_escaped and position < size:
            position += 1
            self._open_escaped = False
        end = -1
        while position < size:
            if in_string:
                # the next quote ends the string unless an odd run of backslashes escapes it
                # (from ``position`` on, backslashes pair up: it is not inside an escape)
                quote = buffer.find(b'"', position)
                end_of_run = size if quote < 0 else quote
                run = _backslashes_before(buffer, position, end_of_run)
                if quote < 0:
                    self._open_escaped = run % 2 == 1
                    position = size
                else:
                    in_string = run % 2 == 1
                    position = quote + 1
                continue
            stop = _STRUCTURE_STOP.search(buffer, position)
            if stop is None:
                position = size
                break
            byte = buffer[stop.start()]
            position = stop.end()
            if byte == 0x22:
                in_string = True
            elif byte == 0x7B or byte == 0x5B:  # '{' '['
                depth += 1
                if depth > MAX_EVENT_DEPTH:
                    raise ScanError(self._consumed_before_buffer + stop.start(), _TOO_DEEP)
            else:
                depth -= 1
                if depth == 0:
                    end = position
                    break
        if end < 0:
            self._open_scanned = size
            self._open_depth, self._open_in_string = depth, in_string
            self._check_large_event()
            return False
        self._open_scanned = None
        decoded = self._decode_one(self._position, end)
        if isinstance(decoded, dict):
            events.append(decoded)
        self._position = end
        return True

    def _check_large_event(self) -> None:
        """Look for a syntax error once the unfinished event text grows past each threshold."""
        if len(self._buffer) - self._position < self._check_large_event_at:
            return
        error = self._first_syntax_error(self._position)
        if error is not None:
            raise error
        if len(self._buffer) - self._position > MAX_EVENT_BYTES:
            raise ScanError(
                self.offset,
                f"an event is larger than {MAX_EVENT_BYTES >> 20} MiB, which no profiler writes",
            )
        # one really large event: check again when it doubles, and once more at the limit
        self._check_large_event_at = min(2 * self._check_large_event_at, MAX_EVENT_BYTES + 1)

    def _first_syntax_error(self, start: int) -> ScanError | None:
        """Where a JSON parser reading the events from ``start`` finds the text malformed.

        The fast paths find *that* something is wrong around an event, not where; this decodes
        the events one by one with the stdlib's decoder, which stops at the first bad byte.
        Returns None when the buffered text is only incomplete (more may arrive).
        """
        # latin-1 maps each byte to one character, so positions stay byte offsets.
        text = self._buffer.decode("latin-1")
        decoder = json.JSONDecoder()
        position = start
        while True:
            position = _SEPARATORS.match(text, position).end()  # type: ignore[union-attr]
            if position >= len(text) or text[position] == "]":
                return None
            if text[position] != "{":
                return ScanError(
                    self._consumed_before_buffer + position,
                    "traceEvents holds something that is not an event object",
                )
            try:
                _, position = decoder.raw_decode(text, position)
            except RecursionError:
                return ScanError(self._consumed_before_buffer + position, _TOO_DEEP)
            except json.JSONDecodeError as error:
                if error.pos >= len(text) or error.msg.startswith("Unterminated string"):
                    return None  # the text ends inside this event
                return ScanError(
                    self._consumed_before_buffer + error.pos,
                    f"malformed JSON in an event ({error.msg})",
                )
            except ValueError:  # an integer too long for int()
                return ScanError(self._consumed_before_buffer + position, _TOO_LONG)

    def _parse_tail(self) -> None:
        buffer = self._buffer
        first = _skip_whitespace(buffer, self._position)
        tail = buffer[first : first + 1]
        if self._is_bare_array:
            if tail:
                raise ScanError(self.offset, "unexpected text after the event array")
            return
        if tail == b"}" and not buffer[first + 1 :].strip(b" \t\r\n"):
            return
        if not tail:
            raise ScanError(self.offset, "the text ends before the closing '}' (truncated)")
        if tail != b",":
            raise ScanError(self.offset, "unexpected text after the traceEvents array")
        # the keys after the events, read in place: the ',' before them becomes the '{'
        buffer[first] = 0x7B
        try:
            decoded = _decode_members(buffer, first, len(buffer))
        except orjson.JSONDecodeError as error:
            raise ScanError(
                self.offset + first - self._position + error.pos,
                f"malformed JSON after the traceEvents array ({error.msg})",
            ) from None
        finally:
            buffer[first] = 0x2C
        if isinstance(decoded, dict):
            self.metadata.update(decoded)

    def _parse_document_without_events(self) -> None:
        """The text ended before any traceEvents array: it is either tiny or not a trace."""
        text = self._buffer.strip(b" \t\r\n")
        if text.startswith(_UTF8_BOM):
            text = text[len(_UTF8_BOM) :].strip(b" \t\r\n")
        if not self._saw_any_byte or not text:
            raise ScanError(0, "it is empty: there is no JSON in it")
        try:
            decoded = orjson.loads(text)
        except orjson.JSONDecodeError as error:
            raise ScanError(
                error.pos, f"malformed JSON ({error.msg}); it may be truncated"
            ) from None
        if not isinstance(decoded, dict) or "traceEvents" in decoded:
            raise ScanError(0, "it has a traceEvents key that is not an array of events")
        raise ScanError(0, "it has no traceEvents array: it is not a Chrome/Kineto trace")


def _decode_object_before(buffer: bytearray, start: int, key: int) -> Any:
    """The JSON object whose keys run from ``start`` (its ``{``) to ``key`` (the text of the
    next key, with the ``,`` before it), decoded in place: the ``,`` becomes the ``}`` for as
    long as orjson reads it. None when that text is no object (the key sat inside a string)."""
    end = key
    while end > start and buffer[end - 1] in b" \t\r\n":
        end -= 1
    while end > start and buffer[end - 1] == 0x2C:
        end -= 1
    kept = buffer[end]
    buffer[end] = 0x7D  # '}'
    try:
        return _decode_members(buffer, start, end + 1)
    except orjson.JSONDecodeError:
        return None
    finally:
        buffer[end] = kept


def _decode_members(buffer: bytearray, start: int, end: int) -> Any:
    """The JSON object ``buffer[start:end]``, decoded; a member whose value is more than
    :data:`RAW_VALUE_BYTES` of text is kept as :class:`RawJson` (decoded, one such value cost
    up to 16 times its size).

    Raises:
        orjson.JSONDecodeError: the text is not valid JSON.
    """
    members = None
    if _fold is not None and end - start > RAW_VALUE_BYTES:
        members = _fold.object_members(buffer, start, end)
    with memoryview(buffer) as whole:
        if members is None:  # small, or not strictly valid: orjson reads it (and says why)
            with whole[start:end] as view:
                return orjson.loads(view)
        decoded: dict[str, Any] = {}
        for key_start, key_end, value_start, value_end in members:
            with whole[key_start:key_end] as key, whole[value_start:value_end] as value:
                name = orjson.loads(key)
                if value_end - value_start > RAW_VALUE_BYTES:
                    decoded[name] = RawJson(value)  # checked valid by object_members
                else:
                    decoded[name] = orjson.loads(value)
        return decoded


def _backslashes_before(buffer: bytearray, start: int, end: int) -> int:
    """How many backslashes end ``buffer[start:end]``."""
    if end == start or buffer[end - 1] != 0x5C:
        return 0
    return end - start - len(buffer[start:end].rstrip(b"\\"))


def _skip_whitespace(buffer: bytes | bytearray, position: int) -> int:
    """Index of the first non-whitespace byte at or after ``position``."""
    match = _WHITESPACE.match(buffer, position)
    return match.end() if match else position
