from __future__ import annotations

import pytest

from ncompass.traces.events import (
    KernelClass,
    category_of,
    classify_gpu_event,
    correlation_of,
    is_gpu_event,
    is_marker,
    microseconds,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "communication",
        ),
        ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
        ("void ncclKernel_SendRecv(...)", "communication"),
        ("hipExtModuleLaunchKernel", "communication"),  # the contract: every ^hip name
        ("hccl_all_reduce", "communication"),
        ("Memcpy HtoD (Pageable -> Device)", "memory"),
        ("Memset (Device)", "memory"),
        ("hipMemcpyWithStream", "communication"),  # ^hip wins over ^(hip)?Memcpy, as ordered
        ("dma_copy", "memory"),
        ("void at::native::vectorized_elementwise_kernel<4, ...>", "computation"),
        ("sm80_xmma_gemm_f32f32", "computation"),
    ],
)
def test_gpu_events_are_classified_by_name_as_design_says(name: str, expected: str) -> None:
    assert classify_gpu_event(name) == KernelClass(expected)


def test_categories_are_compared_without_case() -> None:
    assert is_gpu_event({"ph": "X", "cat": "Kernel"})
    assert is_gpu_event({"ph": "X", "cat": "GPU_MEMCPY"})
    assert is_gpu_event({"ph": "X", "cat": "gpu_memset"})
    assert not is_gpu_event({"ph": "X", "cat": "gpu_user_annotation"})
    assert not is_gpu_event({"ph": "B", "cat": "kernel"})
    assert is_marker({"ph": "X", "cat": "User_Annotation"})
    assert category_of({"cat": 3}) == ""


def test_timestamps_of_any_json_type_read_as_microseconds() -> None:
    assert microseconds(5) == 5.0
    assert microseconds(5.25) == 5.25
    assert microseconds("7.5") == 7.5
    assert microseconds("soon") == 0.0
    assert microseconds(None) == 0.0


def test_correlation_is_read_from_args() -> None:
    assert correlation_of({"args": {"correlation": 12}}) == 12
    assert correlation_of({"args": {"correlation": "12"}}) == 12
    assert correlation_of({"args": {"correlation": True}}) is None
    assert correlation_of({"args": {}}) is None
    assert correlation_of({}) is None
