"""`dpgcd_jax.solvers.two_stage`: the two-stage solver: the restricted optimum, DP-GCD on the selected columns, stage
1's law, one ledger, vmap."""

import math

import dp_accounting
import jax
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import sparse
from scipy import stats
from sklearn import linear_model

import dpgcd_jax as dg
from dpgcd_jax.privacy import BoundedRange
from dpgcd_jax.privacy import Laplace
from dpgcd_jax.privacy import PureDp
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import two_stage

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

DELTA = 1e-6


def _sparse_regression(n=200, p=20, seed=0, noise=0.3):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  w = np.zeros(p)
  w[:3] = [2.0, -1.5, 1.0]
  return X, X @ w + noise * rng.normal(size=n)


# ------------------------------------------------------------------------------------------
# Noise-free correctness: the top-s correlations, then the optimum on those columns.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("l1", [0.0, 0.05])
def test_noise_free_two_stage_is_the_restricted_optimum_on_the_top_correlations(l1):
  X, y = _sparse_regression()
  s = 5
  problem = dg.make_problem(X, y, "squared", penalty=dg.penalties.L1(l1))  # one program for both
  result = two_stage.run(problem, jax.random.key(0), two_stage.Params(), passes=400, sparsity=s)
  M = np.mean(X**2, axis=0)
  support = np.sort(np.argsort(-np.abs(X.T @ y) / np.sqrt(M), kind="stable")[:s])  # stage 1, NumPy
  assert set(range(3)) <= set(support)
  w = np.asarray(result.w)
  np.testing.assert_array_equal(w[np.setdiff1d(np.arange(X.shape[1]), support)], 0.0)
  assert set(np.asarray(result.trace.coordinates)) <= set(support)
  if l1:  # scikit-learn's Lasso: 1/(2n) ||y - Xw||^2 + alpha ||w||_1, on the selected columns
    reference = linear_model.Lasso(alpha=l1, fit_intercept=False, tol=1e-14, max_iter=100_000)
  else:
    reference = linear_model.LinearRegression(fit_intercept=False)
  np.testing.assert_allclose(w[support], reference.fit(X[:, support], y).coef_, rtol=1e-7, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["coordinate", "derivative"])
def test_noisy_run_is_dp_gcd_on_the_selected_columns_dense_and_sparse(mode):
  """Derivative clipping too: the run's features' limbs, restricted to the support, are those of
  the selected columns themselves (the step on `sub` makes its own)."""
  X, y = _sparse_regression(n=80, p=10, seed=1)  # the shapes of logistic_problem: one program
  X = X * (np.random.default_rng(2).uniform(size=X.shape) < 0.5)
  y = np.where(y > 0, 1.0, -1.0)
  key, passes, s = jax.random.key(4), 15, 3
  params = two_stage.Params(0.8, 1.0, 0.5, 3.0, 3.0)
  runs = [two_stage.run(dg.make_problem(A, y, "logistic", feature_bound=4.0), key, params, passes=passes,
                        sparsity=s, clipping_mode=mode) for A in (X, sparse.csr_matrix(X))]
  np.testing.assert_allclose(runs[0].w, runs[1].w, rtol=1e-12, atol=1e-14)
  np.testing.assert_array_equal(runs[0].trace.coordinates, runs[1].trace.coordinates)
  problem = dg.make_problem(X, y, "logistic", feature_bound=4.0)
  cast = base.cast_params(two_stage.SOLVER, problem, params)
  key_support = jax.random.split(jax.random.fold_in(key, 0))[0]
  select = jax.jit(two_stage.select_support, static_argnames=("sparsity",))
  support = np.sort(np.asarray(select(key_support, problem, two_stage.init(problem), cast, sparsity=s)[0]))
  # DP-GCD on a problem built from the selected columns by hand, with the same keys.
  sub = dg.make_problem(X[:, support], y, "logistic", feature_bound=4.0)
  gcd_params = base.cast_params(dg.dp_gcd.SOLVER, sub, dg.dp_gcd.Params(0.8, 1.0, 3.0, 3.0))
  step = jax.jit(dg.dp_gcd.step, static_argnames=("clipping_mode",))
  state, coordinates = dg.dp_gcd.init(sub), []
  for t in range(passes):
    state, info = step(jax.random.split(jax.random.fold_in(key, t))[1], state, sub, gcd_params, clipping_mode=mode)
    coordinates.append(support[int(info.coordinate)])
  expected = np.zeros(X.shape[1])
  expected[support] = np.asarray(state.w)
  np.testing.assert_allclose(runs[0].w, expected, rtol=1e-10, atol=1e-12)
  np.testing.assert_array_equal(runs[0].trace.coordinates, coordinates)


