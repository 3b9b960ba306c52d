"""`dpgcd_jax.privacy.auditing`: empirical privacy audit: Clopper-Pearson, neighbours, and bounds for correct / broken
DP-GCD.

A correct mechanism must keep the audit's lower bound below its claimed epsilon; a mechanism
with too little update noise, or without clipping, must be caught with a bound above it.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import audit_neighbours
from dpgcd_jax.privacy import auditing

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

DELTA = 1e-6
RUNS = 40_000  # per data set; half of them held out for the bound


def _pair(n=10, p=3, seed=0):
  """D, D': ``n - 1`` records with zero gradient at w = 0, one extreme record of opposite signs."""
  X = np.random.default_rng(seed).normal(size=(n, p))
  base = dg.make_problem(X, np.zeros(n), "squared", smoothness=np.ones(p))
  return audit_neighbours.adversarial_pair(base, index=0, feature_scale=1.0, target=1e6)


def _mechanism(params, steps, selection, update):
  def mechanism(key, problem):
    return dg.dp_gcd.run(problem, key, params, passes=steps, selection=selection, update=update,
                         store_objective=False).w
  return mechanism


def _calibrated(claim, steps, selection, update, update_factor=1.0):
  cal = accounting.calibrate_gcd(claim, DELTA, steps=steps, selection=selection, update=update)
  return dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=cal.selection_noise,
                          update_noise=cal.update_noise * update_factor)


# ----------------------------------------------------------------------------------------
# Statistics helpers.
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("k, n", [(0, 20), (3, 20), (19, 20), (20, 20), (0, 5000), (17, 5000),
                                  (2500, 5000)])
@pytest.mark.parametrize("alpha", [0.025, 0.05, 0.2])
def test_clopper_pearson_matches_scipy(k, n, alpha):
  upper = float(auditing.clopper_pearson_upper(k, n, alpha))
  lower = float(auditing.clopper_pearson_lower(k, n, alpha))
  # One-sided 1 - alpha bounds are the ends of the two-sided exact 1 - 2 alpha interval.
  ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - 2 * alpha, method="exact")
  np.testing.assert_allclose(upper, ci.high, rtol=1e-9, atol=1e-12)
  np.testing.assert_allclose(lower, ci.low, rtol=1e-9, atol=1e-12)
  if k < n:
    np.testing.assert_allclose(upper, stats.beta.ppf(1 - alpha, k + 1, n - k), rtol=1e-9)
  if k > 0:
    np.testing.assert_allclose(lower, stats.beta.ppf(alpha, k, n - k + 1), rtol=1e-9)


def test_clopper_pearson_upper_bound_covers_the_true_rate():
  rng = np.random.default_rng(0)
  for p, n in [(0.01, 300), (0.3, 40)]:
    k = rng.binomial(n, p, size=20_000)
    miss = np.mean(auditing.clopper_pearson_upper(k, n, 0.05) < p)
    assert miss <= 0.05 + 0.006, (p, n, miss)  # conservative: at most alpha
    assert miss >= 0.005, (p, n, miss)  # but not vacuous


def test_epsilon_from_rates_closed_form():
  np.testing.assert_allclose(auditing.epsilon_from_rates(0.1, 0.5, 0.0), np.log(5.0))
  np.testing.assert_allclose(auditing.epsilon_from_rates(0.5, 0.1, 0.0), np.log(5.0))
  np.testing.assert_allclose(auditing.epsilon_from_rates(0.1, 0.5, 0.1), np.log(4.0))
  assert auditing.epsilon_from_rates(0.5, 0.5, 0.0) == 0.0
  assert auditing.epsilon_from_rates(0.9, 0.9, 0.0) == 0.0  # a worse-than-random test: clipped


# ----------------------------------------------------------------------------------------
# Neighbours.
# ----------------------------------------------------------------------------------------


def test_adversarial_pair_moves_every_clipped_gradient_by_the_sensitivity():
  D, D2 = _pair()
  np.testing.assert_array_equal(D.smoothness, D2.smoothness)
  np.testing.assert_array_equal(D.X[1:], D2.X[1:])
  np.testing.assert_array_equal(D.X[0], -D2.X[0])
  M = problem_lib.coordinate_smoothness(D)
  thresholds = clipping.coordinate_thresholds(jnp.asarray(0.7), M)
  w = jnp.zeros(D.num_features)
  g = kernels.clipped_gradient(D, w, kernels.init_margins(D, w), thresholds)
  g2 = kernels.clipped_gradient(D2, w, kernels.init_margins(D2, w), thresholds)
  np.testing.assert_allclose(jnp.abs(g - g2), clipping.mean_sensitivity(thresholds, D.num_examples))


