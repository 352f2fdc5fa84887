"""gpu_profile: the seed's decorator, report modes, ProfiledResult."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ncompass.gpu import GpuSummary, ProfiledResult, gpu_profile

FAST = 0.01


def no_sampler_threads() -> bool:
    return not any(thread.name == "ncompass-gpu-sampler" for thread in threading.enumerate())


@pytest.mark.parametrize("backend", ["none", "cpu"])
def test_seed_decorator_example_prints_a_summary_and_returns_the_value(
    backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    @gpu_profile(interval_s=FAST, backend=backend)
    def work() -> int:
        time.sleep(0.02)
        return 123

    assert work() == 123
    captured = capsys.readouterr()
    assert captured.out == ""  # the program's stdout stays its own
    assert f"({backend})" in captured.err.splitlines()[0]


@pytest.mark.parametrize("backend", ["none", "cpu"])
def test_seed_return_profile_example(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    @gpu_profile(backend=backend, interval_s=FAST, report=False, return_profile=True)
    def work(x: int) -> int:
        return x * 2

    result = work(21)
    assert isinstance(result, ProfiledResult)
    assert result.value == 42
    assert isinstance(result.gpu, GpuSummary) and result.gpus == (result.gpu,)
    assert capsys.readouterr().err == ""


def test_report_callable_gets_each_summary(capsys: pytest.CaptureFixture[str]) -> None:
    received: list[GpuSummary] = []

    @gpu_profile(device=[0, 1], backend="none", report=received.append)
    def work() -> None:
        pass

    work()
    assert [summary.device for summary in received] == [0, 1]
    assert capsys.readouterr().err == ""


def test_exceptions_propagate_without_a_report_and_without_a_thread(
    capsys: pytest.CaptureFixture[str],
) -> None:
    @gpu_profile(backend="cpu", interval_s=FAST)
    def fails() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        fails()
    assert capsys.readouterr().err == ""
    assert no_sampler_threads()


def test_sync_fn_is_called_once_per_call() -> None:
    calls: list[int] = []

    @gpu_profile(backend="none", report=False, sync_fn=lambda: calls.append(1))
    def work() -> None:
        pass

    work()
    work()
    assert calls == [1, 1]


def test_wrapped_function_keeps_its_name_and_docstring() -> None:
    @gpu_profile(backend="none")
    def forward() -> None:
        """Runs the model."""

    assert forward.__name__ == "forward" and forward.__doc__ == "Runs the model."


def test_coroutine_functions_are_monitored_until_they_complete() -> None:
    @gpu_profile(backend="cpu", interval_s=FAST, report=False, return_profile=True)
    async def infer() -> str:
        await asyncio.sleep(0.05)
        return "done"

    result = asyncio.run(infer())
    assert result.value == "done" and result.gpu.duration_s >= 0.05  # type: ignore[attr-defined]


def test_generator_functions_are_refused_with_advice() -> None:
    with pytest.raises(TypeError, match="wrap the loop in GpuMonitor"):

        @gpu_profile(backend="none")
        def batches() -> object:
            yield 1


def test_without_parentheses_it_says_how_to_write_it() -> None:
    def step() -> None:
        pass

    with pytest.raises(TypeError, match=r"write @gpu_profile\(\) .* above .*step"):
        gpu_profile(step)  # type: ignore[arg-type]


def test_bad_arguments_fail_when_decorating_not_at_the_first_call() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        gpu_profile(interval_s=-1)


def test_recursive_calls_nest_monitors() -> None:
    depths: list[int] = []

    @gpu_profile(backend="cpu", interval_s=FAST, report=lambda summary: depths.append(1))
    def countdown(n: int) -> int:
        return 0 if n == 0 else 1 + countdown(n - 1)

    assert countdown(3) == 3
    assert len(depths) == 4 and no_sampler_threads()
