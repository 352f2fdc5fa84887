"""Give modules that are already imported their markers (or take them away) without re-running them.

In an iterative session the model exists before the next markers are applied: its instances,
the names other modules imported from it (``from mod import f``) and the bound methods the user
holds all point at the module's existing function objects. Swapping each function's
``__code__`` for its rewritten code reaches all of them at once and runs no module code twice.
That works when the new code has the same free variables, which the rewriter guarantees by
keeping its helpers in module globals. Changes that cannot be made in place (replacements,
module-level ranges) fall back to re-importing the module, with a warning naming it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import warnings
from collections.abc import Iterator
from types import CodeType, FunctionType, MethodType, ModuleType

import orjson

from ncompass.errors import NcompassWarning, RewriteError
from ncompass.importer.loader import rewrite_source
from ncompass.importer.registry import REGISTRY, RewrittenModule
from ncompass.importer.targets import ModuleTargets
from ncompass.rewrite.source import decode_source
from ncompass.spec.models import RewriteConfig

FunctionKey = tuple[str, int]  # (qualname without <locals>, first line)


class ReimportWarning(NcompassWarning):
    """An imported module was re-imported to apply a spec (its top-level code ran again)."""


def apply_in_place(
    module: ModuleType, entry: ModuleTargets | None, config: RewriteConfig | None
) -> None:
    """Make an imported module run the code of ``entry``'s markers (or its original code).

    Args:
        module: The module object in ``sys.modules``.
        entry: Its targets; ``None`` restores the original code.
        config: The spec the targets come from.

    Raises:
        SpecError: a marker does not match the code.
        RewriteError: the module's source cannot be read or rewritten.
    """
    path = _source_path(module)
    if path is None:
        warnings.warn(
            f"ncompass: {module.__name__} has no Python source file; it was not rewritten",
            ReimportWarning,
            stacklevel=3,
        )
        return
    with open(path, "rb") as handle:
        data = handle.read()
    if entry is None:
        code = compile(decode_source(data), path, "exec", dont_inherit=True)
        manifest = b"[]"
        prologue: list[str] = []
    else:
        assert config is not None
        result = rewrite_source(module.__name__, path, data, entry, config)
        plan = result.plan
        module_level = any(wrap.block.scope.kind != "function" for wrap in plan.wraps)
        if plan.definition_swaps or plan.reference_swaps or module_level:
            _reimport(module, "its spec replaces objects or marks module-level code")
            return
        code, prologue = result.compile(), result.prologue()
        manifest = orjson.dumps(result.manifest())
    if prologue:
        exec(compile("\n".join(prologue), path, "exec", dont_inherit=True), module.__dict__)
    new_code = dict(_code_objects(code))
    previous = REGISTRY.pop(module.__name__)
    originals = list(previous.originals) if previous is not None else []
    already = {id(function) for function, _ in originals}
    mismatched: list[str] = []
    for key, functions in _live_functions(module, path).items():
        replacement = new_code.get(key)
        if replacement is None:
            continue
        for function in functions:
            if function.__code__.co_freevars != replacement.co_freevars:
                mismatched.append(key[0])
                continue
            if id(function) not in already:
                originals.append((function, function.__code__))
                already.add(id(function))
            function.__code__ = replacement
    if mismatched:
        _reimport(module, f"the free variables of {', '.join(sorted(set(mismatched)))} changed")
        return
    if entry is not None:
        REGISTRY.record(RewrittenModule(module.__name__, path, entry.digest, manifest, originals))


def restore_in_place(record: RewrittenModule, module: ModuleType | None) -> None:
    """Undo a module's rewrite: swapped functions get their old code, loaded ones the original."""
    for function, code in record.originals:
        function.__code__ = code
    if module is not None and _source_path(module) is not None:
        # if the file changed or vanished, the rewritten code stays, harmlessly
        with contextlib.suppress(OSError, SyntaxError, RewriteError):
            apply_in_place(module, None, None)


def _reimport(module: ModuleType, why: str) -> None:
    warnings.warn(
        f"ncompass: re-importing {module.__name__} because {why}; its top-level code runs "
        "again and objects created before keep the old code",
        ReimportWarning,
        stacklevel=4,
    )
    importlib.reload(module)


def _source_path(module: ModuleType) -> str | None:
    path: str | None = getattr(module, "__file__", None)
    if not path or not path.endswith(".py") or not os.path.exists(path):
        return None
    return os.path.realpath(path)


def _code_objects(code: CodeType, prefix: str = "") -> Iterator[tuple[FunctionKey, CodeType]]:
    """Every function/class-body code object under ``code``, keyed like live functions."""
    for constant in code.co_consts:
        if not isinstance(constant, CodeType):
            continue
        name = constant.co_name
        if name.startswith("<"):  # lambdas, comprehensions: not reachable from live objects
            continue
        qualname = f"{prefix}{name}"
        yield (qualname, constant.co_firstlineno), constant
        yield from _code_objects(constant, f"{qualname}.")


def _live_functions(module: ModuleType, path: str) -> dict[FunctionKey, list[FunctionType]]:
    """The module's functions reachable from its globals and classes, by (qualname, line)."""
    found: dict[FunctionKey, list[FunctionType]] = {}
    seen: set[int] = set()

    def visit(obj: object) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, FunctionType):
            if os.path.realpath(obj.__code__.co_filename) == path:
                key = (obj.__qualname__.replace(".<locals>", ""), obj.__code__.co_firstlineno)
                found.setdefault(key, []).append(obj)
            wrapped = getattr(obj, "__wrapped__", None)
            if wrapped is not None:
                visit(wrapped)
        elif isinstance(obj, staticmethod | classmethod | MethodType):
            visit(obj.__func__)
        elif isinstance(obj, property):
            for accessor in (obj.fget, obj.fset, obj.fdel):
                if accessor is not None:
                    visit(accessor)
        elif isinstance(obj, type) and obj.__module__ == module.__name__:
            for value in list(vars(obj).values()):
                visit(value)
        else:
            wrapped = getattr(obj, "__wrapped__", None)
            if isinstance(wrapped, FunctionType):  # lru_cache and other wrapper objects
                visit(wrapped)

    for value in list(vars(module).values()):
        visit(value)
    return found


__all__ = ["ReimportWarning", "apply_in_place", "restore_in_place"]
