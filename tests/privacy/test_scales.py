"""`dpgcd_jax.privacy.scales`: private per-feature scales: counts, sensitivity, noise scale, accounting, audit,
accuracy."""

import math

import dp_accounting
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from scipy import stats

from dpgcd_jax import discrete_noise
from dpgcd_jax import discrete_pmfs
from dpgcd_jax import sparse as sparse_lib
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import auditing
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import scales
from dpgcd_jax.privacy import scales_budget

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

GRID = scales.GRID
L = scales.num_rounds()


def _numpy_counts(X, grid=GRID):
  """N_jk = #{i : |x_ij| <= b_k}, straight from the definition."""
  return (np.abs(np.asarray(X))[:, :, None] <= np.asarray(grid)[None, None, :]).sum(axis=0)


def _exact_scales(X, q, grid=GRID):
  """The smallest grid point b_k with N_jk >= q n (the top of the grid when none)."""
  counts = _numpy_counts(X, grid)
  ok = counts >= q * X.shape[0]
  return np.asarray(grid)[np.where(ok.any(axis=1), ok.argmax(axis=1), len(grid) - 1)]


def _awkward_data(n=60, p=5, seed=0):
  """Values on grid points, just above them, zeros, below and above the grid, negative."""
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p)) * 10.0 ** rng.uniform(-3, 3, size=p)
  X[rng.random((n, p)) < 0.3] = 0.0
  X[0, :] = GRID[10]
  X[1, :] = -np.nextafter(GRID[40], np.inf)
  X[2, :] = 1e-9
  X[3, :] = -1e9
  return X


def _sparse(X):
  return sparse_lib.from_matrix(scipy.sparse.csr_matrix(X))


# ----------------------------------------------------------------------------------------
# Counts.
# ----------------------------------------------------------------------------------------


def test_grid_counts_match_the_definition_dense_and_sparse():
  X = _awkward_data()
  want = _numpy_counts(X)
  np.testing.assert_array_equal(scales.grid_counts(X.T), want)
  np.testing.assert_array_equal(scales.grid_counts(_sparse(X)), want)
  # An explicitly stored zero counts as a zero, once.
  i, j = np.argwhere(X == 0.0)[0]
  coo = scipy.sparse.coo_matrix(X)
  explicit = scipy.sparse.csc_matrix((np.r_[coo.data, 0.0], (np.r_[coo.row, i], np.r_[coo.col, j])),
                                     shape=X.shape)
  assert explicit.nnz == coo.nnz + 1
  np.testing.assert_array_equal(scales.grid_counts(sparse_lib.from_matrix(explicit)), want)


@pytest.mark.slow
def test_noise_zero_is_the_exact_rounded_quantile_dense_and_sparse():
  X = _awkward_data(n=200, p=8, seed=3)
  for q in (0.5, 0.9):
    want = _exact_scales(X, q)
    key = jax.random.key(0)
    np.testing.assert_array_equal(scales.private_feature_scales(key, X.T, 0.0, quantile=q), want)
    np.testing.assert_array_equal(scales.private_feature_scales(key, _sparse(X), 0.0, quantile=q),
                                  want)


@pytest.mark.slow
def test_sparse_and_dense_release_the_same_scales():
  X = _awkward_data(n=300, p=7, seed=4)
  keys = jax.random.split(jax.random.key(5), 20)
  run = lambda XT: jax.vmap(lambda k: scales.private_feature_scales(k, XT, 0.3))(keys)
  np.testing.assert_array_equal(run(X.T), run(_sparse(X)))


# ----------------------------------------------------------------------------------------
# Sensitivity: every count moves by at most 1, so any query vector by at most sqrt(p) in l2.
# ----------------------------------------------------------------------------------------


