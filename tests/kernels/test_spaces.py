"""Search spaces and their pruning by shape, configs, problems' shape buckets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.spaces import (
    CONV2D_SPACE,
    GEMM_SPACE,
    NORM_SPACE,
    SPACES,
    attention_candidates,
    conv2d_candidates,
    gemm_candidates,
    norm_candidates,
)
from ncompass.kernels.problems import (
    AttentionProblem,
    Conv2dProblem,
    GemmProblem,
    NormProblem,
    next_power_of_2,
)


def test_large_problems_keep_the_whole_space_on_a_gpu() -> None:
    problem = GemmProblem(4096, 4096, 4096, "float16")
    assert gemm_candidates(problem, interpreted=False) == list(GEMM_SPACE)


def test_blocks_are_clamped_to_the_problem_and_duplicates_merge() -> None:
    candidates = gemm_candidates(GemmProblem(20, 4096, 24, "float32"), interpreted=False)
    assert all(c["BLOCK_M"] == 32 and c["BLOCK_K"] == 32 for c in candidates if c["BLOCK_M"] >= 32)
    assert max(c["BLOCK_M"] for c in candidates) == 32
    assert len(set(candidates)) == len(candidates) < len(GEMM_SPACE)
    # one row of tiles: grouping changes nothing
    assert {c["GROUP_M"] for c in candidates} == {1}


def test_blocks_never_go_below_the_dot_minimum() -> None:
    candidates = gemm_candidates(GemmProblem(1, 1, 1, "float32"), interpreted=False)
    assert {(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]) for c in candidates} == {(16, 16, 16)}


def test_shared_memory_prunes_configs_that_do_not_fit() -> None:
    problem = GemmProblem(4096, 4096, 4096, "float32")
    candidates = gemm_candidates(problem, interpreted=False, shared_memory=64 * 1024)
    assert candidates and len(candidates) < len(GEMM_SPACE)
    for c in candidates:
        assert c["BLOCK_K"] * (c["BLOCK_M"] + c["BLOCK_N"]) * 4 * c.num_stages <= 64 * 1024
    # nothing fits: the smallest config still runs (and the tuner skips it if it fails)
    assert len(gemm_candidates(problem, interpreted=False, shared_memory=1)) == 1


def test_interpreter_keeps_one_config_per_tile_shape() -> None:
    problem = GemmProblem(4096, 4096, 4096, "float16")
    on_gpu = gemm_candidates(problem, interpreted=False)
    interpreted = gemm_candidates(problem, interpreted=True)
    assert len({c.meta for c in interpreted}) == len(interpreted) == len({c.meta for c in on_gpu})


def test_conv2d_prunes_on_its_implicit_gemm() -> None:
    problem = Conv2dProblem(1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, "float32")
    assert problem.gemm() == GemmProblem(64, 4, 27, "float32")
    candidates = conv2d_candidates(problem, interpreted=False)
    assert max(c["BLOCK_N"] for c in candidates) == 16 and len(candidates) < len(CONV2D_SPACE)


def test_norm_rows_per_program_fit_the_register_tile() -> None:
    wide = norm_candidates(
        NormProblem(4096, 8192, "float16", rms=True, eps=1e-6), interpreted=False
    )
    assert max(c["BLOCK_M"] for c in wide) * 8192 <= 32768
    few = norm_candidates(NormProblem(3, 64, "float32", rms=False, eps=1e-5), interpreted=True)
    assert max(c["BLOCK_M"] for c in few) == 4 and len(few) < len(NORM_SPACE)


def test_buckets_round_sizes_up_to_powers_of_two() -> None:
    assert [next_power_of_2(n) for n in (0, 1, 2, 3, 64, 65)] == [1, 1, 2, 4, 64, 128]
    assert GemmProblem(40, 384, 128, "float16").bucket() == "m64-n512-k128"
    assert Conv2dProblem(32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, "float16").bucket() == "m131072-n64-k1024-r3x3-s1x1"  # fmt: skip
    assert NormProblem(80, 128, "float32", rms=False, eps=1e-5).bucket() == "ln-rows128-cols128"


def test_configs_round_trip_through_json() -> None:
    config = KernelConfig.of(BLOCK_M=64, BLOCK_N=32, num_warps=8, num_stages=2)
    assert KernelConfig.from_json(config.to_json()) == config
    assert config.describe() == "BLOCK_M=64 BLOCK_N=32 warps=8 stages=2"
    with pytest.raises(ValueError, match="integers"):
        KernelConfig.from_json({"BLOCK_M": 6.5, "num_warps": 4, "num_stages": 3})
    with pytest.raises(ValueError, match="lacks 'num_stages'"):
        KernelConfig.from_json({"BLOCK_M": 64, "num_warps": 4})


def test_attention_blocks_are_clamped_to_the_sequence_lengths() -> None:
    decode = AttentionProblem(1, 32, 1, 4096, 128, "float16", causal=False, scale=0.1)
    configs = attention_candidates(decode, interpreted=False)
    assert {config["BLOCK_M"] for config in configs} == {16}  # one query: the smallest dot tile
    assert max(config["BLOCK_N"] for config in configs) == 128
    small = replace(decode, kv_len=20)
    assert max(config["BLOCK_N"] for config in attention_candidates(small, False)) == 32
    # a 64 KiB device keeps only what fits: query tile plus pipelined key and value tiles
    prefill = AttentionProblem(1, 32, 2048, 2048, 128, "float16", causal=True, scale=0.1)
    for config in attention_candidates(prefill, False, shared_memory=65536):
        assert 128 * (config["BLOCK_M"] + 2 * config["BLOCK_N"] * config.num_stages) * 2 <= 65536


@pytest.mark.parametrize("interpreted", [False, True])
def test_every_pruned_candidate_is_inside_its_space(interpreted: bool) -> None:
    sizes = (1, 3, 17, 100, 5000)
    for m in sizes:
        for n in sizes:
            gemm = GemmProblem(m, n, 7 * n, "float16")
            for memory in (None, 49152, 8192):
                for config in gemm_candidates(gemm, interpreted, memory):
                    assert SPACES["gemm"].outside(config) is None, config
                attention = AttentionProblem(1, 2, m, n, 64, "float32", False, 1.0)
                for config in attention_candidates(attention, interpreted, memory):
                    assert SPACES["attention"].outside(config) is None, config
            conv = Conv2dProblem(1, 3, m % 60 + 3, n % 60 + 3, n % 70 + 1, 3, 3, 1, 1, 1, 1, "float32")  # fmt: skip
            for config in conv2d_candidates(conv, interpreted, 49152):
                assert SPACES["conv2d"].outside(config) is None, config
            for config in norm_candidates(NormProblem(m, n * 13, "float32", False, 1e-5), interpreted):  # fmt: skip
                assert SPACES["norm"].outside(config) is None, config


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        (
            KernelConfig.of(BLOCK_M=65, BLOCK_N=16, BLOCK_K=16, GROUP_M=1),
            "BLOCK_M=65 is not one of 16, 32, 64, 128",
        ),
        (  # a power of two below tl.dot's minimum
            KernelConfig.of(BLOCK_M=16, BLOCK_N=8, BLOCK_K=16, GROUP_M=1),
            "BLOCK_N=8 is not one of 16, 32, 64, 128, 256",
        ),
        (
            KernelConfig.of(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16),
            "parameters BLOCK_K, BLOCK_M, BLOCK_N instead of BLOCK_K, BLOCK_M, BLOCK_N, GROUP_M",
        ),
        (
            KernelConfig.of(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1, num_warps=3),
            "num_warps=3 is not one of 2, 4, 8",
        ),
    ],
)
def test_a_config_no_pruning_gives_is_outside_the_space(config: KernelConfig, reason: str) -> None:
    assert SPACES["gemm"].outside(config) == reason
