"""Custom context classes: what they receive, what they see, and how their failures are kept out."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Generator
from typing import Any

import pytest

from ncompass.errors import ContextError
from ncompass.runtime import RangeContextWarning
from ncompass.runtime.sites import bind

MODULE = """
LOG = []


class Recording:
    def __init__(self, name, values=None):
        self.name = name
        self.values = values

    def __enter__(self):
        LOG.append(("enter", self.name, None if self.values is None else dict(self.values)))
        return self

    def __exit__(self, exc_type, exc, tb):
        LOG.append(("exit", self.name, exc_type, exc))


class NameOnly:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        LOG.append(("enter", self.name))

    def __exit__(self, *exc_info):
        LOG.append(("exit", self.name))


class BrokenEnter:
    def __init__(self, name, values=None):
        pass

    def __enter__(self):
        raise RuntimeError("enter failed")

    def __exit__(self, *exc_info):
        LOG.append("exit of a context that never entered")


class BrokenExit:
    def __init__(self, name, values=None):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        raise RuntimeError("exit failed")
"""


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> Generator[Any, None, None]:
    directory = tmp_path_factory.mktemp("custom")
    (directory / "nc_custom_contexts.py").write_text(MODULE)
    sys.path.insert(0, str(directory))
    import nc_custom_contexts

    yield nc_custom_contexts
    sys.path.remove(str(directory))


@pytest.fixture
def log(module: Any) -> list[Any]:
    module.LOG.clear()
    log: list[Any] = module.LOG
    return log


def run(context: str, name: str, body: Any, **options: Any) -> Any:
    enter, exit_range = bind(context, name, **options)
    handle = enter(lambda: name.replace("{i}", "3")) if options.get("dynamic") else enter()
    try:
        return body()
    finally:
        exit_range(handle)


def test_custom_context_receives_name_and_values(log: list[Any]) -> None:
    run("nc_custom_contexts:Recording", "step", lambda: None, values={"layer": 2})
    assert log == [("enter", "step", {"layer": 2}), ("exit", "step", None, None)]


def test_custom_context_gets_the_dynamic_name(log: list[Any]) -> None:
    run("nc_custom_contexts:Recording", "layer[{i}]", lambda: None, dynamic=True)
    assert log[0] == ("enter", "layer[3]", None)


def test_custom_context_sees_the_exception_leaving_the_code(log: list[Any]) -> None:
    error = ZeroDivisionError("inside")

    def body() -> None:
        raise error

    with pytest.raises(ZeroDivisionError):
        run("nc_custom_contexts:Recording", "failing", body)
    assert log[-1] == ("exit", "failing", ZeroDivisionError, error)


def test_custom_context_is_not_told_about_an_exception_handled_around_it(
    log: list[Any],
) -> None:
    try:
        raise KeyError("handled by the caller")
    except KeyError:
        run("nc_custom_contexts:Recording", "inside-handler", lambda: None)
    assert log[-1] == ("exit", "inside-handler", None, None)


def test_class_without_values_parameter_works_without_values(log: list[Any]) -> None:
    run("nc_custom_contexts:NameOnly", "plain", lambda: None)
    assert log == [("enter", "plain"), ("exit", "plain")]


def test_values_for_a_class_that_takes_none_is_a_context_error(module: Any) -> None:
    with pytest.raises(ContextError, match="takes no 'values' keyword"):
        bind("nc_custom_contexts:NameOnly", "plain", values={"a": 1})


def test_failing_enter_warns_once_and_the_code_still_runs(log: list[Any]) -> None:
    enter, exit_range = bind("nc_custom_contexts:BrokenEnter", "broken")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            handle = enter()
            try:
                result = 42
            finally:
                exit_range(handle)
    assert result == 42
    assert [str(w.message) for w in caught] == [
        "custom context 'nc_custom_contexts:BrokenEnter' raised in __enter__ (RuntimeError: "
        "enter failed); the marked code ran unchanged but this range is missing from the trace"
    ]
    assert caught[0].category is RangeContextWarning
    assert caught[0].filename == __file__
    assert log == []


def test_failing_exit_does_not_replace_the_codes_exception(module: Any) -> None:
    error = IndexError("the real error")

    def body() -> None:
        raise error

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(IndexError) as raised:
            run("nc_custom_contexts:BrokenExit", "broken-exit", body)
    assert raised.value is error
    assert "raised in __exit__ (RuntimeError: exit failed)" in str(caught[0].message)


def test_failing_name_function_falls_back_to_the_template_and_warns_once(module: Any) -> None:
    enter, exit_range = bind("nc_custom_contexts:Recording", "layer[{i}]", dynamic=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            exit_range(enter(lambda: {}["missing"]))
    assert len(caught) == 1
    assert "marker name 'layer[{i}]' could not be computed (KeyError" in str(caught[0].message)
    assert caught[0].filename == __file__