def _replacements(p, rng):
  specials = [np.zeros(p), np.full(p, 1e12), np.full(p, -1e-12), np.full(p, GRID[0]),
              np.full(p, GRID[-1]), -np.nextafter(GRID[-1], np.inf) * np.ones(p),
              np.nextafter(GRID[64], 0.0) * np.ones(p)]
  randoms = [rng.choice([-1, 1], p) * 2.0 ** rng.uniform(-20, 20, p) for _ in range(20)]
  on_grid = [rng.choice(GRID, p) * rng.choice([-1, 1], p) for _ in range(10)]
  return specials + randoms + on_grid


@pytest.mark.parametrize("sparse", [False, True])
def test_sensitivity_sweep_worst_case_neighbours(sparse):
  rng = np.random.default_rng(7)
  n, p = 40, 6
  X = _awkward_data(n, p, seed=8)
  counts = lambda A: np.asarray(scales.grid_counts(_sparse(A) if sparse else A.T), dtype=float)
  base = counts(X)
  worst_l2 = 0.0
  for index in (0, 2, 3, 17):
    for record in _replacements(p, rng):
      X2 = X.copy()
      X2[index] = record
      diff = counts(X2) - base
      assert np.max(np.abs(diff)) <= 1.0  # every N_jk moves by at most 1
      # The l2 norm of the queried vector, maximized over the query indices m_j (one per j).
      worst_l2 = max(worst_l2, float(np.sqrt(np.sum(np.max(np.abs(diff), axis=1) ** 2))))
  assert worst_l2 <= math.sqrt(p) + 1e-12
  assert worst_l2 == pytest.approx(math.sqrt(p))  # attained: the bound is tight


@pytest.mark.slow
def test_released_counts_move_by_at_most_sqrt_p_along_every_search_path():
  """Whatever indices the search queries, the queried counts of neighbours differ by <= sqrt(p)."""
  n, p = 50, 4
  X = _awkward_data(n, p, seed=10)
  X2 = X.copy()
  X2[0] = 1e12
  c1, c2 = scales.grid_counts(X.T), scales.grid_counts(X2.T)
  keys = jax.random.split(jax.random.key(1), 200)
  for noise in (0.0, 0.05, 1.0):
    for counts in (c1, c2):
      queried = np.asarray(jax.vmap(lambda k: scales.noisy_search(k, counts, noise, 0.9 * n))(  # noqa: B023
          keys).queried)  # (runs, L, p)
      diff = (np.asarray(c1) - np.asarray(c2))[np.arange(p), queried]
      l2 = np.sqrt(np.sum(diff.astype(float) ** 2, axis=-1))
      assert np.all(l2 <= math.sqrt(p) + 1e-12)


# ----------------------------------------------------------------------------------------
# Noise scale.
# ----------------------------------------------------------------------------------------


def _chi2_pvalue(z, sigma):
  """Chi-square of integer draws against the discrete Gaussian of `sigma` (cells +-3 sigma, tails)."""
  cut = int(3 * sigma)
  ks = np.arange(-cut, cut + 1)
  observed = np.array([np.sum(z == k) for k in ks] + [np.sum(np.abs(z) > cut)], dtype=float)
  pmf = discrete_pmfs.discrete_gaussian_pmf(ks, sigma)
  return stats.chisquare(observed, z.size * np.append(pmf, 1.0 - pmf.sum())).pvalue


@pytest.mark.slow
@pytest.mark.parametrize("sparse", [False, True])
def test_every_released_count_has_discrete_gaussian_noise_of_scale_above_s_sqrt_p(sparse):
  X = _awkward_data(n=80, p=5, seed=11)
  XT = _sparse(X) if sparse else X.T
  counts = scales.grid_counts(XT)
  s, p = 4.0, X.shape[1]
  keys = jax.random.split(jax.random.key(2024), 300)
  search = jax.jit(jax.vmap(lambda k: scales.noisy_search(k, counts, s, 0.9 * 80)))(keys)
  queried = np.asarray(search.queried)  # (draws, L, p)
  exact = np.asarray(counts)[np.arange(p)[None, None, :], queried] - math.ceil(0.9 * 80)
  z = np.asarray(search.released) - exact
  assert z.shape == (300, L, p) and z.dtype == np.int32
  sigma = int(scales.count_sigma(s, p)[0])
  assert sigma == math.floor(s * math.sqrt(p)) + 1  # rounded up: 9 > 8.94
  assert _chi2_pvalue(z.ravel(), sigma) > 1e-3
  for wrong in (2 / 3, 3 / 2):
    assert _chi2_pvalue(z.ravel(), sigma * wrong) < 1e-6, wrong
  # And the public entry point releases exactly the grid point the transcript ends on.
  B = jax.vmap(lambda k: scales.private_feature_scales(k, XT, s))(keys[:50])
  np.testing.assert_array_equal(B, GRID[np.asarray(search.index[:50])])


