# The two set-up commands of the README: `make demo` and `make test`.
# Both create .venv on first use with the CPU build of torch (a bare `torch` requirement would
# pull a multi-GB CUDA build) and install ncompass in editable mode.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN ?= torch==2.13.0
# the 4.x line of transformers beside the newest one (which pyproject.toml pins): the 4.x
# sections of rewrites/transformers/*.yaml are tested with it on PYTHONPATH
# (tests/rewrites/test_rewrite_specs.py); its own huggingface-hub and tokenizers
TRANSFORMERS_OLD ?= $(VENV)/transformers-4.49
TRANSFORMERS_OLD_PINS ?= transformers==4.49.0 huggingface-hub==0.36.2 tokenizers==0.21.4

.PHONY: setup demo test lint typecheck layers unit browser-test bench bench-check gpu-check clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py $(wildcard ncompass/*/_*.c ncompass/*/_*.h) Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_PIN)"
	$(PY) -m pip install --quiet -e '.[dev,server,remote,kernels]'
	$(PY) -m pip install --quiet --no-deps --upgrade --target $(TRANSFORMERS_OLD) $(TRANSFORMERS_OLD_PINS)
	touch $@

# --force-overwrite: `ncompass run` refuses to replace an existing trace unless told to, and a
# second `make demo` replaces the first one's traces/demo/attn.json.
demo: setup
	$(PY) -m ncompass run --config configs/attn.yaml --output-dir traces/demo --trace-name attn --force-overwrite examples/tiny_transformer.py
	$(PY) -m ncompass summarize traces/demo/attn.json --top 10

lint: setup
	$(PY) -m ruff check ncompass tests benchmarks examples
	$(PY) -m ruff format --check ncompass tests benchmarks examples

typecheck: setup
	$(PY) -m mypy

# the package layering (contracts in pyproject.toml, explained in docs/architecture.md)
layers: setup
	$(VENV)/bin/lint-imports --no-cache --no-logo

unit: setup
	$(PY) -m pytest -n 2 -q -m "not browser"

# the HTML reports in headless Chromium (Debian: apt-get install -y chromium); screenshots in
# traces/screenshots/
browser-test: setup
	$(PY) -m pytest -q -m browser tests/browser

test: lint typecheck layers unit bench-check

bench: setup
	$(PY) benchmarks/run_all.py

# the fast headline benchmarks against benchmarks/baseline.json, within their noise bands
bench-check: setup
	$(PY) benchmarks/bench_check.py

# Every GPU path on this machine's GPU (docs/performance.md, "GPU check"). With a GPU (nvidia-smi
# lists one) it sets up $(GPU_VENV) with the CUDA build of torch from the package index (the
# machine's pip configuration may point at a CPU build: it is bypassed for this one venv); without
# one it reports every check skipped, and why, from the CPU venv.
GPU_VENV ?= .venv-gpu
GPU_PY := $(GPU_VENV)/bin/python

gpu-check:
	@if nvidia-smi -L >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory $(GPU_VENV)/.installed && $(GPU_PY) benchmarks/gpu_check.py; \
	else \
		$(MAKE) --no-print-directory setup && $(PY) benchmarks/gpu_check.py; \
	fi

$(GPU_VENV)/.installed: pyproject.toml setup.py Makefile
	$(PYTHON) -m venv $(GPU_VENV)
	$(GPU_PY) -m pip install --quiet --upgrade pip
	env -u PIP_FIND_LINKS -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
		$(GPU_PY) -m pip install --quiet "$(TORCH_PIN)"
	$(GPU_PY) -m pip install --quiet -e '.[dev,kernels]'
	touch $@

clean:
	rm -rf $(VENV) $(GPU_VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache traces
