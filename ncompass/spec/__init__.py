"""Target specs: YAML/dict → validated models, versions and migration, merge, file:line errors.

The surface is below; each name loads its module (and pydantic) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports

if TYPE_CHECKING:
    from ncompass.spec.loader import dump_yaml, load_spec, spec_from_dict
    from ncompass.spec.merge import merge_specs
    from ncompass.spec.models import (
        SPEC_VERSION,
        CallMarker,
        FunctionMarker,
        RangeMarker,
        Replacement,
        RewriteConfig,
        TargetSpec,
    )

# public name -> module that defines it (imported on first use: the models need pydantic)
_LAZY: dict[str, str] = {
    "SPEC_VERSION": "ncompass.spec.models",
    "CallMarker": "ncompass.spec.models",
    "FunctionMarker": "ncompass.spec.models",
    "RangeMarker": "ncompass.spec.models",
    "Replacement": "ncompass.spec.models",
    "RewriteConfig": "ncompass.spec.models",
    "TargetSpec": "ncompass.spec.models",
    "dump_yaml": "ncompass.spec.loader",
    "load_spec": "ncompass.spec.loader",
    "spec_from_dict": "ncompass.spec.loader",
    "merge_specs": "ncompass.spec.merge",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "SPEC_VERSION",
    "CallMarker",
    "FunctionMarker",
    "RangeMarker",
    "Replacement",
    "RewriteConfig",
    "TargetSpec",
    "dump_yaml",
    "load_spec",
    "merge_specs",
    "spec_from_dict",
]
