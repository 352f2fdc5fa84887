"""Which function does a call in the source run? (To drill from a slow statement into its callee.)

Tried in order:

1. ``self.method(...)``: the method of the enclosing class.
2. ``self.part(...)`` where ``__init__`` did ``self.part = Part(...)``: ``Part.forward`` (what
   calling an ``nn.Module`` runs) or ``Part.__call__``, with ``Part`` found in the module or
   through its imports.
3. A name bound in the running program (the module is imported): the live object's function,
   bound method, or, for objects such as ``nn.Module`` instances, ``type(obj).forward``.
4. A name the module defines or imports (``helper(...)``, ``F.conv2d(...)``): its definition.

Only functions with Python source are returned: C functions (most of ``torch``) are leaves.
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FunctionType, MethodType
from typing import Any

from ncompass.rewrite.locate import dotted_name
from ncompass.rewrite.replace import import_aliases
from ncompass.rewrite.statements import Scope, StatementIndex

_CALL_METHODS = ("forward", "__call__")


@dataclass(frozen=True)
class Callee:
    """A function to mark: in ``module`` (dotted) or ``file`` (a script), with its qualname."""

    qualname: str
    module: str | None = None
    file: str | None = None


SourceLookup = Callable[[str], StatementIndex | None]


def resolve_callee(
    callee: str, index: StatementIndex, scope: Scope, module_name: str | None, lookup: SourceLookup
) -> Callee | None:
    """The function a call to ``callee`` (as written inside ``scope``) runs, if it can be found.

    Args:
        callee: The callee as written: ``self.attn``, ``helper``, ``F.gelu``, ``model.forward``.
        index: The statement index of the calling module.
        scope: The function the call is in.
        module_name: The calling module's dotted name (None for a script).
        lookup: Gives the statement index of another module by name (None if not found).
    """
    head, _, rest = callee.partition(".")
    owner = scope.parent if scope.kind == "function" else None
    if head == "self" and owner is not None and owner.kind == "class" and rest:
        attribute = rest.split(".")[0]
        method = index.scopes.get(f"{owner.qualname}.{attribute}")
        if method is not None and method.kind == "function" and "." not in rest:
            return Callee(method.qualname, module=module_name, file=_file(index, module_name))
        part_class = _assigned_class(index, owner, attribute)
        if part_class is not None:
            return _callable_of_class(part_class, index, module_name, lookup)
        return None
    live = _live_function(callee, module_name, index)
    if live is not None:
        return live
    local_class = _local_class(scope, head) if scope.kind == "function" else None
    if local_class is not None:
        if not rest:
            return _callable_of_class(local_class, index, module_name, lookup)
        if "." not in rest:
            return _method_of_class(local_class, rest, index, module_name, lookup)
    local = index.scopes.get(callee)
    if local is not None and local.kind == "function":
        return Callee(local.qualname, module=module_name, file=_file(index, module_name))
    if local is not None and local.kind == "class":
        return _callable_of_class(callee, index, module_name, lookup)
    target = import_aliases(index.source.tree).get(head)
    if target is None:
        return None
    dotted = f"{target}.{rest}" if rest else target
    other_module, _, name = dotted.rpartition(".")
    other = lookup(other_module) if other_module else None
    if other is None:
        return None
    found = other.scopes.get(name)
    if found is not None and found.kind == "function":
        return Callee(found.qualname, module=other_module)
    return None


def _file(index: StatementIndex, module_name: str | None) -> str | None:
    if module_name is not None or index.source.path is None:
        return None
    return str(index.source.path)


def _assigned_class(index: StatementIndex, owner: Scope, attribute: str) -> str | None:
    """``Part`` when ``__init__`` of ``owner`` does ``self.<attribute> = Part(...)``."""
    init = index.scopes.get(f"{owner.qualname}.__init__")
    if init is None:
        return None
    for node in ast.walk(init.ast_node):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
            continue
        for target in node.targets:
            if (
                isinstance(target, ast.Attribute)
                and target.attr == attribute
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            ):
                return dotted_name(node.value.func)
    return None


def _local_class(scope: Scope, name: str) -> str | None:
    """The class of local ``name`` in a function: ``name = Cls(...)`` or ``name: Cls``."""
    function = scope.ast_node
    assert isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
    arguments = function.args
    for argument in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
        if argument.arg == name and argument.annotation is not None:
            annotation = argument.annotation
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                return annotation.value
            return dotted_name(annotation)
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ):
            return dotted_name(node.value.func)
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            return dotted_name(node.annotation)
    return None


def _method_of_class(
    class_name: str,
    method: str,
    index: StatementIndex,
    module_name: str | None,
    lookup: SourceLookup,
) -> Callee | None:
    """``Class.method`` for a class named as written in ``index``'s module."""
    local = index.scopes.get(f"{class_name}.{method}")
    if local is not None and local.kind == "function":
        return Callee(local.qualname, module=module_name, file=_file(index, module_name))
    head, _, rest = class_name.partition(".")
    target = import_aliases(index.source.tree).get(head)
    if target is None:
        return None
    dotted = f"{target}.{rest}" if rest else target
    other_module, _, name = dotted.rpartition(".")
    other = lookup(other_module) if other_module else None
    if other is None:
        return None
    found = other.scopes.get(f"{name}.{method}")
    if found is not None and found.kind == "function":
        return Callee(found.qualname, module=other_module)
    return None


