"""The answer read from real traces: GPU time ranks when the trace has GPU work (kernels credited
to the range that launched them), CPU time otherwise; a trace with ``Torch-Compiled Region``
events is read like any other."""

from __future__ import annotations

from pathlib import Path

from ncompass.session.answer import Answer, Ranking, answer_from_markers, decide
from ncompass.session.callstacks import stack_profile
from ncompass.session.findings import gpu_launches
from ncompass.session.history import IterationRecord
from ncompass.session.sampler import Frame, StackSamples
from tests.conftest import REPO

HTA = REPO / "tests" / "data" / "traces" / "hta"
ALEXNET = HTA / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz"
CPU_ONLY = HTA / "cpu_only" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def _record(trace: Path, names: list[str]) -> IterationRecord:
    """An iteration whose statement markers carry the trace's own range names."""
    manifest = [
        {
            "name": name,
            "kind": "range",
            "module": "model",
            "qualname": "Model.forward",
            "file": f"/src/model_{position}.py",
            "start_line": 10 + position,
            "end_line": 10 + position,
        }
        for position, name in enumerate(names)
    ]
    return IterationRecord(1, 1, None, str(trace), manifest=manifest)


def test_on_a_gpu_trace_the_range_with_the_most_kernel_time_is_the_answer() -> None:
    names = [
        "[param|cuda]",
        "[param|pytorch.model.alex_net|0|0|0|measure|forward]",
        "[param|clear_cache]",
    ]
    answer = answer_from_markers(_record(ALEXNET, names), runs=2)
    assert answer is not None
    assert answer.basis == "gpu"
    assert answer.file == "/src/model_0.py"  # [param|cuda]: 55.6 ms of kernels, the most
    assert 55 < answer.self_ms < 56.5
    assert answer.kernels and answer.kernels[0].ms > 0
    assert abs(sum(k.share for k in answer.kernels) - 1.0) < 0.05  # its top kernels, all of it
    assert Answer.from_dict(answer.to_dict()).to_dict() == answer.to_dict()


def test_on_a_cpu_only_trace_cpu_time_ranks() -> None:
    answer = answer_from_markers(_record(CPU_ONLY, ["gloo:all_reduce"]), runs=1)
    assert answer is not None
    assert answer.basis == "cpu" and not answer.kernels
    assert answer.self_ms > 1000  # ten all_reduce calls, 2.1 s of their own time
    assert answer.repeats == 10  # the outermost marker that recurs: each all_reduce call


def test_kernel_time_goes_to_the_statement_sampled_when_it_was_launched() -> None:
    launches = gpu_launches(_record(ALEXNET, []))
    assert launches and all(duration >= 0 for _, duration, _ in launches)
    middle = launches[len(launches) // 2][0]
    script = "/src/run.py"
    samples = StackSamples(
        frames=[
            Frame(script, 5, "<module>", 1, "__main__"),
            Frame("/src/model.py", 20, "Model.forward", 18, "model"),
            Frame("/src/model.py", 30, "Model.forward", 18, "model"),
        ],
        # before the middle launch the model runs line 20, from then on line 30
        stacks=[[0, 1] if at < middle else [0, 2] for at, _, _ in launches],
        times_us=[at for at, _, _ in launches],
        weights_us=[10.0 for _ in launches],
    )
    profile = stack_profile(samples, script, gpu_launches_us=launches)
    assert profile.gpu
    by_line = {line.line: time.gpu_us for line, time in profile.lines.items()}
    early = sum(d for at, d, _ in launches if at < middle)
    late = sum(d for at, d, _ in launches if at >= middle)
    assert abs(by_line[20] - early) < 1 and abs(by_line[30] - late) < 1
    assert profile.ranked()[0][0].line == (20 if early > late else 30)


def test_a_trace_with_compiled_regions_is_read(tmp_path: Path) -> None:
    trace = tmp_path / "compiled.json"
    trace.write_text(
        '{"traceEvents": ['
        '{"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": 0,'
        ' "dur": 100},'
        '{"ph": "X", "cat": "user_annotation", "name": "Torch-Compiled Region: 0/0", "pid": 1,'
        ' "tid": 1, "ts": 10, "dur": 60},'
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 80,'
        ' "dur": 15}]}'
    )
    answer = answer_from_markers(_record(trace, ["step"]), runs=1)
    assert answer is not None
    assert answer.self_ms == 0.04  # 100 µs less the compiled region nested in it
    assert [op.name for op in answer.ops] == ["aten::mm"]


def _ranking(per_repeat: dict[str, list[float]]) -> Ranking:
    names = {
        key: {"file": "m.py", "lines": [n, n], "statement": key, "function": "f"}
        for n, key in enumerate(per_repeat, 1)
    }
    totals = [sum(times) * 1.2 for times in zip(*per_repeat.values(), strict=True)]
    return Ranking(names, per_repeat, totals, calls=True)


def test_a_statement_many_times_the_next_in_every_repeat_is_no_tie_however_noisy() -> None:
    # one repeat preempted (70 ms instead of 20): the gaps' spread is as large as the gap, yet
    # the planted statement is hundreds of times the next one in every repeat
    planted = decide(
        _ranking({"planted": [30e3, 20e3, 70e3], "small": [90, 80, 85]}), 2, "cpu", "m"
    )
    assert planted is not None and planted.statement == "planted"
    assert planted.confidence == "high" and planted.tied_with == []
    even = decide(_ranking({"a": [20e3, 21e3, 19e3], "b": [20e3, 19e3, 22e3]}), 2, "cpu", "m")
    assert even is not None and even.confidence == "tie"
