"""Lazy package exports (PEP 562): a package lists its public names and where they live.

A package's ``__init__`` stays cheap (no torch, libcst or pydantic at import time) and loads the
module that defines a name only when the name is first used::

    __getattr__, __dir__ = lazy_exports(__name__, {"Thing": "ncompass.pkg._things"}, globals())

A name whose module is ``<package>.<name>`` is that submodule itself (``ncompass.kernels.ops``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` for ``names`` (public name -> module).

    A loaded value is cached in ``namespace`` (the package's ``globals()``), so the lookup runs
    once per name.
    """

    def __getattr__(name: str) -> Any:
        module_name = names.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        value = module if module_name == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__


__all__ = ["lazy_exports"]
