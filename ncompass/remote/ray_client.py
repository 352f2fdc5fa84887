"""Ray's Jobs API client, with the cluster's headers kept to the cluster's own address.

Ray's ``JobSubmissionClient`` sends every request with ``requests``, which follows redirects
and drops ``Authorization`` when one leaves the host, but forwards every other header (the
``headers:`` of remote.yaml, e.g. a proxy's secret) wherever the redirect points. The subclass
made here sends its requests through a session that drops all of the cluster's headers on a
redirect to another scheme, host or port, and notes that it happened: the log websocket, which
Ray opens with aiohttp, would forward them, so :meth:`JobsClient.follow` then polls instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import requests

from ncompass.remote.address import same_origin


class HeadersStayHome(requests.Session):
    """A session that sends none of ``names`` on a redirect to another origin.

    Args:
        names: The headers that belong to the first address (the cluster's token and headers).
        on_leave: Called when a redirect leaves that origin.
    """

    def __init__(self, names: Iterable[str], on_leave: Callable[[], None]) -> None:
        super().__init__()
        self._names = frozenset(name.lower() for name in names)
        self._on_leave = on_leave

    def rebuild_auth(
        self, prepared_request: requests.PreparedRequest, response: requests.Response
    ) -> None:
        """Drop the first address's headers when the redirect goes to another origin."""
        before, after = response.request.url or "", prepared_request.url or ""
        if not same_origin(before, after):
            self._on_leave()
            for name in [n for n in prepared_request.headers if n.lower() in self._names]:
                del prepared_request.headers[name]
        super().rebuild_auth(prepared_request, response)


def guarded_client_class(base: type[Any]) -> type[Any]:
    """A subclass of Ray's ``JobSubmissionClient`` (``base``) whose requests go through
    :class:`HeadersStayHome`; its ``left_origin`` tells whether a redirect left the address."""
    try:
        from ray._private.authentication.http_token_authentication import (
            format_authentication_http_error,
        )
        from ray.exceptions import AuthenticationError
    except ImportError:  # a Ray without token authentication: nothing to word
        format_authentication_http_error = None

    class GuardedJobSubmissionClient(base):  # type: ignore[misc, valid-type]
        left_origin = False

        def _do_request(
            self,
            method: str,
            endpoint: str,
            *,
            data: bytes | None = None,
            json_data: dict[str, Any] | None = None,
            **kwargs: Any,
        ) -> requests.Response:
            # What Ray's own _do_request does, through the guarded session.
            def left() -> None:
                self.left_origin = True

            with HeadersStayHome(self._headers, left) as session:
                response = session.request(
                    method,
                    self._address + endpoint,
                    cookies=self._cookies,
                    data=data,
                    json=json_data,
                    headers=self._headers,
                    verify=self._verify,
                    **kwargs,
                )
            if format_authentication_http_error is not None:
                formatted = format_authentication_http_error(response.status_code, response.text)
                if formatted:
                    raise AuthenticationError(formatted)
            return response

    return GuardedJobSubmissionClient


__all__ = ["HeadersStayHome", "guarded_client_class"]
