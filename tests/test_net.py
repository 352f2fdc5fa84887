"""``ncompass._net.is_loopback``: the one test of "only this machine can reach it"."""

from __future__ import annotations

import pytest

from ncompass._net import is_loopback


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.8.9.10", "::1", "0:0:0:0:0:0:0:1"])
def test_loopback_names_and_addresses_are_loopback(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host",
    [
        "0.0.0.0",
        "::",
        "10.1.2.3",
        "192.168.0.1",
        "example.org",
        "localhost.example.org",
        "",
        "[::1]",
    ],
)
def test_other_hosts_and_anything_unparsed_are_not(host: str) -> None:
    assert not is_loopback(host)


def test_the_service_and_the_http_client_use_this_one() -> None:
    from ncompass.analysis.providers import _http
    from ncompass.service import server

    assert server.is_loopback is is_loopback
    assert _http.is_loopback is is_loopback
