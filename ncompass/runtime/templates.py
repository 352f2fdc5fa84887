"""Marker names computed from the running code: ``"layer[{self.layer_idx}]"``.

A template is compiled once, when its module is imported, and evaluated only when something
records, in the frame of the code that opened the range (its locals, closure variables,
globals and builtins). The rewritten code passes the template object itself, a module global:
opening the range allocates nothing, unlike a ``lambda`` made at every call (which would also
turn the function's locals into closure cells).
"""

from __future__ import annotations

from types import CodeType, FrameType


class NameTemplate:
    """A compiled f-string evaluated in a caller's frame.

    Args:
        source: The f-string literal (``"f'layer[{self.layer_idx}]'"``).
        text: The template as written in the spec (used when evaluation fails).
    """

    __slots__ = ("code", "text")

    def __init__(self, source: str, text: str) -> None:
        self.code: CodeType = compile(source, f"<ncompass marker name {text!r}>", "eval")
        self.text = text

    def __call__(self, frame: FrameType) -> object:
        return eval(self.code, frame.f_globals, frame.f_locals)

    def __repr__(self) -> str:
        return f"NameTemplate({self.text!r})"


def template(source: str, text: str) -> NameTemplate:
    """The template object rewritten modules bind once per dynamic marker."""
    return NameTemplate(source, text)


__all__ = ["NameTemplate", "template"]
