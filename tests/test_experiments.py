"""The experiment runner: grids equal direct solver calls, relative errors, outputs, CLI."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpgcd_jax import datasets
from dpgcd_jax.experiments import __main__ as cli
from dpgcd_jax.experiments import runner

TINY = runner.Preset(passes=(2,), clips=(0.3, 1.0), seeds=2, datasets=("diabetes",))


@pytest.fixture(scope="module")
def prepared():
  return runner.build(datasets.get("diabetes"))


def test_relative_error_is_zero_at_the_optimum_and_one_at_the_origin(prepared):
  solution = runner.reference.solve(prepared.exact, tol=1e-12)
  np.testing.assert_allclose(runner.relative_error(prepared, solution.w), 0.0, atol=1e-9)
  np.testing.assert_allclose(runner.relative_error(prepared, jnp.zeros(prepared.exact.num_features)), 1.0,
                             rtol=1e-12)


@pytest.mark.parametrize("name", list(runner.ALGORITHMS))
def test_best_grid_point_equals_a_direct_solver_call_with_the_same_key(prepared, name):
  algorithm, problem = runner.ALGORITHMS[name], prepared.private
  noise = algorithm.calibrate(problem, 1.0 / problem.num_examples**2, 2)
  params, points = runner.grid_params(algorithm, problem, TINY, noise)
  keys = runner.seed_keys(TINY.seeds)
  w = runner.sweep(algorithm, problem, params, keys, 2)
  errors = runner.relative_error(prepared, w)
  best = int(np.argmin(errors.mean(axis=1)))
  for seed in range(TINY.seeds):
    single = algorithm.run(problem, jax.tree.map(lambda x: x[best], params), keys[seed], 2).w
    np.testing.assert_allclose(w[best, seed], single, rtol=1e-5, atol=1e-6)
  assert len(points) == errors.shape[0] == len(algorithm.step_sizes) * len(TINY.clips)


def test_run_experiment_records_every_run_and_the_best_points():
  preset = dataclasses.replace(TINY, passes=(1, 2))
  results = runner.run_experiment(preset, algorithms=("dp_gcd", "dp_cd"), progress=False)
  grid = {"dp_gcd": len(runner.ALGORITHMS["dp_gcd"].step_sizes), "dp_cd": len(runner.ALGORITHMS["dp_cd"].step_sizes)}
  assert len(results["runs"]) == sum(2 * g * len(TINY.clips) * TINY.seeds for g in grid.values())
  assert len(results["best"]) == 4
  for best in results["best"]:
    runs = [r["relative_error"] for r in results["runs"]
            if (r["algorithm"], r["passes"], r["step_size"], r["clip"]) ==
            (best["algorithm"], best["passes"], best["step_size"], best["clip"])]
    assert np.isclose(np.mean(runs), best["mean"])
    others = {}
    for r in results["runs"]:
      if (r["algorithm"], r["passes"]) == (best["algorithm"], best["passes"]):
        others.setdefault((r["step_size"], r["clip"]), []).append(r["relative_error"])
    assert best["mean"] <= min(np.mean(v) for v in others.values()) + 1e-12
  assert results["datasets"]["diabetes"]["solution_nnz"] > 0
  assert results["versions"]["jax"] == jax.__version__


def test_unknown_dataset_is_rejected():
  with pytest.raises(ValueError, match="datasets"):
    runner.run_experiment(TINY, datasets=("mnist",), progress=False)


def test_command_line_writes_the_figure_table_and_records(tmp_path):
  assert cli.main(["reproduce", "--quick", "--datasets", "diabetes", "--algorithms", "dp_gcd",
                   "dp_sgd", "--passes", "1", "2", "--seeds", "2", "--out", str(tmp_path)]) == 0
  table = (tmp_path / "table.md").read_text()
  assert "diabetes" in table and "DP-SGD" in table
  assert (tmp_path / "figure.png").stat().st_size > 10_000
  summary = json.loads((tmp_path / "summary.json").read_text())
  assert summary["preset"]["passes"] == [1, 2] and summary["seconds"] > 0
  assert len((tmp_path / "runs.csv").read_text().splitlines()) > 10
