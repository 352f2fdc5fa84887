"""The import hook rewrites exactly the targets, keeps module identity, and can be undone."""

from __future__ import annotations

import importlib
import sys
import threading
import warnings
from pathlib import Path

import pytest

from ncompass.importer.hook import RewritingFinder, disable_rewrites, enable_rewrites
from ncompass.importer.inplace import ReimportWarning
from ncompass.importer.registry import REGISTRY
from tests.support import recording
from tests.support.modules import ModuleLab

PACKAGE_INIT = """
\"\"\"A package whose __init__ is a target.\"\"\"
from . import sub

def start():
    return sub.value() + 1
"""

SUB = """
def value():
    return 41
"""


def test_rewritten_package_init_still_imports_submodules(lab: ModuleLab) -> None:
    lab.write("pkg_a.sub", SUB)
    init = lab.root / "pkg_a" / "__init__.py"
    init.write_text(PACKAGE_INIT.lstrip("\n"))
    package = lab.load(
        "pkg_a", {"targets": [{"module": "pkg_a", "functions": [{"qualname": "start"}]}]}
    )
    assert package.start() == 42
    assert recording.names_entered() == ["pkg_a:start"]
    assert package.__file__ == str(init)
    assert package.__spec__ is not None and package.__spec__.name == "pkg_a"
    assert list(package.__path__) == [str(lab.root / "pkg_a")]
    assert package.__doc__ == "A package whose __init__ is a target."
    assert importlib.import_module("pkg_a.sub").value() == 41


def test_non_targets_are_not_touched(lab: ModuleLab) -> None:
    lab.write("target_b", "def f():\n    return 1\n")
    lab.write("bystander_b", "def f():\n    return 2\n")
    lab.load("target_b", {"targets": [{"module": "target_b", "functions": [{"qualname": "f"}]}]})
    bystander = importlib.import_module("bystander_b")
    assert type(bystander.__loader__).__name__ == "SourceFileLoader"
    assert "_ncompass_enter_1" not in vars(bystander)
    assert bystander.f() == 2 and recording.EVENTS == []


def test_file_targets_match_by_path(lab: ModuleLab) -> None:
    path = lab.write("by_path_c", "def f():\n    return 3\n")
    module = lab.load(
        "by_path_c", {"targets": [{"file": str(path), "functions": [{"qualname": "f"}]}]}
    )
    assert module.f() == 3
    assert recording.names_entered() == ["by_path_c:f"]


def test_finder_sits_first_once_and_leaves(lab: ModuleLab) -> None:
    lab.write("mod_d", "def f():\n    return 1\n")
    spec = {"targets": [{"module": "mod_d", "functions": [{"qualname": "f"}]}]}
    lab.load("mod_d", spec)
    lab.load("mod_d", spec)
    finders = [f for f in sys.meta_path if isinstance(f, RewritingFinder)]
    assert len(finders) == 1 and sys.meta_path[0] is finders[0]
    disable_rewrites()
    assert not any(isinstance(f, RewritingFinder) for f in sys.meta_path)


MODEL = """
class Model:
    def __init__(self, scale):
        self.scale = scale

    def forward(self, x):
        y = x * self.scale
        return y + 1

def helper(x):
    return x - 1
"""


def test_already_imported_module_gets_markers_in_place(lab: ModuleLab) -> None:
    lab.write("model_e", MODEL)
    module = lab.load("model_e")
    instance = module.Model(2)
    bound = instance.forward
    helper = module.helper  # as `from model_e import helper` would hold it
    assert bound(3) == 7 and recording.EVENTS == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReimportWarning)  # no re-import: in place
        enable_rewrites(
            lab.spec(
                {
                    "targets": [
                        {
                            "module": "model_e",
                            "functions": [{"qualname": "Model.forward"}, {"qualname": "helper"}],
                        }
                    ]
                }
            )
        )
    assert sys.modules["model_e"] is module
    assert bound(3) == 7 and instance.forward(1) == 3 and helper(5) == 4
    assert recording.names_entered() == ["model_e:Model.forward"] * 2 + ["model_e:helper"]
    disable_rewrites()
    recording.reset()
    assert bound(3) == 7 and helper(1) == 0
    assert recording.EVENTS == []


