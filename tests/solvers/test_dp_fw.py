"""`dpgcd_jax.solvers.dp_fw`: the l1-constrained optimum, the ledger, the exponential mechanism's scale, vmap,
validation."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import numpy_reference
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import optimize
from scipy import special
from scipy import stats

import dpgcd_jax as dg
from dpgcd_jax import discrete_grid
from dpgcd_jax import kernels
from dpgcd_jax.privacy import BoundedRange
from dpgcd_jax.privacy import PureDp
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import dp_fw

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

DELTA = 1e-6


def _sparse_regression(n=200, p=20, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  w = np.zeros(p)
  w[:3] = [2.0, -1.5, 1.0]
  return X, X @ w + 0.3 * rng.normal(size=n)


# ------------------------------------------------------------------------------------------
# Noise-free correctness against independent NumPy solvers.
# ------------------------------------------------------------------------------------------


def _project_l1(v, r):
  """Euclidean projection on the l1 ball of radius r (Duchi et al. 2008, sort-based)."""
  if np.abs(v).sum() <= r:
    return v
  u = np.sort(np.abs(v))[::-1]
  css = np.cumsum(u)
  k = np.nonzero(u * np.arange(1, len(u) + 1) > css - r)[0][-1]
  theta = (css[k] - r) / (k + 1.0)
  return np.sign(v) * np.maximum(np.abs(v) - theta, 0.0)


def _l1_least_squares(X, y, r, iters=5000):
  """min 1/(2n) ||Xw - y||^2 s.t. ||w||_1 <= r, by accelerated projected gradient (FISTA)."""
  n = X.shape[0]
  L = np.linalg.eigvalsh(X.T @ X / n)[-1]
  w = z = np.zeros(X.shape[1])
  s = 1.0
  for _ in range(iters):
    w_new = _project_l1(z - (X.T @ (X @ z - y) / n) / L, r)
    s_new = (1.0 + math.sqrt(1.0 + 4.0 * s * s)) / 2.0
    z = w_new + (s - 1.0) / s_new * (w_new - w)
    w, s = w_new, s_new
  return w


def _objective(X, y, w):
  return 0.5 * np.mean((X @ w - y) ** 2)


def test_noise_free_dp_fw_reaches_the_l1_constrained_least_squares_optimum():
  X, y = _sparse_regression()
  r = 3.0  # ||w_true||_1 = 4.5: the constraint is active
  w_star = _l1_least_squares(X, y, r)
  f_star = _objective(X, y, w_star)
  assert np.abs(w_star).sum() == pytest.approx(r, rel=1e-9)
  problem = dg.make_problem(X, y, "squared")
  result = dp_fw.run(problem, jax.random.key(0), dp_fw.Params(radius=r), passes=200,
                     store_objective=True)
  w = np.asarray(result.w)
  assert np.abs(w).sum() <= r * (1 + 1e-12)
  assert (_objective(X, y, w) - f_star) / f_star < 2e-3  # measured 1.06e-3 (FW: O(1/T))
  objectives = np.asarray(result.trace.nonprivate_objective)
  assert objectives[-1] == pytest.approx(_objective(X, y, w), rel=1e-12)
  # The O(1/t) rate of Frank-Wolfe: the gap shrinks along the run.
  assert objectives[-1] - f_star < (objectives[20] - f_star) / 5


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_noise_free_trajectory_equals_numpy_frank_wolfe_step_for_step(loss):
  X, y = _sparse_regression(n=60, p=8, seed=1)
  if loss == "logistic":
    y = np.where(y > 0, 1.0, -1.0)
  r, l2, steps = 1.5, 0.05, 40
  w, coords = np.zeros(X.shape[1]), []
  for t in range(steps):
    z = X @ w
    dphi = (z - y) if loss == "squared" else -y * special.expit(-y * z)
    g = X.T @ dphi / len(y) + l2 * w
    j = int(np.argmax(np.abs(g)))
    mu = 2.0 / (t + 2.0)
    w = (1.0 - mu) * w
    w[j] += mu * (-r * np.sign(g[j]))
    coords.append(j)
  result = dp_fw.run(dg.make_problem(X, y, loss, l2=l2), jax.random.key(0), dp_fw.Params(r),
                     passes=steps)
  np.testing.assert_array_equal(result.trace.coordinates, coords)
  np.testing.assert_allclose(result.w, w, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------------------
# The ledger: BoundedRange(2 / b) per step, composed; checked against independent bounds.
# ------------------------------------------------------------------------------------------


def _p_br(t, eps):
  """P(first outcome) of the generalized randomized response with losses (1 - t) eps, -t eps."""
  return np.expm1(t * eps) / (np.exp(t * eps) - np.exp(-(1.0 - t) * eps))


_COMMON_T = np.linspace(0.05, 0.95, 181)


def _non_adaptive_delta(epsilon, eps0, steps, ts=_COMMON_T):
  """max over a common t of the T-fold composition of B_t: a LOWER bound for any valid route."""
  k = np.arange(steps + 1)
  best = 0.0
  for t in ts:
    loss = k * (1.0 - t) * eps0 - (steps - k) * t * eps0
    terms = stats.binom.pmf(k, steps, _p_br(t, eps0)) * -np.expm1(np.minimum(epsilon - loss, 0.0))
    best = max(best, float(terms.sum()))
  return best


def test_fit_report_is_the_bounded_range_composition_and_meets_the_target():
  X, y = _sparse_regression(n=100, p=10)
  problem = dg.make_problem(X, np.where(y > 0, 1.0, -1.0), "logistic", feature_bound=4.0)
  steps, target = 40, 1.0
  result = dp_fw.fit(problem, jax.random.key(0), epsilon=target, delta=DELTA, passes=steps,
                     radius=2.0)
  report = result.privacy
  assert report.epsilon <= target and report.delta == DELTA
  assert len(report.entries) == 1
  (label, event, count), = report.entries
  assert count == steps and isinstance(event, BoundedRange)
  b = 2.0 / event.epsilon  # the calibrated selection multiplier
  assert dp_fw.fw_ledger(b, steps).epsilon(DELTA) == pytest.approx(report.epsilon, rel=1e-12)
  # Tight calibration: 0.1% less noise misses the target.
  assert dp_fw.fw_ledger(b / 1.001, steps).epsilon(DELTA) > target
  # Independent bounds on the T-fold adaptive composition of BoundedRange(eps0):
  eps0 = event.epsilon
  low = optimize.brentq(lambda e: _non_adaptive_delta(e, eps0, steps) - DELTA, 0.05, 5.0, xtol=1e-7)
  assert low <= report.epsilon <= low * 1.03  # above the non-adaptive optimum, and close to it
  rho = steps * eps0**2 / 8.0  # BR(eps0) is eps0^2 / 8-zCDP (Cesar & Rogers 2021)
  assert report.epsilon <= rho + 2.0 * math.sqrt(rho * math.log(1.0 / DELTA))
  rr = pld_lib.from_randomized_response(2.0 / (1.0 + math.exp(eps0)), 2,
                                        value_discretization_interval=1e-5).self_compose(steps)
  assert report.epsilon <= rr.get_epsilon_for_delta(DELTA)  # pure eps0-DP steps, dp_accounting
  assert np.abs(np.asarray(result.w)).sum() <= 2.0 * (1 + 1e-12)


def test_fit_releases_a_feature_bound_when_the_smoothness_is_not_public():
  X, y = _sparse_regression(n=100, p=10)
  problem = dg.make_problem(X, np.where(y > 0, 1.0, -1.0), "logistic")
  result = dp_fw.fit(problem, jax.random.key(1), epsilon=1.0, delta=DELTA, passes=20, radius=1.0)
  entries = {e.label: e for e in result.privacy.entries}
  assert sorted(entries) == ["feature bound", "sampler draws", "vertex selection"]
  assert entries["feature bound"].event == PureDp(0.1)
  assert entries["sampler draws"].event.draws == 130  # the bound's AboveThreshold: 129 grid points + threshold
  assert entries["vertex selection"].count == 20
  assert result.privacy.epsilon <= 1.0 and np.all(np.isfinite(result.w))


# ------------------------------------------------------------------------------------------
# The exponential mechanism's scale: a chi-square test on a fixed gradient.
# ------------------------------------------------------------------------------------------


def test_selected_vertex_frequencies_match_the_exponential_mechanism():
  rng = np.random.default_rng(3)
  n, p, r, b, draws = 20, 3, 2.0, 2.0, 20_000
  X = rng.uniform(-1.0, 1.0, size=(n, p))
  y = rng.uniform(-1.0, 1.0, size=n)
  problem = dg.make_problem(X, y, "squared", feature_bound=1.0)  # M_j = 1: C_j = clip = 1
  params = base.cast_params(dp_fw.SOLVER, problem, dp_fw.Params(r, 1.0, b))
  state = dp_fw.init(problem)
  keys = jax.random.split(jax.random.key(7), draws)
  _, info = jax.jit(jax.vmap(lambda k: dp_fw.step(k, state, problem, params)))(keys)
  k = np.where(np.asarray(info.sign) > 0, 0, p) + np.asarray(info.coordinate)
  counts = np.bincount(k, minlength=2 * p)
  # At w = 0 the per-example gradients -y_i x_ij lie in [-1, 1]: no clipping.
  g = -X.T @ y / n
  sensitivity = r * 2.0 / n  # r max_j Delta_j, Delta_j = 2 C_j / n (float rounding negligible)
  utilities = r * np.concatenate([-g, g])  # vertices +r e_j, then -r e_j

  def p_value(multiplier):
    expected = special.softmax(utilities / (multiplier * sensitivity)) * draws
    return stats.chisquare(counts, expected).pvalue

  assert p_value(b) > 1e-3
  # softmax(eps0 u / (2 Delta_u)) with eps0 = 2 / b is the same distribution.
  eps0 = 2.0 / b
  np.testing.assert_allclose(special.softmax(eps0 * utilities / (2 * sensitivity)),
                             special.softmax(utilities / (b * sensitivity)))
  assert p_value(2.0 * b) < 1e-12 and p_value(0.5 * b) < 1e-12  # a wrong scale is rejected


@pytest.mark.slow
def test_secure_vertex_frequencies_match_discrete_report_noisy_max():
  """`secure_noise`: the vertex is report-noisy-max of the snapped utilities with discrete
  Laplace noise of scale `floor(b D) + 1` (D the grid sensitivity of `secure_sensitivity`);
  a wrong scale is rejected, and the ledger charges `PureDp(2 / b)` per step."""
  rng = np.random.default_rng(3)
  n, p, r, b, draws = 20, 3, 2.0, 2.0, 20_000
  X = rng.uniform(-1.0, 1.0, size=(n, p))
  y = rng.uniform(-1.0, 1.0, size=n)
  problem = dg.make_problem(X, y, "squared", feature_bound=1.0)
  params = base.cast_params(dp_fw.SOLVER, problem, dp_fw.Params(r, 1.0, b))
  state = dp_fw.init(problem)
  keys = jax.random.split(jax.random.key(7), draws)
  step = lambda k: dp_fw.step(k, state, problem, params, selection="discrete_laplace")
  _, info = jax.jit(jax.vmap(step))(keys)
  counts = np.bincount(np.where(np.asarray(info.sign) > 0, 0, p) + np.asarray(info.coordinate), minlength=2 * p)
  thresholds = np.ones(p, np.float32)
  g = kernels.clipped_gradient(problem, state.w, state.margins, jnp.asarray(thresholds))
  sensitivity = dp_fw.secure_sensitivity(dp_fw.utility_sensitivity(r, thresholds, n), r, thresholds,
                                         jnp.zeros(p))
  assert float(sensitivity) > r * 2.0 / n  # the float slack is added
  gran = float(discrete_grid.grid_step(b * sensitivity))
  D = float(discrete_grid.grid_sensitivity(sensitivity, gran))
  k = np.round(np.asarray(r * np.concatenate([-g, g]), np.float64) / gran)

  def p_value(scale):
    return stats.chisquare(counts, numpy_reference.discrete_noisy_max_law(k, scale) * draws).pvalue

  t = int(np.floor(b * D)) + 1
  assert p_value(t) > 1e-3
  assert p_value(2 * t) < 1e-12 and p_value(t // 2) < 1e-12
  too_large = base.cast_params(dp_fw.SOLVER, problem, dp_fw.Params(r, 1.0, 1e9))  # beyond MAX_SCALE grid steps
  failed, _ = dp_fw.step(keys[0], state, problem, too_large, selection="discrete_laplace")
  assert np.all(np.isnan(np.asarray(failed.w)))  # fail closed: a NaN model, whatever the data
  ledger = dp_fw.fw_ledger(b, 4, "discrete_laplace")
  (entry,) = ledger.entries
  assert isinstance(entry.event, PureDp) and entry.event.epsilon >= 2.0 / b and entry.count == 4


# ------------------------------------------------------------------------------------------
# vmap over keys and radius; no recompilation.
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def logistic_problem():
  X, y = _sparse_regression(n=80, p=10, seed=2)
  return dg.make_problem(X, np.where(y > 0, 1.0, -1.0), "logistic", feature_bound=4.0)


def test_same_key_same_output_different_keys_differ(logistic_problem):
  run = lambda k: dp_fw.run(logistic_problem, k, dp_fw.Params(1.0, 1.0, 3.0), passes=15)
  a, b, c = run(jax.random.key(1)), run(jax.random.key(1)), run(jax.random.key(2))
  np.testing.assert_array_equal(a.w, b.w)
  np.testing.assert_array_equal(a.trace.coordinates, b.trace.coordinates)
  assert not np.array_equal(a.trace.coordinates, c.trace.coordinates)


def test_sparse_features_give_the_dense_run(logistic_problem):
  from scipy import sparse  # pylint: disable=g-import-not-at-top
  X = np.asarray(logistic_problem.X) * (np.random.default_rng(0).uniform(size=(80, 10)) < 0.3)
  y = np.asarray(logistic_problem.y)
  params = dp_fw.Params(1.5, 1.0, 2.0)
  dense = dp_fw.run(dg.make_problem(X, y, "logistic", feature_bound=4.0), jax.random.key(3), params,
                    passes=10)
  sparse_ = dp_fw.run(dg.make_problem(sparse.csr_matrix(X), y, "logistic", feature_bound=4.0),
                      jax.random.key(3), params, passes=10)
  np.testing.assert_array_equal(dense.trace.coordinates, sparse_.trace.coordinates)
  np.testing.assert_allclose(dense.w, sparse_.w, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------
# Validation: every message names the argument.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    (dict(params=dp_fw.Params(0.0)), "radius"),
    (dict(params=dp_fw.Params(-1.0)), "radius"),
    (dict(params=dp_fw.Params(np.nan)), "radius"),
    (dict(params=dp_fw.Params(np.inf)), "radius"),
    (dict(params=(0.0, 1.0, 1.0)), "radius"),
    (dict(params=dp_fw.Params(1.0, clip=0.0)), "clip"),
    (dict(params=dp_fw.Params(1.0, clip=np.inf, selection_noise=1.0)), "clip"),
    (dict(params=dp_fw.Params(1.0, 1.0, selection_noise=-0.1)), "selection_noise"),
    (dict(params=dg.dp_gcd.Params()), "params"),
    (dict(passes=0), "passes"),
    (dict(passes=2.5), "passes"),
    (dict(clipping_mode="nope"), "clipping"),
])
def test_run_rejects_bad_input_by_name(logistic_problem, kwargs, match):
  args = dict(params=dp_fw.Params(1.0, 1.0, 1.0), passes=3) | kwargs
  with pytest.raises(ValueError, match=match):
    dp_fw.run(logistic_problem, jax.random.key(0), **args)


@pytest.mark.parametrize("kwargs, match", [
    (dict(radius=0.0), "radius"),
    (dict(radius=-2.0), "radius"),
    (dict(passes=0), "passes"),
    (dict(epsilon=0.0), "epsilon"),
    (dict(delta=1.0), "delta"),
])
def test_fit_rejects_bad_input_by_name(logistic_problem, kwargs, match):
  args = dict(epsilon=1.0, delta=DELTA, passes=3, radius=1.0) | kwargs
  with pytest.raises(ValueError, match=match):
    dp_fw.fit(logistic_problem, jax.random.key(0), **args)


def test_a_nonsmooth_penalty_is_rejected():
  X, y = _sparse_regression(n=30, p=4)
  problem = dg.make_problem(X, y, "squared", penalty=dg.penalties.L1(0.1))
  with pytest.raises(ValueError, match="penalty"):
    dp_fw.run(problem, jax.random.key(0), dp_fw.Params(1.0), passes=2)
  with pytest.raises(ValueError, match="steps"):
    dp_fw.fw_ledger(1.0, -1)
