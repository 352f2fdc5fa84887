"""resolve_context: every accepted spelling, and an actionable error for every mistake."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from ncompass.errors import ContextError
from ncompass.runtime import BUILTIN_CONTEXTS, resolve_context

MODULE = """
def a_function(name):
    pass


class NoExit:
    def __init__(self, name):
        pass

    def __enter__(self):
        return self


class Timer:
    def __init__(self, name, values=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return None


class Outer:
    class Inner(Timer):
        pass
"""


@pytest.fixture(scope="module", autouse=True)
def contexts_module(tmp_path_factory: pytest.TempPathFactory) -> Generator[Path, None, None]:
    directory = tmp_path_factory.mktemp("resolve")
    (directory / "nc_resolve_contexts.py").write_text(MODULE)
    (directory / "nc_resolve_broken.py").write_text("raise ImportError('missing dependency x')\n")
    import sys

    sys.path.insert(0, str(directory))
    yield directory
    sys.path.remove(str(directory))


@pytest.mark.parametrize(
    ("context", "backends"),
    [
        ("torch", ("torch",)),
        ("nvtx", ("nvtx",)),
        ("torch+nvtx", ("torch", "nvtx")),
        ("nvtx + torch", ("nvtx", "torch")),
        ("noop", ("noop",)),
        ("ncompass.trace.profile.torch.TorchRecordContext", ("torch",)),
        ("ncompass.trace.profile.nvtx.NvtxContext", ("nvtx",)),
        ("ncompass.trace.profile.nvtx:NvtxContext", ("nvtx",)),
    ],
)
def test_builtin_and_seed_contexts_resolve_to_fast_backends(
    context: str, backends: tuple[str, ...]
) -> None:
    resolved = resolve_context(context)
    assert resolved.backends == backends
    assert not resolved.is_custom


def test_custom_class_resolves_in_colon_and_dotted_form() -> None:
    colon = resolve_context("nc_resolve_contexts:Timer")
    dotted = resolve_context("nc_resolve_contexts.Timer")
    nested = resolve_context("nc_resolve_contexts:Outer.Inner")
    assert colon.context_class is dotted.context_class
    assert colon.is_custom and colon.accepts_values
    assert nested.context_class is not None and nested.context_class.__name__ == "Inner"


def test_unknown_builtin_lists_the_valid_names_and_the_closest() -> None:
    with pytest.raises(ContextError) as caught:
        resolve_context("nvxt")
    message = str(caught.value)
    assert "unknown context 'nvxt'" in message
    assert "did you mean 'nvtx'?" in message
    for name in BUILTIN_CONTEXTS:
        assert name in message
    assert "package.module:ClassName" in message


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        ("no_such_pkg.contexts:Timer", "cannot import module 'no_such_pkg.contexts'"),
        ("nc_resolve_broken:Timer", "ImportError: missing dependency x"),
        ("nc_resolve_contexts:Timr", "has no attribute 'Timr'; did you mean 'Timer'?"),
        ("nc_resolve_contexts:a_function", "is a function, not a class"),
        ("nc_resolve_contexts:NoExit", "class NoExit has no __exit__ method"),
        ("torch+torch", "repeats a part"),
        ("noop+nvtx", "combines 'noop'"),
        ("", "is empty"),
        (":Timer", "is not 'package.module:ClassName'"),
        ("ncompass.trace.profile.torch.TorchProfilerContext", "starts a whole profiler run"),
    ],
)
def test_bad_contexts_say_what_is_wrong_and_what_to_do(context: str, expected: str) -> None:
    with pytest.raises(ContextError) as caught:
        resolve_context(context)
    assert expected in str(caught.value)


def test_missing_methods_message_says_what_a_context_class_needs() -> None:
    with pytest.raises(ContextError) as caught:
        resolve_context("nc_resolve_contexts:NoExit")
    assert "taking the marker name" in str(caught.value)
    assert "__enter__ and __exit__" in str(caught.value)
