"""`dpgcd_jax.solvers.dp_cd`, `dpgcd_jax.solvers.dp_sgd`, `dpgcd_jax.solvers.reference`: proximal DP-GCD, DP-CD, DP-SGD
and the reference solver: optima, limits, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import linear_model

import dpgcd_jax as dg
from dpgcd_jax.solvers import dp_sgd

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)


def _data(n=120, p=20, seed=0, classification=False):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  w = np.zeros(p)
  w[:4] = [2.0, -1.5, 1.0, 0.8]
  y = X @ w + 0.5 * rng.normal(size=n)
  return X, (np.where(y > 0, 1.0, -1.0) if classification else y)


def _lasso():
  X, y = _data()
  lam = 0.1 * np.max(np.abs(X.T @ y)) / X.shape[0]
  w = linear_model.Lasso(alpha=lam, fit_intercept=False, tol=1e-14, max_iter=200_000).fit(X, y).coef_
  return dg.make_problem(X, y, "squared", penalty=dg.penalties.L1(lam)), w


def _elastic_net():
  X, y = _data(seed=1)
  lam = 0.1 * np.max(np.abs(X.T @ y)) / X.shape[0]
  w = linear_model.ElasticNet(alpha=lam, l1_ratio=0.5, fit_intercept=False, tol=1e-14,
                              max_iter=200_000).fit(X, y).coef_
  return dg.make_problem(X, y, "squared", penalty=dg.penalties.ElasticNet(lam, 0.5)), w


def _l1_logistic():
  X, y = _data(seed=2, classification=True)
  n, lam = X.shape[0], 0.02
  clf = linear_model.LogisticRegression(C=1.0 / (n * lam), l1_ratio=1.0, solver="liblinear",
                                        fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
  return dg.make_problem(X, y, "logistic", penalty=dg.penalties.L1(lam)), clf.coef_.ravel()


def _l2_logistic():
  X, y = _data(seed=3, classification=True)
  n, lam = X.shape[0], 0.05
  clf = linear_model.LogisticRegression(C=1.0 / (n * lam), fit_intercept=False, tol=1e-12,
                                        max_iter=100_000).fit(X, y)
  return dg.make_problem(X, y, "logistic", penalty=dg.penalties.L2(lam)), clf.coef_.ravel()


CASES = {"lasso": _lasso, "elastic_net": _elastic_net, "l1_logistic": _l1_logistic,
         "l2_logistic": _l2_logistic}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
  problem, w_sklearn = CASES[request.param]()
  return request.param, problem, w_sklearn


def _check_optimum(problem, w, w_sklearn):
  f_sk = float(dg.objective(problem, jnp.asarray(w_sklearn)))
  f = float(dg.objective(problem, w))
  assert abs(f - f_sk) / f_sk < 1e-6, (f, f_sk)
  np.testing.assert_array_equal(np.asarray(w) != 0, np.abs(w_sklearn) > 1e-8)


def test_reference_solver_reaches_the_sklearn_optimum_with_a_certificate(case):
  _, problem, w_sklearn = case
  solution = dg.reference.solve(problem, tol=1e-10)
  assert bool(solution.converged) and float(solution.subdiff_distance) <= 1e-10
  _check_optimum(problem, solution.w, w_sklearn)


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["gs-s", "gs-r", "gs-q"])
def test_noise_free_proximal_dp_gcd_reaches_the_sklearn_optimum(case, rule):
  _, problem, w_sklearn = case
  result = dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(), passes=3000, rule=rule,
                         store_objective=False)
  _check_optimum(problem, result.w, w_sklearn)


def test_dp_cd_without_noise_and_clipping_is_plain_randomized_cd():
  problem, _ = _lasso()
  key, passes = jax.random.key(7), 3
  result = dg.dp_cd.run(problem, key, dg.dp_cd.Params(step_size=0.8), passes=passes)
  X, y = np.asarray(problem.X), np.asarray(problem.y)
  M, lam = np.mean(X**2, axis=0), float(problem.penalty.strength)
  w = np.zeros(X.shape[1])
  for t in range(passes * X.shape[1]):
    j = int(dg.dp_cd.coordinate_of_step(jax.random.split(jax.random.fold_in(key, t))[0], X.shape[1]))
    g_j = X[:, j] @ (X @ w - y) / X.shape[0]
    v, step = w[j] - 0.8 * g_j / M[j], 0.8 / M[j]
    w[j] = np.sign(v) * max(abs(v) - step * lam, 0.0)
  np.testing.assert_allclose(result.w, w, rtol=1e-10, atol=1e-12)


def test_dp_sgd_without_noise_and_clipping_is_plain_sgd_on_the_same_batches():
  problem, _ = _l1_logistic()
  key, n, batch = jax.random.key(3), problem.num_examples, 10
  result = dg.dp_sgd.run(problem, key, dg.dp_sgd.Params(step_size=0.3), passes=2, batch_size=batch)
  X, y = np.asarray(problem.X), np.asarray(problem.y)
  lam, q = float(problem.penalty.strength), batch / n
  w = np.zeros(X.shape[1])
  sample = jax.jit(lambda t: dp_sgd.sample_batch(jax.random.split(jax.random.fold_in(key, t))[0], n, q,
                                                 dp_sgd.max_batch_size(n, q)))
  for t in range(2 * (n // batch)):
    idx, valid = sample(t)
    idx = np.asarray(idx)[np.asarray(valid)]
    grad_sum = X[idx].T @ (-y[idx] / (1.0 + np.exp(y[idx] * (X[idx] @ w))))
    v = w - 0.3 * grad_sum / (q * n)
    w = np.sign(v) * np.maximum(np.abs(v) - 0.3 * lam, 0.0)
  np.testing.assert_allclose(result.w, w, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_poisson_sampling_includes_each_example_with_probability_q():
  n, q, draws = 40, 0.15, 20_000
  idx, valid = jax.vmap(lambda k: dp_sgd.sample_batch(k, n, q, dp_sgd.max_batch_size(n, q)))(
      jax.random.split(jax.random.key(0), draws))
  counts = np.zeros(n)
  np.add.at(counts, np.asarray(idx)[np.asarray(valid)], 1)
  # Each count ~ Binomial(draws, q): within 5 standard deviations.
  assert np.all(np.abs(counts - draws * q) < 5 * np.sqrt(draws * q * (1 - q)))
  sizes = np.asarray(valid).sum(axis=1)
  assert abs(sizes.var() - n * q * (1 - q)) < 0.1 * n * q * (1 - q)  # Binomial batch sizes


@pytest.mark.slow
def test_passes_are_counted_the_same_way():
  problem, _ = _lasso()
  p, n = problem.num_features, problem.num_examples
  gcd = dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(), passes=4, store_objective=True)
  cd = dg.dp_cd.run(problem, jax.random.key(0), dg.dp_cd.Params(), passes=4, store_objective=True)
  sgd = dg.dp_sgd.run(problem, jax.random.key(0), dg.dp_sgd.Params(step_size=0.01), passes=4,
                      batch_size=8, store_objective=True)
  assert gcd.trace.nonprivate_objective.shape == cd.trace.nonprivate_objective.shape == (5,)
  assert sgd.trace.nonprivate_objective.shape == (5,)
  assert cd.trace.coordinates.shape == (4 * p,)
  assert sgd.trace.coordinates is None and n // 8 == 15


@pytest.mark.parametrize("call, match", [
    (lambda pb: dg.dp_cd.run(pb, jax.random.key(0), dg.dp_cd.Params(noise=-1.0), passes=1), "noise"),
    (lambda pb: dg.dp_cd.run(pb, jax.random.key(0), dg.dp_cd.Params(), passes=0), "passes"),
    (lambda pb: dg.dp_sgd.run(pb, jax.random.key(0), dg.dp_sgd.Params(), passes=1, batch_size=10_000),
     "batch_size"),
    (lambda pb: dg.dp_sgd.run(pb, jax.random.key(0), dg.dp_sgd.Params(step_size=0.0), passes=1),
     "step_size"),
    (lambda pb: dg.dp_sgd.run(pb, 42, dg.dp_sgd.Params(), passes=1), "key"),
    (lambda pb: dg.reference.solve(pb, tol=-1.0), "tol"),
])
def test_bad_input_raises_a_value_error_naming_it(call, match):
  problem, _ = _lasso()
  with pytest.raises(ValueError, match=match):
    call(problem)
