"""A marker that does not fit the code is an error naming the spec file and line, never a silent
restructuring."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ncompass.errors import SpecError
from ncompass.importer.hook import active_config, enable_rewrites
from ncompass.importer.validate import validate_spec
from ncompass.spec.models import RewriteConfig
from tests.support.lines import line_of

SOURCE = """
class Attention:
    def forward(self, x):
        total = 0
        for i in range(x):
            total += i
            total *= 2
        result = total + 1
        return result

    def backward(self, g):
        return g

def helper(x):
    return x
"""


def _spec(tmp_path: Path, body: str, source: str = SOURCE) -> tuple[Path, RewriteConfig]:
    target = tmp_path / "target_mod.py"
    target.write_text(textwrap.dedent(source).lstrip("\n"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\ntargets:\n  - file: target_mod.py\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
    )
    return spec, RewriteConfig.from_yaml(spec)


def _error(tmp_path: Path, body: str, source: str = SOURCE) -> SpecError:
    spec, config = _spec(tmp_path, body, source)
    with pytest.raises(SpecError) as caught:
        validate_spec(config)
    assert caught.value.path == str(spec.resolve())
    return caught.value


def test_range_crossing_a_block_boundary_is_an_error(tmp_path: Path) -> None:
    start, end = line_of(SOURCE, "total *= 2"), line_of(SOURCE, "result = total + 1")
    error = _error(tmp_path, f"ranges:\n  - in: Attention.forward\n    lines: [{start}, {end}]\n")
    assert error.line == 5
    assert "cross a block boundary" in str(error)
    assert "for body" in str(error)


def test_partially_overlapping_ranges_are_an_error(tmp_path: Path) -> None:
    a = line_of(SOURCE, "total = 0")
    b = line_of(SOURCE, "result = total + 1")
    c = line_of(SOURCE, "return result")
    error = _error(
        tmp_path,
        f"ranges:\n  - in: Attention.forward\n    lines: [{a}, {b}]\n"
        f"  - in: Attention.forward\n    lines: [{b}, {c}]\n",
    )
    assert "overlap without nesting" in str(error)
    assert error.line == 7


def test_qualname_that_matches_nothing_lists_the_closest(tmp_path: Path) -> None:
    error = _error(tmp_path, "functions:\n  - qualname: Attention.forwrd\n")
    assert error.line == 5
    assert "no function 'Attention.forwrd'" in str(error)
    assert "Attention.forward" in str(error)


def test_glob_that_matches_nothing_is_an_error(tmp_path: Path) -> None:
    error = _error(tmp_path, "functions:\n  - qualname: 'Mlp.*'\n")
    assert "matches no function" in str(error)


def test_a_class_is_not_a_function(tmp_path: Path) -> None:
    error = _error(tmp_path, "functions:\n  - qualname: Attention\n")
    assert "is a class" in str(error) and "Attention.*" in str(error)


def test_call_that_matches_nothing_lists_the_callees(tmp_path: Path) -> None:
    error = _error(tmp_path, "calls:\n  - in: Attention.forward\n    call: rnge\n")
    assert "no call to 'rnge'" in str(error)
    assert "range" in str(error)


def test_range_outside_its_function_is_an_error(tmp_path: Path) -> None:
    line = line_of(SOURCE, "return g")
    error = _error(tmp_path, f"ranges:\n  - in: Attention.forward\n    lines: [{line}, {line}]\n")
    assert "outside the body of Attention.forward" in str(error)


def test_range_of_blank_lines_is_an_error(tmp_path: Path) -> None:
    source = SOURCE.replace("        result = total + 1\n", "        result = total + 1\n\n\n")
    blank = line_of(source, "result = total + 1") + 1
    error = _error(
        tmp_path, f"ranges:\n  - in: Attention.forward\n    lines: [{blank}, {blank + 1}]\n", source
    )
    assert "hold no statement" in str(error)


def test_drifted_file_without_anchors_is_an_error(tmp_path: Path) -> None:
    line = line_of(SOURCE, "result = total + 1")
    error = _error(
        tmp_path,
        f"sha256: {'0' * 64}\nranges:\n  - in: Attention.forward\n    lines: [{line}, {line}]\n",
    )
    assert "changed since the spec was written" in str(error)
    assert "anchors" in str(error)


def test_drifted_file_with_anchors_finds_the_range_again(tmp_path: Path) -> None:
    line = line_of(SOURCE, "result = total + 1")
    moved = SOURCE.replace(
        "        total = 0\n", "        # a new comment\n        total = 0\n        x = x\n"
    )
    _, config = _spec(
        tmp_path,
        f"sha256: {'0' * 64}\nranges:\n  - in: Attention.forward\n    lines: [{line}, {line}]\n"
        "    first: 'result = total + 1'\n",
        moved,
    )
    checks = validate_spec(config)
    assert any("moved to" in note for note in checks[0].notes)
    site = checks[0].sites[0]
    assert site.start_line == line_of(moved, "result = total + 1") == line + 2


def test_anchors_that_match_nowhere_are_an_error(tmp_path: Path) -> None:
    line = line_of(SOURCE, "result = total + 1")
    error = _error(
        tmp_path,
        f"ranges:\n  - in: Attention.forward\n    lines: [{line}, {line}]\n    first: 'nothing like this'\n",
    )
    assert "anchor first='nothing like this'" in str(error)


def test_unknown_context_class_is_an_error(tmp_path: Path) -> None:
    error = _error(
        tmp_path, "functions:\n  - qualname: helper\n    context: 'no_such_module:Timer'\n"
    )
    assert error.line == 6 and "cannot find module 'no_such_module'" in str(error)  # context:


def test_misspelt_context_fails_at_its_line_when_rewrites_are_enabled(tmp_path: Path) -> None:
    body = "functions:\n  - qualname: helper\n    context: tourch\n"
    error = _error(tmp_path, body)
    assert error.line == 6 and "unknown context 'tourch': did you mean 'torch'?" in str(error)
    spec, _ = _spec(tmp_path, body)
    with pytest.raises(SpecError, match=rf"{spec.resolve()}:6: unknown context 'tourch'"):
        enable_rewrites(spec)  # before anything is imported, not at the first import
    assert active_config() is None
    spec.write_text("version: 1\ncontext: nvtxx\ntargets: []\n")
    with pytest.raises(SpecError, match=r"spec.yaml:2: unknown context 'nvtxx'"):
        enable_rewrites(spec)


def test_missing_target_names_the_spec_line(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 1\ntargets:\n  - file: gone.py\n  - module: no_such.module\n")
    with pytest.raises(SpecError, match=r"spec.yaml:3: target file .*gone.py does not exist"):
        validate_spec(RewriteConfig.from_yaml(spec))
    spec.write_text("version: 1\ntargets:\n  - module: no_such.module\n")
    with pytest.raises(SpecError, match=r"spec.yaml:3: module 'no_such.module' not found"):
        validate_spec(RewriteConfig.from_yaml(spec))


def test_ambiguous_bare_function_name_lists_the_candidates(tmp_path: Path) -> None:
    source = SOURCE + "\nclass Other:\n    def backward(self):\n        return 1\n"
    line = line_of(source, "return g")
    error = _error(tmp_path, f"ranges:\n  - in: backward\n    lines: [{line}, {line}]\n", source)
    assert "ambiguous" in str(error)
    assert "Attention.backward" in str(error) and "Other.backward" in str(error)


def test_template_that_is_not_python_is_an_error(tmp_path: Path) -> None:
    error = _error(tmp_path, "functions:\n  - qualname: helper\n    name: 'x[{x +}]'\n")
    assert "not a valid template" in str(error)


def test_replacement_of_unknown_name_is_an_error(tmp_path: Path) -> None:
    error = _error(tmp_path, "replace:\n  - name: Atention\n    with: 'fast:Attention'\n")
    assert "neither defined nor used" in str(error)
    assert "Attention" in str(error)


@pytest.mark.parametrize(
    ("header", "callee"),
    [
        ("if super().ok():", "super"),
        ("if 'a' in locals():", "locals"),
        ("while eval('0'):", "eval"),
    ],
)
def test_header_calls_that_read_their_frame_cannot_be_marked(
    tmp_path: Path, header: str, callee: str
) -> None:
    source = f"""
    class Base:
        def ok(self):
            return True

    class Child(Base):
        def run(self):
            a = 1
            {header}
                return a
            return 0
    """
    error = _error(tmp_path, f"calls:\n  - in: Child.run\n    call: {callee}\n", source)
    assert f"the call to {callee}() at line {line_of(source, header)}" in str(error)
    assert "reads the frame it is called from" in str(error) and error.line == 5


def test_header_calls_to_those_builtins_with_explicit_arguments_are_fine(tmp_path: Path) -> None:
    source = """
    def run(a):
        if vars(a) or eval("1", {}):
            return 1
    """
    _, config = _spec(
        tmp_path, "calls:\n  - in: run\n    call: vars\n  - in: run\n    call: eval\n", source
    )
    assert len(validate_spec(config)[0].sites) == 2
