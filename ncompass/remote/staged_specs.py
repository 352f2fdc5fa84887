"""Target specs travel with the upload: copied in, their ``file:`` paths rewritten.

A spec given with ``--config`` may live anywhere on this machine; the job needs it inside the
upload. Each spec is loaded (so a broken spec fails here, naming its file and line, not minutes
later on the cluster), its ``file:`` targets are re-pointed from the spec's new place to the
same files inside the upload, and it is written as version 1 YAML under ``.ncompass-submit/``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ncompass.capture.trace_files import safe_name
from ncompass.remote.errors import RemoteError
from ncompass.spec.models import RewriteConfig

STAGE_FOLDER = ".ncompass-submit"
SPEC_FOLDER = f"{STAGE_FOLDER}/specs"


@dataclass(frozen=True)
class StagedSpec:
    """A spec as the job will read it.

    Attributes:
        source: The spec file on this machine.
        archive_path: Its path inside the upload (``/``-separated, relative to the job's folder).
        content: The YAML text written there.
    """

    source: Path
    archive_path: str
    content: bytes


def stage_specs(specs: Sequence[Path], upload_root: Path) -> list[StagedSpec]:
    """Load every spec and rewrite it for its place inside the upload.

    Raises:
        SpecError: a spec is malformed (file and line named).
        RemoteError: a ``file:`` target lies outside the upload folder.
    """
    root = upload_root.resolve()
    staged: list[StagedSpec] = []
    for index, spec in enumerate(specs, start=1):
        config = RewriteConfig.from_yaml(spec)
        archive_path = f"{SPEC_FOLDER}/{index:02d}-{safe_name(Path(spec).stem)}.yaml"
        targets = [
            target.model_copy(update={"file": _relocated(spec, target.file, root, archive_path)})
            if target.file is not None
            else target
            for target in config.targets
        ]
        moved = config.model_copy(update={"targets": targets})
        staged.append(StagedSpec(Path(spec), archive_path, moved.to_yaml().encode("utf-8")))
    return staged


def _relocated(spec: Path, file: str, root: Path, archive_path: str) -> str:
    """``file`` (as written in ``spec``) relative to the staged spec's folder in the upload."""
    written = Path(file).expanduser()
    target = (written if written.is_absolute() else Path(spec).resolve().parent / written).resolve()
    try:
        inside = target.relative_to(root)
    except ValueError:
        raise RemoteError(
            f"{spec}: the target file {target} is outside the upload folder {root}; "
            "upload a folder that contains it (--upload-dir) or target it by module name"
        ) from None
    staged_folder = PurePosixPath(archive_path).parent
    return PurePosixPath(os.path.relpath(inside.as_posix(), staged_folder.as_posix())).as_posix()


__all__ = ["SPEC_FOLDER", "STAGE_FOLDER", "StagedSpec", "stage_specs"]
