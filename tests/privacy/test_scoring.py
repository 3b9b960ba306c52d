"""Tests of private evaluation (`dpgcd_jax.scoring`): noise scales, sensitivities, limits,
charging the accountant, and input validation."""

import math

import jax
import numpy as np
import pytest
from scipy import stats
from sklearn import metrics

import dpgcd_jax as dg
from dpgcd_jax import discrete_grid
from dpgcd_jax import scoring
from dpgcd_jax.privacy import Accountant
from dpgcd_jax.privacy import BudgetError
from dpgcd_jax.privacy import Laplace
from dpgcd_jax.scoring import private_accuracy
from dpgcd_jax.scoring import private_log_loss
from dpgcd_jax.scoring import private_r2

KEY = jax.random.key(0)
N = 100
RNG = np.random.default_rng(0)
Y_CLASS = RNG.integers(0, 2, N)
Y_HAT = np.where(RNG.uniform(size=N) < 0.7, Y_CLASS, 1 - Y_CLASS)
PROBA = np.clip(np.where(Y_CLASS == 1, 0.7, 0.3) + RNG.normal(0, 0.2, N), 0.01, 0.99)
Y_REAL = np.clip(RNG.normal(0.0, 1.0, N), -3.0, 3.0)
Y_REAL_HAT = 0.8 * Y_REAL + RNG.normal(0, 0.3, N)


def _noise(call, truth, draws=2000):
  keys = jax.random.split(jax.random.key(1), draws)
  return np.array([call(k).releases[0].value for k in keys]) - truth


# ------------------------------------------------------------------------------------------
# The noise has the claimed scale, and the claimed sensitivity holds.
# ------------------------------------------------------------------------------------------


def test_accuracy_noise_is_laplace_at_one_over_n_epsilon():
  epsilon = 2.0
  score = private_accuracy(Y_CLASS, Y_HAT, epsilon=epsilon, key=KEY)
  scale = 1.0 / (N * epsilon)
  assert score.noise_scale == pytest.approx(scale, rel=1e-12)
  assert score.releases[0].sensitivity == pytest.approx(1.0 / N, rel=1e-12)
  noise = _noise(lambda k: private_accuracy(Y_CLASS, Y_HAT, epsilon=epsilon, key=k), np.mean(Y_CLASS == Y_HAT))
  assert stats.kstest(noise, "laplace", args=(0.0, scale)).pvalue > 1e-3
  for wrong in (2.0 / 3.0, 1.5):
    assert stats.kstest(noise, "laplace", args=(0.0, wrong * scale)).pvalue < 1e-6


def test_log_loss_noise_is_laplace_at_clip_over_n_epsilon():
  epsilon, clip = 1.0, 3.0
  score = private_log_loss(Y_CLASS, PROBA, epsilon=epsilon, key=KEY, clip=clip)
  scale = clip / (N * epsilon)
  assert score.noise_scale == pytest.approx(scale, rel=1e-12)
  truth = np.mean(np.minimum(-np.log(np.where(Y_CLASS == 1, PROBA, 1 - PROBA)), clip))
  noise = _noise(lambda k: private_log_loss(Y_CLASS, PROBA, epsilon=epsilon, key=k, clip=clip), truth, 1000)
  assert stats.kstest(noise, "laplace", args=(0.0, scale)).pvalue > 1e-3
  assert stats.kstest(noise, "laplace", args=(0.0, 2.0 * scale)).pvalue < 1e-6


def test_r2_noise_scales_and_split():
  epsilon, bound = 1.0, 3.0
  score = private_r2(Y_REAL, Y_REAL_HAT, epsilon=epsilon, key=KEY, target_bound=bound)
  r, d = score.releases
  assert r.noise_scale == pytest.approx((2 * bound) ** 2 / (N * 0.8 * epsilon), rel=1e-12)
  assert d.noise_scale == pytest.approx(bound**2 / (N * 0.2 * epsilon), rel=1e-12)
  assert score.noise_scale == r.noise_scale
  assert r.epsilon + d.epsilon == pytest.approx(epsilon) and score.report.epsilon == pytest.approx(epsilon)
  truth = np.mean((Y_REAL - np.clip(Y_REAL_HAT, -bound, bound)) ** 2)
  noise = _noise(lambda k: private_r2(Y_REAL, Y_REAL_HAT, epsilon=epsilon, key=k, target_bound=bound), truth, 1000)
  assert stats.kstest(noise, "laplace", args=(0.0, r.noise_scale)).pvalue > 1e-3
  assert stats.kstest(noise, "laplace", args=(0.0, 2.0 * r.noise_scale)).pvalue < 1e-6


