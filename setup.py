"""The optional C extension of trace linking; everything else is in pyproject.toml.

``ncompass.traces._fold`` folds trace events in C. It is optional: where no compiler is found
the build goes on without it, and ``ncompass.traces`` folds in Python (the same results).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ncompass.traces._fold",
            ["ncompass/traces/_fold.c"],
            depends=["ncompass/traces/_event_text.h", "ncompass/traces/_json_text.h"],
            extra_compile_args=["-O3", "-Wall"],
            optional=True,
        )
    ]
)
