"""`dpgcd_jax.clipping`, `dpgcd_jax.mechanisms`: the finite guard on phi', branches that stay branches under vmap,
cheaper O(p) steps.

Every change must leave the released values as they were: the clipped gradient against the
previous formula (the guard on the (p, n) products), whole runs against it for the same key,
and the vectorized argmax / power of two against ``jnp.argmax`` / ``jnp.ldexp``.
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
from dpgcd_jax import mechanisms
from dpgcd_jax import sparse


def _previous_glm_mean(XT, dphi, thresholds, count=None):
  """The previous formula: the finite guard on every product ``x_ij phi'_i``."""
  return clipping.clipped_mean(clipping.finite_or_zero(XT * dphi[None, :]), thresholds[:, None], axis=1, count=count)


def _dphi_with_non_finite(n, rng):
  dphi = rng.normal(size=n).astype(np.float32) * 3
  dphi[[1, 5, 9]] = [np.inf, -np.inf, np.nan]
  return jnp.asarray(dphi)


@pytest.mark.parametrize("clip", [0.7, np.inf])
def test_dense_glm_mean_equals_the_guard_on_the_products(clip):
  rng = np.random.default_rng(0)
  XT = rng.normal(size=(37, 300)).astype(np.float32)
  XT[0, 1] = 0.0  # 0 x inf: NaN in the old formula, 0 in both
  XT = jnp.asarray(XT)
  dphi = _dphi_with_non_finite(300, rng)
  thresholds = jnp.asarray(rng.uniform(0.2, 2.0, 37).astype(np.float32) * clip)
  new = np.asarray(jax.jit(kernels._blocked_clipped_mean)(XT, dphi, thresholds))
  old = np.asarray(jax.jit(_previous_glm_mean)(XT, dphi, thresholds))
  if np.isfinite(clip):
    np.testing.assert_array_equal(new, old)  # exact sums: any order, the same value
  else:  # clipping off: plain float means, blocked in another order than clipped_mean's
    np.testing.assert_allclose(new, old, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("clip", [0.7, np.inf])
def test_sparse_glm_means_equal_the_guard_on_the_products(clip):
  rng = np.random.default_rng(1)
  X = scipy.sparse.random(300, 50, density=0.2, random_state=2, format="csr", dtype=np.float32)
  S = sparse.from_matrix(X)
  dphi = _dphi_with_non_finite(300, rng)
  thresholds = jnp.asarray(rng.uniform(0.2, 2.0, 50).astype(np.float32) * clip)
  old = np.asarray(_previous_glm_mean(jnp.asarray(X.T.toarray()), dphi, thresholds))
  # Exact sums: the same value in any order; clipping off: plain float sums in another order.
  same = np.testing.assert_array_equal if np.isfinite(clip) else (
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8))
  same(np.asarray(jax.jit(S.clipped_mean)(dphi, thresholds)), old)
  for j in (0, 7, 49):
    same(np.asarray(jax.jit(S.clipped_coordinate_mean)(dphi, thresholds, jnp.asarray(j))), old[j])


def test_an_overflowing_product_clips_to_the_threshold():
  """Finite phi' and x whose float product overflows: +-C_j (its real clipped value), never NaN."""
  XT = jnp.asarray([[3e38, -3e38, 1.0]], jnp.float32)
  dphi = jnp.asarray([10.0, 10.0, 0.5], jnp.float32)
  g = jax.jit(kernels._blocked_clipped_mean)(XT, dphi, jnp.asarray([1.0], jnp.float32))
  np.testing.assert_allclose(np.asarray(g), [(1.0 - 1.0 + 0.5) / 3], rtol=1e-6)


@pytest.fixture
def fresh_jit_caches():
  jax.clear_caches()  # so that the patched kernel is traced ...
  yield
  jax.clear_caches()  # ... and never reused by a later test


@pytest.mark.slow
@pytest.mark.parametrize("sparse_x", [False, True])
def test_runs_equal_the_previous_formula_for_the_same_key(monkeypatch, fresh_jit_caches, sparse_x):
  del fresh_jit_caches
  rng = np.random.default_rng(3)
  X = rng.normal(size=(131, 23)).astype(np.float32)  # shapes no other test compiles
  X[rng.uniform(size=X.shape) < 0.6] = 0.0
  y = np.sign(X[:, 0] + 0.5 * rng.normal(size=131)).astype(np.float32)
  problem = dg.make_problem(scipy.sparse.csr_matrix(X) if sparse_x else X, y, "logistic", feature_bound=1.5,
                            penalty=dg.penalties.L1(0.01))
  params = dg.dp_gcd.Params(step_size=1.0, clip=0.5, selection_noise=3.0, update_noise=3.0)

  def runs():
    cases = (("laplace", "coordinate"), ("gumbel", "derivative"))
    return [dg.dp_gcd.run(problem, jax.random.key(5), params, passes=40, selection=selection,
                          clipping_mode=mode) for selection, mode in cases]

  new = runs()
  jax.clear_caches()
  if sparse_x:
    monkeypatch.setattr(sparse.SparseColumns, "clipped_mean", lambda self, dphi, thresholds: _previous_glm_mean(
        self.todense(), dphi, thresholds))
  else:
    monkeypatch.setattr(kernels, "_blocked_clipped_mean", _previous_glm_mean)
  old = runs()
  for a, b in zip(new, old, strict=True):
    np.testing.assert_array_equal(np.asarray(a.trace.coordinates), np.asarray(b.trace.coordinates))
    np.testing.assert_array_equal(np.asarray(a.w), np.asarray(b.w))


def _branches(thresholds, x):
  exact = lambda t, x: jnp.sum(t) + x  # noqa: E731
  plain = lambda t, x: -jnp.ones_like(x) + 0 * jnp.sum(jnp.where(jnp.isfinite(t), t, 0))  # noqa: E731
  return clipping.when_finite(thresholds, exact, plain, x)


