"""`dpgcd_jax.experiments.algorithms`: the toolbox's algorithms in the experiments: DP-FW, DP-IHT and two-stage through
the sweeps; every algorithm's calibration is the generic fit's."""

import jax
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import data
from dpgcd_jax import penalties
from dpgcd_jax.experiments import algorithms
from dpgcd_jax.experiments import runner
from dpgcd_jax.experiments import sweeps
from dpgcd_jax.solvers import dp_fw
from dpgcd_jax.solvers import dp_iht
from dpgcd_jax.solvers import two_stage

NEW = ("dp_fw", "dp_iht", "two_stage")
PASSES = 3


@pytest.fixture(scope="module")
def prepared():
  with jax.enable_x64(True):
    return runner.build(data.get("diabetes"))  # 442 x 10, squared loss + l1


def _zero(noise):
  return jax.tree.map(lambda x: 0.0 * x, noise)


def _own_run(name, problem, key, params, passes):
  """The solver module's own ``run`` (not the Algorithm's hook), with the options the experiments use."""
  if name == "dp_fw":
    return dp_fw.run(algorithms.fw_problem(problem), key, params, passes=passes)
  s = algorithms.toolbox_sparsity(problem)
  if name == "dp_iht":
    return dp_iht.run(problem, key, params, passes=passes, sparsity=s)
  selection, update = algorithms.TWO_STAGE_MECHANISMS
  return two_stage.run(problem, key, params, passes=passes, sparsity=s, selection=selection, update=update)


@pytest.mark.parametrize("name", NEW)
def test_calibration_meets_epsilon_one_on_the_solvers_own_ledger(prepared, name):
  algorithm, problem = runner.ALGORITHMS[name], prepared.private
  delta = 1.0 / problem.num_examples**2
  for passes in (2, 20):
    noise = algorithm.calibrate(problem, delta, passes)
    eps = algorithm.ledger(problem, noise, passes).epsilon(delta)
    assert 0.97 <= eps <= 1.0 + 1e-9
  # More passes, more noise (two-stage's one peeling keeps its zCDP share, hence about its multiplier).
  n2, n20 = (np.asarray(algorithm.calibrate(problem, delta, t)) for t in (2, 20))
  assert np.all(n20 >= n2 * (1 - 1e-3)) and n20.ravel()[-1] > 2 * n2.ravel()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("name", NEW)
def test_sweeps_equal_the_solvers_own_run_noise_free_and_noisy(prepared, name):
  algorithm, problem = runner.ALGORITHMS[name], prepared.private
  noise = algorithm.calibrate(problem, 1.0 / problem.num_examples**2, PASSES)
  pts = [(algorithm.step_sizes.values[2], 0.3), (algorithm.step_sizes.values[3], 1.0)]
  keys = runner.seed_keys(2)
  for n in (_zero(noise), noise):
    w = runner.sweep(algorithm, problem, pts, n, keys, PASSES, chunk=3)
    assert w.shape == (2, 2, problem.num_features) and np.all(np.isfinite(w))
    params = sweeps.grid_params(algorithm, problem, pts, n)
    for i in range(2):
      one = jax.tree.map(lambda x, i=i: x[i], params)
      for s in range(2):
        np.testing.assert_allclose(w[i, s], _own_run(name, problem, keys[s], one, PASSES).w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w[i, s], algorithm.run(problem, keys[s], one, PASSES).w, rtol=1e-5, atol=1e-6)
  fresh = runner.seed_keys(3, stream=1)  # the confirmation runs: one key per point
  w_ind = runner.independent(algorithm, problem, pts + pts[:1], noise, fresh, PASSES, chunk=3, seeds=2)
  for i, point in enumerate((0, 1, 0)):
    one = jax.tree.map(lambda x, point=point: x[point], params)
    np.testing.assert_allclose(w_ind[i], _own_run(name, problem, fresh[i], one, PASSES).w, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_sparse_methods_keep_at_most_s_coordinates(prepared):
  problem = prepared.private
  for name in ("dp_iht", "two_stage"):
    algorithm = runner.ALGORITHMS[name]
    noise = algorithm.calibrate(problem, 1e-4, PASSES)
    w = runner.sweep(algorithm, problem, [(algorithm.step_sizes.values[2], 1.0)], noise, runner.seed_keys(3), PASSES,
                     chunk=3)
    assert np.count_nonzero(w, axis=-1).max() <= algorithms.toolbox_sparsity(problem)


def test_fw_radius_axis_contains_the_penalized_optimum(prepared):
  # The l1 penalty becomes the constraint; at r = ||w*||_1 noise-free DP-FW approaches w* of the
  # penalized objective, and a radius off by 2x in either direction does worse.
  problem = prepared.private
  assert isinstance(problem.penalty, penalties.L1)
  assert isinstance(algorithms.fw_problem(problem).penalty, penalties.Zero)
  radius = float(np.abs(prepared.solution).sum())
  errors = {}
  with jax.enable_x64(True):
    for r in (radius / 2, radius, 2 * radius):
      w = dp_fw.run(algorithms.fw_problem(problem), jax.random.key(0), dp_fw.Params(r), passes=400).w
      errors[r] = float(runner.relative_error(prepared, w))
  assert errors[radius] < 0.02
  assert errors[radius] < min(errors[radius / 2], errors[2 * radius])


@pytest.mark.slow
def test_toolbox_algorithms_run_through_the_experiment_in_the_full_preset_columns_only():
  # The full preset's paper-protocol columns (committed results); not the quick preset (make
  # reproduce stays short) nor any end-to-end private column.
  assert set(NEW) <= set(runner.FULL.algorithms)
  assert not set(NEW) & set(runner.QUICK.algorithms + runner.QUICK.private_algorithms + runner.FULL.private_algorithms)
  preset = runner.Preset(passes=(2,), seeds=2, datasets=("diabetes",), algorithms=NEW + ("dp_gcd",),
                         private_algorithms=(), max_extensions=1, confirm_seeds=4, chunk=4, skip=())
  with jax.enable_x64(True):
    results = runner.run_experiment(preset, progress=False)
  assert {b["algorithm"] for b in results["best"]} == set(NEW) | {"dp_gcd"}
  assert sum(b["winner"] for b in results["best"]) == 1
  for b in results["best"]:
    assert np.isfinite(b["mean"]) and b["extensions"] <= 1
  fw = next(b for b in results["best"] if b["algorithm"] == "dp_fw")
  assert set(algorithms.FW_RADII.values) <= set(fw["step_grid"])  # the radius axis, possibly extended


@pytest.mark.parametrize("name", list(algorithms.ALGORITHMS))
def test_every_algorithm_calibrates_as_the_generic_fit(prepared, name):
  """The experiments take no path of their own from a budget to noise: each algorithm's multipliers
  at epsilon = 1 are those `dg.fit` calibrates for its solver, problem and options."""
  algorithm, problem = runner.ALGORITHMS[name], prepared.private
  delta, passes = 1.0 / problem.num_examples**2, 3
  noise = np.atleast_1d(algorithm.calibrate(problem, delta, passes))
  result = dg.fit(algorithm.solver, algorithm.problem_of(problem), jax.random.key(0), epsilon=algorithms.EPSILON,
                  delta=delta, passes=passes, **algorithm.options(problem))
  fitted = np.array([float(getattr(result.params, field)) for field in algorithm.noises])
  np.testing.assert_allclose(noise, fitted, rtol=2.0**-22)  # the run's float32 multipliers, rounded up
  assert np.all(fitted >= noise)
