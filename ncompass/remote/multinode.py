"""On the cluster: a job over several nodes, one Ray task per node holding that node's GPUs.

A placement group with one bundle per node (``STRICT_SPREAD``: each bundle on its own node)
reserves the GPUs; a first, resource-free task on bundle 0 picks ``MASTER_ADDR``/``MASTER_PORT``
on the node of rank 0; then one task per bundle runs that node's ranks exactly as a single-node
job does and packs the node's traces into its own Ray log folder, from where ``fetch`` collects
every node's. When a node fails, the others get the same grace as ranks on one node, then are
cancelled (their ranks are interrupted, so their traces are still written and packed).

Ray is imported here only, and only on the cluster.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from ncompass import environment_variables
from ncompass.remote.job_plan import RankLayout
from ncompass.remote.manifest import RankRecord
from ncompass.remote.ranks import (
    NodeResult,
    NodeSpec,
    failure_grace_s,
    free_port,
    run_and_pack,
)

PLACEMENT_TIMEOUT_ENV = environment_variables.NCOMPASS_REMOTE_PLACEMENT_TIMEOUT_S
DEFAULT_PLACEMENT_TIMEOUT_S = 120.0
# STRICT_SPREAD puts every node group on its own node. PACK or SPREAD let groups share a node:
# a multi-node job can then be rehearsed on one machine (the tests do).
PLACEMENT_STRATEGY_ENV = environment_variables.NCOMPASS_REMOTE_PLACEMENT_STRATEGY
DEFAULT_PLACEMENT_STRATEGY = "STRICT_SPREAD"


class PlacementError(Exception):
    """The cluster cannot give every node its GPUs."""


def bundle(layout: RankLayout) -> dict[str, float]:
    """The resources one node's group reserves."""
    if layout.gpus_per_node <= 0:
        return {"CPU": 1.0}
    return {layout.gpu_resource: float(layout.gpus_per_node)}


def node_task_options(layout: RankLayout) -> dict[str, Any]:
    """Ray options of a node task: the node's GPUs, no CPU (its ranks are subprocesses)."""
    if layout.gpus_per_node <= 0:
        return {"num_cpus": 1}
    return {"num_cpus": 0, **layout.resources(layout.gpus_per_node)}


def rendezvous_address() -> tuple[str, int]:
    """This node's IP and a free port on it: ``MASTER_ADDR`` and ``MASTER_PORT``."""
    import ray

    address: str = ray.util.get_node_ip_address()
    return address, free_port(address)


def node_task(spec: NodeSpec) -> NodeResult:
    """Run one node's ranks and pack its traces (the body of each node's Ray task)."""

    def log(message: str) -> None:
        print(message, flush=True)

    return run_and_pack(spec, log)


def run_nodes(
    *,
    job_id: str,
    nodes: int,
    gpus_per_node: int,
    gpu_resource: str,
    trace_name: str,
    run_args: tuple[str, ...],
    log: Callable[[str], None],
) -> list[NodeResult]:
    """Run the job's ranks over ``nodes`` nodes; return every node's result.

    Raises:
        PlacementError: the placement group cannot be placed in time.
    """
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    layout = RankLayout(nodes, gpus_per_node, gpu_resource)
    ray.init(log_to_driver=True, logging_level=logging.WARNING)
    strategy = os.environ.get(PLACEMENT_STRATEGY_ENV, DEFAULT_PLACEMENT_STRATEGY)
    group = placement_group([bundle(layout)] * nodes, strategy=strategy)
    timeout = float(os.environ.get(PLACEMENT_TIMEOUT_ENV, DEFAULT_PLACEMENT_TIMEOUT_S))
    try:
        if not group.wait(timeout_seconds=timeout):
            raise PlacementError(
                f"cannot place {nodes} node groups of {bundle(layout)} ({strategy}) within "
                f"{timeout:g} s; the cluster has {_readable(ray.cluster_resources())} in all "
                f"({PLACEMENT_TIMEOUT_ENV} sets the wait)"
            )

        def on_node(index: int) -> Any:
            return PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index)

        probe = ray.remote(num_cpus=0)(rendezvous_address)
        master_addr, master_port = ray.get(probe.options(scheduling_strategy=on_node(0)).remote())
        log(f"ncompass: {nodes} nodes placed; rank 0 at {master_addr}:{master_port}")
        # No retries: a rank that already ran (and profiled) must not silently run again.
        task = ray.remote(max_retries=0)(node_task)
        specs = [
            NodeSpec(
                job_id=job_id,
                node_rank=index,
                nodes=nodes,
                ranks_per_node=layout.ranks_per_node,
                trace_name=trace_name,
                run_args=run_args,
                master_addr=master_addr,
                master_port=master_port,
            )
            for index in range(nodes)
        ]
        pending = {
            task.options(
                scheduling_strategy=on_node(spec.node_rank), **node_task_options(layout)
            ).remote(spec): spec
            for spec in specs
        }
        return _collect(ray, pending, log)
    finally:
        remove_placement_group(group)


def _collect(
    ray: Any, pending: dict[Any, NodeSpec], log: Callable[[str], None]
) -> list[NodeResult]:
    results: list[NodeResult] = []
    grace = failure_grace_s()
    failed_at: float | None = None
    cancelled = False
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
        for reference in done:
            spec = pending.pop(reference)
            try:
                result: NodeResult = ray.get(reference)
            except Exception as error:  # the task died, or was cancelled below
                result = _lost(spec, f"node {spec.node_rank}: {type(error).__name__}: {error}")
            results.append(result)
            if result.exit_code != 0 and failed_at is None:
                failed_at = time.monotonic()
                log(
                    f"ncompass: node {spec.node_rank} failed; the other nodes get "
                    f"{grace:g} s to finish, then are interrupted"
                )
        grace_over = failed_at is not None and time.monotonic() - failed_at > grace
        if grace_over and pending and not cancelled:
            for reference in pending:
                ray.cancel(reference)  # KeyboardInterrupt in the task: its ranks get SIGINT
            cancelled = True
    return results


def _readable(resources: dict[str, float]) -> str:
    shown = {
        key: value
        for key, value in resources.items()
        if not key.startswith("node:") and "memory" not in key
    }
    return ", ".join(f"{key} {value:g}" for key, value in sorted(shown.items())) or "nothing"


def _lost(spec: NodeSpec, message: str) -> NodeResult:
    """A node whose task did not return: its ranks' ends are unknown."""
    ranks = [
        RankRecord(spec.global_rank(local), local, None, None)
        for local in range(spec.ranks_per_node)
    ]
    return NodeResult(spec.node_rank, ranks, errors=[message])


__all__ = [
    "DEFAULT_PLACEMENT_STRATEGY",
    "DEFAULT_PLACEMENT_TIMEOUT_S",
    "PLACEMENT_STRATEGY_ENV",
    "PLACEMENT_TIMEOUT_ENV",
    "PlacementError",
    "bundle",
    "node_task",
    "node_task_options",
    "rendezvous_address",
    "run_nodes",
]
