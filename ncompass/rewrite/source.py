"""A target's source: text, hash, and its two parses (libcst to rewrite, ast for line numbers).

libcst keeps every comment and space, so the rewritten source reads like the original; its
position metadata, however, costs more than the parse itself. Python's own ``ast`` gives the
same statement line spans in a few milliseconds, so the rewriter reads lines from ``ast`` and
edits the libcst tree (see :mod:`ncompass.rewrite.statements` for how the two are paired).
"""

from __future__ import annotations

import ast
import hashlib
import io
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import libcst

from ncompass.errors import RewriteError
from ncompass.rewrite.collector import collector_paused


@dataclass(eq=False)
class SourceModule:
    """One module's source and parses.

    Attributes:
        text: The decoded source text.
        path: The file it came from (``None`` for source given as text).
        label: How messages and default marker names call the module (dotted name or file name).
        cst: The libcst module.
        tree: The ``ast`` module of the same text.
    """

    text: str
    path: Path | None
    label: str
    cst: libcst.Module
    tree: ast.Module
    _lines: list[str] | None = field(default=None, repr=False)

    @property
    def filename(self) -> str:
        """The file name compiled code reports (tracebacks, ``inspect``, coverage)."""
        return str(self.path) if self.path is not None else f"<{self.label}>"

    @property
    def lines(self) -> list[str]:
        """The source lines without line endings (index 0 is line 1)."""
        if self._lines is None:
            # split on "\n" only: str.splitlines() also splits on form feeds, the tokenizer does not
            lines = self.text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            self._lines = lines
        return self._lines

    def line(self, number: int) -> str:
        """The text of 1-based line ``number`` ('' past the end)."""
        return self.lines[number - 1] if 0 < number <= len(self.lines) else ""

    @property
    def sha256(self) -> str:
        """The hash a spec's ``sha256:`` is compared with (of the file's bytes as UTF-8 text)."""
        return source_sha256(self.text)


def source_sha256(text: str) -> str:
    """The sha256 of source text, as written into specs to detect drift."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def decode_source(data: bytes) -> str:
    """Decode source bytes as the interpreter does (PEP 263 cookie, BOM, universal newlines)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    text = text.removeprefix("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_source(path: str | Path, label: str | None = None) -> SourceModule:
    """Read and parse a Python file.

    Raises:
        RewriteError: if the file cannot be read or is not valid Python (naming file and line).
    """
    file_path = Path(path)
    try:
        data = file_path.read_bytes()
    except OSError as error:
        raise RewriteError(f"{file_path}: cannot read source: {error.strerror or error}") from None
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as error:
        raise RewriteError(f"{file_path}: cannot decode source: {error}") from None
    return parse_source(text, file_path, label or file_path.name)


@collector_paused
def parse_source(text: str, path: Path | None, label: str) -> SourceModule:
    """Parse source text with both parsers.

    Raises:
        RewriteError: on a syntax error, naming the file and line.
    """
    where = str(path) if path is not None else f"<{label}>"
    try:
        tree = ast.parse(text, filename=where, type_comments=False)
    except SyntaxError as error:
        raise RewriteError(f"{where}:{error.lineno}: syntax error: {error.msg}") from None
    try:
        module = libcst.parse_module(text)
    except libcst.ParserSyntaxError as error:
        raise RewriteError(
            f"{where}:{error.raw_line}: libcst cannot parse: {error.message}"
        ) from None
    return SourceModule(text=text, path=path, label=label, cst=module, tree=tree)


__all__ = ["SourceModule", "decode_source", "parse_source", "read_source", "source_sha256"]
