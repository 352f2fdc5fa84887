#!/usr/bin/env python3
"""Fuzz the C reader of event text (``_fold.parse_events``) and the fold of what it reads.

Takes the text of real trace events (the shared traces in tests/data/traces/hta) and of
hand-made awkward ones, damages it (bit flips, truncations inside every kind of token, stray
quotes, backslashes and brackets, odd numbers, NaN, long strings, deep nesting, keys twice,
invalid UTF-8, NUL bytes) and checks, for each damaged case (one to three batches folded in
order into one trace):

* ``parse_events`` either leaves a batch to msgspec (None) or reads it, and what it reads folds
  exactly as the reference does: the Python fold of msgspec's structs (or, where msgspec
  refuses the batch, of the dicts the scanner's fallback decoders make). The C fold of the
  structs is checked alongside. A batch the C reader takes that no decoder accepts is a
  failure too: the scanner takes a successful decode as proof of a valid cut.
* every 7th case, callers that misbehave: decoders that raise, return the wrong thing or
  change the list they returned afterwards, a Python fold that drops the batches being folded
  or folds into the same Folder again. An error is fine, a crash is not.
* every 50th case, ``link_trace`` of a whole damaged file (plain or gzip), read through the C
  reader, through msgspec's structs and by the Python fold: the same linked trace, or the same
  ``TraceError``. Any other error is a failure, in a fold of batches as well (a value of the
  wrong type or range, such as a correlation id beyond int64, is a ``TraceValueError``).

Nothing may crash, whatever the text: run it against a build with AddressSanitizer and
UBSan to know (``PYTHONMALLOC=malloc`` so ASan sees every allocation; the driver also poisons
the bytes just before and after each text, so a read one byte outside it is reported)::

    INCLUDE=$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    SUFFIX=$(python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    gcc -shared -fPIC -O1 -g -fsanitize=address,undefined,float-cast-overflow \\
        -fno-sanitize-recover=all -fno-omit-frame-pointer -I$INCLUDE \\
        ncompass/traces/_fold.c -o /tmp/asan/_fold$SUFFIX
    LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \\
        PYTHONMALLOC=malloc python tests/traces/fuzz_event_text.py --seed 1 --seconds 120 \\
        --fold-module /tmp/asan/_fold$SUFFIX --last-input /tmp/last.json

Every case is made from (seed, case number) alone. With ``--last-input`` the text of each case
is written there before it is checked, so a crash leaves its input behind; ``--replay FILE``
checks one saved case, ``--minimise FILE`` (``--crash`` for a crash) shrinks it. This is not a
test module (pytest collects test_*.py): test_event_text.py runs a few hundred cases of it.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FOLD_MODULE = "ncompass.traces._fold"
SHARED_TRACES = REPO / "tests" / "data" / "traces" / "hta"  # as tests/traces/builders.py


def load_fold_module(path: str) -> None:
    """Import ``path`` (a build of _fold.c, e.g. with sanitizers) as ncompass.traces._fold.

    Must run before anything imports ncompass.traces."""
    if "ncompass.traces" in sys.modules:
        raise RuntimeError("load the fold module before importing ncompass.traces")
    import ncompass  # the parent package, without ncompass.traces

    if not Path(ncompass.__file__).is_relative_to(REPO):
        raise RuntimeError(f"ncompass is imported from {ncompass.__file__}, not from {REPO}")
    spec = importlib.util.spec_from_file_location(FOLD_MODULE, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[FOLD_MODULE] = module
    spec.loader.exec_module(module)


# -- the text to damage ------------------------------------------------------------------------

# fmt: off
SYNTHETIC_EVENTS = [
    b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":100,"tid":1,"ts":10,"dur":3}',
    b'{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": 1, "ts": 11.5,'
    b' "dur": 0.25, "args": {"External id": 4, "Sequence number": 7}}',
    b'{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":1,"ts":12,'
    b'"dur":2,"args":{"correlation":41,"cbid":211}}',
    b'{"ph":"X","cat":"cuda_driver","name":"cuLaunchKernel","pid":"100","tid":"t","ts":13,'
    b'"dur":1,"args":{"correlation":42}}',
    b'{"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20,"dur":5.5,'
    b'"args":{"stream":7,"correlation":41,"bytes":4096}}',
    b'{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD","pid":0,"tid":8,"ts":21,"dur":1,'
    b'"args":{"correlation":-1,"bytes":true}}',
    b'{"ph":"X","cat":"gpu_memset","name":"Memset","pid":0,"tid":7,"ts":22,"dur":1,"args":null}',
    b'{"ph":"X","cat":"gpu_user_annotation","name":"range","pid":0,"tid":7,"ts":19,"dur":9}',
    b'{"ph":"X","cat":"cuda_sync","name":"sync","pid":0,"tid":7,"ts":30,"dur":1}',
    b'{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":100,"tid":1,"ts":9,'
    b'"dur":40,"args":{}}',
    b'{"ph":"X","cat":"user_annotation","name":"dynamo_data: compile_id=0/0","pid":100,'
    b'"tid":1,"ts":9.5,"dur":1}',
    b'{"ph":"X","cat":"python_function","name":"f","pid":100,"tid":"main","ts":14,"dur":1}',
    b'{"ph":"B","cat":"cpu_op","name":"paired","pid":100,"tid":1,"ts":15}',
    b'{"ph":"E","pid":100,"tid":1,"ts":16,"args":{"note":1}}',
    b'{"ph":"M","name":"thread_name","pid":100,"tid":5,'
    b'"args":{"name":"overlap","overlap_of_tid":1}}',
    b'{"ph":"i","name":"mark","pid":100,"tid":1,"ts":1,"s":"t"}',
    b'{"ph":"s","id":1,"pid":100,"tid":1,"ts":4,"cat":"ac2g","name":"ac2g"}',
    b'{"ph":"f","id":1,"pid":0,"tid":7,"ts":20,"cat":"ac2g","name":"ac2g","bp":"e"}',
    b'{"ph":"C","name":"memory","pid":100,"ts":17,"args":{"bytes":12}}',
    b'{"ph":"X","cat":"cpu_op","name":"\\u00e9sc\\"aped","pid":100,"tid":1,"ts":18,"dur":1}',
    b'{"ph":"X","cat":"cpu_op","name":"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80","pid":100,'
    b'"tid":1,"ts":18,"dur":2}',
    b'{"ph":"X","cat":"CPU_OP","name":"quoted","pid":100,"tid":1,"ts":"41.5","dur":"1.5"}',
    b'{"ph":"X","cat":"cpu_op","name":7,"pid":100,"tid":1,"ts":42,"dur":true}',
    b'{"ph":"X","cat":"kernel","name":"k","pid":1180591620717411303424,"tid":7,"ts":43,'
    b'"dur":1,"args":{"correlation":3}}',
    b'{"ph":"X","cat":"kernel","name":"big","pid":0,"tid":7,"ts":44,"dur":1,'
    b'"args":{"correlation":9223372036854775808,"bytes":-9223372036854775809}}',
    b'{"ph":"X","cat":"cuda_runtime","name":"cudaMemcpy","pid":100,"tid":1,"ts":45,'
    b'"dur":1,"args":{"correlation":-9223372036854775809}}',
    b'{"ph":"X","cat":"cpu_op","name":"huge","pid":100,"tid":1,"ts":9007199254740993,"dur":1}',
    b'{"ph":5,"pid":100,"tid":1,"ts":81}',
    b'{"ph":"\\u0066","id":1,"pid":1,"tid":1,"ts":15}',
    b"{}",
    b'{"ph":null,"cat":null,"name":null,"pid":null,"tid":null,"ts":null,"dur":null,"args":null}',
]

INTERESTING_VALUES = [
    b"0", b"-0", b"1", b"-1", b"1.5", b"-0.0", b"0.1", b"1e308", b"1.7976931348623157e308",
    b"1e309", b"-1e309", b"1e-400", b"4.9e-324", b"2.2250738585072011e-308", b"1e23",
    b"9007199254740992", b"9007199254740993", b"-9007199254740993", b"9223372036854775807",
    b"9223372036854775808", b"-9223372036854775808", b"-9223372036854775809",
    b"18446744073709551615", b"18446744073709551616", b"123456789012345678901234567890",
    b"1712195495505543.25", b"1712195495505543.2500000000000001", b"8.589973e9",
    b"0." + b"0" * 400 + b"1", b"1" + b"0" * 400, b"1" + b"0" * 400 + b".5",
    b"1e99999999999", b"0e99999999999", b"1e-99999999999", b"123456789012345678.9e-5",
    b"NaN", b"-NaN", b"Infinity", b"-Infinity", b"nan", b"inf",
    b"-", b"1.", b".5", b"01", b"-01", b"1e", b"1e+", b"1e-", b"--1", b"+1", b"1.e5", b"0x10",
    b"true", b"false", b"null", b"tru", b"nul", b"fals", b"True", b"None",
    b'""', b'"X"', b'"B"', b'"E"', b'"M"', b'"i"', b'"C"', b'"s"', b'"cpu_op"', b'"kernel"',
    b'"cuda_runtime"', b'"cuda_driver"', b'"gpu_memcpy"', b'"gpu_memset"',
    b'"gpu_user_annotation"', b'"cuda_sync"', b'"user_annotation"', b'"\\u0058"',
    b'"a\\"b"', b'"\\\\"', b'"\\/"', b'"\\ud800"', b'"\\udc00"', b'"\\ud83d\\ude00"',
    b'"\\u00"', b'"\\uZZZZ"', b'"\\x41"', b'"\\', b'"\xc3\xa9"', b'"\xff"', b'"\xc0\xaf"',
    b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"', b'"\xe2\x82"', b'"\x00"', b'"\x1f"', b'"\x7f"',
    b'"\\u0000"', b'"tab\there"', b"[]", b"{}", b"[1,2]", b"[1,]", b"{,}", b'{"a":}',
    b'{"correlation":1}', b'{"correlation":1,"correlation":2}', b'{"bytes":true}',
    b'{"correlation":-5,"bytes":-1}', b'{"correlation":18446744073709551616}',
    b'{"correl\\u0061tion":1}', b'{"name":"thread","overlap_of_tid":2}', b'{"name":[{}]}',
]

INTERESTING_KEYS = [
    b'"ph"', b'"cat"', b'"name"', b'"pid"', b'"tid"', b'"ts"', b'"dur"', b'"args"',
    b'"correlation"', b'"bytes"', b'"id"', b'"p\\u0068"', b'"\\u0061rgs"', b'"x"', b'""',
    b'"ph\\u0000"', b'"\xff"',
]

INTERESTING_BYTES = (
    b'"\\{}[],:-+.eE0159 \t\n\r\x00\x01\x1f\x7f\x80\xbf\xc0\xc3\xe2\xed\xf0\xf4\xffntfuNI'
)

INSERTIONS = [
    b'"', b"\\", b"\\u", b"\\ud800", b"\\ud83d\\ude00", b"{", b"}", b"[", b"]", b",", b":",
    b"-", b"e", b".", b"E+", b"NaN", b"Infinity", b"-Infinity", b"1e999", b"\x00", b"\xc0\xaf",
    b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xff", b"\xc3", b" ", b"\t", b"\v",
    b"\x0c", b"\r\n", b"null", b"true", b",,", b"},{", b'"x":1,', b'"ph":"X",', b'"ts":1,',
    b'"args":{},',
]

# What a text cut off inside a token ends with: the readers' checks of the last bytes.
UNFINISHED = [
    b'"', b'"\\', b'"\\u', b'"\\u1', b'"\\u12', b'"\\u123', b'"\\u1234', b'"\\ud83d\\ude0',
    b'"\xc3', b'"\xe2\x82', b'"\xf0\x9f\x98', b'"abcdefghijklmnop', b'"abcdefghijklmno\\',
    b"t", b"tr", b"tru", b"f", b"fals", b"n", b"nul", b"-", b"1e", b"1e+", b"1.", b"0.0e-",
    b'"ph"', b'"ph":', b'{"ph"', b"{", b"[",
]
# fmt: on


def long_string(generator: random.Random) -> bytes:
    """A string value long enough for the 16-byte scanning, with something at its end."""
    length = generator.choice([14, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 1000, 100_000])
    body = generator.choice([b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\\n", b"\\u00e9", b"ab\\\\"])
    text = body * length if len(body) == 1 else body * (length // len(body) + 1)
    tail = generator.choice([b"", b"\\", b"\\u12", b"\xc3", b"\x00", b'\\"', b"\xff", b"\n"])
    return b'"' + text + tail + b'"'


def deep(generator: random.Random) -> bytes:
    """Nested arrays or objects around the reader's depth limit (64), and far past it."""
    depth = generator.choice([2, 60, 61, 62, 63, 64, 65, 66, 200, 1100])
    if generator.random() < 0.5:
        text = b"[" * depth + b"]" * depth
    else:
        text = b'{"a":' * depth + b"1" + b"}" * depth
    if generator.random() < 0.3:  # unbalanced
        cut = generator.randrange(len(text))
        text = text[:cut] + text[cut + 1 :]
    return text