@pytest.mark.slow
def test_fail_closed_and_limits():
  X = _awkward_data(n=30, p=3)
  key = jax.random.key(0)
  for bad in (-1.0, np.nan, np.inf, discrete_noise.MAX_SCALE):  # the last two: beyond the sampler's range
    assert np.all(np.isnan(scales.private_feature_scales(key, X.T, bad)))
  B = scales.private_feature_scales(key, X.T, 1000.0)  # large noise: a random grid point
  assert np.all(np.isin(np.asarray(B), GRID))


@pytest.mark.slow
def test_jit_vmap_over_key_noise_and_quantile_compiles_once():
  X = _awkward_data(n=50, p=4)
  traces = []

  def release(key, noise, q):
    traces.append(1)
    return scales.private_feature_scales(key, X.T, noise, quantile=q)

  fn = jax.jit(jax.vmap(release))
  keys = jax.random.split(jax.random.key(3), 6)
  out = fn(keys, jnp.linspace(0.1, 1.0, 6), jnp.linspace(0.5, 0.95, 6))
  fn(keys, jnp.linspace(1.0, 2.0, 6), jnp.linspace(0.9, 0.9, 6))
  assert out.shape == (6, 4) and len(traces) == 1
  one = scales.private_feature_scales(keys[2], X.T, float(jnp.linspace(0.1, 1.0, 6)[2]),
                                      quantile=float(jnp.linspace(0.5, 0.95, 6)[2]))
  np.testing.assert_array_equal(out[2], one)


def test_bad_input_names_the_argument():
  X = _awkward_data(n=20, p=3)
  key = jax.random.key(0)
  with pytest.raises(ValueError, match="quantile"):
    scales.private_feature_scales(key, X.T, 1.0, quantile=1.0)
  with pytest.raises(ValueError, match="grid"):
    scales.private_feature_scales(key, X.T, 1.0, grid=np.array([1.0, 0.5]))
  with pytest.raises(ValueError, match="grid"):
    scales.private_feature_scales(key, X.T, 1.0, grid=np.array([0.0, 1.0]))
  with pytest.raises(ValueError, match="XT"):
    scales.private_feature_scales(key, X[:, 0], 1.0)
  with pytest.raises(ValueError, match="key"):
    scales.private_feature_scales(0, X.T, 1.0)
  with pytest.raises(ValueError, match="epsilon"):
    scales_budget.calibrate_scales(0.0, 1e-6, features=5)
  with pytest.raises(ValueError, match="delta"):
    scales_budget.calibrate_scales(1.0, 1.0, features=5)
  with pytest.raises(ValueError, match="rho"):
    scales_budget.noise_for_rho(-1.0)
  with pytest.raises(ValueError, match="n"):
    scales_budget.scales_informative(1, 10, 1.0)


# ----------------------------------------------------------------------------------------
# Accounting.
# ----------------------------------------------------------------------------------------


def _gdp_epsilon(mu, delta):
  """Dong, Roth & Su: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), inverted."""
  f = lambda e: stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2) - delta
  from scipy import optimize  # pylint: disable=g-import-not-at-top
  return optimize.brentq(f, 0.0, 100.0, xtol=1e-12)


