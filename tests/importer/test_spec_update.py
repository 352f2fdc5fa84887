"""``ncompass spec update``: a spec carried over to the installed version of its code.

A planted upgrade of a small module of our own (a renamed function, a moved statement, a
deleted one), the transformers 4.49 sections run against the newest release, and a run whose
every target is skipped: each through the real command line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ncompass.rewrite.source import source_sha256

REPO = Path(__file__).resolve().parents[2]

V1 = """\
def load(path):
    return open(path).read()


def tokenize(text):
    words = text.split()
    counts = {}
    for word in words:
        counts[word] = counts.get(word, 0) + 1
    return counts


def report(counts):
    total = sum(counts.values())
    top = sorted(counts, key=counts.get)[-3:]
    return total, top
"""

# the upgrade: a helper and a docstring push tokenize's body down, `load` is renamed, and
# report's last statement is gone
V2 = '''\
import re


def read_text(path):
    return open(path).read()


def _words(text):
    return re.findall(r"\\w+", text)


def tokenize(text):
    """Count the words."""
    words = text.split()
    counts = {}
    for word in words:
        counts[word] = counts.get(word, 0) + 1
    return counts


def report(counts):
    total = sum(counts.values())
    return total
'''

SPEC = """\
# my markers: keep this comment
version: 1
targets:
  - module: wordcount
    sha256: {sha}
    functions:
      - qualname: {load}
        name: load
    calls:
      - in: tokenize
        call: counts.get
        name: count
    ranges:
      - in: tokenize
        lines: [6, 7]
        first: "words = text.split()"
        last: "counts = {{}}"   # the set-up
        name: setup
{report}"""

REPORT = """\
      - in: report
        lines: [14, 16]
        first: "total = sum(counts.values())"
        last: "return total, top"
        name: report
