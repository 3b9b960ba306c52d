"""The clipped means meet the ledger's sensitivity in float32 at large n (issue 16, item 5).

A float32 sum of n clipped terms rounds in a way that depends on every term: at n = 6e6 two
neighbours' means differed by 1.073 x 2C/n. The library sums on a public fixed-point grid
(exactly) and rounds once; the noise uses ``clipping.mean_sensitivity``, which adds that one
rounding (see the docstring of :mod:`dpgcd_jax.clipping`).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import problem as problem_lib

N = 6_000_000
U = 2.0**-24


@pytest.fixture(autouse=True)
def float32_mode():
  with jax.enable_x64(False):
    yield


def _columns(n, rng):
  """(p, n) per-example gradients (squared loss, w = 0, y = -1: the gradient is x), C = 1.

  Record 0 is +C in every column; its neighbour is -C. The others are adversarial for float32
  sums: all at C, just below C, mixed magnitudes, large then tiny, random in [-C, C].
  """
  T = np.empty((8, n), np.float32)
  T[0] = 1.0
  T[1] = rng.uniform(-1.0, 1.0, n)
  T[2] = rng.uniform(0.5, 1.0, n)
  T[3] = np.where(np.arange(n) < n // 2, 1.0, 1e-7)
  T[4] = 1.0 - U
  T[5] = rng.choice([1.0, 3 * U], n)
  T[6] = rng.uniform(0.9, 1.0, n)
  T[7] = np.concatenate([np.full(n // 4, 1.0), rng.uniform(-1e-3, 1e-3, n - n // 4)])
  T[:, 0] = 1.0
  return T


@jax.jit
def _gradient(problem, thresholds):
  w = jnp.zeros(problem.num_features, problem.XT.dtype)
  return problem_lib.clipped_gradient(problem, w, problem_lib.init_margins(problem, w), thresholds)


def _pair(T):
  XT2 = T.copy()
  XT2[:, 0] = -1.0
  y = -np.ones(T.shape[1], np.float32)
  return [dg.make_problem(np.ascontiguousarray(a.T), y, "squared", smoothness=np.ones(8, np.float32))
          for a in (T, XT2)]


def test_worst_case_pair_at_n_6e6_meets_the_sensitivity_in_float32():
  D, D2 = _pair(_columns(N, np.random.default_rng(0)))
  assert D.XT.dtype == jnp.float32
  thresholds = jnp.ones(8, jnp.float32)
  gap = np.abs(np.asarray(_gradient(D, thresholds), np.float64) - np.asarray(_gradient(D2, thresholds)))
  sensitivity = np.asarray(clipping.mean_sensitivity(thresholds, N), np.float64)
  # What the noise is scaled to (the ledger's unit): never exceeded.
  assert np.all(gap <= sensitivity), gap / sensitivity
  # ... and it is 2C/n plus the one final rounding of each mean, nothing more.
  folded = 2.0 / N + 2 * clipping.rounding_bound(jnp.float32)
  np.testing.assert_array_less(sensitivity, folded * (1 + 1e-6))
  assert np.all(gap >= (2.0 / N) * (1 - 1e-6) - 2 * U)  # the pair is the worst case: the gap is 2C/n


def test_the_exact_sum_before_the_rounding_meets_2c_over_n():
  # The accumulation itself: |Q(D) h - Q(D') h| <= 2C (1 + 1e-6), i.e. |g(D) - g(D')| <= 2C/n (1 + 1e-6)
  # before the final rounding (here it is exactly 2C up to the grid).
  T = _columns(N, np.random.default_rng(1))
  thresholds = jnp.ones((8, 1), jnp.float32)
  scale = clipping.grid_scale(thresholds, clipping.grid_bits(jnp.float32, N))

  @jax.jit
  def exact_sum(XT):
    return clipping.exact_sum(clipping.quantize(XT, thresholds, scale), axis=1)

  with jax.enable_x64(True):
    h = 1.0 / np.asarray(scale, np.float64)[:, 0]
  T2 = T.copy()
  T2[:, 0] = -1.0
  q1, q2 = (np.asarray(exact_sum(jnp.asarray(a))) for a in (T, T2))
  gap = np.abs(q1 - q2) * h / N
  assert np.all(gap <= 2.0 / N * (1 + 1e-6)), gap * N / 2
  assert np.all(gap >= 2.0 / N * (1 - 2.0**-21))
  # The exact sum equals a float64 sum of the same quantized terms (integers: order-free).
  q_ref = np.trunc(np.clip(T, -1, 1).astype(np.float64) / h[:, None]).sum(axis=1)
  np.testing.assert_array_equal(q1, q_ref)


def test_the_old_float32_mean_breaks_the_bound():
  # The reason for all this: the plain float32 mean of the same pair (kept as a reference).
  T = _columns(N, np.random.default_rng(0))[:1]
  mean = jax.jit(lambda x: jnp.mean(jnp.clip(x, -1.0, 1.0), axis=1))
  T2 = T.copy()
  T2[:, 0] = -1.0
  gap = float(np.abs(np.asarray(mean(jnp.asarray(T)), np.float64) - np.asarray(mean(jnp.asarray(T2))))[0])
  assert gap > 2.0 / N * (1 + 1e-6)  # 1.073 x 2C/n (the final rounding near |g| = C)


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000, 70_001])
def test_clipped_mean_is_the_rounded_exact_mean_at_every_length(n):
  rng = np.random.default_rng(n)
  G = (rng.standard_cauchy(size=(3, n)) * 0.5).astype(np.float32)
  G[0, : n // 2] = np.inf if n > 1 else G[0, :1]
  C = np.array([[0.3], [1.7], [0.0]], np.float32)
  got = np.asarray(jax.jit(lambda g, c: clipping.clipped_mean(g, c, axis=1))(G, C))
  h = 2.0 ** (np.frexp(C.astype(np.float64))[1] - 1 - clipping.grid_bits(jnp.float32, n))
  finite = np.where(np.isfinite(G), G, 0.0).astype(np.float64)
  q = np.trunc(np.clip(finite, -C, C) / h)
  want = (q.sum(axis=1) * h[:, 0] / n).astype(np.float32)
  np.testing.assert_array_equal(got, want)
  # Within one grid step of the float64 clipped mean.
  np.testing.assert_allclose(got, np.clip(finite, -C, C).mean(axis=1), rtol=0, atol=2 * float(C.max()) * 2.0**-21)


def test_sparse_and_dense_paths_give_identical_exact_means():
  rng = np.random.default_rng(0)
  X = scipy.sparse.random(3000, 40, density=0.1, random_state=0, format="csr", dtype=np.float32)
  X.data = rng.normal(size=X.nnz).astype(np.float32) * 3
  y = rng.normal(size=3000).astype(np.float32)
  sparse = dg.make_problem(X, y, "squared", feature_bound=2.0)
  dense = dg.make_problem(X.toarray(), y, "squared", feature_bound=2.0)
  thresholds = jnp.asarray(rng.uniform(0.1, 2.0, 40).astype(np.float32))
  g_sparse, g_dense = _gradient(sparse, thresholds), _gradient(dense, thresholds)
  np.testing.assert_array_equal(g_sparse, g_dense)
  w = jnp.zeros(40, jnp.float32)
  for j in (0, 17, 39):
    coordinate = [problem_lib.clipped_coordinate_gradient(pb, w, problem_lib.init_margins(pb, w), thresholds, j)
                  for pb in (sparse, dense)]
    np.testing.assert_array_equal(coordinate[0], g_dense[j])
    np.testing.assert_array_equal(coordinate[1], g_dense[j])


def test_infinite_clip_is_the_plain_float_mean():
  rng = np.random.default_rng(0)
  X = rng.normal(size=(500, 12)).astype(np.float32)
  y = rng.normal(size=500).astype(np.float32)
  problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
  g = _gradient(problem, jnp.full(12, jnp.inf, jnp.float32))
  np.testing.assert_allclose(g, -(np.clip(X, -4, 4).T @ y) / 500, rtol=1e-5, atol=1e-6)


def test_a_sparse_column_longer_than_one_int32_group_does_not_overflow():
  """Review finding: a column of 257-1024 stored entries in a problem of n > 1024 records was
  summed in one int32 group sized for its own length (the grid is sized for n): it wrapped."""
  n, nnz = 2000, 285
  rows = np.arange(nnz)
  X = scipy.sparse.csc_matrix((np.ones(nnz), (rows, np.zeros(nnz, int))), shape=(n, 1))
  y = np.full(n, -10.0)  # residuals +10: every stored term clips at +C
  with jax.enable_x64(False):
    problem = dg.make_problem(X.astype(np.float32), y.astype(np.float32), "squared", feature_bound=1.0)
    w = jnp.zeros(1, jnp.float32)
    margins = problem_lib.init_margins(problem, w)
    C = jnp.full(1, 0.9, jnp.float32)
    g = problem_lib.clipped_coordinate_gradient(problem, w, margins, C, jnp.asarray(0))
  np.testing.assert_allclose(float(g), 0.9 * nnz / n, rtol=1e-5)  # wrapped: -0.12775