def interesting_value(generator: random.Random) -> bytes:
    roll = generator.random()
    if roll < 0.08:
        return long_string(generator)
    if roll < 0.14:
        return deep(generator)
    return generator.choice(INTERESTING_VALUES)


@dataclass
class Corpus:
    """Runs of consecutive event texts, as traces write them, and small whole trace files."""

    runs: list[list[bytes]]
    files: list[bytes]


_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
_SEPARATOR = re.compile(rb"\s*,\s*")


def event_runs(text: bytes, generator: random.Random, runs: int, length: int) -> list[list[bytes]]:
    """Up to ``runs`` runs of up to ``length`` consecutive events of a trace's text."""
    decoder = json.JSONDecoder()
    latin = text.decode("latin-1")  # one character per byte: positions stay byte offsets
    starts = [match.end() - 1 for match in _BETWEEN_EVENTS.finditer(text)]
    found: list[list[bytes]] = []
    for start in sorted(generator.sample(starts, min(runs, len(starts)))):
        run: list[bytes] = []
        position = start
        while len(run) < length:
            try:
                event, end = decoder.raw_decode(latin, position)
            except ValueError:  # the guessed start was inside a string
                break
            if not isinstance(event, dict):
                break
            run.append(text[position:end])
            separator = _SEPARATOR.match(text, end)
            if separator is None or text[separator.end() : separator.end() + 1] != b"{":
                break
            position = separator.end()
        if run:
            found.append(run)
    return found


