"""`dpgcd_jax.mechanisms`, as DP-GCD, DP-CD and DP-SGD draw it: statistical tests of every noise draw: the right scale
passes, x2/3 and x3/2 are rejected."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate
from scipy import stats

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

DRAWS = 4000
KEYS = jax.random.split(jax.random.key(2024), DRAWS)


def _problem(n=50, p=6, l2=0.0):
  rng = np.random.default_rng(0)
  X = rng.normal(size=(n, p)) * np.linspace(0.5, 1.5, p)
  y = X @ np.linspace(1.0, -1.0, p) + rng.normal(size=n)
  return dg.make_problem(X, y, "squared", l2=l2)


def _clipped_gradient_at_zero(problem, clip):
  M = problem_lib.coordinate_smoothness(problem)
  thresholds = clipping.coordinate_thresholds(clip, M)
  w = jnp.zeros(problem.num_features)
  g = kernels.clipped_gradient(problem, w, kernels.init_margins(problem, w), thresholds)
  return np.asarray(g), np.asarray(M), np.asarray(2 * thresholds / problem.num_examples)


def _assert_scale(samples, dist):
  """KS accepts the right scale and rejects 2/3 and 3/2 of it."""
  assert stats.kstest(samples, dist.cdf).pvalue > 1e-3
  for wrong in (2 / 3, 3 / 2):
    assert stats.kstest(samples / wrong, dist.cdf).pvalue < 1e-6, wrong


def _update_noise_in_units(problem, run_step, clip, step_size):
  """One step from w = 0: eta = -w_j M_j / gamma - g_j, in units of Delta_j."""
  states, info = jax.vmap(run_step)(KEYS)
  g, M, sens = _clipped_gradient_at_zero(problem, clip)
  js = np.asarray(info.coordinate)
  w_j = np.asarray(states.w)[np.arange(DRAWS), js]
  return (-w_j * M[js] / step_size - g[js]) / sens[js]


@pytest.mark.slow
@pytest.mark.parametrize("update, dist", [("laplace", stats.laplace), ("gaussian", stats.norm)])
def test_dp_gcd_update_noise_has_scale_s_times_delta_j(update, dist):
  problem, s = _problem(l2=0.1), 3.0
  params = dg.dp_gcd.Params(step_size=0.5, clip=2.0, selection_noise=0.0, update_noise=s)
  run_step = lambda k: dg.dp_gcd.step(k, dg.dp_gcd.init(problem), problem, params, update=update)
  _assert_scale(_update_noise_in_units(problem, run_step, 2.0, 0.5) / s, dist)


def test_dp_cd_update_noise_is_gaussian_with_scale_s_times_delta_j():
  problem, s = _problem(), 2.5
  params = dg.dp_cd.Params(step_size=0.7, clip=1.5, noise=s)
  run_step = lambda k: dg.dp_cd.step(k, dg.dp_cd.init(problem), problem, params)
  _assert_scale(_update_noise_in_units(problem, run_step, 1.5, 0.7) / s, stats.norm)


@pytest.mark.slow
def test_dp_sgd_noise_is_gaussian_with_scale_s_times_clip():
  problem, s, C, gamma = _problem(), 1.7, 0.8, 0.1
  n = problem.num_examples
  params = dg.dp_sgd.Params(step_size=gamma, clip=C, noise=s)
  state = dg.dp_sgd.init(problem)
  run_step = lambda k: dg.dp_sgd.step(k, state, problem, params, sampling_rate=1.0, max_batch=n,
                                       X=problem.X)[0].w
  w1 = np.asarray(jax.vmap(run_step)(KEYS[:1000]))
  X, y = np.asarray(problem.X), np.asarray(problem.y)
  grads = X * (-y)[:, None]
  clipped_sum = (grads * np.minimum(1.0, C / np.linalg.norm(grads, axis=1))[:, None]).sum(axis=0)
  noise = (-w1 * n / gamma - clipped_sum) / (s * C)
  _assert_scale(noise.ravel(), stats.norm)


def _chi_square_pvalue(counts, probabilities):
  return stats.chisquare(counts, probabilities * counts.sum()).pvalue


def _selection_counts(problem, params, selection):
  run_step = lambda k: dg.dp_gcd.step(k, dg.dp_gcd.init(problem), problem, params,
                                      selection=selection)[1].coordinate
  js = np.asarray(jax.vmap(run_step)(jax.random.split(jax.random.key(11), 20_000)))
  return np.bincount(js, minlength=problem.num_features)


def _multiplier_for_a_spread_out_selection(problem, clip):
  """A noise multiplier whose noise is comparable to the spread of the scores."""
  g, M, sens = _clipped_gradient_at_zero(problem, clip)
  scores, delta_bar = np.abs(g) / np.sqrt(M), np.max(sens / np.sqrt(M))
  return float(np.ptp(scores) / delta_bar / 3)


@pytest.mark.slow
def test_gumbel_selection_has_exactly_the_exponential_mechanism_probabilities():
  problem, clip = _problem(), 1.0
  b = _multiplier_for_a_spread_out_selection(problem, clip)
  counts = _selection_counts(problem, dg.dp_gcd.Params(1.0, clip, b, 0.0), "gumbel")
  g, M, sens = _clipped_gradient_at_zero(problem, clip)
  scores, delta_bar = np.abs(g) / np.sqrt(M), np.max(sens / np.sqrt(M))

  def em(scale):
    logits = scores / (scale * delta_bar)
    p = np.exp(logits - logits.max())
    return p / p.sum()

  assert np.count_nonzero(counts > 100) >= 3  # a selection that is far from deterministic
  assert _chi_square_pvalue(counts, em(b)) > 1e-3
  for wrong in (2 / 3, 3 / 2):
    assert _chi_square_pvalue(counts, em(b * wrong)) < 1e-6


@pytest.mark.slow
def test_laplace_selection_has_the_noisy_argmax_probabilities():
  problem, clip = _problem(), 1.0
  b = _multiplier_for_a_spread_out_selection(problem, clip)
  counts = _selection_counts(problem, dg.dp_gcd.Params(1.0, clip, b, 0.0), "laplace")
  assert np.count_nonzero(counts > 100) >= 3  # a selection that is far from deterministic
  g, M, sens = _clipped_gradient_at_zero(problem, clip)
  u, delta_bar = g / np.sqrt(M), np.max(sens / np.sqrt(M))

  def noisy_argmax(scale):
    lap = stats.laplace(scale=scale * delta_bar)
    cdf = lambda t: lap.cdf(t - u) - lap.cdf(-t - u)  # P(|u_k + Z_k| <= t), vector over k
    pdf = lambda t: lap.pdf(t - u) + lap.pdf(-t - u)
    probs = []
    for j in range(len(u)):
      others = lambda t: np.prod(np.delete(cdf(t), j))  # noqa: B023
      probs.append(integrate.quad(lambda t: pdf(t)[j] * others(t), 0, np.inf, limit=200)[0])  # noqa: B023
    probs = np.array(probs)
    assert abs(probs.sum() - 1) < 1e-6
    return probs

  assert _chi_square_pvalue(counts, noisy_argmax(b)) > 1e-3
  for wrong in (2 / 3, 3 / 2):
    assert _chi_square_pvalue(counts, noisy_argmax(b * wrong)) < 1e-6
