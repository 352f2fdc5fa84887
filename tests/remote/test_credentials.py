"""A saved token and saved headers go only to the address they were saved for.

Two real HTTP servers record the headers every request carries: the saved cluster on
127.0.0.1 and another one on a second loopback address (127.0.0.2). Real ``ncompass``
commands then talk to each through every way of giving an address.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ncompass.remote.address import resolve_cluster
from ncompass.remote.config import ConfigFile, RemoteConfig, save_config
from ncompass.remote.dashboard import Dashboard

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "saved-s3cret"


@contextmanager
def header_logging_server(
    host: str, redirect_to: str | None = None
) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """An HTTP server on ``host`` that records each request's headers and answers like Ray
    (or redirects every request to the same path at ``redirect_to``)."""
    seen: list[dict[str, str]] = []

    class _Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(
                {key.lower(): value for key, value in self.headers.items()} | {":path": self.path}
            )
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if redirect_to is not None:
                self.send_response(302)
                self.send_header("Location", f"{redirect_to}{self.path}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body: Any = {"ray_version": "2.0"}
            if self.path.startswith("/api/jobs/raysubmit_done/logs"):
                body = {"logs": "hello from the job\n"}
            elif self.path.startswith("/api/jobs/raysubmit_done"):
                job = {"type": "SUBMISSION", "submission_id": "raysubmit_done"}
                body = {**job, "status": "SUCCEEDED", "entrypoint": "python job.py"}
            elif self.path.startswith("/api/jobs"):
                body = []
            payload = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    try:
        server = ThreadingHTTPServer((host, 0), _Handler)
    except OSError as error:
        pytest.skip(f"cannot listen on {host}: {error.strerror}")
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Clusters:
    """The saved cluster, another address, what each was sent, and the settings file."""

    saved: str
    saved_seen: list[dict[str, str]]
    other: str
    other_seen: list[dict[str, str]]
    settings: Path


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[Clusters]:
    """The saved cluster (token and headers saved for it) and another address."""
    with (
        header_logging_server("127.0.0.1") as (saved, saved_seen),
        header_logging_server("127.0.0.2") as (other, other_seen),
    ):
        settings = tmp_path / "remote.yaml"
        config = RemoteConfig(address=saved, token=TOKEN, headers={"X-Team-Secret": "perf"})
        save_config(config, settings)
        yield Clusters(saved, saved_seen, other, other_seen, settings)


def _ncompass(settings: Path, *args: str, ray_address: str | None = None) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.pop("NCOMPASS_REMOTE_TOKEN", None)
    env.update(NCOMPASS_REMOTE_CONFIG=str(settings), PYTHONPATH=str(ROOT))
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
    subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        env=env,
        cwd=settings.parent,
        capture_output=True,
        timeout=120,
        check=False,
    )


def _leaked(seen: list[dict[str, str]]) -> list[str]:
    return [
        f"{key}: {value}"
        for headers in seen
        for key, value in headers.items()
        if key in ("authorization", "x-team-secret")
    ]


@pytest.mark.parametrize(
    "how",
    [
        "jobs list --address",
        "jobs logs --address",
        "jobs stop --address",
        "jobs fetch --address",
        "jobs connect",
        "RAY_ADDRESS",
    ],
)
def test_a_saved_token_is_not_sent_to_another_address(clusters: Clusters, how: str) -> None:
    if how == "RAY_ADDRESS":
        _ncompass(clusters.settings, "jobs", "list", ray_address=clusters.other)
    elif how == "jobs connect":
        _ncompass(clusters.settings, "jobs", "connect", clusters.other)
    else:
        command = how.split()[:2]
        job = [] if command[1] == "list" else ["raysubmit_x"]
        _ncompass(clusters.settings, *command, *job, "--address", clusters.other)
    assert clusters.other_seen, "the command never reached the other address"
    assert _leaked(clusters.other_seen) == []
    assert clusters.saved_seen == []


def test_submit_to_another_address_sends_no_saved_token(clusters: Clusters) -> None:
    (clusters.settings.parent / "job.py").write_text("print('hi')\n")
    _ncompass(clusters.settings, "submit", "--address", clusters.other, "-g", "0", "job.py")
    assert clusters.other_seen, "submit never reached the other address"
    assert _leaked(clusters.other_seen) == []


def test_the_saved_address_gets_its_token_and_headers(clusters: Clusters) -> None:
    _ncompass(clusters.settings, "jobs", "list")
    _ncompass(clusters.settings, "jobs", "list", "--address", clusters.saved + "/")
    assert len(clusters.saved_seen) >= 2 and clusters.other_seen == []
    for headers in clusters.saved_seen:
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert headers["x-team-secret"] == "perf"


@pytest.mark.parametrize(
    ("saved", "used", "sent"),
    [
        ("http://head:8265", "head", True),
        ("http://head:8265", "HTTP://Head:8265/", True),
        ("http://head:8265", "http://head:8266", False),
        ("http://head:8265", "https://head:8265", False),
        ("http://head:8265", "http://head.evil:8265", False),
        ("https://ray.example.com", "https://ray.example.com:443/cluster", True),
        ("https://ray.example.com", "http://ray.example.com", False),
    ],
)
def test_a_saved_token_is_sent_only_to_the_same_scheme_host_and_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved: str, used: str, sent: bool
) -> None:
    monkeypatch.delenv("NCOMPASS_REMOTE_TOKEN", raising=False)
    settings = ConfigFile(tmp_path / "r.yaml", RemoteConfig(address=saved, token="t"))
    headers = resolve_cluster(used, settings).headers
    assert ("Authorization" in headers) is sent


def test_a_redirect_to_another_address_carries_no_saved_credential(tmp_path: Path) -> None:
    with (
        header_logging_server("127.0.0.2") as (other, other_seen),
        header_logging_server("127.0.0.1", redirect_to=other) as (saved, saved_seen),
    ):
        config = RemoteConfig(address=saved, token=TOKEN, headers={"X-Team-Secret": "perf"})
        cluster = resolve_cluster(None, ConfigFile(tmp_path / "r.yaml", config))
        assert Dashboard(cluster).ray_version() == "2.0"  # answered by the other address
    assert saved_seen[0]["authorization"] == f"Bearer {TOKEN}"
    assert len(other_seen) == 1 and _leaked(other_seen) == []


@pytest.mark.parametrize("command", [["jobs", "list"], ["jobs", "logs", "raysubmit_x"]])
def test_a_redirect_to_another_port_carries_no_saved_header_through_ray(
    tmp_path: Path, command: list[str]
) -> None:
    """Ray's own client follows redirects (``requests``): it used to drop the token there but
    forward every other saved header."""
    with (
        header_logging_server("127.0.0.1") as (other, other_seen),
        header_logging_server("127.0.0.1", redirect_to=other) as (saved, saved_seen),
    ):
        settings = tmp_path / "remote.yaml"
        save_config(
            RemoteConfig(address=saved, token=TOKEN, headers={"X-Team-Secret": "perf"}), settings
        )
        _ncompass(settings, *command)
    assert saved_seen, "the command never reached the saved address"
    for headers in saved_seen:
        assert headers["authorization"] == f"Bearer {TOKEN}"
        assert headers["x-team-secret"] == "perf"
    assert len(other_seen) >= 2, "Ray's client was never redirected"
    assert _leaked(other_seen) == []


def test_following_a_job_behind_a_redirect_sends_no_saved_header_elsewhere(
    tmp_path: Path,
) -> None:
    """Ray opens the log websocket with aiohttp, which would forward the saved headers along
    a redirect: behind one, the output is polled (through the guarded client) instead."""
    pytest.importorskip("ray.job_submission", reason="needs ray[default]")
    from ncompass.remote.jobs import JobsClient

    with (
        header_logging_server("127.0.0.1") as (other, other_seen),
        header_logging_server("127.0.0.1", redirect_to=other) as (saved, saved_seen),
    ):
        config = RemoteConfig(address=saved, token=TOKEN, headers={"X-Team-Secret": "perf"})
        cluster = resolve_cluster(None, ConfigFile(tmp_path / "r.yaml", config))
        shown: list[str] = []
        JobsClient(cluster, "ncompass jobs logs").follow("raysubmit_done", shown.append)
    assert "".join(shown) == "hello from the job\n"
    assert saved_seen and saved_seen[0]["authorization"] == f"Bearer {TOKEN}"
    assert any(seen[":path"].endswith("/logs") for seen in other_seen), other_seen
    assert _leaked(other_seen) == []


def test_the_environment_token_goes_to_the_address_of_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCOMPASS_REMOTE_TOKEN", "given-now")
    settings = ConfigFile(tmp_path / "r.yaml", RemoteConfig(address="http://a:8265", token="t"))
    assert resolve_cluster("http://b:8265", settings).headers == {
        "Authorization": "Bearer given-now"
    }
