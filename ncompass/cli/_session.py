"""``ncompass session ...``: the iterative loop from the command line."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ncompass.errors import SpecError

if TYPE_CHECKING:
    from ncompass.capture.triggers import RecordingWindowOptions
    from ncompass.session.proposal import Proposal

_TARGET = re.compile(r"^(?P<module>[^:]+):(?P<start>\d+)-(?P<end>\d+)$")

_name_option = click.option("--name", default="default", show_default=True, help="Session name.")
_dir_option = click.option(
    "--output-dir",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("traces"),
    show_default=True,
    help="Trace folder (the session keeps its files in OUTPUT_DIR/NAME).",
)


def _parse_target(target: str) -> tuple[str, int, int]:
    match = _TARGET.match(target)
    if match is None:
        raise click.BadParameter(
            f"{target!r}: write MODULE:START-END (e.g. tinyformer.model:38-51) or FILE.py:START-END"
        )
    return match["module"], int(match["start"]), int(match["end"])


@click.group("session")
def session_group() -> None:
    """Profile, find the hottest code, mark it finer, and run again."""


@session_group.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Spec (YAML/JSON) whose markers the first run starts from; repeat to merge several.",
)
@click.option("--iterations", "-n", type=click.IntRange(1, 50), default=3, show_default=True)
@click.option("--feedback", default=None, help="What you want to know (with --target).")
@click.option("--target", default=None, help="MODULE:START-END the feedback is about.")
@click.option("--top", type=int, default=5, show_default=True, help="Markers shown per iteration.")
@click.option(
    "--include-setup",
    is_flag=True,
    help="Let time spent once (imports, model construction, compilation) be the answer.",
)
@click.option(
    "--window",
    default=None,
    metavar="MARKER:FIRST:COUNT",
    help="Each run records only calls FIRST to FIRST+COUNT-1 of MARKER (markers only: no "
    "discovery run), so every run measures the same steps.",
)
@click.option(
    "--one-level",
    is_flag=True,
    help="No discovery run: mark one level finer per run (the planner before discovery runs).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the iterations and the answer as JSON."
)
@_name_option
@_dir_option
@click.argument("script")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def session_run_command(
    configs: tuple[Path, ...],
    iterations: int,
    feedback: str | None,
    target: str | None,
    top: int,
    include_setup: bool,
    window: str | None,
    one_level: bool,
    as_json: bool,
    name: str,
    output_dir: Path,
    script: str,
    arguments: tuple[str, ...],
) -> None:
    """Run SCRIPT until the statement that holds the time is found (at most N runs).

    The first run is a discovery run: the profiler plus a stack sampler, which see the whole
    call tree. The next run marks the hot path down to its statements and measures them with
    markers only; it confirms or corrects the answer and the session stops. With --one-level,
    each run marks one level finer inside the hottest marker of the last one instead. Every
    spec version and trace is kept in OUTPUT_DIR/NAME.
    """
    from ncompass.capture.runner import load_specs
    from ncompass.session.history import history_changes
    from ncompass.session.report import (
        answer_report,
        change_lines,
        finding,
        history_json,
        iteration_report,
    )
    from ncompass.session.session import ProfilingSession

    if (feedback is None) != (target is None) and target is None:
        raise click.UsageError("--feedback needs --target MODULE:START-END")
    if not Path(script).is_file():
        raise SpecError(f"{script}: no such script")
    folder = str(Path(script).resolve().parent)
    if folder not in sys.path:  # --target names modules as the script imports them
        sys.path.insert(0, folder)
    config = load_specs(list(configs), None) if configs else None
    if config is not None and not config.targets:
        config = config.model_copy(update={"full_trace_mode": True})
    session = ProfilingSession(
        str(output_dir), session_name=name, config=config, include_setup=include_setup
    )
    if window is not None:
        session.recording_window = _recording_window(window)
        one_level = True  # a discovery run samples the whole program, not a window
    echo = _quiet if as_json else click.echo
    first = len(session.iterations)
    if target is not None:
        module, start, end = _parse_target(target)
        session.submit_feedback(feedback or "", module, start, end)
        _echo_proposal(session.last_proposal, echo)
    if session.pending is not None:  # from --feedback, or `ncompass session feedback` before
        session.apply_targeted_markers()
    session.check_script(script)
    for step in range(iterations):
        kind = session.next_run_kind(False if one_level else None)
        count = session.marker_count()
        click.echo(
            f"run {step + 1}/{iterations}: {kind}, {count} marker{'s' if count != 1 else ''}",
            err=as_json,
        )
        session.run_script(script, list(arguments), discovery=False if one_level else None)
        record = session.iterations[-1]
        echo(iteration_report(record, top))
        if len(session.iterations) > 1 and not as_json:  # what moved since the last run
            previous = session.iterations[-2]
            for line in change_lines(previous, history_changes([previous, record])[1], top):
                echo(line)
        if record.exit_code:
            click.echo(f"  the script exited with {record.exit_code}:", err=True)
            for line in _last_script_errors(session.last_run_errors):
                click.echo(f"    {line}", err=True)
        if record.answer is not None and record.answer.get("confirmed") is not None:
            verdict = "confirmed" if record.answer["confirmed"] else "corrected"
            echo(f"  the markers {verdict} the discovery run's answer: stopping")
            break
        if step + 1 < iterations:
            session.apply_targeted_markers()
            proposal = session.last_proposal
            _echo_proposal(proposal, echo)
            if proposal is not None and proposal.empty:
                echo("  nothing finer to mark: stopping")
                break
    answer = session.answer
    if as_json:
        document = {
            "iterations": history_json(session.iterations[first:]),
            "answer": answer.to_dict() if answer is not None else None,
        }
        click.echo(json.dumps(document, indent=2))
    else:
        # the answer, when there is one, is the conclusion; without one, the hottest marker
        click.echo(answer_report(answer) if answer is not None else finding(session.iterations[-1]))
        click.echo(f"specs and traces: {session.store.root}")
    if session.iterations[-1].exit_code:  # like `ncompass run`: the script's exit code
        raise SystemExit(session.iterations[-1].exit_code)


def _quiet(text: str) -> None:
    """Nothing on stdout (``--json`` prints one document)."""


def _echo_proposal(proposal: Proposal | None, echo: Callable[[str], None] = click.echo) -> None:
    if proposal is None:
        return
    for reason in proposal.reasons:
        echo(f"  next: {reason}")
    for dropped in proposal.dropped:
        echo(f"  dropped: {dropped}")


def _last_script_errors(stderr: str, count: int = 5) -> list[str]:
    """The script's last error lines, without the profiler's and `ncompass run`'s own."""
    from ncompass.capture.kineto_log import is_kineto_log_line

    lines = [
        line
        for line in stderr.splitlines()
        if line.strip()
        and not is_kineto_log_line(line)
        and not line.startswith("ncompass: trace written")
    ]
    return lines[-count:]


