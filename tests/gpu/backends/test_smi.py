"""The smi backend against a fake nvidia-smi that prints the real CSV format."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pytest

from ncompass.gpu._backends.base import BackendUnavailable, DeviceNotFound
from ncompass.gpu._backends.smi import SmiBackend, parse_row
from ncompass.gpu._sample import GpuSample

from ..conftest import FakeSmi, smi_gpu

MIB = 1024 * 1024
INTERVAL_S = 0.02


def read(backend: SmiBackend) -> list[GpuSample]:
    return list(backend.read(time.time_ns(), time.perf_counter_ns()))


def read_until(
    backend: SmiBackend, done: Callable[[list[GpuSample]], bool], timeout_s: float = 10.0
) -> list[GpuSample]:
    deadline = time.monotonic() + timeout_s
    while True:
        samples = read(backend)
        if done(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(INTERVAL_S)


def test_parses_real_rows_including_bracketed_values() -> None:
    assert parse_row("0, 87, 41, 31245, 81559, 312.45, 67") == (
        0,
        (87.0, 41.0, 31245.0, 81559.0, 312.45, 67.0),
    )
    assert parse_row("1, [N/A], [Not Supported], 0, 81559, [N/A], 34") == (
        1,
        (None, None, 0.0, 81559.0, None, 34.0),
    )
    assert parse_row("3, [GPU is lost], [GPU is lost], [GPU is lost], 0, [Unknown Error], 0")[1][
        :3
    ] == (None, None, None)
    assert (
        parse_row("Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error")
        is None
    )
    assert parse_row("") is None


def test_reads_the_latest_row_of_each_device(fake_smi: FakeSmi) -> None:
    fake_smi.configure(
        gpus=[
            smi_gpu(
                0,
                readings=[
                    {
                        "utilization.gpu": "87",
                        "utilization.memory": "41",
                        "memory.used": "31245",
                        "power.draw": "312.45",
                        "temperature.gpu": "67",
                    }
                ],
            ),
            smi_gpu(
                1,
                readings=[
                    {
                        "utilization.gpu": "[N/A]",
                        "utilization.memory": "[Not Supported]",
                        "power.draw": "[N/A]",
                    }
                ],
            ),
        ]
    )
    backend = SmiBackend()
    infos = backend.open(None, INTERVAL_S)
    try:
        assert [(info.index, info.name, info.memory_total_bytes) for info in infos] == [
            (0, "NVIDIA H100 80GB HBM3 #0", 81559 * MIB),
            (1, "NVIDIA H100 80GB HBM3 #1", 81559 * MIB),
        ]
        first, second = read(backend)  # open() waited for a complete first reading
        assert (first.util_gpu, first.util_mem, first.power_w, first.temperature_c) == (
            87,
            41,
            312.45,
            67,
        )
        assert first.memory_used_bytes == 31245 * MIB and first.memory_total_bytes == 81559 * MIB
        assert second.util_gpu is None and second.util_mem is None and second.power_w is None
        assert second.has_data  # memory and temperature are still there
    finally:
        backend.close()


def test_one_long_running_process_per_monitor_not_one_per_sample(fake_smi: FakeSmi) -> None:
    backend = SmiBackend()
    backend.open((1,), INTERVAL_S)
    try:
        for _ in range(10):
            assert read(backend)[0].has_data
            time.sleep(INTERVAL_S)
    finally:
        backend.close()
    (loop,) = fake_smi.loop_invocations()
    assert len(fake_smi.invocations()) == 2  # the device listing, then the loop
    argv = loop["argv"]
    assert argv[argv.index("-lms") + 1] == "20" and argv[argv.index("-i") + 1] == "1"
    assert "--format=csv,noheader,nounits" in argv


def test_close_stops_the_child_process(fake_smi: FakeSmi) -> None:
    backend = SmiBackend()
    backend.open((0,), INTERVAL_S)
    (loop,) = fake_smi.loop_invocations()
    os.kill(loop["pid"], 0)  # running
    backend.close()
    with pytest.raises(ProcessLookupError):
        os.kill(loop["pid"], 0)  # terminated and reaped
    backend.close()


@pytest.mark.parametrize("lost_mode", ["missing", "error"])
def test_a_device_that_disappears_reads_as_empty(fake_smi: FakeSmi, lost_mode: str) -> None:
    fake_smi.configure(gpus=[smi_gpu(0), smi_gpu(1, lost_after=3)], lost_mode=lost_mode)
    backend = SmiBackend()
    backend.open(None, INTERVAL_S)
    try:
        samples = read_until(backend, lambda samples: not samples[1].has_data)
        assert not samples[1].has_data
        assert samples[0].has_data
        assert (1, "GPU disappeared from nvidia-smi's output") in backend.notes()
    finally:
        backend.close()


def test_only_device_lost_with_error_lines_reads_as_empty(fake_smi: FakeSmi) -> None:
    fake_smi.configure(gpus=[smi_gpu(0, lost_after=2)], lost_mode="error")
    backend = SmiBackend()
    backend.open((0,), INTERVAL_S)
    try:
        assert not read_until(backend, lambda samples: not samples[0].has_data)[0].has_data
        assert any("GPU is lost" in text for _, text in backend.notes())
    finally:
        backend.close()


def test_loop_that_exits_leaves_empty_samples_and_a_note(fake_smi: FakeSmi) -> None:
    fake_smi.configure(gpus=[smi_gpu(0)], loop_exit_after=3)
    backend = SmiBackend()
    backend.open((0,), INTERVAL_S)
    try:
        assert not read_until(backend, lambda samples: not samples[0].has_data)[0].has_data
        deadline = time.monotonic() + 10
        while not backend.notes() and time.monotonic() < deadline:
            time.sleep(INTERVAL_S)
        assert (None, "nvidia-smi exited with code 1 while monitoring") in backend.notes()
    finally:
        backend.close()


@pytest.mark.usefixtures("no_gpu_tools")
def test_missing_executable_is_unavailable() -> None:
    with pytest.raises(BackendUnavailable, match="nvidia-smi not found on PATH"):
        SmiBackend().open((0,), INTERVAL_S)


def test_failing_nvidia_smi_is_unavailable_with_its_message(fake_smi: FakeSmi) -> None:
    message = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running."
    )
    fake_smi.configure(fail={"code": 9, "message": message})
    with pytest.raises(BackendUnavailable, match="exited with code 9: NVIDIA-SMI has failed"):
        SmiBackend().open((0,), INTERVAL_S)


def test_missing_device_index_is_named(fake_smi: FakeSmi) -> None:
    with pytest.raises(DeviceNotFound, match="no GPU 7: nvidia-smi lists 0, 1"):
        SmiBackend().open((0, 7), INTERVAL_S)
    assert fake_smi.loop_invocations() == []
