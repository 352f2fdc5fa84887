"""Compiled kernels traced back to the source: a module whose ``forward`` has three marked line
ranges, compiled with ``torch.compile`` and run under ``ncompass run --profiler torch``.

Each range compiles into a C++ kernel of its own (the matmuls between them keep Inductor from
fusing them); every kernel event must name its range's marker, then the enclosing ``forward``
marker (and, for the range that calls a marked helper, the helper's marker first). The program
is compiled and run once, in a subprocess, for the whole module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from ncompass.traces.reader import TraceReader
from tests.conftest import REPO

pytest.importorskip("torch")

MODULE = '''
"""Three line ranges, three Inductor kernels."""

import torch

from ncompass import capture_trace


def scale(t: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(t) * 2.0


class ThreeRegions(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 64))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        x = torch.relu(a) + 1.0
        h = x @ self.weight
        y = scale(h)
        g = y @ self.weight
        z = torch.tanh(g).sum(dim=-1)
        return z


@capture_trace(trace_name="last_step")
def last_step(model: torch.nn.Module) -> torch.Tensor:
    return model(torch.randn(64, 64))


def main() -> None:
    model = torch.compile(ThreeRegions())
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(64, 64))
        last_step(model)
'''

SOURCE = textwrap.dedent(MODULE).lstrip("\n")
# Each range's marker name and the line of its statement in MODULE.
STATEMENTS = {
    "relu_add": "x = torch.relu(a) + 1.0",
    "sigmoid_mul": "y = scale(h)",
    "tanh_sum": "z = torch.tanh(g).sum(dim=-1)",
}
RANGES = {
    name: next(n for n, line in enumerate(SOURCE.splitlines(), 1) if line.strip() == statement)
    for name, statement in STATEMENTS.items()
}
SCALE_BODY = SOURCE.splitlines().index("    return torch.sigmoid(t) * 2.0") + 1
# The markers each range's kernel names, innermost first: the sigmoid runs in `scale`, called
# from the "sigmoid_mul" line, and Dynamo inlined it into the compiled forward.
EXPECTED = {
    "relu_add": ["relu_add", "forward"],
    "sigmoid_mul": ["scale", "sigmoid_mul", "forward"],
    "tanh_sum": ["tanh_sum", "forward"],
}
# The kernel Inductor makes from each range (the ops it fuses).
KERNEL_OF_RANGE = {
    "relu_add": "cpp_fused_add_relu",
    "sigmoid_mul": "cpp_fused_mul_sigmoid",
    "tanh_sum": "cpp_fused_sum_tanh",
}
SPEC = """
version: 1
# torch, as users run it: ranges inside the compiled code do not record (Dynamo traces them
# as nothing), and attribution works from the markers' source spans, not from their ranges.
context: torch
targets:
  - module: three_regions
    functions:
      - qualname: ThreeRegions.forward
        name: forward
      - qualname: scale
        name: scale
    ranges:
""" + "".join(
    f"      - in: ThreeRegions.forward\n        lines: [{line}, {line}]\n        name: {name}\n"
    for name, line in RANGES.items()
)


class CompiledRun:
    """What one ``ncompass run`` of the compiled module left behind."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.trace = folder / "out" / "attribution.json"
        self.window = folder / "out" / "last_step.json"
        self.sidecar = json.loads((folder / "out" / "attribution.ncompass.json").read_text())

    def kernel_events(self, trace: Path | None = None) -> list[dict[str, Any]]:
        return [
            event
            for event in TraceReader(trace or self.trace)
            if event.get("ph") == "X" and "cpp_fused_" in str(event.get("name"))
        ]


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory: pytest.TempPathFactory) -> CompiledRun:
    folder = tmp_path_factory.mktemp("compiled")
    (folder / "three_regions.py").write_text(SOURCE)
    (folder / "spec.yaml").write_text(SPEC)
    (folder / "driver.py").write_text("from three_regions import main\n\nmain()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(folder)])}
    env.pop("NCOMPASS_PROFILE", None)
    command = [sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"]
    command += ["--trace-name", "attribution", "driver.py"]
    done = subprocess.run(
        command, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return CompiledRun(folder)


def test_each_range_compiles_into_a_kernel_of_its_own(compiled_run: CompiledRun) -> None:
    names = {event["name"] for event in compiled_run.kernel_events()}
    assert len(names) == 3, names
    for kernel in KERNEL_OF_RANGE.values():
        assert sum(kernel in name for name in names) == 1, (kernel, names)
    # C++ kernels record as graph_{id}_{kernel name}
    assert all(name.startswith("graph_") for name in names), names


def test_every_kernel_event_names_its_range_then_the_enclosing_function(
    compiled_run: CompiledRun,
) -> None:
    events = compiled_run.kernel_events()
    assert len(events) == 9  # three kernels, three calls
    for event in events:
        (expected,) = [name for name, k in KERNEL_OF_RANGE.items() if k in event["name"]]
        assert event["args"]["ncompass_markers"] == EXPECTED[expected], event


def test_the_sidecar_records_each_kernels_source_lines(compiled_run: CompiledRun) -> None:
    record = compiled_run.sidecar["compiled_kernels"]
    assert record["note"] is None
    source = str(compiled_run.folder / "three_regions.py")  # as imported from PYTHONPATH
    by_name = {kernel["name"]: kernel for kernel in record["kernels"]}
    for name, line in RANGES.items():
        (kernel,) = [k for k in by_name.values() if k["name"].startswith(KERNEL_OF_RANGE[name])]
        stack = (
            [[source, line], [source, SCALE_BODY]] if name == "sigmoid_mul" else [[source, line]]
        )
        assert kernel["stacks"] == [stack], kernel
        assert kernel["markers"] == EXPECTED[name]
        assert isinstance(kernel["graph"], int)
    sites = {site["name"]: site for site in compiled_run.sidecar["markers"]}
    line = RANGES["tanh_sum"]
    assert (sites["tanh_sum"]["start_line"], sites["tanh_sum"]["end_line"]) == (line, line)
    assert sites["tanh_sum"]["file"] is not None


def test_a_capture_trace_window_keeps_the_kernels_markers(compiled_run: CompiledRun) -> None:
    events = compiled_run.kernel_events(compiled_run.window)
    assert len(events) == 3
    assert sorted(len(event["args"]["ncompass_markers"]) for event in events) == [2, 2, 3]


def _summarize(*args: str) -> str:
    result = CliRunner().invoke(ncompass_cli, ["summarize", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_summarize_json_lists_the_kernels_under_their_markers(compiled_run: CompiledRun) -> None:
    structured = json.loads(_summarize(str(compiled_run.trace), "--json"))["structured"]
    markers = {marker["name"]: marker for marker in structured["markers"]}
    seen: dict[str, list[str]] = defaultdict(list)
    for name in [*RANGES, "forward", "scale"]:
        # ranges inside compiled code never record: the markers are known from their kernels
        assert markers[name]["calls"] == 0
        for kernel in markers[name]["compiled_kernels"]:
            assert kernel["calls"] == 3 and kernel["total_us"] > 0
            seen[name].append(kernel["name"])
    for name, kernel in KERNEL_OF_RANGE.items():
        assert len(seen[name]) == 1 and kernel in seen[name][0], seen
    assert sorted(seen["forward"]) == sorted(name for r in RANGES for name in seen[r])
    assert seen["scale"] == seen["sigmoid_mul"]
    unrelated = [m for m in structured["markers"] if m["name"] not in seen]
    assert all(m["compiled_kernels"] == [] for m in unrelated)


def test_markdown_and_html_show_the_kernels_under_their_markers(
    compiled_run: CompiledRun, tmp_path: Path
) -> None:
    page = tmp_path / "summary.html"
    markdown = _summarize(str(compiled_run.trace), "--html", str(page))
    section = markdown.split("## Compiled code", 1)[1]
    assert "- `forward`: compiled: its time is in 3 Inductor kernels" in section
    for name, kernel in KERNEL_OF_RANGE.items():
        entry = section.split(f"- `{name}`: compiled: its time is in 1 Inductor kernel ", 1)[1]
        assert kernel in entry.split("\n- ", 1)[0]
    html = page.read_text()
    assert "<h2>Compiled code</h2>" in html
    assert "<code>tanh_sum</code>: compiled: its time is in 1 Inductor kernel" in html
    assert "cpp_fused_sum_tanh" in html.split("<code>tanh_sum</code>", 1)[1]


def test_summarize_gives_the_compiled_regions_time_and_what_no_marker_holds(
    compiled_run: CompiledRun,
) -> None:
    summary = json.loads(_summarize(str(compiled_run.trace), "--json"))
    row = summary["structured"]["compiled_code"]
    assert row["source"] == "cpu" and row["regions"] == 3  # no GPU here: CPU time
    kernels = {k["name"]: k["total_us"] for m in summary["structured"]["markers"]
               for k in m["compiled_kernels"]}  # fmt: skip
    assert row["credited_us"] == pytest.approx(sum(kernels.values())), (row, kernels)
    assert row["uncredited_us"] == pytest.approx(row["total_us"] - row["credited_us"])
    # the two matmuls between the ranges are extern kernels: ATen, credited to no marker
    (extern,) = row["uncredited"]
    assert extern["name"] == "aten::mm" and extern["calls"] == 6
    assert 0 < extern["total_us"] <= row["uncredited_us"]
    section = summary["markdown"].split("## Compiled code", 1)[1]
    assert "Compiled regions: 3 calls, " in section
    assert "no marker is credited with " in section and "`aten::mm` " in section


CAPTURE_SCRIPT = """
import json
import warnings

import torch

from ncompass import capture_trace


def relu_add(x):
    return torch.relu(x) + 1.0


def sigmoid_mul(x):
    return torch.sigmoid(x) * 2.0


# Compiled before any profiler runs. C++ kernels record events only when compiled with their
# profiler ranges (GPU kernels always do): ask for them, as a GPU run would show the kernels.
early = torch.compile(relu_add, options={"cpp.enable_kernel_profile": True})
early(torch.randn(8))
late = torch.compile(sigmoid_mul)


@capture_trace(trace_name="early")
def run_early():
    early(torch.randn(8))


@capture_trace(trace_name="late")
def run_late():
    late(torch.randn(8))  # compiled while recording


messages = {}
for name, step in (("early", run_early), ("late", run_late)):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step()
    messages[name] = [str(warning.message) for warning in caught]
print(json.dumps(messages))
"""


def test_capture_trace_warns_about_kernels_compiled_before_it_started(tmp_path: Path) -> None:
    (tmp_path / "capture.py").write_text(CAPTURE_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NCOMPASS_PROFILE": "1"}
    env["NCOMPASS_TRACE_DIR"] = str(tmp_path / "traces")
    done = subprocess.run(
        [sys.executable, "capture.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    messages = json.loads(done.stdout.strip().splitlines()[-1])
    (early,) = [m for m in messages["early"] if "compiled before the profiler started" in m]
    assert early.startswith("1 compiled kernels in ")
    assert not [m for m in messages["late"] if "compiled before" in m], messages["late"]
    for name, kernel in (("early", "cpp_fused_add_relu"), ("late", "cpp_fused_mul_sigmoid")):
        trace = tmp_path / "traces" / f"{name}.json"
        names = [e["name"] for e in TraceReader(trace) if kernel in str(e.get("name"))]
        assert len(names) == 1, (name, names)  # C++ kernels record while a profiler runs


# -- the parts, without compiling -----------------------------------------------------------------


def test_recorder_collects_inductors_provenance_artefact_and_restores_settings() -> None:
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._logging import trace_structured

    from ncompass.capture.compiled_kernels import PROVENANCE_ARTIFACT, start_recording

    before = (inductor_config.trace.provenance_tracking_level, inductor_config.fx_graph_cache)
    recorder = start_recording()
    try:
        assert inductor_config.trace.provenance_tracking_level == 2
        assert inductor_config.cpp.enable_kernel_profile is True
        assert inductor_config.fx_graph_cache is False
        assert functorch_config.enable_autograd_cache is False
        payload = {
            "cpp_fused_add_relu_0:1": [
                '  File "/src/model.py", line 30, in forward\n    x = self.block(a)\n'
                '  File "/src/block.py", line 7, in forward\n    return torch.relu(a) + 1\n'
            ],
            "extern_kernels.mm:2": [],
        }
        trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": PROVENANCE_ARTIFACT, "encoding": "json"},
            payload_fn=lambda: json.dumps(payload),
        )
        trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": "inductor_provenance_tracking_node_mappings"},
            payload_fn=lambda: json.dumps({"cpp_fused_mul_1:3": ["mul"]}),
        )
    finally:
        kernels = recorder.stop()
    assert (inductor_config.trace.provenance_tracking_level, inductor_config.fx_graph_cache) == (
        before
    )
    assert inductor_config.cpp.enable_kernel_profile is False
    assert [kernel.to_dict() for kernel in kernels] == [
        {
            "name": "cpp_fused_add_relu_0",
            "graph": None,  # logged outside codegen (as from the FX graph cache)
            "stacks": [[["/src/model.py", 30], ["/src/block.py", 7]]],
        }
    ]


def test_a_kernel_names_the_innermost_marker_first() -> None:
    from ncompass.capture.compiled_kernels import CompiledKernel, SourceLine
    from ncompass.capture.kernel_markers import attribute_kernels

    manifest = [
        {"name": "model.block_call", "file": "/src/model.py", "start_line": 30, "end_line": 30},
        {"name": "model.forward", "file": "/src/model.py", "start_line": 25, "end_line": 40},
        {"name": "block.forward", "file": "/src/block.py", "start_line": 5, "end_line": 9},
        {"name": "block.relu", "file": "/src/block.py", "start_line": 7, "end_line": 7},
        {"name": "elsewhere", "file": "/src/other.py", "start_line": 1, "end_line": 99},
    ]
    relu = CompiledKernel(
        "cpp_fused_add_relu_0",
        3,
        [(SourceLine("/src/model.py", 30), SourceLine("/src/block.py", 7))],
    )
    tail = CompiledKernel("triton_poi_fused_add_relu_0", None, [(SourceLine("/src/model.py", 38),)])
    attribution = attribute_kernels([relu, tail], manifest)
    inner_first = ["block.relu", "block.forward", "model.block_call", "model.forward"]
    assert attribution.markers_of("graph_3_cpp_fused_add_relu_0") == inner_first
    assert attribution.markers_of("triton_poi_fused_add_relu_0") == ["model.forward"]
    assert attribution.markers_of("graph_0_cpp_fused_mul_1") is None
    assert attribution.args_for({"ph": "X", "name": "graph_3_cpp_fused_add_relu_0"}) == {
        "ncompass_markers": inner_first
    }
    assert attribution.args_for({"ph": "i", "name": "graph_3_cpp_fused_add_relu_0"}) is None


def test_a_torch_without_provenance_tracking_is_named_in_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    from ncompass.capture.compiled_kernels import provenance_note

    old_config = types.ModuleType("torch._inductor.config")
    old_config.trace = types.SimpleNamespace(debug_dir=None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch._inductor.config", old_config)
    note = provenance_note()
    assert note is not None and "provenance_tracking_level" in note
    assert "without their markers" in note


def test_torch_compiles_own_phase_ranges_are_setup_not_markers(compiled_run: CompiledRun) -> None:
    structured = json.loads(_summarize(str(compiled_run.trace), "--json"))["structured"]
    names = [marker["name"] for marker in structured["markers"]]
    assert not [name for name in names if "compile_id=" in name], names
    phases = structured["trace"]["compile_phases"]
    assert phases["ranges"] > 10 and phases["total_us"] > 0
    setup = structured["trace"]["setup"]
    assert setup["compile_us"] > phases["total_us"] and setup["compilations"] >= 1
    operators = [op["name"] for op in structured["operations"] if op["kind"] == "cpu_op"]
    assert operators and not {"dynamo", "entire_frame_compile", "backend_compile"} & set(operators)
    assert not [name for name in operators if name.endswith("(dynamo_timed)")], operators
    markdown = _summarize(str(compiled_run.trace))
    setup_line = next(line for line in markdown.splitlines() if line.startswith("Setup: "))
    assert "torch.compile compiled for " in setup_line


def test_a_templated_marker_name_shows_its_fields_as_stars() -> None:
    from ncompass.capture.compiled_kernels import CompiledKernel, SourceLine
    from ncompass.capture.kernel_markers import attribute_kernels

    manifest = [
        {
            "name": "block[{self.index}]{{x}}",
            "dynamic": True,
            "file": "/src/block.py",
            "start_line": 5,
            "end_line": 9,
        },
        {"name": "literal{x}", "file": "/src/block.py", "start_line": 7, "end_line": 7},
    ]
    kernel = CompiledKernel("cpp_fused_relu_0", 0, [(SourceLine("/src/block.py", 7),)])
    attribution = attribute_kernels([kernel], manifest)
    assert attribution.markers_of("graph_0_cpp_fused_relu_0") == ["literal{x}", "block[*]{x}"]