def test_header_call_markers_are_added_in_place_and_removed(lab: ModuleLab) -> None:
    lab.write(
        "gate_e",
        """
        class Gate:
            def ready(self, x):
                return x > 0

            def run(self, x):
                while self.ready(x) and x < 3:
                    x += 1
                return x
        """,
    )
    module = lab.load("gate_e")
    bound = module.Gate().run
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReimportWarning)  # no re-import: in place
        spec = {"calls": [{"in": "Gate.run", "call": "self.ready", "name": "ready[{x}]"}]}
        enable_rewrites(lab.spec({"targets": [{"module": "gate_e", **spec}]}))
    assert bound(1) == 3
    assert recording.names_entered() == ["ready[1]", "ready[2]", "ready[3]"]
    disable_rewrites()
    recording.reset()
    assert bound(1) == 3 and recording.EVENTS == []


def test_changing_the_spec_moves_markers_in_place(lab: ModuleLab) -> None:
    lab.write("model_f", MODEL)
    module = lab.load(
        "model_f", {"targets": [{"module": "model_f", "functions": [{"qualname": "helper"}]}]}
    )
    instance = module.Model(1)
    enable_rewrites(
        lab.spec({"targets": [{"module": "model_f", "functions": [{"qualname": "Model.*"}]}]})
    )
    recording.reset()
    module.helper(1)
    instance.forward(1)
    assert recording.names_entered() == ["model_f:Model.forward"]
    enable_rewrites(lab.spec({"targets": []}))
    recording.reset()
    instance.forward(1)
    module.helper(1)
    assert recording.EVENTS == []
    assert REGISTRY.get("model_f") is None


def test_replacements_in_imported_modules_fall_back_to_reimport(lab: ModuleLab) -> None:
    lab.write("fast_g", "class Fast:\n    kind = 'fast'\n")
    lab.write("model_g", "class Slow:\n    kind = 'slow'\n\ndef make():\n    return Slow()\n")
    module = lab.load("model_g")
    assert module.make().kind == "slow"
    spec = {
        "targets": [{"module": "model_g", "replace": [{"name": "Slow", "with": "fast_g:Fast"}]}]
    }
    with pytest.warns(ReimportWarning, match="re-importing model_g"):
        enable_rewrites(lab.spec(spec))
    assert module.make().kind == "fast"


def test_concurrent_imports_from_threads(lab: ModuleLab) -> None:
    names = [f"threaded_{i}" for i in range(8)]
    for name in names:
        lab.write(name, "import time\ntime.sleep(0.01)\n\ndef f(x):\n    return x * 2\n")
    enable_rewrites(
        lab.spec(
            {"targets": [{"module": name, "functions": [{"qualname": "f"}]} for name in names]}
        )
    )
    recording.reset()
    results: dict[str, int] = {}
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            results[name] = importlib.import_module(name).f(21)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in names * 3]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert results == {name: 42 for name in names}
    assert len(recording.names_entered()) == len(threads)
    assert all(
        sys.modules[name].__loader__.__class__.__name__ == "RewritingLoader" for name in names
    )


def test_spec_error_surfaces_at_import(lab: ModuleLab) -> None:
    from ncompass.errors import SpecError

    lab.write("broken_h", "def f():\n    return 1\n")
    with pytest.raises(SpecError, match="no function 'g'"):
        lab.load(
            "broken_h", {"targets": [{"module": "broken_h", "functions": [{"qualname": "g"}]}]}
        )


def test_unmet_requires_skips_the_target_with_a_warning(lab: ModuleLab) -> None:
    from ncompass.importer.targets import SkippedTargetWarning

    lab.write("guarded_i", "def f():\n    return 1\n")
    spec = {
        "targets": [
            {"module": "guarded_i", "requires": "torch>=999", "functions": [{"qualname": "f"}]},
        ]
    }
    with pytest.warns(SkippedTargetWarning, match="torch"):
        module = lab.load("guarded_i", spec)
    assert module.f() == 1 and recording.EVENTS == []


def test_full_trace_mode_spec_marks_a_run(lab: ModuleLab, tmp_path: Path) -> None:
    from ncompass.importer.hook import active_config, enable_full_trace_mode

    lab.write("plain_j", "def f():\n    return 1\n")
    lab.load("plain_j", {"targets": []})
    import os

    os.environ["NCOMPASS_RUNNER"] = "1"  # do not open a process-long range in the test process
    try:
        enable_full_trace_mode()
    finally:
        del os.environ["NCOMPASS_RUNNER"]
    config = active_config()
    assert config is not None and config.full_trace_mode
