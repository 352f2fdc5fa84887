"""``ncompass kernels list`` and ``ncompass kernels tune``: the kernel ops and their autotuning."""

from __future__ import annotations

import json
import warnings
from typing import Any

import click

from ncompass.kernels.autotune.cache import AutotuneCacheWarning
from ncompass.kernels.errors import KernelError

_DTYPES = ("float32", "float16", "bfloat16")
_ORIGINS = {
    "tuned": "tuned now",
    "cache": "cached earlier",
    "memo": "same shape bucket as above",
    "default": "default config: NCOMPASS_AUTOTUNE=0",
}


@click.group("kernels")
def kernels_group() -> None:
    """Triton kernel ops: their conditions, and tuning ahead of time."""


@kernels_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def list_command(as_json: bool) -> None:
    """Show the ops, when they run their kernel, and the cached tuning choices."""
    from ncompass.kernels.autotune.cache import TuningCache
    from ncompass.kernels.autotune.spaces import SPACES
    from ncompass.kernels.catalog import COMMON_CONDITIONS, OPS, kernel_source_hash, triton_version

    cache = TuningCache()
    files, damaged = cache.scan()
    ops = [
        {
            "name": op.name,
            "kernel": op.kernel,
            "summary": op.summary,
            "replaces": op.reference,
            "conditions": [*op.conditions, *COMMON_CONDITIONS],
            "search_space": len(SPACES[op.kernel].configs),
            "source_hash": kernel_source_hash(op.kernel),
        }
        for op in OPS.values()
    ]
    cached = [
        {
            "file": str(entry.path),
            "kernel": entry.kernel,
            "current": entry.source_hash == kernel_source_hash(entry.kernel)
            and entry.triton == (triton_version() or ""),
            "triton": entry.triton,
            "device": {"name": entry.device.name, "capability": entry.device.capability},
            "choices": {
                key: {**choice.to_json(), "unusable": entry.unusable.get(key)}
                for key, choice in sorted(entry.entries.items())
            },
        }
        for entry in files
        if entry.kernel in SPACES
    ]
    unusable = [{"file": str(path), "reason": reason} for path, reason in damaged]
    if as_json:
        report = {"triton": triton_version(), "cache_dir": str(cache.root), "ops": ops}
        click.echo(json.dumps({**report, "cached": cached, "unusable": unusable}, indent=2))
        return
    _print_ops(ops, triton_version())
    _print_cached(cached, str(cache.root), unusable)


@kernels_group.command("tune")
@click.option("--op", "op_name", required=True, help="conv2d, linear, matmul, layer_norm, rms_norm")
@click.option(
    "--shapes",
    "shape_texts",
    multiple=True,
    metavar="SHAPE",
    help="e.g. 'x=1x64x56x56,w=64x64x3x3,stride=1,padding=1'; repeat, or separate with ';'.",
)
@click.option(
    "--preset", help="Tune the op's shapes of a model: tinyformer, resnet50, llama7b, ..."
)
@click.option(
    "--dtype",
    "dtypes",
    multiple=True,
    type=click.Choice(_DTYPES),
    help="Repeat for several. [default: float32]",
)
@click.option("--force", is_flag=True, help="Measure again even where a choice is cached.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def tune_command(
    op_name: str,
    shape_texts: tuple[str, ...],
    preset: str | None,
    dtypes: tuple[str, ...],
    force: bool,
    as_json: bool,
) -> None:
    """Tune OP for SHAPES now and cache the choices, so a model's first calls do not tune.

    Runs on the current CUDA device, or in Triton's interpreter under TRITON_INTERPRET=1.
    """
    from ncompass.kernels.catalog import op_named
    from ncompass.kernels.shapes import parse_shapes
    from ncompass.kernels.shapes import preset as preset_shapes
    from ncompass.kernels.tuning import tune_shape, tuning_device

    op_named(op_name)
    shapes = parse_shapes(op_name, shape_texts)
    if preset is not None:
        shapes += [shape for shape in preset_shapes(preset) if shape.op == op_name]
        if not shapes:
            raise KernelError(f"preset {preset!r} has no {op_name} shapes")
    if not shapes:
        raise KernelError("give --shapes (e.g. --shapes 'x=1x64x56x56,w=64x64x3x3') or --preset")
    device = tuning_device()
    results = []
    with warnings.catch_warnings(record=True) as noticed:
        warnings.simplefilter("always", AutotuneCacheWarning)
        for shape in shapes:
            for dtype in dtypes or ("float32",):
                result = tune_shape(shape, dtype, force=force)
                results.append(result)
                if not as_json:
                    _print_result(result, str(device))
    for warning in noticed:
        if issubclass(warning.category, AutotuneCacheWarning):
            click.echo(f"warning: {warning.message}", err=True)
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    if as_json:
        click.echo(
            json.dumps({"device": str(device), "results": [_result_json(r) for r in results]})
        )
    elif results and results[-1].cache_file is not None:
        click.echo(f"cache: {results[-1].cache_file.parent}")