# With one key the noise is the same on both data sets, so the released values differ by exactly
# the difference of the clipped means: at most the claimed sensitivity, for the worst records.
EXTREMES = [0.0, 1.0, -1e30, 1e30, math.nan, math.inf, -math.inf]


def _worst_gap(release, records):
  values = [release(i) for i in records]
  assert np.all(np.isfinite(values)), values
  return max(abs(a - b) for a in values for b in values)


def test_accuracy_sensitivity_holds_on_the_worst_neighbours():
  def release(i):
    y_hat = Y_HAT.astype(float).copy()
    y_hat[0] = EXTREMES[i]
    return private_accuracy(Y_CLASS, y_hat, epsilon=1.0, key=KEY).releases[0].value
  gap = _worst_gap(release, range(len(EXTREMES)))
  assert 0.5 / N < gap <= (1.0 / N) * (1 + 1e-5)


def test_log_loss_sensitivity_holds_on_the_worst_neighbours():
  clip = 2.0
  pairs = [(y, p) for y in (0, 1, 7) for p in (0.0, 1.0, 0.5, -3.0, 4.0, math.nan)]

  def release(i):
    y, proba = Y_CLASS.copy(), PROBA.copy()
    y[0], proba[0] = pairs[i]
    return private_log_loss(y, proba, epsilon=1.0, key=KEY, clip=clip).releases[0].value
  gap = _worst_gap(release, range(len(pairs)))
  assert 0.9 * clip / N < gap <= (clip / N) * (1 + 1e-5)


def test_r2_sensitivities_hold_on_the_worst_neighbours():
  bound = 3.0
  pairs = [(y, p) for y in EXTREMES for p in EXTREMES]
  for k in range(2):
    def release(i, k=k):
      y, y_hat = Y_REAL.copy(), Y_REAL_HAT.copy()
      y[0], y_hat[0] = pairs[i]
      return private_r2(y, y_hat, epsilon=1.0, key=KEY, target_bound=(-bound, bound)).releases[k].value
    sensitivity = ((2 * bound) ** 2 if k == 0 else bound**2) / N
    gap = _worst_gap(release, range(len(pairs)))
    assert 0.9 * sensitivity < gap <= sensitivity * (1 + 1e-5), k


# ------------------------------------------------------------------------------------------
# Limits: huge epsilon gives the non-private score.
# ------------------------------------------------------------------------------------------


def test_huge_epsilon_gives_the_true_accuracy():
  for eps in (1e2, 1e4, 1e7):
    score = private_accuracy(Y_CLASS, Y_HAT, epsilon=eps, key=KEY)
    assert abs(score.value - metrics.accuracy_score(Y_CLASS, Y_HAT)) < 20.0 / (N * eps) + 1e-6
  labels = np.array(["cat", "dog", "cat", "eel"])
  assert private_accuracy(labels, labels[[0, 1, 1, 3]], epsilon=1e7, key=KEY).value == pytest.approx(0.75, abs=1e-5)


def test_huge_epsilon_gives_the_true_log_loss():
  proba = np.stack([1 - PROBA, PROBA], axis=1)
  want = metrics.log_loss(Y_CLASS, proba)
  assert private_log_loss(Y_CLASS, PROBA, epsilon=1e7, key=KEY).value == pytest.approx(want, abs=1e-5)
  names = np.array(["no", "yes"])[Y_CLASS]
  got = private_log_loss(names, proba, epsilon=1e7, key=KEY, labels=["no", "yes"]).value
  assert got == pytest.approx(want, abs=1e-5)
  three = np.full((4, 3), 0.25) + np.eye(4, 3) * 0.25  # rows (0.5, .25, .25), (.25, .5, .25), ...
  got = private_log_loss(np.array([0, 1, 2, 0]), three, epsilon=1e7, key=KEY).value
  assert got == pytest.approx(np.mean(-np.log([0.5, 0.5, 0.5, 0.25])), abs=1e-5)


