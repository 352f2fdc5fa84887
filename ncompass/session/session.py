"""``ProfilingSession``: the iterative loop of the seed SDK, run locally.

Start broad (a full trace), read where the time went, say what you want to know (or let the
session drill into the hottest marker), apply the finer markers and run again. Every spec version,
trace and summary is kept under ``<trace_output_dir>/<session_name>/``.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncompass.analysis.comparison import Comparison
from ncompass.analysis.comparison import compare as compare_traces
from ncompass.analysis.providers import AnalysisProvider, MarkerRequest, make_provider
from ncompass.analysis.summary_types import Summary
from ncompass.capture.backends.kinds import kind_of
from ncompass.capture.backends.torch import TorchProfiler
from ncompass.capture.lifecycle import ProfiledRun, profiled
from ncompass.capture.run_options import run_command
from ncompass.capture.sidecar import read_sidecar, sidecar_path
from ncompass.capture.trace_files import (
    TraceExistsError,
    claim_trace_path,
    release_claim,
    safe_name,
)
from ncompass.errors import TraceError
from ncompass.importer.hook import (
    active_config,
    disable_rewrites,
    enable_rewrites,
)
from ncompass.importer.registry import MarkerRecord
from ncompass.overwrite_guard import same_file
from ncompass.session import lock
from ncompass.session.answer import Answer
from ncompass.session.compiled import into_compiled_code
from ncompass.session.findings import (
    Discovery,
    discovery_answer,
    hot_path_proposal,
    measured_answer,
    read_discovery,
)
from ncompass.session.history import IterationRecord, MarkerTime
from ncompass.session.hotpath import key_of
from ncompass.session.planner import MarkerPlanner
from ncompass.session.proposal import (
    EntryPoint,
    Proposal,
    SessionInputError,
    TargetKey,
    extend_config,
)
from ncompass.session.sampler import stacks_path
from ncompass.session.sites import sites_ran
from ncompass.session.store import SessionError, SessionStore
from ncompass.session.summaries import SummaryCache
from ncompass.spec.models import MODULE_LEVEL, RewriteConfig

if TYPE_CHECKING:
    from ncompass.capture.triggers import RecordingWindowOptions

MAX_FEEDBACK_CHARS = 10_000
"""Longest feedback text a session accepts (a question, not a document)."""
_TRACE_SUFFIXES = (".json", ".json.gz")

# The spec a session last enabled rewrites with (rewrites are process-wide).
_session_spec: RewriteConfig | None = None


def _apply_spec(config: RewriteConfig) -> None:
    """Rewrites for a session's spec. A spec without targets turns off the markers another
    session left on (a new session starts from a clean full trace), but never the ones the user
    enabled with ``enable_rewrites`` themselves."""
    global _session_spec
    if config.targets:
        enable_rewrites(config)
        _session_spec = config
    elif _session_spec is not None and active_config() is _session_spec:
        disable_rewrites()
        _session_spec = None


class ProfilingSession:
    """Session for the iterative profiling workflow.

    Args:
        trace_output_dir: Directory where trace files are saved.
        cache_dir: Where summaries are cached (default: inside the session folder).
        session_name: Name of this session (default ``"default"``); a session of the same name
            in the same folder continues where it stopped.
        base_url: An ``ncompass serve`` analysis service (default: ``$NCOMPASS_ANALYSIS_URL``, or
            the built-in engine). Unreachable services fall back to the built-in engine.
        config: The spec to start from (default: none, i.e. a full trace).
        include_setup: Let time spent once (imports, model construction, compilation) be the
            answer; by default it is reported apart.
        read_only: Only read the session (history, summaries): no lock is taken, and anything
            that would write raises :class:`SessionError`.

    A session that may write holds its folder's lock (:mod:`ncompass.session.lock`) until
    :meth:`close` or until it is collected: another process opening it to write is refused.

    Raises:
        SessionBusyError: Another process is writing this session.
    """

    def __init__(
        self,
        trace_output_dir: str,
        cache_dir: str | None = None,
        session_name: str | None = None,
        base_url: str | None = None,
        config: RewriteConfig | dict[str, Any] | str | None = None,
        include_setup: bool = False,
        read_only: bool = False,
    ) -> None:
        self.trace_output_dir = Path(trace_output_dir)
        self.session_name = session_name or "default"
        self.store = SessionStore(
            self.trace_output_dir, self.session_name, Path(cache_dir) if cache_dir else None
        )
        self.read_only = read_only
        self._unlock: weakref.finalize | None = None  # type: ignore[type-arg]
        if not read_only:  # taken before the state is read: no other writer can change it
            held = lock.acquire(self.store.root, self.session_name)
            self._unlock = weakref.finalize(self, lock.release, held)
        self.provider: AnalysisProvider = make_provider(base_url)
        self.summaries = SummaryCache(self.store.cache_dir)
        state = self.store.load_state()
        self.iterations = [IterationRecord.from_dict(r) for r in state.get("iterations", [])]
        self._initial = _as_config(config)
        self.config = self._initial
        self.config_version = 0
        self._pending: RewriteConfig | None = None
        self._feedback: list[dict[str, Any]] = []
        self._entry: EntryPoint | None = None
        self.last_run_output = ""
        self.last_run_errors = ""
        self.recording_window: RecordingWindowOptions | None = None
        """When set, each run records only this window (``session run --window``)."""
        self.last_proposal: Proposal | None = None
        self.include_setup = include_setup
        self._script: str | None = None
        # the statements the last hot-path plan expects the next run to confirm
        self._predicted: list[dict[str, Any]] = []
        self._setup_ms: dict[str, float] = {}
        self._resume(state, restore_spec=config is None)

    # -- running -------------------------------------------------------------------------------

    def run_profile(
        self,
        user_code: Callable[[], Any],
        trace_name_suffix: str | None = None,
        filter_trace: bool | None = False,
        filter_trace_args: dict[str, Any] | None = None,
    ) -> str:
        """Profile ``user_code`` under the session's current spec and write its trace.

        When the code runs a profiler of its own (vLLM, a custom ``torch.profiler``) and writes
        its trace into ``trace_output_dir`` during the call, that trace is the result.

        Returns:
            The path of the trace (the filtered one when ``filter_trace``).
        """
        iteration, trace_path = self._claim_iteration(trace_name_suffix)
        _apply_spec(self.config)
        before = _trace_files(self.trace_output_dir)
        started = time.time()
        profiler = TorchProfiler(trace_path)
        error: BaseException | None = None
        entry = entry_point(user_code)
        if entry is not None:
            self._entry = entry
        run: ProfiledRun | None = None
        try:
            with profiled(
                profiler, self.config, self.trace_output_dir, yield_to_code_profiler=True
            ) as run:
                user_code()
        except BaseException as raised:  # recorded with the iteration, then re-raised
            if run is None:  # the profiler did not start: nothing was written
                release_claim(trace_path)
                raise
            error = raised
        written, manifest = run.written, run.markers
        external = _new_trace_files(self.trace_output_dir, before, started, {trace_path})
        note = None
        if external:
            chosen = external[-1]
            note = f"trace written by the profiled code itself: {chosen.name}"
            if written is None:
                trace_path.unlink(missing_ok=True)
            trace_path = chosen
        elif written is None:
            trace_path.unlink(missing_ok=True)
            raise SessionError(
                "the profiled code started its own profiler but wrote no trace into "
                f"{self.trace_output_dir}; export it there (e.g. profiler.export_chrome_trace(...))"
            ) from error
        self._record(iteration, trace_path, manifest, 0 if error is None else 1, note)
        if error is not None:
            raise error
        if filter_trace:
            filtered = self.filter_trace(str(trace_path), **(filter_trace_args or {}))
            return filtered
        return str(trace_path)

    def run_script(
        self,
        script: str,
        args: list[str] | None = None,
        *,
        trace_name_suffix: str | None = None,
        profiler: str = "torch",
        discovery: bool | None = None,
    ) -> str:
        """Profile a script (``ncompass run`` in a fresh process) under the current spec.

        A fresh process per iteration means nothing of one run leaks into the next. A
        *discovery* run also samples the Python stacks, so the next spec can mark the whole hot
        path at once; by default a run is one unless it is the run that measures a hot-path plan
        (markers only). ``discovery=False`` is the one-level-per-run session.

        Returns:
            The path of the trace.

        Raises:
            SessionError: the run wrote no trace (the message includes the run's last output).
        """
        self.check_script(script)  # before a name is claimed: a refused run leaves nothing
        iteration, trace_path = self._claim_iteration(trace_name_suffix)
        try:
            return self._run_script(iteration, trace_path, script, args, profiler, discovery)
        except BaseException:
            release_claim(trace_path)  # the run wrote no trace: its name is free again
            raise

    def _run_script(
        self,
        iteration: int,
        trace_path: Path,
        script: str,
        args: list[str] | None,
        profiler: str,
        discovery: bool | None,
    ) -> str:
        """:meth:`run_script` once the iteration's trace name is claimed."""
        import subprocess
        import sys

        from ncompass.session.tether import tethered_environment

        folder = str(Path(script).resolve().parent)
        if folder not in sys.path:  # as the script sees it: its modules are found for planning
            sys.path.insert(0, folder)
        if self.config_version == 0:  # the starting spec is kept as a version too
            self.config_version, _ = self.store.write_version(self.config)
        windows = self.recording_window  # the same steps measured every run, markers only
        discovery_run = windows is None and self.next_run_kind(discovery, profiler) == "discovery"
        command = run_command(
            [str(self._spec_file())],
            output_dir=self.trace_output_dir,
            trace_name=trace_path.name.removesuffix(".json"),
            script=script,
            args=args or [],
            profiler=None if discovery_run else profiler,
            full_trace=self.config.full_trace_mode,
            entry="ncompass.session.discovery" if discovery_run else "ncompass run",
            options=["--force-overwrite"],  # the empty file this session claimed for it
            recording_windows=windows,
        )
        # The run ends with this process (ncompass.session.tether): if the session is killed,
        # nothing goes on writing into its folder.
        environment = tethered_environment()
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
        if windows is not None:  # the run wrote its window's trace beside the claimed name
            release_claim(trace_path)
            trace_path = trace_path.with_name(f"{trace_path.stem}-w1.json")
        if not trace_path.is_file() or trace_path.stat().st_size == 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise SessionError(
                f"`{' '.join(command)}` wrote no trace (exit {done.returncode}):\n{tail}"
            )
        sidecar = read_sidecar(trace_path)
        if sidecar is None:
            raise SessionError(
                f"`{' '.join(command)}` wrote {trace_path} but not its sidecar "
                f"{sidecar_path(trace_path)}; run it again"
            )
        self._entry = EntryPoint(TargetKey(file=str(Path(script).resolve())))
        self.last_run_output = done.stdout
        self.last_run_errors = done.stderr
        record = self._record(
            iteration, trace_path, list(sidecar.get("markers", [])), done.returncode, None
        )
        self._script = str(Path(script).resolve())
        stacks = stacks_path(trace_path)
        record.stacks_path = str(stacks) if stacks.is_file() else None
        self._conclude(record)
        return str(trace_path)

    def check_script(self, script: str) -> None:
        """Refuse a script other than the one this session ran: their markers would mix.

        Raises:
            SessionError: the session ran another script.
        """
        resolved = str(Path(script).resolve())
        if self._script is not None and self._script != resolved:
            raise SessionError(
                f"session {self.session_name!r} ({self.store.root}) profiles {self._script}, "
                f"not {resolved}: its markers would mix with this script's; give this script "
                "a session of its own (--name NAME), or remove that folder to start over"
            )

    def next_run_kind(self, discovery: bool | None = None, profiler: str = "torch") -> str:
        """What :meth:`run_script` runs next: ``discovery`` (profiler and stack sampler) or
        ``markers`` (the markers of the current spec only)."""
        discover = (not self._predicted) if discovery is None else discovery
        # discovery reads the ops and Python calls of the trace: only a profiler that records them
        return "discovery" if discover and kind_of(profiler).records_ops else "markers"

    def marker_count(self) -> int:
        """Markers of the current spec (the whole-run range counts as one)."""
        count = sum(len(t.functions) + len(t.ranges) + len(t.calls) for t in self.config.targets)
        return count + (1 if self.config.full_trace_mode else 0)

    def _conclude(self, record: IterationRecord) -> None:
        """The iteration's answer: the discovery run's estimate, or the markers' measurement."""
        assert self._script is not None
        planner = MarkerPlanner(self.config, self._entry)
        found = read_discovery(record, self._script, planner, self.include_setup)
        sampled = found or self._latest_discovery(planner)
        if sampled is not None:
            record.sites_ran = sites_ran(record.manifest, sampled.profile.sampled_lines())
        answer: Answer | None
        if found is not None:
            record.discovery = found.summary()
            self._setup_ms = dict(record.discovery["setup_ms"])
            answer = discovery_answer(found, record.iteration)
        else:
            answer = measured_answer(
                record, record.iteration, self._predicted, self._setup_ms, self.include_setup
            )
            self._predicted = []
        if answer is not None:
            sidecar = read_sidecar(Path(record.trace_path))
            answer = into_compiled_code(answer, record.trace_path, sidecar, planner)
            answer = answer.under_contention(sidecar)
        record.answer = answer.to_dict() if answer is not None else None
        self._save()

    @property
    def answer(self) -> Answer | None:
        """The statement that holds the time, as of the last iteration (None before any, or
        when no statement was found yet)."""
        for record in reversed(self.iterations):
            if record.answer is not None:
                return Answer.from_dict(record.answer)
        return None

    def _record(
        self,
        iteration: int,
        trace_path: Path,
        manifest: list[MarkerRecord],
        exit_code: int,
        note: str | None,
    ) -> IterationRecord:
        record = IterationRecord(
            iteration=iteration,
            spec_version=self.config_version,
            spec_path=self._spec_file(),
            trace_path=str(trace_path),
            manifest=manifest,
            feedback=self._feedback[-1] if self._feedback else None,
            exit_code=exit_code,
            note=note,
        )
        self._record_markers(record)
        self.iterations.append(record)
        self._save()
        return record

    # -- analysis ------------------------------------------------------------------------------

    def get_trace_summary(
        self, trace_path: str | None = None, feedback_context: dict[str, Any] | None = None
    ) -> Summary:
        """The summary of a trace (default: the last one): ``{"markdown", "structured"}``.

        Served from the cache when the same trace (by content) was summarized before by the
        same provider; an answer the provider fell back on (service down) is not served again.
        """
        return self._summary(self._trace(trace_path), feedback_context, fallback_ok=False)

    def _summary(
        self, path: Path, feedback_context: dict[str, Any] | None, *, fallback_ok: bool
    ) -> Summary:
        key = self.summaries.key(path, feedback_context, self.provider.name)
        summary = self.summaries.get(key, fallback_ok=fallback_ok)
        if summary is None:
            summary = self.provider.summarize(path, feedback_context=feedback_context)
            fallback = getattr(self.provider, "last_failure", None)
            entry = self.summaries.put(key, path, summary, fallback=fallback)
            for record in self.iterations:
                if Path(record.trace_path) == path:
                    record.summary_path = str(entry)
            if not self.read_only:  # the cache has the entry; the state only points to it
                self._save()
        return summary

    def compare(self, iteration_a: int, iteration_b: int) -> Comparison:
        """Did it get faster? ``ncompass.analysis.compare`` of two iterations' traces.

        Args:
            iteration_a: The iteration before the change (its number, as in ``session history``).
            iteration_b: The iteration after it.

        Returns:
            Per marker, CPU operator and kernel: the time before and after, the bootstrap
            interval of the ratio and the verdict (``Comparison.to_markdown()``/``to_html()``).

        Raises:
            SessionError: No iteration has one of these numbers.
            TraceError: An iteration's trace is gone or unreadable.
        """
        by_number = {record.iteration: record for record in self.iterations}
        for number in (iteration_a, iteration_b):
            if number not in by_number:
                numbers = ", ".join(str(n) for n in by_number) or "none yet"
                raise SessionError(f"no iteration {number} in this session (it has {numbers})")
        return compare_traces(
            [by_number[iteration_a].trace_path], [by_number[iteration_b].trace_path], progress=False
        )

    def load_trace_summary(self, trace_name_filter: str | None = None) -> Summary | None:
        """The newest cached summary whose trace name contains ``trace_name_filter``."""
        return self.summaries.find(trace_name_filter)

    def filter_trace(
        self,
        trace_path: str | None = None,
        output_path: str | None = None,
        include_cuda_kernels: bool = True,
        include_direct_children: bool = False,
        min_duration_us: float = 0.0,
    ) -> str:
        """Keep only the markers (and, by default, the GPU work they launched) of a trace.

        Raises:
            SessionError: ``output_path`` is the trace itself or another iteration's trace.
        """
        path = self._trace(trace_path)
        stem = path.name.removesuffix(".gz").removesuffix(".json")
        output = Path(output_path) if output_path else path.with_name(f"{stem}.filtered.json")
        kept = [path, *(Path(record.trace_path) for record in self.iterations)]
        if any(same_file(output, trace) for trace in kept):
            raise SessionError(
                f"filter_trace: output_path {output} is a trace this session keeps; "
                "give another output_path (or none: <trace>.filtered.json)"
            )
        return str(
            self.provider.filter(
                path,
                output,
                include_cuda_kernels=include_cuda_kernels,
                include_direct_children=include_direct_children,
                min_duration_us=min_duration_us,
            )
        )

    # -- markers -------------------------------------------------------------------------------

    def submit_feedback(
        self,
        feedback_text: str,
        target_module: str,
        start_line: int,
        end_line: int,
        trace_path: str | None = None,
    ) -> dict[str, Any]:
        """Propose finer markers for lines ``start_line..end_line`` of ``target_module``.

        Returns:
            The updated (pending) configuration, applied by :meth:`apply_targeted_markers`.

        Raises:
            SessionInputError: the module cannot be found or the lines hold no code, or the
                text is longer than ``MAX_FEEDBACK_CHARS``.
        """
        if len(feedback_text) > MAX_FEEDBACK_CHARS:
            raise SessionInputError(
                f"the feedback text has {len(feedback_text):,} characters; the most accepted is "
                f"{MAX_FEEDBACK_CHARS:,}: say what you want to know in a few sentences"
            )
        base = self._pending or self.config
        planner = MarkerPlanner(base, self._entry)
        feedback = {
            "feedback_text": feedback_text,
            "target_module": target_module,
            "start_line": start_line,
            "end_line": end_line,
        }
        # the planner's own proposal first: it also rejects feedback that points at no code,
        # whoever proposes the markers in the end
        own = planner.for_feedback(target_module, start_line, end_line)
        proposal = self._provider_proposal(planner, feedback, [target_module])
        if proposal.empty:
            own.dropped[:0] = proposal.dropped
            proposal = own
        self.last_proposal = proposal
        self._feedback.append({**feedback, "trace_path": trace_path or self._last_trace_path()})
        self._pending = extend_config(base, proposal, planner)
        self._save()
        return self._pending.to_dict()

    def apply_targeted_markers(self) -> dict[str, Any]:
        """Apply the pending markers (or drill into the hottest markers of the last trace).

        The spec becomes a new version (``<session>/specs/vNNN.yaml``) and takes effect at once,
        also in modules already imported.

        Returns:
            The configuration now in force.
        """
        if self._pending is None:
            last = self.iterations[-1] if self.iterations else None
            if last is None:
                return self.config.to_dict()
            planner = MarkerPlanner(self.config, self._entry)
            proposal = self._provider_proposal(planner, None, planner.hot_labels(last))
            if proposal.empty:
                proposal = self._hot_path_proposal(last, planner)
            if proposal.empty:
                self._sampled_callees(planner)
                own = planner.drill(last)
                own.dropped[:0] = proposal.dropped
                proposal = own
            self.last_proposal = proposal
            if proposal.empty:
                return self.config.to_dict()
            self._pending = extend_config(self.config, proposal, planner)
        version, path = self.store.write_version(self._pending)
        self.config = RewriteConfig.from_yaml(path)
        self.config_version = version
        self._pending = None
        _apply_spec(self.config)
        self._save()
        return self.config.to_dict()

    @property
    def pending(self) -> RewriteConfig | None:
        """Markers proposed by feedback (or a loaded config) and not applied yet."""
        return self._pending

    def save_config(self, name: str) -> str:
        """Save the pending (or current) configuration as ``name``; returns its file."""
        path = self.store.config_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((self._pending or self.config).to_yaml(), encoding="utf-8")
        return str(path)

    def load_config(self, name: str) -> dict[str, Any]:
        """Load a configuration saved as ``name``; :meth:`apply_targeted_markers` applies it."""
        path = self.store.config_path(name)
        if not path.exists():
            saved = sorted(p.stem for p in self.store.configs_dir.glob("*.yaml"))
            raise SessionError(
                f"no config named {name!r} in {self.store.configs_dir}; saved: "
                f"{', '.join(saved) or 'none'}"
            )
        self._pending = RewriteConfig.from_yaml(path)
        self._save()
        return self._pending.to_dict()

    def reset(self) -> None:
        """Back to the starting spec, no pending feedback, rewrites off. Files stay."""
        disable_rewrites()
        self.config = self._initial
        self.config_version = 0
        self._pending = None
        self._feedback = []
        self.last_proposal = None
        self._predicted = []
        self._save()

    # -- internals -----------------------------------------------------------------------------

    def _hot_path_proposal(self, last: IterationRecord, planner: MarkerPlanner) -> Proposal:
        """Markers down the hot paths a discovery run saw (empty when it was no discovery run)."""
        if self._script is None:
            return Proposal()
        found = read_discovery(last, self._script, planner, self.include_setup)
        if found is None:
            return Proposal()
        proposal, chosen = hot_path_proposal(found, planner)
        if not proposal.empty:
            self._predicted = [
                {"file": s.file, "lines": [s.start, s.end], "statement": s.text} for s in chosen
            ]
        return proposal

    def _sampled_callees(self, planner: MarkerPlanner) -> None:
        """What the last discovery run sampled under each calling line, for the planner to
        follow calls it cannot resolve from the source (``attention_interface = FUNCS[impl]``)."""
        found = self._latest_discovery(planner)
        if found is None:
            return
        for caller, callees in found.profile.callees.items():
            ranked = sorted(callees.items(), key=lambda item: -item[1])
            planner.sampled_callees[caller] = [
                (key_of(callee), callee.qualname)
                for callee, _ in ranked
                if callee.qualname != MODULE_LEVEL
            ]
            for callee, _ in ranked:
                if callee.module:
                    planner.known_files.setdefault(callee.module, callee.file)

    def _latest_discovery(self, planner: MarkerPlanner) -> Discovery | None:
        """The call tree of this session's last discovery run (None: there was none)."""
        if self._script is None:
            return None
        for record in reversed(self.iterations):
            found = read_discovery(record, self._script, planner, self.include_setup)
            if found is not None:
                return found
        return None

    def _provider_proposal(
        self, planner: MarkerPlanner, feedback: dict[str, Any] | None, labels: list[str]
    ) -> Proposal:
        """The provider's next markers (a service, an LLM), checked by the planner; empty when
        the provider leaves it to the planner (the built-in one always does)."""
        if self.provider.name == "builtin":
            return Proposal()
        last = self.iterations[-1] if self.iterations else None
        summary: Mapping[str, Any] = {}
        if last is not None:
            with contextlib.suppress(TraceError):
                # a summary the provider just fell back on will do: asking again only warns again
                path = self._trace(last.trace_path)
                summary = self._summary(path, None, fallback_ok=True)["structured"]
        request = MarkerRequest(
            spec=planner.config.to_dict(),
            summary=summary,
            markers=list(last.manifest) if last else [],
            feedback=feedback,
            sources=planner.request_sources(labels),
        )
        targets = self.provider.propose_markers(request)
        if not targets:
            return Proposal()
        return planner.from_targets(targets, self.provider.name)

    def _spec_file(self) -> str | None:
        return str(self.store.spec_path(self.config_version)) if self.config_version else None

    def _next_iteration(self) -> int:
        return max((r.iteration for r in self.iterations), default=0) + 1

    def _claim_iteration(self, suffix: str | None) -> tuple[int, Path]:
        """The next iteration and its trace, claimed (created empty) under its own name.

        A trace of that name that the state does not know (``session.json`` was moved aside,
        or a run of it was stopped) is never overwritten: the number moves past it.
        """
        if self.read_only:
            raise SessionError(f"session {self.session_name!r} was opened read-only")
        iteration = self._next_iteration()
        while True:
            name = f"{self.session_name}-i{iteration:03d}"
            if suffix:
                name += f"-{safe_name(suffix)}"
            try:
                return iteration, claim_trace_path(self.trace_output_dir, name, exact=True)
            except TraceExistsError:
                iteration += 1

    def close(self) -> None:
        """Give back the session's lock (another process may then write it)."""
        if self._unlock is not None:
            self._unlock()

    def _last_trace_path(self) -> str | None:
        return self.iterations[-1].trace_path if self.iterations else None

    def _trace(self, trace_path: str | None) -> Path:
        chosen = trace_path or self._last_trace_path()
        if chosen is None:
            raise SessionError("no trace yet: call run_profile() first, or pass trace_path")
        path = Path(chosen)
        if not path.is_file():
            raise TraceError(f"{path}: trace not found")
        return path

    def _record_markers(self, record: IterationRecord) -> None:
        from ncompass.analysis import marker_stats

        try:
            stats = marker_stats(record.trace_path)
        except TraceError as error:
            record.note = f"{record.note + '; ' if record.note else ''}markers not read: {error}"
            return
        for name, stat in stats.items():
            record.markers[name] = MarkerTime(
                stat.calls, stat.cpu_total_us, stat.cpu_self_us, stat.gpu_total_us
            )

    def _resume(self, state: dict[str, Any], restore_spec: bool) -> None:
        version = int(state.get("config_version", 0))
        if restore_spec and version and self.store.spec_path(version).exists():
            self.config = RewriteConfig.from_yaml(self.store.spec_path(version))
            self.config_version = version
        pending = state.get("pending_spec")
        if pending:
            self._pending = RewriteConfig.from_dict(pending)
        self._feedback = list(state.get("feedback", []))
        self._predicted = list(state.get("predicted", []))
        self._setup_ms = dict(state.get("setup_ms", {}))
        self._script = state.get("script")

    def _save(self) -> None:
        if self.read_only:
            raise SessionError(f"session {self.session_name!r} was opened read-only")
        self.store.save_state(
            self.iterations,
            {
                "config_version": self.config_version,
                "pending_spec": self._pending.to_dict() if self._pending else None,
                "feedback": self._feedback,
                "provider": self.provider.name,
                "predicted": self._predicted,
                "setup_ms": self._setup_ms,
                "script": self._script,
            },
        )


def entry_point(function: Callable[..., Any]) -> EntryPoint | None:
    """The source of the function a session profiles (for drilling into a whole-run range)."""
    code = getattr(function, "__code__", None)
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", "")
    if code is None or "<lambda>" in qualname or not code.co_filename.endswith(".py"):
        return None
    qualname = qualname.replace(".<locals>", "")
    if module in (None, "__main__", "__mp_main__"):
        return EntryPoint(TargetKey(file=str(Path(code.co_filename).resolve())), qualname)
    return EntryPoint(TargetKey(module=module), qualname)


def _trace_files(folder: Path) -> dict[Path, float]:
    found: dict[Path, float] = {}
    for path in folder.rglob("*"):
        if path.is_file() and path.name.endswith(_TRACE_SUFFIXES) and ".ncompass." not in path.name:
            found[path] = path.stat().st_mtime
    return found


def _new_trace_files(
    folder: Path, before: dict[Path, float], started: float, ours: set[Path]
) -> list[Path]:
    """Trace files written into ``folder`` since ``started`` by someone else, oldest first;
    other JSON files written there (results, configs) are not traces and are left out."""
    fresh = [
        (mtime, path)
        for path, mtime in _trace_files(folder).items()
        if path not in ours
        and mtime >= started - 1.0
        and before.get(path) != mtime
        and path.stat().st_size > 0
        and _holds_events(path)
    ]
    return [path for _, path in sorted(fresh)]


def _holds_events(path: Path) -> bool:
    """Whether a file is a Chrome trace with events (not, say, a results.json written beside)."""
    from ncompass.traces.reader import TraceReader

    try:
        return next(iter(TraceReader(path, progress=False)), None) is not None
    except TraceError:
        return False


def _as_config(config: RewriteConfig | dict[str, Any] | str | None) -> RewriteConfig:
    if config is None:
        return RewriteConfig(full_trace_mode=True)
    if isinstance(config, RewriteConfig):
        return config
    if isinstance(config, dict):
        return RewriteConfig.from_dict(config)
    return RewriteConfig.from_yaml(config)


__all__ = ["ProfilingSession"]