def load_corpus(seed: int, traces: list[str] | None = None, runs_per_trace: int = 60) -> Corpus:
    """Runs of events from the shared real traces (``traces``: their folders, or all) and the
    hand-made events."""
    generator = random.Random(seed)
    paths = sorted(SHARED_TRACES.rglob("*.json.gz"))
    if traces is not None:
        paths = [path for path in paths if path.relative_to(SHARED_TRACES).parts[0] in traces]
    runs = [[event] for event in SYNTHETIC_EVENTS] + [list(SYNTHETIC_EVENTS)]
    files = []
    for path in paths:
        text = gzip.decompress(path.read_bytes())
        runs += event_runs(text, generator, runs_per_trace, 40)
        if len(text) < 200_000:
            files.append(text)
    return Corpus(runs, files)


# -- damage ----------------------------------------------------------------------------------

_VALUE_START = re.compile(rb":[ \t\n\r]*")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(rb"[-+0-9.eEa-zA-Z]*")
_KEY = re.compile(rb'"(?:[^"\\]|\\.)*"[ \t\n\r]*:', re.DOTALL)
_TRUNCATE_AFTER = [b'"', b"\\", b"0123456789", b":", b",", b"{[", b"}]", b"eE.-",
                   bytes(range(0x80, 0x100)), b"nutf"]  # fmt: skip


