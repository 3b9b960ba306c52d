"""`dpgcd_jax.transforms`: the optax transformation gives the solver's iterates and trains in an optax loop."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import dpgcd_jax as dg

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)


def _data(n=60, p=7, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  return X, np.where(X @ rng.normal(size=p) > 0, 1.0, -1.0)


def _logistic(w, x, y):
  return jnp.logaddexp(0.0, -y * (x @ w))


@pytest.mark.slow
@pytest.mark.parametrize("selection, update", [("laplace", "laplace"), ("gumbel", "gaussian")])
def test_optax_chain_gives_the_solver_iterates_for_the_same_key(selection, update):
  X, y = _data()
  l2, step_size, steps, key = 0.01, 0.7, 25, jax.random.key(4)
  problem = dg.make_problem(X, y, "logistic", l2=l2, smoothness=0.25 * np.mean(X**2, axis=0))
  params = dg.dp_gcd.Params(step_size, 1.5, 4.0, 4.0)
  solver = dg.dp_gcd.run(problem, key, params, passes=steps, selection=selection, update=update)

  tx = optax.chain(
      dg.dp_greedy_coordinate(problem.smoothness, key=key, clip=1.5, selection_noise=4.0,
                              update_noise=4.0, l2=l2, curvature=0.25, selection=selection,
                              update=update),
      optax.scale(-step_size))
  per_example_grads = jax.jit(jax.vmap(jax.grad(_logistic), (None, 0, 0)))
  w = jnp.zeros(7)
  state = tx.init(w)
  for _ in range(steps):
    updates, state = tx.update(per_example_grads(w, X, y), state, w)
    w = optax.apply_updates(w, updates)
  np.testing.assert_allclose(w, solver.w, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_pytree_parameters_train_and_loss_decreases():
  X, y = _data(n=200)
  params = {"a": jnp.zeros(3), "b": jnp.zeros(4)}
  loss = lambda prm, x, y: _logistic(jnp.concatenate([prm["a"], prm["b"]]), x, y)
  tx = optax.chain(dg.dp_greedy_coordinate(jnp.full(7, 0.25), key=jax.random.key(0), clip=1.0,
                                           selection_noise=1.0, update_noise=1.0), optax.scale(-1.0))
  state = tx.init(params)
  mean_loss = lambda prm: jnp.mean(jax.vmap(loss, (None, 0, 0))(prm, X, y))
  start = mean_loss(params)
  for _ in range(30):
    grads = jax.vmap(jax.grad(loss), (None, 0, 0))(params, X, y)
    updates, state = tx.update(grads, state, params)
    params = optax.apply_updates(params, updates)
  assert mean_loss(params) < 0.9 * start


def test_gradients_without_a_batch_axis_are_rejected():
  tx = dg.dp_greedy_coordinate(jnp.ones(3), key=jax.random.key(0), clip=1.0, selection_noise=1.0,
                               update_noise=1.0)
  w = jnp.zeros(3)
  with pytest.raises(ValueError, match="leading batch axis"):
    tx.update(jnp.ones(3), tx.init(w), w)


def test_a_second_init_returns_the_same_state_and_replays_the_noise():
  """As docs/guide.md ("optax composition") and docs/privacy.md ("Keys") say: `init` refuses
  nothing; every call returns step 0 and the transformation's key, so the noise repeats."""
  tx = dg.dp_greedy_coordinate(jnp.ones(3), key=jax.random.key(0), clip=1.0, selection_noise=1.0,
                               update_noise=1.0)
  w = jnp.zeros(3)
  first, second = tx.init(w), tx.init(w + 1.0)
  assert int(first.count) == int(second.count) == 0
  np.testing.assert_array_equal(jax.random.key_data(first.key), jax.random.key_data(second.key))
  grads = jnp.asarray(np.random.default_rng(0).normal(size=(8, 3)))
  np.testing.assert_array_equal(tx.update(grads, first, w)[0], tx.update(grads, second, w)[0])