# ------------------------------------------------------------------------------------------
# Stage 1: the law of the peeling at temperature b_0 Delta_bar.
# ------------------------------------------------------------------------------------------


def test_stage_one_peels_the_normalized_gradient_at_temperature_b0_delta_bar():
  rng = np.random.default_rng(3)
  n, p, b0, draws = 20, 3, 0.05, 20_000
  X = rng.uniform(-1.0, 1.0, size=(n, p))
  y = rng.uniform(-1.0, 1.0, size=n)
  problem = dg.make_problem(X, y, "squared", feature_bound=1.0)  # M_j = 1: C_j = clip = 1
  cast = base.cast_params(two_stage.SOLVER, problem, two_stage.Params(1.0, 1.0, b0))
  state = two_stage.init(problem)
  keys = jax.random.split(jax.random.key(7), draws)
  support = lambda k: two_stage.select_support(k, problem, state, cast, sparsity=2)[0]
  pairs = np.asarray(jax.jit(jax.vmap(support))(keys))
  u = np.abs(X.T @ y / n)  # |g_j(0)| / sqrt(M_j): per-example gradients in [-1, 1], no clipping

  def p_value(tau):
    weights = np.exp((u - u.max()) / tau)
    probs = {(a, b): weights[a] / weights.sum() * weights[b] / (weights.sum() - weights[a])
             for a in range(p) for b in range(p) if a != b}
    counts = [np.sum((pairs[:, 0] == a) & (pairs[:, 1] == b)) for a, b in probs]
    return stats.chisquare(counts, np.array(list(probs.values())) * draws).pvalue

  tau = b0 * 2.0 / n  # Delta_bar = 2 C / (n sqrt(M)), rounding negligible
  assert p_value(tau) > 1e-3
  assert p_value(2 * tau) < 1e-12 and p_value(tau / 2) < 1e-12


# ------------------------------------------------------------------------------------------
# One ledger for both stages, calibrated once; independent bounds.
# ------------------------------------------------------------------------------------------


def test_fit_report_composes_both_stages_and_meets_the_target():
  X, y = _sparse_regression(n=100, p=10)
  problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
  steps, s, target, share = 20, 3, 1.0, 0.25
  result = two_stage.fit(problem, jax.random.key(0), epsilon=target, delta=DELTA, passes=steps, sparsity=s)
  report = result.privacy
  assert report.epsilon <= target and report.delta == DELTA
  (l0, support, c0), (l1, selection, c1), (l2, update, c2) = report.entries
  assert (l0, c0, l1, c1, l2, c2) == ("support selection", s, "selection", steps, "update", steps)
  assert isinstance(support, BoundedRange) and isinstance(selection, PureDp) and isinstance(update, Laplace)
  b0, b, b_upd = 2.0 / support.epsilon, 2.0 / selection.epsilon, 1.0 / update.epsilon
  assert b == pytest.approx(b_upd, rel=1e-12)  # DP-GCD's default: equal multipliers
  rho_1, rho_2 = s * 0.5 / b0**2, steps * (2.0 + 0.5) / b**2  # the documented zCDP split
  assert rho_1 / (rho_1 + rho_2) == pytest.approx(share, rel=1e-12)
  ledger = lambda k: two_stage.two_stage_ledger(b0 * k, b * k, b * k, steps=steps, sparsity=s)
  assert ledger(1.0).epsilon(DELTA) == pytest.approx(report.epsilon, rel=1e-12)
  assert ledger(1 / 1.001).epsilon(DELTA) > target  # tight: one calibration of both stages
  # Independent bounds with dp_accounting's PLD: every part as eps-DP randomized response (or
  # Laplace) from above; the stage-2 parts alone, optimistic, from below.
  for pessimistic in (True, False):
    rr = lambda eps, pessimistic=pessimistic: pld_lib.from_randomized_response(
        2.0 / (1.0 + math.exp(eps)), 2, value_discretization_interval=1e-4, pessimistic_estimate=pessimistic)
    laplace = pld_lib.from_laplace_mechanism(b, value_discretization_interval=1e-4, use_connect_dots=pessimistic,
                                             pessimistic_estimate=pessimistic)
    stage2 = rr(selection.epsilon).self_compose(steps).compose(laplace.self_compose(steps))
    if pessimistic:
      assert report.epsilon <= stage2.compose(rr(support.epsilon).self_compose(s)).get_epsilon_for_delta(DELTA)
    else:
      assert report.epsilon >= stage2.get_epsilon_for_delta(DELTA)
  assert np.count_nonzero(np.asarray(result.w)) <= s


