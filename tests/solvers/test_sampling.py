"""`dpgcd_jax.sampling`: Poisson sampling for DP-SGD: exact tables, Bernoulli(q) inclusion, Binomial batch sizes,
bounds."""

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from dpgcd_jax import sampling
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.solvers import dp_sgd

P_MIN = 1e-4  # fixed keys: the tests are deterministic; this is the level they reject at


def _alias_masses(p):
  """Outcome masses (units of 2^-128) encoded by a plan's alias table, in exact integers."""
  m = p.table_bits
  cap = 1 << (128 - m)
  mass = [0] * (1 << m)
  for b in range(1 << m):
    hi, (w1, w2, w3) = int(p.split_hi[b]), (int(w) for w in p.split_lo[b])
    split = (hi << 96) | (w1 << 64) | (w2 << 32) | w3
    mass[b] += split
    mass[int(p.alias[b])] += cap - split
  return mass


@pytest.mark.parametrize("n, q", [(50, 0.3), (2_000, 0.01), (10_000, 0.01), (10_000, 1e-4)])
def test_alias_table_encodes_the_geometric_law_to_2_pow_minus_127(n, q):
  p = sampling.plan(n, q)
  mass = _alias_masses(p)
  assert sum(mass) == 1 << 128
  K = max(o for o, w in enumerate(mass) if w)  # outcome K = gap K + 1: "K + 1 or more"
  assert K == n or (1 - q)**(K + 1) < 2.0**-128
  rho, one = 1 - Fraction(q), 1 << 128
  for k in sorted({1, 2, 3, 10, 100, 1587, 1588, 5_000, K // 2, K}):
    if k <= K:
      tail = one - sum(mass[:k])  # 2^128 P(G' > k), exact
      assert abs(tail - one * rho**k) <= 1, k


def test_gap_total_variation_bound_holds_against_the_exact_law():
  p = sampling.plan(50, 0.3)
  mass = _alias_masses(p)
  rho = 1 - Fraction(0.3)
  pmf = [rho**o * (1 - rho) for o in range(50)] + [rho**50]  # min(G, n + 1) - 1
  tv = sum(abs(Fraction(w, 1 << 128) - e) for w, e in zip(mass, pmf, strict=False)) / 2
  assert 0 < tv <= p.gap_total_variation < 1e-35


def test_device_inversion_matches_the_table_on_every_bucket_edge():
  """First words on both sides of every split point (fast path), and on it (lower words)."""
  p = sampling.plan(2_000, 0.01)
  m = p.table_bits
  width = 1 << (32 - m)
  buckets = np.arange(1 << m, dtype=np.uint64)
  split_hi = p.split_hi.astype(np.int64)
  extra = jax.random.key(7)
  invert = jax.jit(lambda u: sampling._exact_outcomes(u, extra, p))

  def words(rests):
    return np.concatenate([(buckets << np.uint64(32 - m)) + np.clip(r, 0, width - 1).astype(np.uint64)
                           for r in rests]).astype(np.uint32)

  fast = words([np.zeros_like(split_hi), split_hi - 1, split_hi + 1, np.full_like(split_hi, width - 1)])
  fast = fast[(fast & (width - 1)) != p.split_hi[fast >> (32 - m)]]  # no tie: no lower words
  tied = words([split_hi])[p.split_hi < width]
  for u in (fast, tied):
    got = np.asarray(invert(u))
    lo = np.asarray(jax.random.bits(jax.random.fold_in(extra, 0), (u.size, 3), jnp.uint32))
    for i, word in enumerate(u.tolist()):
      b, rest = word >> (32 - m), word & (width - 1)
      w1, w2, w3 = (int(x) for x in p.split_lo[b])
      split = (int(p.split_hi[b]) << 96) | (w1 << 64) | (w2 << 32) | w3
      low = (rest << 96) | (int(lo[i, 0]) << 64) | (int(lo[i, 1]) << 32) | int(lo[i, 2])
      assert got[i] == (b if low < split else int(p.alias[b])), (i, word)
  assert tied.size > 100


def _inclusion_counts(n, q, draws, seed, capacity=None, chunk=20_000):
  """Per-example inclusion counts and batch sizes over ``draws`` keys (overflows completed)."""
  p = sampling.plan(n, q, capacity)
  sample = jax.jit(jax.vmap(lambda k: sampling.sample(k, p)))
  mask_of = jax.jit(lambda k: sampling.sample_mask(k, p))
  counts, sizes, overflows = np.zeros(n), [], 0
  keys = jax.random.split(jax.random.key(seed), draws)
  for start in range(0, draws, chunk):
    batch = sample(keys[start:start + chunk])
    idx, valid, over = map(np.asarray, batch)
    np.add.at(counts, idx[valid & ~over[:, None]], 1)
    sizes.append(valid.sum(axis=1) * ~over)
    for i in np.flatnonzero(over):  # the exact O(n) completion, as subsample_sum takes it
      mask = np.asarray(mask_of(keys[start + i]))
      counts += mask
      sizes[-1][i] = mask.sum()
      overflows += 1
  return counts, np.concatenate(sizes), overflows


def _chi_square_pvalue(observed, probs, min_expected=5.0):
  """Chi-square goodness of fit, adjacent bins merged until each expects >= min_expected."""
  total = observed.sum()
  obs_bins, exp_bins, o_acc, e_acc = [], [], 0.0, 0.0
  for o, e in zip(observed, probs * total, strict=False):
    o_acc, e_acc = o_acc + o, e_acc + e
    if e_acc >= min_expected:
      obs_bins.append(o_acc)
      exp_bins.append(e_acc)
      o_acc = e_acc = 0.0
  obs_bins[-1] += o_acc
  exp_bins[-1] += e_acc
  obs_bins, exp_bins = np.array(obs_bins), np.array(exp_bins)
  exp_bins *= obs_bins.sum() / exp_bins.sum()
  return stats.chisquare(obs_bins, exp_bins).pvalue


@pytest.mark.slow
@pytest.mark.parametrize("n, q, draws", [(10_000, 1e-4, 200_000), (10_000, 0.01, 20_000)])
def test_inclusion_is_independent_bernoulli_q(n, q, draws):
  counts, sizes, overflows = _inclusion_counts(n, q, draws, seed=1)
  if draws * sampling.plan(n, q).overflow_probability > 5:
    assert overflows > 0  # the exact completion is part of what is tested
  # Total inclusions ~ Binomial(n draws, q).
  assert stats.binomtest(int(counts.sum()), n * draws, q).pvalue > P_MIN
  # Per-example counts are i.i.d. Binomial(draws, q): their histogram, and their sums over
  # 20 blocks of consecutive positions (uniform over positions, no edge effect).
  hist = np.bincount(counts.astype(int), minlength=draws + 1)
  assert _chi_square_pvalue(hist, stats.binom.pmf(np.arange(draws + 1), draws, q)) > P_MIN
  blocks = counts.reshape(20, -1).sum(axis=1)
  assert stats.chisquare(blocks).pvalue > P_MIN
  # Batch sizes ~ Binomial(n, q).
  size_hist = np.bincount(sizes, minlength=n + 1)
  assert _chi_square_pvalue(size_hist, stats.binom.pmf(np.arange(n + 1), n, q)) > P_MIN


@pytest.mark.slow
def test_batch_sizes_are_binomial_through_the_overflow_branch():
  n, q, capacity, draws = 200, 0.05, 12, 20_000
  p = sampling.plan(n, q, capacity)
  masks = np.asarray(jax.jit(jax.vmap(lambda k: sampling.sample_mask(k, p)))(
      jax.random.split(jax.random.key(2), draws)))
  sizes = masks.sum(axis=1)
  assert stats.binomtest(int(np.sum(sizes > capacity)), draws, p.overflow_probability).pvalue > P_MIN
  assert np.sum(sizes > capacity + 5) > 100  # the completion adds examples, it does not truncate
  hist = np.bincount(sizes, minlength=n + 1)
  assert _chi_square_pvalue(hist, stats.binom.pmf(np.arange(n + 1), n, q)) > P_MIN
  # Per-example rates, and pairwise independence of neighbours: co-inclusions of (i, i + 1)
  # summed over i, against their mean and exact variance under independence.
  per_example = masks.sum(axis=0)
  assert _chi_square_pvalue(np.bincount(per_example, minlength=draws + 1),
                            stats.binom.pmf(np.arange(draws + 1), draws, q)) > P_MIN
  both = (masks[:, :-1] & masks[:, 1:]).sum(axis=1).astype(float)
  pairs = n - 1
  mean = pairs * q**2
  var = pairs * q**2 * (1 - q**2) + 2 * (pairs - 1) * (q**3 - q**4)
  z = (both.mean() - mean) / math.sqrt(var / draws)
  assert abs(z) < 4.0


@pytest.mark.slow
def test_gaps_beyond_1587_occur_at_q_001():
  """float32 jax.random.geometric never exceeds 1587 at q = 0.01 (2^23 levels): the old bug."""
  p = sampling.plan(10_000, 0.01)
  chunk, chunks = 2**16, 1600

  @jax.jit
  def tail_counts(key):
    def body(i, c):
      g = sampling.sample_gaps(jax.random.fold_in(key, i), p, chunk)
      return c + jnp.stack([jnp.sum(g > 500), jnp.sum(g > 1587)]).astype(jnp.int32)
    return jax.lax.fori_loop(0, chunks, body, jnp.zeros(2, jnp.int32))

  over_500, over_1587 = np.asarray(tail_counts(jax.random.key(3)))
  total = chunk * chunks
  assert stats.binomtest(int(over_500), total, 0.99**500).pvalue > P_MIN
  assert over_1587 >= 1  # expected 12.4
  assert stats.binomtest(int(over_1587), total, 0.99**1587).pvalue > P_MIN


@pytest.mark.slow
def test_same_key_same_batch_and_every_path_gives_the_same_sample():
  n, q = 200, 0.05
  p = sampling.plan(n, q, 16)
  assert p.tiers == (14, 16)  # branches: <= 14 rows, <= 16 rows, exact completion
  keys = jax.random.split(jax.random.key(4), 300)
  masks_of = jax.jit(jax.vmap(lambda k: sampling.sample_mask(k, p)))
  masks, again = masks_of(keys), masks_of(keys)
  np.testing.assert_array_equal(masks, again)
  assert len({bytes(np.asarray(m)) for m in masks}) > 290
  # subsample_sum sums over the same sample, in every branch of its switch.
  one_hot = lambda idx: jax.nn.one_hot(idx, n)
  unbatched = jax.jit(lambda k: sampling.subsample_sum(k, p, one_hot))  # not vmapped: a real switch
  sizes = np.asarray(masks).sum(axis=1)
  for i in range(200):
    np.testing.assert_array_equal(np.asarray(unbatched(keys[i])), np.asarray(masks[i], float))
  branches = np.digitize(sizes[:200], [14.5, 16.5])
  assert set(branches) == {0, 1, 2}
  batch = jax.jit(lambda k: sampling.sample(k, p))(keys[0])
  idx = np.asarray(batch.indices)[np.asarray(batch.valid)]
  assert np.all(np.diff(idx) > 0) and set(idx) <= set(np.flatnonzero(np.asarray(masks[0])))
  # Raw uint32 keys work too.
  raw = jax.jit(lambda k: sampling.sample_mask(k, p))(jax.random.PRNGKey(0))
  assert raw.shape == (n,) and raw.dtype == bool


def test_unsampled_non_finite_values_never_reach_the_sum():
  n = 100
  p = sampling.plan(n, 0.05)
  values = jnp.where(jnp.arange(n) == 0, jnp.nan, 1.0)  # padding gathers index 0
  total_and_mask = jax.jit(jax.vmap(lambda k: (sampling.subsample_sum(k, p, lambda idx: values[idx]),
                                               sampling.sample_mask(k, p))))
  totals, masks = map(np.asarray, total_and_mask(jax.random.split(jax.random.key(5), 200)))
  np.testing.assert_array_equal(np.isnan(totals), masks[:, 0])
  np.testing.assert_array_equal(totals[~masks[:, 0]], masks[~masks[:, 0]].sum(axis=1))


def test_full_batch_when_q_is_one():
  p = sampling.plan(7, 1.0)
  assert p.capacity == 7 and p.step_total_variation == 0.0
  assert np.all(np.asarray(jax.jit(lambda k: sampling.sample_mask(k, p))(jax.random.key(0))))
  total = jax.jit(lambda k: sampling.subsample_sum(k, p, lambda idx: idx.astype(float)))(jax.random.key(0))
  assert float(total) == 21.0


def test_total_variation_bounds_and_dp_sgd_slack():
  for n in (1, 10, 1_000, 30_000):
    for b in (1, 10, 100):
      if b > n:
        continue
      eta = sampling.step_total_variation(n, b / n)
      assert 0 <= eta <= sampling.MAX_STEP_TOTAL_VARIATION
  eta = sampling.step_total_variation(10_000, 0.01)
  assert sampling.total_variation_slack(10_000, 0.01, 1000) == pytest.approx(1000 * eta, rel=1e-12)
  assert sampling.total_variation_slack(10_000, 0.01, 0) == 0.0
  assert baseline_accounting.POISSON_STEP_TOTAL_VARIATION == sampling.MAX_STEP_TOTAL_VARIATION == 2.0**-64
  # A float q >= 2^-75 is a multiple of 2^-128: the tail Bernoulli is exact.
  assert sampling.plan(50, 0.3).inclusion_total_variation == 0.0


def test_default_capacity_keeps_overflow_below_one_over_n():
  for n, b in [(10_000, 1), (10_000, 10), (10_000, 100), (500, 50)]:
    c = sampling.default_capacity(n, b / n)
    assert stats.binom.sf(c, n, b / n) <= 1 / n < stats.binom.sf(c - 1, n, b / n)
    assert dp_sgd.max_batch_size(n, b / n) == c
  assert sampling.default_capacity(10, 1.0) == 10


@pytest.mark.parametrize("call, match", [
    (lambda: sampling.plan(0, 0.1), "num_examples"),
    (lambda: sampling.plan(10.0, 0.1), "num_examples"),
    (lambda: sampling.plan(10, 0.0), "sampling_rate"),
    (lambda: sampling.plan(10, 1.5), "sampling_rate"),
    (lambda: sampling.plan(10, float("nan")), "sampling_rate"),
    (lambda: sampling.plan(10, "a"), "sampling_rate"),
    (lambda: sampling.plan(10, 0.1, capacity=0), "capacity"),
    (lambda: sampling.plan(10, 0.1, capacity=11), "capacity"),
    (lambda: sampling.total_variation_slack(10, 0.1, -1), "steps"),
    (lambda: sampling.sample_gaps(jax.random.key(0), sampling.plan(10, 0.1), 0), "num"),
])
def test_bad_input_raises_a_value_error_naming_it(call, match):
  with pytest.raises(ValueError, match=match):
    call()
