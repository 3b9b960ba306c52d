"""Scale-free DP-GCD (`dpgcd_jax.solvers.scale_free`, `dp_gcd.run(..., scale="per-step")`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import curvature
from dpgcd_jax import kernels
from dpgcd_jax import release_mechanisms
from dpgcd_jax.privacy import bounds as bounds_lib
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import scale_free

CAP = float(bounds_lib.GRID[-1])
GRID32 = np.asarray(bounds_lib.GRID, np.float32)


def _two_level_set(n=400, p=6, seed=0):
  """Columns whose magnitudes take two values, `a_j` (75% of the records) and `4 a_j`, on scales
  `10^U[-1, 1]`: the 0.9-quantile is `4 a_j`, 60 records away from any other count at n = 400, so an
  AboveThreshold release at epsilon 10 (noise scales 0.2 and 0.4 records) lands on its grid point."""
  rng = np.random.default_rng(seed)
  a = (10.0 ** rng.uniform(-1, 1, p)).astype(np.float32)
  magnitude = np.where(rng.random((n, p)) < 0.75, a, 4 * a).astype(np.float32)
  X = magnitude * rng.choice([-1.0, 1.0], size=(n, p)).astype(np.float32)
  w_true = np.array([2.0, -1.5, 0, 0, 1.0, 0][:p]) / a
  y = np.where(X @ w_true + rng.normal(size=n) > 0, 1.0, -1.0).astype(np.float32)
  return X, y


def _numpy_run(X, y, *, clip, step_size, passes):
  """The zero-noise limit of the module docstring in float64 (logistic loss, beta = 1/4, no intercept)."""
  X, y = X.astype(np.float64), y.astype(np.float64)
  n, p = X.shape
  beta = 0.25
  w, margins, bounds = np.zeros(p), np.zeros(n), np.full(p, -1.0)
  chosen = []
  for _ in range(passes):
    r = -y / (1.0 + np.exp(y * margins))  # phi'(z, y) of log(1 + exp(-y z))
    g_sign = np.mean(np.clip(r[:, None] * np.sign(X), -clip, clip), axis=0)
    j = int(np.argmax(np.abs(g_sign)))
    if bounds[j] < 0:
      column = np.abs(X[:, j]).astype(np.float32)
      bounds[j] = min(GRID32[np.argmax(GRID32 >= np.sort(column)[int(np.ceil(0.9 * n)) - 1])], CAP)
    b = bounds[j]
    x = np.clip(X[:, j], -b, b)
    g = np.mean(np.clip(r * x, -clip * b, clip * b))
    M = beta * np.clip(np.mean(x**2), 0.0, b**2)
    change = -step_size * g / M
    w[j] += change
    margins += change * x
    chosen.append(j)
  return w, np.array(chosen), bounds


def _params(clip=0.5, step_size=1.0, noise=0.0):
  return dp_gcd.Params(step_size=step_size, clip=clip, selection_noise=noise, update_noise=noise,
                       curvature_noise=noise, bound_noise=noise)


def test_the_noiseless_run_is_the_numpy_reference():
  X, y = _two_level_set()
  problem = dg.make_problem(X, y, "logistic", feature_bound=CAP)
  res = dp_gcd.run(problem, jax.random.key(0), _params(), passes=8, selection="gumbel", update="gaussian",
                   curvature="released", scale="per-step")
  w, chosen, bounds = _numpy_run(X, y, clip=0.5, step_size=1.0, passes=8)
  np.testing.assert_array_equal(np.asarray(res.trace.coordinates), chosen)
  np.testing.assert_allclose(np.asarray(res.w), w, rtol=2e-4, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(res.trace.bounds), np.where(bounds > 0, bounds, -1.0))
  assert len(set(chosen.tolist())) < len(chosen)  # a feature selected twice kept its first bound
  # the fitted model is sum_j w_j clip(x_j, B_j), on every feature's own scale
  assert np.mean(np.sign(np.clip(X, -np.abs(bounds), np.abs(bounds)) @ w) == y) > 0.8


def _neighbours(seed):
  rng = np.random.default_rng(seed)
  n, p = 60, 5
  X = (rng.normal(size=(n, p)) * 10.0 ** rng.uniform(-2, 2, p)).astype(np.float32)
  y = rng.choice([-1.0, 1.0], n).astype(np.float32)
  X2, y2 = X.copy(), y.copy()
  i = int(rng.integers(n))
  X2[i] = rng.choice([-1.0, 1.0], p) * 10.0 ** rng.uniform(-3, 4, p)
  y2[i] = -y[i]
  w = rng.normal(size=p).astype(np.float32) * 0.3
  return [dg.make_problem(A, b, "logistic", feature_bound=CAP) for A, b in ((X, y), (X2, y2))], jnp.asarray(w)


@pytest.mark.parametrize("seed", range(6))
def test_each_release_moves_by_at_most_its_sensitivity_between_neighbours(seed):
  """Selection scores (`c`), the selected feature's gradient (`c B_j`) and second moment (`B_j^2`), at any
  released bound `B_j`, for one record replaced by one far off every feature's scale (and its label flipped)."""
  problems, w = _neighbours(seed)
  clip = jnp.float32(0.5)
  n = problems[0].num_examples
  scores, columns, moments = [], [], []
  bounds = jnp.asarray([2.0**-3, 0.5, 1.0, 8.0, 300.0], jnp.float32)
  for problem in problems:
    margins = kernels.init_margins(problem, w)
    chooser = scale_free.selection_problem(problem, None)
    scores.append(kernels.clipped_gradient(chooser, w, margins, jnp.full(5, clip)))
    columns.append(jnp.stack([scale_free.column_gradient(problem, margins, jnp.int32(j), bounds[j], clip)
                              for j in range(5)]))
    moments.append(jnp.stack([curvature.shifted_moment(problem, jnp.int32(j), bounds[j] ** 2) for j in range(5)]))
  assert np.all(np.abs(scores[0] - scores[1]) <= clipping.mean_sensitivity(clip, n))
  assert np.all(np.abs(columns[0] - columns[1]) <= clipping.mean_sensitivity(clip * bounds, n))
  assert np.all(np.abs(moments[0] - moments[1]) <= curvature.moment_sensitivity(bounds**2, n))


