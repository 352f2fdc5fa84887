"""Errors and warnings a user can act on: spec errors a library re-raises, the line of a bad
``context:``, options that would do nothing, a program's own profiler, Kineto's log lines, the
options messages suggest, and what ``spec validate`` says it checked."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ncompass.capture.decorator import CaptureOptionWarning
from ncompass.capture.runner import RunOptions, run
from ncompass.cli._group import ncompass_cli
from ncompass.errors import SpecError
from tests.conftest import REPO

LAZY_PACKAGE = """
import importlib


def __getattr__(name):
    # as transformers' _LazyModule does: an import failure becomes the package's RuntimeError
    try:
        module = importlib.import_module(".model", __name__)
    except Exception as error:
        raise RuntimeError(
            f"Failed to import {__name__}.model because of the following error (look up to "
            f"see its traceback):\\n{error}"
        ) from error
    return getattr(module, name)
"""


def _ncompass(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))


def test_a_spec_error_a_lazy_importer_re_raises_is_one_line_and_exit_2(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "lazy_lib/__init__.py": LAZY_PACKAGE,
            "lazy_lib/model.py": "class Model:\n    def forward(self, x):\n        return x\n",
            "main.py": "from lazy_lib import Model\nprint(Model().forward(1))\n",
            "spec.yaml": """
                version: 1
                targets:
                  - module: lazy_lib.model
                    functions:
                      - qualname: Nope.forward
                """,
        },
    )
    done = _ncompass("run", "--profiler", "none", "-c", "spec.yaml", "main.py", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"error: {tmp_path / 'spec.yaml'}:5: no function 'Nope.forward' in lazy_lib.model; "
        "closest functions: Model.forward\n"
    )


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed"
)
def test_a_spec_error_inside_transformers_lazy_import_is_one_line(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "main.py": """
                from transformers import GPT2Config, GPT2Model
                GPT2Model(GPT2Config(n_layer=1, n_embd=32, n_head=2))
                """,
            "spec.yaml": """
                version: 1
                targets:
                  - module: transformers.models.gpt2.modeling_gpt2
                    functions:
                      - qualname: GPT2Nope.forward
                """,
        },
    )
    done = _ncompass("run", "--profiler", "none", "-c", "spec.yaml", "main.py", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: {tmp_path / 'spec.yaml'}:5: no function 'GPT2Nope.forward'")


SPEC_CONTEXT = """
version: 1
context: tourch
targets:
  - file: {script}
    functions:
      - qualname: work
"""
MARKER_CONTEXT = """
version: 1
targets:
  - file: {script}
    functions:
      - qualname: work
        name: w
        context: tourch
"""


@pytest.mark.parametrize(
    ("spec", "line"),
    [(SPEC_CONTEXT, 2), (MARKER_CONTEXT, 7)],
    ids=["spec-context", "marker-context"],
)
def test_a_misspelt_context_is_reported_at_its_context_line(
    tmp_path: Path, spec: str, line: int
) -> None:
    script = tmp_path / "main.py"
    script.write_text("def work():\n    return 1\n\nwork()\n")
    path = tmp_path / "spec.yaml"
    path.write_text(spec.lstrip("\n").format(script=script))
    options = RunOptions(specs=[path], script=str(script), profiler="none")
    with pytest.raises(SpecError, match=rf"spec.yaml:{line}: unknown context 'tourch'"):
        run(options)
    done = CliRunner().invoke(ncompass_cli, ["spec", "validate", str(path)])
    assert f"spec.yaml:{line}: unknown context 'tourch'" in done.stderr


SHAPES_PROGRAM = """
import torch
from ncompass import capture_trace

@capture_trace(trace_name="step", record_shapes=True)
def step():
    return torch.randn(8, 8) @ torch.randn(8, 8)

step()
"""


def _window_shapes(folder: Path) -> list[object]:
    (window,) = folder.glob("step*.json")
    events = json.loads(window.read_text())["traceEvents"]
    return [e["args"]["Input Dims"] for e in events if "Input Dims" in e.get("args", {})]


def test_capture_trace_options_the_run_lacks_are_warned_and_the_run_option_works(
    tmp_path: Path,
) -> None:
    script = tmp_path / "shapes.py"
    script.write_text(SHAPES_PROGRAM)
    plain = RunOptions(script=str(script), output_dir=tmp_path / "plain", trace_name="run")
    with pytest.warns(CaptureOptionWarning) as noticed:
        assert run(plain).exit_code == 0
    (warning,) = noticed
    assert str(warning.message) == (
        "capture_trace 'step': record_shapes=True does nothing here: a torch profiler is "
        "already recording (ncompass run's, or an enclosing capture_trace's) and its options "
        "win; give them to it (`ncompass run --record-shapes ...`)"
    )
    assert warning.filename == str(script)  # the user's call, not a line inside ncompass
    assert _window_shapes(tmp_path / "plain") == []
    shaped = RunOptions(
        script=str(script), output_dir=tmp_path / "shaped", trace_name="run", record_shapes=True
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureOptionWarning)
        assert run(shaped).exit_code == 0
    assert _window_shapes(tmp_path / "shaped")


OWN_PROFILER = """
import sys
import torch

with torch.profiler.profile() as profile:
    torch.randn(10, 10) @ torch.randn(10, 10)
