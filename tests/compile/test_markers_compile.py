"""Marked code compiled with torch.compile: no graph break, the same graphs, the same outputs.

The fixture is ``examples/compile/compiled_mlp.py`` under ``examples/compile/spec.yaml``: a
function marker with a templated name, a nested function, a call, a call in an ``if`` header
and a line range. Each case imports it fresh under one context, compiles it with Inductor
(``fullgraph=True`` unless said otherwise) and compares with the unmarked model. Inductor's
graph cache serves every marked compile the unmarked one's code, since the graphs are
identical (which the tests check).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from ncompass.importer.hook import disable_rewrites, enable_rewrites  # noqa: E402
from ncompass.spec.models import RewriteConfig  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "compile"
SPEC = EXAMPLE / "spec.yaml"
MODULE = "compiled_mlp"
CUSTOM = f"{__name__}:CountingContext"
CONTEXTS = ("noop", "nvtx", "torch", "torch+nvtx", CUSTOM)
MARKER_NAMES = {"mlp", "block[0]", "block[1]", "gate", "block.up", "block.uses_residual"}
MARKER_NAMES |= {"block.gate_and_down"}


class CountingContext:
    """A custom context that counts how often it is entered (eagerly)."""

    entered = 0

    def __init__(self, name: str, values: object = None) -> None:
        self.name = name

    def __enter__(self) -> None:
        CountingContext.entered += 1

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None


@dataclass
class Compiled:
    """What one compilation of the fixture gave."""

    context: str | None
    graphs: int
    breaks: int
    output: list[list[float]]
    cached: bool  # Inductor found the compiled graph in its cache


def _fresh_module(context: str | None) -> Any:
    """The fixture module imported fresh, marked with ``context`` (None: unmarked)."""
    sys.modules.pop(MODULE, None)
    if context is None:
        disable_rewrites()
    else:
        config = RewriteConfig.from_yaml(SPEC).to_dict()
        enable_rewrites(RewriteConfig.from_dict({**config, "context": context}))
    return importlib.import_module(MODULE)


def compile_fixture(
    context: str | None, *, fullgraph: bool = True, dynamic: bool | None = None
) -> Compiled:
    """Compiles the fixture marked with ``context`` and runs it on two input shapes."""
    from torch._dynamo.utils import counters

    module = _fresh_module(context)
    torch.manual_seed(0)
    model = module.CompiledMLP().eval()
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, fullgraph=fullgraph, dynamic=dynamic)
    with torch.no_grad():
        output = compiled(torch.ones(4, 32))
        compiled(torch.ones(4, 32))  # a second call: no recompilation
    return Compiled(
        context=context,
        graphs=int(counters["stats"]["unique_graphs"]),
        breaks=sum(counters["graph_break"].values()),
        output=output.tolist(),
        cached=counters["inductor"]["fxgraph_cache_hit"] > 0 or not _inductor_caches(),
    )


def _inductor_caches() -> bool:
    from torch._inductor import config

    return bool(config.fx_graph_cache) and not config.force_disable_caches


@pytest.fixture(scope="module")
def example_on_path() -> Iterator[None]:
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield
    finally:
        sys.path.remove(str(EXAMPLE))
        disable_rewrites()
        sys.modules.pop(MODULE, None)


@pytest.fixture(scope="module")
def unmarked(example_on_path: None) -> Compiled:
    return compile_fixture(None)


def _assert_same_as_unmarked(result: Compiled, unmarked: Compiled) -> None:
    assert result.breaks == 0
    assert result.graphs == unmarked.graphs == 1
    assert torch.allclose(torch.tensor(result.output), torch.tensor(unmarked.output))
    # The unmarked model's compilation (just done, or cached before) serves the marked one:
    # Inductor's cache key covers the whole graph, so the graphs are the same.
    assert result.cached


@pytest.mark.parametrize("context", CONTEXTS)
def test_fullgraph_compiles_with_no_profiler(context: str, unmarked: Compiled) -> None:
    _assert_same_as_unmarked(compile_fixture(context), unmarked)


@pytest.mark.parametrize("context", CONTEXTS)
def test_fullgraph_compiles_under_the_torch_profiler(context: str, unmarked: Compiled) -> None:
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities) as profiler:
        result = compile_fixture(context)
    _assert_same_as_unmarked(result, unmarked)
    recorded = {event.name for event in profiler.events()}
    assert not recorded & MARKER_NAMES, "a marker recorded inside compiled code"


def test_markers_record_in_eager_code_of_the_same_module(example_on_path: None) -> None:
    # The compiled cases above record nothing; the same bound markers do record eagerly.
    module = _fresh_module("torch")
    with torch.profiler.profile() as profiler, torch.no_grad():
        module.CompiledMLP()(torch.ones(4, 32))
    assert {event.name for event in profiler.events()} >= MARKER_NAMES


def test_custom_context_is_not_run_inside_compiled_code(unmarked: Compiled) -> None:
    CountingContext.entered = 0
    compile_fixture(CUSTOM)
    assert CountingContext.entered == 0
    _fresh_module(CUSTOM).CompiledMLP()(torch.ones(4, 32))
    assert CountingContext.entered == 1 + 2 * 5  # the model's marker, 5 in each block


def test_default_mode_has_no_break_from_markers(unmarked: Compiled) -> None:
    result = compile_fixture("torch+nvtx", fullgraph=False)
    _assert_same_as_unmarked(result, unmarked)


def test_dynamic_shapes_compile_once_for_every_batch(example_on_path: None) -> None:
    from torch._dynamo.utils import counters

    module = _fresh_module("torch")
    torch.manual_seed(0)
    model = module.CompiledMLP().eval()
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    with torch.no_grad(), torch.profiler.profile():
        for batch in (3, 5, 9):
            x = torch.randn(batch, 32)
            torch.testing.assert_close(compiled(x), model(x))
    assert counters["stats"]["unique_graphs"] == 1
    assert not counters["graph_break"]


def test_starting_the_profiler_does_not_recompile(example_on_path: None) -> None:
    # Markers put no guard on the profiler's state: a model compiled and warmed up before
    # profiling runs the same graph under the profiler.
    from torch._dynamo.utils import counters

    module = _fresh_module("torch")
    model = module.CompiledMLP().eval()
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.ones(4, 32)
    with torch.no_grad():
        compiled(x)
        with torch.profiler.profile() as profiler:
            compiled(x)
        compiled(x)
    assert counters["stats"]["unique_graphs"] == 1
    assert any(event.name.startswith("Torch-Compiled Region") for event in profiler.events())


def test_marker_stand_ins_are_what_dynamo_traces(example_on_path: None) -> None:
    # If a torch release stopped following `_torchdynamo_inline`, Dynamo would trace the real
    # enter: the recording path still skips while compiling, but the profiler's flag would be
    # guarded on. This checks the attribute is honoured by counting what Dynamo traced.
    from torch._dynamo.utils import counters

    from ncompass.runtime.sites import bind

    enter, exit_range = bind("torch", "probe")

    def step(x: Any) -> Any:
        handle = enter()
        try:
            return x * 2
        finally:
            exit_range(handle)

    torch._dynamo.reset()
    counters.clear()
    explained = torch._dynamo.explain(step)(torch.ones(2))
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    guards = "\n".join(str(guard) for guard in explained.out_guards or [])
    assert "_is_profiler_enabled" not in guards


def _nvtx_child_results(tmp_path: Path) -> list[dict[str, Any]]:
    from ncompass.capture.nvtx_recorder import build_recorder, environment, find_compiler
    from ncompass.errors import CaptureError

    if find_compiler() is None:
        pytest.skip("no C compiler: cannot build the NVTX recorder")
    try:
        library = build_recorder(tmp_path / "cache")
    except CaptureError as error:
        pytest.skip(f"the NVTX recorder does not build here: {error}")
    script = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(EXAMPLE)!r})\n"
        "from dataclasses import asdict\n"
        "from tests.compile.test_markers_compile import CONTEXTS, compile_fixture\n"
        "from ncompass.runtime.nvtx_range import attached_domain\n"
        "assert attached_domain() is not None, 'no NVTX tool attached'\n"
        "results = [asdict(compile_fixture(c)) for c in (None, *CONTEXTS)]\n"
        "print(json.dumps(results))\n"
    )
    env = {
        **os.environ,
        **environment(tmp_path / "nvtx", library=library),
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def test_fullgraph_compiles_with_an_nvtx_tool_attached(tmp_path: Path) -> None:
    # --profiler nvtx-trace and --nsys: the recorder (an NVTX tool) is attached to the process.
    unmarked, *marked = (Compiled(**result) for result in _nvtx_child_results(tmp_path))
    assert [result.context for result in marked] == list(CONTEXTS)
    for result in marked:
        _assert_same_as_unmarked(result, unmarked)


@pytest.mark.parametrize("arity", [1, None], ids=["fixed-arity", "any-arguments"])
@pytest.mark.parametrize("named", [False, True], ids=["fixed-name", "templated-name"])
@pytest.mark.parametrize("context", ["torch", "torch+nvtx", CUSTOM])
def test_every_call_helper_shape_traces_as_the_bare_call(
    context: str, named: bool, arity: int | None
) -> None:
    # The helpers of header call markers (`if self.gate(x):`): one per arity, plain or
    # with a templated name evaluated in the caller's frame; traced while a profiler records.
    from ncompass.runtime.sites import bind, call_wrapper, template

    text = "gate[{scale}]" if named else "gate"
    enter, exit_range = bind(context, text, dynamic=named)
    name = template("f'gate[{scale}]'", text) if named else None
    helper = call_wrapper(enter, exit_range, name, arity=arity)

    def gate(x: Any) -> Any:
        return x.dim() == 1

    def step(x: Any) -> Any:
        scale = 2
        if helper(gate, x):
            return x * scale
        return x

    # (torch._dynamo.explain is no judge here: it reports no break when Dynamo skips the
    # helper's frame.) Dynamo alone decides, so the eager backend suffices.
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    with torch.profiler.profile():
        out = torch.compile(step, fullgraph=True, backend="eager")(torch.ones(3))
    assert out.tolist() == [2.0, 2.0, 2.0]
    assert counters["stats"]["unique_graphs"] == 1
