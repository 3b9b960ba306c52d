"""`dpgcd_jax.solvers.dp_iht`, `dpgcd_jax.peeling`: DP-IHT and peeling: the sparse optimum, NumPy IHT, sensitivities,
noise scales, the ledger, vmap, validation."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import numpy_reference
import pytest
from scipy import optimize
from scipy import special
from scipy import stats
from sklearn import linear_model

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import discrete_grid
from dpgcd_jax import peeling
from dpgcd_jax.privacy import BoundedRange
from dpgcd_jax.privacy import Gaussian
from dpgcd_jax.privacy import PureDp
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import dp_iht

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

DELTA = 1e-6


def _sparse_regression(n=200, p=20, seed=0, noise=0.3):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  w = np.zeros(p)
  w[:3] = [2.0, -1.5, 1.0]
  return X, X @ w + noise * rng.normal(size=n)


# ------------------------------------------------------------------------------------------
# Noise-free correctness: the least-squares optimum on the true support; NumPy IHT.
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("noise", [0.0, 0.3])
@pytest.mark.parametrize("sparsity", [3, 5])
def test_noise_free_iht_recovers_the_least_squares_optimum_on_the_support(noise, sparsity):
  X, y = _sparse_regression(noise=noise)
  problem = dg.make_problem(X, y, "squared")
  result = dp_iht.run(problem, jax.random.key(0), dp_iht.Params(0.5), passes=150, sparsity=sparsity)
  w = np.asarray(result.w)
  reference = linear_model.LinearRegression(fit_intercept=False).fit(X[:, :3], y).coef_
  if sparsity == 3 or noise == 0.0:  # with s = 5 and noisy y, 2 more columns fit the noise
    np.testing.assert_allclose(w[:3], reference, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(w[3:], 0.0, atol=1e-10)
  else:
    support = np.flatnonzero(w)
    assert len(support) == 5 and set(range(3)) <= set(support)
    fit_on_support = np.linalg.lstsq(X[:, support], y, rcond=None)[0]
    np.testing.assert_allclose(w[support], fit_on_support, rtol=1e-9, atol=1e-10)


def _numpy_iht(X, y, loss, l2, l1, gamma, sparsity, steps):
  """Proximal IHT in the metric diag(M), M_j = beta mean_i x_ij^2 + l2, no clipping, no noise."""
  n = len(y)
  beta = 1.0 if loss == "squared" else 0.25
  M = beta * np.mean(X**2, axis=0) + l2
  eta = gamma / M
  prox = lambda v: np.sign(v) * np.maximum(np.abs(v) - eta * l1, 0.0)
  w, supports = np.zeros(X.shape[1]), []
  for _ in range(steps):
    z = X @ w
    dphi = (z - y) if loss == "squared" else -y * special.expit(-y * z)
    u = w - eta * (X.T @ dphi / n + l2 * w)
    keep = np.argsort(-np.sqrt(M) * np.abs(prox(u)), kind="stable")[:sparsity]
    w = np.where(np.isin(np.arange(len(w)), keep), prox(u), 0.0)
    supports.append(keep)
  return w, np.array(supports)


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_noise_free_trajectory_equals_numpy_proximal_iht_step_for_step(loss):
  X, y = _sparse_regression(n=60, p=8, seed=1)
  if loss == "logistic":
    y = np.where(y > 0, 1.0, -1.0)
  l2, l1, gamma, s, steps = 0.05, 0.02, 0.7, 3, 25
  expected, supports = _numpy_iht(X, y, loss, l2, l1, gamma, s, steps)
  problem = dg.make_problem(X, y, loss, l2=l2, penalty=dg.penalties.L1(l1))
  np.testing.assert_allclose(dp_iht.run(problem, jax.random.key(0), dp_iht.Params(gamma), passes=steps,
                                        sparsity=s).w, expected, rtol=1e-10, atol=1e-12)
  cast = base.cast_params(dp_iht.SOLVER, problem, dp_iht.Params(gamma))
  step = jax.jit(dp_iht.step, static_argnames=("sparsity",))
  state = dp_iht.init(problem)
  for t in range(steps):  # a loop of init / step is run, and the supports are NumPy's, in order
    state, info = step(jax.random.fold_in(jax.random.key(0), t), state, problem, cast, sparsity=s)
    np.testing.assert_array_equal(info.support, supports[t])
  np.testing.assert_allclose(state.w, expected, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------------------------------
# Peeling: the law of the draws, and the scale the step uses.
# ------------------------------------------------------------------------------------------


def _ordered_pair_probabilities(u, tau):
  """P(j_1 = a, j_2 = b) of two rounds of the exponential mechanism without replacement."""
  weights = np.exp((u - u.max()) / tau)
  p = len(u)
  probs = np.zeros((p, p))
  for a in range(p):
    for b in range(p):
      if a != b:
        probs[a, b] = weights[a] / weights.sum() * weights[b] / (weights.sum() - weights[a])
  return probs


def _chi_square_p_value(pairs, probs, draws):
  p = probs.shape[0]
  counts = np.bincount(pairs[:, 0] * p + pairs[:, 1], minlength=p * p)
  off = ~np.eye(p, dtype=bool).reshape(-1)
  assert counts[~off].sum() == 0  # without replacement
  return stats.chisquare(counts[off], probs.reshape(-1)[off] * draws).pvalue


def test_peeling_is_the_exponential_mechanism_without_replacement():
  u = np.array([0.3, -0.1, 0.5, 0.0])
  b, sensitivity, draws = 0.8, 0.25, 20_000
  keys = jax.random.split(jax.random.key(11), draws)
  pairs = np.asarray(jax.jit(jax.vmap(lambda k: peeling.peel(k, jnp.asarray(u), 2, b, sensitivity)))(keys))
  assert pairs.shape == (draws, 2)
  for factor, accept in ((1.0, True), (2.0, False), (0.5, False)):
    p_value = _chi_square_p_value(pairs, _ordered_pair_probabilities(u, factor * b * sensitivity), draws)
    assert (p_value > 1e-3) if accept else (p_value < 1e-12)
  np.testing.assert_array_equal(peeling.peel(keys[0], jnp.asarray(u), 3, 0.0, sensitivity), [2, 0, 3])
  ledger = peeling.ledger("sel", b, 3, count=4)
  assert list(ledger) == [("sel", BoundedRange(2.0 / b), 12)]


@pytest.mark.slow
def test_secure_peeling_is_discrete_report_noisy_max_without_replacement():
  """Each round: report-noisy-max with discrete Laplace noise of scale `floor(b D) + 1` on the
  snapped scores, over the indices not drawn yet; a wrong scale is rejected; the ledger
  charges `PureDp(2 / b)` per round."""
  u = np.array([0.3, -0.1, 0.5, 0.0])
  b, sensitivity, draws = 0.8, 0.25, 20_000
  keys = jax.random.split(jax.random.key(11), draws)
  pairs, ok = jax.jit(jax.vmap(lambda k: peeling.peel_secure(k, jnp.asarray(u), 2, b, sensitivity)))(keys)
  pairs = np.asarray(pairs)
  assert np.all(np.asarray(ok)) and np.all(pairs[:, 0] != pairs[:, 1])
  gran = float(discrete_grid.grid_step(b * sensitivity))
  k = np.round(u / gran)
  t = int(np.floor(b * float(discrete_grid.grid_sensitivity(sensitivity, gran)))) + 1

  def ordered_pairs(scale):
    first = numpy_reference.discrete_noisy_max_law(k, scale)
    law = {}
    for i in range(u.size):
      rest = [j for j in range(u.size) if j != i]
      for j, q in zip(rest, numpy_reference.discrete_noisy_max_law(k[rest], scale), strict=True):
        law[(i, j)] = first[i] * q
    return law

  for scale, accept in ((t, True), (2 * t, False), (t // 2, False)):
    law = ordered_pairs(scale)
    observed = [np.sum((pairs[:, 0] == i) & (pairs[:, 1] == j)) for i, j in law]
    p_value = stats.chisquare(observed, np.array(list(law.values())) * draws).pvalue
    assert (p_value > 1e-3) if accept else (p_value < 1e-12)
  assert list(peeling.ledger("sel", b, 3, count=4, selection="discrete_laplace"))[0][1] == PureDp(2.0 / b)


@pytest.fixture(scope="module")
def bounded_problem():
  """|x_ij| <= 1, feature_bound=1: M_j = 1 and C_j = clip for the squared loss."""
  rng = np.random.default_rng(3)
  X = rng.uniform(-1.0, 1.0, size=(20, 3))
  y = rng.uniform(-1.0, 1.0, size=20)
  return dg.make_problem(X, y, "squared", feature_bound=1.0)


def test_the_step_peels_at_temperature_b_gamma_delta_bar(bounded_problem):
  problem, gamma, b, draws = bounded_problem, 0.7, 0.04, 20_000
  params = base.cast_params(dp_iht.SOLVER, problem, dp_iht.Params(gamma, 1.0, b, 0.0))
  state = dp_iht.init(problem)
  keys = jax.random.split(jax.random.key(7), draws)
  _, info = jax.jit(jax.vmap(lambda k: dp_iht.step(k, state, problem, params, sparsity=2)))(keys)
  X, y, n = np.asarray(problem.X), np.asarray(problem.y), problem.num_examples
  g = -X.T @ y / n  # at w = 0 the per-example gradients -y_i x_ij lie in [-1, 1]: no clipping
  scores = np.abs(gamma * g)  # sqrt(M_j) |u_j| with M_j = 1, u = -gamma g
  tau = b * gamma * 2.0 / n  # b gamma Delta_bar (rounding term negligible)
  pairs = np.asarray(info.support)
  assert _chi_square_p_value(pairs, _ordered_pair_probabilities(scores, tau), draws) > 1e-3
  assert _chi_square_p_value(pairs, _ordered_pair_probabilities(scores, 2 * tau), draws) < 1e-12


def test_the_released_values_carry_gaussian_noise_sigma_sqrt_s_eta_delta(bounded_problem):
  problem, gamma, sigma, s, draws = bounded_problem, 0.7, 2.0, 2, 4000
  params = base.cast_params(dp_iht.SOLVER, problem, dp_iht.Params(gamma, 0.5, 0.0, sigma))
  state = dp_iht.init(problem)
  keys = jax.random.split(jax.random.key(8), draws)
  new, info = jax.jit(jax.vmap(lambda k: dp_iht.step(k, state, problem, params, sparsity=s)))(keys)
  X, y, n = np.asarray(problem.X), np.asarray(problem.y), problem.num_examples
  u = -gamma * np.mean(np.clip(-y[:, None] * X, -0.5, 0.5), axis=0)
  support = np.asarray(info.support[0])
  assert np.all(np.asarray(info.support) == support)  # b = 0: the exact top-s, the same every time
  a = gamma * float(clipping.mean_sensitivity(jnp.asarray(0.5), n))  # eta_j Delta_j, M_j = 1
  z = (np.asarray(new.w)[:, support] - u[support]).reshape(-1) / (sigma * math.sqrt(s) * a)
  assert stats.kstest(z, "norm").pvalue > 1e-3
  assert stats.kstest(z * 1.5, "norm").pvalue < 1e-6 and stats.kstest(z / 1.5, "norm").pvalue < 1e-6
  assert np.all(np.asarray(new.w)[:, np.setdiff1d(np.arange(3), support)] == 0.0)


@pytest.mark.slow
def test_secure_values_carry_discrete_gaussian_noise_on_the_gradient_grid(bounded_problem):
  """`secure_noise`: the kept values are `w - eta (g + gran Z)`, `Z` discrete Gaussian of
  integer scale `floor(sigma sqrt(s) D) + 1` on the grid of `g`'s widened sensitivity; the
  ledger charges one `DiscreteGaussian(sigma)` per step."""
  problem, gamma, sigma, s, draws = bounded_problem, 0.7, 2.0, 2, 4000
  params = base.cast_params(dp_iht.SOLVER, problem, dp_iht.Params(gamma, 0.5, 0.0, sigma))
  state = dp_iht.init(problem)
  keys = jax.random.split(jax.random.key(8), draws)
  step = lambda k: dp_iht.step(k, state, problem, params, sparsity=s, selection="discrete_laplace")
  new, info = jax.jit(jax.vmap(step))(keys)
  X, y, n = np.asarray(problem.X), np.asarray(problem.y), problem.num_examples
  g = np.mean(np.clip(-y[:, None] * X, -0.5, 0.5), axis=0)
  support = np.asarray(info.support[0])
  assert np.all(np.asarray(info.support) == support)
  sensitivity = float(clipping.with_roundings(clipping.mean_sensitivity(jnp.asarray(0.5), n), 0.5, roundings=2))
  gran = float(discrete_grid.grid_step(sigma * math.sqrt(s) * sensitivity))
  t = math.floor(sigma * math.sqrt(s) * float(discrete_grid.grid_sensitivity(sensitivity, gran))) + 1
  g_hat = -np.asarray(new.w)[:, support] / gamma  # w = 0: w' = -eta g_hat, eta = gamma (M_j = 1)
  z = (g_hat - np.round(g[support] / gran) * gran).reshape(-1) / (gran * t)
  assert stats.kstest(z, "norm").pvalue > 1e-3
  assert stats.kstest(z * 1.5, "norm").pvalue < 1e-6 and stats.kstest(z / 1.5, "norm").pvalue < 1e-6
  for too_large in (dp_iht.Params(gamma, 0.5, 1e9, sigma), dp_iht.Params(gamma, 0.5, 0.0, 1e9)):
    failed, _ = dp_iht.step(keys[0], state, problem, base.cast_params(dp_iht.SOLVER, problem, too_large),
                            sparsity=s, selection="discrete_laplace")
    assert np.all(np.isnan(np.asarray(failed.w)))  # fail closed: a NaN model, whatever the data
  ledger = dp_iht.iht_ledger(1.0, sigma, 3, s, "discrete_laplace")
  assert [(label, type(event).__name__, count) for label, event, count in ledger] == [
      ("support selection", "PureDp", 6), ("update", "DiscreteGaussian", 3)]


def test_neighbours_move_the_scores_and_values_by_at_most_the_sensitivities_used():
  """Replace one record so that its clipped gradient flips sign everywhere: the bounds are met."""
  rng = np.random.default_rng(4)
  n, p, c, gamma = 30, 5, 0.5, 0.8
  X = rng.uniform(-1.0, 1.0, size=(n, p))
  y = rng.uniform(-1.0, 1.0, size=n)
  X[0], y[0] = 1.0, 1.0  # gradient -1 in every coordinate: clipped to -c
  X2 = X.copy()
  X2[0] = -1.0  # +1: clipped to +c
  params = dp_iht.Params(gamma, c)
  w = [np.asarray(dp_iht.run(dg.make_problem(A, y, "squared", feature_bound=1.0), jax.random.key(0), params,
                             passes=1, sparsity=p).w) for A in (X, X2)]  # s = p, no noise: w = u
  a = gamma * float(clipping.mean_sensitivity(jnp.asarray(c), n))  # eta_j Delta_j with M_j = 1
  assert np.all(np.abs(w[0] - w[1]) <= a)
  np.testing.assert_allclose(np.abs(w[0] - w[1]), a, rtol=1e-6)  # attained
  assert np.linalg.norm((w[0] - w[1]) / a) <= math.sqrt(p)  # the l2 sensitivity of the release
  assert np.max(np.abs(np.abs(w[0]) - np.abs(w[1]))) <= a  # the scores (gamma Delta_bar = a here)


# ------------------------------------------------------------------------------------------
# The ledger: s BoundedRange rounds and one Gaussian per step; checked against independent bounds.
# ------------------------------------------------------------------------------------------


def _gdp_epsilon(mu, delta):
  """The exact epsilon of mu-GDP at delta (Dong, Roth & Su 2019)."""
  delta_at = lambda e: stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)
  return optimize.brentq(lambda e: delta_at(e) - delta, 0.0, 50.0, xtol=1e-10)


def test_fit_report_is_the_peeling_and_gaussian_composition_and_meets_the_target():
  X, y = _sparse_regression(n=100, p=10)
  problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
  steps, s, target = 20, 3, 1.0
  result = dp_iht.fit(problem, jax.random.key(0), epsilon=target, delta=DELTA, passes=steps, sparsity=s)
  report = result.privacy
  assert report.epsilon <= target and report.delta == DELTA
  (l1, selection, c1), (l2, update, c2) = report.entries
  assert (l1, c1, l2, c2) == ("support selection", steps * s, "update", steps)
  assert isinstance(selection, BoundedRange) and isinstance(update, Gaussian)
  b, sigma = 2.0 / selection.epsilon, update.noise
  assert b == pytest.approx(sigma * math.sqrt(s), rel=1e-12)  # selection_share = 0.5: equal zCDP
  assert dp_iht.iht_ledger(b, sigma, steps, s).epsilon(DELTA) == pytest.approx(report.epsilon, rel=1e-12)
  assert dp_iht.iht_ledger(b / 1.001, sigma / 1.001, steps, s).epsilon(DELTA) > target  # tight
  # Independent bounds: the Gaussian part alone (exact GDP) below, zCDP and dp_accounting's RDP above.
  assert report.epsilon >= _gdp_epsilon(math.sqrt(steps) / sigma, DELTA)
  rho = steps * s * selection.epsilon**2 / 8.0 + steps / (2.0 * sigma**2)
  assert report.epsilon <= rho + 2.0 * math.sqrt(rho * math.log(1.0 / DELTA))
  rdp = dp_accounting.rdp.RdpAccountant()
  rdp.compose(dp_accounting.ZCDpEvent(selection.epsilon**2 / 8.0), steps * s)
  rdp.compose(dp_accounting.GaussianDpEvent(sigma), steps)
  assert report.epsilon <= rdp.get_epsilon(DELTA) * (1 + 1e-9)
  assert report.epsilon >= 0.8 * rdp.get_epsilon(DELTA)
  assert np.count_nonzero(np.asarray(result.w)) <= s


@pytest.mark.slow
def test_fit_releases_a_feature_bound_when_the_smoothness_is_not_public():
  X, y = _sparse_regression(n=100, p=10)
  result = dp_iht.fit(dg.make_problem(X, y, "squared"), jax.random.key(1), epsilon=1.0, delta=DELTA,
                      passes=10, sparsity=3, selection_share=0.3)
  entries = {e.label: e for e in result.privacy.entries}
  assert sorted(entries) == ["feature bound", "sampler draws", "support selection", "update"]
  assert entries["feature bound"].event == PureDp(0.1)
  b, sigma = 2.0 / entries["support selection"].event.epsilon, entries["update"].event.noise
  rho_sel, rho_upd = 3 * 0.5 / b**2, 0.5 / sigma**2  # 3 rounds of (2 / b)^2 / 8, one Gaussian
  assert rho_sel / (rho_sel + rho_upd) == pytest.approx(0.3, rel=1e-12)
  assert result.privacy.epsilon <= 1.0 and np.all(np.isfinite(result.w))


# ------------------------------------------------------------------------------------------
# vmap over keys and hyperparameters; no recompilation; sparse X.
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def logistic_problem():
  X, y = _sparse_regression(n=80, p=10, seed=2)
  return dg.make_problem(X, np.where(y > 0, 1.0, -1.0), "logistic", feature_bound=4.0)


@pytest.mark.slow
def test_fit_with_a_batch_of_keys_gives_independent_runs(logistic_problem):
  keys = jax.random.split(jax.random.key(3), 3)
  result = dp_iht.fit(logistic_problem, keys, epsilon=2.0, delta=DELTA, passes=5, sparsity=2)
  assert result.w.shape == (3, 10) and result.trace.coordinates is None
  one = dp_iht.fit(logistic_problem, keys[1], epsilon=2.0, delta=DELTA, passes=5, sparsity=2)
  np.testing.assert_allclose(result.w[1], one.w, rtol=1e-12, atol=1e-14)
  assert not np.array_equal(result.w[0], result.w[1])


def test_sparse_features_give_the_dense_run(logistic_problem):
  from scipy import sparse  # pylint: disable=g-import-not-at-top
  X = np.asarray(logistic_problem.X) * (np.random.default_rng(0).uniform(size=(80, 10)) < 0.3)
  y = np.asarray(logistic_problem.y)
  params = dp_iht.Params(0.5, 1.0, 2.0, 2.0)
  dense = dp_iht.run(dg.make_problem(X, y, "logistic", feature_bound=4.0), jax.random.key(3), params,
                     passes=8, sparsity=3)
  sparse_ = dp_iht.run(dg.make_problem(sparse.csr_matrix(X), y, "logistic", feature_bound=4.0),
                       jax.random.key(3), params, passes=8, sparsity=3)
  np.testing.assert_allclose(dense.w, sparse_.w, rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------------------------------------
# Validation: every message names the argument, and comes before any work.
# ------------------------------------------------------------------------------------------


@pytest.fixture
def no_work(monkeypatch):
  def fail(*args, **kwargs):
    raise AssertionError("work started before validation")
  monkeypatch.setattr(base, "run", fail)
  monkeypatch.setattr(budget, "private_fit", fail)


@pytest.mark.parametrize("kwargs, match", [
    (dict(sparsity=0), "sparsity"),
    (dict(sparsity=11), "sparsity"),
    (dict(sparsity=2.0), "sparsity"),
    (dict(sparsity=True), "sparsity"),
    (dict(clipping_mode="nope"), "clipping"),
])
def test_run_and_fit_reject_a_bad_sparsity_before_any_work(logistic_problem, no_work, kwargs, match):
  with pytest.raises(ValueError, match=match):
    dp_iht.run(logistic_problem, jax.random.key(0), dp_iht.Params(), passes=3, **(dict(sparsity=2) | kwargs))
  with pytest.raises(ValueError, match=match):
    dp_iht.fit(logistic_problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=3,
               **(dict(sparsity=2) | kwargs))


@pytest.mark.parametrize("kwargs, match", [
    (dict(params=dp_iht.Params(0.0)), "step_size"),
    (dict(params=dp_iht.Params(-1.0)), "step_size"),
    (dict(params=dp_iht.Params(0.5, clip=0.0)), "clip"),
    (dict(params=dp_iht.Params(0.5, np.inf, 1.0, 0.0)), "clip"),
    (dict(params=dp_iht.Params(0.5, 1.0, -0.1, 1.0)), "selection_noise"),
    (dict(params=dp_iht.Params(0.5, 1.0, 1.0, np.nan)), "update_noise"),
    (dict(params=dg.dp_gcd.Params()), "params"),
    (dict(passes=0), "passes"),
])
def test_run_rejects_bad_input_by_name(logistic_problem, kwargs, match):
  args = dict(params=dp_iht.Params(0.5, 1.0, 1.0, 1.0), passes=3, sparsity=2) | kwargs
  with pytest.raises(ValueError, match=match):
    dp_iht.run(logistic_problem, jax.random.key(0), **args)


@pytest.mark.parametrize("kwargs, match", [
    (dict(passes=0), "passes"),
    (dict(epsilon=0.0), "epsilon"),
    (dict(delta=1.0), "delta"),
    (dict(selection_share=0.0), "selection_share"),
    (dict(selection_share=1.0), "selection_share"),
])
def test_fit_rejects_bad_input_by_name(logistic_problem, kwargs, match):
  args = dict(epsilon=1.0, delta=DELTA, passes=3, sparsity=2) | kwargs
  with pytest.raises(ValueError, match=match):
    dp_iht.fit(logistic_problem, jax.random.key(0), **args)


def test_ledger_rejects_bad_counts_by_name():
  with pytest.raises(ValueError, match="steps"):
    dp_iht.iht_ledger(1.0, 1.0, -1, 2)
  with pytest.raises(ValueError, match="sparsity"):
    dp_iht.iht_ledger(1.0, 1.0, 3, 0)
  with pytest.raises(ValueError, match="update_noise"):
    dp_iht.iht_ledger(1.0, -1.0, 3, 2)
