# Two entry points: `make reproduce` (main job) and `make test` (whole suite).
# Both create or reuse the virtual environment .venv with the package installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: reproduce test benchmark clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,experiments]"
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/python -m dpgcd_jax.experiments reproduce --quick --out results

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

benchmark: $(STAMP)
	$(BIN)/python benchmarks/bench_solver.py
	$(BIN)/python benchmarks/bench_accounting.py
	$(BIN)/python benchmarks/bench_baselines.py
	$(BIN)/python benchmarks/bench_audit.py
	$(BIN)/python benchmarks/bench_experiments.py

clean:
	rm -rf $(VENV) results .pytest_cache
