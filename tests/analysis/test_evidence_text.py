"""A finding's evidence reads as words with units in the reports, raw numbers in the JSON."""

from __future__ import annotations

from pathlib import Path

from ncompass.analysis.evidence_text import evidence_sentence
from ncompass.analysis.html_page import render_html
from ncompass.analysis.summary import summarize_trace

NCCL = next((Path(__file__).resolve().parents[1] / "data" / "traces" / "hta").rglob("nccl_data*"))


def test_evidence_has_units_not_keys() -> None:
    text = evidence_sentence(
        {
            "marker_cpu_total_us": 135566.4,
            "share": 0.6123,
            "calls": 40,
            "host_bound_idle_us_in_subject": 263800.0,
            "bytes": 3 * 1024 * 1024,
            "reference": "trace CPU wall time less setup",
        }
    )
    assert text == (
        "marker CPU total 135.57 ms; share 61.2%; calls 40; host bound idle in subject "
        "263.80 ms; bytes 3.0 MiB; reference trace CPU wall time less setup"
    )


def test_reports_of_a_real_trace_write_evidence_as_sentences() -> None:
    summary = summarize_trace(NCCL)
    findings = summary["structured"]["bottlenecks"]
    assert findings and all(
        "kernel_span_us" in row["evidence"] or row["evidence"] for row in findings
    )
    markdown = summary["markdown"]
    evidence = [line for line in markdown.splitlines() if line.strip().startswith("- evidence:")]
    assert evidence and all("=" not in line and "_us" not in line for line in evidence)
    assert "kernel span 660.55 ms" in markdown
    html = render_html(summary)
    assert "kernel_span_us=" not in html and "kernel span 660.55 ms" in html


def test_a_cpu_only_trace_names_no_gpu_evidence_and_no_share_over_100_percent() -> None:
    # HTA's CPU-only trace: gloo ranges on worker threads add up to 10x the profiler step
    cpu_only = next(NCCL.parents[1].glob("cpu_only/*.json.gz"))
    summary = summarize_trace(cpu_only)
    (finding,) = summary["structured"]["bottlenecks"]
    assert "adds up to 10.2x the profiler steps' time" in finding["title"]
    assert "1016%" not in summary["markdown"]
    assert "GPU total" not in summary["markdown"]
