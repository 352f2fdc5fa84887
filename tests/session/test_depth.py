"""The session finds the slow statement in two runs, at any depth: a discovery run (profiler and
stack sampler) sees the whole call tree, the next run measures the hot path with markers only.

Every session here is ``ncompass session run --json`` in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ncompass.session.callstacks import stack_profile
from ncompass.session.report import history_json
from ncompass.session.sampler import StackSamples
from ncompass.trace import ProfilingSession
from tests.conftest import REPO
from tests.session.chains import (
    HEAVY_IMPORT,
    PLANTED,
    TIED,
    chain_module,
    line_of_text,
    script,
)


def _session(
    folder: Path, run: Path, *extra: str, runs: int = 3
) -> tuple[int, dict[str, Any], str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "session", "run", "--json", "-n", str(runs),
         "-o", str(folder / "traces"), *extra, str(run)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    document = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, document, done.stderr


def _planted_session(
    tmp_path_factory: pytest.TempPathFactory,
    levels: int,
    dispatch_at: int | None,
    imports: str,
    *,
    api: bool = False,
) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp(f"depth{levels + 2}")
    module = folder / f"chain{levels}.py"
    module.write_text(chain_module(levels, dispatch_at=dispatch_at))
    if imports:
        (folder / "heavy.py").write_text(HEAVY_IMPORT)
    run = script(folder, module.stem, imports=imports)
    if api:  # what `session run` does, through ProfilingSession
        session = ProfilingSession(str(folder / "traces"))
        session.run_script(str(run))
        session.apply_targeted_markers()
        session.run_script(str(run))
        assert session.answer is not None
        return module, {
            "answer": session.answer.to_dict(),
            "iterations": history_json(session.iterations),
        }
    code, document, stderr = _session(folder, run)
    assert code == 0, stderr
    return module, document


@pytest.fixture(scope="module")
def shallow(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Depth 3 (script -> Model.forward -> level_1), behind an import that takes 1.5 s."""
    return _planted_session(tmp_path_factory, 1, None, "import heavy\n")


@pytest.fixture(scope="module")
def deep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Depth 10, through the Python API."""
    return _planted_session(tmp_path_factory, 8, None, "", api=True)


@pytest.fixture(scope="module")
def dispatched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Depth 7, one level reached through a dict of functions and functools.partial."""
    return _planted_session(tmp_path_factory, 5, 3, "")


@pytest.mark.parametrize("case", ["shallow", "deep", "dispatched"])
def test_the_planted_statement_is_found_in_two_runs(
    case: str, request: pytest.FixtureRequest
) -> None:
    module, document = request.getfixturevalue(case)
    answer = document["answer"]
    planted = line_of_text(module, PLANTED)
    assert Path(answer["file"]).resolve() == module.resolve()
    assert answer["lines"] == [planted, planted]
    assert answer["statement"] == PLANTED
    assert answer["runs"] == 2 and len(document["iterations"]) == 2
    assert answer["measured_by"] == "markers" and answer["confirmed"] is True
    assert answer["share"] > 0.5
    assert answer["confidence"] in ("high", "medium"), answer
    assert answer["repeats"] == 4  # the four model.forward(1) calls of the script
    discovery = document["iterations"][0]["discovery"]
    assert discovery["hottest"][0]["lines"] == [planted, planted]


def test_an_import_that_dominates_is_set_apart_and_the_answer_is_in_the_model(
    shallow: tuple[Path, dict[str, Any]],
) -> None:
    module, document = shallow
    answer = document["answer"]
    first = document["iterations"][0]
    # the 1.5 s import took more than the model's work, and is reported apart
    assert answer["setup_ms"]["import"] > first["discovery"]["steady_ms"] > 0
    assert Path(answer["file"]).resolve() == module.resolve()
    # asked to, the session counts setup like any other time: the import's loop wins
    samples = StackSamples.read(Path(first["stacks_path"]))
    with_setup = stack_profile(samples, module.parent / "run.py", include_setup=True)
    top_line = with_setup.ranked()[0][0]
    assert Path(top_line.file).name == "heavy.py" and top_line.qualname == "spin"


def test_a_tie_is_reported_as_a_tie_naming_both(tmp_path: Path) -> None:
    (tmp_path / "tied.py").write_text(TIED)
    run = script(tmp_path, "tied")
    code, document, stderr = _session(tmp_path, run)
    assert code == 0, stderr
    answer = document["answer"]
    if answer["confidence"] != "tie":
        # on a busy machine one spin can be stretched more than the other in every repeat:
        # the session must then say the machine was busy and not claim to know
        assert answer["confidence"] == "medium" and answer["cpu_waited_share"] >= 0.15, answer
        return
    lines = {answer["lines"][0], *(c["lines"][0] for c in answer["tied_with"])}
    one, two = (
        line_of_text(tmp_path / "tied.py", "# one"),
        line_of_text(tmp_path / "tied.py", "# two"),
    )
    assert {one, two} <= lines


def test_a_failing_script_stops_with_its_exit_code_and_error_lines(tmp_path: Path) -> None:
    (tmp_path / "chain.py").write_text(chain_module(2))
    run = script(tmp_path, "chain")
    run.write_text(run.read_text() + "raise SystemExit('bad batch size: 0')\n")
    code, document, stderr = _session(tmp_path, run)
    assert code == 1
    assert "the script exited with 1:\n    bad batch size: 0" in stderr
    # the work before the failure was still profiled: the answer stands
    assert document["answer"]["statement"] == PLANTED
