"""Events read straight from JSON text in C (``_fold.parse_events``): the same numbers as
Python's own parsing, and every unusual batch left to the general decoders."""

from __future__ import annotations

import json
import math
import random
from decimal import ROUND_DOWN, ROUND_UP, Decimal, localcontext
from pathlib import Path
from typing import Any

import pytest

from ncompass.traces import _collector, _decode
from ncompass.traces.link import link_trace
from ncompass.traces.reader import EventsLeftOutWarning

fold = _collector._fold
if fold is None or _decode.decode_link_structs is None:
    pytest.skip("the C extension or msgspec is not here", allow_module_level=True)

OP = '{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":%s,"dur":%s}'


def parse(text: str) -> Any:
    return fold.parse_events(text.encode(), _decode.decode_link_structs)


def durations_read_from(tmp_path: Path, durations: list[str]) -> list[float]:
    """The durations of operator ``op`` as the trace's text writes them, read and folded."""
    events = ",".join(OP % (1000 + index, text) for index, text in enumerate(durations))
    assert type(parse(f"[{events}]")) is fold.EventText  # read in C, not left to msgspec
    path = tmp_path / "durations.json"
    path.write_text(f'{{"traceEvents":[{events}]}}')
    return list(link_trace(path, progress=False).cpu_operators["op"].durations)


def random_number_texts(count: int, seed: int) -> list[str]:
    """Decimal texts of every shape: short and 19+ digits, exponents, ties, tiny and huge."""
    generator = random.Random(seed)
    texts = ["0", "-0", "0.0", "-0.0", "1e0", "1E+2", "2.5e-3", "123456789012345678901234567890"]
    texts += ["9007199254740993", "9007199254740993.0", "0.1", "0.30000000000000004"]
    texts += ["1.7976931348623157e308", "4.9e-324", "2.2250738585072011e-308"]
    texts += ["1712195495505543.2", "1712195495505543.25", "1e23", "8.589973e9"]
    for _ in range(count):
        digits = "".join(generator.choice("0123456789") for _ in range(generator.randint(1, 24)))
        digits = digits.lstrip("0") or "0"
        point = generator.randint(0, len(digits))
        text = digits[:point] + ("." + digits[point:] if digits[point:] else "")
        if text.startswith("."):
            text = "0" + text
        if generator.random() < 0.3:
            text += f"e{generator.randint(-40, 40)}"
        if generator.random() < 0.2:
            text = "-" + text
        texts.append(text)
    # exactly halfway between two doubles, a hair either side, and the nearest texts of 17-19
    # digits: the near-ties a 64-bit intermediate result rounds onto a tie
    for _ in range(2000):
        low = generator.uniform(1, 2) * 2.0 ** generator.randint(-20, 40)
        middle = (Decimal(low) + Decimal(math.nextafter(low, math.inf))) / 2
        texts += [str(middle), str(middle + Decimal("1e-30")), str(middle - Decimal("1e-30"))]
        for rounding in (ROUND_DOWN, ROUND_UP):
            with localcontext() as context:
                context.prec, context.rounding = generator.randint(17, 19), rounding
                texts.append(str(+middle))
    return texts


def test_numbers_are_read_as_python_reads_them(tmp_path: Path) -> None:
    # beyond 2^53 µs a duration is refused (TIME_LIMIT_US), whoever reads it: no fold to compare
    texts = [t for t in random_number_texts(3000, seed=14) if abs(float(t)) <= 2**53]
    with pytest.warns(EventsLeftOutWarning):  # the negative durations, read all the same
        read = durations_read_from(tmp_path, texts)
    expected = [float(json.loads(text)) for text in texts]
    assert [value.hex() for value in read] == [value.hex() for value in expected if value >= 0]


def test_a_plain_batch_becomes_one_event_text() -> None:
    batch = parse(f"[{OP % (1, 2)}, {OP % (3, 4.5)}]")
    assert type(batch) is fold.EventText and len(batch) == 2


@pytest.mark.parametrize(
    "text",
    [
        "[" + OP % (1, 2) + ",]",  # a trailing comma
        "[" + OP % (1, "NaN") + "]",
        "[" + OP % (1, "01") + "]",  # a leading zero
        "[" + OP % (1, "1.") + "]",
        '[{"ph":"X","ph":"X"}]',  # a field twice
        '[{"p\\u0068":"X"}]',  # a key spelled with an escape
        '[{"ph":"X","args":[1]}]',  # args the struct cannot hold
        '[{"ph":"X","args":{"correlation":1,"correlation":2}}]',
        '[{"ph":"X","name":"a\\ud800"}]',  # a lone surrogate
        '[{"ph":"X","name":"tab\there"}]',  # a raw control character
        '[{"ph":"X","name":"\\x"}]',  # no such escape
        '[{"ph":"X","x":' + "[" * 70 + "]" * 70 + "}]",  # deeper than events go
        '[{"ph":"X"} 1]',
        '[{"ph":"X"}] x',
        "[1]",  # not an object
        '[{"ph":"X","x":tru}]',
    ],
)
def test_unusual_text_is_left_to_the_general_decoders(text: str) -> None:
    assert parse(text) is None


