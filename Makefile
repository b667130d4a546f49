# streamcell developer commands. Every target creates/updates .venv as needed.
VENV ?= .venv
PYTHON ?= python3
BIN := $(abspath $(VENV))/bin
export PATH := $(BIN):$(PATH)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
PIP := $(BIN)/python -m pip -q
PYTEST_ARGS ?=
EXT_OUT := kernel/streamcell/labextension
EXT_SRC := package.json tsconfig.json $(wildcard ext/src/*.ts ext/style/*.css ext/schema/*.json)
EXT_LINK := $(VENV)/share/jupyter/labextensions/streamcell

.PHONY: venv build node_modules ext dist test test-quick test-long test-spark-cluster demo lab lint format clean sanitize bench bench-expr bench-memory bench-structures bench-sketch bench-scaling bench-dashboard bench-entities bench-speculate bench-spark bench-spark-memory bench-dag

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# the build tools (pyproject's [build-system] requires, plus build, twine and editables); jlpm
# comes with JupyterLab
$(VENV)/.tools-stamp: | $(BIN)/python
	$(PIP) install --upgrade pip 2>&1 | grep -v "is ignored" || true
	$(PIP) install "hatchling>=1.27" editables wheel "build>=1.2" "twine>=5" "cython>=3.0,<4" "setuptools>=65" "hatch-jupyter-builder>=0.9" "jupyterlab>=4.6,<5" 2>&1 | grep -v "is ignored" || true
	touch $@

$(VENV)/.deps-stamp: pyproject.toml $(VENV)/.tools-stamp
	test ! -L $(EXT_LINK) || rm $(EXT_LINK)  # else pip would reinstall into the link's target
	SKIP_JUPYTER_BUILDER=1 $(PIP) install --no-build-isolation -e '.[dev]' 2>&1 | grep -v "is ignored" || true
	$(BIN)/python -c "import streamcell, polars, pytest"
	touch $@

venv: $(VENV)/.deps-stamp

## build: compile the native extension in place (incremental)
build: venv
	$(BIN)/python hatch_build.py

## node_modules: the extension's Node dependencies, from yarn.lock (jlpm ships with JupyterLab)
node_modules: node_modules/.install-stamp

node_modules/.install-stamp: package.json yarn.lock | $(VENV)/.tools-stamp
	$(BIN)/jlpm install
	touch $@

## ext: build the JupyterLab extension (dev build) and link it into the venv's JupyterLab
# (the editable install copies the labextension as it was; the link follows every rebuild)
ext: $(EXT_OUT)/static/style.js
	test -L $(EXT_LINK) || $(BIN)/jupyter-builder develop --overwrite .

$(EXT_OUT)/static/style.js: node_modules/.install-stamp $(EXT_SRC)
	$(BIN)/jlpm build
	touch $@

## dist: sdist + wheel in dist/ for a release, checked: always the production labextension (a
## development build left by `make ext` is replaced), then `python -m build` (the sdist, then the
## wheel from the sdist, stripped), twine check (what PyPI will render), tools/check_dist.py on
## both (contents, metadata, stripped .so), and each installed into a fresh venv running
## tests/smoke/wheel_smoke.py. The wheel's tag is this machine's (linux_x86_64): release wheels
## come from cibuildwheel (README, Releasing).
dist: node_modules
	rm -rf dist
	$(BIN)/jlpm build:prod
	$(BIN)/python -m build --outdir dist .
	$(BIN)/python -m twine check --strict dist/*
	$(BIN)/python tools/check_dist.py dist --install

## test: the whole suite (what CI runs): jest, then pytest with the browser tests (tests/ui)
test: build ext
	$(BIN)/jlpm test
	$(BIN)/python -m pytest -m "not long" $(PYTEST_ARGS)

## test-long: the tests that take minutes each: every dependency at its declared floor in a fresh
## venv, a Spark streaming driver killed with kill -9 and restarted on its checkpoint, and the
## %%stream language fuzzed with 12,000 cells
test-long: build
	$(BIN)/python -m pytest -m long $(PYTEST_ARGS)

## test-quick: everything except the slow tier
test-quick: build
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

## test-spark-cluster: the Spark tier (-m spark: the shared suite's Spark configuration and
## tests/spark) on a real standalone cluster: a master and two 1-core workers, separate JVMs on
## 127.0.0.1, started and stopped by the spark_cluster fixture (tests/conftest.py)
test-spark-cluster: build
	STREAMCELL_TEST_SPARK_CLUSTER=1 $(BIN)/python -m pytest -m spark $(PYTEST_ARGS)

## demo: the flagship clickstream pipeline, headless, with a live progress line
demo: build
	$(BIN)/python -m streamcell.demo

## lab: JupyterLab on examples/
lab: build ext
	$(BIN)/jupyter lab --notebook-dir=examples $(LAB_ARGS)

## sanitize: every native C test in debug, ASan+UBSan and TSan modes
sanitize:
	$(MAKE) -j$$(nproc) -B -C native/tests debug asan tsan

## bench: native runtime figures (issue 3) as ratios against baselines measured in the same run
bench: build
	$(BIN)/python bench/bench_runtime.py $(BENCH_ARGS)

## bench-memory: RSS over 10^9 generated rows (stateless chain and keyed aggregation); long
bench-memory: build
	$(BIN)/python bench/bench_runtime.py --memory-rows $${ROWS:-1000000000}

## bench-sketch: sketch ingest/query throughput vs DataSketches and Polars (same run); concurrent Θ
## vs a lock per update and its accuracy against the 2Nb relaxation bound (C, Rinberg et al.)
bench-sketch: build
	mkdir -p native/build
	$(CC) -O2 -pthread -Inative -Inative/common bench/bench_sketch_concurrent.c native/sketch/theta.c native/sketch/murmur3.c native/sketch/concurrent.c -o native/build/bench_sc -lm
	native/build/bench_sc
	$(BIN)/python bench/bench_sketch_theta.py
	$(BIN)/python bench/bench_sketch_kll.py
	$(BIN)/python bench/bench_sketch_stage.py

## bench-scaling: 1, 2, 4, 8, 16 workers (capped at the cores): concurrent Θ vs a lock per update vs
## private sketches merged at the end (C), then the runtime's figures 1, 3, 9 beside Polars at the
## same thread count (POLARS_MAX_THREADS); long on a big machine (SKETCH_ROWS, BENCH_ARGS)
bench-scaling: build
	mkdir -p native/build
	$(CC) -O2 -pthread -Inative -Inative/common bench/bench_sketch_concurrent.c native/sketch/theta.c native/sketch/murmur3.c native/sketch/concurrent.c -o native/build/bench_sc -lm
	native/build/bench_sc scaling $${SKETCH_ROWS:-20000000} 5
	$(BIN)/python bench/bench_scaling.py $(BENCH_ARGS)

## bench-entities: transfers with per-event work, ticket ordering vs one global lock vs sequential, 1 and 2 workers
bench-entities: build
	mkdir -p native/build
	$(CC) -O2 -pthread -Inative -Inative/common bench/bench_entities_work.c native/exec/ops_state.c native/exec/keyhash.c native/exec/rowstore.c native/exec/common.c native/runtime/batch.c native/runtime/ring.c native/exec/lists.c -o native/build/bench_ent -lm
	$(BIN)/python bench/bench_entities.py $(BENCH_ARGS)

## bench-speculate: speculate stage at 1 and 2 workers vs a plain sequential stage, 0/10/20% conflicts, 1/10/100 µs tasks
bench-speculate: build
	$(BIN)/python bench/bench_speculate.py $(BENCH_ARGS)

## bench-dag: a 10-vertex DAG over two sources, 1 vs 2 workers, executions skipped by Δ-propagation
bench-dag: build
	$(BIN)/python bench/bench_dag.py $(BENCH_ARGS)

## bench-dashboard: ingestion with vs without a live dashboard attached (same run; >= 0.97)
bench-dashboard: build
	$(BIN)/python bench/bench_dashboard.py $(BENCH_ARGS)

## bench-spark: engine="spark" vs the same queries hand-written in PySpark vs native, on the same
## Parquet input, same session, same run: filter+map, keyed agg, tumbling, sessions, TPCx-BB
## Q1-Q4, Q15; ratio and driver RSS growth against the targets (BENCH_ARGS="--rows 10000000")
bench-spark: build
	$(BIN)/python bench/bench_spark.py $(BENCH_ARGS)

## bench-spark-memory: the notebook process's peak RSS growth during finite Spark runs at 10M and
## 50M rows with spark.driver.memory=1g, against hand-written PySpark (issue 19; takes minutes)
bench-spark-memory: build
	$(BIN)/python bench/bench_spark_driver_memory.py --rows 10000000,50000000 --agg $(BENCH_ARGS)

## bench-expr: the expression kernel (filter + with_columns) in C, CPU ns per row vs a plain C loop
bench-expr:
	$(MAKE) -C native/tests bench-expr

## bench-structures: reorder-buffer and keyed-queue ablation micro-benchmark (C)
bench-structures:
	mkdir -p native/build
	$(CC) -O2 -pthread -Inative -Inative/common bench/bench_runtime_structures.c -o native/build/bench_rs -lm
	native/build/bench_rs $(BENCH_ARGS)

lint: venv node_modules
	$(BIN)/ruff check kernel widgets tests examples tools hatch_build.py
	$(BIN)/ruff format --check kernel widgets tests examples tools hatch_build.py
	$(BIN)/mypy
	$(BIN)/jlpm lint:check

format: venv node_modules
	$(BIN)/ruff format kernel widgets tests examples tools hatch_build.py
	$(BIN)/ruff check --fix kernel widgets tests examples tools hatch_build.py
	$(BIN)/jlpm lint

clean:
	rm -rf native/build build dist kernel/streamcell/*.so native/_*.c
	rm -rf lib tsconfig.tsbuildinfo $(EXT_OUT)
