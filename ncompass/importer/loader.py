"""The loader of target modules: the normal source loader with rewritten, cached code.

It subclasses :class:`importlib.machinery.SourceFileLoader`, so ``__file__``, ``__spec__``,
``__path__`` (packages keep importing their submodules), ``get_data``, ``get_source``,
``importlib.resources`` and ``linecache`` behave as for any module. Only the code differs:
``get_code`` serves it from ncompass's own bytecode cache (see :mod:`ncompass.importer.cache`),
and ``source_to_code`` rewrites.
"""

from __future__ import annotations

import importlib.machinery
from pathlib import Path
from types import CodeType

import orjson

from ncompass.errors import RewriteError
from ncompass.importer import cache
from ncompass.importer.registry import REGISTRY, RewrittenModule
from ncompass.importer.targets import ModuleTargets
from ncompass.rewrite.result import RewriteResult, rewrite_module
from ncompass.rewrite.source import decode_source, parse_source
from ncompass.spec.models import RewriteConfig


def rewritten_code(
    module_name: str, path: str, data: bytes, entry: ModuleTargets, config: RewriteConfig
) -> tuple[CodeType, bytes]:
    """The rewritten code of a module (from the cache when valid) and its marker manifest (JSON).

    Raises:
        SpecError: a marker does not match the code (spec file and line).
        RewriteError: the source cannot be parsed or rewritten.
    """
    key = cache.cache_key(data, entry.digest)
    hit = cache.load(path, key)
    if hit is not None:
        return hit.code, hit.manifest_json
    result = rewrite_source(module_name, path, data, entry, config)
    code = result.compile()
    manifest = orjson.dumps(result.manifest())
    cache.store(path, key, code, manifest)
    return code, manifest


def rewrite_source(
    module_name: str, path: str, data: bytes, entry: ModuleTargets, config: RewriteConfig
) -> RewriteResult:
    """Rewrite a module's source bytes for its targets (no cache).

    Raises:
        SyntaxError: the source is not valid Python: the very error a plain import raises
            (code may catch it), not an ncompass error.
    """
    try:
        source = parse_source(decode_source(data), Path(path), module_name)
    except RewriteError as error:
        failure = error
    else:
        return rewrite_module(source, entry.targets, config)
    # outside the `except`, so that Python's SyntaxError is not chained to ncompass's
    compile(data, path, "exec", dont_inherit=True)
    raise failure  # valid Python that libcst cannot parse


class RewritingLoader(importlib.machinery.SourceFileLoader):
    """Loads a target module with its markers in place.

    Args:
        fullname: The module name.
        path: Its source file.
        entry: The spec targets naming it.
        config: The whole spec (default context, spec file for error messages).
    """

    def __init__(self, fullname: str, path: str, entry: ModuleTargets, config: RewriteConfig):
        super().__init__(fullname, path)
        self.entry = entry
        self.config = config

    def get_code(self, fullname: str) -> CodeType:
        """Rewritten code for ``fullname``, cached by source hash and spec."""
        path = self.get_filename(fullname)
        data = self.get_data(path)
        code, manifest = rewritten_code(fullname, path, data, self.entry, self.config)
        REGISTRY.record(RewrittenModule(fullname, path, self.entry.digest, manifest))
        return code

    def source_to_code(  # type: ignore[override]
        self, data: bytes | str, path: str, *, _optimize: int = -1
    ) -> CodeType:
        """Rewrite and compile source (for callers that bypass ``get_code``)."""
        raw = data.encode() if isinstance(data, str) else data
        return rewrite_source(self.name, path, raw, self.entry, self.config).compile()


__all__ = ["RewritingLoader", "rewrite_source", "rewritten_code"]
