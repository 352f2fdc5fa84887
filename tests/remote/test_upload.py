"""The upload: size limit, deterministic zip, specs staged with their file targets re-pointed."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest
import yaml

from ncompass.errors import SpecError
from ncompass.remote.errors import RemoteError, UploadTooLargeError
from ncompass.remote.staged_specs import stage_specs
from ncompass.remote.upload import check_size, collect_upload, write_archive
from ncompass.spec.models import RewriteConfig
from tests.conftest import REPO


def _files(root: Path, sizes: dict[str, int]) -> None:
    for name, size in sizes.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * size)


def test_over_the_limit_names_the_biggest_files_and_what_to_do(tmp_path: Path) -> None:
    _files(tmp_path, {"train.py": 100, "data/ckpt.pt": 3 << 20, "data/small.pt": 900 << 10})
    upload = collect_upload(tmp_path)
    with pytest.raises(UploadTooLargeError) as caught:
        check_size(upload, 1 << 20, limit_hint="raise the limit with --max-upload-mb")
    message = str(caught.value)
    assert f"the upload folder {tmp_path.resolve()} holds 3.9 MiB in 3 files" in message
    assert "over the 1.0 MiB limit" in message
    assert "Biggest: data/ckpt.pt (3.0 MiB), data/small.pt (900.0 KiB), train.py (100 B)" in message
    assert ".ncompassignore" in message and "--max-upload-mb" in message
    check_size(upload, 4 << 20, limit_hint="")  # under the limit: no error


def test_ignored_files_do_not_count_towards_the_limit(tmp_path: Path) -> None:
    _files(tmp_path, {"train.py": 100, "data/ckpt.pt": 3_000_000})
    (tmp_path / ".ncompassignore").write_text("data/\n")
    upload = collect_upload(tmp_path)
    check_size(upload, 1_000, limit_hint="")
    assert [item.relative for item in upload.files] == [".ncompassignore", "train.py"]


def test_the_zip_is_deterministic_keeps_modes_and_adds_extra_files(tmp_path: Path) -> None:
    root = tmp_path / "up"
    _files(root, {"run.sh": 10, "pkg/m.py": 20})
    os.chmod(root / "run.sh", 0o755)
    upload = collect_upload(root)
    extra = {".ncompass-submit/specs/01-a.yaml": b"version: 1\n"}
    first = write_archive(upload, extra, tmp_path / "a.zip")
    os.utime(root / "pkg/m.py", (1, 1))  # timestamps never reach the archive
    second = write_archive(collect_upload(root), extra, tmp_path / "b.zip")
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        assert archive.namelist() == [".ncompass-submit/specs/01-a.yaml", "pkg/m.py", "run.sh"]
        mode = archive.getinfo("run.sh").external_attr >> 16
        assert stat.S_IMODE(mode) == 0o755


def test_excluded_folders_links_to_folders_and_broken_links_stay_home(tmp_path: Path) -> None:
    _files(tmp_path, {"run.py": 1, "traces/old.json": 5, "elsewhere/big.bin": 5})
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "dangling.txt").symlink_to(tmp_path / "missing.txt")
    (tmp_path / "alias.py").symlink_to(tmp_path / "run.py")
    upload = collect_upload(tmp_path, exclude=[tmp_path / "traces"])
    assert [item.relative for item in upload.files] == ["alias.py", "elsewhere/big.bin", "run.py"]
    reasons = dict(upload.skipped)
    assert reasons["linked"] == "a link to a folder (not followed)"
    assert reasons["dangling.txt"] == "a broken link or unreadable entry"


def test_missing_upload_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(RemoteError, match="nope: the upload folder does not exist"):
        collect_upload(tmp_path / "nope")


def test_specs_are_staged_with_file_targets_pointing_at_the_same_files(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "train.py").write_text("def step():\n    return 1\n")
    specs = tmp_path / "elsewhere"
    specs.mkdir()
    spec = specs / "mine.yaml"
    spec.write_text(
        "version: 1\ntargets:\n"
        "  - file: ../project/scripts/train.py\n    functions:\n      - qualname: step\n"
        "  - module: tinyformer.model\n    functions:\n      - qualname: generate\n"
    )
    (staged,) = stage_specs([spec], root)
    assert staged.archive_path == ".ncompass-submit/specs/01-mine.yaml"
    # Unpack the staged spec where the job will find it, and load it as the job will.
    placed = root / staged.archive_path
    placed.parent.mkdir(parents=True)
    placed.write_bytes(staged.content)
    loaded = RewriteConfig.from_yaml(placed)
    assert "file: ../../scripts/train.py" in staged.content.decode()
    assert Path(loaded.targets[0].file or "") == (root / "scripts" / "train.py").resolve()
    assert loaded.targets[1].module == "tinyformer.model"
    assert loaded.targets[1].functions[0].qualname == "generate"


def test_a_file_target_outside_the_upload_is_refused_naming_spec_and_file(tmp_path: Path) -> None:
    (tmp_path / "outside.py").write_text("x = 1\n")
    (tmp_path / "up").mkdir()
    spec = tmp_path / "s.yaml"
    spec.write_text("version: 1\ntargets:\n  - file: outside.py\n    ranges: []\n")
    with pytest.raises(RemoteError) as caught:
        stage_specs([spec], tmp_path / "up")
    assert str(caught.value).startswith(
        f"{spec}: the target file {tmp_path / 'outside.py'} is outside the upload folder "
        f"{tmp_path / 'up'}"
    )


def test_a_broken_spec_fails_before_anything_is_uploaded(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("version: 1\ntargets:\n  - module: m\n    functions:\n      - qualnme: f\n")
    with pytest.raises(SpecError, match=r"bad\.yaml:5"):
        stage_specs([spec], tmp_path)


def test_the_demo_spec_stages_unchanged_but_for_its_comments() -> None:
    (staged,) = stage_specs([REPO / "configs" / "attn.yaml"], REPO)
    original = RewriteConfig.from_yaml(REPO / "configs" / "attn.yaml")
    assert yaml.safe_load(staged.content) == original.to_dict()
