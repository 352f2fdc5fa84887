"""HTTP endpoints for tests: a raw client, and servers that misbehave on purpose.

Everything binds 127.0.0.1 on a free port and lives only as long as its ``with`` block.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    method: str,
    url: str,
    body: bytes | None = None,
    *,
    json_body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 10.0,
) -> Answer:
    """One request with http.client (so any header, e.g. a lying Content-Length, can be sent)."""
    parts = urllib.parse.urlsplit(url)
    headers = dict(headers or {})
    if json_body is not None:
        body = json.dumps(json_body).encode()
        headers.setdefault("Content-Type", "application/json")
    if body is not None:
        headers.setdefault("Content-Length", str(len(body)))
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return Answer(
            response.status,
            response.read(),
            {key.lower(): value for key, value in response.getheaders()},
        )
    finally:
        connection.close()


@dataclass
class Request:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


Handler = Callable[[Request], tuple[int, dict[str, str], bytes]]


@contextmanager
def http_server(handle: Handler) -> Iterator[str]:
    """A tiny HTTP server whose every answer comes from ``handle(request)``."""

    class _Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = {key.lower(): value for key, value in self.headers.items()}
            status, headers, payload = handle(Request(self.command, self.path, body, headers))
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def silent_listener() -> Iterator[str]:
    """A port that accepts connections (the kernel completes them) and never answers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def closed_port_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"