@pytest.mark.parametrize("kwargs, match", [
    (dict(key=3), "key"), (dict(clip=-1.0), "clip"), (dict(update_noise=-2.0), "update_noise"),
    (dict(selection="top"), "selection"),
])
def test_bad_hyperparameters_are_rejected(kwargs, match):
  args = dict(key=jax.random.key(0), clip=1.0, selection_noise=1.0, update_noise=1.0)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dg.dp_greedy_coordinate(jnp.ones(3), **args)


def _train(tx, X, y, w, steps, loss):
  per_example_grads = jax.vmap(jax.grad(loss), (None, 0, 0))

  @jax.jit
  def one(w, state):
    updates, state = tx.update(per_example_grads(w, X, y), state, w)
    return optax.apply_updates(w, updates), state

  state = tx.init(w)
  for _ in range(steps):
    w, state = one(w, state)
  return w


def _squared(w, x, y):
  return 0.5 * (x @ w - y) ** 2


def test_jitted_noise_free_transform_with_l1_reaches_the_lasso_optimum():
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  X = rng.normal(size=(80, 10))
  y = X @ np.where(np.arange(10) < 3, 2.0, 0.0) + 0.1 * rng.normal(size=80)
  alpha = 0.1
  M = np.mean(X**2, axis=0)
  tx = optax.chain(dg.dp_greedy_coordinate(M, key=jax.random.key(0), clip=np.inf, selection_noise=0.0,
                                           update_noise=0.0, penalty=dg.penalties.L1(alpha)),
                   optax.scale(-1.0))
  w = _train(tx, X, y, jnp.zeros(10), 400, _squared)
  lasso = linear_model.Lasso(alpha=alpha, fit_intercept=False, tol=1e-12, max_iter=100_000).fit(X, y)
  np.testing.assert_allclose(w, lasso.coef_, atol=1e-6)


@pytest.mark.parametrize("rule", ["gs-s", "gs-r"])  # gs-q runs without noise only (greedy.check_private_rule)
def test_jitted_transform_with_a_penalty_equals_the_solver_for_the_same_key(rule):
  X, y = _data()
  M = 0.25 * np.mean(X**2, axis=0)
  key, steps, step_size, pen = jax.random.key(7), 20, 0.8, dg.penalties.ElasticNet(0.02, 0.5)
  problem = dg.make_problem(X, y, "logistic", penalty=pen, smoothness=M)
  params = dg.dp_gcd.Params(step_size, 1.0, 3.0, 3.0)
  solver = dg.dp_gcd.run(problem, key, params, passes=steps, rule=rule)
  tx = optax.chain(dg.dp_greedy_coordinate(M, key=key, clip=1.0, selection_noise=3.0, update_noise=3.0,
                                           curvature=0.25, penalty=pen, step_size=step_size, rule=rule),
                   optax.scale(-step_size))
  w = _train(tx, X, y, jnp.zeros(7), steps, _logistic)
  np.testing.assert_allclose(w, solver.w, rtol=1e-9, atol=1e-12)


def test_half_precision_gradients_are_promoted_before_the_exact_mean():
  """float16 per-example gradients overflowed the fixed-point grid: neighbours' updates were 0.0031 vs
  -4096 (review). Promoted, the same key moves one coordinate by about the sensitivity at most."""
  updates = []
  for first in (-100.0, 0.0):
    G = jnp.zeros((64, 1), jnp.float16).at[:, 0].set(-100.0).at[0, 0].set(first)
    tx = dg.dp_greedy_coordinate(smoothness=jnp.ones(1), key=jax.random.key(0), clip=100.0, selection_noise=1.0,
                                 update_noise=1.0)
    u, _ = tx.update(G, tx.init(jnp.zeros(1, jnp.float16)), jnp.zeros(1, jnp.float16))
    assert u.dtype == jnp.float16
    updates.append(float(u[0]))
  assert abs(updates[0] - updates[1]) <= 2 * 2 * 100.0 / 64  # the mean moves by 2 C / n; one noise draw
