"""`dpgcd_jax.privacy.scales`, `dpgcd_jax.privacy.bounds`: the feature scales and AboveThreshold are exact integer
mechanisms.

Counts stay integers at any n, their noise is the exact discrete sampler's, with no float range,
their ledgers hold discrete events only, and every noise scale is rounded up.
Float32 throughout (the suite's default): the old float32 search fails each of these.
"""

from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import discrete_grid
from dpgcd_jax import discrete_noise as dn
from dpgcd_jax import exact_sums
from dpgcd_jax import host_release
from dpgcd_jax.estimators import _released
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import scales
from dpgcd_jax.privacy import scales_budget
from dpgcd_jax.privacy.smoothness import private_smoothness

K, P = 128, 5  # one shape for every search here: one compiled program
BIG = 2**24


def _constant_counts(value):
  return jnp.full((P, K), value, jnp.int32)  # every queried count is `value`, whatever the path


def test_count_queries_move_by_exactly_one_above_2_24():
  counts = np.array([BIG - 1, BIG, BIG + 1, BIG + 2, BIG + 3, 2**30, 2**31 - 2], np.int64)
  clamp = lambda x: np.clip(x, -discrete_grid.QUERY_LIMIT, discrete_grid.QUERY_LIMIT)
  for rank in (0, BIG + 1, 2**30):
    query = lambda c: discrete_grid.count_query(jnp.asarray(c, jnp.int32), rank)  # noqa: B023
    assert query(counts).dtype == jnp.int32
    np.testing.assert_array_equal(query(counts), clamp(counts - rank))
    diff = np.asarray(query(counts + 1), np.int64) - np.asarray(query(counts), np.int64)
    np.testing.assert_array_equal(diff, clamp(counts + 1 - rank) - clamp(counts - rank))  # 1, or 0 clamped


def test_the_exact_search_compares_counts_above_2_24_as_integers():
  # 2^24 + 3 < 2^24 + 4: every round goes right. In float32 the count rounds to 2^24 + 4 (to
  # even) and every round went left.
  search = scales.noisy_search(jax.random.key(0), _constant_counts(BIG + 3), 0.0, float(BIG + 4))
  np.testing.assert_array_equal(search.index, K - 1)
  search = scales.noisy_search(jax.random.key(0), _constant_counts(BIG + 4), 0.0, float(BIG + 4))
  np.testing.assert_array_equal(search.index, 0)


def test_neighbouring_counts_above_2_24_release_queries_exactly_one_apart():
  for key in jax.random.split(jax.random.key(1), 3):
    a = scales.noisy_search(key, _constant_counts(BIG + 1), 0.3, float(BIG))
    b = scales.noisy_search(key, _constant_counts(BIG + 2), 0.3, float(BIG))
    np.testing.assert_array_equal(np.asarray(b.released, float) - np.asarray(a.released, float), 1.0)
    assert a.released.dtype == jnp.int32


def test_the_scales_noise_is_the_exact_discrete_gaussian_draw():
  counts = jnp.asarray(np.random.default_rng(0).integers(0, 400, (P, K)).cumsum(axis=1), jnp.int32)
  key, noise, threshold = jax.random.key(2), 3.0, 900.0
  search = scales.noisy_search(key, counts, noise, threshold)
  sigma, valid = scales.count_sigma(noise, P)
  assert bool(valid) and int(sigma) == int(np.floor(noise * np.sqrt(P))) + 1
  draw = jax.jit(lambda k: dn.discrete_gaussian(k, sigma, (P,)))
  for r, key_r in enumerate(jax.random.split(key, scales.num_rounds())):
    query = discrete_grid.count_query(counts[jnp.arange(P), search.queried[r]], int(np.ceil(threshold)))
    np.testing.assert_array_equal(search.released[r] - query, draw(key_r))


