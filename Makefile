# Entry points: `make reproduce` (main job), `make test` (whole suite), `make lint` (ruff and mypy, run by CI).
# Each creates or reuses the virtual environment .venv with the package installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: reproduce test lint benchmark clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,experiments]"
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/python -m dpgcd_jax.experiments reproduce --quick --out results

# --max-worker-restart=0: a crashed worker fails the run at once (xdist 3.8's loadfile scheduler
# hangs after replacing one, until CI's time limit).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --max-worker-restart=0

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy


benchmark: $(STAMP)
	$(BIN)/python benchmarks/bench_solver.py
	$(BIN)/python benchmarks/bench_accounting.py
	$(BIN)/python benchmarks/bench_baselines.py
	$(BIN)/python benchmarks/bench_audit.py
	$(BIN)/python benchmarks/bench_experiments.py
	$(BIN)/python benchmarks/bench_warnings.py

clean:
	rm -rf $(VENV) results .pytest_cache
