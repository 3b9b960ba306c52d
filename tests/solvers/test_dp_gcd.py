"""`dpgcd_jax.solvers.dp_gcd`: DP-GCD against NumPy and scikit-learn, keys, vmap, recompilation, validation."""

import jax
import jax.numpy as jnp
import numpy as np
import numpy_reference
import pytest
from sklearn import linear_model

import dpgcd_jax as dg

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)


def _regression(n=100, p=12, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p)) * rng.uniform(0.5, 2.0, size=p)
  y = X @ rng.normal(size=p) + rng.normal(size=n)
  return X, y


def _classification(n=100, p=12, seed=0):
  X, y = _regression(n, p, seed)
  return X, np.where(y > 0, 1.0, -1.0)


NOISE_FREE = dg.dp_gcd.Params(step_size=1.0, clip=jnp.inf, selection_noise=0.0, update_noise=0.0)


@pytest.mark.parametrize("loss, data", [("squared", _regression), ("logistic", _classification)])
def test_noise_free_trajectory_equals_numpy_greedy_cd_step_for_step(loss, data):
  X, y = data()
  steps = 60
  result = dg.dp_gcd.run(dg.make_problem(X, y, loss, l2=0.05), jax.random.key(0), NOISE_FREE,
                         passes=steps)
  w_np, coords_np = numpy_reference.dp_gcd(X, y, loss, steps=steps, l2=0.05)
  np.testing.assert_array_equal(result.trace.coordinates, coords_np)
  np.testing.assert_allclose(result.w, w_np, rtol=1e-10, atol=1e-12)


def test_noise_free_dp_gcd_reaches_the_sklearn_ridge_optimum():
  X, y = _regression()
  n, l2 = X.shape[0], 0.1
  problem = dg.make_problem(X, y, "squared", l2=l2)
  w_sk = linear_model.Ridge(alpha=n * l2, fit_intercept=False, tol=1e-12).fit(X, y).coef_
  f_star = dg.objective(problem, jnp.asarray(w_sk))
  result = dg.dp_gcd.run(problem, jax.random.key(0), NOISE_FREE, passes=3000, store_objective=True)
  assert (result.trace.nonprivate_objective[-1] - f_star) / f_star < 1e-6


def test_noise_free_dp_gcd_reaches_the_sklearn_l2_logistic_optimum():
  X, y = _classification()
  n, l2 = X.shape[0], 0.05
  problem = dg.make_problem(X, y, "logistic", l2=l2)
  clf = linear_model.LogisticRegression(C=1.0 / (n * l2), fit_intercept=False, tol=1e-12,
                                        max_iter=10_000).fit(X, y)
  f_star = dg.objective(problem, jnp.asarray(clf.coef_.ravel()))
  result = dg.dp_gcd.run(problem, jax.random.key(0), NOISE_FREE, passes=3000, store_objective=True)
  assert (result.trace.nonprivate_objective[-1] - f_star) / f_star < 1e-6


PRIVATE = dg.dp_gcd.Params(step_size=0.5, clip=1.0, selection_noise=3.0, update_noise=3.0)


@pytest.fixture(scope="module")
def problem():
  X, y = _classification(n=80, p=10)
  return dg.make_problem(X, y, "logistic", l2=0.01)


@pytest.mark.parametrize("selection, update", [("laplace", "laplace"), ("gumbel", "gaussian")])
def test_same_key_same_output_and_different_keys_differ(problem, selection, update):
  run = lambda k: dg.dp_gcd.run(problem, k, PRIVATE, passes=20, selection=selection, update=update)
  a, b, c = run(jax.random.key(1)), run(jax.random.key(1)), run(jax.random.key(2))
  np.testing.assert_array_equal(a.w, b.w)
  np.testing.assert_array_equal(a.trace.coordinates, b.trace.coordinates)
  assert not np.array_equal(a.w, c.w)


def test_raw_uint32_keys_are_accepted(problem):
  a = dg.dp_gcd.run(problem, jax.random.PRNGKey(1), PRIVATE, passes=5)
  assert a.w.shape == (10,)


def test_new_hyperparameter_values_do_not_retrace():
  X, y = _classification(n=30, p=5)
  traces = []

  def counting_logistic(z, y):
    traces.append(1)
    return jnp.logaddexp(0.0, -y * z)

  problem = dg.make_problem(X, y, dg.glm_loss(counting_logistic, curvature=0.25))
  traces.clear()
  dg.dp_gcd.run(problem, jax.random.key(0), PRIVATE, passes=4)
  after_first = len(traces)
  assert after_first > 0
  for i, params in enumerate([dg.dp_gcd.Params(0.1, 0.3, 1.0, 7.0), dg.dp_gcd.Params(2.0, 9.0, 0.0, 0.5)]):
    dg.dp_gcd.run(problem, jax.random.key(i + 1), params, passes=4)
  vmapped = jax.jit(jax.vmap(lambda k: dg.dp_gcd.run(problem, k, PRIVATE, passes=4).w))
  vmapped(jax.random.split(jax.random.key(0), 3))
  after_vmap = len(traces)
  vmapped(jax.random.split(jax.random.key(1), 3))
  assert len(traces) == after_vmap
  dg.dp_gcd.run(problem, jax.random.key(0), PRIVATE, passes=5)  # passes is a runtime value: no retrace
  assert len(traces) == after_vmap


