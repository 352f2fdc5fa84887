"""The NVTX recorder: building it, attaching it to real processes, reading and converting output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from ncompass.capture.nvtx_recorder import (
    INJECTION_VARIABLE,
    OUTPUT_VARIABLE,
    NvtxRecording,
    build_recorder,
    environment,
    find_compiler,
    library_path,
    read_recording,
    read_recordings,
    to_chrome_events,
    to_chrome_trace,
)
from ncompass.errors import CaptureError, TraceError

Run = Callable[..., list[NvtxRecording]]


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if find_compiler() is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH: cannot build the NVTX recorder")
    return build_recorder(tmp_path_factory.mktemp("cache"))


@pytest.fixture
def run_python(library: Path, tmp_path: Path) -> Run:
    """Runs Python source in a recorded child; returns every process's recording."""

    def run(source: str, **extra_env: str) -> list[NvtxRecording]:
        script = tmp_path / "child.py"
        script.write_text(textwrap.dedent(source))
        output_dir = tmp_path / "out"
        env = {**os.environ, **environment(output_dir, library=library), **extra_env}
        result = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        return read_recordings(output_dir)

    return run


# ------------------------------------------------------------------------------------ building


def test_build_is_cached_by_source_hash(library: Path) -> None:
    assert library.exists()
    assert library == library_path(library.parent)
    modified = library.stat().st_mtime_ns
    assert build_recorder(library.parent) == library
    assert library.stat().st_mtime_ns == modified, "a cached build is not rebuilt"
    assert not [p for p in library.parent.iterdir() if p.suffix in {".tmp", ".c"}]


def test_missing_compiler_is_a_clear_capture_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(CaptureError, match=r"no C compiler found .*apt-get install gcc"):
        build_recorder(tmp_path / "cache")


def test_compiler_failure_reports_the_compiler_output(tmp_path: Path) -> None:
    false = tmp_path / "fakecc"
    false.write_text("#!/bin/sh\necho 'fakecc: cannot do it' >&2\nexit 3\n")
    false.chmod(0o755)
    with pytest.raises(CaptureError, match=r"(?s)exit code 3.*fakecc: cannot do it"):
        build_recorder(tmp_path / "cache", compiler=str(false))


def test_environment_names_the_library_and_a_per_process_output(
    library: Path, tmp_path: Path
) -> None:
    variables = environment(tmp_path / "new" / "dir", library=library)
    assert variables[INJECTION_VARIABLE] == str(library)
    assert variables[OUTPUT_VARIABLE].endswith("nvtx-%p.jsonl")
    assert (tmp_path / "new" / "dir").is_dir()


# ------------------------------------------------------------------------------------ recording

NVTX_PACKAGE_CHILD = """
import os
import threading
import nvtx

ours = nvtx.get_domain("ncompass")
other = nvtx.get_domain("other-library")

ours.push_range(ours.get_event_attributes(message="outer", color=0xFF112233, payload=7))
other.push_range(message="foreign", category="io")
other.pop_range()
ours.push_range(message="inner", payload=2.5)
ours.pop_range()
ours.pop_range()

with nvtx.annotate("default-domain"):
    nvtx.mark("tick", payload=3)

range_id = ours.start_range(message="crossing")
ender = threading.Thread(target=ours.end_range, args=(range_id,), name="ender")
ender.start()
ender.join()

def worker():
    with nvtx.annotate("in-worker", domain="ncompass"):
        pass

thread = threading.Thread(target=worker)
thread.start()
thread.join()

ours.push_range(message="left-open")
"""