def _callable_of_class(
    class_name: str, index: StatementIndex, module_name: str | None, lookup: SourceLookup
) -> Callee | None:
    """``Class.forward`` (or ``__call__``) for a class named as written in ``index``'s module."""
    local = index.scopes.get(class_name)
    if local is not None and local.kind == "class":
        for method in _CALL_METHODS:
            found = index.scopes.get(f"{class_name}.{method}")
            if found is not None:
                return Callee(found.qualname, module=module_name, file=_file(index, module_name))
        return None
    head, _, rest = class_name.partition(".")
    target = import_aliases(index.source.tree).get(head)
    if target is None:
        return None
    dotted = f"{target}.{rest}" if rest else target
    return _callable_by_path(dotted, lookup)


def _callable_by_path(dotted: str, lookup: SourceLookup) -> Callee | None:
    module_name, _, class_name = dotted.rpartition(".")
    other = lookup(module_name) if module_name else None
    if other is not None:
        for method in _CALL_METHODS:
            found = other.scopes.get(f"{class_name}.{method}")
            if found is not None:
                return Callee(found.qualname, module=module_name)
    # Packages re-export classes (``torch.nn.Linear`` lives in ``torch.nn.modules.linear``):
    # ask the installed library itself, which is safe to import (unlike the user's own code).
    library = _installed_library(module_name)
    if library is None:
        return None
    found = getattr(library, class_name, None)
    if not isinstance(found, type):
        return None
    for method in _CALL_METHODS:
        function = inspect.getattr_static(found, method, None)
        if isinstance(function, FunctionType):
            return _function_callee(function)
    return None


def _installed_library(module_name: str) -> Any:
    """The module, imported, when it is already loaded or an installed third-party library."""
    import importlib
    import importlib.util

    loaded = sys.modules.get(module_name)
    if loaded is not None:
        return loaded
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) or ""
    if "site-packages" not in origin and "dist-packages" not in origin:
        return None
    try:
        return importlib.import_module(module_name)
    except Exception:  # a library that fails to import is simply not followed
        return None


def _live_function(callee: str, module_name: str | None, index: StatementIndex) -> Callee | None:
    """Resolve ``callee`` against the running program's objects, when its module is loaded."""
    module = sys.modules.get(module_name or "__main__")
    if module is None:
        return None
    if module_name is None:
        file = getattr(module, "__file__", None)
        if (
            not file
            or index.source.path is None
            or Path(file).resolve() != index.source.path.resolve()
        ):
            return None
    parts = callee.split(".")
    obj: Any = vars(module).get(parts[0])
    for part in parts[1:]:
        if obj is None:
            return None
        obj = (
            inspect.getattr_static(obj, part, None)
            if isinstance(obj, type)
            else getattr(obj, part, None)
        )
    return _function_callee(obj)


def _function_callee(obj: Any) -> Callee | None:
    if isinstance(obj, MethodType):
        obj = obj.__func__
    if isinstance(obj, staticmethod | classmethod):
        obj = obj.__func__
    if not isinstance(obj, FunctionType):
        for method in _CALL_METHODS:
            bound = getattr(type(obj), method, None)
            if isinstance(bound, FunctionType):
                obj = bound
                break
        else:
            return None
    obj = inspect.unwrap(obj)
    code = obj.__code__
    if not code.co_filename.endswith(".py"):
        return None
    qualname = obj.__qualname__.replace(".<locals>", "")
    module = getattr(obj, "__module__", None)
    if module in (None, "__main__", "__mp_main__"):
        return Callee(qualname, file=str(Path(code.co_filename).resolve()))
    return Callee(qualname, module=module)


__all__ = ["Callee", "resolve_callee"]
