"""``summarize`` and ``filter`` of several real rank traces: one by one or in workers, the same."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from ncompass.analysis.ranks import combine, rank_facts, render_ranks_markdown
from ncompass.analysis.summary import summarize_trace
from ncompass.cli import ncompass_cli

HTA = Path(__file__).parents[1] / "data" / "traces" / "hta"
# Two ranks of one job.
RANKS = [HTA / "trace_filter" / f"sampled_rank-{rank}.json.gz" for rank in (0, 1)]


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(ncompass_cli, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def summaries() -> dict[str, tuple[int, str, str]]:
    """``summarize --json`` of both ranks with one job and with two."""
    return {
        jobs: run("summarize", *RANKS, "--json", "--top", "50", "--jobs", jobs)
        for jobs in ("1", "2")
    }


def test_summarize_with_two_jobs_prints_the_same_json_as_one(
    summaries: dict[str, tuple[int, str, str]],
) -> None:
    assert summaries["1"][0] == 0, summaries["1"][2]
    assert summaries["2"] == summaries["1"]


def test_summarize_of_two_ranks_puts_each_ranks_own_numbers_side_by_side(
    summaries: dict[str, tuple[int, str, str]],
) -> None:
    combined = orjson.loads(summaries["1"][1])
    structured = combined["structured"]
    assert [row["label"] for row in structured["ranks"]] == ["0", "1"]
    assert structured["label"] == "rank"
    singles = [summarize_trace(path, top=1000)["structured"] for path in RANKS]
    for row, single in zip(structured["ranks"], singles, strict=True):
        assert row["kernel_span_us"] == single["breakdown"]["kernel_span_us"]
        assert row["cpu_wall_us"] == single["trace"]["cpu_wall_us"]
    for marker in structured["markers"]:
        for label, single in zip(("0", "1"), singles, strict=True):
            expected = next(
                (m["cpu_total_us"] for m in single["markers"] if m["name"] == marker["name"]), 0.0
            )
            assert marker["by_rank_us"][label] == pytest.approx(expected)
    kernels = {row["name"]: row for row in structured["kernels"]}
    for label, single in zip(("0", "1"), singles, strict=True):
        for kernel in (op for op in single["operations"] if op["kind"] == "kernel"):
            if kernel["name"] in kernels:
                row = kernels[kernel["name"]]
                assert row["by_rank_us"][label] == pytest.approx(kernel["total_us"])
                assert row["class"] == kernel["class"]
    # the markers come most expensive (over both ranks) first
    totals = [row["total_us"] for row in structured["markers"]]
    assert totals == sorted(totals, reverse=True)


def test_summarize_names_the_rank_the_others_wait_for_at_collectives(
    summaries: dict[str, tuple[int, str, str]],
) -> None:
    # The straggler is the rank that arrives last at collectives (the others wait for it),
    # not the rank with the most time outside communication: the collectives equalise time.
    structured = orjson.loads(summaries["1"][1])["structured"]
    code, out, err = run("breakdown", *RANKS, "--json", "--jobs", "1")
    assert code == 0, err
    ranks = orjson.loads(out)["ranks"]
    outside = {
        rank: value["kernel_span_us"]
        - (value["communication_us"] - value["communication_overlapped_us"])
        for rank, value in ranks.items()
    }
    rows = {row["label"]: row for row in structured["ranks"]}
    assert all(rows[rank]["outside_communication_us"] == outside[rank] for rank in outside)
    stragglers = structured["stragglers"]
    assert structured["slowest"]["label"] == stragglers["straggler"] == "1"
    assert structured["slowest"]["measure"] == "wait_caused_us"
    assert structured["slowest"]["value_us"] == pytest.approx(stragglers["wait_caused_us"])
    code, markdown, _ = run("summarize", *RANKS, "--jobs", "1")
    assert code == 0
    assert "Straggler: **rank 1**, the last to arrive at" in markdown
    assert "| marker | calls | rank 0 | rank 1 | slowest rank | max / median |" in markdown


def test_summarize_of_one_trace_keeps_the_single_file_shape() -> None:
    code, out, err = run("summarize", RANKS[0], "--json")
    assert code == 0, err
    assert orjson.loads(out) == orjson.loads(orjson.dumps(summarize_trace(RANKS[0])))


def test_summarize_of_the_same_rank_twice_labels_the_columns_as_runs() -> None:
    code, out, err = run("summarize", RANKS[0], RANKS[0], "--jobs", "1", "--json")
    assert code == 0, err
    structured = orjson.loads(out)["structured"]
    assert structured["label"] == "run"
    assert [row["label"] for row in structured["ranks"]] == ["0", "1"]
    assert all(row["over_median"] == pytest.approx(1.0) for row in structured["markers"])


def test_summarize_html_of_several_traces_has_a_column_per_rank(
    summaries: dict[str, tuple[int, str, str]], tmp_path: Path
) -> None:
    page = tmp_path / "ranks.html"
    code, _, err = run("summarize", *RANKS, "--html", page, "--jobs", "1", "--top", "50")
    assert code == 0, err
    html = page.read_text()
    slowest = orjson.loads(summaries["1"][1])["structured"]["slowest"]
    # the straggler at collectives leads the page, as it leads the markdown
    assert f"Straggler: rank {slowest['label']}, the last to arrive at" in html
    assert "<th>rank 0</th><th>rank 1</th>" in html
    assert html.count('aria-label="GPU time per rank"') == 1
    assert "http" not in html  # self-contained


def test_summarize_html_over_one_of_several_traces_is_refused(tmp_path: Path) -> None:
    inputs = [tmp_path / path.name for path in RANKS]
    for source, target in zip(RANKS, inputs, strict=True):
        shutil.copyfile(source, target)
    code, _, err = run("summarize", *inputs, "--html", inputs[1], "--jobs", "1")
    assert code == 2
    assert err.count("\n") == 1 and "is an input of this command" in err
    assert inputs[1].read_bytes() == RANKS[1].read_bytes()


@pytest.fixture(scope="module")
def filtered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both ranks filtered into a directory with one job and with two, and one by one."""
    root = tmp_path_factory.mktemp("filtered")
    for jobs in ("1", "2"):
        code, _, err = run("filter", *RANKS, "-o", f"{root / ('jobs' + jobs)}/", "--jobs", jobs)
        assert code == 0, err
        assert err.count("wrote") == 2
    for path in RANKS:
        single = root / "single" / path.name.replace(".json.gz", ".filtered.json.gz")
        code, _, err = run("filter", path, "-o", single)
        assert code == 0, err
    return {name: root / name for name in ("jobs1", "jobs2", "single")}


