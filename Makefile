# rooflaw: two commands for a fresh machine.
#   make demo   -- create .venv, install rooflaw, solve for the best architecture on a Jetson AGX Orin
#   make test   -- create .venv, install rooflaw with its test extras, run the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test install lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# The CPU build of torch 2.13.0 first (a plain `torch` requirement would pull a multi-GB CUDA build).
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,torch]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/rooflaw solve --device jetson-agx-orin-64gb --latency-budget 20ms --phase decode --explain

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