@pytest.mark.parametrize("noise, delta", [(5.0, 1e-6), (20.0, 1e-9), (60.0, 4e-10)])
def test_ledger_is_the_discrete_gaussians_rdp_and_matches_dp_accounting(noise, delta):
  ledger = scales_budget.scales_ledger(noise, features=5)
  assert ledger.entries[0].event == events.DiscreteGaussian(noise) and ledger.entries[0].count == L == 7
  eps, route = ledger.epsilon_and_route(delta)
  assert route == "rdp"  # no GDP / PLD claim for the discrete Gaussian
  # Its RDP curve is the continuous Gaussian's (CKS Thm 4): dp_accounting's RDP accountant of
  # L Gaussians gives the same epsilon up to the conversion, and the exact GDP one is below.
  event = dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(noise), L)
  rdp = dp_accounting.rdp.RdpAccountant().compose(event)
  np.testing.assert_allclose(eps, rdp.get_epsilon(delta), rtol=2e-2)
  assert eps <= rdp.get_epsilon(delta) * (1 + 1e-9)
  assert eps > _gdp_epsilon(math.sqrt(L) / noise, delta)
  # zCDP: rho = L / (2 s^2), and rho-zCDP => (rho + 2 sqrt(rho log(1/delta)), delta)-DP.
  rho = scales_budget.scales_rho(noise)
  np.testing.assert_allclose(rho, L / (2 * noise**2))
  np.testing.assert_allclose(scales_budget.noise_for_rho(rho), noise)
  assert eps <= rho + 2 * math.sqrt(rho * math.log(1 / delta))


@pytest.mark.parametrize("epsilon, delta", [(0.1, 1e-8), (0.2, 4e-10), (1.0, 1e-6)])
def test_calibrate_scales_is_tight(epsilon, delta):
  s = scales_budget.calibrate_scales(epsilon, delta, features=5)
  assert scales_budget.scales_ledger(s, features=5).epsilon(delta) <= epsilon
  assert scales_budget.scales_ledger(s * 0.99, features=5).epsilon(delta) > epsilon
  np.testing.assert_allclose(scales_budget.count_noise(5, epsilon, delta), s * math.sqrt(5))


def test_composes_with_a_dp_gcd_run_in_one_ledger():
  delta = 1e-7
  scale_noise = scales_budget.calibrate_scales(0.2, delta, features=5)
  run = accounting.gcd_ledger(30.0, 40.0, steps=50, selection="gumbel", update="gaussian")
  both = run + scales_budget.scales_ledger(scale_noise, features=5)
  eps_run, eps_both = run.epsilon(delta / 2), both.epsilon(delta)
  assert [e.label for e in both.entries][-2:] == [scales_budget.LABEL, scales_budget.LABEL + " draws"]
  assert eps_both < eps_run + 0.2  # composition is better than adding the parts ...
  assert eps_both > max(run.epsilon(delta), 0.2)  # ... and costs something


# ----------------------------------------------------------------------------------------
# Empirical audit.
# ----------------------------------------------------------------------------------------


AUDIT_RUNS = 20_000  # the discrete sampler costs ~1000x a float normal: one feature, 20,000 runs


def _audit_pair(n=10, p=1):
  """D: n - 1 zeros and one record above the grid; D': that record is 0 too. With q = 0.95
  (t = n - 1/2) every count reads n - 1 < t on D and n >= t on D', at every grid point: every
  round's queried vector moves by sqrt(p) (the sensitivity), whatever the search path. The
  audit's power depends on `sqrt(L) / noise` only, not on `p`."""
  D = np.zeros((p, n))
  D[:, -1] = 2.0**20
  return jnp.asarray(D), jnp.zeros((p, n))


def _transcript_mechanism(noise):
  """Sum of all released noisy counts: the optimal test for this pair (mean shift p L)."""
  return lambda key, XT: jnp.sum(scales.noisy_search(key, scales.grid_counts(XT), noise,
                                                      0.95 * XT.shape[1]).released)


