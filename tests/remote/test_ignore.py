"""Ignore rules: the files kept are exactly the ones git keeps (git itself is the oracle)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncompass.remote.ignore import compile_pattern
from ncompass.remote.upload import collect_upload

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="git is not installed (it is the oracle)")

TREE = [
    "a.py",
    "b.log",
    "keep.log",
    "build/out.bin",
    "src/pkg/mod.py",
    "src/pkg/mod.pyc",
    "src/pkg/data/big.bin",
    "src/pkg/data/small.txt",
    "src/notes.md",
    "docs/build/index.html",
    "docs/a b.txt",
    "logs/2024/x.log",
    "deep/er/still/x.tmp",
    "#hash.txt",
    "!bang.txt",
]


def _write_tree(root: Path, files: list[str], ignores: dict[str, str]) -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    for folder, text in ignores.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / ".gitignore").write_text(text)


def _git_kept(root: Path) -> set[str]:
    """The files git would offer to add: not ignored, by git's own rules."""
    env = {**os.environ, "HOME": str(root.parent), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run([GIT, "init", "-q", str(root)], check=True, env=env)
    listed = subprocess.run(
        [GIT, "-C", str(root), "ls-files", "--others", "--exclude-standard", "-z"],
        check=True,
        capture_output=True,
        env=env,
    ).stdout
    return {name for name in listed.decode().split("\0") if name}


def _ours(root: Path) -> set[str]:
    # ncompass's defaults (.venv/, __pycache__/, *.pyc) are not git's: the trees compared with
    # git hold no such files, or ignore them in their .gitignore too.
    return {item.relative for item in collect_upload(root).files}


@needs_git
def test_nested_gitignores_negations_anchors_and_globs_match_git(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    ignores = {
        "": "*.log\n!keep.log\n/build/\n*.pyc\n\\#hash.txt\n\\!bang.txt\n**/still/*.tmp\n",
        "src": "pkg/data/*\n!pkg/data/small.txt\n",
        "docs": "build\n",
        "logs": "!*.log\n",
    }
    _write_tree(root, TREE, ignores)
    kept_by_git = _git_kept(root)
    assert _ours(root) == kept_by_git
    assert "src/pkg/data/small.txt" in kept_by_git and "src/pkg/data/big.bin" not in kept_by_git


@needs_git
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    lines=st.lists(
        st.builds(
            lambda bang, lead, body, trail: f"{bang}{lead}{body}{trail}",
            st.sampled_from(["", "", "!"]),
            st.sampled_from(["", "", "/", "**/"]),
            st.sampled_from(
                [
                    "*.bin",
                    "a*",
                    "src",
                    "pkg",
                    "data",
                    "src/pkg",
                    "*/data",
                    "src/**/x",
                    "?.py",
                    "[ab].py",
                    "[!a].py",
                    "logs/*",
                    "deep/**",
                    "*",
                    "mod.*",
                    "er",
                ]
            ),
            st.sampled_from(["", "", "/"]),
        ),
        max_size=6,
    )
)
def test_any_gitignore_keeps_the_files_git_keeps(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str]
) -> None:
    root = tmp_path_factory.mktemp("prop") / "repo"
    files = [name for name in TREE if not name.endswith(".pyc")]
    _write_tree(root, files, {"": "\n".join(lines) + "\n"})
    assert _ours(root) == _git_kept(root)


def test_ncompassignore_wins_over_gitignore_in_the_same_folder(tmp_path: Path) -> None:
    _write_tree(tmp_path, ["model.ckpt", "run.py", "notes.txt"], {"": "*.ckpt\n"})
    (tmp_path / ".ncompassignore").write_text("!model.ckpt\nnotes.txt\n")
    kept = {item.relative for item in collect_upload(tmp_path).files}
    assert kept == {".gitignore", ".ncompassignore", "model.ckpt", "run.py"}


def test_vcs_folders_and_environments_stay_home_but_defaults_can_be_reincluded(
    tmp_path: Path,
) -> None:
    _write_tree(
        tmp_path,
        [
            ".git/config",
            ".venv/lib/x.py",
            "pkg/__pycache__/m.cpython-311.pyc",
            "pkg/m.py",
            "venv/keep.txt",
        ],
        {},
    )
    (tmp_path / ".ncompassignore").write_text("!venv/\n")
    kept = {item.relative for item in collect_upload(tmp_path).files}
    assert kept == {".ncompassignore", "pkg/m.py", "venv/keep.txt"}


@pytest.mark.parametrize(
    ("pattern", "path", "is_folder", "matches"),
    [
        ("*.py", "a/b.py", False, True),
        ("/a/*.py", "x/a/b.py", False, False),
        ("a/**/b", "a/b", False, True),
        ("a/**/b", "a/x/y/b", False, True),
        ("foo/**", "foo", True, False),
        ("foo/**", "foo/x/y", False, True),
        ("b/", "x/b", False, False),
        ("b/", "x/b", True, True),
        ("[!a-c]x", "ax", False, False),
        ("trailing\\ ", "trailing ", False, True),
        ("trailing  ", "trailing", False, True),
    ],
)
def test_pattern_semantics(pattern: str, path: str, is_folder: bool, matches: bool) -> None:
    compiled = compile_pattern(pattern)
    assert compiled is not None
    assert compiled.matches(path, is_folder) is matches


def test_comments_and_blank_lines_are_not_patterns() -> None:
    assert compile_pattern("# a comment") is None
    assert compile_pattern("   ") is None
    assert compile_pattern("/") is None