def test_log_loss_counts_unknown_labels_and_nan_as_the_clip():
  y, proba = np.array([0, 1, 5, 1]), np.array([0.5, math.nan, 0.9, 1e-9])
  clip = 4.0
  got = private_log_loss(y, proba, epsilon=1e7, key=KEY, clip=clip).value
  assert got == pytest.approx((math.log(2) + clip + clip + clip) / 4, abs=1e-5)


def test_huge_epsilon_r2_against_the_public_centre():
  got = private_r2(Y_REAL, Y_REAL_HAT, epsilon=1e8, key=KEY, target_bound=3.0).value
  y_hat = np.clip(Y_REAL_HAT, -3, 3)
  assert got == pytest.approx(1 - np.sum((Y_REAL - y_hat) ** 2) / np.sum(Y_REAL**2), abs=1e-4)
  symmetric = np.concatenate([Y_REAL, -Y_REAL])  # mean = 0 = the centre: scikit-learn's R^2
  pred = np.concatenate([y_hat, -y_hat])
  got = private_r2(symmetric, pred, epsilon=1e8, key=KEY, target_bound=(-3.0, 3.0)).value
  assert got == pytest.approx(metrics.r2_score(symmetric, pred), abs=1e-4)
  shifted = private_r2(symmetric + 10, pred + 10, epsilon=1e8, key=KEY, target_bound=(7.0, 13.0)).value
  assert shifted == pytest.approx(got, abs=1e-4)  # an off-zero range, centred on the data


# ------------------------------------------------------------------------------------------
# The accountant: charged, refused before the data are read.
# ------------------------------------------------------------------------------------------


class _Unreadable:
  """A 1-D input of public length whose values must not be read."""

  shape = (N,)

  def __array__(self, *args, **kwargs):
    raise AssertionError("the data were read")

  def __len__(self):
    return N


def test_scores_charge_the_accountant_and_refuse_before_reading_the_data():
  acct = Accountant(1.0)
  first = private_accuracy(Y_CLASS, Y_HAT, epsilon=0.6, key=KEY, accountant=acct)
  assert acct.spent == first.report and first.report.entries[0].event == Laplace(0.6)
  for call in (lambda: private_accuracy(_Unreadable(), Y_HAT, epsilon=0.5, key=KEY, accountant=acct),
               lambda: private_log_loss(_Unreadable(), PROBA, epsilon=0.5, key=KEY, accountant=acct),
               lambda: private_r2(_Unreadable(), Y_REAL_HAT, epsilon=0.5, key=KEY, target_bound=3.0,
                                  accountant=acct)):
    with pytest.raises(BudgetError, match=r"remaining budget is \(epsilon=0\.4, delta=0\)"):
      call()
  assert acct.reports == (first.report,)
  second = private_r2(Y_REAL, Y_REAL_HAT, epsilon=0.4, key=KEY, target_bound=3.0, accountant=acct)
  assert acct.spent == first.report + second.report and acct.remaining() == pytest.approx((0.0, 0.0))


def test_scores_charge_the_active_accountant():
  outer, inner = Accountant(1.0), Accountant(1.0)
  with outer:
    private_accuracy(Y_CLASS, Y_HAT, epsilon=0.25, key=KEY)
    private_log_loss(Y_CLASS, PROBA, epsilon=0.25, key=KEY, accountant=inner)  # explicit wins
  private_accuracy(Y_CLASS, Y_HAT, epsilon=0.25, key=KEY)  # none active: charged nowhere
  assert outer.spent.epsilon == pytest.approx(0.25) and inner.spent.epsilon == pytest.approx(0.25)
  assert len(outer.reports) == len(inner.reports) == 1


def test_top_level_exports():
  assert dg.private_accuracy is private_accuracy and dg.private_r2 is private_r2
  assert dg.private_log_loss is private_log_loss and dg.scoring is scoring


