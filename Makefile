# Entry points: `make reproduce` (main job), `make test` (the suite less its slow statistical tier, under 10 minutes
# on 2 cores), `make test-slow` (that tier), `make lint` (ruff, mypy and the package's layout rules). CI runs all three.
# Each creates or reuses the virtual environment .venv with the package installed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: reproduce test test-slow lint benchmark clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,experiments]"
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/python -m dpgcd_jax.experiments reproduce --quick --out results

# --max-worker-restart=0: a crashed worker fails the run at once (xdist 3.8's loadfile scheduler
# hangs after replacing one, until CI's time limit).
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadfile --max-worker-restart=0

test: $(STAMP)
	$(PYTEST) -m "not slow"

# The statistical tier (audits, distribution and secure-mode sweeps, notebooks, the docs' examples): CI runs it.
test-slow: $(STAMP)
	$(PYTEST) -m slow

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q tests/properties/test_package_text.py tests/privacy/test_mechanism_layer.py \
	  tests/properties/test_imports.py


benchmark: $(STAMP)
	$(BIN)/python benchmarks/bench_solver.py
	$(BIN)/python benchmarks/bench_accounting.py
	$(BIN)/python benchmarks/bench_baselines.py
	$(BIN)/python benchmarks/bench_audit.py
	$(BIN)/python benchmarks/bench_experiments.py
	$(BIN)/python benchmarks/bench_warnings.py

clean:
	rm -rf $(VENV) results .pytest_cache