def test_fit_gumbel_gaussian_report_against_zcdp_and_dp_accounting_rdp():
  X, y = _sparse_regression(n=100, p=10)
  problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
  steps, s = 20, 3
  report = two_stage.fit(problem, jax.random.key(1), epsilon=1.0, delta=DELTA, passes=steps, sparsity=s,
                         selection="gumbel", update="gaussian", support_share=0.5).privacy
  (_, support, _), (_, selection, _), (_, update, _) = report.entries
  rho = s * support.epsilon**2 / 8 + steps * selection.epsilon**2 / 8 + steps / (2 * update.noise**2)
  assert s * support.epsilon**2 / 8 == pytest.approx(rho / 2, rel=1e-12)  # support_share = 0.5
  assert report.epsilon <= 1.0 <= rho + 2.0 * math.sqrt(rho * math.log(1.0 / DELTA))
  rdp = dp_accounting.rdp.RdpAccountant()
  rdp.compose(dp_accounting.ZCDpEvent(support.epsilon**2 / 8), s)
  rdp.compose(dp_accounting.ZCDpEvent(selection.epsilon**2 / 8), steps)
  rdp.compose(dp_accounting.GaussianDpEvent(update.noise), steps)
  assert 0.8 * rdp.get_epsilon(DELTA) <= report.epsilon <= rdp.get_epsilon(DELTA) * (1 + 1e-9)


@pytest.mark.slow
def test_fit_releases_a_feature_bound_when_the_smoothness_is_not_public():
  X, y = _sparse_regression(n=100, p=10)
  result = two_stage.fit(dg.make_problem(X, y, "squared"), jax.random.key(2), epsilon=1.0, delta=DELTA,
                         passes=10, sparsity=3)
  entries = {e.label: e for e in result.privacy.entries}
  assert sorted(entries) == ["feature bound", "sampler draws", "selection", "support selection", "update"]
  assert entries["feature bound"].event == PureDp(0.1)
  assert entries["support selection"].count == 3 and entries["selection"].count == 10
  assert result.privacy.epsilon <= 1.0 and np.count_nonzero(np.asarray(result.w)) <= 3


def test_the_ledger_counts_one_peeling_per_run():
  ledger = two_stage.two_stage_ledger(4.0, 5.0, 6.0, steps=3 * 10, sparsity=2, runs=3, selection="gumbel",
                                      update="gaussian")
  assert [(e.label, e.count) for e in ledger] == [("support selection", 6), ("selection", 30), ("update", 30)]
  assert [e.event for e in ledger] == [BoundedRange(0.5), BoundedRange(0.4), dg.privacy.Gaussian(6.0)]