def _print_ops(ops: list[dict[str, Any]], triton: str | None) -> None:
    from ncompass.kernels.catalog import COMMON_CONDITIONS

    click.echo(f"triton: {triton or 'not installed (pip install ncompass[kernels])'}")
    click.echo("every op runs its Triton kernel when the call has:")
    for condition in COMMON_CONDITIONS:
        click.echo(f"  - {condition}")
    click.echo("and falls back to PyTorch otherwise (ncompass.kernels.stats() counts why).")
    for op in ops:
        click.echo(f"\n{op['name']}: {op['summary']}")
        click.echo(f"  replaces {op['replaces']}; kernel {op['kernel']} ({op['source_hash']})")
        click.echo(f"  search space: {op['search_space']} configs")
        for condition in op["conditions"][: -len(COMMON_CONDITIONS)]:
            click.echo(f"  needs: {condition}")


def _print_cached(cached: list[dict[str, Any]], root: str, unusable: list[dict[str, str]]) -> None:
    click.echo(f"\ncached choices ({root}):")
    if not cached:
        click.echo("  none yet (ops tune on first use, or run `ncompass kernels tune`)")
    for item in unusable:
        click.echo(
            f"  unusable: {item['file']} ({item['reason']}); its ops tune again, and the next "
            "choice saved moves it aside to .corrupt"
        )
    for entry in cached:
        device = entry["device"]
        state = "" if entry["current"] else "  [stale: kernel or triton changed]"
        click.echo(
            f"  {entry['kernel']} on {device['name']} ({device['capability']}), "
            f"triton {entry['triton']}{state}"
        )
        for key, choice in entry["choices"].items():
            config = " ".join(f"{name}={value}" for name, value in choice["config"].items())
            click.echo(f"    {key:<40} {config}  {choice['ms']:.3f} ms ({choice['timer']})")
            if choice["unusable"] is not None:
                click.echo(
                    f"      [unusable: outside the search space, {choice['unusable']}; its calls "
                    "run PyTorch until `ncompass kernels tune --force` tunes that shape again]"
                )


def _print_result(result: Any, device: str) -> None:
    label = f"{result.shape.op} {result.dtype} {result.shape.label}"
    if result.refused:
        click.echo(f"{label}: cached choice outside the search space ({result.skipped})")
        return
    if result.choice is None:
        click.echo(f"{label}: not supported by the kernel ({result.skipped})")
        return
    choice = result.choice
    timing = f"{choice.ms:.3f} ms" if choice.ms is not None else "not measured"
    origin = _ORIGINS.get(choice.origin, choice.origin)
    click.echo(f"{label} on {device}: {choice.config.describe()} ({timing}, {origin})")


def _result_json(result: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "op": result.shape.op,
        "shape": result.shape.label,
        "dtype": result.dtype,
    }
    if result.choice is None:
        return {**body, "skipped": result.skipped, "refused": result.refused}
    choice = result.choice
    return {
        **body,
        "config": choice.config.to_json(),
        "ms": choice.ms,
        "origin": choice.origin,
        "cache_file": str(result.cache_file),
    }