def test_when_finite_under_vmap_picks_each_members_branch():
  t = jnp.asarray([[1.0, 2.0], [1.0, np.inf], [0.5, 0.5]], jnp.float32)
  x = jnp.asarray([10.0, 20.0, 30.0], jnp.float32)
  expected = np.asarray([_branches(t[i], x[i]) for i in range(3)])
  np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(_branches))(t, x)), expected)
  both = jnp.asarray([0, 2])
  np.testing.assert_array_equal(np.asarray(jax.vmap(_branches)(t[both], x[both])), expected[[0, 2]])
  np.testing.assert_array_equal(np.asarray(jax.vmap(_branches, (None, 0))(t[1], x)), [-1.0, -1.0, -1.0])
  nested = jax.vmap(jax.vmap(_branches, (0, None)), (None, 0))(t, x)  # (3 x, 3 t)
  np.testing.assert_array_equal(np.asarray(nested), np.asarray([[_branches(t[i], x[k]) for i in range(3)]
                                                                for k in range(3)]))


def test_vmapped_configurations_equal_sequential_runs_with_one_clip_off():
  rng = np.random.default_rng(4)
  X = rng.normal(size=(97, 11)).astype(np.float32)
  problem = dg.make_problem(X, X[:, 0] + 0.1 * rng.normal(size=97).astype(np.float32), "squared",
                            feature_bound=3.0)
  grid = dg.dp_gcd.Params(step_size=jnp.asarray([0.5, 1.0, 1.0]), clip=jnp.asarray([0.5, np.inf, 2.0]),
                          selection_noise=jnp.asarray([2.0, 0.0, 1.0]), update_noise=jnp.asarray([2.0, 0.0, 1.0]))
  keys = jax.random.split(jax.random.key(0), 3)
  for mode in ("coordinate", "derivative"):
    batched = jax.vmap(lambda k, prm, mode=mode: dg.dp_gcd.run(problem, k, prm, passes=12, clipping_mode=mode).w)
    got = np.asarray(batched(keys, grid))
    for i in range(3):
      one = dg.dp_gcd.run(problem, keys[i], jax.tree.map(lambda a, i=i: a[i], grid), passes=12, clipping_mode=mode)
      np.testing.assert_array_equal(got[i], np.asarray(one.w))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_of_two_equals_ldexp_over_the_normal_range(dtype):
  with jax.enable_x64(dtype == np.float64):
    info = np.finfo(dtype)
    e = jnp.arange(info.minexp - 1, info.maxexp, dtype=jnp.int32)
    got = np.asarray(exact_sums.power_of_two(e, dtype))
    np.testing.assert_array_equal(got, np.asarray(jnp.ldexp(jnp.ones(e.shape, dtype), e)))
    thresholds = np.concatenate([[0.0, info.tiny, info.tiny / 8, info.max, np.inf, 1.0],
                                 np.random.default_rng(0).lognormal(0.0, 25.0, 2000)]).astype(dtype)
    bits = exact_sums.grid_bits(dtype, 5000)
    _, ex = jnp.frexp(jnp.asarray(thresholds))
    ex = jnp.maximum(ex, info.minexp + bits + 2)
    np.testing.assert_array_equal(np.asarray(exact_sums.grid_scale(jnp.asarray(thresholds), bits)),
                                  np.asarray(jnp.ldexp(jnp.ones(thresholds.shape, dtype), bits + 1 - ex)))


def test_argmax_equals_jnp_argmax():
  rng = np.random.default_rng(5)
  cases = [rng.normal(size=1000), np.round(rng.normal(size=1000)), [1.0, np.nan, 2.0, np.nan], [-np.inf, -np.inf],
           [0.0, -0.0, 0.0], [np.inf, 1.0, np.inf], [-0.0, 0.0]]
  for case in cases:
    x = jnp.asarray(case, jnp.float32)
    assert int(jax.jit(mechanisms.argmax)(x)) == int(jnp.argmax(x)), case
  ints = jnp.asarray(rng.integers(-5, 5, 1000), jnp.int32)
  assert int(mechanisms.argmax(ints)) == int(jnp.argmax(ints))
  batched = jnp.asarray(rng.integers(-3, 3, (8, 50)), jnp.float32)
  np.testing.assert_array_equal(np.asarray(jax.vmap(mechanisms.argmax)(batched)),
                                np.asarray(jnp.argmax(batched, axis=1)))


def test_sparse_runs_vmapped_over_clip_and_keys_equal_the_sequential_ones():
  # A pytree operand (the sparse columns) under a vmap over clip: each operand's batching flags
  # are a pytree (regression: the experiments' sweeps on dorothea_synth failed here).
  rng = np.random.default_rng(0)
  X = scipy.sparse.random(120, 300, density=0.03, random_state=0, format="csr")
  X.data[:] = 1.0
  problem = dg.make_problem(X, np.sign(rng.normal(size=120)), "logistic", feature_bound=1.0)
  run = lambda c, k: dg.dp_gcd.run(problem, k, dg.dp_gcd.Params(1.0, c, 5.0, 5.0), passes=3).w
  clips, keys = jnp.array([0.1, 0.3, 1.0]), jax.random.split(jax.random.key(0), 3)
  batched = jax.vmap(run)(clips, keys)
  for i in range(3):  # the same coordinates move; values up to XLA's fusion of the update arithmetic
    one = np.asarray(run(clips[i], keys[i]))
    np.testing.assert_array_equal(np.asarray(batched[i]) != 0, one != 0)
    np.testing.assert_allclose(np.asarray(batched[i]), one, rtol=1e-5, atol=1e-7)