def test_above_threshold_draws_exact_discrete_laplace_on_integer_queries():
  statistic = jnp.asarray(np.abs(np.random.default_rng(1).standard_cauchy(3000)), jnp.float32)
  epsilon, rank = np.float32(0.05), 2700
  t_threshold, t_query, valid = bounds.above_threshold_scales(epsilon)
  assert bool(valid) and (int(t_threshold), int(t_query)) == (41, 81)
  counts = jnp.sum(statistic[None, :] <= jnp.asarray(bounds.GRID, jnp.float32)[:, None], axis=1, dtype=jnp.int32)
  draw = jax.jit(lambda k: dn.discrete_laplace(k, jnp.append(t_threshold, jnp.full(bounds.GRID.size, t_query)),
                                               (bounds.GRID.size + 1,)))
  for key in jax.random.split(jax.random.key(3), 5):
    z = np.asarray(draw(key))
    above = np.asarray(discrete_grid.count_query(counts, rank)) + z[1:] >= z[0]
    want = bounds.GRID[np.argmax(above) if above.any() else bounds.GRID.size - 1]
    assert float(bounds.bound_at_rank(key, statistic, epsilon, rank)) == np.float32(want)


def test_noise_scales_are_rounded_up_from_the_accounted_reals():
  rng = np.random.default_rng(4)
  multipliers = np.float32(10.0 ** rng.uniform(-1, 3, 300))
  for p in (1, 2, 3, 30, 200, 1000):
    # sigma^2 > s^2 p, in exact rationals (s: the float32 value the ledger accounts).
    sigmas, valid = scales.count_sigma(multipliers, p)
    for s, sigma, ok in zip(multipliers, np.asarray(sigmas), np.asarray(valid), strict=True):
      assert not ok or Fraction(int(sigma)) ** 2 > Fraction(float(s)) ** 2 * p, (s, p, sigma)
  # Edge cases: s sqrt(p) an integer, or one float32 step either side of one.
  for p, k in ((4, 8), (9, 30), (2, 7), (100, 5000)):
    for s in np.nextafter(np.float32(k / np.sqrt(p)), np.float32([0.0, np.inf])).tolist() + [k / np.sqrt(p)]:
      sigma = int(scales.count_sigma(np.float32(s), p)[0])
      assert Fraction(sigma) ** 2 > Fraction(float(np.float32(s))) ** 2 * p
  epsilons = np.float32(10.0 ** rng.uniform(-3, 1, 3000))
  t_threshold, t_query, valid = bounds.above_threshold_scales(epsilons)
  assert np.all(np.asarray(valid))
  for eps, t1, t2 in zip(epsilons, np.asarray(t_threshold), np.asarray(t_query), strict=True):
    assert Fraction(int(t1)) * Fraction(float(eps)) > 2 and Fraction(int(t2)) * Fraction(float(eps)) > 4
  # The host evaluation (NumPy, read by the post-fit diagnostics) gives the same integers.
  host = bounds.above_threshold_scales(epsilons, np)
  for device_value, host_value in zip((t_threshold, t_query, valid), host, strict=True):
    np.testing.assert_array_equal(np.asarray(device_value), host_value)
  # The policy matters: the plain float32 quotient 2 / eps is below the real one for many eps.
  assert sum(Fraction(float(np.float32(2) / e)) < 2 / Fraction(float(e)) for e in epsilons[:300]) > 50


def test_the_scales_ledger_holds_discrete_events_only():
  ledger = scales_budget.scales_ledger(5.0, features=4)
  assert [(type(e.event), e.count) for e in ledger.entries] == [
      (events.DiscreteGaussian, scales.num_rounds()), (events.DiscreteDraws, scales.num_rounds())]
  release = _released.feature_release(num_examples=50_000, num_features=30, shape=(32, 65536), dtype=np.float32,
                                      feature_bound=None, scaling="private", epsilon=1.0, delta=1e-9)
  assert release.how == "private"
  # Discrete Gaussian rounds, and their draws: one per searched feature and round.
  assert [(type(e.event), e.count) for e in release.ledger.entries] == [
      (events.DiscreteGaussian, scales.num_rounds()), (events.DiscreteDraws, scales.num_rounds())]
  assert release.ledger.entries[1].event.draws == 30
  # One bound (AboveThreshold): exact pure DP, and its 130 draws charged at its own epsilon.
  release = _released.feature_release(num_examples=500, num_features=30, shape=(32, 512), dtype=np.float32,
                                      feature_bound=None, scaling="bound", epsilon=1.0, delta=1e-6)
  assert [type(e.event) for e in release.ledger.entries] == [events.PureDp, events.DiscreteDraws]
  draws = release.ledger.entries[1].event
  assert draws.draws == 130 and draws.release_epsilon == release.ledger.entries[0].event.epsilon