"""


def _ncompass(*args: str, cwd: Path, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ncompass", *args]
    env = {"PYTHONPATH": f"{path}:{REPO}" if path else str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


@pytest.fixture
def upgraded(tmp_path: Path) -> tuple[Path, Path]:
    """A spec written against V1 of ``wordcount``, and V2 installed."""
    code = tmp_path / "site"
    code.mkdir()
    (code / "wordcount.py").write_text(V2)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.format(sha=source_sha256(V1), load="load", report=REPORT))
    return spec, code


def test_what_cannot_be_placed_is_listed_with_the_closest_names_and_nothing_is_written(
    upgraded: tuple[Path, Path],
) -> None:
    spec, code = upgraded
    before = spec.read_text()
    done = _ncompass("spec", "update", str(spec), cwd=spec.parent, path=code)
    assert done.returncode == 2, done.stderr
    assert f"{spec}:7: load:" in done.stderr and "read_text" in done.stderr  # the closest name
    assert f"{spec}:19: report:" in done.stderr  # its last statement is gone
    assert "closest: 23 'return total'" in done.stderr
    assert "2 markers cannot be placed" in done.stderr
    assert spec.read_text() == before


def test_a_fixed_spec_gets_the_new_lines_and_hash_and_then_validates_as_written(
    upgraded: tuple[Path, Path],
) -> None:
    spec, code = upgraded
    spec.write_text(SPEC.format(sha=source_sha256(V1), load="read_text", report=""))
    done = _ncompass("spec", "update", str(spec), "-o", "new.yaml", cwd=spec.parent, path=code)
    assert done.returncode == 0, done.stderr
    new = (spec.parent / "new.yaml").read_text()
    assert "lines: [14, 15]" in new and f"sha256: {source_sha256(V2)}" in new
    assert "# my markers: keep this comment" in new and "# the set-up" in new
    validated = _ncompass("spec", "validate", "new.yaml", cwd=spec.parent, path=code)
    assert validated.returncode == 0 and "note:" not in validated.stdout, validated.stdout
    # run again: nothing left to do
    again = _ncompass("spec", "update", "new.yaml", cwd=spec.parent, path=code)
    assert "already matches the installed source" in again.stdout


def test_a_spec_without_a_hash_gets_one_in_place(upgraded: tuple[Path, Path]) -> None:
    spec, code = upgraded
    text = SPEC.format(sha="x", load="read_text", report="").replace("    sha256: x\n", "")
    spec.write_text(text)
    done = _ncompass("spec", "update", str(spec), cwd=spec.parent, path=code)
    assert done.returncode == 0, done.stderr
    assert f"  - module: wordcount\n    sha256: {source_sha256(V2)}\n" in spec.read_text()


def test_update_refuses_to_replace_another_file_without_force(upgraded: tuple[Path, Path]) -> None:
    spec, code = upgraded
    (spec.parent / "new.yaml").write_text("mine")
    done = _ncompass("spec", "update", str(spec), "-o", "new.yaml", cwd=spec.parent, path=code)
    assert done.returncode == 2 and "--force" in done.stderr
    assert (spec.parent / "new.yaml").read_text() == "mine"


def _section(spec: Path, requires: str) -> str:
    """The target of ``spec`` whose ``requires`` is ``requires``, as a spec of its own."""
    text = spec.read_text()
    _, _, body = text.partition("targets:\n")
    sections = ["  - module:" + part for part in body.split("  - module:")[1:]]
    (section,) = [part for part in sections if f'requires: "{requires}"' in part]
    return "version: 1\ntargets:\n" + section


@pytest.mark.parametrize("model", ["llama", "qwen2", "mistral"])
def test_a_spec_written_against_4_49_is_carried_to_the_newest_release(
    tmp_path: Path, model: str
) -> None:
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version("5.0"):
        pytest.skip(f"transformers {transformers.__version__} is installed, not 5.x")
    old = tmp_path / "old.yaml"
    old.write_text(
        _section(REPO / "rewrites" / "transformers" / f"{model}.yaml", "transformers>=4.48,<4.51")
    )
    done = _ncompass("spec", "update", str(old), cwd=tmp_path)
    assert done.returncode == 2  # 4.x's `if past_key_value is not None:` block is gone in 5.x
    assert f"{model}.attention.kv_cache_update" in done.stderr
    assert "closest: " in done.stderr and "if cache is not None:" in done.stderr
    # without that range the rest carries over: new lines, hash and requires
    lines = old.read_text().splitlines(keepends=True)
    start = next(
        i
        for i, line in enumerate(lines)
        if "lines: [169, 172]" in line or "lines: [277, 280]" in line
    )
    old.write_text("".join(lines[: start - 1] + lines[start + 4 :]))
    done = _ncompass("spec", "update", str(old), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    major = Version(transformers.__version__).major
    assert f'requires: "transformers>={major}.' in old.read_text()
    validated = _ncompass("spec", "validate", str(old), cwd=tmp_path)
    assert validated.returncode == 0 and "note:" not in validated.stdout, validated.stdout


def test_a_run_whose_every_target_is_skipped_says_so_in_one_line_of_its_own(
    tmp_path: Path,
) -> None:
    (tmp_path / "wordcount.py").write_text(V1)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        'version: 1\ntargets:\n  - module: wordcount\n    requires: "packaging<1"\n'
        "    functions:\n      - qualname: load\n"
    )
    script = tmp_path / "main.py"
    script.write_text("import wordcount\nprint(sorted(wordcount.tokenize('a b a')))\n")
    done = _ncompass(
        "run", "--profiler", "none", "--config", str(spec), str(script), cwd=tmp_path, path=tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "skipping" in line]
    assert lines == [
        f"ncompass: {spec}: skipping target wordcount: packaging "
        f"{_installed('packaging')} is installed, the spec requires packaging<1; "
        f"`ncompass spec update {spec} -o NEW.yaml` carries it over"
    ]
    assert "SkippedTargetWarning" not in done.stderr and "Warning" not in done.stderr


def _installed(distribution: str) -> str:
    from importlib import metadata

    return metadata.version(distribution)
