"""Check a custom context class (``package.module:Class``) by reading its module's source.

``ncompass spec validate`` promises not to import or run anything; importing the module of a
custom context would run its top-level code. The module's file is found the way the import
system would find it (without importing parent packages) and parsed; the class must be
defined there and have ``__enter__`` and ``__exit__``. What only running the module could show
(a class bound by an import or an assignment, methods inherited from a base class) is reported
as not checked, never guessed.
"""

from __future__ import annotations

import ast
import difflib
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from ncompass.errors import ContextError
from ncompass.importer.lookup import spec_without_import

_METHODS = ("__enter__", "__exit__")
_REQUIREMENT = (
    "a custom context must be a class taking the marker name (and optionally the keyword "
    "'values') whose instances have __enter__ and __exit__"
)
_CHECKED_AT_RUN = "checked when `ncompass run` imports it"


@dataclass
class _Names:
    """What a block of statements binds at its own level."""

    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    other: set[str] = field(default_factory=set)
    star_import: bool = False


def check_context_source(context: str, module_name: str, attribute: str) -> str | None:
    """Check custom context ``module_name:attribute`` from source, importing nothing.

    Args:
        context: The context as written in the spec (for messages).
        module_name: The module part, e.g. ``"mypkg.contexts"``.
        attribute: The class part, e.g. ``"Timer"`` (dotted for a nested class).

    Returns:
        None when the class is checked; otherwise a note saying what could not be checked
        without importing the module, and why.

    Raises:
        ContextError: The module cannot be found or parsed, defines no such name, or defines
            a class without ``__enter__``/``__exit__``.
    """
    spec = spec_without_import(module_name)
    if spec is None or (spec.origin is None and not spec.submodule_search_locations):
        raise ContextError(
            f"context {context!r}: cannot find module {module_name!r} on the search path; "
            "check the name, install it, or add the folder that contains it to the search "
            "path (--path FOLDER on the command line, or PYTHONPATH)"
        )
    origin = spec.origin
    if origin is None or not origin.endswith(".py"):
        what = "a folder without __init__.py" if origin is None else f"not Python source ({origin})"
        return (
            f"context {context!r}: module {module_name!r} is {what}, so its classes are only "
            f"known by importing it; not checked here, {_CHECKED_AT_RUN}"
        )
    tree = _parse(context, Path(origin))
    body: list[ast.stmt] = tree.body
    owner = f"{module_name} ({origin})"
    found: ast.ClassDef | None = None
    for depth, part in enumerate(attribute.split(".")):
        names = _bindings(body)
        found = names.classes.get(part)
        unknowable = depth == 0 and (names.star_import or "__getattr__" in names.other)
        if part in names.other or (found is None and unknowable):
            return (
                f"context {context!r}: {owner} binds {part!r} by an import, an assignment "
                f"or a function, which only running it shows; not checked here, "
                f"{_CHECKED_AT_RUN}"
            )
        if found is None:
            close = difflib.get_close_matches(part, [*names.classes, *names.other])
            hint = f"; did you mean {', '.join(repr(name) for name in close)}?" if close else ""
            raise ContextError(f"context {context!r}: {owner} defines no {part!r}{hint}")
        body = found.body
        owner = f"class {found.name} of {module_name} ({origin}:{found.lineno})"
    assert found is not None  # attribute has at least one part
    return _check_methods(context, found, owner)


def _check_methods(context: str, cls: ast.ClassDef, owner: str) -> str | None:
    defined = _bindings(cls.body)
    missing = [
        name for name in _METHODS if name not in defined.other and name not in defined.classes
    ]
    if not missing:
        return None
    if cls.bases or cls.keywords or cls.decorator_list:
        return (
            f"context {context!r}: {owner} may get {' and '.join(missing)} from a base class, "
            f"a metaclass or a decorator, which only importing it shows; not checked here, "
            f"{_CHECKED_AT_RUN}"
        )
    raise ContextError(
        f"context {context!r}: {owner} has no {' or '.join(missing)} method; {_REQUIREMENT}"
    )


def _parse(context: str, path: Path) -> ast.Module:
    try:
        with tokenize.open(path) as source:
            text = source.read()
        return ast.parse(text, filename=str(path))
    except SyntaxError as error:
        raise ContextError(
            f"context {context!r}: {path} is not valid Python (line {error.lineno}: {error.msg})"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ContextError(f"context {context!r}: cannot read {path} ({error})") from None


def _bindings(body: list[ast.stmt]) -> _Names:
    """Names bound at the level of ``body``, looking into ``if``/``try``/``with`` blocks."""
    names = _Names()
    for statement in body:
        if isinstance(statement, ast.ClassDef):
            names.classes[statement.name] = statement
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            names.other.add(statement.name)
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            for alias in statement.names:
                if alias.name == "*":
                    names.star_import = True
                else:
                    names.other.add(alias.asname or alias.name.partition(".")[0])
        elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                names.other.update(
                    node.id for node in ast.walk(target) if isinstance(node, ast.Name)
                )
        blocks: list[list[ast.stmt]] = []
        if isinstance(statement, ast.If | ast.For | ast.While | ast.With | ast.AsyncWith):
            blocks = [statement.body, getattr(statement, "orelse", [])]
        elif isinstance(statement, ast.Try):
            blocks = [statement.body, statement.orelse, statement.finalbody]
            blocks += [handler.body for handler in statement.handlers]
        for block in blocks:
            inner = _bindings(block)
            for name, node in inner.classes.items():
                names.classes.setdefault(name, node)
            names.other |= inner.other
            names.star_import |= inner.star_import
    return names


__all__ = ["check_context_source"]
