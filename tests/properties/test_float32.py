"""`dpgcd_jax.solvers.dp_gcd`: the core checks in float32, the dtype most users and the experiments run.

The rest of the suite runs in float64 (``conftest.py``) for tight comparisons; here every test
turns x64 off for its body, builds float32 problems and compares with float32 tolerances.
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpy_reference
import optax
import pytest
import scipy.sparse
from scipy import stats

import dpgcd_jax as dg


@pytest.fixture(autouse=True)
def float32_mode():
  with jax.enable_x64(False):
    yield


def _data(n=100, p=12, seed=0):
  rng = np.random.default_rng(seed)
  X = (rng.normal(size=(n, p)) * rng.uniform(0.5, 2.0, size=p)).astype(np.float32)
  y = (X @ rng.normal(size=p) + rng.normal(size=n)).astype(np.float32)
  return X, y


def test_problems_are_float32():
  X, y = _data()
  problem = dg.make_problem(X, y, "squared", feature_bound=3.0)
  assert problem.XT.dtype == problem.smoothness.dtype == jnp.float32
  result = dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=5)
  assert result.w.dtype == jnp.float32


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_noise_free_trajectory_follows_numpy_in_float32(loss):
  X, y = _data()
  if loss == "logistic":
    y = np.where(y > 0, 1.0, -1.0).astype(np.float32)
  steps = 30
  params = dg.dp_gcd.Params(1.0, jnp.inf, 0.0, 0.0)
  result = dg.dp_gcd.run(dg.make_problem(X, y, loss, l2=0.05), jax.random.key(0), params, passes=steps)
  w_np, coords_np = numpy_reference.dp_gcd(X.astype(np.float64), y.astype(np.float64), loss,
                                           steps=steps, l2=0.05)
  assert np.mean(np.asarray(result.trace.coordinates) == coords_np) > 0.9  # near-ties may flip
  np.testing.assert_allclose(result.w, w_np, rtol=2e-3, atol=2e-3)


@pytest.mark.slow
def test_default_fit_learns_in_float32():
  rng = np.random.default_rng(0)
  X = rng.choice([-1.0, 1.0], size=(1000, 200)).astype(np.float32)
  w = np.zeros(200, np.float32)
  w[:5] = 2.0
  y = (X @ w + 0.1 * rng.normal(size=1000)).astype(np.float32)
  problem = dg.make_problem(X, y, "squared")
  f0 = float(dg.objective(problem, jnp.zeros(200)))
  result = dg.dp_gcd.fit(problem, jax.random.split(jax.random.key(1), 4), epsilon=1.0,
                         delta=1e-6, passes=20)
  f = jax.vmap(lambda v: dg.objective(problem, v))(result.w)
  assert np.all(np.asarray(f) < 0.8 * f0)


def test_sparse_equals_dense_in_float32():
  rng = np.random.default_rng(0)
  X = scipy.sparse.random(60, 40, density=0.1, random_state=0, format="csr", dtype=np.float32,
                          data_rvs=lambda k: rng.normal(size=k))
  y = (X @ np.ones(40)).astype(np.float32)
  params = dg.dp_gcd.Params(1.0, 0.5, 2.0, 2.0)
  a = dg.dp_gcd.run(dg.make_problem(X.toarray(), y, feature_bound=2.0), jax.random.key(0), params,
                    passes=20)
  b = dg.dp_gcd.run(dg.make_problem(X, y, feature_bound=2.0), jax.random.key(0), params, passes=20)
  np.testing.assert_array_equal(a.trace.coordinates, b.trace.coordinates)
  np.testing.assert_allclose(a.w, b.w, rtol=1e-5, atol=1e-6)


def test_optax_transformation_equals_the_solver_in_float32():
  X, y = _data(n=80, p=7)
  M = np.mean(X**2, axis=0)
  problem = dg.make_problem(X, y, "squared", smoothness=M)
  key = jax.random.key(4)
  solver = dg.dp_gcd.run(problem, key, dg.dp_gcd.Params(0.7, 1.5, 4.0, 4.0), passes=15)
  tx = optax.chain(dg.dp_greedy_coordinate(M, key=key, clip=1.5, selection_noise=4.0,
                                           update_noise=4.0, step_size=0.7), optax.scale(-0.7))
  grads = jax.jit(jax.vmap(jax.grad(lambda w, x, t: 0.5 * (x @ w - t) ** 2), (None, 0, 0)))
  w, state = jnp.zeros(7), tx.init(jnp.zeros(7))
  for _ in range(15):
    updates, state = tx.update(grads(w, X, y), state, w)
    w = optax.apply_updates(w, updates)
  np.testing.assert_allclose(w, solver.w, rtol=1e-5, atol=1e-6)


def test_update_noise_scale_in_float32():
  """KS test of the Gaussian update noise: right scale accepted, 2/3 and 3/2 rejected."""
  X, y = _data(n=50, p=4)
  problem = dg.make_problem(X, np.zeros(50, np.float32), "squared", smoothness=np.ones(4))
  s, clip = 2.0, 0.5
  params = dg.dp_gcd.Params(1.0, clip, 1e6, s)  # huge selection noise: any coordinate
  step = lambda k: dg.dp_gcd.step(k, dg.dp_gcd.init(problem), problem, params, update="gaussian")
  states, info = jax.vmap(step)(jax.random.split(jax.random.key(0), 4000))
  w = np.asarray(states.w)[np.arange(4000), np.asarray(info.coordinate)]
  sensitivity = 2.0 * clip / 50  # C_j = clip sqrt(M_j / beta) = clip; gradient at 0 is 0
  noise = -w / sensitivity / s  # step 1 / M_j = 1
  assert stats.kstest(noise, stats.norm.cdf).pvalue > 1e-3
  for wrong in (2 / 3, 3 / 2):
    assert stats.kstest(noise / wrong, stats.norm.cdf).pvalue < 1e-6
