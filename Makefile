# rooflaw: two commands for a fresh machine.
#   make demo   -- create .venv, install rooflaw alone (no torch, no test tools), solve for the best architecture
#                  on a Jetson Orin Nano 8GB at 20 ms per output token, a 2k prompt and 4 GB
#   make test   -- the same .venv plus the CPU build of torch 2.13.0 and the test extras, then the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test install install-test lint typecheck

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# What the demo and the CLI need: rooflaw and its runtime dependencies only.
$(VENV)/.base: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

# The tests also count FLOPs of real torch modules: the CPU build of torch 2.13.0 first (a plain `torch`
# requirement would pull a multi-GB CUDA build on a normal machine), from PyTorch's CPU wheel index; where that
# index cannot be reached (a machine that sees only PyPI) the plain requirement, which there finds the staged CPU
# wheel. The short timeout and no retries keep an unreachable index from slowing set-up (docs/benchmarks.md).
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
$(VENV)/.test: $(VENV)/.base
	$(BIN)/pip install -q --timeout 10 --retries 0 --index-url $(TORCH_CPU_INDEX) torch==2.13.0 \
	  || $(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,torch]"
	touch $@

install: $(VENV)/.base

install-test: $(VENV)/.test

demo: install
	$(BIN)/rooflaw solve --device jetson-orin-nano-8gb --tpot-budget 20ms --input-tokens 2048 --memory-budget 4GB --explain

# pytest-xdist: one worker per core, each test module whole on one worker, costliest modules first (tests/conftest.py).
PYTEST_ARGS ?= -n auto --dist loadfile --no-loadscope-reorder

test: install-test
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# mypy's settings (python 3.10, the untyped third-party packages) are in pyproject.toml's [tool.mypy].
typecheck: install-test
	$(BIN)/python -m mypy rooflaw

lint: install-test typecheck
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
