"""What a marker costs when nothing records, side by side with its peers, in one run.

    python benchmarks/bench_markers.py [--quick]

Every case runs the exact code the rewriter generates, compiled as module-level code (markers
are module globals, as in a rewritten module)::

    h = __nc_enter_1()
    try:
        pass
    finally:
        __nc_exit_1(h)

Cases: a bare loop; a bare ``nvtx`` domain push/pop pair with pre-built event attributes (the
goal's yardstick); the generated shape with each context while nothing records; the seed context
manager classes; ``torch.profiler.record_function`` as a context manager. Then a model compiled
with ``torch.compile(fullgraph=True)``, marked and unmarked (the markers must not slow it). Then
the cost of the NVTX recorder per event, with the recorder attached to a child process.

Each number is the median over repeated runs (cases interleaved, so drift hits all alike) of
nanoseconds per loop iteration. "net" subtracts the bare loop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GOAL_RATIO = 2.0

LOOP_TEMPLATE = """
def run(iterations):
    for _ in range(iterations):
{body}
"""

SHAPE = """\
        h = __nc_enter_1()
        try:
            pass
        finally:
            __nc_exit_1(h)"""

# What the rewriter generates for a templated name: the compiled template is a module global,
# evaluated in the caller's frame only when something records.
DYNAMIC_SHAPE = """\
        h = __nc_enter_1(__nc_name_1)
        try:
            pass
        finally:
            __nc_exit_1(h)"""

BARE_PAIR = """\
        push(attributes, domain)
        pop(domain)"""

WITH_STATEMENT = """\
        with manager:
            pass"""


def compile_case(body: str, namespace: dict[str, Any]) -> Callable[[int], None]:
    """Compiles a loop whose body is ``body`` with ``namespace`` as its module globals."""
    module_globals = {"__name__": "bench_case", **namespace}
    exec(LOOP_TEMPLATE.format(body=body), module_globals)
    run: Callable[[int], None] = module_globals["run"]
    return run


def marker_case(context: str, *, dynamic: bool = False) -> Callable[[int], None]:
    from ncompass.runtime.sites import bind, template

    text = "attn[{layer_idx}]"
    enter, exit_range = bind(context, text if dynamic else "attn", dynamic=dynamic)
    names = {"__nc_name_1": template("f'attn[{layer_idx}]'", text)}
    return compile_case(
        DYNAMIC_SHAPE if dynamic else SHAPE,
        {"__nc_enter_1": enter, "__nc_exit_1": exit_range, "layer_idx": 3, **names},
    )


def bare_nvtx_pair_case() -> Callable[[int], None]:
    """``nvtx``'s lowest-level domain push/pop with attributes built once, as the goal states."""
    from nvtx._lib import lib

    domain = lib.DomainHandle("ncompass")
    attributes = lib.EventAttributes(None, lib.RegisteredString(domain, "attn"), 0xFF00FF00)
    namespace = {"push": lib.push_range, "pop": lib.pop_range}
    return compile_case(BARE_PAIR, {**namespace, "attributes": attributes, "domain": domain})


def cases(include_torch: bool) -> dict[str, tuple[Callable[[int], None], int]]:
    """Case name -> (loop function, iterations per run)."""
    from ncompass.runtime import NvtxContext, TorchRecordContext

    many = 200_000
    found: dict[str, tuple[Callable[[int], None], int]] = {
        "bare loop": (compile_case("        pass", {}), many),
        "bare nvtx domain push/pop pair": (bare_nvtx_pair_case(), many),
        "marker noop": (marker_case("noop"), many),
        "marker nvtx": (marker_case("nvtx"), many),
        "marker nvtx, dynamic name": (marker_case("nvtx", dynamic=True), many),
    }
    if include_torch:
        import torch

        found.update(
            {
                "marker torch": (marker_case("torch"), many),
                "marker torch, dynamic name": (marker_case("torch", dynamic=True), many),
                "marker torch+nvtx": (marker_case("torch+nvtx"), many),
                "with TorchRecordContext(...)": (
                    compile_case(WITH_STATEMENT, {"manager": TorchRecordContext("attn")}),
                    many // 2,
                ),
                "with torch.profiler.record_function(...)": (
                    compile_case(
                        WITH_STATEMENT, {"manager": torch.profiler.record_function("attn")}
                    ),
                    5_000,
                ),
            }
        )
    found["with NvtxContext(...)"] = (
        compile_case(WITH_STATEMENT, {"manager": NvtxContext("attn")}),
        many // 2,
    )
    return found


