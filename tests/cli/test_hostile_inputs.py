"""Inputs a careless or hostile user could give, through the real CLI: each is refused with one
line and exit 2, quickly, in bounded memory, and no input file is ever changed."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import time
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from tests.traces.builders import TraceBuilder, shared_trace

USER_ERROR = 2

BILLION_LAUGHS = """\
version: 1
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
targets: [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def run(*args: str | Path) -> tuple[int, str]:
    """Exit code and stderr of ``ncompass ARGS``."""
    result = CliRunner().invoke(ncompass_cli, [str(arg) for arg in args])
    return result.exit_code, result.stderr


def assert_refused(code: int, stderr: str, *expected: str) -> None:
    """Exit 2 and one line of error that says ``expected``; no traceback."""
    assert code == USER_ERROR, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    """A real (small) Kineto trace the test may try to damage."""
    copy = tmp_path / "run.json.gz"
    shutil.copyfile(shared_trace("trace_filter"), copy)
    return copy


# -- specs ----------------------------------------------------------------------------------------


def test_alias_bomb_is_refused_in_well_under_a_second_and_little_memory(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(BILLION_LAUGHS)
    before = spec.read_bytes()
    started = time.perf_counter()
    tracemalloc.start()
    try:
        code, stderr = run("spec", "validate", spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - started
    assert_refused(code, stderr, f"{spec}:7:", "more than 100,000 values", "aliases")
    assert elapsed < 1.0 and peak < 64 << 20, (elapsed, peak)
    assert spec.read_bytes() == before


def test_a_few_aliases_are_still_fine(tmp_path: Path) -> None:
    spec = tmp_path / "anchors.yaml"
    spec.write_text(
        "version: 1\ntargets:\n"
        "  - module: json.decoder\n    requires: &needs pyyaml>=5\n"
        "    functions: [{qualname: JSONDecoder.decode}]\n"
        "  - module: json.encoder\n    requires: *needs\n"
        "    functions: [{qualname: JSONEncoder.encode}]\n"
    )
    code, stderr = run("spec", "validate", spec)
    assert code == 0, stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("version: 1\ntargets: &t\n  - *t\n", ("rec.yaml:3:", "recursive alias")),
        ("version: 1\ntargets: " + "[" * 5000 + "]" * 5000 + "\n", ("rec.yaml:2:", "100 levels")),
        ("version: 1\ntargets: " + "[" * 500_000, ("rec.yaml:2:", "100 levels")),
        ("version: 1\n" + "# padding\n" * 120_000, ("rec.yaml:", "larger than 1 MiB")),
    ],
    ids=["recursive-alias", "deep-nesting", "deeper-unclosed", "huge-file"],
)
def test_specs_past_a_limit_are_refused_with_the_line(
    tmp_path: Path, text: str, expected: tuple[str, ...]
) -> None:
    spec = tmp_path / "rec.yaml"
    spec.write_text(text)
    started = time.perf_counter()
    code, stderr = run("spec", "validate", spec)
    assert_refused(code, stderr, *expected)
    assert time.perf_counter() - started < 1.0


def test_deeply_nested_json_spec_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "deep.json"
    spec.write_text('{"version": 1, "targets": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, stderr = run("spec", "validate", spec)
    assert_refused(code, stderr, f"{spec}:1:", "deeper than 100 levels")


def test_run_refuses_an_alias_bomb_spec_before_running(tmp_path: Path) -> None:
    spec = tmp_path / "bomb.yaml"
    spec.write_text(BILLION_LAUGHS)
    script = tmp_path / "script.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    code, stderr = run("run", "--config", spec, "-o", tmp_path / "out", script)
    assert_refused(code, stderr, f"{spec}:7:")


# -- traces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "document",
    [
        '{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}",
        '{"traceEvents": [{"name": "x", "ph": "X", "args": '
        + "[" * 100_000
        + "]" * 100_000
        + "}]}",
    ],
    ids=["nested-arrays", "nested-args"],
)
@pytest.mark.parametrize("command", ["summarize", "breakdown"])
def test_deeply_nested_trace_is_one_line_not_a_traceback(
    tmp_path: Path, document: str, command: str
) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(document)
    code, stderr = run(command, deep)
    assert_refused(code, stderr, str(deep), "more than 1000 levels deep")


ODD_VALUES = {
    # found by fuzzing: OverflowError, TypeError: unhashable type
    "correlation beyond int64": (
        {"cat": "kernel", "args": {"correlation": 2**63}},
        "has args.correlation 9223372036854775808, which does not fit in 64 bits",
    ),
    "launch correlation beyond uint64": (
        {"cat": "cuda_runtime", "args": {"correlation": 2**64}},
        "has args.correlation 1.8446744073709552e+19, which does not fit in 64 bits",
    ),
    "memcpy bytes beyond int64": (
        {"cat": "gpu_memcpy", "args": {"bytes": 2**63 + 5}},
        "has args.bytes 9223372036854775813, which does not fit in 64 bits",
    ),
    "pid a list": ({"pid": [1]}, "has a pid that is a list, not a number or a string"),
    "tid an object": ({"tid": {"a": 1}}, "has a tid that is an object, not a number or a string"),
    "name an object": ({"name": {"a": 1}}, "has a name that is an object, not a string"),
    "ts too large for a float": ({"ts": 10**400}, "has a ts of 1000"),
}


@pytest.mark.parametrize("odd", ODD_VALUES, ids=list(ODD_VALUES))
@pytest.mark.parametrize("command", ["summarize", "breakdown"])
def test_a_value_linking_cannot_use_is_one_line_not_a_traceback(
    tmp_path: Path, odd: str, command: str
) -> None:
    changes, expected = ODD_VALUES[odd]
    builder = TraceBuilder().marker("step", 0, 100)
    builder.launch("k", 1, 2, 10, 5)
    odd_event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 1,
                 "args": {"correlation": 1}}  # fmt: skip
    builder.add(**{**odd_event, **changes})
    path = builder.write(tmp_path / "odd.json")
    code, stderr = run(command, path)
    assert_refused(code, stderr, f"{path}: cannot link the trace: the 4th event", expected)


