"""YAML that cannot blow up: bounded size, nesting and alias expansion.

PyYAML composes ``*alias`` references as shared nodes, so a ten-line file of nested aliases (the
"billion laughs" shape) is small as nodes but expands to billions of values once turned into
Python data. :class:`BoundedLoader` counts, while composing, how many values each node expands
to and how many of those its own text holds, and stops at the first node whose aliases add more
than :data:`MAX_YAML_VALUES`, naming its line. Values written out are bounded by the file size
(:data:`MAX_YAML_BYTES`) alone: a 1 MiB spec of 20k markers, no alias in it, is read. Deep
nesting and recursive aliases are refused the same way, before any recursion can run away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

_libyaml: Any
try:
    import yaml._yaml as _libyaml
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    _libyaml = None

MAX_YAML_BYTES = 1 << 20
"""Largest YAML file read (1 MiB; a spec with hundreds of markers is a few KiB)."""
MAX_YAML_VALUES = 100_000
"""Most values (scalars, lists, mappings) aliases may add to a node, beyond those written out."""
MAX_YAML_DEPTH = 100
"""Deepest nesting of lists and mappings."""


class YamlLimitError(ComposerError):
    """A YAML document goes past one of the limits; ``problem_mark`` is where."""


class _BoundedComposition(Composer):
    """The composer's part: counts each node's expanded size and the nesting as it composes."""

    # provided by the parser this is mixed with (Python or libyaml)
    check_event: Callable[..., bool]
    peek_event: Callable[[], Any]

    def _start_counting(self) -> None:
        self._expanded_sizes: dict[int, int] = {}
        self._written = 0  # nodes composed from text so far (an alias is not one)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if node is not None and id(node) not in self._expanded_sizes:
                raise YamlLimitError(
                    problem="this alias refers to the value that contains it (a recursive "
                    "alias); write the value out instead",
                    problem_mark=mark,
                )
            return node
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise YamlLimitError(
                problem=f"values nest deeper than {MAX_YAML_DEPTH} levels here",
                problem_mark=mark,
            )
        written_before = self._written
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        self._written += 1
        size = 1 + sum(self._expanded_sizes.get(id(child), 1) for child in _children(node))
        if size - (self._written - written_before) > MAX_YAML_VALUES:
            raise YamlLimitError(
                problem=f"this value expands to more than {MAX_YAML_VALUES:,} values through "
                "aliases (*name) beyond those written out; write it without nested aliases",
                problem_mark=node.start_mark,
            )
        self._expanded_sizes[id(node)] = size
        return node


class BoundedLoader(_BoundedComposition, yaml.SafeLoader):
    """A ``SafeLoader`` whose composer refuses documents past the limits above."""

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._start_counting()


if _libyaml is not None:

    class _BoundedCLoader(_BoundedComposition, _libyaml.CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """The same over libyaml's C parser (PyYAML's Python scanner slows down on deep flow
        nesting: half a million ``[`` took seconds before the first event)."""

        def __init__(self, stream: str | bytes) -> None:
            _libyaml.CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._start_counting()

    _LOADER: type[BoundedLoader] | type[_BoundedCLoader] = _BoundedCLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _LOADER = BoundedLoader


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def compose_bounded(text: str) -> yaml.Node | None:
    """The node tree of one YAML document.

    Raises:
        YamlLimitError: aliases add more than :data:`MAX_YAML_VALUES` values, the document
            nests deeper than :data:`MAX_YAML_DEPTH`, or holds a recursive alias.
        yaml.YAMLError: it is not valid YAML.
    """
    loader = _LOADER(text)
    try:
        node: yaml.Node | None = loader.get_single_node()
        return node
    except yaml.MarkedYAMLError as error:
        raise _as_limit(error) from None
    finally:
        loader.dispose()


def load_bounded(text: str) -> Any:
    """Python data of one YAML document (as ``yaml.safe_load``), within the limits above."""
    loader = _LOADER(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        raise _as_limit(error) from None
    finally:
        loader.dispose()


def _as_limit(error: yaml.MarkedYAMLError) -> yaml.MarkedYAMLError:
    """libyaml's own nesting limit (it scans ahead) worded as ours; other errors as they are."""
    if "maximum nesting depth" not in str(error.problem):
        return error
    return YamlLimitError(
        problem=f"values nest deeper than {MAX_YAML_DEPTH} levels here",
        problem_mark=error.problem_mark,
    )


__all__ = [
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "BoundedLoader",
    "YamlLimitError",
    "compose_bounded",
    "load_bounded",
]
