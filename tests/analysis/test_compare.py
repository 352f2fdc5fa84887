"""``ncompass.analysis.comparison`` on real traces: matching, intervals, verdicts, renderers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ncompass.analysis.comparison import (
    Comparison,
    check_slowdown,
    compare,
    normalize_kernel_name,
    parse_threshold,
    short_kernel_name,
)
from ncompass.analysis.comparison.interval import ratio_interval
from ncompass.analysis.comparison.kernel_names import distinct_short_names
from ncompass.errors import NcompassError
from ncompass.traces import TraceReader, TraceWriter
from tests.traces.builders import shared_trace

CLOVER = (
    "void clover::par_ranged2d_kernel<PdV_kernel(bool, int, double)::{lambda(int, int)#1}>"
    "(int, int, int, int, PdV_kernel(bool, int, double)::{lambda(int, int)#1})"
)
CLOVER_FLUX = CLOVER.replace("PdV_kernel", "flux_calc_kernel")


@pytest.fixture(scope="module")
def ranks() -> tuple[Path, Path]:
    return shared_trace("trace_filter").with_name("sampled_rank-0.json.gz"), shared_trace(
        "trace_filter"
    ).with_name("sampled_rank-1.json.gz")


@pytest.fixture(scope="module")
def same_twice() -> Comparison:
    trace = shared_trace("ns_resolution_trace")
    return compare([trace], [trace])


@pytest.fixture(scope="module")
def rank_pair(ranks: tuple[Path, Path]) -> Comparison:
    return compare([ranks[0]], [ranks[1]])


def test_the_same_trace_twice_is_the_same_everywhere(same_twice: Comparison) -> None:
    assert same_twice.run_time.kind == "step"
    assert same_twice.run_time.ratio == pytest.approx(1.0)
    verdicts = {change.verdict for change in [*same_twice.overall, *same_twice.changes()]}
    assert verdicts <= {"same", "unknown"}
    assert "same" in verdicts
    assert same_twice.biggest_changes() == []
    # every entry with two samples a side got an interval, and it holds 1
    tested = [change for change in same_twice.changes() if change.interval is not None]
    assert len(tested) > 50
    assert all(change.interval.holds_one() for change in tested if change.interval)


def test_overall_comes_from_profiler_steps_and_gpu_busy_per_step(rank_pair: Comparison) -> None:
    step, busy = rank_pair.overall
    assert (step.kind, step.name) == ("step", "step time")
    assert step.before is not None and step.before.samples == 2
    assert busy.kind == "gpu_busy" and busy.interval is not None


def test_rank_pair_finds_the_slower_embedding_kernels(rank_pair: Comparison) -> None:
    biggest = rank_pair.biggest_changes()
    assert len(biggest) == 3
    assert all(change.is_real for change in biggest)
    top = biggest[0]
    assert top.kind == "kernel" and "split_embedding_backward_codegen" in top.name
    assert top.verdict == "slower" and top.interval is not None and top.interval.low > 2.0
    sizes = [abs(change.delta_us) for change in biggest]
    assert sizes == sorted(sizes, reverse=True)


def test_kernels_only_on_one_side_are_new_or_vanished(rank_pair: Comparison) -> None:
    vanished = [change for change in rank_pair.kernels if change.verdict == "vanished"]
    assert any("weighted_kernel" in change.name for change in vanished)
    assert all(change.after is None and change.ratio is None for change in vanished)


def test_kernels_renamed_by_template_arguments_match_by_normalized_name(
    tmp_path: Path, ranks: tuple[Path, Path]
) -> None:
    """A rebuilt kernel (other template arguments) is matched, not listed as new + vanished."""
    before = ranks[0]
    after = tmp_path / "rebuilt.json.gz"
    reader = TraceReader(before)
    renamed: set[str] = set()
    with TraceWriter(after) as writer:
        for event in reader:
            name = event.get("name")
            if event.get("cat") == "kernel" and isinstance(name, str) and "<" in name:
                event = {**event, "name": re.sub(r"<[^<>]*>", "<float>", name, count=1)}
                renamed.add(event["name"])
            writer.write(event)
        writer.metadata = reader.metadata
    comparison = compare([before], [after])
    normalized = [c for c in comparison.kernels if c.matched_by == "normalized name"]
    assert normalized, "no kernel was matched by its normalised name"
    for change in normalized:
        assert change.names_before and change.names_after
        assert set(change.names_after) <= renamed
        assert change.verdict == "same"
    assert not [c for c in comparison.kernels if c.verdict == "new"]


def test_cpu_only_trace_has_no_gpu_measure_column_or_table() -> None:
    trace = shared_trace("cpu_only")
    comparison = compare([trace], [trace])
    assert [change.kind for change in comparison.overall] in (["step"], ["run"])
    assert comparison.kernels == ()
    assert comparison.cpu_ops
    markdown = comparison.to_markdown()
    page = comparison.to_html()
    assert "## CPU operators" in markdown and "<h2>CPU operators</h2>" in page
    assert "GPU" not in markdown
    assert "GPU" not in re.sub(r"<script>.*?</script>", "", page, flags=re.S)


def test_several_traces_a_side_report_time_per_run(ranks: tuple[Path, Path]) -> None:
    one = compare([ranks[0]], [ranks[1]])
    two = compare([ranks[0], ranks[0]], [ranks[1]])
    assert two.before_paths == (str(ranks[0]), str(ranks[0]))
    step_one, step_two = one.run_time, two.run_time
    assert step_two.before is not None and step_one.before is not None
    assert step_two.before.total_us == pytest.approx(step_one.before.total_us)
    assert step_two.before.samples == 2 * step_one.before.samples


def test_to_dict_is_json_and_renders_markdown_and_html(rank_pair: Comparison) -> None:
    values = json.loads(json.dumps(rank_pair.to_dict()))
    assert {
        "before",
        "after",
        "overall",
        "biggest_changes",
        "markers",
        "cpu_ops",
        "kernels",
    } <= set(values)
    assert values["overall"][0]["verdict"] in {"same", "slower", "faster"}
    markdown = rank_pair.to_markdown(top=5)
    assert markdown.index("## Overall") < markdown.index("Biggest real changes")
    assert markdown.index("Biggest real changes") < markdown.index("## Markers")
    assert "## New and vanished" in markdown
    page = rank_pair._repr_html_()
    assert page.startswith("<!DOCTYPE html>")
    assert 'class="sortable"' in page and "addEventListener" in page
    assert not re.search(r"""(src|href)=["']?https?:""", page)