@pytest.mark.parametrize("kwargs, match", [
    (dict(params=dg.dp_gcd.Params(step_size=-1.0)), "step_size"),
    (dict(params=dg.dp_gcd.Params(clip=0.0)), "clip"),
    (dict(params=dg.dp_gcd.Params(selection_noise=-0.1)), "selection_noise"),
    (dict(params=dg.dp_gcd.Params(update_noise=np.nan)), "update_noise"),
    (dict(passes=0), "passes"),
    (dict(passes=2.5), "passes"),
    (dict(key=0), "key"),
    (dict(key=np.zeros(3, np.uint32)), "key"),
    (dict(selection="max"), "selection"),
    (dict(update="uniform"), "update"),
    (dict(rule="gs-x"), "rule"),
])
def test_bad_input_raises_a_value_error_naming_it(problem, kwargs, match):
  args = dict(params=PRIVATE, key=jax.random.key(0), passes=3)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dg.dp_gcd.run(problem, args.pop("key"), args.pop("params"), **args)


@pytest.mark.parametrize("call, match", [
    (lambda pb: dg.dp_gcd.run(pb, jax.random.key(0), dg.dp_gcd.Params(clip=np.inf, update_noise=1.0),
                              passes=2), "finite clip"),
    (lambda pb: dg.dp_cd.run(pb, jax.random.key(0), dg.dp_cd.Params(clip=np.inf, noise=1.0), passes=1),
     "finite clip"),
    (lambda pb: dg.dp_sgd.run(pb, jax.random.key(0), dg.dp_sgd.Params(clip=np.inf, noise=1.0), passes=1),
     "finite clip"),
    (lambda pb: dg.dp_gcd.run(pb, jax.random.key(0), dg.dp_gcd.Params(clip=np.ones(3)), passes=2), "clip.shape"),
    (lambda pb: dg.dp_sgd.run(pb, jax.random.key(0), dg.dp_sgd.Params(clip=np.ones(10)), passes=1), "clip.shape"),
    (lambda pb: dg.dp_cd.fit(pb, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=0), "passes"),
    (lambda pb: dg.dp_sgd.fit(pb, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=1, batch_size=10**6),
     "batch_size"),
    (lambda pb: dg.dp_gcd.fit(pb, jax.random.key(0), epsilon=-1.0, delta=1e-5, passes=3), "epsilon"),
    (lambda pb: dg.dp_greedy_coordinate(jnp.zeros(10), key=jax.random.key(0), clip=1.0,
                                        selection_noise=1.0, update_noise=1.0), "smoothness"),
    (lambda pb: dg.dp_greedy_coordinate(jnp.ones(10), key=jax.random.key(0), clip=np.inf,
                                        selection_noise=1.0, update_noise=1.0), "finite clip"),
])
def test_inconsistent_hyperparameters_raise_before_any_work(problem, call, match):
  with pytest.raises(ValueError, match=match):
    call(problem)


@pytest.mark.slow
@pytest.mark.parametrize("num_targets", [1, 3])
def test_runs_on_several_targets_are_the_runs_on_each_target_with_folded_keys(num_targets):
  """`compiled_run(..., targets=Y)` (the estimators' one-vs-rest and regressor runs, in one program;
  one target without batching): row k is the run on `y = Y[k]` keyed by `fold_in(key, k)`."""
  import dataclasses  # pylint: disable=import-outside-toplevel

  from dpgcd_jax.solvers import base  # pylint: disable=import-outside-toplevel
  X, y = _classification()
  problem = dg.make_problem(X, y, "logistic", feature_bound=3.0)
  Y = np.stack([y, -y, np.where(np.arange(y.shape[0]) % 3 == 0, 1.0, -1.0)])[:num_targets]
  params = base.cast_params(dg.dp_gcd.SOLVER, problem, dg.dp_gcd.Params(1.0, 0.5, 2.0, 2.0))
  options = (("clipping_mode", "coordinate"), ("rule", "gs-s"), ("selection", "laplace"), ("update", "laplace"))
  key = jax.random.key(7)
  together = base.compiled_run(dg.dp_gcd.SOLVER, problem, key, params, passes=15, options=options,
                               targets=jnp.asarray(Y, problem.y.dtype))
  assert together.w.shape == (num_targets, X.shape[1])
  for k in range(num_targets):
    alone = base.compiled_run(dg.dp_gcd.SOLVER, dataclasses.replace(problem, y=jnp.asarray(Y[k], problem.y.dtype)),
                              jax.random.fold_in(key, k), params, passes=15, options=options)
    np.testing.assert_array_equal(together.trace.coordinates[k], alone.trace.coordinates)
    np.testing.assert_array_equal(together.w[k], alone.w)
