"""Spec versions: every one whole, none overwritten, even when several writers race."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ncompass.session.store import SessionStore
from ncompass.spec.models import RewriteConfig

SPEC = {"version": 1, "targets": [{"module": "pkg.mod", "functions": [{"qualname": "f"}]}]}


def test_racing_writers_each_get_their_own_complete_version(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, "race")
    configs = [RewriteConfig.from_dict({**SPEC, "context": "noop"}) for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        written = list(pool.map(store.write_version, configs))
    versions = sorted(version for version, _ in written)
    assert versions == list(range(1, 9))
    for version, path in written:
        assert path == store.spec_path(version)
        assert RewriteConfig.from_yaml(path).to_yaml() == configs[0].to_yaml()
    assert sorted(p.name for p in store.specs_dir.iterdir()) == [f"v{v:03d}.yaml" for v in versions]


def test_a_version_already_on_disk_is_never_overwritten(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, "kept")
    store.specs_dir.mkdir(parents=True)
    store.spec_path(1).write_text("# the user's own file\n")
    version, path = store.write_version(RewriteConfig.from_dict(SPEC))
    assert version == 2 and path.name == "v002.yaml"
    assert store.spec_path(1).read_text() == "# the user's own file\n"
