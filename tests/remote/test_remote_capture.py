"""``capture_trace`` records inside a submitted job, as the seed's CHISEL_BACKEND_RUN did."""

from __future__ import annotations

import pytest

from ncompass.capture.decorator import profiling_enabled


@pytest.mark.parametrize(
    ("profile", "remote", "enabled"),
    [
        (None, None, False),
        (None, "1", True),  # inside `ncompass submit`'s job
        ("0", "1", False),  # explicitly off wins, even in a job
        ("1", None, True),
        ("", "1", True),  # empty means unset
        (None, "0", False),
    ],
)
def test_profiling_is_on_in_a_submitted_job_unless_switched_off(
    monkeypatch: pytest.MonkeyPatch, profile: str | None, remote: str | None, enabled: bool
) -> None:
    for name, value in (("NCOMPASS_PROFILE", profile), ("NCOMPASS_REMOTE", remote)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert profiling_enabled() is enabled
