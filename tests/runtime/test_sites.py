"""The generated marker shape around real code: values, exceptions, generators, coroutines."""

from __future__ import annotations

import asyncio
import sys
import traceback
import warnings
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from ncompass.errors import ContextError
from ncompass.runtime.sites import bind

CONTEXT_MODULE = '''
class Counting:
    """A custom context that tries to swallow every exception (and must not manage to)."""

    entered = 0
    exited = 0

    def __init__(self, name, values=None):
        self.name = name

    def __enter__(self):
        type(self).entered += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        type(self).exited += 1
        return True
'''


@pytest.fixture(scope="module")
def counting_context(tmp_path_factory: pytest.TempPathFactory) -> Generator[str, None, None]:
    directory = tmp_path_factory.mktemp("contexts")
    (directory / "nc_sites_contexts.py").write_text(CONTEXT_MODULE)
    sys.path.insert(0, str(directory))
    yield "nc_sites_contexts:Counting"
    sys.path.remove(str(directory))


CONTEXTS = ["torch", "nvtx", "torch+nvtx", "noop", "custom"]


@pytest.fixture(params=CONTEXTS)
def context(request: pytest.FixtureRequest, counting_context: str) -> str:
    return counting_context if request.param == "custom" else str(request.param)


def wrapped(context: str, body: Callable[[], Any], *, dynamic: bool = False) -> Callable[[], Any]:
    """``body`` inside the exact shape the rewriter generates."""
    enter, exit_range = bind(context, "site[{x}]", dynamic=dynamic, async_safe=False)

    def function() -> Any:
        handle = enter(lambda: "site[1]") if dynamic else enter()
        try:
            return body()
        finally:
            exit_range(handle)

    return function


@pytest.mark.parametrize("dynamic", [False, True])
def test_return_values_pass_through(context: str, dynamic: bool) -> None:
    result = object()
    assert wrapped(context, lambda: result, dynamic=dynamic)() is result


