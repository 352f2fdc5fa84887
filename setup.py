"""The optional C extensions; everything else is in pyproject.toml.

``ncompass.traces._fold`` folds trace events in C, ``ncompass.analysis._sweep`` runs the
breakdown's per-GPU-event sweeps in C. Both are optional: where no compiler is found the build
goes on without them, and the same loops run in Python (with the same results).
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
        ),
        Extension(
            "ncompass.analysis._sweep",
            ["ncompass/analysis/_sweep.c"],
            extra_compile_args=["-O2", "-Wall"],
            optional=True,
        ),
    ]
)