def value_end(text: bytes, start: int) -> int:
    """Where the value at ``start`` ends (roughly, in damaged text)."""
    head = text[start : start + 1]
    if head == b'"':
        match = _STRING.match(text, start)
        return match.end() if match else len(text)
    if head in (b"{", b"["):
        depth = 0
        position = start
        while position < len(text):
            string = _STRING.match(text, position)
            if string:
                position = string.end()
                continue
            byte = text[position : position + 1]
            if byte in (b"{", b"["):
                depth += 1
            elif byte in (b"}", b"]"):
                depth -= 1
                if depth == 0:
                    return position + 1
            position += 1
        return len(text)
    scalar = _SCALAR.match(text, start)
    return scalar.end() if scalar else start


def positions_of(text: bytes, byte_class: bytes) -> list[int]:
    return [index for index, byte in enumerate(text) if byte in byte_class]


def mutate(text: bytes, generator: random.Random) -> bytes:
    """``text`` with one random damage."""
    size = len(text)
    roll = generator.randrange(17)
    position = generator.randrange(size + 1)
    if roll == 0 and size:  # flip a bit
        index = min(position, size - 1)
        flipped = text[index] ^ (1 << generator.randrange(8))
        return text[:index] + bytes([flipped]) + text[index + 1 :]
    if roll == 1 and size:  # overwrite a byte with a structural or odd one
        index = min(position, size - 1)
        return text[:index] + bytes([generator.choice(INTERESTING_BYTES)]) + text[index + 1 :]
    if roll == 2:  # insert a byte or a short token
        return text[:position] + generator.choice(INSERTIONS) + text[position:]
    if roll == 3:  # delete a byte or a short range
        return text[:position] + text[position + generator.choice([1, 1, 1, 2, 3, 8, 50]) :]
    if roll in (4, 5):  # truncate anywhere, or right after a byte of one class or a little on
        found = positions_of(text, generator.choice(_TRUNCATE_AFTER))
        if found and generator.random() < 0.7:
            position = generator.choice(found) + generator.choice([0, 1, 1, 2, 3, 4, 5, 6])
        return text[:position] + generator.choice([b"", b"", b"]", b"}]", b'"}]', b"}", b"\\"])
    if roll in (6, 7, 8):  # replace a value
        starts = [match.end() for match in _VALUE_START.finditer(text)]
        if not starts:
            return text
        start = generator.choice(starts)
        return text[:start] + interesting_value(generator) + text[value_end(text, start) :]
    if roll == 9:  # add a member (a key again, an odd key) after an opening brace
        braces = positions_of(text, b"{")
        if not braces:
            return text
        at = generator.choice(braces) + 1
        member = generator.choice(INTERESTING_KEYS) + b":" + interesting_value(generator)
        return text[:at] + member + generator.choice([b",", b",", b"", b" , "]) + text[at:]
    if roll in (10, 11):  # a member twice, or under another key
        keys = list(_KEY.finditer(text))
        if not keys:
            return text
        key = generator.choice(keys)
        if roll == 11:
            return (
                text[: key.start()] + generator.choice(INTERESTING_KEYS) + b":" + text[key.end() :]
            )
        value = _VALUE_START.match(text, key.end() - 1)
        member = text[key.start() : value_end(text, value.end() if value else key.end())]
        return text[: key.start()] + member + b"," + text[key.start() :]
    if roll == 12:  # copy a slice elsewhere
        start = generator.randrange(size + 1)
        piece = text[start : start + generator.choice([1, 4, 16, 64, 512])]
        return text[:position] + piece + text[position:]
    if roll == 13:  # whitespace, some of it not JSON's
        space = generator.choice([b" ", b"\n", b"\t\t", b"\r", b"\v", b"\xc2\xa0"])
        return text[:position] + space + text[position:]
    if roll == 14:  # swap two slices (overlapping ones garble the text more)
        first, second = sorted(generator.randrange(size + 1) for _ in range(2))
        length = generator.choice([1, 2, 5, 20])
        return b"".join([text[:first], text[second : second + length],
                         text[first + length : second], text[first : first + length],
                         text[second + length :]])  # fmt: skip
    # end the text inside a token: inside a string, or after an unfinished one
    strings = list(_STRING.finditer(text))
    if strings and roll == 15:
        string = generator.choice(strings)
        return text[: generator.randint(string.start() + 1, string.end() - 1)]
    return text[:position] + generator.choice(UNFINISHED)


