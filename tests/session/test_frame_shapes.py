"""The session answers the statement whose code holds the time, whatever frames lead there
(issue 22): comprehensions, lambdas, recursion, a dispatch dict, a call marker with two sites;
and it says what it does (a progress line per run, a second script refused, package paths)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ncompass.importer.hook import disable_rewrites
from ncompass.session.paths import shown_path
from ncompass.trace import ProfilingSession
from tests.conftest import REPO
from tests.session.shapes import TWO_SITES, TWO_SITES_SPEC, hot_line, program


@pytest.fixture(autouse=True)
def _rewrites_off() -> Iterator[None]:
    yield
    disable_rewrites()


def _session_run(folder: Path, script: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "ncompass", "session", "run", *extra, "-o", str(folder / "traces"),
         script],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _shape_session(folder: Path, shape: str) -> tuple[int, dict[str, Any], str]:
    source = program(shape)
    (folder / "prog.py").write_text(source)
    done = _session_run(folder, "prog.py", "--json", "-n", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    return hot_line(source), json.loads(done.stdout), done.stderr


@pytest.fixture(scope="module")
def list_comprehension(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, int, dict[str, Any], str]:
    folder = tmp_path_factory.mktemp("listcomp")
    return (folder, *_shape_session(folder, "list comprehension"))


def test_a_list_comprehension_holding_the_time_is_the_answer_not_its_caller(
    list_comprehension: tuple[Path, int, dict[str, Any], str],
) -> None:
    _, hot, document, _ = list_comprehension
    assert [entry["answer"]["lines"] for entry in document["iterations"]] == [[hot, hot]] * 2
    assert document["answer"]["statement"].startswith("junk = [A @ A @ A")


def test_each_run_says_what_it_is_as_it_starts(
    list_comprehension: tuple[Path, int, dict[str, Any], str],
) -> None:
    _, _, _, stderr = list_comprehension
    assert "run 1/2: discovery, 1 marker\n" in stderr
    assert "run 2/2: markers, " in stderr


def test_a_session_refuses_a_second_script_instead_of_mixing_markers(
    list_comprehension: tuple[Path, int, dict[str, Any], str],
) -> None:
    folder, _, _, _ = list_comprehension
    (folder / "other.py").write_text("print('other')\n")
    done = _session_run(folder, "other.py")
    assert done.returncode == 2
    assert "profiles" in done.stderr and "other.py" in done.stderr and "--name" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list((folder / "traces").glob("default-i003*"))  # no third run


@pytest.mark.parametrize("shape", ["set comprehension", "recursion", "lambda"])
def test_frame_shapes_answer_the_statement_holding_the_time(tmp_path: Path, shape: str) -> None:
    hot, document, _ = _shape_session(tmp_path, shape)
    lines = [entry["answer"]["lines"] for entry in document["iterations"]]
    assert lines == [[hot, hot]] * 2, (shape, lines)


DISPATCH = """import torch

torch.set_num_threads(1)
A = torch.randn(260, 260)


def eager_attention(q, repeat):
    scores = q @ q.T
    for _ in range(repeat):
        scores = scores @ A
    return scores.sum(-1)


ATTENTION_FUNCTIONS = {"eager": eager_attention}


class Attention:
    def __init__(self, implementation):
        self.implementation = implementation

    def forward(self, q):
        attention_interface = ATTENTION_FUNCTIONS[self.implementation]
        out = attention_interface(q, 6)
        extra = attention_interface(q, 1)
        return out + extra


LAYER = Attention("eager")
Q = torch.randn(260, 260)
for _ in range(25):
    LAYER.forward(Q)
"""


def test_drilling_a_dispatched_call_follows_the_function_the_sampler_saw(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(DISPATCH)
    session = ProfilingSession(str(tmp_path / "traces"), session_name="dispatch")
    session.run_script(str(script))
    folded = session.iterations[-1].discovery["folded"]  # type: ignore[index]
    assert [f["function"] for f in folded] == ["__main__:eager_attention"]
    assert folded[0]["callers"] == 2
    session.apply_targeted_markers()
    session.run_script(str(script))
    answer = session.answer
    assert answer is not None and answer.statement == "out = attention_interface(q, 6)"
    session.apply_targeted_markers()  # one level finer: into what attention_interface ran
    proposal = session.last_proposal
    assert proposal is not None
    assert not any("cannot find" in reason for reason in proposal.reasons), proposal.reasons
    marked = [f.qualname for t in session.config.targets for f in t.functions]
    assert "eager_attention" in marked


def test_a_call_marker_with_two_sites_is_answered_by_the_site_that_ran(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(TWO_SITES)
    (tmp_path / "spec.yaml").write_text(TWO_SITES_SPEC)
    done = _session_run(tmp_path, "prog.py", "-n", "2", "--config", "spec.yaml")
    assert done.returncode == 0, done.stderr[-3000:]
    ran = hot_line(TWO_SITES)
    never = TWO_SITES.splitlines().index("        k = torch.mm(cross, W)") + 1
    assert f"line {never} of" not in done.stdout
    answer = next(line for line in done.stdout.splitlines() if line.startswith("answer:"))
    assert f"line {ran} of prog.py" in answer, done.stdout


def test_a_file_of_an_installed_package_prints_from_its_package_folder() -> None:
    import transformers

    file = str(Path(transformers.__file__).parent / "models" / "gpt2" / "modeling_gpt2.py")
    assert shown_path(file) == os.path.join("transformers", "models", "gpt2", "modeling_gpt2.py")