def measure(loops: dict[str, tuple[Callable[[int], None], int]], repeats: int) -> dict[str, float]:
    """Median ns per iteration of every loop; the loops take turns within each repeat."""
    samples: dict[str, list[float]] = {name: [] for name in loops}
    for run, iterations in loops.values():
        run(iterations // 10)  # warm up (specialisation, caches)
    for _ in range(repeats):
        for name, (run, iterations) in loops.items():
            start = time.perf_counter_ns()
            run(iterations)
            samples[name].append((time.perf_counter_ns() - start) / iterations)
    return {name: statistics.median(values) for name, values in samples.items()}


def torch_recording_costs(repeats: int) -> dict[str, float]:
    """ns per iteration while a torch profiler (CPU activity) records every marker."""
    import torch

    loops = {
        "marker torch": (marker_case("torch"), 5_000),
        "marker torch, dynamic name": (marker_case("torch", dynamic=True), 5_000),
        "with torch.profiler.record_function(...)": (
            compile_case(WITH_STATEMENT, {"manager": torch.profiler.record_function("attn")}),
            2_000,
        ),
    }
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities):
        return measure(loops, repeats)


# A call marker in a compound header (`if self.gate(x):`) wraps the call alone through a helper.
HEADER_CALL = """\
        if gate(1):
            pass"""
HEADER_CALL_WRAPPED = """\
        if __nc_call_1(gate, 1):
            pass"""


def _gate(x: int) -> bool:
    return x > 0


def header_call_costs(repeats: int, contexts: list[str]) -> dict[str, float]:
    """ns per iteration of ``if gate(1):`` plain and through the generated call helper."""
    from ncompass.runtime.sites import bind, call_wrapper

    loops = {"if gate(1): (no marker)": (compile_case(HEADER_CALL, {"gate": _gate}), 200_000)}
    for context in contexts:
        enter, exit_range = bind(context, "gate")
        # what the rewriter generates: a helper of the call's arity (plain positional
        # arguments), or the general `*args, **kwargs` one (keywords, `*`, `**`)
        for kind, arity in (("arity 1", 1), ("general", None)):
            helper = call_wrapper(enter, exit_range, None, arity=arity)
            loops[f"if __nc_call_1(gate, 1): {context}, {kind}"] = (
                compile_case(HEADER_CALL_WRAPPED, {"gate": _gate, "__nc_call_1": helper}),
                200_000,
            )
    return measure(loops, repeats)


# ------------------------------------------------------------------------------ compiled code

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "compile"


def compiled_costs(repeats: int) -> dict[str, float]:
    """µs per call of examples/compile's model compiled with fullgraph=True, unmarked and
    under its spec (context torch), with and without a torch profiler recording."""
    import importlib

    import torch

    from ncompass.importer.hook import disable_rewrites, enable_rewrites
    from ncompass.spec.models import RewriteConfig

    sys.path.insert(0, str(EXAMPLE))
    x = torch.randn(8, 32)
    calls: dict[str, Callable[[], object]] = {}
    try:
        for label in ("unmarked", "marked"):
            if label == "marked":
                enable_rewrites(RewriteConfig.from_yaml(EXAMPLE / "spec.yaml"))
            sys.modules.pop("compiled_mlp", None)
            module = importlib.import_module("compiled_mlp")
            torch.manual_seed(0)
            compiled = torch.compile(module.CompiledMLP().eval(), fullgraph=True)
            with torch.no_grad():
                compiled(x)  # compile now, not in the timed loop

            def call(compiled: Any = compiled) -> object:
                with torch.no_grad():
                    return compiled(x)

            calls[label] = call
    finally:
        disable_rewrites()
        sys.path.remove(str(EXAMPLE))
    results: dict[str, float] = {}
    for profiled in (False, True):
        samples: dict[str, list[float]] = {label: [] for label in calls}
        with torch.profiler.profile() if profiled else contextlib.nullcontext():
            for _ in range(repeats):
                for label, call in calls.items():  # interleaved
                    start = time.perf_counter_ns()
                    for _ in range(200):
                        call()
                    samples[label].append((time.perf_counter_ns() - start) / 200 / 1000)
        suffix = ", torch profiler on" if profiled else ""
        for label, values in samples.items():
            results[f"{label}{suffix}"] = statistics.median(values)
    return results