def many_names_batch(generator: random.Random) -> list[bytes]:
    """Enough distinct names, threads and phases to grow the fold's tables."""
    events = []
    for index in range(generator.choice([10, 300, 700])):
        kind = generator.randrange(4)
        if kind == 0:
            events.append(b'{"ph":"X","cat":"cpu_op","name":"op%d","pid":1,"tid":%d,"ts":%d,'
                          b'"dur":1}' % (index, index % 3, index))  # fmt: skip
        elif kind == 1:
            events.append(b'{"ph":"X","cat":"kernel","name":"k%d","pid":%d,"tid":"s%d","ts":%d,'
                          b'"dur":1.5,"args":{"correlation":%d}}'
                          % (index, index % 11, index % 13, index, index))  # fmt: skip
        elif kind == 2:
            events.append(b'{"ph":"X","cat":"cuda_runtime","name":"r%d","pid":1,"tid":%d,'
                          b'"ts":%d,"dur":1,"args":{"correlation":%d}}'
                          % (index % 50, index % 17, index, index))  # fmt: skip
        else:
            events.append(b'{"ph":"p%d","ts":%d}' % (index % 12, index))
    return events


def make_case(corpus: Corpus, seed: int, number: int) -> list[bytes]:
    """The batch texts of case ``number`` of ``seed`` (folded in order into one trace)."""
    generator = random.Random(seed * 1_000_003 + number)
    if generator.random() < 0.03:
        events = many_names_batch(generator)
    else:
        run = generator.choice(corpus.runs)
        start = generator.randrange(len(run))
        events = run[start : start + generator.randint(1, 40)]
        if generator.random() < 0.3:  # mix in hand-made events
            events = events + generator.sample(SYNTHETIC_EVENTS, generator.randint(1, 4))
            generator.shuffle(events)
    cut_count = min(len(events) - 1, generator.choice([0, 0, 1, 2]))
    cuts = sorted(generator.sample(range(1, len(events)), cut_count))
    separator = generator.choice([b",", b", ", b",\n  ", b"\n,\n"])
    texts = [
        b"[" + separator.join(events[low:high]) + b"]"
        for low, high in zip([0, *cuts], [*cuts, len(events)], strict=True)
    ]
    for _ in range(generator.choice([0, 1, 1, 1, 2, 2, 3, 5])):
        which = generator.randrange(len(texts))
        texts[which] = mutate(texts[which], generator)
    return texts


def make_file(corpus: Corpus, seed: int, number: int) -> tuple[bytes, bool]:
    """A whole damaged trace file for case ``number`` of ``seed``, and whether to gzip it."""
    generator = random.Random(seed * 1_000_003 + number + 500_000_000)
    if corpus.files and generator.random() < 0.2:
        text = generator.choice(corpus.files)
    else:
        events = b",\n".join(batch[1:-1] for batch in make_case(corpus, seed, number))
        text = b'{"schemaVersion":1,"traceEvents":[' + events + b'],"baseTimeNanoseconds":17}'
    for _ in range(generator.choice([0, 1, 1, 2, 3])):
        text = mutate(text, generator)
    return text, generator.random() < 0.2


# -- checks ----------------------------------------------------------------------------------


class Mismatch(Exception):
    """The C reader and the reference disagree (or the C reader took what none accepts)."""