@pytest.mark.slow
def test_a_discrete_selection_makes_stage_one_secure_peeling(logistic_problem):
  """With `selection="discrete_laplace"` the support is drawn by secure peeling (`PureDp`
  rounds in the ledger, the same support as the float peeling without noise) and a failed
  discrete draw (a scale beyond the samplers' range) releases NaN, not a model."""
  ledger = two_stage.two_stage_ledger(4.0, 5.0, 6.0, steps=10, sparsity=2, selection="discrete_laplace",
                                      update="discrete_gaussian")
  assert [type(e.event).__name__ for e in ledger] == ["PureDp", "PureDp", "DiscreteGaussian"]
  secure = dict(selection="discrete_laplace", update="discrete_gaussian")
  exact = two_stage.Params(0.8, 1.0, 0.0, 0.0, 0.0)
  float_run = two_stage.run(logistic_problem, jax.random.key(0), exact, passes=5, sparsity=3)
  secure_run = two_stage.run(logistic_problem, jax.random.key(0), exact, passes=5, sparsity=3, **secure)
  np.testing.assert_array_equal(np.asarray(secure_run.w), np.asarray(float_run.w))
  fit = two_stage.fit(logistic_problem, jax.random.key(1), epsilon=1.0, delta=1e-5, passes=5, sparsity=3, **secure)
  assert {type(e.event).__name__ for e in fit.privacy.entries} == {"PureDp", "DiscreteGaussian", "DiscreteDraws"}
  assert np.all(np.isfinite(np.asarray(fit.w)))
  too_large = two_stage.Params(0.8, 1.0, 1e9, 1.0, 1.0)  # support noise beyond MAX_SCALE grid steps
  failed = two_stage.run(logistic_problem, jax.random.key(0), too_large, passes=2, sparsity=3, **secure)
  assert np.all(np.isnan(np.asarray(failed.w)))


# ------------------------------------------------------------------------------------------
# vmap over keys and hyperparameters; no recompilation.
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def logistic_problem():
  X, y = _sparse_regression(n=80, p=10, seed=2)
  return dg.make_problem(X, np.where(y > 0, 1.0, -1.0), "logistic", feature_bound=4.0)


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
    (dict(sparsity=1.5), "sparsity"),
    (dict(selection="nope"), "selection"),
    (dict(update="nope"), "update"),
    (dict(rule="nope"), "rule"),
    (dict(clipping_mode="nope"), "clipping"),
])
def test_run_and_fit_reject_bad_options_before_any_work(logistic_problem, no_work, kwargs, match):
  with pytest.raises(ValueError, match=match):
    two_stage.run(logistic_problem, jax.random.key(0), two_stage.Params(), passes=3, **(dict(sparsity=2) | kwargs))
  with pytest.raises(ValueError, match=match):
    two_stage.fit(logistic_problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=3,
                  **(dict(sparsity=2) | kwargs))


@pytest.mark.parametrize("kwargs, match", [
    (dict(params=two_stage.Params(0.0)), "step_size"),
    (dict(params=two_stage.Params(1.0, 0.0)), "clip"),
    (dict(params=two_stage.Params(1.0, np.inf, 1.0)), "clip"),
    (dict(params=two_stage.Params(1.0, 1.0, -1.0)), "support_noise"),
    (dict(params=dg.dp_gcd.Params()), "params"),
    (dict(passes=0), "passes"),
])
def test_run_rejects_bad_input_by_name(logistic_problem, kwargs, match):
  args = dict(params=two_stage.Params(1.0, 1.0, 1.0, 1.0, 1.0), passes=3, sparsity=2) | kwargs
  with pytest.raises(ValueError, match=match):
    two_stage.run(logistic_problem, jax.random.key(0), **args)


@pytest.mark.parametrize("kwargs, match", [
    (dict(support_share=0.0), "support_share"),
    (dict(support_share=1.0), "support_share"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(passes=0), "passes"),
])
def test_fit_rejects_bad_input_by_name(logistic_problem, kwargs, match):
  args = dict(epsilon=1.0, delta=DELTA, passes=3, sparsity=2) | kwargs
  with pytest.raises(ValueError, match=match):
    two_stage.fit(logistic_problem, jax.random.key(0), **args)
