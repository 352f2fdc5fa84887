"""Version 0 (the seed SDK's dict shape) converts to version 1 everywhere a spec is accepted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncompass.errors import SpecError
from ncompass.spec.models import RewriteConfig

SEED = {
    "targets": {
        "my_module.attention": {
            "class_func_context_wrappings": {
                "Attention": {
                    "forward": {
                        "context_class": "ncompass.trace.profile.torch.TorchRecordContext",
                        "context_values": ["attention.forward"],
                    },
                    "backward": {
                        "wrap_calls": [
                            {
                                "call_pattern": "matmul",
                                "context_class": "profiler.NVTXContext",
                                "context_values": [
                                    {"name": "name", "value": "bwd.matmul", "type": "literal"}
                                ],
                            }
                        ]
                    },
                }
            },
            "func_line_range_wrappings": [
                {
                    "function": "forward",
                    "start_line": 12,
                    "end_line": 15,
                    "context_class": "ncompass.trace.profile.nvtx.NvtxContext",
                    "context_values": [
                        {"name": "name", "value": "layer_idx", "type": "variable"},
                        {"name": "color", "value": "red", "type": "literal"},
                    ],
                }
            ],
            "class_replacements": {"Attention": "fast.attention.FastAttention"},
            "class_func_replacements": {"Attention": {"forward": "fast.kernels.Impl.forward"}},
        }
    },
    "ai_analysis_targets": ["my_module.attention"],
    "full_trace_mode": True,
}


def test_seed_constructor_accepts_version_0() -> None:
    config = RewriteConfig(targets=SEED["targets"], ai_analysis_targets=["x"], full_trace_mode=True)  # type: ignore[arg-type]
    (target,) = config.targets
    assert target.module == "my_module.attention"
    function = target.functions[0]
    assert (function.qualname, function.name, function.context) == (
        "Attention.forward",
        "attention.forward",
        "torch",
    )
    call = target.calls[0]
    assert (call.in_, call.call, call.name, call.context) == (
        "Attention.backward",
        "matmul",
        "bwd.matmul",
        "profiler:NVTXContext",
    )
    line_range = target.ranges[0]
    assert line_range.lines == (12, 15) and line_range.in_ == "forward"
    assert line_range.name == "{layer_idx}" and line_range.context == "nvtx"
    assert line_range.values == {"color": "red"}
    assert [(r.name, r.with_) for r in target.replace] == [
        ("Attention", "fast.attention:FastAttention"),
        ("Attention.forward", "fast.kernels:Impl.forward"),
    ]
    assert config.ai_analysis_targets == ["x"] and config.full_trace_mode


def test_from_dict_and_files_accept_version_0(tmp_path: Path) -> None:
    assert RewriteConfig.from_dict(SEED).full_trace_mode
    path = tmp_path / "old.json"
    path.write_text(json.dumps(SEED))
    config = RewriteConfig.from_yaml(path)
    assert config.ai_analysis_targets == ["my_module.attention"]
    assert config.to_dict()["version"] == 1


def test_file_path_of_main_becomes_a_file_target() -> None:
    config = RewriteConfig.from_dict(
        {"targets": {"__main__": {"filePath": "/abs/train.py", "func_line_range_wrappings": []}}}
    )
    assert config.targets[0].file == "/abs/train.py"


V0_FILE = """{
  "targets": {
    "my_module.attention": {
      "class_func_context_wrappings": {
        "Attention": {
          "forward": {"context_class": "ncompass.trace.profile.torch.TorchRecordContext"},
          "backward": {"wrap_calls": [{"call_pattern": "matmul"}]}
        }
      },
      "func_line_range_wrappings": [
        {"function": "forward", "start_line": 12, "end_line": 15}
      ]
    }
  }
}
"""


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ('"function": "forward", ', "", 11, "missing required key 'function'"),
        ('"call_pattern"', '"pattern"', 7, r"a call has unknown keys \['pattern'\]"),
        ('"context_class"', '"context_clas"', 6, r"unknown keys \['context_clas'\]"),
        ('"end_line": 15', '"end_line": 10', 11, r"1 <= start <= end, got \[12, 10\]"),
        ('"start_line": 12', '"start_line": "x"', 11, "lines"),
        ('[{"call_pattern": "matmul"}]', '"matmul"', 7, "'wrap_calls' must be a list"),
        ('"Attention": {', '"Attention": ["forward"], "B": {', 5, "expected a mapping"),
    ],
)
def test_version_0_errors_name_the_line_of_the_entry(
    tmp_path: Path, old: str, new: str, line: int, message: str
) -> None:
    assert old in V0_FILE
    path = tmp_path / "old.json"
    path.write_text(V0_FILE.replace(old, new))
    with pytest.raises(SpecError, match=rf"old.json:{line}: .*{message}"):
        RewriteConfig.from_yaml(path)


def test_version_0_markers_keep_their_lines_for_later_errors(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(V0_FILE)
    target = RewriteConfig.from_yaml(path).targets[0]
    assert [m.line for m in target.functions] == [6]
    assert [m.line for m in target.calls] == [7]
    assert [m.line for m in target.ranges] == [11]


def test_dict_errors_name_the_version_0_location() -> None:
    broken = {"targets": {"m": {"func_line_range_wrappings": [{"start_line": 1, "end_line": 2}]}}}
    with pytest.raises(SpecError, match=r"targets\.m\.func_line_range_wrappings\.0: missing"):
        RewriteConfig.from_dict(broken)


def test_ranges_keyed_by_function_and_literal_names_with_braces() -> None:
    literal = {"name": "name", "value": "cache{hit}", "type": "literal"}
    config = RewriteConfig.from_dict(
        {
            "targets": {
                "m": {
                    "func_line_range_wrappings": {
                        "f": {"start_line": 2, "end_line": 3},
                        "g": [{"start_line": 5, "end_line": 5, "context_values": [literal]}],
                    }
                }
            }
        }
    )
    ranges = config.targets[0].ranges
    assert [(r.in_, r.lines) for r in ranges] == [("f", (2, 3)), ("g", (5, 5))]
    assert ranges[1].name == "cache{{hit}}"  # shown as written, not evaluated