def test_the_bootstrap_is_seeded_and_finds_a_planted_shift() -> None:
    steady = [100.0 + (index * 37 % 11) for index in range(60)]
    slower = [value * 1.3 for value in steady]
    first = ratio_interval(steady, slower)
    assert first == ratio_interval(steady, slower)
    assert first is not None and first.low > 1.2 and first.high < 1.4
    same = ratio_interval(steady, list(reversed(steady)))
    assert same is not None and same.holds_one()
    assert ratio_interval([1.0], [1.0, 2.0]) is None


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        (CLOVER, "clover::par_ranged2d_kernel"),
        ("triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul"),
        ("triton_red_fused_sum_12_3", "triton_red_fused_sum"),
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_*_tn"),
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD"),
        ("my_kernel [grid=(4, 1, 1)]", "my_kernel"),
        ("gemm_kernel grid=128 block=256", "gemm_kernel"),
    ],
)
def test_normalized_kernel_names(name: str, normalized: str) -> None:
    assert normalize_kernel_name(name) == normalized


def test_short_kernel_names_keep_template_instances_apart() -> None:
    assert short_kernel_name(CLOVER) != short_kernel_name(CLOVER_FLUX)
    assert "PdV_kernel" in short_kernel_name(CLOVER)
    assert len(short_kernel_name(CLOVER, 60)) <= 60
    names = distinct_short_names([CLOVER, CLOVER_FLUX], width=30)
    assert len(set(names.values())) == 2


def test_gate_passes_an_identical_pair_and_rejects_bad_input(same_twice: Comparison) -> None:
    assert not check_slowdown(same_twice, 0.05).failed
    assert not check_slowdown(same_twice, 0.05, "## forward ##").failed
    with pytest.raises(NcompassError, match="no marker of that name"):
        check_slowdown(same_twice, 0.05, "nope")
    assert parse_threshold("5%") == pytest.approx(0.05)
    assert parse_threshold("2.5") == pytest.approx(0.025)
    with pytest.raises(NcompassError, match="percentage"):
        parse_threshold("-5%")