@pytest.mark.slow
def test_out_of_range_scales_fail_closed_and_are_not_informative():
  counts = _constant_counts(100)
  too_noisy = float(dn.MAX_SCALE) / np.sqrt(P)  # sigma > MAX_SCALE
  for noise in (too_noisy, np.inf, np.nan, -1.0):
    np.testing.assert_array_equal(scales.noisy_search(jax.random.key(0), counts, noise, 50.0).index, -1)
  statistic = jnp.ones(100, jnp.float32)
  for epsilon in (1e-4, 0.0, -1.0, np.nan):  # 4 / 1e-4 > MAX_SCALE
    assert np.isnan(float(bounds.bound_at_rank(jax.random.key(0), statistic, epsilon, 90)))
  # A count noise beyond the sampler's range is not informative, however large n.
  assert scales_budget.count_noise(10**6, 0.1, 1e-10) > dn.MAX_SCALE
  assert not scales_budget.scales_informative(10**9, 10**6, 0.1, 1e-10)
  assert scales_budget.min_informative_n(10**6, 0.1, 1e-10) < 10**9  # the noise rule alone
  # At delta = 1e-12 the 7 x 10^6 draws' charge (5e-11) alone exceeds half of delta: no release.
  assert scales_budget.count_noise(10**6, 0.1, 1e-12) == np.inf
  assert not scales_budget.scales_informative(10**9, 10**6, 0.1, 1e-12)


@pytest.mark.slow
def test_a_secure_fit_with_private_scales_lists_no_float_mechanism():
  rng = np.random.default_rng(5)
  X = rng.normal(size=(2000, 6))
  model = dg.estimators.DPGCDClassifier(classes=[0, 1], epsilon=3.0, delta=1e-6, scaling="private",
                                        secure_noise=True, random_state=0).fit(X, (X[:, 0] > 0).astype(int))
  kinds = {e.label: type(e.event) for e in model.privacy_.entries}
  assert kinds["feature bounds"] is events.DiscreteGaussian
  assert not {events.Gaussian, events.Laplace, events.BoundedRange} & set(kinds.values()), model.privacy_


def test_host_releases_draw_at_a_scale_never_below_the_charged_product():
  """`host_release.release` (private scores, CV scores, class counts) forms multiplier x sensitivity on
  the host and rounds it UP to the value's dtype: a float32 cast or product rounds to nearest, up to
  half an ulp below the real product the ledger charges."""
  rng = np.random.default_rng(5)
  below = 0
  for m, s in zip(10.0 ** rng.uniform(-2, 3, 400), 10.0 ** rng.uniform(-6, 1, 400), strict=True):
    scale = float(dg.clipping.scale_above(m, s, np.float32))
    exact = Fraction(m) * Fraction(s)
    assert exact <= Fraction(scale) <= exact * (1 + Fraction(1, 2**22)), (m, s, scale)
    below += Fraction(float(np.float32(m) * np.float32(s))) < exact  # what a float32 product would give
  assert below > 50  # the float32 product does fall below the real one: the round-up is needed
  assert np.isnan(dg.clipping.scale_above(-1.0, 1.0, np.float32))  # fails closed
  assert np.isnan(dg.clipping.scale_above(1.0, np.nan, np.float32))
  assert float(dg.clipping.scale_above(0.0, 3.0, np.float32)) == 0.0
  laplace, key, value = dg.mechanisms.LaplaceNoise(), jax.random.key(1), jnp.float32(0.25)
  released = host_release.release(laplace, key, value, 18.278105006, 1.0)
  want = laplace.perturb(key, value, jnp.asarray(dg.clipping.scale_above(18.278105006, 1.0, np.float32)))
  assert float(released) == float(want)
  assert float(dg.clipping.scale_above(18.278105006, 1.0, np.float32)) > float(np.float32(18.278105006))


def _real_mean_sensitivity(C, n, dtype):
  """`clipping.mean_sensitivity`'s formula in exact rationals, on its float inputs."""
  r, eps = Fraction(float(exact_sums.rounding_bound(dtype))), Fraction(float(np.finfo(dtype).eps))
  C = Fraction(float(C))
  return (2 * C / n + 2 * r * C) * (1 + 8 * eps)