# ------------------------------------------------------------------------------ NVTX recorder

RECORDER_CASES = ("bare nvtx domain push/pop pair", "marker nvtx", "marker nvtx, dynamic name")


def child_measure(repeats: int) -> None:
    """Entry point of the child processes: measure the NVTX cases, print JSON."""
    loops = cases(include_torch=False)
    print(json.dumps(measure({name: loops[name] for name in RECORDER_CASES}, repeats)))


def recorder_costs(repeats: int) -> dict[str, tuple[float, float]] | str:
    """Per case: (ns per iteration without a tool, with the recorder attached)."""
    from ncompass.capture.nvtx_recorder import environment
    from ncompass.errors import CaptureError

    with tempfile.TemporaryDirectory() as output:
        try:
            attached = {**os.environ, **environment(output)}
        except CaptureError as error:
            return f"skipped: {error}"
        command = [sys.executable, __file__, "--child", "--repeats", str(repeats)]
        plain_env = {k: v for k, v in os.environ.items() if k != "NVTX_INJECTION64_PATH"}
        plain = json.loads(
            subprocess.run(
                command, env=plain_env, capture_output=True, text=True, check=True
            ).stdout
        )
        recorded = json.loads(
            subprocess.run(command, env=attached, capture_output=True, text=True, check=True).stdout
        )
    return {name: (plain[name], recorded[name]) for name in RECORDER_CASES}


def c_level_event_cost() -> float | str:
    """ns per event of the recorder called straight from C (no Python, no NVTX dispatch)."""
    from ncompass.capture.nvtx_recorder import build_recorder, environment, find_compiler
    from ncompass.errors import CaptureError

    compiler = find_compiler()
    if compiler is None:
        return "skipped: no C compiler"
    try:
        library = build_recorder()
    except CaptureError as error:
        return f"skipped: {error}"
    with tempfile.TemporaryDirectory() as work:
        source = Path(work) / "loop.c"
        source.write_text(C_LOOP)
        binary = Path(work) / "loop"
        subprocess.run([*compiler, "-O2", "-o", str(binary), str(source), "-ldl"], check=True)
        env = {**os.environ, **environment(Path(work) / "out", library=library)}
        result = subprocess.run(
            [str(binary), str(library)], env=env, capture_output=True, text=True, check=True
        )
        return float(result.stdout)


C_LOOP = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
typedef void (*fn)(void);
static fn core[16], core2[16]; static fn* cs[16]; static fn* c2s[16];
static int table(int m, fn*** t, unsigned* n) {
    *t = m == 1 ? cs : c2s; *n = 16; return m == 1 || m == 5;
}
static struct { size_t s; int (*g)(int, fn***, unsigned*); } cb = {sizeof(cb), table};
static const void* et(uint32_t id) { return id == 1 ? (void*)&cb : 0; }
struct attr { uint16_t v, s; uint32_t cat; int32_t ct; uint32_t c; int32_t pt, r; uint64_t p;
              int32_t mt; const void* m; };
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
                          return t.tv_sec * 1e9 + t.tv_nsec; }