# ------------------------------------------------------------------------------------------
# Bad inputs name the argument.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,name", [
    (lambda: private_accuracy(Y_CLASS, Y_HAT, epsilon="1", key=KEY), "epsilon"),
    (lambda: private_accuracy(Y_CLASS, Y_HAT, epsilon=0.0, key=KEY), "epsilon"),
    (lambda: private_accuracy(Y_CLASS, Y_HAT, epsilon=math.inf, key=KEY), "epsilon"),
    (lambda: private_accuracy(Y_CLASS, Y_HAT, epsilon=1.0, key=0), "key"),
    (lambda: private_accuracy(Y_CLASS, Y_HAT[:-1], epsilon=1.0, key=KEY), "y_pred"),
    (lambda: private_accuracy(Y_CLASS[:, None], Y_HAT, epsilon=1.0, key=KEY), "y_true"),
    (lambda: private_accuracy(Y_CLASS, Y_HAT[:, None], epsilon=1.0, key=KEY), "y_pred"),
    (lambda: private_accuracy([], [], epsilon=1.0, key=KEY), "y_true"),
    (lambda: private_accuracy(Y_CLASS, Y_HAT, epsilon=1.0, key=KEY, accountant="acct"), "accountant"),
    (lambda: private_log_loss(Y_CLASS, PROBA, epsilon=1.0, key=KEY, clip=0.0), "clip"),
    (lambda: private_log_loss(Y_CLASS, PROBA, epsilon=1.0, key=KEY, clip="3"), "clip"),
    (lambda: private_log_loss(Y_CLASS, PROBA, epsilon=1.0, key=KEY, labels=[0, 1, 2]), "labels"),
    (lambda: private_log_loss(Y_CLASS, PROBA, epsilon=1.0, key=KEY, labels=[1, 1]), "labels"),
    (lambda: private_log_loss(Y_CLASS, PROBA[:, None], epsilon=1.0, key=KEY), "proba"),
    (lambda: private_log_loss(Y_CLASS, PROBA[:-1], epsilon=1.0, key=KEY), "proba"),
    (lambda: private_r2(Y_REAL, Y_REAL_HAT, epsilon=1.0, key=KEY, target_bound=0.0), "target_bound"),
    (lambda: private_r2(Y_REAL, Y_REAL_HAT, epsilon=1.0, key=KEY, target_bound="3"), "target_bound"),
    (lambda: private_r2(Y_REAL, Y_REAL_HAT, epsilon=1.0, key=KEY, target_bound=(1.0, 1.0)), "target_bound"),
    (lambda: private_r2(Y_REAL, Y_REAL_HAT, epsilon=1.0, key=KEY, target_bound=(0, 1, 2)), "target_bound"),
    (lambda: private_r2(Y_REAL, Y_REAL_HAT, epsilon=1.0, key=KEY, target_bound=(0, math.inf)), r"target_bound\[1\]"),
    (lambda: private_r2(Y_REAL, Y_REAL_HAT, epsilon=1.0, key=KEY, target_bound=3.0, residual_share=1.0),
     "residual_share"),
    (lambda: private_r2(Y_REAL.astype(str), Y_REAL_HAT, epsilon=1.0, key=KEY, target_bound=3.0), "y_true"),
])
def test_bad_inputs_raise_naming_the_argument(call, name):
  with pytest.raises(ValueError, match=rf"\b{name}"):
    call()


def test_bad_inputs_spend_nothing():
  acct = Accountant(1.0)
  with pytest.raises(ValueError, match="clip"):
    private_log_loss(Y_CLASS, PROBA, epsilon=0.5, key=KEY, clip=-1.0, accountant=acct)
  assert acct.spent is None


