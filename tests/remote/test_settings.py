"""Which cluster, with which token, and how the settings file keeps the token private."""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path

import pytest

from ncompass.remote.address import check_reachable, normalize_address, resolve_cluster
from ncompass.remote.config import ConfigFile, RemoteConfig, load_config, save_config
from ncompass.remote.errors import ClusterUnreachableError, RemoteError


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAY_ADDRESS", "NCOMPASS_REMOTE_TOKEN", "NCOMPASS_REMOTE_CONFIG"):
        monkeypatch.delenv(name, raising=False)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_saved_token_is_owner_only_in_an_owner_only_folder(tmp_path: Path) -> None:
    path = tmp_path / "config" / "ncompass" / "remote.yaml"
    old = os.umask(0o022)
    try:
        save_config(RemoteConfig(address="http://head:8265", token="s3cret"), path)
    finally:
        os.umask(old)
    assert _mode(path) == 0o600
    assert _mode(path.parent) == 0o700
    loaded = load_config(path)
    assert loaded.config.token == "s3cret" and loaded.warnings == []
    # Rewriting replaces the file atomically, still 0600, and leaves no temporary behind.
    save_config(loaded.config.model_copy(update={"token": "n3w"}), path)
    assert _mode(path) == 0o600 and load_config(path).config.token == "n3w"
    assert [p.name for p in path.parent.iterdir()] == ["remote.yaml"]


def test_a_token_others_can_read_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "remote.yaml"
    path.write_text("address: http://head:8265\ntoken: abc\n")
    os.chmod(path, 0o644)
    assert load_config(path).warnings == [
        f"{path} holds a token but others can read it; run: chmod 600 {path}"
    ]


def test_settings_errors_name_the_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "remote.yaml"
    path.write_text("address: http://head:8265\ntoken: [unclosed\n")
    with pytest.raises(RemoteError, match=rf"^{path}:\d+: not valid YAML"):
        load_config(path)
    path.write_text("adress: http://head:8265\n")
    with pytest.raises(RemoteError, match=rf"^{path}: setting 'adress': Extra inputs"):
        load_config(path)
    path.write_text("max_upload_mb: -1\n")
    with pytest.raises(RemoteError, match="setting 'max_upload_mb'"):
        load_config(path)
    assert load_config(tmp_path / "missing.yaml").config == RemoteConfig()


def test_address_precedence_flag_then_environment_then_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = ConfigFile(tmp_path / "remote.yaml", RemoteConfig(address="file-head", token="t"))
    from_file = resolve_cluster(None, settings)
    assert (from_file.url, from_file.source) == ("http://file-head:8265", str(settings.path))
    assert from_file.headers == {"Authorization": "Bearer t"}
    monkeypatch.setenv("RAY_ADDRESS", "http://env-head:8265")
    monkeypatch.setenv("NCOMPASS_REMOTE_TOKEN", "from-env")
    from_env = resolve_cluster(None, settings)
    assert (from_env.url, from_env.source) == ("http://env-head:8265", "RAY_ADDRESS")
    assert from_env.headers == {"Authorization": "Bearer from-env"}
    assert resolve_cluster("flag-head:9000", settings).url == "http://flag-head:9000"


def test_no_address_anywhere_says_where_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(RemoteError, match=r"no Ray cluster address: pass --address"):
        resolve_cluster(None, ConfigFile(tmp_path / "remote.yaml", RemoteConfig()))


@pytest.mark.parametrize(
    ("typed", "url"),
    [
        ("head", "http://head:8265"),
        ("10.0.0.5:8266", "http://10.0.0.5:8266"),
        ("https://ray.example.com/", "https://ray.example.com"),
        ("http://ray.example.com/cluster-a", "http://ray.example.com/cluster-a"),
        ("[::1]", "http://[::1]:8265"),
    ],
)
def test_addresses_become_dashboard_urls(typed: str, url: str) -> None:
    assert normalize_address(typed) == url


@pytest.mark.parametrize(
    ("typed", "reason"),
    [
        ("ray://head:10001", "is a Ray Client address"),
        ("head:6379", "is Ray's GCS port"),
        ("auto", "does not name a dashboard"),
        ("ftp://head", "is not an http(s) dashboard address"),
    ],
)
def test_addresses_that_are_not_dashboards_are_refused(typed: str, reason: str) -> None:
    with pytest.raises(RemoteError) as caught:
        normalize_address(typed, "RAY_ADDRESS")
    assert f"{typed} (from RAY_ADDRESS)" in str(caught.value) and reason in str(caught.value)


def test_an_unreachable_cluster_fails_fast_naming_the_address(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    cluster = resolve_cluster(f"127.0.0.1:{port}", ConfigFile(tmp_path / "r.yaml", RemoteConfig()))
    started = time.perf_counter()
    with pytest.raises(ClusterUnreachableError) as caught:
        check_reachable(cluster)
    assert time.perf_counter() - started < 2
    assert f"cannot reach the Ray cluster at http://127.0.0.1:{port} (from --address)" in str(
        caught.value
    )