def test_records_domains_nesting_payloads_categories_marks_and_threads(run_python: Run) -> None:
    (recording,) = run_python(NVTX_PACKAGE_CHILD)
    ranges = {r.name: r for r in recording.ranges}

    assert set(recording.domains.values()) >= {"", "ncompass", "other-library"}
    assert (ranges["outer"].domain, ranges["outer"].depth) == ("ncompass", 0)
    assert ranges["outer"].color == 0xFF112233
    assert ranges["outer"].payload == 7
    assert (ranges["inner"].depth, ranges["inner"].payload) == (1, 2.5)
    # Another domain has its own stack: "foreign" is outermost there.
    assert (ranges["foreign"].domain, ranges["foreign"].depth) == ("other-library", 0)
    assert ranges["foreign"].category_name == "io"
    assert ranges["default-domain"].domain == ""

    (mark,) = recording.marks
    assert (mark.name, mark.payload, mark.domain) == ("tick", 3, "")
    assert ranges["default-domain"].start_ns <= mark.time_ns <= ranges["default-domain"].end_ns

    crossing = ranges["crossing"]
    assert crossing.kind == "start_end" and crossing.end_tid != crossing.tid
    assert ranges["in-worker"].tid not in {crossing.tid}
    assert ranges["left-open"].end_ns is None  # still open at exit: kept, not lost
    assert recording.unmatched_pops == 0
    assert recording.pid == recording.threads[ranges["outer"].tid].tid
    assert recording.clock == "CLOCK_MONOTONIC"


def test_forked_children_write_their_own_file(run_python: Run) -> None:
    recordings = run_python(
        """
        import os
        import nvtx
        domain = nvtx.get_domain("ncompass")
        domain.push_range(message="before-fork")
        pid = os.fork()
        if pid == 0:
            domain.push_range(message="in-child")
            domain.pop_range()
            domain.pop_range()  # the parent's push: inherited open, not recorded here
        else:
            os.waitpid(pid, 0)
            domain.pop_range()
        """
    )
    assert len(recordings) == 2
    (child,) = [r for r in recordings if r.ppid in {other.pid for other in recordings}]
    (parent,) = [r for r in recordings if r is not child]
    assert [r.name for r in parent.ranges] == ["before-fork"]
    assert child.ppid == parent.pid
    # The child inherits the open push but not the parent's recorded events.
    assert [r.name for r in child.ranges] == ["in-child"]
    assert child.unmatched_pops == 1


def test_event_budget_counts_dropped_events(run_python: Run) -> None:
    (recording,) = run_python(
        """
        import nvtx
        domain = nvtx.get_domain("ncompass")
        for _ in range(10_000):
            domain.push_range(message="r")
            domain.pop_range()
        """,
        NCOMPASS_NVTX_MAX_EVENTS="4096",
    )
    assert len(recording.ranges) == 2048
    assert recording.dropped_events == 20_000 - 4096


HARNESS = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <wchar.h>

/* Plays the NVTX loader's side: hands the injection the slots to fill, then calls them the
 * way an NVTX client would. */
typedef void (*fn)(void);
static fn core[16], core2[16];
static fn* core_slots[16];
static fn* core2_slots[16];

static int get_table(int module, fn*** table, unsigned* size) {
    if (module == 1) { *table = core_slots; *size = 16; return 1; }
    if (module == 5) { *table = core2_slots; *size = 16; return 1; }
    return 0;
}
static struct { size_t size; int (*get)(int, fn***, unsigned*); } callbacks = {
    sizeof(callbacks), get_table};
static const void* export_table(uint32_t id) { return id == 1 ? (void*)&callbacks : 0; }

struct attributes {
    uint16_t version, size; uint32_t category; int32_t color_type; uint32_t color;
    int32_t payload_type; int32_t reserved; union { int32_t i32; uint64_t u64; } payload;
    int32_t message_type; const char* message;
};

