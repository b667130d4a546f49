# streamcell developer commands. Every target creates/updates .venv as needed.
VENV ?= .venv
PYTHON ?= python3
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP := $(BIN)/python -m pip -q
PYTEST_ARGS ?=

.PHONY: venv build test test-quick demo lab lint format clean sanitize bench-structures bench-sketch

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.deps-stamp: pyproject.toml | $(BIN)/python
	$(PIP) install --upgrade pip 2>&1 | grep -v "is ignored" || true
	$(PIP) install hatchling editables "cython>=3" "setuptools>=65" 2>&1 | grep -v "is ignored" || true
	$(PIP) install --no-build-isolation -e '.[dev]' 2>&1 | grep -v "is ignored" || true
	$(BIN)/python -c "import streamcell, polars, pytest"
	touch $@

venv: $(VENV)/.deps-stamp

## build: compile the native extension in place (incremental)
build: venv
	$(BIN)/python hatch_build.py

## test: the whole suite (what CI runs)
test: build
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## test-quick: everything except the slow tier
test-quick: build
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

## demo: the flagship clickstream pipeline, headless, with a live progress line
demo: build
	$(BIN)/python -m streamcell.demo

## lab: JupyterLab on examples/
lab: build
	$(BIN)/jupyter lab --notebook-dir=examples $(LAB_ARGS)

## sanitize: every native C test in debug, ASan+UBSan and TSan modes
sanitize:
	$(MAKE) -B -C native/tests debug asan tsan

## bench-sketch: sketch ingest/query throughput vs DataSketches and Polars (same run)
bench-sketch: build
	$(BIN)/python bench/bench_sketch_theta.py
	$(BIN)/python bench/bench_sketch_kll.py

## bench-structures: reorder-buffer and keyed-queue ablation micro-benchmark (C)
bench-structures:
	mkdir -p native/build
	$(CC) -O2 -pthread -Inative -Inative/common bench/bench_runtime_structures.c -o native/build/bench_rs -lm
	native/build/bench_rs

lint: venv
	$(BIN)/ruff check kernel widgets tests examples hatch_build.py
	$(BIN)/ruff format --check kernel widgets tests examples hatch_build.py
	$(BIN)/mypy

format: venv
	$(BIN)/ruff format kernel widgets tests examples hatch_build.py
	$(BIN)/ruff check --fix kernel widgets tests examples hatch_build.py

clean:
	rm -rf native/build build dist kernel/streamcell/*.so native/_*.c