profile.export_chrome_trace(sys.argv[1])
print("exported")
"""


def test_a_program_with_its_own_torch_profiler_keeps_its_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "own.py"
    script.write_text(OWN_PROFILER)
    traces = tmp_path / "traces"
    own = tmp_path / "own.json"
    done = CliRunner().invoke(
        ncompass_cli, ["run", "-o", str(traces), "--trace-name", "t", str(script), str(own)]
    )
    assert done.exit_code == 0, done.output
    assert "exported" in done.stdout and own.stat().st_size > 0
    assert done.stderr == (
        "ncompass: warning: the program ran a torch profiler of its own, so ncompass's stepped "
        "aside and no ncompass trace was written; use the program's own trace, or run it "
        "without its profiler\n"
    )
    assert not list(traces.glob("*")) if traces.exists() else True  # no empty claimed file


def test_run_prints_no_kineto_log_lines(tmp_path: Path) -> None:
    script = tmp_path / "main.py"
    script.write_text("import sys, torch\ntorch.ones(3).sum()\nprint('to stderr', file=sys.stderr)\n")  # fmt: skip
    done = _ncompass("run", "-o", "traces", "--trace-name", "t", "main.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert not [line for line in lines if line.startswith("USDT:")], lines
    assert lines[0] == "to stderr" and lines[-1].startswith("ncompass: trace written to")


def test_spec_validate_marks_a_target_it_skipped_without_a_check_mark(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\ntargets:\n  - module: no_such_package.models\n"
        "    requires: no-such-package>=1\n    functions:\n      - qualname: Model.forward\n"
    )
    done = CliRunner().invoke(ncompass_cli, ["spec", "validate", str(spec)])
    assert done.exit_code == 0, done.output
    assert "✓" not in done.output
    assert done.stdout.splitlines() == [
        f"- {spec}: not checked: 1 target skipped",
        "    no_such_package.models: skipped (no-such-package is not installed (requires "
        "no-such-package>=1))",
    ]


def test_spec_validate_reports_every_schema_error(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\ntargets:\n  - module: json.decoder\n    functions:\n"
        "      - qualname: JSONDecoder.decode\n        nmae: a\n"
        "    calls:\n      - in: JSONDecoder.decode\n"
        "    rnages: []\n"
    )
    done = CliRunner().invoke(ncompass_cli, ["spec", "validate", str(spec)])
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [
        f"✗ {spec}:6: unknown key 'nmae'; did you mean 'name'?",
        f"✗ {spec}:8: missing required key 'call'",
        f"✗ {spec}:9: unknown key 'rnages'; did you mean 'ranges'?",
    ]
    script = tmp_path / "main.py"
    script.write_text("print('never runs')\n")
    with pytest.raises(SpecError, match=r"spec.yaml:6: .*'nmae'.* \(and 2 more problems: "):
        run(RunOptions(specs=[spec], script=str(script), profiler="none"))


def test_session_run_help_describes_every_option() -> None:
    done = CliRunner().invoke(ncompass_cli, ["session", "run", "--help"])
    options = re.findall(r"^  (-\w, )?--[a-z-]+[^\n]*$", done.output, re.MULTILINE)
    described = re.findall(r"^  (-\w, )?--[a-z-]+ ?[A-Z:_ ]*  +\S", done.output, re.MULTILINE)
    assert len(described) == len(options) > 5, done.output


# -- the options messages suggest ------------------------------------------------------------

# options of other programs that ncompass names (nsys, nvidia-smi, torchrun, ray, the example
# scripts of the help texts) or passes to its own rank entry point
OTHER_PROGRAMS = {
    "--force-overwrite", "--output", "--trace", "--type", "--query-gpu", "--format",
    "--nproc-per-node", "--master-port", "--cuda-memory-usage", "--dashboard-port",
    "--epochs", "--steps", "--new-tokens", "--job-id", "--capture-range", "--capture-range-end",
}  # fmt: skip
SUGGESTION = re.compile(r"`ncompass ((?:[a-z][a-z-]* ?)+)([^`]*)`")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _commands() -> dict[str, click.Command]:
    """Every command by its full name (``run``, ``session feedback``)."""
    found: dict[str, click.Command] = {}
    context = click.Context(ncompass_cli)

    def visit(group: click.Group, prefix: str) -> None:
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            assert command is not None
            found[f"{prefix}{name}"] = command
            if isinstance(command, click.Group):
                visit(command, f"{prefix}{name} ")

    visit(ncompass_cli, "")
    return found


def _options(command: click.Command) -> set[str]:
    return {name for param in command.params for name in param.opts if name.startswith("--")}


def _message_texts() -> list[tuple[str, str]]:
    """Every string literal of the package (f-strings with their holes as ``{}``)."""
    texts = []
    for path in sorted((REPO / "ncompass").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
                texts.append((str(path.relative_to(REPO)), "".join(map(str, parts))))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                texts.append((str(path.relative_to(REPO)), node.value))
    return texts


def test_every_option_a_message_suggests_exists() -> None:
    commands = _commands()
    every = set().union(*map(_options, [ncompass_cli, *commands.values()])) | {"--help"}
    unknown = [
        (where, option)
        for where, text in _message_texts()
        for option in OPTION.findall(text)
        if option not in every and option not in OTHER_PROGRAMS
    ]
    assert not unknown
    wrong = []
    for where, text in _message_texts():
        for words, rest in SUGGESTION.findall(text):
            name = words.strip()
            while name and name not in commands:  # `ncompass run SCRIPT`: the command's words
                name = name.rpartition(" ")[0]
            if not name:
                continue
            options = _options(commands[name]) | {"--help"}
            wrong += [(where, name, o) for o in OPTION.findall(rest) if o not in options]
    assert not wrong


def test_session_feedback_suggests_only_options_it_has(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        ncompass_cli,
        ["session", "feedback", "-o", str(tmp_path), "--target", "no_such_mod:1-2", "why slow?"],
    )
    assert done.exit_code == 2 and "no_such_mod" in done.stderr
    feedback = _commands()["session feedback"]
    suggested = set(OPTION.findall(SUGGESTION.sub("", done.stderr)))
    assert suggested <= _options(feedback), suggested