def test_the_library_function_is_ncompass_analysis_compare(rank_pair: Comparison) -> None:
    import ncompass.analysis as analysis

    assert callable(analysis.compare)
    assert analysis.Comparison is Comparison
    trace = shared_trace("amd_trace")
    result = analysis.compare([trace], [trace])
    assert isinstance(result, Comparison)
    assert result.kernels and all(
        change.verdict in {"same", "unknown"} for change in result.kernels
    )
    assert analysis.check_slowdown(result, 0.0).failed is False


def test_a_zero_noise_band_keeps_the_direction(ranks: tuple[Path, Path]) -> None:
    """With --noise 0% the verdict is the interval's side, never the other one."""
    comparison = compare([ranks[0]], [ranks[1]], noise=0.0)
    judged = [c for c in comparison.changes() if c.verdict in ("slower", "faster")]
    assert {c.verdict for c in judged} == {"slower", "faster"}
    for change in judged:
        assert change.interval is not None
        if change.verdict == "slower":
            assert change.interval.low > 1.0
        else:
            assert change.interval.high < 1.0


def test_several_runs_a_side_are_resampled_whole() -> None:
    """Two runs a side, 15 % apart from run to run: pooled calls would call a 13 % change real;
    with each run one block, the interval sees the runs differ and holds 1."""

    def run(level: float) -> list[float]:
        return [level + (index * 37 % 11) * 0.1 for index in range(40)]

    before, after = run(100.0) + run(130.0), run(115.0) + run(145.0)
    pooled = ratio_interval(before, after)
    assert pooled is not None and pooled.low > 1.0
    by_run = ratio_interval(before, after, before_runs=[0, 40], after_runs=[0, 40])
    assert by_run is not None and by_run.holds_one()
    assert by_run.ratio == pytest.approx(pooled.ratio)


def test_the_run_starts_of_a_side(ranks: tuple[Path, Path]) -> None:
    from ncompass.analysis.comparison.samples import read_side

    one = read_side([ranks[0]], progress=False)
    two = read_side([ranks[0], ranks[0]], progress=False)
    for column in ("markers", "cpu_ops", "kernels"):
        for name, samples in getattr(one, column).items():
            assert one.starts(column, name) == [0]
            assert two.starts(column, name) == [0, len(samples)]


def test_a_few_preempted_calls_do_not_trip_the_gate(tmp_path: Path) -> None:
    """Six of 40 calls stretched to 5 ms (the mean ×1.7, its interval above 1) while the typical
    call stays at 100 µs: `same`, and the gate passes; every call 30 % slower trips it."""
    from tests.traces.builders import TraceBuilder

    def trace(name: str, per_call: list[float]) -> Path:
        builder = TraceBuilder()
        clock = 0.0
        for duration in per_call:
            builder.marker("step", clock, duration)
            clock += duration + 1.0
        return builder.write(tmp_path / name)

    steady = [100.0 + (index * 37 % 11) for index in range(40)]
    preempted = [5_000.0 if index % 7 == 3 else us for index, us in enumerate(steady)]
    before = trace("before.json", steady)
    comparison = compare([before], [trace("preempted.json", preempted)])
    change = comparison.marker("step")
    assert change is not None and change.interval is not None
    assert change.interval.low > 1.0 and change.verdict == "same"
    assert not check_slowdown(comparison, 0.05, "step").failed
    slower = compare([before], [trace("slower.json", [us * 1.3 for us in steady])])
    assert check_slowdown(slower, 0.05, "step").failed


def test_one_run_a_side_is_not_judged(tmp_path: Path) -> None:
    """No interval: the gate passes (two recordings of one program differed by 28 % in run time
    under load), and says when the ratio was over the allowed change and what to record."""
    from tests.traces.builders import TraceBuilder

    short = TraceBuilder().marker("step", 0, 1_000).write(tmp_path / "short.json")
    long = TraceBuilder().marker("step", 0, 2_000).write(tmp_path / "long.json")
    over = check_slowdown(compare([short], [long]), 0.05)
    assert not over.failed and "not judged; record several runs a side" in over.message
    result = check_slowdown(compare([long], [short]), 0.05)
    assert not result.failed and "no interval" in result.message