def test_a_name_nested_deep_in_lists_is_one_line_not_a_recursion_error(tmp_path: Path) -> None:
    # str() of the name took Python's recursion limit (at the CLI's stack depth)
    path = tmp_path / "deep.json"
    event = '{"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "name": '
    path.write_text('{"traceEvents": [' + event + "[" * 990 + "1" + "]" * 990 + "}]}")
    code, stderr = run("summarize", path)
    assert_refused(code, stderr, f"{path}: cannot link the trace: the 1st event", "is a list")


def test_a_bad_trace_read_in_a_worker_process_is_one_line(tmp_path: Path) -> None:
    # the error came back from the worker as BrokenProcessPool: it did not unpickle
    good = TraceBuilder().marker("step", 0, 100).write(tmp_path / "good.json")
    odd = TraceBuilder().marker("step", 0, 100).add(ph="B", pid=[1], tid=1, ts=5)
    odd_path = odd.write(tmp_path / "odd.json")
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(good.read_bytes()[:40])
    code, stderr = run("summarize", "-j", "2", good, odd_path)
    assert_refused(code, stderr, f'{odd_path}: cannot link the trace: the 2nd event (ph "B")')
    code, stderr = run("summarize", "-j", "2", good, truncated)
    assert_refused(code, stderr, f"{truncated}: cannot read the trace at byte")


def test_deeply_nested_header_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"meta": ' + "[" * 100_000 + "]" * 100_000 + ', "traceEvents": []}')
    code, stderr = run("summarize", deep)
    assert_refused(code, stderr, str(deep), "cannot read the trace")


# -- no command writes over its input -------------------------------------------------------------


def _same_file_spellings(trace: Path) -> list[Path]:
    """Other names of ``trace``: relative with ``./`` and ``..``, a symlink, a hard link."""
    symlink = trace.with_name("link.json.gz")
    symlink.symlink_to(trace)
    hard = trace.with_name("hard.json.gz")
    os.link(trace, hard)
    relative = Path(os.path.relpath(trace.parent)) / "." / trace.name
    dotted = trace.parent / ".." / trace.parent.name / trace.name
    return [trace, relative, dotted, symlink, hard]


def test_filter_never_overwrites_its_input(trace: Path) -> None:
    before = trace.read_bytes()
    for output in _same_file_spellings(trace):
        code, stderr = run("filter", trace, "-o", output)
        assert_refused(code, stderr, "is an input of this command", "choose another output")
        assert trace.read_bytes() == before, output
    assert sorted(p.name for p in trace.parent.iterdir()) == [
        "hard.json.gz",
        "link.json.gz",
        "run.json.gz",
    ]


def test_filter_to_another_file_still_works(trace: Path) -> None:
    code, stderr = run("filter", trace, "-o", trace.with_name("kept.json"))
    assert code == 0 and "wrote" in stderr


def test_merge_refuses_to_write_over_any_of_its_traces(trace: Path) -> None:
    second = trace.with_name("rank1.json.gz")
    shutil.copyfile(shared_trace("trace_filter").with_name("sampled_rank-1.json.gz"), second)
    before = second.read_bytes()
    code, stderr = run("merge", trace, second, "-o", second)
    assert_refused(code, stderr, str(second), "is an input")
    assert second.read_bytes() == before