def test_the_run_never_spends_more_epsilon_per_bound_than_the_ledger_charges():
  noise = np.random.default_rng(0).uniform(0.05, 500.0, 5000)
  run = np.asarray(scale_free.bound_epsilon(jnp.asarray(noise, jnp.float32)), np.float64)
  charged = np.array([scale_free.bound_epsilon(float(np.float32(b)), np) for b in noise])
  assert np.all(run <= charged) and np.all(run > charged * (1 - 1e-5))


def test_a_fit_charges_one_bound_release_per_step_and_meets_its_budget(monkeypatch):
  X, y = _two_level_set(n=300)
  problem = dg.make_problem(X, y, "logistic", feature_bound=CAP)
  releases = []
  run = release_mechanisms.AboveThreshold.run

  def counted(self, key, queries, epsilon):
    releases.append(queries.shape)
    return run(self, key, queries, epsilon)

  monkeypatch.setattr(release_mechanisms.AboveThreshold, "run", counted)
  with jax.disable_jit():  # eagerly, step by step: one release per step, on the 129 grid points
    state = scale_free.start(problem, scale="per-step")
    for t in range(3):
      state, _ = dp_gcd.step(jax.random.key(t), state, problem, _params(noise=1.0), curvature="released",
                             scale="per-step")
  assert releases == [(bounds_lib.GRID.size,)] * 3
  res = dp_gcd.fit(problem, jax.random.key(1), epsilon=1.0, delta=1e-6, passes=7, selection="gumbel",
                   update="gaussian", curvature="released", scale="per-step")
  (entry,) = [e for e in res.privacy.ledger if e.label == "column bound"]
  charged = entry.event.epsilon  # at the calibrated multiplier; the run's is rounded up to float32: never more
  assert entry.count == 7 and float(scale_free.bound_epsilon(res.params.bound_noise)) <= charged
  assert charged == pytest.approx(scale_free.bound_epsilon(float(res.params.bound_noise), np), rel=1e-6)
  draws = [e for e in res.privacy.ledger if e.label == "sampler draws" and e.event.release_epsilon == charged]
  assert [(e.count, e.event.draws) for e in draws] == [(7, bounds_lib.GRID.size + 1)]
  assert res.privacy.epsilon <= 1.0
  assert float(res.params.bound_noise) == pytest.approx(dp_gcd.BOUND_RATIO * float(res.params.selection_noise))


def test_a_secure_run_works_with_per_step_bounds():
  X, y = _two_level_set(n=300)
  problem = dg.make_problem(X, y, "logistic", feature_bound=CAP)
  res = dp_gcd.fit(problem, jax.random.key(2), epsilon=2.0, delta=1e-6, passes=5, secure_noise=True,
                   curvature="released", scale="per-step")
  assert np.all(np.isfinite(np.asarray(res.w))) and {e.label for e in res.privacy.ledger} >= {"column bound"}


@pytest.mark.parametrize(("problem_of", "kwargs", "match"), [
    (lambda X, y: dg.make_problem(scipy.sparse.csr_array(X), y, "logistic", feature_bound=CAP), {}, "dense"),
    (lambda X, y: dg.make_problem(X, y, "logistic", feature_bound=CAP, penalty=dg.penalties.L1(0.1)), {}, "penalty"),
    (lambda X, y: dg.make_problem(X, y, "logistic", feature_bound=CAP), dict(clipping_mode="derivative"),
     "clipping_mode"),
    (lambda X, y: dg.make_problem(X, y, "logistic", feature_bound=CAP), dict(scale="per_step"), "scale"),
    (lambda X, y: dg.make_problem(X, y, "logistic"), {}, "public feature bound"),
])
def test_bad_options_name_themselves(problem_of, kwargs, match):
  X, y = _two_level_set(n=50)
  with pytest.raises(ValueError, match=match):
    dp_gcd.run(problem_of(X, y), jax.random.key(0), _params(noise=1.0), passes=2,
               **dict(dict(scale="per-step"), **kwargs))