def test_invalid_utf8_is_left_to_the_general_decoders() -> None:
    for raw in (b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"):
        text = b'[{"ph":"X","name":"' + raw + b'"}]'
        assert fold.parse_events(text, _decode.decode_link_structs) is None
    valid = '[{"ph":"X","cat":"cpu_op","name":"é€😀","ts":1,"dur":1}]'.encode()
    assert type(fold.parse_events(valid, _decode.decode_link_structs)) is fold.EventText


def test_escaped_and_odd_values_fold_in_python_in_file_order(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "first", "pid": 1, "tid": 1, "ts": 10, "dur": 1},
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": 'quote " inside',
            "pid": 1,
            "tid": 1,
            "ts": 11,
            "dur": 2,
        },
        {"ph": "X", "cat": "cpu_op", "name": "é", "pid": 1.5, "tid": True, "ts": 12, "dur": 3},
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 2**70,
            "tid": 7,
            "ts": 13,
            "dur": 1,
            "args": {"correlation": 3},
        },
        {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 14},
        {"ph": "\\u0066", "id": 1, "pid": 1, "tid": 1, "ts": 15},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaLaunchKernel",
            "pid": "p",
            "tid": "t",
            "ts": 16,
            "dur": 1,
            "args": {"correlation": 5, "other": [1, {"a": None}]},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 17,
            "dur": 1,
            "args": {"correlation": 5, "bytes": True},
        },
    ]
    # json.dumps writes the phase's backslash escaped: unescape it to spell "f" as \u0066
    text = json.dumps(events, ensure_ascii=False).replace("\\\\u0066", "\\u0066")
    path = tmp_path / "odd.json"
    path.write_text(f'{{"traceEvents":{text}}}', encoding="utf-8")
    batch = fold.parse_events(text.encode(), _decode.decode_link_structs)
    assert type(batch) is fold.EventText and len(batch) == len(events)
    trace = link_trace(path, progress=False)
    assert list(trace.cpu_operators) == ["first", 'quote " inside', "é"]
    assert trace.event_counts == {"X": 6, "s": 1, "f": 1}
    assert trace.threads == [(2**70, 7), ("p", "t"), (0, 7)]
    assert list(trace.gpu.correlation) == [3, 5]
    assert list(trace.gpu.bytes) == [0, 1]  # True counts as 1, as isinstance(True, int) says


# Found by fuzzing the reader under AddressSanitizer (tests/traces/fuzz_event_text.py).

MARKER = '{"ph":"X","cat":"user_annotation","name":"step","pid":1,"tid":1,"ts":%s,"dur":%s}'


def linked(batches: list[Any], collector: Any = None) -> Any:
    collector = collector or _collector.Collector(_collector.LinkedTrace(Path("t.json")))
    for batch in batches:
        collector.add(batch)
    return collector.finish()


def test_a_batch_keeps_its_own_list_of_the_events_decoded_in_python() -> None:
    # The fold indexed the list the decoder returned: a decoder that kept it and changed it
    # afterwards made the fold read out of its bounds (a NULL item array once cleared).
    kept: list[Any] = []

    def decode(text: bytes) -> Any:
        events = _decode.decode_link_structs(text)
        kept.append(events)
        return events

    text = f"[{MARKER % (0, 10)}, {OP % (1, 2)}, {MARKER % (3, 4)}, {OP % (5, 1)}]"
    batch = fold.parse_events(text.encode(), decode)
    assert type(batch) is fold.EventText and len(kept[0]) == 2
    kept[0].clear()
    trace = linked([[batch]])
    assert [marker.name for marker in trace.markers] == ["step", "step"]
    assert trace.cpu_operators["op"].calls == 2