@pytest.mark.slow
def test_secure_scores_draw_discrete_laplace_on_a_grid():
  y = np.array([0, 1] * 2000)
  y_hat = np.where(np.arange(4000) < 3000, y, 1 - y)
  values = []
  for k in range(300):
    score = private_accuracy(y, y_hat, epsilon=1.0, key=jax.random.key(k), secure_noise=True)
    values.append(score.value)
  nominal = 1.0 / 4000
  assert nominal < score.noise_scale < 1.01 * nominal  # the integer scale on the grid, just above
  assert [type(e.event).__name__ for e in score.report.entries] == ["DiscreteLaplace", "DiscreteDraws"]
  assert score.report.epsilon == pytest.approx(1.0) and "discrete Laplace" in score.report.notes[0]
  # One sampler draw, its deviation charged at the release's epsilon (not pure: the sampler's tail is capped).
  assert score.report.delta == pytest.approx((1.0 + math.e ** score.report.epsilon) * 3.5e-18, rel=1e-12)
  noise = np.asarray(values) - 0.75
  assert abs(np.mean(noise)) < 4 * score.noise_scale * np.sqrt(2.0 / 300)
  assert 0.8 < np.std(noise) / (np.sqrt(2.0) * score.noise_scale) < 1.2  # Laplace: std sqrt(2) b
  r2 = private_r2(Y_REAL, Y_REAL_HAT, epsilon=1.0, key=KEY, target_bound=4.0, secure_noise=True)
  assert {type(e.event).__name__ for e in r2.report.entries} == {"DiscreteLaplace", "DiscreteDraws"}
  assert 0.0 < r2.report.delta < 2 * (1.0 + math.e) * 3.5e-18  # two draws, at epsilons summing to 1


def test_a_bad_secure_noise_flag_raises_before_anything_is_charged():
  accountant = Accountant(epsilon=1.0, delta=1e-6)
  with pytest.raises(ValueError, match="secure_noise"):
    private_accuracy(np.zeros(10), np.zeros(10), epsilon=0.5, key=KEY, secure_noise="yes", accountant=accountant)
  assert accountant.spent is None


def test_secure_neighbouring_scores_stay_within_the_grid_sensitivity_at_large_n():
  """The secure mean is computed in float64 and snapped there: with the same noise draw, two
  neighbouring data sets' releases are at most D = ceil(sensitivity / gran) + 1 grid steps apart.
  Rounding the mean to float32 first (before) moved them 8704 steps apart against D = 8591 at
  n = 1e6 (found by an independent review; epsilon 1.19 for 1 at n = 1e7)."""
  n, multiplier = 1_000_000, 1.0
  worst = []
  for correct in (900_123, 900_317):  # counts whose float32 means straddle a rounding boundary
    y = np.ones(n, int)
    pred = y.copy()
    pred[correct:] = 0
    neighbour = pred.copy()
    neighbour[correct] = 1
    terms = [(p == y).astype(float) for p in (pred, neighbour)]
    (a, scale, sensitivity), (b, _, _) = (scoring.noisy_mean(jax.random.key(7), t, 1.0, multiplier, secure=True)
                                          for t in terms)
    with jax.enable_x64(True):
      gran = float(discrete_grid.grid_step(np.float64(multiplier * sensitivity)))
    worst.append(abs(b - a) / gran / (np.ceil(sensitivity / gran) + 1))
    assert scale > multiplier / n
  assert max(worst) <= 1.0


def test_r2_deviation_bound_covers_a_rounded_centre():
  """A narrow public range whose centre rounds: (y - centre)^2 can exceed half^2 (by 2.3e-7 relative
  at (1000, 1000.000001), found by a review); the released sensitivity covers the computed terms."""
  lo, hi = 1000.0, 1000.000001
  y = np.array([lo, hi] * 50)
  score = private_r2(y, y, epsilon=1.0, key=jax.random.key(0), target_bound=(lo, hi))
  centre = (lo + hi) / 2.0
  worst = max((lo - centre) ** 2, (hi - centre) ** 2)
  assert worst > ((hi - lo) / 2.0) ** 2  # the old bound half^2 is exceeded by a computed term
  assert score.releases[1].sensitivity >= worst / y.size


def test_a_mean_that_could_overflow_is_refused_whatever_the_data():
  """fsum overflows past the largest float64 on some data and not on others: refused on public values."""
  for y in (np.zeros(10), np.full(10, 6e153)):
    with pytest.raises(ValueError, match="bound"):
      private_r2(y, -y, epsilon=1.0, key=jax.random.key(0), target_bound=6e153)
