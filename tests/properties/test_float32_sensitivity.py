"""`dpgcd_jax.clipping`, `dpgcd_jax.exact_sums`: the clipped means meet the ledger's sensitivity in float32 at large n.

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
from dpgcd_jax import exact_sums
from dpgcd_jax import kernels

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
  return kernels.clipped_gradient(problem, w, kernels.init_margins(problem, w), thresholds)


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
  folded = 2.0 / N + 2 * exact_sums.rounding_bound(jnp.float32)
  np.testing.assert_array_less(sensitivity, folded * (1 + 1e-6))
  assert np.all(gap >= (2.0 / N) * (1 - 1e-6) - 2 * U)  # the pair is the worst case: the gap is 2C/n


def test_the_exact_sum_before_the_rounding_meets_2c_over_n():
  # The accumulation itself: |Q(D) h - Q(D') h| <= 2C (1 + 1e-6), i.e. |g(D) - g(D')| <= 2C/n (1 + 1e-6)
  # before the final rounding (here it is exactly 2C up to the grid).
  T = _columns(N, np.random.default_rng(1))
  thresholds = jnp.ones((8, 1), jnp.float32)
  scale = exact_sums.grid_scale(thresholds, exact_sums.grid_bits(jnp.float32, N))

  @jax.jit
  def exact_sum(XT):
    return exact_sums.exact_sum(clipping.quantize(XT, thresholds, scale), axis=1)

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
  h = 2.0 ** (np.frexp(C.astype(np.float64))[1] - 1 - exact_sums.grid_bits(jnp.float32, n))
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
    coordinate = [kernels.clipped_coordinate_gradient(pb, w, kernels.init_margins(pb, w), thresholds, j)
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
    margins = kernels.init_margins(problem, w)
    C = jnp.full(1, 0.9, jnp.float32)
    g = kernels.clipped_coordinate_gradient(problem, w, margins, C, jnp.asarray(0))
  np.testing.assert_allclose(float(g), 0.9 * nnz / n, rtol=1e-5)  # wrapped: -0.12775


# ----------------------------------------------------------------------------------------
# DP-SGD: the sum of l2-clipped per-example gradients (sensitivity C per record, add/remove;
# 2C for replace-one) is computed exactly, then the noise is added before the one rounding.
# ----------------------------------------------------------------------------------------

N_SGD = 2**20
C_SGD = np.float32(0.7)  # the float32 sum of 2^20 copies of C e_1 rounds badly (measured below)


def _sgd_rows(first):
  """(2^20, 2) per-example gradients at 2C e_1 (clipped to C e_1); record 0 is ``first``."""
  G = np.zeros((N_SGD, 2), np.float32)
  G[:, 0] = 2 * C_SGD
  G[0] = first
  return G


def _sgd_exact_sum(G):
  """The clipped sum ``Q h`` that dp_sgd.step computes, over the full sample (q = 1), float64."""
  from dpgcd_jax import sampling
  n = G.shape[0]
  plan = sampling.plan(n, 1.0, n)
  clip = jnp.asarray(C_SGD)
  scale = exact_sums.grid_scale(clip, exact_sums.l2_grid_bits(n))

  @jax.jit
  def total(G):
    q = sampling.subsample_sum(jax.random.key(0), plan, lambda idx: clipping.quantize_l2(G[idx], clip, scale),
                               reduce=exact_sums.masked_float64_sum)
    with jax.enable_x64(True):
      return q * exact_sums.grid_step(clip, scale)

  with jax.enable_x64(True):
    return np.asarray(total(jnp.asarray(G)), np.float64)


def test_dp_sgd_clipped_sum_meets_the_sensitivity_exactly_at_2_to_the_20():
  C = float(C_SGD)
  base = _sgd_exact_sum(_sgd_rows([2 * C_SGD, 0.0]))
  flipped = _sgd_exact_sum(_sgd_rows([-2 * C_SGD, 0.0]))  # replace-one: +C e_1 -> -C e_1
  removed = _sgd_exact_sum(_sgd_rows([0.0, 0.0]))  # add/remove: the record contributes nothing
  assert np.linalg.norm(base - flipped) <= 2 * C  # exactly, no tolerance
  assert np.linalg.norm(base - removed) <= C
  assert np.linalg.norm(base - flipped) >= 2 * C * (1 - 4e-6)  # the worst case: 2C up to the shrink (2e-6)
  # The sum is the exact sum of the truncated terms (a NumPy float64 reference: integers, order-free).
  h = 2.0 ** (np.frexp(C)[1] - 1 - exact_sums.l2_grid_bits(N_SGD))
  factor = (C * clipping.l2_shrink(np.float32, 2)) / (2 * C)  # the float64 factor of a row at 2C e_1
  term = np.trunc(np.float32(2 * C_SGD) * np.float32(factor / h))  # the float32 multiplier and product
  np.testing.assert_array_equal(base, [N_SGD * term * h, 0.0])


def test_the_old_float32_dp_sgd_sum_breaks_the_sensitivity():
  # What dp_sgd.step summed before: clip_l2 then a float32 sum (kept as a reference).
  old = jax.jit(lambda G: jnp.sum(clipping.clip_l2(G, C_SGD), axis=0))
  gaps = np.asarray(old(jnp.asarray(_sgd_rows([2 * C_SGD, 0.0]))), np.float64) - np.asarray(
      old(jnp.asarray(_sgd_rows([-2 * C_SGD, 0.0]))), np.float64)
  assert np.linalg.norm(gaps) > 2 * float(C_SGD) * (1 + 1e-3)  # measured: 1.027 x 2C


def test_dp_sgd_step_releases_the_noisy_exact_sum_rounded_once():
  # Squared loss at w = 0: the gradient is -y x = 2C e_1 (clipped to C e_1); record 0 flips.
  X = np.zeros((N_SGD, 2), np.float32)
  X[:, 0] = 1.0
  sums = {}
  for sign in (1.0, -1.0):
    y = np.full(N_SGD, -2 * C_SGD, np.float32)
    y[0] *= sign
    problem = dg.make_problem(X, y, "squared", feature_bound=1.0)
    params = dg.dp_sgd.Params(step_size=1.0, clip=C_SGD, noise=2.0)
    step = jax.jit(lambda k, pb=problem, pr=params: dg.dp_sgd.step(k, dg.dp_sgd.init(pb), pb, pr,
                                                                  sampling_rate=1.0, max_batch=N_SGD)[0].w)
    w = np.asarray(step(jax.random.key(3)), np.float64)
    scale = clipping.noise_scale(jnp.float32(2.0), jnp.float32(C_SGD))  # 2 C rounded up (never below)
    assert float(scale) >= 2.0 * float(np.float32(C_SGD))
    noise = np.asarray(scale * jax.random.normal(jax.random.split(jax.random.key(3))[1], (2,), jnp.float32),
                       np.float64)
    exact = _sgd_exact_sum(np.asarray(-y[:, None] * X))
    sums[sign] = exact
    # w = -g, g = ((Q h + noise) / n) rounded once to float32: post-processing of the noisy exact sum
    # (to an ulp: the program may form scale x z in another precision than this eager product)
    np.testing.assert_allclose(w, -((exact + noise) / N_SGD).astype(np.float32), rtol=2**-22, atol=0)
  assert np.linalg.norm(sums[1.0] - sums[-1.0]) <= 2 * float(C_SGD)


def test_dp_sgd_quantized_rows_have_l2_norm_at_most_c_exactly():
  # Rows at the clipping norm (many equal coordinates, one large coordinate, random directions
  # rescaled to norm C in float32, far above C): the integer rows satisfy sum q^2 h^2 <= C^2 in
  # exact rational arithmetic.
  from fractions import Fraction
  rng = np.random.default_rng(0)
  p, C = 1000, np.float32(1.3)
  rows = [np.full(p, C / np.sqrt(np.float32(p)), np.float32), np.eye(p, dtype=np.float32)[0] * C,
          np.full(p, 1e6, np.float32)]
  for _ in range(20):
    v = rng.normal(size=p).astype(np.float32)
    rows.append((v * (C / np.linalg.norm(v))).astype(np.float32))
  G = np.stack(rows)
  bits = exact_sums.l2_grid_bits(70_000)
  scale = exact_sums.grid_scale(jnp.asarray(C), bits)
  q = np.asarray(jax.jit(clipping.quantize_l2)(jnp.asarray(G), jnp.asarray(C), scale))
  h = Fraction(1) / Fraction(float(scale))
  assert np.all(q == np.trunc(q)) and np.all(np.abs(q) < 2.0 ** (bits + 1))
  for row in q.astype(np.int64):
    assert sum(int(x) ** 2 for x in row) * h * h <= Fraction(float(C)) ** 2
  # ... and they are the clipped rows up to the shrink (2e-6), float32 products and one grid step.
  G64 = G.astype(np.float64)
  want = G64 * np.minimum(1.0, float(C) / np.linalg.norm(G64, axis=1, keepdims=True))
  np.testing.assert_allclose(q * float(h), want, rtol=3e-6, atol=2 * float(h))


def test_dp_sgd_step_vmaps_over_keys_and_a_traced_clip():
  rng = np.random.default_rng(0)
  X = rng.normal(size=(300, 5)).astype(np.float32)
  y = rng.normal(size=300).astype(np.float32)
  problem = dg.make_problem(X, y, "squared", feature_bound=3.0)
  state = dg.dp_sgd.init(problem)

  def one(key, clip):
    return dg.dp_sgd.step(key, state, problem, dg.dp_sgd.Params(0.1, clip, 1.0), sampling_rate=0.1)[0].w

  keys = jax.random.split(jax.random.key(1), 3)
  clips = jnp.asarray([0.5, 1.0, jnp.inf], jnp.float32)
  grid = np.asarray(jax.jit(jax.vmap(jax.vmap(one, in_axes=(None, 0)), in_axes=(0, None)))(keys, clips))
  for i in range(3):
    for j in range(2):
      np.testing.assert_array_equal(grid[i, j], np.asarray(jax.jit(one)(keys[i], clips[j])))
  assert np.all(np.isnan(grid[:, 2]) | ~np.isfinite(grid[:, 2]))  # clip = inf with noise: no release


@pytest.mark.parametrize("solver_name", dg.solvers.REGISTRY)
def test_noise_multipliers_are_rounded_up_when_cast_to_float32(solver_name):
  """The run's noise is never below the one the ledger accounts: a float64 multiplier cast to
  nearest float32 can lose half an ulp (0.7 -> 0.69999999), so the cast rounds up."""
  from dpgcd_jax.solvers import base  # pylint: disable=import-outside-toplevel
  module = getattr(dg, solver_name)
  X = np.random.default_rng(0).normal(size=(40, 4))
  problem = dg.make_problem(X, X[:, 0], "squared", feature_bound=3.0)
  assert float(np.float32(0.7)) < 0.7 and float(np.float32(2.3)) < 2.3  # nearest rounds these down: the check can fail
  for value in (0.7, 2.3, 0.1, 1.0 / 3.0, 2.0):
    required = {field: 1.0 for field in module.Params._fields if field not in module.Params._field_defaults}
    params = module.Params(**required)._replace(clip=1.0, **{name: value for name in module.SOLVER.noises})
    cast = base.cast_params(module.SOLVER, problem, params)
    for name in module.SOLVER.noises:
      got = np.asarray(getattr(cast, name))
      assert got.dtype == np.float32 and float(got) >= value
      assert float(got) <= float(np.nextafter(np.float32(value), np.float32(np.inf)))  # one ulp at most


def test_derivative_total_is_exact_at_its_largest_terms_across_int32_blocks():
  """`kernels.derivative_total`: the integer sum of the factor grids' products, exactly, over more
  records than one int32 block holds, with every limb at its largest (bounds just below a power of
  two, `x = ±B`, `phi' = ±c`: limbs of 64, so int32 sums over 2^19 records would overflow); a
  NumPy int64 reference; the sparse form gives the same totals; replacing one record moves a
  total by at most twice the largest term, and by exactly that at the extremes."""
  n = (1 << 19) + 64
  rng = np.random.default_rng(0)
  bounds = jnp.asarray([1.999, 3.999, 0.3], jnp.float32)
  XT = np.stack([np.full(n, 1.999), np.full(n, -3.999), rng.uniform(-0.3, 0.3, n)]).astype(np.float32)
  dphi = np.full(n, 0.7, np.float32)
  dphi[1::100_000] = rng.uniform(-0.7, 0.7, 6)  # all others (record 0 too) clipped to c
  c = jnp.float32(0.4999)  # every derivative above it clipped to it
  total = np.asarray(kernels.derivative_total(kernels.quantized_features(jnp.asarray(XT), bounds), jnp.asarray(dphi),
                                              c))
  scale_x = np.asarray(exact_sums.factor_scale(bounds), np.float64)
  scale_c = float(exact_sums.factor_scale(c))
  top_x, top_c = np.floor(np.asarray(bounds, np.float64) * scale_x), np.floor(float(c) * scale_c)
  assert top_x[0] > 8100 and top_c > 8100  # hi limbs of 64
  v = np.clip(np.round(XT.astype(np.float64) * scale_x[:, None]), -top_x[:, None], top_x[:, None]).astype(np.int64)
  u = np.clip(np.round(dphi.astype(np.float64) * scale_c), -top_c, top_c).astype(np.int64)
  np.testing.assert_array_equal(total, v @ u)
  assert np.sum((v[0] + 64) // 128 * ((u + 64) // 128)) >= 1 << 31  # the high limbs' sum: beyond int32
  sparse_X = dg.make_problem(scipy.sparse.csr_matrix(XT.T), np.ones(n, np.float32), "logistic",
                             feature_bound=np.asarray(bounds)).XT
  np.testing.assert_array_equal(np.asarray(sparse_X.derivative_total(jnp.asarray(dphi), bounds, c)), total)
  neighbour = XT.copy()
  neighbour[:, 0] = -neighbour[:, 0]
  moved = np.asarray(kernels.derivative_total(kernels.quantized_features(jnp.asarray(neighbour), bounds),
                                              jnp.asarray(dphi), c)) - total
  assert np.all(np.abs(moved) <= 2 * top_x * top_c) and np.abs(moved[0]) == 2 * top_x[0] * top_c


def test_factor_grid_values_stay_below_2_to_the_13_at_any_bound():
  """`exact_sums.on_factor_grid`: `|v| < 2^13` and `|v h| <= bound` at bounds up to the largest
  float and infinity, where the grid's exponent is clamped (without the cap, a clip of 3.4e38
  put derivatives at 16383 grid steps: a wrapped int8 limb and an int32 overflow)."""
  info = np.finfo(np.float32)
  bounds = jnp.asarray([info.max, 3.3999e38, 2.0**127, np.inf, 1.0, info.tiny], jnp.float32)
  values = jnp.asarray([info.max, -3.3999e38, 2.0**127, -1e38, 0.999, -info.tiny], jnp.float32)
  v = np.asarray(exact_sums.on_factor_grid(values, bounds))
  assert np.all(np.abs(v) < 2**13), v
  h = 1.0 / np.asarray(exact_sums.factor_scale(bounds), np.float64)
  assert np.all(np.abs(v * h) <= np.asarray(bounds, np.float64))
  hi, lo = (np.asarray(a, np.int64) for a in exact_sums.limbs(jnp.asarray(v)))
  np.testing.assert_array_equal(128 * hi + lo, v)  # the limbs hold the value (no int8 wrap)