def test_filter_of_several_traces_writes_one_file_per_input_the_same_with_two_jobs(
    filtered: dict[str, Path],
) -> None:
    names = ["sampled_rank-0.filtered.json.gz", "sampled_rank-1.filtered.json.gz"]
    for directory in filtered.values():
        assert sorted(path.name for path in directory.iterdir()) == names
    for name in names:
        single = (filtered["single"] / name).read_bytes()
        assert (filtered["jobs1"] / name).read_bytes() == single
        assert (filtered["jobs2"] / name).read_bytes() == single


def test_filter_into_an_existing_directory_needs_no_trailing_slash(
    filtered: dict[str, Path], tmp_path: Path
) -> None:
    code, _, err = run("filter", *RANKS, "-o", tmp_path, "--jobs", "1")
    assert code == 0, err
    for path in filtered["single"].iterdir():
        assert (tmp_path / path.name).read_bytes() == path.read_bytes()


def test_filter_of_several_traces_never_writes_over_an_input(tmp_path: Path) -> None:
    # The input "a.filtered.json.gz" is where the filtered "a.json.gz" would go.
    inputs = [tmp_path / "a.json.gz", tmp_path / "a.filtered.json.gz"]
    for source, target in zip(RANKS, inputs, strict=True):
        shutil.copyfile(source, target)
    code, _, err = run("filter", *inputs, "-o", tmp_path, "--jobs", "1")
    assert code == 2
    assert err.count("\n") == 1 and "a.filtered.json.gz is an input" in err
    for source, target in zip(RANKS, inputs, strict=True):
        assert target.read_bytes() == source.read_bytes()
    assert sorted(tmp_path.iterdir()) == sorted(inputs)


@pytest.mark.parametrize("existing", [False, True])
def test_filter_of_several_traces_to_a_file_is_refused_in_one_line(
    existing: bool, tmp_path: Path
) -> None:
    output = tmp_path / "out.json.gz"
    if existing:
        output.write_bytes(b"keep")
    code, _, err = run("filter", *RANKS, "-o", output)
    assert code == 2
    assert err.count("\n") == 1
    assert f"-o {output} names a file, but 2 traces were given" in err and "directory" in err
    assert sorted(tmp_path.iterdir()) == ([output] if existing else [])
    if existing:
        assert output.read_bytes() == b"keep"


def test_filter_of_two_traces_of_one_name_into_one_directory_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / RANKS[0].name
    other.parent.mkdir()
    shutil.copyfile(RANKS[1], other)
    output = tmp_path / "out"
    code, _, err = run("filter", RANKS[0], other, "-o", f"{output}/")
    assert code == 2
    assert err.count("\n") == 1 and "would both be written to" in err
    assert not output.exists()


def test_past_eight_ranks_the_tables_show_min_median_and_max() -> None:
    one = rank_facts(RANKS[0], 0, False)
    facts = [dataclasses.replace(one, rank=rank) for rank in range(12)]
    summary = combine(facts, top=5)
    markdown = render_ranks_markdown(summary)
    assert "# Summary of 12 traces (ranks 0–11)" in markdown
    assert "| marker | calls | min | median | max | slowest rank | max / median |" in markdown
    assert all(len(row["by_rank_us"]) == 12 for row in summary["markers"])
