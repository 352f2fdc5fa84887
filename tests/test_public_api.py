"""The public surface: what ``ncompass`` and the seed paths export, and what importing costs."""

from __future__ import annotations

import subprocess
import sys

import ncompass

PUBLIC = [
    "CaptureError",
    "ContextError",
    "GpuBackendError",
    "GpuMonitor",
    "GpuSample",
    "GpuSummary",
    "NcompassError",
    "NcompassWarning",
    "ProfiledResult",
    "ProfilingSession",
    "RewriteConfig",
    "RewriteError",
    "SpecError",
    "TraceError",
    "__version__",
    "capture_trace",
    "disable_rewrites",
    "enable_full_trace_mode",
    "enable_rewrites",
    "gpu_profile",
]


def test_public_names_are_pinned() -> None:
    assert sorted(ncompass.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(ncompass, name) is not None


def test_seed_import_paths() -> None:
    from ncompass.trace import (
        RewriteConfig,
        disable_rewrites,
        enable_full_trace_mode,
        enable_rewrites,
    )
    from ncompass.trace.core import RewriteConfig as CoreConfig
    from ncompass.trace.profile.nvtx import NvtxContext
    from ncompass.trace.profile.torch import TorchProfilerContext, TorchRecordContext

    assert RewriteConfig is CoreConfig is ncompass.RewriteConfig
    assert (
        callable(enable_rewrites)
        and callable(disable_rewrites)
        and callable(enable_full_trace_mode)
    )
    assert NvtxContext and TorchProfilerContext and TorchRecordContext


def test_importing_ncompass_stays_light() -> None:
    code = (
        "import sys, ncompass, ncompass.trace.profile.torch, ncompass.runtime.sites\n"
        "heavy = [m for m in ('torch', 'libcst', 'pydantic', 'rich', 'numpy') if m in sys.modules]\n"
        "print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


PACKAGES_WITH_SURFACE = [
    "ncompass.analysis",
    "ncompass.capture",
    "ncompass.importer",
    "ncompass.kernels",
    "ncompass.kernels.jit",
    "ncompass.remote",
    "ncompass.rewrite",
    "ncompass.runtime",
    "ncompass.service",
    "ncompass.session",
    "ncompass.spec",
    "ncompass.traces",
]


def test_every_package_declares_its_surface() -> None:
    import pathlib

    root = pathlib.Path(ncompass.__file__).parent
    missing = [
        str(init.relative_to(root.parent))
        for init in sorted(root.rglob("__init__.py"))
        if "__all__" not in init.read_text()
    ]
    assert missing == []


def test_lazy_surfaces_resolve_every_name() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {PACKAGES_WITH_SURFACE!r}:\n"
        "    package = importlib.import_module(name)\n"
        "    if name == 'ncompass.kernels.jit':\n"
        "        continue  # its modules import triton\n"
        "    for public in package.__all__:\n"
        "        assert getattr(package, public) is not None, (name, public)\n"
        "        assert public in dir(package), (name, public)\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def test_lazy_exports_cache_and_refuse_unknown_names() -> None:
    import pytest

    from ncompass._lazy import lazy_exports

    namespace: dict[str, object] = {}
    getattr_, dir_ = lazy_exports("ncompass", {"errors": "ncompass.errors"}, namespace)
    import ncompass.errors

    assert getattr_("errors") is ncompass.errors
    assert namespace["errors"] is ncompass.errors
    assert "errors" in dir_()
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        getattr_("nope")


def test_every_ncompass_warning_derives_from_one_base() -> None:
    from ncompass.analysis.providers.fallback import ProviderFallbackWarning
    from ncompass.importer.hook import NotRewrittenWarning
    from ncompass.importer.inplace import ReimportWarning
    from ncompass.importer.targets import SkippedTargetWarning
    from ncompass.kernels.autotune.cache import AutotuneCacheWarning
    from ncompass.rewrite.plan import SpecDriftWarning
    from ncompass.runtime.base import RangeContextWarning

    for warning in (
        ProviderFallbackWarning,
        NotRewrittenWarning,
        ReimportWarning,
        SkippedTargetWarning,
        AutotuneCacheWarning,
        SpecDriftWarning,
        RangeContextWarning,
    ):
        assert issubclass(warning, ncompass.NcompassWarning)
        assert issubclass(warning, UserWarning)


_SPELLED_FOR_START_UP = {"capture/follow/bootstrap.py", "capture/follow/run_sitecustomize.py"}


def test_environment_variables_are_named_in_one_module() -> None:
    """No module but ``environment_variables`` spells an ``NCOMPASS_*`` variable as a string."""
    import pathlib
    import re

    from ncompass import environment_variables

    root = pathlib.Path(ncompass.__file__).parent
    literal = re.compile(r"""["'](NCOMPASS_[A-Z0-9_]+|NVTX_INJECTION64_PATH)["']""")
    spelled = {
        f"{path.relative_to(root)}: {match.group(1)}"
        for path in root.rglob("*.py")
        if path.name != "environment_variables.py"
        # what every followed interpreter runs first imports no ncompass module, so it spells
        # the variable itself (tests/capture/test_follow_startup.py checks that it matches)
        and path.relative_to(root).as_posix() not in _SPELLED_FOR_START_UP
        for line in path.read_text().splitlines()
        if not line.lstrip().startswith(("#", "``"))
        for match in literal.finditer(line)
    }
    assert spelled == set()
    for name in environment_variables.__all__:
        assert getattr(environment_variables, name) == name
