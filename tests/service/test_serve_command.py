"""``ncompass serve``: the real command in a subprocess, on loopback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ncompass.service.server import is_loopback
from tests.service.conftest import SERVER_EXTRA
from tests.service.endpoints import call

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``ncompass serve --port 0`` running; yields its URL and what it printed on start."""
    pytest.importorskip("fastapi", reason=SERVER_EXTRA)
    env = {**os.environ, "NCOMPASS_ANALYSIS_TOKEN": "", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ncompass",
            "serve",
            "--port",
            "0",
            "--max-upload-mb",
            "5",
            "--storage-dir",
            str(tmp_path / "store"),
            "--log-level",
            "warning",
        ],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        printed: list[str] = []
        match = None
        for line in process.stderr:  # the banner, after whatever Python itself may print
            printed.append(line)
            if match := re.search(r"on (http://127\.0\.0\.1:\d+) ", line):
                break
        assert match, "".join(printed)
        yield match.group(1), printed[-1]
    finally:
        process.terminate()
        process.wait(timeout=20)
    # SIGTERM is a graceful shutdown: the stored traces went with the service.
    assert not (tmp_path / "store" / "uploads").exists()


def test_serve_listens_on_loopback_and_answers(served: tuple[str, str], tmp_path: Path) -> None:
    url, banner = served
    assert "provider: builtin" in banner and "uploads up to 5 MiB" in banner
    assert "token not required" in banner and f"{url}/docs" in banner
    health = call("GET", f"{url}/v1/health").json()
    assert health["limits"]["max_upload_bytes"] == 5 * 1024 * 1024
    stored = call("POST", f"{url}/v1/uploads?name=t.json", b'{"traceEvents": []}').json()
    assert (tmp_path / "store" / "uploads" / stored["upload_id"] / "t.json").is_file()


def test_serve_without_the_server_extra_says_what_to_install() -> None:
    code = (
        "import sys; sys.modules['uvicorn'] = None; from ncompass.cli import main; main(['serve'])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "error: ncompass serve needs FastAPI and uvicorn" in result.stderr
    assert "pip install 'ncompass[server]'" in result.stderr


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason=SERVER_EXTRA)
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "ncompass", "serve", "--port", str(port)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"error: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "choose another --port" in result.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("10.1.2.3", False),
        ("example.org", False),
    ],
)
def test_only_loopback_hosts_count_as_private(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_import_ncompass_does_not_import_the_service_stack() -> None:
    code = (
        "import sys, ncompass, ncompass.analysis.providers, ncompass.service; "
        "print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "[]", result.stderr