@session_group.command("feedback")
@click.option("--target", required=True, help="MODULE:START-END the feedback is about.")
@_name_option
@_dir_option
@click.argument("text")
def session_feedback_command(target: str, name: str, output_dir: Path, text: str) -> None:
    """Propose finer markers for TARGET; the next `session run --name NAME` applies them."""
    from ncompass.session.session import ProfilingSession

    module, start, end = _parse_target(target)
    session = ProfilingSession(str(output_dir), session_name=name)
    session.submit_feedback(text, module, start, end)
    proposal = session.last_proposal
    count = proposal.count() if proposal else 0
    click.echo(f"{count} markers proposed for {target}")
    click.echo(f"`ncompass session run --name {name} SCRIPT` applies them")
    if proposal is not None:
        for dropped in proposal.dropped:
            click.echo(f"  dropped: {dropped}")


@session_group.command("history")
@_name_option
@_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def session_history_command(name: str, output_dir: Path, as_json: bool) -> None:
    """Every iteration side by side, and what got faster or slower."""
    from ncompass.session.report import history_json, history_report
    from ncompass.session.session import ProfilingSession

    session = ProfilingSession(str(output_dir), session_name=name, read_only=True)
    if as_json:
        click.echo(json.dumps(history_json(session.iterations), indent=2))
    else:
        click.echo(history_report(session.iterations))


@session_group.command("show")
@_name_option
@_dir_option
@click.argument("iteration", type=int, required=False)
def session_show_command(name: str, output_dir: Path, iteration: int | None) -> None:
    """The summary of ITERATION (default: the last) and the spec it ran with."""
    from ncompass.session.session import ProfilingSession
    from ncompass.session.store import SessionError

    session = ProfilingSession(str(output_dir), session_name=name, read_only=True)
    records = [r for r in session.iterations if iteration is None or r.iteration == iteration]
    if not records and iteration is None:
        raise SessionError(
            f"session {name!r} ({session.store.root}) has no iterations yet; "
            f"run `ncompass session run --name {name} SCRIPT` first"
        )
    if not records:
        numbers = ", ".join(str(r.iteration) for r in session.iterations)
        raise SessionError(
            f"no iteration {iteration} in session {name!r} ({session.store.root}); it has {numbers}"
        )
    record = records[-1]
    summary = session.get_trace_summary(record.trace_path)
    click.echo(summary["markdown"])
    click.echo(f"\nspec: {record.spec_path}\ntrace: {record.trace_path}")


def _recording_window(text: str) -> RecordingWindowOptions:
    """``--window MARKER:FIRST:COUNT``, checked before any run."""
    from ncompass.capture.triggers import RecordingWindowOptions, parse_window
    from ncompass.errors import CaptureError

    try:
        marker, first, count = parse_window(text)
    except CaptureError as error:
        raise click.UsageError(str(error)) from None
    return RecordingWindowOptions(marker, first, count)
