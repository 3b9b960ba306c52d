"""`dpgcd_jax.discrete_noise`: floating-point-safe noise: Mironov's distinguisher, exact PMFs, learning, ledger."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpgcd_jax as dg
from dpgcd_jax import discrete_grid
from dpgcd_jax import discrete_noise as dn
from dpgcd_jax import discrete_pmfs
from dpgcd_jax import kernels
from dpgcd_jax import mechanisms
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import events

# ---------------------------------------------------------------------------------------
# (a) Mironov-style distinguisher.
# ---------------------------------------------------------------------------------------


def _float32_laplace_support():
  """Every float32 value jax.random.laplace can return (2^23 uniforms u, one per mantissa)."""
  f = jnp.arange(2**23, dtype=jnp.float32) * jnp.float32(2.0**-23)
  minval = jnp.float32(-1) + jnp.finfo(jnp.float32).epsneg
  u = jnp.maximum(minval, f * (jnp.float32(1) - minval) + minval)
  return np.unique(np.asarray(jnp.sign(u) * jnp.log1p(-jnp.abs(u))))


@pytest.mark.slow
def test_mironov_distinguisher_succeeds_on_float_laplace_and_fails_on_secure_noise():
  support = _float32_laplace_support()
  draws = np.asarray(jax.random.laplace(jax.random.key(0), (20000,), jnp.float32))
  assert np.isin(draws, support).all()  # the enumeration is the sampler's support
  mean0, mean1, scale = np.float32(0.0), np.float32(1e-3), np.float32(1.0)
  # The default update: value + scale * laplace, as LaplaceNoise.perturb computes it.
  out0 = np.asarray(jax.vmap(lambda k: mechanisms.LaplaceNoise().perturb(k, mean0, scale))(
      jax.random.split(jax.random.key(1), 20000)))
  reachable1 = np.unique(mean1 + scale * support)
  identified = ~np.isin(out0, reachable1)  # outputs impossible under the neighbour's mean
  assert identified.mean() > 0.5  # measured: 0.91

  # Secure update, neighbouring values (|v0 - v1| = 1e-3 = Delta): both supports are the grid.
  sens, s = jnp.float32(1e-3), jnp.float32(1.0)
  gran = float(discrete_grid.grid_step(s * sens))
  for update in (mechanisms.DiscreteLaplaceNoise(), mechanisms.DiscreteGaussianNoise()):
    perturb = jax.jit(jax.vmap(lambda k, v: update.perturb(k, v, s, sens), in_axes=(0, None)))  # noqa: B023
    keys = jax.random.split(jax.random.key(2), 4000)
    y0 = np.asarray(perturb(keys, jnp.float32(0.0)), dtype=np.float64)
    y1 = np.asarray(perturb(keys, jnp.float32(1e-3)), dtype=np.float64)
    for y in (y0, y1):
      assert y.dtype == np.float64 and np.all(np.isfinite(y))
      np.testing.assert_array_equal(y / gran, np.round(y / gran))  # every output is k * gran
    # The discrete noise has full support on Z, so the reachable set is the public grid gran * Z
    # under both values: the distinguisher "output impossible under v1" identifies nothing.


# ---------------------------------------------------------------------------------------
# (b) Exact PMFs.
# ---------------------------------------------------------------------------------------


def _chi2_pvalue(z, pmf, cut):
  z = np.asarray(z)
  ks = np.arange(-cut, cut + 1)
  observed = np.array([np.sum(z == k) for k in ks] + [np.sum(np.abs(z) > cut)], dtype=float)
  p = pmf(ks)
  expected = len(z) * np.append(p, 1.0 - p.sum())
  return stats.chisquare(observed, expected).pvalue


@functools.cache
def _twenty_thousand_draws(sampler):
  """One compiled program per sampler, the scale traced: the parametrizations share it."""
  return jax.jit(lambda key, t: sampler(key, t, (20000,)))


@pytest.mark.parametrize("sampler, pmf, t", [
    (dn.discrete_laplace, discrete_pmfs.discrete_laplace_pmf, 3),
    (dn.discrete_gaussian, discrete_pmfs.discrete_gaussian_pmf, 4),
    (dn.discrete_gaussian, discrete_pmfs.discrete_gaussian_pmf, 1),
])
def test_discrete_samplers_match_their_pmf_and_reject_a_wrong_scale(sampler, pmf, t):
  z = np.asarray(_twenty_thousand_draws(sampler)(jax.random.key(3), jnp.int32(t)))
  assert z.dtype == np.int32 and not np.any(z == dn.FAILED)
  cut = 3 * t
  assert _chi2_pvalue(z, lambda k: pmf(k, t), cut) > 1e-3
  for wrong in (1.5, 1 / 1.5):
    assert _chi2_pvalue(z, lambda k: pmf(k, t * wrong), cut) < 1e-6, wrong  # noqa: B023


def test_bernoulli_exp_is_exact_in_mean():
  keys = jax.random.key(4)
  draw = jax.jit(lambda k, num, den: dn.bernoulli_exp(k, jnp.full((40000,), num), den))  # one program
  for num, den in ((1, 1), (5, 2), (7, 3), (0, 5)):
    b, ok = draw(keys, jnp.int32(num), jnp.int32(den))
    p = math.exp(-num / den)
    assert bool(np.all(ok))
    assert abs(np.mean(b) - p) < 5 * math.sqrt(p * (1 - p) / 40000) + 1e-12


@pytest.mark.slow
def test_samplers_fail_closed_on_invalid_scale_and_reject_float_scale():
  z = dn.discrete_laplace(jax.random.key(0), jnp.array([0, -3, dn.MAX_SCALE + 1, 2]), (4,))
  np.testing.assert_array_equal(np.asarray(z)[:3], [dn.FAILED] * 3)
  # A wide integer out of range fails too (cast to int32 first, 2^32 + 2 would wrap to scale 2).
  wide = np.array([2**32 + 2, 2**31 + 5, 3], np.int64)
  for sampler in (dn.discrete_laplace, dn.discrete_gaussian):
    z = np.asarray(sampler(jax.random.key(0), wide, (3,)))
    np.testing.assert_array_equal(z[:2], [dn.FAILED] * 2)
    assert z[2] != dn.FAILED
  with pytest.raises(ValueError, match="scale"):
    dn.discrete_gaussian(jax.random.key(0), 2.5)
  # An invalid multiplier releases NaN, never a noiseless value.
  out = mechanisms.DiscreteGaussianNoise().perturb(jax.random.key(0), 0.3, jnp.nan, 0.1)
  assert np.isnan(out)
  out = mechanisms.DiscreteGaussianNoise().perturb(jax.random.key(0), 0.3, 1e9, 0.1)
  assert np.isnan(out)  # scale beyond MAX_SCALE grid steps: NaN
  # A tiny multiplier: Delta / gran above 2^23 grid steps, where float32 would drop the + 1 of
  # the grid sensitivity; it fails closed instead (below, the + 1 is kept).
  gran = discrete_grid.grid_step(jnp.asarray(1e-4 * 0.1, jnp.float32))
  assert np.isnan(discrete_grid.grid_sensitivity(jnp.asarray(0.1, jnp.float32), gran))
  assert float(discrete_grid.grid_sensitivity(jnp.asarray(2.0**22, jnp.float32), 1.0)) == 2.0**22 + 1
  out = mechanisms.DiscreteLaplaceNoise().perturb(jax.random.key(0), 0.3, 1e-4, 0.1)
  assert np.isnan(out)


@pytest.mark.slow
def test_secure_update_noise_has_the_grid_scale():
  """The update noise is Z gran with Z ~ discrete Gaussian(floor(s D) + 1), D = ceil(Delta/gran) + 1."""
  s, sens = 2.0, 0.01
  gran = float(discrete_grid.grid_step(jnp.asarray(s * sens)))
  D = math.ceil(sens / gran) + 1
  t = math.floor(s * D) + 1
  perturb = jax.jit(jax.vmap(lambda k: mechanisms.DiscreteGaussianNoise().perturb(
      k, jnp.asarray(0.123456), s, sens)))
  y = np.asarray(perturb(jax.random.split(jax.random.key(5), 20000)))
  z = np.round(y / gran - round(0.123456 / gran)).astype(int)
  assert _chi2_pvalue(z, lambda k: discrete_pmfs.discrete_gaussian_pmf(k, t), 2 * t) > 1e-3
  assert 1.0 < t * gran / (s * sens) < 1 + (2 * s + 1) / 8192  # the documented bound on the extra noise


@pytest.mark.slow
def test_secure_noise_in_float32():
  with jax.enable_x64(False):
    sens, s = jnp.float32(0.02), jnp.float32(3.0)
    gran = discrete_grid.grid_step(s * sens)
    y = jax.jit(jax.vmap(lambda k: mechanisms.DiscreteLaplaceNoise().perturb(
        k, jnp.float32(0.7), s, sens)))(jax.random.split(jax.random.key(6), 2000))
    assert y.dtype == jnp.float32 and bool(jnp.all(jnp.isfinite(y)))
    q = np.asarray(y / gran)
    np.testing.assert_array_equal(q, np.round(q))
    j, ok = mechanisms.DiscreteLaplaceNoisyMax().select(
        jax.random.key(7), lambda g, w, M, pen: jnp.abs(g), jnp.array([0.0, 5.0, 0.1], jnp.float32),
        None, None, None, s, sens, "gs-s")
    assert bool(ok) and int(j) == 1


# ---------------------------------------------------------------------------------------
# (c) Learning, (d) the ledger.
# ---------------------------------------------------------------------------------------


def _problem(n=400, p=20):
  rng = np.random.default_rng(0)
  X = rng.normal(size=(n, p))
  w = np.zeros(p)
  w[:3] = (2.0, -1.5, 1.0)
  y = X @ w + 0.1 * rng.normal(size=n)
  return dg.make_problem(X, y, "squared", feature_bound=4.0)


@pytest.mark.slow
def test_dp_gcd_learns_as_well_with_secure_noise():
  problem = _problem()
  f0 = float(kernels.objective(problem, jnp.zeros(problem.num_features)))
  keys = jax.random.split(jax.random.key(8), 4)
  gaps = {}
  for secure in (False, True):
    res = dg.dp_gcd.fit(problem, keys, epsilon=5.0, delta=1e-5, passes=15, clip=2.0,
                        update="gaussian", secure_noise=secure)
    obj = jax.vmap(lambda w: kernels.objective(problem, w))(res.w)
    gaps[secure] = float(np.mean(np.asarray(obj))) / f0
  # Measured (4 seeds, 15 passes, eps = 5): relative objective 0.52 (float) vs 0.45 (secure).
  assert gaps[True] < 0.7  # learns
  assert abs(gaps[True] - gaps[False]) < 0.15, gaps  # about as well as the float noise


@pytest.mark.slow
def test_secure_fit_ledger_holds_the_discrete_events():
  problem = _problem()
  res = dg.dp_gcd.fit(problem, jax.random.key(9), epsilon=1.0, delta=1e-6, passes=10,
                      update="gaussian", secure_noise=True)
  kinds = {type(entry.event) for entry in res.privacy.entries}
  assert events.DiscreteGaussian in kinds and events.PureDp in kinds
  assert res.privacy.epsilon <= 1.0 + 1e-9
  with pytest.raises(ValueError, match="selection"):
    dg.dp_gcd.fit(problem, jax.random.key(9), epsilon=1.0, delta=1e-6, passes=10,
                  selection="gumbel", secure_noise=True)
  with pytest.raises(ValueError, match="secure_noise"):
    dg.dp_gcd.run(problem, jax.random.key(9), dg.dp_gcd.Params(), passes=2, secure_noise="yes")


def test_secure_epsilon_matches_closed_forms():
  # One discrete Laplace update, free selection: eps = 1 / b' exactly (pure DP).
  eps = accounting.gcd_epsilon(math.inf, 4.0, steps=1, delta=1e-6,
                               selection="discrete_laplace", update="discrete_laplace", features=10)
  assert eps == pytest.approx(0.25, rel=1e-3)
  # T discrete Gaussian updates: zCDP T / (2 s^2), the same RDP curve as the float Gaussian's.
  eps_d = accounting.gcd_epsilon(math.inf, 20.0, steps=50, delta=1e-6,
                                 selection="discrete_laplace", update="discrete_gaussian", features=10)
  eps_rdp = accounting.gcd_epsilon(math.inf, 20.0, steps=50, delta=1e-6, update="gaussian",
                                   method="rdp")
  assert eps_d == pytest.approx(eps_rdp, rel=1e-6)
  rho = 50 / (2 * 20.0**2)
  assert eps_d <= rho + 2 * math.sqrt(rho * math.log(1e6))  # the classic zCDP conversion
  # Discrete Laplace selection: the event of report-noisy-max with Laplace, PureDp(2 / b).
  assert mechanisms.selection("discrete_laplace").event(8.0) == events.PureDp(0.25)
  assert mechanisms.update("discrete_gaussian").event(3.0).rho == pytest.approx(1 / 18)


@pytest.mark.slow
def test_an_out_of_range_secure_scale_releases_a_data_independent_index_and_nan():
  """Review finding: with a noise scale beyond the samplers' range the selection ran with a
  substitute scale 1 (about 4-DP per step) and released its index; it now releases 0 and NaN."""
  rng = np.random.default_rng(0)
  X = rng.normal(size=(200, 6))
  y = np.sign(X[:, 3] + 0.01)
  problem = dg.make_problem(X, y, "logistic", feature_bound=4.0)
  params = dg.dp_gcd.Params(1.0, 1.0, 1e6, 1e6)  # far beyond discrete_noise.MAX_SCALE
  result = dg.dp_gcd.run(problem, jax.random.key(0), params, passes=5, selection="discrete_laplace",
                         update="discrete_gaussian")
  assert np.all(np.asarray(result.trace.coordinates) == 0)
  assert np.all(np.isnan(np.asarray(result.w)) | (np.asarray(result.w) == 0))
  assert np.isnan(np.asarray(result.w)).any()


@pytest.mark.slow
def test_dp_cd_fit_with_secure_noise_learns_and_accounts_discrete_gaussians():
  rng = np.random.default_rng(0)
  X = rng.normal(size=(2000, 10))
  y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=2000)
  problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
  start = float(dg.objective(problem, np.zeros(10)))
  results = {secure: dg.dp_cd.fit(problem, jax.random.key(0), epsilon=2.0, delta=1e-6, passes=5,
                                  secure_noise=secure) for secure in (False, True)}
  gaps = {secure: float(dg.objective(problem, r.w)) / start for secure, r in results.items()}
  assert gaps[True] < 0.6 and gaps[True] < gaps[False] + 0.1, gaps
  event = results[True].privacy.entries[0].event
  assert isinstance(event, events.DiscreteGaussian) and results[True].privacy.epsilon <= 2.0
  with pytest.raises(ValueError, match="secure_noise"):
    dg.dp_cd.fit(problem, jax.random.key(0), epsilon=2.0, delta=1e-6, passes=1, secure_noise="yes")


@pytest.mark.slow
def test_the_optax_transformation_takes_secure_noise():
  X = jax.random.normal(jax.random.key(0), (64, 5))
  grads = X * (X @ jnp.arange(5.0))[:, None]  # per-example least-squares gradients at w = 0
  secure = dg.dp_greedy_coordinate(jnp.ones(5), key=jax.random.key(1), clip=5.0,
                                   selection_noise=2.0, update_noise=2.0, secure_noise=True)
  explicit = dg.dp_greedy_coordinate(jnp.ones(5), key=jax.random.key(1), clip=5.0,
                                     selection_noise=2.0, update_noise=2.0,
                                     selection="discrete_laplace", update="discrete_laplace")
  w = jnp.zeros(5)
  a, _ = secure.update(grads, secure.init(w), w)
  b, _ = explicit.update(grads, explicit.init(w), w)
  np.testing.assert_array_equal(a, b)
  assert np.count_nonzero(np.asarray(a)) == 1 and np.all(np.isfinite(np.asarray(a)))



@pytest.mark.slow
def test_a_secure_release_far_above_its_noise_is_right():
  """Values of 10^6-10^10 grid steps (a curvature at n = 1e6, multiplier 2): the snapped integer
  is exact in float64; an int32 clamp at 2^30 released 0.25 for 1 before."""
  multiplier, sensitivity = jnp.float32(2.0), jnp.float32(1e-6)
  values = jnp.array([1.0, -3.0, 1e4], jnp.float32)
  for update in (mechanisms.DiscreteLaplaceNoise(), mechanisms.DiscreteGaussianNoise()):
    release = jax.jit(jax.vmap(update.perturb, in_axes=(0, 0, None, None)))
    got = np.asarray(release(jax.random.split(jax.random.key(0), 3), values, multiplier, sensitivity))
    np.testing.assert_allclose(got, values, rtol=1e-4, atol=1e-4)
  scores = jnp.array([1e4, 1e4 + 0.5, 2.0], jnp.float32)
  j, ok = mechanisms.DiscreteLaplaceNoisyMax().select(
      jax.random.key(0), lambda g, w, M, pen: g, scores, None, None, None, jnp.float32(0.01), jnp.float32(1e-6), "gs-s")
  assert bool(ok) and int(j) == 1


@pytest.mark.slow
def test_a_nan_score_fails_the_secure_selection_closed():
  """A NaN score would win the exact argmax whatever the noise (found by review): not ok instead."""
  scores = jnp.array([5.0, 0.0, jnp.nan, 0.0], jnp.float32)
  for k in range(3):
    j, ok = mechanisms.DiscreteLaplaceNoisyMax().select(
        jax.random.key(k), lambda g, w, M, pen: g, scores, None, None, None, jnp.float32(1.0), jnp.float32(0.1), "gs-s")
    assert not bool(ok) and int(j) == 0