int main(int argc, char** argv) {
    for (int i = 0; i < 16; i++) { cs[i] = &core[i]; c2s[i] = &core2[i]; }
    void* lib = dlopen(argv[1], RTLD_NOW);
    ((int (*)(const void* (*)(uint32_t)))dlsym(lib, "InitializeInjectionNvtx2"))(et);
    void* domain = ((void* (*)(const char*))core2[12])("ncompass");
    void* name = ((void* (*)(void*, const char*))core2[10])(domain, "attn");
    struct attr a = {3, sizeof(a), 0, 1, 0xFF00FF00, 0, 0, 0, 3, name};
    int (*push)(void*, const struct attr*) = (int (*)(void*, const struct attr*))core2[4];
    int (*pop)(void*) = (int (*)(void*))core2[5];
    const int n = 1000000;
    double best = 1e300;
    for (int r = 0; r < 5; r++) {
        double start = now();
        for (int i = 0; i < n; i++) { push(domain, &a); pop(domain); }
        double per_event = (now() - start) / (2.0 * n);
        if (per_event < best) best = per_event;
    }
    printf("%.2f\n", best);
    return 0;
}
"""


# ----------------------------------------------------------------------------------- report


def report(results: dict[str, float]) -> None:
    loop = results["bare loop"]
    pair = results["bare nvtx domain push/pop pair"]
    print(f"{'case':44s} {'ns/iter':>9s} {'net ns':>8s} {'vs pair':>8s} {'net vs pair':>12s}")
    for name, value in results.items():
        net = value - loop
        print(
            f"{name:44s} {value:9.1f} {net:8.1f} {value / pair:7.2f}x {net / (pair - loop):11.2f}x"
        )
    print()
    print(f"goal: a marker that nothing records <= {GOAL_RATIO:.0f}x the bare nvtx pair")
    for name, value in results.items():
        if name.startswith("marker"):
            ratio, net_ratio = value / pair, (value - loop) / (pair - loop)
            verdict = "meets" if ratio <= GOAL_RATIO else "MISSES"
            print(f"  {name:40s} {ratio:5.2f}x ({net_ratio:.2f}x net of the loop)  {verdict}")
    if "with torch.profiler.record_function(...)" in results:
        slowest = max(v for k, v in results.items() if k.startswith("marker"))
        record_function = results["with torch.profiler.record_function(...)"]
        print(f"  record_function / slowest idle marker: {record_function / slowest:.0f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    repeats = 5 if options.quick else options.repeats
    if options.child:
        child_measure(repeats)
        return

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus; nothing records; "
        f"median of {repeats} runs\n"
    )
    try:
        import torch  # noqa: F401

        include_torch = True
    except ImportError:
        include_torch = False
        print("torch is not installed: torch cases skipped\n")
    report(measure(cases(include_torch), repeats))
    print("\ncall markers in compound headers (the call alone is wrapped), ns per iteration:")
    contexts = ["noop", "nvtx", *(["torch"] if include_torch else [])]
    header = header_call_costs(repeats, contexts)
    plain_call = header["if gate(1): (no marker)"]
    for name, value in header.items():
        print(f"  {name:42s} {value:9.1f}  (+{value - plain_call:.1f} ns for the marker)")
    if include_torch:
        print("\nthe model of examples/compile compiled with fullgraph=True, µs per call:")
        compiled = compiled_costs(max(3, repeats // 3))
        for name, value in compiled.items():
            peer = compiled["unmarked, torch profiler on" if "profiler" in name else "unmarked"]
            print(f"  {name:42s} {value:9.1f}  ({value / peer:.2f}x unmarked)")
        print("\nwhile a torch profiler records (CPU activity), ns per iteration:")
        for name, value in torch_recording_costs(max(3, repeats // 3)).items():
            print(f"  {name:42s} {value:9.1f}")

    print("\nNVTX recorder attached (child processes), ns per iteration of one push/pop pair:")
    costs = recorder_costs(repeats)
    if isinstance(costs, str):
        print(f"  {costs}")
    else:
        for name, (plain, recorded) in costs.items():
            print(
                f"  {name:40s} {plain:7.1f} -> {recorded:7.1f}  "
                f"(+{(recorded - plain) / 2:.1f} ns per event)"
            )
    event_cost = c_level_event_cost()
    shown = event_cost if isinstance(event_cost, str) else f"{event_cost:.1f} ns per event"
    print(f"  recorder called from C (push+pop, no Python): {shown}")


if __name__ == "__main__":
    main()