def test_in_program_noise_scales_are_never_below_the_real_sensitivity_times_the_multiplier():
  """The solvers' steps form `multiplier x sensitivity` in float32 inside the program: the sensitivity
  formula rounds, and so does the product. `clipping.noise_scale` widens past both: the scale
  drawn is never below the charged multiplier times the REAL formula (exact rationals; with a
  square root, compared squared), and within 2^-15 of it."""
  rng = np.random.default_rng(11)
  count = 300
  multipliers = dg.clipping.rounded_up(10.0 ** rng.uniform(-1, 2, count), np.float32)  # as fit casts them
  C = rng.uniform(0.01, 5.0, count).astype(np.float32)
  M = rng.uniform(0.01, 9.0, count).astype(np.float32)
  n = rng.integers(10, 10**6, count)
  l2w = rng.normal(0, 3, count).astype(np.float32)
  update = jax.jit(jax.vmap(lambda c, k, g: dg.solvers.greedy.update_sensitivity(c, k, g)))(C, n, l2w)
  selection = jax.jit(jax.vmap(lambda c, m, k: dg.solvers.greedy.selection_sensitivity(c, m, k)))(C, M, n)
  scales = jax.jit(jax.vmap(dg.clipping.noise_scale))
  below = 0
  eps = Fraction(float(np.finfo(np.float32).eps))
  for i, (drawn, plain) in enumerate(zip(np.asarray(scales(multipliers, update)), np.asarray(multipliers * update),
                                         strict=True)):
    real = Fraction(float(multipliers[i])) * (_real_mean_sensitivity(C[i], int(n[i]), np.float32)
                                             + 2 * eps * (Fraction(float(C[i])) + abs(Fraction(float(l2w[i])))))
    assert real <= Fraction(float(drawn)) <= real * (1 + Fraction(1, 2**15)), i
    below += Fraction(float(plain)) < real
  for i, drawn in enumerate(np.asarray(scales(multipliers, selection))):
    real_squared = (Fraction(float(multipliers[i])) * _real_mean_sensitivity(C[i], int(n[i]), np.float32)) ** 2 / (
        Fraction(float(M[i])))
    assert real_squared <= Fraction(float(drawn)) ** 2 <= real_squared * (1 + Fraction(1, 2**14)), i
  assert below > 10  # the plain float32 product does fall below the real one: the widening is needed


def test_noise_scales_widen_by_the_least_precise_input_and_fail_closed_below_normal():
  """Review findings: a float32 sensitivity times a float64 multiplier rounded in float32; a
  half-precision product rounded in half precision; a sensitivity whose terms flushed to zero."""
  with jax.enable_x64(True):
    rng = np.random.default_rng(3)
    M = rng.uniform(0.01, 9.0, 200).astype(np.float32)
    C = rng.uniform(0.01, 5.0, 200).astype(np.float32)
    multipliers = rng.uniform(0.5, 50.0, 200)  # float64
    selection = jax.vmap(lambda c, m: dg.solvers.greedy.selection_sensitivity(c, m, 1000))(C, M)
    drawn = np.asarray(jax.vmap(dg.clipping.noise_scale)(jnp.asarray(multipliers), selection))
    for i in range(200):
      real_squared = (Fraction(float(multipliers[i])) * _real_mean_sensitivity(C[i], 1000, np.float32)) ** 2 / (
          Fraction(float(M[i])))
      assert real_squared <= Fraction(float(drawn[i])) ** 2, i
  half = jnp.float16(1 + 3 * 2**-10)
  assert Fraction(float(dg.clipping.noise_scale(half, half))) >= Fraction(float(half)) ** 2
  assert np.isnan(float(dg.clipping.noise_scale(jnp.float32(3.0), jnp.float32(1e-39))))  # flushed terms
  assert float(dg.clipping.noise_scale(jnp.float32(0.0), jnp.float32(1e-39))) == 0.0


def test_half_precision_features_are_promoted_before_the_exact_mean():
  """float16 overflowed the fixed-point grid: neighbours' private smoothness came out 101.0 vs 0.001
  (review). Promoted to float32, the same key gives outputs within the sensitivity c / n."""
  X = np.zeros((100, 1), np.float16)
  X2 = X.copy()
  X2[0, 0] = 10.0
  key = jax.random.key(0)
  a, b = (float(private_smoothness(x, "squared", epsilon=1.0, key=key, clip=200.0, floor=1e-9)[0]) for x in (X, X2))
  assert abs(a - b) <= 2.0 * 200.0 / 100
  with pytest.raises(TypeError, match="float16"):
    dg.clipping.clipped_mean(jnp.zeros((4, 3), jnp.float16), jnp.float16(1.0), axis=0)