def test_summarize_html_refuses_to_replace_the_trace(trace: Path) -> None:
    before = trace.read_bytes()
    code, stderr = run("summarize", trace, "--html", trace)
    assert_refused(code, stderr, "is an input")
    assert trace.read_bytes() == before


def test_summarize_of_several_traces_refuses_to_replace_one(trace: Path) -> None:
    second = trace.with_name("rank1.json.gz")
    shutil.copyfile(shared_trace("trace_filter").with_name("sampled_rank-1.json.gz"), second)
    before = second.read_bytes()
    code, stderr = run("summarize", trace, second, "--html", second)
    assert_refused(code, stderr, "is an input")
    assert second.read_bytes() == before


def test_compare_html_refuses_to_replace_either_side(trace: Path) -> None:
    after = trace.with_name("after.json.gz")
    shutil.copyfile(trace, after)
    before_bytes = trace.read_bytes()
    for output in (trace, after):
        code, stderr = run("compare", trace, "--", after, "--html", output)
        assert_refused(code, stderr, "is an input")
        assert output.read_bytes() == before_bytes


def test_compare_html_to_another_file_is_written_whole(trace: Path) -> None:
    after = trace.with_name("after.json.gz")
    shutil.copyfile(trace, after)
    page = trace.with_name("compare.html")
    code, stderr = run("compare", trace, "--", after, "--html", page)
    assert code == 0, stderr
    assert page.read_text(encoding="utf-8").rstrip().endswith("</html>")
    assert sorted(p.name for p in trace.parent.iterdir()) == [
        "after.json.gz",
        "compare.html",
        "run.json.gz",
    ]


def test_convert_refuses_to_replace_the_report(tmp_path: Path) -> None:
    report = tmp_path / "run.sqlite"
    report.write_bytes(b"SQLite format 3\x00" + bytes(100))
    before = report.read_bytes()
    code, stderr = run("convert", report, "-o", report)
    assert_refused(code, stderr, "is an input")
    assert report.read_bytes() == before


def test_spec_migrate_refuses_its_input_even_with_force(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text('{"targets": {"json.decoder": {"func_line_range_wrappings": []}}}')
    before = old.read_bytes()
    code, stderr = run("spec", "migrate", old, "-o", old, "--force")
    assert_refused(code, stderr, "is an input")
    assert old.read_bytes() == before


def test_run_refuses_a_trace_name_that_is_its_spec(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text('{"version": 1, "targets": []}')
    before = spec.read_bytes()
    script = tmp_path / "script.py"
    script.write_text("raise SystemExit('the script must not run')\n")
    code, stderr = run("run", "--config", spec, "-o", tmp_path, "--trace-name", "spec", script)
    assert_refused(code, stderr, "spec.json is an input")
    assert spec.read_bytes() == before


def test_session_feedback_text_has_a_length_limit(tmp_path: Path) -> None:
    text = "why is this slow? " * 1000
    code, stderr = run(
        "session", "feedback", "--output-dir", tmp_path, "--target", "json.decoder:1-5", text
    )
    assert_refused(code, stderr, "the most accepted is 10,000")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="sqlite3 limits need Python 3.11")
def test_convert_refuses_a_report_value_past_the_limit(tmp_path: Path) -> None:
    report = tmp_path / "huge.sqlite"
    with sqlite3.connect(report) as db:
        db.execute(
            "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, "
            "eventType INTEGER NOT NULL, text TEXT, globalTid INTEGER)"
        )
        db.execute("INSERT INTO NVTX_EVENTS VALUES (1000, 5000, 59, ?, 7)", ("x" * (17 << 20),))
    db.close()
    code, stderr = run("convert", report, "-o", tmp_path / "out.json")
    assert_refused(code, stderr, str(report), "larger than 16 MiB")
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("odd", ODD_VALUES, ids=list(ODD_VALUES))
def test_merge_carries_an_odd_value_or_refuses_it_in_one_line(tmp_path: Path, odd: str) -> None:
    changes, _ = ODD_VALUES[odd]
    builder = TraceBuilder().marker("step", 0, 100)
    builder.metadata["distributedInfo"] = {"rank": 5}  # beside the shared rank 0
    builder.add(**{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20,
                   "dur": 1, **changes})  # fmt: skip
    path = builder.write(tmp_path / "odd.json")
    merged = tmp_path / "merged.json"
    code, stderr = run("merge", path, shared_trace("trace_filter"), "-o", merged)
    if code == 0:
        assert merged.stat().st_size > 0, stderr
    else:
        assert_refused(code, stderr, f"{path}: cannot merge the trace")
        assert not merged.exists()
