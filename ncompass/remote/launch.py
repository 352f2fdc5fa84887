"""On the cluster: the job's entrypoint, ``python -m ncompass.remote.launch ... -- RUN ARGS``.

It checks that the cluster's Python can run ``ncompass run`` (naming what is missing), runs the
ranks (here, or one group per node through Ray when the job spans nodes), packs their traces
for ``fetch``, and exits with the first failing rank's exit code.

This module and what it imports at the top are standard library only, so that the dependency
check can speak before anything else fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import signal
import sys
from collections.abc import Sequence

from ncompass._format import format_size
from ncompass.remote.cluster_python import ray_python, wrong_python_hint
from ncompass.remote.ranks import LOOPBACK, NodeResult, NodeSpec, free_port, run_and_pack

# import name -> distribution, for what `ncompass run` imports.
REQUIRED_MODULES = {
    "libcst": "libcst",
    "yaml": "pyyaml",
    "pydantic": "pydantic",
    "click": "click",
    "orjson": "orjson",
    "rich": "rich",
    "packaging": "packaging",
}
DEPENDENCY_EXIT_CODE = 2
PLACEMENT_EXIT_CODE = 3


def missing_dependencies() -> list[str]:
    """Distributions ``ncompass run`` needs that this Python cannot import."""
    return [dist for module, dist in REQUIRED_MODULES.items() if not _importable(module)]


def missing_dependencies_message(missing: Sequence[str]) -> str:
    """What this Python lacks, and, when it cannot import Ray either, the likely cause."""
    message = (
        f"ncompass: this cluster's Python ({sys.executable}) lacks {', '.join(missing)}, "
        "which `ncompass run` needs"
    )
    if not _importable("ray"):
        return f"{message}. {wrong_python_hint(sys.executable, ray_python())}"
    return (
        f"{message}: install them on the cluster, or list them in the file given to "
        "`ncompass submit --requirements`"
    )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The launcher's options; everything after ``--`` is ``ncompass run``'s."""
    parser = argparse.ArgumentParser(prog="python -m ncompass.remote.launch")
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--gpu-resource", default="GPU")
    parser.add_argument("--trace-name", required=True)
    parser.add_argument("run_args", nargs=argparse.REMAINDER)
    namespace = parser.parse_args(list(argv))
    if namespace.run_args and namespace.run_args[0] == "--":
        namespace.run_args = namespace.run_args[1:]
    return namespace


def log(message: str) -> None:
    """One line of the launcher's own output, in order with the ranks' lines."""
    sys.stdout.write(message + "\n")
    sys.stdout.flush()


def report(results: Sequence[NodeResult]) -> int:
    """Print how every rank ended and where the traces wait; return the job's exit code.

    Args:
        results: Every node's result, in the order the nodes ended.
    """
    for result in results:
        for message in result.errors:
            log(f"ncompass: {message}")
        if result.manifest is not None:
            files = result.manifest.files
            size = sum(item.size for item in files)
            packed = sum(item.packed_size for item in files)
            log(
                f"ncompass: node {result.node_rank}: {len(files)} files ({format_size(size)}, "
                f"{format_size(packed)} packed) ready for fetch in {result.pack_folder}"
            )
    records = sorted(
        (record for result in results for record in result.ranks), key=lambda item: item.rank
    )
    if len(records) > 1:
        log(
            "ncompass: ranks ended: "
            + ", ".join(f"rank {record.rank}: {record.exit_code}" for record in records)
        )
    # ``results`` come in the order nodes ended: the first failing one holds the cause.
    for result in results:
        if result.exit_code != 0:
            return result.exit_code
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job; return its exit code."""
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    # Ray starts jobs with SIGINT blocked; `ray job stop` must reach this process's handler.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    missing = missing_dependencies()
    if missing:
        log(missing_dependencies_message(missing))
        return DEPENDENCY_EXIT_CODE
    ranks_per_node = max(1, arguments.gpus)
    if arguments.nodes > 1:
        from ncompass.remote.multinode import PlacementError, run_nodes

        try:
            results = run_nodes(
                job_id=arguments.job_id,
                nodes=arguments.nodes,
                gpus_per_node=arguments.gpus,
                gpu_resource=arguments.gpu_resource,
                trace_name=arguments.trace_name,
                run_args=tuple(arguments.run_args),
                log=log,
            )
        except PlacementError as error:
            log(f"ncompass: {error}")
            return PLACEMENT_EXIT_CODE
        return report(results)
    spec = NodeSpec(
        job_id=arguments.job_id,
        node_rank=0,
        nodes=1,
        ranks_per_node=ranks_per_node,
        trace_name=arguments.trace_name,
        run_args=tuple(arguments.run_args),
        # One node: rank 0 listens on loopback only, never on an address others can reach.
        master_addr=LOOPBACK,
        master_port=free_port(LOOPBACK),
    )
    return report([run_and_pack(spec, log)])


if __name__ == "__main__":
    sys.exit(main())