int main(int argc, char** argv) {
    for (int i = 0; i < 16; i++) { core_slots[i] = &core[i]; core2_slots[i] = &core2[i]; }
    void* library = dlopen(argv[1], RTLD_NOW);
    if (!library) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    int (*init)(const void* (*)(uint32_t)) =
        (int (*)(const void* (*)(uint32_t)))dlsym(library, "InitializeInjectionNvtx2");
    /* Several NVTX copies in one process each initialise the same library. */
    if (!init(export_table) || !init(export_table)) return 2;

    ((void (*)(uint32_t, const char*))core[14])((uint32_t)syscall(SYS_gettid), "main loop");
    ((void (*)(uint32_t, const char*))core[12])(7, "seven");
    printf("%d ", ((int (*)(const char*))core[9])("ascii \"quoted\"\n"));
    printf("%d ", ((int (*)(const wchar_t*))core[10])(L"wide \u00e9\u4e2d"));
    printf("%d ", ((int (*)(void))core[11])());
    printf("%d ", ((int (*)(void))core[11])());
    printf("%d\n", ((int (*)(void))core[11])());
    ((void (*)(const char*))core[2])("mark-a");
    uint64_t id = ((uint64_t (*)(const char*))core[5])("started");
    ((void (*)(uint64_t))core[7])(id);

    void* domain = ((void* (*)(const char*))core2[12])("harness");
    void* again = ((void* (*)(const char*))core2[12])("harness");
    struct attributes a = {3, sizeof(struct attributes), 7, 1, 0xFFABCDEF, 5, 0, {.i32 = -4}, 1,
                           "domain-range"};
    ((int (*)(void*, const struct attributes*))core2[4])(domain, &a);
    ((int (*)(void*))core2[5])(again);
    return 0;
}
"""


def test_c_api_messages_thread_names_categories_and_depths(library: Path, tmp_path: Path) -> None:
    compiler = find_compiler()
    assert compiler is not None
    source = tmp_path / "harness.c"
    source.write_text(HARNESS)
    binary = tmp_path / "harness"
    subprocess.run([*compiler, "-o", str(binary), str(source), "-ldl"], check=True)
    output = tmp_path / "out"
    env = {**os.environ, **environment(output, library=library)}
    result = subprocess.run(
        [str(binary), str(library)], env=env, capture_output=True, text=True, check=True
    )
    # Push returns the level it opened; pop the level it closed; an extra pop is an error (-1).
    assert result.stdout.split() == ["0", "1", "1", "0", "-1"]

    (recording,) = read_recordings(output)
    names = {r.name: r for r in recording.ranges}
    assert set(names) == {'ascii "quoted"\n', "wide é中", "started", "domain-range"}
    assert names["wide é中"].depth == 1
    assert names["started"].kind == "start_end" and names["started"].end_ns is not None
    domain_range = names["domain-range"]
    assert (domain_range.domain, domain_range.payload, domain_range.color) == (
        "harness",
        -4,
        0xFFABCDEF,
    )
    assert (domain_range.category, domain_range.category_name) == (7, None)
    assert recording.unmatched_pops == 1
    assert [m.name for m in recording.marks] == ["mark-a"]
    (thread,) = recording.threads.values()
    assert thread.display_name == "main loop"
    assert list(recording.domains.values()).count("harness") == 1


# ------------------------------------------------------------------------------- reading, chrome


def test_chrome_events_show_threads_nesting_domains_and_async_ranges(run_python: Run) -> None:
    recordings = run_python(NVTX_PACKAGE_CHILD)
    events = to_chrome_events(recordings)

    by_name = {e["name"]: e for e in events if e["ph"] in {"X", "b", "i"}}
    outer, inner = by_name["outer"], by_name["inner"]
    assert outer["cat"] == "user_annotation" and outer["args"]["domain"] == "ncompass"
    assert outer["args"]["color"] == "#112233"
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    assert by_name["default-domain"]["args"]["domain"] == "default"
    assert by_name["left-open"]["args"]["unclosed"] is True

    begin = by_name["crossing"]
    (end,) = [e for e in events if e["ph"] == "e" and e["name"] == "crossing"]
    assert begin["id"] == end["id"] and begin["tid"] != end["tid"]
    assert by_name["tick"]["ph"] == "i"

    thread_names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert "ender" not in thread_names  # Python 3.11 does not name OS threads; NVTX did not
    assert any(e["name"] == "process_name" for e in events)
    timestamps = [e["ts"] for e in events if e["ph"] != "M"]
    assert timestamps == sorted(timestamps)

    document = to_chrome_trace(recordings)
    assert json.loads(json.dumps(document))["traceEvents"] == events


def test_reader_rejects_files_that_are_not_recordings(tmp_path: Path) -> None:
    stranger = tmp_path / "nvtx-1.jsonl"
    stranger.write_text('{"traceEvents": []}\n')
    with pytest.raises(TraceError, match="not an ncompass NVTX recording"):
        read_recording(stranger)
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"type":"header","format":"ncompass-nvtx","pid":1}\n{"e":"push",\n')
    with pytest.raises(TraceError, match=r"corrupt\.jsonl:2: corrupt NVTX recording line"):
        read_recording(corrupt)
    with pytest.raises(TraceError, match="does not exist"):
        read_recordings(tmp_path / "missing")
