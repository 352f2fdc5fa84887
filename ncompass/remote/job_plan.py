"""What a submitted job runs: its ranks, its entrypoint, its runtime environment.

Pure data, no Ray: the entrypoint is one shell command,
``python -m ncompass.remote.launch [launch options] -- [ncompass run arguments]``, readable in
``ncompass jobs list``; the launcher on the cluster turns it into one ``ncompass run`` per rank.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ncompass import environment_variables
from ncompass._version import __version__
from ncompass.remote.ranks import STOP_TIMEOUT_S

REMOTE_ENV = environment_variables.NCOMPASS_REMOTE
JOB_ID_ENV = environment_variables.NCOMPASS_JOB_ID
METADATA_KEY = "ncompass"
LAUNCH_MODULE = "ncompass.remote.launch"
# Ray's job supervisor reads this from the job's environment when it stops a job: how long the
# job's processes get after SIGTERM before SIGKILL (3 s by default). A stopped job's ranks get
# the launcher's stop timeout to write their traces, and the launcher then packs them.
RAY_STOP_WAIT_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
PACK_ALLOWANCE_S = 90
JOB_STOP_WAIT_S = int(STOP_TIMEOUT_S) + PACK_ALLOWANCE_S


@dataclass(frozen=True)
class RankLayout:
    """How many ranks run where.

    Attributes:
        nodes: Nodes the job spans (one group of ranks per node).
        gpus_per_node: GPUs each node's group reserves; one rank per GPU (one rank when 0).
        gpu_resource: The Ray resource a GPU is (``GPU``, or a custom one such as ``fake_gpu``).
    """

    nodes: int = 1
    gpus_per_node: int = 1
    gpu_resource: str = "GPU"

    @property
    def ranks_per_node(self) -> int:
        """Ranks on each node (torchrun's ``--nproc-per-node``)."""
        return max(1, self.gpus_per_node)

    @property
    def world_size(self) -> int:
        """Ranks in all."""
        return self.nodes * self.ranks_per_node

    def resources(self, count: int) -> dict[str, Any]:
        """Ray scheduling options that reserve ``count`` GPUs of this layout's resource."""
        if count <= 0:
            return {}
        if self.gpu_resource == "GPU":
            return {"num_gpus": count}
        return {"resources": {self.gpu_resource: count}}


@dataclass(frozen=True)
class JobPlan:
    """Everything the job needs to know, decided on this machine.

    Attributes:
        job_id: The submission id (also the name of the job's trace folder).
        layout: Ranks and GPUs.
        trace_name: The trace name; ranks add ``-rankN``.
        run_args: ``ncompass run`` arguments (specs, profiler, flags, the script and its
            arguments), without ``--output-dir`` and ``--trace-name``, which the launcher sets.
        python: The cluster's Python, as the job's shell finds it.
        env: Extra environment variables for the job.
    """

    job_id: str
    layout: RankLayout
    trace_name: str
    run_args: tuple[str, ...]
    python: str = "python"
    env: Mapping[str, str] = field(default_factory=dict)

    def entrypoint(self) -> str:
        """The shell command the job runs."""
        return shlex.join(
            [
                *shlex.split(self.python),
                "-m",
                LAUNCH_MODULE,
                "--job-id",
                self.job_id,
                "--nodes",
                str(self.layout.nodes),
                "--gpus",
                str(self.layout.gpus_per_node),
                "--gpu-resource",
                self.layout.gpu_resource,
                "--trace-name",
                self.trace_name,
                "--",
                *self.run_args,
            ]
        )

    def environment(self) -> dict[str, str]:
        """Environment variables of the job and every task it starts.

        Unless the user set it, the job's stop wait covers writing and packing the traces.
        """
        return {
            RAY_STOP_WAIT_ENV: str(JOB_STOP_WAIT_S),
            **self.env,
            REMOTE_ENV: "1",
            JOB_ID_ENV: self.job_id,
        }

    def metadata(self, app_name: str) -> dict[str, str]:
        """Ray job metadata (strings only): lets ``jobs list`` and ``jobs fetch`` know the job."""
        return {
            METADATA_KEY: __version__,
            "app_name": app_name,
            "trace_name": self.trace_name,
            "nodes": str(self.layout.nodes),
            "gpus_per_node": str(self.layout.gpus_per_node),
            "world_size": str(self.layout.world_size),
        }

    def entrypoint_resources(self) -> dict[str, Any]:
        """What the entrypoint reserves: one node's GPUs, or nothing when it spreads over nodes.

        On one node the ranks are the entrypoint's own children, so the entrypoint holds the
        GPUs (Ray then sets ``CUDA_VISIBLE_DEVICES`` for it). Over several nodes the ranks run
        in Ray tasks placed by a placement group, which hold the GPUs instead.
        """
        if self.layout.nodes > 1:
            return {}
        options = self.layout.resources(self.layout.gpus_per_node)
        if "num_gpus" in options:
            return {"entrypoint_num_gpus": options["num_gpus"]}
        if "resources" in options:
            return {"entrypoint_resources": options["resources"]}
        return {}


def run_arguments(
    *,
    specs: Sequence[str],
    profiler: str,
    flags: Sequence[str],
    script: str | None,
    module: str | None,
    args: Sequence[str],
) -> tuple[str, ...]:
    """``ncompass run`` arguments for the job (paths already inside the upload)."""
    command: list[str] = []
    for spec in specs:
        command += ["--config", spec]
    command += ["--profiler", profiler, *flags]
    if module is not None:
        command += ["-m", module]
    elif script is not None:
        command.append(script)
    command += list(args)
    return tuple(command)


__all__ = [
    "JOB_ID_ENV",
    "JOB_STOP_WAIT_S",
    "LAUNCH_MODULE",
    "METADATA_KEY",
    "RAY_STOP_WAIT_ENV",
    "REMOTE_ENV",
    "JobPlan",
    "RankLayout",
    "run_arguments",
]
