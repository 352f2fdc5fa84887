"""A small HTTP client on the standard library, for the remote and LLM providers.

Only ``urllib`` so that talking to a service needs no extra dependency. Every failure becomes an
:class:`HttpFailure` that says, in words a user can act on, what went wrong with which URL.
"""

from __future__ import annotations

import http.client
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from ncompass._files import atomic_output
from ncompass._net import is_loopback
from ncompass.analysis.providers.time_budget import TimeBudgetSpent, budget_spent, within_budget

_MAX_ERROR_BODY = 64 * 1024
_MAX_JSON_BODY = 256 * 1024 * 1024


class HttpFailure(Exception):
    """A request could not be made or answered usefully.

    Attributes:
        url: The URL asked.
        reason: What went wrong, for a message (no URL in it).
        unreachable: The service could not be reached or did not answer in time (as opposed to
            answering wrongly).
        status: The HTTP status, when there was an answer.
    """

    def __init__(
        self, url: str, reason: str, *, unreachable: bool = False, status: int | None = None
    ):
        self.url = url
        self.reason = reason
        self.unreachable = unreachable
        self.status = status
        super().__init__(f"{url}: {reason}")


@dataclass
class JsonAnswer:
    """A decoded JSON answer and its status."""

    status: int
    body: Any
    headers: dict[str, str]


@contextmanager
def open_url(
    method: str,
    url: str,
    *,
    timeout_s: float,
    data: bytes | IO[bytes] | None = None,
    headers: dict[str, str] | None = None,
) -> Iterator[http.client.HTTPResponse]:
    """Send a request; yields the response, whatever its status (4xx/5xx included).

    Read the body with :func:`read_some` so that a broken connection is an HttpFailure too.

    Raises:
        HttpFailure: The service cannot be reached, or does not answer within ``timeout_s``
            (which bounds the connection and every read).
        TimeBudgetSpent: The thread's time budget (see :mod:`.time_budget`) ran out first:
            ``timeout_s`` is shortened to what is left of it.
    """
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    bounded_s = within_budget(timeout_s)
    try:
        response = _opener_for(url).open(request, timeout=bounded_s)
    except urllib.error.HTTPError as error:
        # An answer with an error status is still an answer: the caller reads its message.
        response = error
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as error:
        raise _failure(url, error, timeout_s) from error
    try:
        yield response
    finally:
        response.close()


def read_some(response: http.client.HTTPResponse, url: str, timeout_s: float, size: int) -> bytes:
    """Up to ``size`` bytes of the body (fewer only at its end).

    Raises:
        HttpFailure: The connection broke or went quiet for ``timeout_s``.
        TimeBudgetSpent: It went quiet until the thread's time budget ran out.
    """
    try:
        return response.read(size)
    except (OSError, http.client.HTTPException) as error:
        raise _failure(url, error, timeout_s) from error


def request_json(
    method: str,
    url: str,
    *,
    timeout_s: float,
    json_body: Any = None,
    data: bytes | IO[bytes] | None = None,
    headers: dict[str, str] | None = None,
) -> JsonAnswer:
    """Send a request and decode the JSON answer.

    Raises:
        HttpFailure: As :func:`open_url`, or the answer is not JSON.
    """
    headers = {"Accept": "application/json", **(headers or {})}
    if json_body is not None:
        data = orjson.dumps(json_body)
        headers["Content-Type"] = "application/json"
    with open_url(method, url, timeout_s=timeout_s, data=data, headers=headers) as response:
        status = response.status
        limit = _MAX_JSON_BODY if status < 400 else _MAX_ERROR_BODY
        raw = read_some(response, url, timeout_s, limit + 1)
        answer_headers = {key.lower(): value for key, value in response.headers.items()}
    if len(raw) > limit:
        raise HttpFailure(url, f"malformed answer: more than {limit} bytes", status=status)
    try:
        body = orjson.loads(raw) if raw.strip() else None
    except orjson.JSONDecodeError:
        if status >= 400:
            body = {"detail": raw[:300].decode("utf-8", "replace").strip()}
        else:
            snippet = raw[:80].decode("utf-8", "replace")
            raise HttpFailure(
                url, f"malformed answer (HTTP {status}, not JSON): {snippet!r}", status=status
            ) from None
    return JsonAnswer(status, body, answer_headers)


def download(
    url: str, destination: Path, *, timeout_s: float, headers: dict[str, str] | None = None
) -> Path:
    """Stream a successful answer's body into ``destination`` (replaced only when complete).

    Raises:
        HttpFailure: As :func:`open_url`, or the answer is an error.
        OSError: ``destination`` cannot be written.
    """
    with open_url("GET", url, timeout_s=timeout_s, headers=headers) as response:
        if response.status >= 400:
            detail = _error_detail(read_some(response, url, timeout_s, _MAX_ERROR_BODY))
            raise HttpFailure(url, describe_error(response.status, detail), status=response.status)
        with atomic_output(destination) as temporary, temporary.open("wb") as out:
            while chunk := read_some(response, url, timeout_s, 1024 * 1024):
                out.write(chunk)
    return destination


def describe_error(status: int, detail: str) -> str:
    """``HTTP 500: <what the service said>``."""
    return f"HTTP {status}: {detail}" if detail else f"HTTP {status}"


def error_detail(body: Any) -> str:
    """The message of an error answer (``{"detail": ...}`` as FastAPI writes it)."""
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        if isinstance(detail, list):  # validation errors: one line per problem
            return "; ".join(
                f"{'.'.join(str(p) for p in item.get('loc', ()))}: {item.get('msg', '')}"
                for item in detail
                if isinstance(item, dict)
            )
        return str(detail)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):  # OpenAI-style
        return str(body["error"].get("message", ""))
    return "" if body is None else str(body)[:300]


def _error_detail(raw: bytes) -> str:
    try:
        return error_detail(orjson.loads(raw))
    except orjson.JSONDecodeError:
        return raw[:300].decode("utf-8", "replace").strip()


def _opener_for(url: str) -> urllib.request.OpenerDirector:
    # A loopback service is never reached through a proxy, whatever http_proxy says.
    host = urllib.parse.urlsplit(url).hostname or ""
    if is_loopback(host):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def _failure(url: str, error: BaseException, timeout_s: float) -> HttpFailure:
    """What went wrong, in words.

    Raises:
        TimeBudgetSpent: The wait ended because the thread's time budget was spent: that is
            the caller's limit, not the service's failure, and no fallback should follow it.
    """
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(reason, (socket.timeout, TimeoutError)) and budget_spent():
        raise TimeBudgetSpent from error
    if isinstance(reason, (socket.timeout, TimeoutError)):
        text = f"no answer within {timeout_s:g} s"
    elif isinstance(reason, ConnectionRefusedError):
        text = "connection refused (nothing listens there)"
    elif isinstance(reason, socket.gaierror):
        text = f"unknown host ({reason.strerror or reason})"
    elif isinstance(reason, http.client.RemoteDisconnected):
        text = "the connection was closed without an answer"
    elif isinstance(reason, ConnectionError):
        text = f"the connection broke ({reason.strerror or type(reason).__name__})"
    elif isinstance(reason, ValueError):
        return HttpFailure(url, f"not a usable URL ({reason})")
    else:
        text = f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__
    return HttpFailure(url, text, unreachable=True)


__all__ = [
    "HttpFailure",
    "JsonAnswer",
    "describe_error",
    "download",
    "error_detail",
    "open_url",
    "read_some",
    "request_json",
]