def test_adversarial_neighbour_opposes_the_original_gradient_logistic():
  rng = np.random.default_rng(1)
  X, y = rng.normal(size=(8, 4)), rng.choice([-1.0, 1.0], size=8)
  D = dg.make_problem(X, y, "logistic")
  D2 = audit_neighbours.adversarial_neighbour(D, index=3, feature_scale=100.0)
  grad = jax.grad(D.loss.fn)
  w = jnp.zeros(4)
  old, new = grad(w, D.X[3], D.y[3]), grad(w, D2.X[3], D2.y[3])
  assert np.all(np.sign(new) == -np.sign(old))
  np.testing.assert_allclose(jnp.abs(new), 50.0)  # |phi'(0, y)| = 1/2
  assert D2.y[3] == D.y[3]
  np.testing.assert_array_equal(D2.smoothness, D.smoothness)


def test_adversarial_neighbour_bad_input():
  D = dg.make_problem(np.ones((4, 2)), np.zeros(4), "squared")
  with pytest.raises(ValueError, match="target"):
    audit_neighbours.adversarial_neighbour(D)  # y = 0: the squared-loss gradient at 0 vanishes
  with pytest.raises(ValueError, match="index"):
    audit_neighbours.adversarial_neighbour(D, index=4, target=1.0)
  with pytest.raises(ValueError, match="feature_scale"):
    audit_neighbours.adversarial_neighbour(D, feature_scale=0.0, target=1.0)


# ----------------------------------------------------------------------------------------
# The audit.
# ----------------------------------------------------------------------------------------


def test_audit_compiles_once_and_bad_input():
  D, D2 = _pair(n=7)
  traces = []
  params = _calibrated(1.0, 1, "laplace", "laplace")

  def mechanism(key, problem):
    traces.append(1)
    return dg.dp_gcd.run(problem, key, params, passes=1, store_objective=False).w

  res = auditing.audit(mechanism, D, D2, key=jax.random.key(0), runs=2_500, delta=DELTA, chunk=1_000)
  assert len(traces) == 1  # one trace for both data sets and all (padded) chunks
  assert res.runs == 2_500 and res.held_out_runs == 1_250
  with pytest.raises(ValueError, match="runs"):
    auditing.audit(mechanism, D, D2, key=jax.random.key(0), runs=2, delta=DELTA)
  with pytest.raises(ValueError, match="key"):
    auditing.audit(mechanism, D, D2, key=0, runs=100, delta=DELTA)
  with pytest.raises(ValueError, match="confidence"):
    auditing.audit(mechanism, D, D2, key=jax.random.key(0), runs=100, delta=DELTA, confidence=1.0)
  with pytest.raises(ValueError, match="shapes"):
    auditing.audit(mechanism, D, _pair(n=8)[1], key=jax.random.key(0), runs=100, delta=DELTA)


def test_audit_of_identical_data_sets_finds_nothing():
  D, _ = _pair()
  mechanism = _mechanism(_calibrated(1.0, 1, "laplace", "laplace"), 1, "laplace", "laplace")
  res = auditing.audit(mechanism, D, D, key=jax.random.key(3), runs=RUNS, delta=DELTA)
  assert res.epsilon_lower_bound < 0.05


@pytest.mark.parametrize("selection, update, steps, claim", [
    ("laplace", "laplace", 1, 1.0),
    ("gumbel", "gaussian", 1, 1.0),
    ("laplace", "laplace", 3, 2.0),
    ("gumbel", "gaussian", 3, 2.0),
])
def test_correct_dp_gcd_stays_below_its_claim(selection, update, steps, claim):
  D, D2 = _pair()
  mechanism = _mechanism(_calibrated(claim, steps, selection, update), steps, selection, update)
  res = auditing.audit(mechanism, D, D2, key=jax.random.key(1), runs=RUNS, delta=DELTA)
  assert res.epsilon_lower_bound < claim, res
  assert res.epsilon_lower_bound > 0.05 * claim, res  # the audit has power on this pair


@pytest.mark.parametrize("selection, update", [("laplace", "laplace"), ("gumbel", "gaussian")])
def test_audit_detects_update_noise_divided_by_4(selection, update):
  D, D2 = _pair()
  params = _calibrated(1.0, 1, selection, update, update_factor=0.25)  # claim is still 1
  mechanism = _mechanism(params, 1, selection, update)
  res = auditing.audit(mechanism, D, D2, key=jax.random.key(2), runs=RUNS, delta=DELTA)
  assert res.epsilon_lower_bound > 1.0, res


@pytest.fixture
def fresh_jit_caches():
  jax.clear_caches()  # so that the patched clipping is traced ...
  yield
  jax.clear_caches()  # ... and never reused by a later test


def test_audit_detects_skipped_clipping(monkeypatch, fresh_jit_caches):
  del fresh_jit_caches
  monkeypatch.setattr(clipping, "clip_coordinates", lambda grads, thresholds: grads)
  D, D2 = _pair(n=11)  # a shape no other test compiles, on top of the cache reset
  # Noise still scaled to the clipping threshold C = 1, calibrated for epsilon = 1.
  mechanism = _mechanism(_calibrated(1.0, 1, "laplace", "laplace"), 1, "laplace", "laplace")
  res = auditing.audit(mechanism, D, D2, key=jax.random.key(4), runs=RUNS, delta=DELTA)
  assert res.epsilon_lower_bound > 1.0, res
