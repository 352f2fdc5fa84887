"""Where markers land: ranges widened to whole statements, anchors that still match keep their
lines, and markers in ``async def`` bodies and generators use start/end ranges."""

from __future__ import annotations

import textwrap
from pathlib import Path

from ncompass.importer.validate import TargetCheck, validate_spec
from ncompass.spec.models import RewriteConfig
from tests.support.lines import line_of

SOURCE = """
def f(x):
    total = compute(
        x,
        2,
    )
    other = 1
    return total + other

def compute(a, b):
    return a * b

async def fetch(x):
    y = x + 1
    return y

def numbers(n):
    for i in range(n):
        yield i

def repeat():
    z = 1
    print("z")
    z = 1
    return z
"""


def _check(tmp_path: Path, body: str) -> TargetCheck:
    (tmp_path / "placed.py").write_text(textwrap.dedent(SOURCE).lstrip("\n"))
    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 1\ntargets:\n  - file: placed.py\n" + textwrap.indent(body, "    "))
    (check,) = validate_spec(RewriteConfig.from_yaml(spec))
    return check


def test_a_range_starting_inside_a_multi_line_statement_is_widened_to_it(tmp_path: Path) -> None:
    source = textwrap.dedent(SOURCE).lstrip("\n")
    inside = line_of(source, "x,")  # the second line of `total = compute(...)`
    check = _check(tmp_path, f"ranges:\n  - in: f\n    lines: [{inside}, {inside + 1}]\n")
    (site,) = check.sites
    assert (site.start_line, site.end_line) == (
        line_of(source, "total = compute("),
        line_of(source, "2,") + 1,  # its closing parenthesis
    )


def test_anchors_that_still_match_their_lines_keep_them(tmp_path: Path) -> None:
    source = textwrap.dedent(SOURCE).lstrip("\n")
    second = line_of(source, 'print("z")') + 1  # the second `z = 1`; the first is nearer the top
    check = _check(
        tmp_path,
        f"sha256: {'0' * 64}\nranges:\n  - in: repeat\n    lines: [{second}, {second}]\n"
        "    first: 'z = 1'\n",
    )
    (site,) = check.sites
    assert (site.start_line, site.end_line) == (second, second)
    assert not [note for note in check.notes if "moved" in note]


def test_markers_in_async_functions_and_generators_are_start_end_ranges(tmp_path: Path) -> None:
    source = textwrap.dedent(SOURCE).lstrip("\n")
    y = line_of(source, "y = x + 1")
    check = _check(
        tmp_path,
        "functions:\n  - qualname: numbers\n  - qualname: f\n"
        f"ranges:\n  - in: fetch\n    lines: [{y}, {y}]\n",
    )
    async_safe = {site.qualname: site.async_safe for site in check.sites}
    assert async_safe == {"numbers": True, "f": False, "fetch": True}