def _released_scales_mechanism(noise):
  """Only the released B: the number of "right" decisions, popcount(index) summed over j."""
  def mechanism(key, XT):
    B = scales.private_feature_scales(key, XT, noise, quantile=0.95)
    index = jnp.round(4 * jnp.log2(B)).astype(jnp.int32) + 64
    return jnp.sum(jax.lax.population_count(index)).astype(jnp.float32)
  return mechanism


@pytest.mark.slow
@pytest.mark.parametrize("claim", [0.5, 1.0])
def test_audit_of_the_transcript_stays_below_the_claim(claim):
  delta = 1e-6
  D, D2 = _audit_pair()
  noise = scales_budget.calibrate_scales(claim, delta, features=5)
  res = auditing.audit(_transcript_mechanism(noise), D, D2, key=jax.random.key(1), runs=AUDIT_RUNS,
                       delta=delta, statistic=lambda s: s)
  assert res.epsilon_lower_bound < claim, res
  # The audit has power on this pair (at claim 1; at 0.5 and delta 1e-6 the discrete noise,
  # RDP-calibrated and rounded up to an integer, leaves ~0.09 at 40,000 runs: too close to call).
  assert claim < 1.0 or res.epsilon_lower_bound > 0.2 * claim, res


@pytest.mark.slow
def test_audit_of_the_released_scales_stays_below_the_claim():
  delta = 1e-6
  D, D2 = _audit_pair()
  noise = scales_budget.calibrate_scales(1.0, delta, features=5)
  res = auditing.audit(_released_scales_mechanism(noise), D, D2, key=jax.random.key(3),
                       runs=AUDIT_RUNS, delta=delta, statistic=lambda s: s)
  assert res.epsilon_lower_bound < 1.0, res


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", [_transcript_mechanism, _released_scales_mechanism])
def test_audit_detects_noise_divided_by_4(mechanism):
  delta = 1e-6
  D, D2 = _audit_pair()
  noise = scales_budget.calibrate_scales(1.0, delta, features=5) / 4  # the claim is still 1
  res = auditing.audit(mechanism(noise), D, D2, key=jax.random.key(2), runs=AUDIT_RUNS, delta=delta,
                       statistic=lambda s: s)
  assert res.epsilon_lower_bound > 1.0, res


# ----------------------------------------------------------------------------------------
# Accuracy.
# ----------------------------------------------------------------------------------------


def test_scales_over_five_decades_at_epsilon_0_2():
  n, p = 50_000, 200
  rng = np.random.default_rng(0)
  s = 10.0 ** rng.uniform(-2.5, 2.5, size=p)
  XT = rng.normal(size=(p, n)).astype(np.float32) * s[:, None].astype(np.float32)
  true = np.quantile(np.abs(XT), 0.9, axis=1)
  noise = scales_budget.calibrate_scales(0.2, 1.0 / n**2, features=5)
  B = np.asarray(scales.private_feature_scales(jax.random.key(0), jnp.asarray(XT), noise))
  ratio = B / true
  assert np.all((ratio >= 1 / 4) & (ratio <= 4)), np.sort(ratio)[[0, -1]]
  assert np.mean((ratio >= 1 / 2) & (ratio <= 2)) >= 0.9
  assert scales_budget.scales_informative(n, p, 0.2)


def test_informative_threshold_is_monotone_and_public():
  for p, eps in [(30, 0.2), (200, 0.5)]:
    n_min = scales_budget.min_informative_n(p, eps)
    assert scales_budget.scales_informative(n_min, p, eps)
    assert not scales_budget.scales_informative(int(n_min * 0.99), p, eps)
  assert not scales_budget.scales_informative(400, 30, 0.2)  # DESIGN 12: too small
  assert scales_budget.scales_informative(35_000, 200, 0.2)
  assert scales_budget.min_informative_n(200, 0.1) > scales_budget.min_informative_n(200, 0.5)
  assert scales_budget.min_informative_n(200, 0.2) > scales_budget.min_informative_n(30, 0.2)