@pytest.mark.parametrize("dynamic", [False, True])
def test_exceptions_pass_through_unchanged(context: str, dynamic: bool) -> None:
    error = ValueError("from user code")

    def body() -> None:
        raise error

    with pytest.raises(ValueError) as caught:
        wrapped(context, body, dynamic=dynamic)()
    assert caught.value is error
    frames = [frame.name for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert frames[-1] == "body"
    assert error.__context__ is None


def test_exception_context_inside_an_except_block_is_kept(context: str) -> None:
    first = KeyError("handled")
    second = RuntimeError("raised while handling")

    def body() -> None:
        raise second

    function = wrapped(context, body)
    with pytest.raises(RuntimeError) as caught:
        try:
            raise first
        except KeyError:
            function()
    assert caught.value is second
    assert second.__context__ is first


def test_generators_yield_receive_and_return_through_the_shape(context: str) -> None:
    enter, exit_range = bind(context, "gen", async_safe=True)

    def generator() -> Generator[int, int, str]:
        handle = enter()
        try:
            received = yield 1
            received = yield received * 10
            return f"done {received}"
        finally:
            exit_range(handle)

    running = generator()
    assert next(running) == 1
    assert running.send(2) == 20
    with pytest.raises(StopIteration) as stopped:
        running.send(3)
    assert stopped.value.value == "done 3"

    closed = generator()
    next(closed)
    closed.close()  # GeneratorExit passes through the finally block


def test_coroutines_interleave_through_async_safe_markers(context: str) -> None:
    enter, exit_range = bind(context, "task[{n}]", dynamic=True, async_safe=True)

    async def task(n: int) -> int:
        handle = enter(lambda: f"task[{n}]")
        try:
            await asyncio.sleep(0.001 * (3 - n))
            if n == 1:
                raise LookupError(n)
            return n
        finally:
            exit_range(handle)

    async def main() -> list[Any]:
        return await asyncio.gather(task(0), task(1), task(2), return_exceptions=True)

    first, second, third = asyncio.run(main())
    assert (first, third) == (0, 2)
    assert isinstance(second, LookupError)


def test_custom_context_cannot_swallow_an_exception(counting_context: str) -> None:
    import nc_sites_contexts

    counting = nc_sites_contexts.Counting
    before = (counting.entered, counting.exited)

    def body() -> None:
        raise OSError("still raised")

    with pytest.raises(OSError, match="still raised"):
        wrapped(counting_context, body)()
    assert (counting.entered, counting.exited) == (before[0] + 1, before[1] + 1)


def test_exceptions_pass_through_while_the_torch_profiler_records() -> None:
    torch = pytest.importorskip("torch")
    error = ArithmeticError("recorded")

    def body() -> None:
        torch.ones(2).sum()
        raise error

    function = wrapped("torch+nvtx", body, dynamic=True)
    activities = [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities), pytest.raises(ArithmeticError) as caught:
        function()
    assert caught.value is error


def test_bind_rejects_unknown_contexts_and_colours() -> None:
    with pytest.raises(ContextError, match="unknown context 'tourch'"):
        bind("tourch", "x")
    with pytest.raises(ContextError, match="colour 'reddish'"):
        bind("nvtx", "x", color="reddish")


def test_importing_sites_imports_no_heavy_dependency(tmp_path: Path) -> None:
    import subprocess

    probe = (
        "import sys, ncompass.runtime.sites as s; s.bind('torch+nvtx', 'x'); "
        "heavy = {'torch', 'nvtx', 'numpy', 'libcst', 'pydantic', 'rich'} & set(sys.modules); "
        "print(sorted(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert result.stdout.strip() == "[]"


def _recording(seen: list[tuple[Any, ...]]) -> Callable[..., Any]:
    def callee(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return len(args) + len(kwargs)

    return callee


def _failing(*args: Any) -> Any:
    raise KeyError("from the callee")


@pytest.mark.parametrize("arity", [None, 0, 1, 3, 8, 9])
@pytest.mark.parametrize("named", [False, True])
def test_call_helpers_pass_arguments_results_and_exceptions(
    counting_context: str, arity: int | None, named: bool
) -> None:
    from ncompass.runtime.sites import call_wrapper, template

    name = "gate[{x}]" if named else "gate"
    enter, exit_range = bind(counting_context, name, dynamic=named)
    name_template = template("f'gate[{x}]'", name) if named else None
    helper = call_wrapper(enter, exit_range, name_template, arity=arity)
    counting = sys.modules["nc_sites_contexts"].Counting
    before = counting.entered, counting.exited
    seen: list[tuple[Any, ...]] = []
    positional = tuple(range(arity if arity is not None else 2))
    x = 5  # noqa: F841  (the template reads it from this frame)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a template that fails in the wrong frame warns
        assert helper(_recording(seen), *positional) == len(positional)
        if arity is None:  # a keyword named like the helper's own parameter
            assert helper(_recording(seen), fn=1, other=2) == 2
        with pytest.raises(KeyError, match="from the callee"):
            helper(_failing, *positional)
    calls = 3 if arity is None else 2
    assert (counting.entered - before[0], counting.exited - before[1]) == (calls, calls)
    assert seen[0] == (positional, {})


def test_fixed_arity_helpers_are_cheaper_than_varargs() -> None:
    import timeit

    from ncompass.runtime.sites import call_wrapper

    enter, exit_range = bind("noop", "gate")
    helpers = {
        "fixed": call_wrapper(enter, exit_range, None, arity=1),
        "general": call_wrapper(enter, exit_range, None),
    }

    def gate(x: int) -> bool:
        return x > 0

    best = {name: float("inf") for name in helpers}
    for _ in range(9):  # interleaved, so load hits both alike; the best run of each counts
        for name, helper in helpers.items():
            took = timeit.timeit(lambda helper=helper: helper(gate, 1), number=20_000)
            best[name] = min(best[name], took)
    assert best["fixed"] < best["general"]


def test_a_site_hook_wraps_only_the_sites_of_its_name() -> None:
    from ncompass.runtime.sites import hook_sites

    seen: list[str] = []

    def hook(enter: Any, exit: Any) -> tuple[Any, Any]:
        def counted_enter(*args: Any) -> object:
            seen.append("enter")
            return enter(*args)

        return counted_enter, exit

    hook_sites("hooked.site", hook)
    try:
        hooked_enter, hooked_exit = bind("noop", "hooked.site")
        other_enter, _ = bind("noop", "other.site")
    finally:
        hook_sites("hooked.site", None)
    later_enter, _ = bind("noop", "hooked.site")
    hooked_exit(hooked_enter())
    assert seen == ["enter"]
    assert other_enter is bool and later_enter is bool  # unhooked: the idle builtins, untouched