def test_a_python_fold_that_drops_the_batches_does_not_free_them_under_the_fold() -> None:
    # The Folder held the batch it was folding by a borrowed reference while the Python fold
    # ran: a Python fold that dropped the caller's list freed the batch and its text (a
    # use-after-free ASan reported; a normal build read freed memory).
    text = f"[{MARKER % (0, 10)}, {OP % (1, 2)}, {MARKER % (3, 4)}, {OP % (5, 1)}]".encode()
    expected = linked([[fold.parse_events(text, _decode.decode_link_structs)]])
    events = [fold.parse_events(text, _decode.decode_link_structs)]
    collector = _collector.Collector(_collector.LinkedTrace(Path("t.json")))

    def fold_and_drop(pending: list[Any]) -> None:
        collector._add_in_python(pending)
        events.clear()

    collector._folder = fold.Folder(
        collector,
        collector.trace,
        _decode.link_event_type,
        _decode.link_args_type,
        fold_and_drop,
        collector._new_operator,
        collector._kernel_class_of,
    )
    trace = linked([events], collector)
    assert trace.markers == expected.markers
    assert trace.cpu_operators == expected.cpu_operators
    assert trace.event_counts == expected.event_counts == {"X": 4}


def test_folding_into_a_folder_while_it_folds_is_refused() -> None:
    # A callback that folded into the same Folder grew its table of names under the fold in
    # progress, which points into it (a use-after-free ASan reported): now an error.
    names = ",".join(OP.replace('"op"', f'"op{index}"') % (index, 1) for index in range(300))
    batch = fold.parse_events(f"[{names}]".encode(), _decode.decode_link_structs)
    collector = _collector.Collector(_collector.LinkedTrace(Path("t.json")))
    refused: list[str] = []

    def new_operator(name: str) -> Any:
        try:
            collector._folder.fold([batch])
        except RuntimeError as error:
            refused.append(str(error))
        return collector._new_operator(name)

    collector._folder = fold.Folder(
        collector,
        collector.trace,
        _decode.link_event_type,
        _decode.link_args_type,
        collector._add_in_python,
        new_operator,
        collector._kernel_class_of,
    )
    trace = linked([[batch]], collector)
    assert refused == ["fold() was called again while folding"] * 300
    assert len(trace.cpu_operators) == 300 and trace.event_counts == {"X": 300}


EVERY_TOKEN = (
    '[{"ph":"X","cat":"kernel","name":"gemm \\"t\\" \\u00e9 \xe9\u20ac\U0001f600 abcdefghijklmnop",'
    ' "pid":0,"tid":-7,"ts":1712195495505543.25,"dur":1.5e-3,"args":{"correlation":41,'
    '"bytes":true,"x":[null,false,{"y":-0.0E+2}]}},{"ph":"i","s":"t"}]\n'
).encode()


def test_every_truncation_of_a_batch_is_left_to_the_general_decoders() -> None:
    # the readers' end-of-text checks, cut inside every kind of token (run under ASan by the
    # fuzz driver, where a read past the end is reported)
    assert type(fold.parse_events(EVERY_TOKEN, _decode.decode_link_structs)) is fold.EventText
    for end in range(len(EVERY_TOKEN) - 1):
        assert fold.parse_events(EVERY_TOKEN[:end], _decode.decode_link_structs) is None, end


@pytest.mark.parametrize(
    "text",
    [
        b'[{"":"\\u006',  # an escape cut off (the fuzz driver's smallest such case)
        b'[{"ph":"X","name":"\\',
        b'[{"ph":"X","name":"\xe2\x82',  # a UTF-8 sequence cut off
        b'[{"ph":"X","name":"abcdefghijklmnop',  # 16 bytes: the SSE2 scan's last block
        b'[{"ph":"X","name":"abcdefghijklmno\\',
        b'[{"ph":"X","ts":1e',
        b'[{"ph":"X","ts":-',
        b'[{"ph":"X","x":tru',
        b'[{"ph":"X","args":{"correlation":nul',
        b'[{"ph":"X","x":' + b"[" * 63,
    ],
)
def test_text_cut_off_inside_a_token_is_left_to_the_general_decoders(text: bytes) -> None:
    assert fold.parse_events(text, _decode.decode_link_structs) is None


def test_damaged_batches_fold_as_the_reference_folds_them() -> None:
    # A few hundred cases of the fuzz driver (its long runs are under ASan; see its docstring):
    # batches read in C fold as msgspec's structs (or the fallback's dicts) fold in Python,
    # callers that misbehave get errors, whole damaged files link alike every way.
    from tests.traces import fuzz_event_text

    stats = fuzz_event_text.run(
        seed=20261127, cases=300, file_every=30, traces=["cpu_only", "amd_trace"]
    )
    assert stats.failures == []
    assert stats.read_in_c > 100 and stats.left_to_msgspec > 100 and stats.files == 10
