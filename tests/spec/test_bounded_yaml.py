"""The bounded YAML loaders, Python and libyaml alike, refuse bombs before expanding them."""

from __future__ import annotations

import time

import pytest
import yaml

from ncompass.spec import bounded_yaml
from ncompass.spec.bounded_yaml import BoundedLoader, YamlLimitError
from tests.cli.test_hostile_inputs import BILLION_LAUGHS

LOADERS = [BoundedLoader, bounded_yaml._LOADER]


def compose(loader: type, text: str) -> yaml.Node | None:
    instance = loader(text)
    try:
        node: yaml.Node | None = instance.get_single_node()
        return node
    finally:
        instance.dispose()


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
def test_alias_bomb_is_refused_at_its_line(loader: type) -> None:
    started = time.perf_counter()
    with pytest.raises(YamlLimitError) as caught:
        compose(loader, BILLION_LAUGHS)
    assert time.perf_counter() - started < 0.5
    assert caught.value.problem_mark is not None and caught.value.problem_mark.line + 1 == 7


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
def test_recursive_alias_and_deep_nesting_are_refused(loader: type) -> None:
    with pytest.raises(YamlLimitError, match="recursive alias"):
        compose(loader, "a: &x\n  - *x\n")
    with pytest.raises(YamlLimitError, match="deeper than 100"):
        compose(loader, "a:\n" + "- " * 200 + "1\n")  # block sequences, one per "- "


@pytest.mark.parametrize("loader", LOADERS, ids=lambda loader: loader.__name__)
def test_shared_values_within_the_limit_load_as_safe_load_does(loader: type) -> None:
    text = "base: &b {x: 1, y: [1, 2]}\nfirst: *b\nsecond: *b\n"
    node = compose(loader, text)
    assert node is not None
    assert bounded_yaml.load_bounded(text) == yaml.safe_load(text)


def test_libyaml_nesting_error_reads_like_ours() -> None:
    with pytest.raises(YamlLimitError, match="deeper than 100 levels"):
        bounded_yaml.compose_bounded("a: " + "[" * 500_000)