def comparable(value: Any) -> Any:
    """``value`` in a form that compares exactly: floats by their bits, ints apart from floats
    and bools, dicts in their order."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, dict):
        return ("dict", [(comparable(key), comparable(item)) for key, item in value.items()])
    if isinstance(value, (list, tuple)) or type(value).__name__ == "array":
        return (type(value).__name__, [comparable(item) for item in value])
    if hasattr(value, "__dataclass_fields__"):
        fields = [(name, comparable(getattr(value, name))) for name in value.__dataclass_fields__]
        return (type(value).__name__, fields)
    return (type(value).__name__, repr(value))


def linked_state(trace: Any) -> Any:
    """Everything a LinkedTrace holds but its path, comparable."""
    fields = dict(trace.__dict__)
    fields.pop("path")
    return comparable(fields)


def diff(left: Any, right: Any) -> str:
    """Where two linked states first differ."""
    if left[0] != "dict" or right[0] != "dict":
        return f"  {str(left)[:500]}\n  vs {str(right)[:500]}"
    right_fields = dict(right[1])
    for key, value in left[1]:
        if value != right_fields.get(key):
            return f"  {key}: {str(value)[:400]}\n  vs {str(right_fields.get(key))[:400]}"
    return "  (the same fields, in another order)"


@dataclass
class Stats:
    """What a run checked and found."""

    cases: int = 0
    read_in_c: int = 0
    read_in_c_not_by_msgspec: int = 0
    left_to_msgspec: int = 0
    files: int = 0
    file_trace_errors: int = 0
    raises: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def note_raise(self, where: str, name: str) -> None:
        key = f"{where} raised {name}"
        self.raises[key] = self.raises.get(key, 0) + 1

    def summary(self) -> str:
        return (
            f"{self.cases} cases: {self.read_in_c} batches read in C ({self.read_in_c_not_by_msgspec}"
            f" of them refused by msgspec), {self.left_to_msgspec} left to msgspec; "
            f"{self.files} whole files ({self.file_trace_errors} TraceError); batches refused "
            f"alike every way: {self.raises or 'none'}; failures: {len(self.failures)}"
        )


class AsanPoisoner:
    """Marks the bytes just before and after a bytes object's text unreadable to code built
    with ASan (CPython keeps a NUL after the text, which would hide a read one past its end;
    the 8 bytes before it are the object's cached hash)."""

    _TEXT_OFFSET = sys.getsizeof(b"") - 1

    def __init__(self) -> None:
        import ctypes

        process = ctypes.CDLL(None)
        # getattr: a name with two leading underscores is mangled in a class body
        self._poison = getattr(process, "__asan_poison_memory_region")
        self._unpoison = getattr(process, "__asan_unpoison_memory_region")
        for function in (self._poison, self._unpoison):
            function.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            function.restype = None

    def poison(self, text: bytes) -> None:
        if len(text) > 1:  # not the shared empty and one-byte objects
            start = id(text) + self._TEXT_OFFSET
            self._poison(start - 8, 8)  # a whole 8-byte granule
            self._poison(start + len(text), 1)  # the NUL, the last byte of the allocation

    def unpoison(self, text: bytes) -> None:
        if len(text) > 1:
            start = id(text) + self._TEXT_OFFSET
            self._unpoison(start - 8, 8)
            self._unpoison(start + len(text), 1)


class Fuzzer:
    """The checks, with the modules of whichever build of _fold was loaded."""

    def __init__(self, poison: bool = False) -> None:
        import orjson

        from ncompass.errors import TraceError
        from ncompass.traces import _collector, _decode, _scanner, link, reader

        self.orjson = orjson
        # the scanner's stdlib fallback reads integers as orjson does
        self.read_integer = _scanner._read_integer
        self.trace_error = TraceError
        self.collector_module, self.link, self.reader = _collector, link, reader
        self.fold: Any = _collector._fold
        if self.fold is None or _decode.decode_link_structs is None:
            raise RuntimeError("the C extension and msgspec are both needed")
        self.decode_structs: Callable[[bytes], Any] = _decode.decode_link_structs
        self.event_type, self.args_type = _decode.link_event_type, _decode.link_args_type
        self.poisoner = AsanPoisoner() if poison else None

    # batches

    def reference_events(self, text: bytes) -> list[Any] | None:
        """What the scanner makes of a batch without the C reader: msgspec's structs, else the
        fallback decoders' dicts (None: no decoder takes it)."""
        structs = self.decode_structs(text)
        if structs is not None:
            return structs
        try:
            decoded = self.orjson.loads(text)
        except self.orjson.JSONDecodeError:
            try:
                decoded = json.loads(
                    text.decode("utf-8", errors="replace"), parse_int=self.read_integer
                )
            except (ValueError, RecursionError):
                return None
        if not isinstance(decoded, list):
            return None
        return [event for event in decoded if isinstance(event, dict)]

    def new_collector(self) -> Any:
        return self.collector_module.Collector(self.collector_module.LinkedTrace(Path("f.json")))

    def fold_all(self, batches: list[list[Any]], in_c: bool) -> Any:
        """The linked state of the batches folded in order (in C, or all by the Python fold)."""
        collector = self.new_collector()
        if not in_c:
            collector._folder = None
        try:
            for batch in batches:
                collector.add(batch)
            trace = collector.finish()
            self.link._link_gpu_events_to_launches(trace)
            self.link._link_launches_and_markers(trace)
        except self.trace_error as error:  # compared: each way must refuse alike
            return ("TraceError", type(error).__name__, str(error))
        except Exception as error:  # a failure (check_batches)
            return ("raised", type(error).__name__)
        return linked_state(trace)

    def check_batches(self, texts: list[bytes], stats: Stats) -> None:
        """The batches as the C reader reads them fold as the reference does."""
        texts = [bytes(bytearray(text)) for text in texts]  # objects of their own, to poison
        references = [self.reference_events(text) for text in texts]
        by_msgspec = [self.decode_structs(text) is not None for text in texts]
        from_c: list[list[Any]] = []
        reference: list[list[Any]] = []
        if self.poisoner is not None:
            for text in texts:
                self.poisoner.poison(text)
        try:
            for text, events, msgspec_reads in zip(texts, references, by_msgspec, strict=True):
                batch = self.fold.parse_events(text, self.decode_structs)
                if batch is None:
                    stats.left_to_msgspec += 1
                    if events is not None:
                        from_c.append(events)
                        reference.append(events)
                    continue
                stats.read_in_c += 1
                if events is None:
                    raise Mismatch("the C reader took a batch no decoder accepts")
                stats.read_in_c_not_by_msgspec += not msgspec_reads
                if len(batch) != len(events):
                    raise Mismatch(f"{len(batch)} events read in C, {len(events)} decoded")
                from_c.append([batch])
                reference.append(events)
            folded_text = self.fold_all(from_c, in_c=True)
        finally:
            if self.poisoner is not None:
                for text in texts:
                    self.poisoner.unpoison(text)
        folded_structs = self.fold_all(reference, in_c=True)
        folded_python = self.fold_all(reference, in_c=False)
        for folded in (folded_text, folded_structs, folded_python):
            if folded[0] == "raised":
                raise Mismatch(f"the fold raised {folded[1]}, not a TraceError")
        if folded_python[0] == "TraceError":
            stats.note_raise("the fold", folded_python[1])
        if folded_text != folded_python:
            raise Mismatch(
                f"the C reader's records fold otherwise:\n{diff(folded_text, folded_python)}"
            )
        if folded_structs != folded_python:
            raise Mismatch(f"the C fold of structs differs:\n{diff(folded_structs, folded_python)}")

    # callers that misbehave: an error is fine, a crash is not

    def check_hostile_decoders(self, text: bytes) -> None:
        kept: list[Any] = []

        def keeps_its_list(events: bytes) -> Any:
            decoded = self.decode_structs(events)
            if decoded is not None:
                kept.append(decoded)
            return decoded

        def raises(events: bytes) -> Any:
            raise KeyError("decode")

        for decode in (raises, lambda events: [1], lambda events: (), keeps_its_list):
            try:
                batch = self.fold.parse_events(text, decode)
            except KeyError:
                continue
            for decoded in kept:
                decoded.clear()  # the list parse_events was given changes afterwards
            if batch is not None:
                self.fold_all([[batch]], in_c=True)

    def new_folder(self, collector: Any, **callbacks: Any) -> Any:
        return self.fold.Folder(
            collector,
            collector.trace,
            self.event_type,
            self.args_type,
            callbacks.get("fold_in_python", collector._add_in_python),
            callbacks.get("new_operator", collector._new_operator),
            collector._kernel_class_of,
        )

    def check_hostile_callbacks(self, texts: list[bytes]) -> None:
        # a Python fold that drops the batches being folded
        events = [self.fold.parse_events(text, self.decode_structs) for text in texts]
        events = [batch for batch in events if batch is not None]
        collector = self.new_collector()

        def fold_and_drop(pending: list[Any]) -> None:
            collector._add_in_python(pending)
            events.clear()

        with contextlib.suppress(Exception):
            self.new_folder(collector, fold_in_python=fold_and_drop).fold(events)
        # a Python callback that folds into the same Folder while it folds (and grows its
        # table of names, which the fold in progress points into)
        names = b",".join(
            b'{"ph":"X","cat":"cpu_op","name":"again%d","ts":%d,"dur":1}' % (index, index)
            for index in range(300)
        )
        again = self.fold.parse_events(b"[" + names + b"]", self.decode_structs)
        collector = self.new_collector()

        def new_operator(name: str) -> Any:
            with contextlib.suppress(RuntimeError):
                folder.fold([again])
            return collector._new_operator(name)

        folder = self.new_folder(collector, new_operator=new_operator)
        with contextlib.suppress(Exception):
            folder.fold([again])

    # whole files

    def link_file(self, path: Path, way: str) -> Any:
        """``link_trace`` of the file read through the C reader (``text``), msgspec's structs
        (``structs``) or folded in Python (``python``): its state, or the error."""
        saved = (self.reader.decode_link_events, self.collector_module._fold, self.link._fold)
        try:
            if way != "text":
                self.reader.decode_link_events = self.decode_structs
            if way == "python":
                self.collector_module._fold = self.link._fold = None
            try:
                return linked_state(self.link.link_trace(path, progress=False))
            except self.trace_error as error:
                return ("TraceError", type(error).__name__, str(error))
            except Exception as error:
                return ("raised", type(error).__name__)
        finally:
            self.reader.decode_link_events, self.collector_module._fold, self.link._fold = saved

    def check_file(self, text: bytes, compressed: bool, directory: Path, stats: Stats) -> None:
        path = directory / ("fuzz.json.gz" if compressed else "fuzz.json")
        path.write_bytes(gzip.compress(text, compresslevel=1) if compressed else text)
        results = {way: self.link_file(path, way) for way in ("text", "structs", "python")}
        stats.files += 1
        stats.file_trace_errors += results["python"][0] == "TraceError"
        for way, result in results.items():
            if result[0] == "raised":
                raise Mismatch(f"link_trace {way} raised {result[1]}, not a TraceError")
        if results["text"] != results["python"] or results["structs"] != results["python"]:
            raise Mismatch(
                "link_trace differs: "
                + "; ".join(f"{way}: {str(result)[:300]}" for way, result in results.items())
            )


def save_case(path: Path, texts: list[bytes]) -> None:
    path.write_bytes(json.dumps([text.decode("latin-1") for text in texts]).encode())


def read_case(path: Path) -> list[bytes]:
    """A case saved by ``save_case`` (a JSON list of batch texts, one character a byte)."""
    return [text.encode("latin-1") for text in json.loads(path.read_bytes())]


def run(
    seed: int,
    cases: int | None = None,
    seconds: float | None = None,
    file_every: int = 50,
    hostile_every: int = 7,
    traces: list[str] | None = None,
    poison: bool = False,
    last_input: Path | None = None,
    save: Path | None = None,
    progress: bool = False,
) -> Stats:
    """Check cases 0, 1, ... of ``seed`` until ``cases`` or ``seconds`` run out."""
    corpus = load_corpus(seed, traces)
    fuzzer = Fuzzer(poison)
    stats = Stats()
    started = time.monotonic()
    deadline = None if seconds is None else started + seconds
    with tempfile.TemporaryDirectory() as directory:
        number = 0
        while (cases is None or number < cases) and (
            deadline is None or time.monotonic() < deadline
        ):
            texts = make_case(corpus, seed, number)
            if last_input is not None:
                save_case(last_input, texts)
            try:
                fuzzer.check_batches(texts, stats)
                if hostile_every and number % hostile_every == 0:
                    fuzzer.check_hostile_decoders(texts[0])
                    fuzzer.check_hostile_callbacks(texts)
                if file_every and number % file_every == 0:
                    text, compressed = make_file(corpus, seed, number)
                    if last_input is not None:
                        last_input.with_suffix(".file").write_bytes(text)
                    fuzzer.check_file(text, compressed, Path(directory), stats)
            except Mismatch as error:
                stats.failures.append(f"seed {seed} case {number}: {error}")
                if save is not None:
                    save.mkdir(parents=True, exist_ok=True)
                    save_case(save / f"seed{seed}-case{number}.json", texts)
            number += 1
            stats.cases = number
            if progress and number % 5000 == 0:
                print(f"  seed {seed}: {number} cases, {time.monotonic() - started:.0f} s")
    return stats


def check_one(texts: list[bytes], poison: bool) -> str | None:
    """The failure of one case, or None."""
    fuzzer = Fuzzer(poison)
    try:
        fuzzer.check_batches(texts, Stats())
    except Mismatch as error:
        return str(error)
    fuzzer.check_hostile_decoders(texts[0])
    fuzzer.check_hostile_callbacks(texts)
    return None


def crashes(texts: list[bytes], fold_module: str | None) -> bool:
    """Whether checking ``texts`` in a fresh interpreter ends in a sanitizer report or a
    signal."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "case.json"
        save_case(path, texts)
        command = [sys.executable, __file__, "--replay", str(path)]
        if fold_module:
            command += ["--fold-module", fold_module]
        done = subprocess.run(command, capture_output=True, timeout=300, check=False)
    report = done.stderr.decode(errors="replace")
    return done.returncode < 0 or "Sanitizer" in report or "runtime error" in report


def minimise(texts: list[bytes], fails: Callable[[list[bytes]], bool]) -> list[bytes]:
    """A smaller case that still fails: fewer batches, then fewer bytes (ddmin-like)."""
    shrunk = True
    while shrunk and len(texts) > 1:
        shrunk = False
        for index in range(len(texts)):
            fewer = [*texts[:index], *texts[index + 1 :]]
            if fails(fewer):
                texts, shrunk = fewer, True
                break
    for index in range(len(texts)):
        chunk = max(1, len(texts[index]) // 2)
        while chunk >= 1:
            start, shrunk = 0, False
            while start < len(texts[index]):
                text = texts[index]
                trial = [*texts[:index], text[:start] + text[start + chunk :], *texts[index + 1 :]]
                if fails(trial):
                    texts, shrunk = trial, True
                else:
                    start += chunk
            if not shrunk:
                chunk //= 2
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seed", type=int, action="append", help="a seed to run (repeatable)")
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget per seed")
    parser.add_argument("--cases", type=int, help="at most this many cases per seed")
    parser.add_argument("--file-every", type=int, default=50, help="a whole file every N cases")
    parser.add_argument("--traces", nargs="*", help="the shared traces (folders) to take")
    parser.add_argument("--fold-module", help="a build of _fold.c to use (e.g. with ASan)")
    parser.add_argument("--last-input", type=Path, help="write each case here before checking")
    parser.add_argument("--save", type=Path, help="save failing cases in this directory")
    parser.add_argument("--replay", type=Path, help="check one saved case")
    parser.add_argument("--minimise", type=Path, help="shrink a saved failing case")
    parser.add_argument("--crash", action="store_true", help="with --minimise: the case crashes")
    arguments = parser.parse_args(argv)
    if arguments.fold_module:
        load_fold_module(arguments.fold_module)
    poison = "asan" in os.environ.get("LD_PRELOAD", "")
    if arguments.replay:
        failure = check_one(read_case(arguments.replay), poison)
        print(failure or "no failure")
        return 1 if failure else 0
    if arguments.minimise:
        texts = read_case(arguments.minimise)
        if arguments.crash:
            smallest = minimise(texts, lambda trial: crashes(trial, arguments.fold_module))
        else:
            smallest = minimise(texts, lambda trial: check_one(trial, poison) is not None)
        print(json.dumps([text.decode("latin-1") for text in smallest]))
        return 0
    failed = False
    for seed in arguments.seed or [0]:
        started = time.monotonic()
        stats = run(
            seed,
            cases=arguments.cases,
            seconds=arguments.seconds,
            file_every=arguments.file_every,
            traces=arguments.traces,
            poison=poison,
            last_input=arguments.last_input,
            save=arguments.save,
            progress=True,
        )
        elapsed = time.monotonic() - started
        print(f"seed {seed}, {elapsed:.0f} s (tails poisoned: {poison}): {stats.summary()}")
        for failure in stats.failures[:10]:
            print("  " + failure)
        failed = failed or bool(stats.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))  # this checkout's ncompass, not an installed one
    sys.exit(main())
