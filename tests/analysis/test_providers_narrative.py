"""The checks an LLM narrative must pass: only the summary's names and numbers."""

from __future__ import annotations

from typing import Any

import pytest

from ncompass.analysis.providers._narrative import (
    MAX_NARRATIVE_CHARS,
    InvalidNarrative,
    check_narrative,
)
from ncompass.analysis.providers._proposals import InvalidProposal, check_proposal
from ncompass.analysis.providers.base import MarkerRequest

STRUCTURED: dict[str, Any] = {
    "operations": [
        {
            "kind": "marker",
            "name": "attn.forward[0]",
            "calls": 24,
            "cpu_total_us": 12345.6,
            "share_of_cpu_time": 0.552,
        },
        {"kind": "kernel", "name": "ampere_sgemm_128x64", "calls": 1204, "total_us": 2_500_000.0},
    ],
    "bottlenecks": [],
    "recommendations": ["Fuse ops with torch.compile."],
    "trace": {"cpu_wall_us": 98765.0},
}


@pytest.mark.parametrize(
    "text",
    [
        "`attn.forward[0]` takes 12345.6 µs.",
        "`attn.forward[0]` takes 12346 us over 24 calls.",
        "`attn.forward[0]` takes 12.35 ms, about 12 ms (12.3 ms).",
        "`attn.forward[0]` is 55% of the CPU time (55.2 percent).",
        "`ampere_sgemm_128x64` ran 1,204 times for 2.5 s (2.50 seconds).",
        "The whole run took 98.77 ms; look at the 3 slowest markers first.",
        "Consider torch.compile for `attn.forward[0]`.",
    ],
)
def test_numbers_and_names_from_the_summary_pass(text: str) -> None:
    assert check_narrative(text, STRUCTURED) == text


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("`attn.backward` is slow.", "`attn.backward`"),
        ("The decoder.mlp block is slow.", "decoder.mlp"),
        ("`attn.forward[0]` takes 20 ms.", "'20 ms'"),
        ("`attn.forward[0]` takes 12.0 ms.", "'12.0 ms'"),
        ("`attn.forward[0]` is 60% of the CPU time.", "'60%'"),
        ("Fusing would make it 3x faster.", "'3x'"),
        ("It ran 1205 times.", "'1205'"),  # counts are exact
        ("It ran 1,204 times in 4 s.", "'4 s'"),
    ],
)
def test_invented_names_and_numbers_are_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidNarrative, match="not") as caught:
        check_narrative(text, STRUCTURED)
    assert reason in str(caught.value)


def test_numbers_inside_names_are_not_numbers() -> None:
    text = "`ampere_sgemm_128x64` and `attn.forward[0]` matter; fp16 helps."
    assert check_narrative(text, STRUCTURED) == text


def test_headings_of_its_own_are_dropped() -> None:
    assert check_narrative("## Why\n`attn.forward[0]` is slow.", STRUCTURED) == (
        "Why\n`attn.forward[0]` is slow."
    )


@pytest.mark.parametrize("text", [None, "", "   ", 42, "x" * (MAX_NARRATIVE_CHARS + 1)])
def test_missing_or_oversized_narratives_are_refused(text: Any) -> None:
    with pytest.raises(InvalidNarrative):
        check_narrative(text, STRUCTURED)


def test_proposal_anchors_must_match_the_source() -> None:
    text = "def f():\n    a = 1\n    b = 2\n"
    request = MarkerRequest(
        spec={}, summary={}, markers=[], sources={"m": {"path": "m.py", "sha256": "", "text": text}}
    )
    good = [{"module": "m", "ranges": [{"in": "f", "lines": [2, 3], "first": "a = 1"}]}]
    assert check_proposal(good, request)[0]["ranges"][0]["last"] == "b = 2"
    wrong = [{"module": "m", "ranges": [{"in": "f", "lines": [2, 3], "first": "b = 2"}]}]
    with pytest.raises(InvalidProposal, match="line 2 is 'a = 1', not 'b = 2'"):
        check_proposal(wrong, request)
    with pytest.raises(InvalidProposal, match="must be a list"):
        check_proposal({"module": "m"}, request)
