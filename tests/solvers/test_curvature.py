"""The released coordinate curvature (`dpgcd_jax.curvature`, DP-GCD's `curvature="released"`)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import dpgcd_jax as dg
from dpgcd_jax import curvature
from dpgcd_jax import mechanisms
from dpgcd_jax.solvers import greedy


def _binary_column_problem(ones, n):
  X = np.zeros((n, 1), np.float32)
  X[:ones, 0] = 1.0
  return dg.make_problem(X, np.ones(n, np.float32), "logistic", feature_bound=1.0)


def test_the_perturbed_query_moves_by_at_most_its_sensitivity_at_large_n():
  """The reviewed case (n = 10^6, 625,079 ones, one record 1 -> 0): adding the public offset
  B^2/2 before the noise moved the query by 1.0125 x the bound; the perturbed query is the
  shifted mean alone, the offset is added after the noise."""
  n, ones = 10**6, 625_079
  j, bound_sq = jnp.int32(0), jnp.float32(1.0)
  a = curvature.shifted_moment(_binary_column_problem(ones, n), j, bound_sq)
  b = curvature.shifted_moment(_binary_column_problem(ones - 1, n), j, bound_sq)
  sensitivity = curvature.moment_sensitivity(bound_sq, n)
  assert abs(float(a) - float(b)) <= float(sensitivity)
  np.testing.assert_allclose(float(a) + 0.5, ones / n, rtol=1e-6)  # the second moment, shifted


def test_released_moment_is_the_moment_plus_noise_at_the_claimed_scale():
  """Gaussian update mechanism: released - (moment + MARGIN sigma) is N(0, sigma^2) with
  sigma = multiplier x sensitivity (the floor and cap do not bind here); kstest accepts
  sigma and rejects 2/3 and 3/2 of it."""
  n, ones, multiplier = 2000, 600, 5.0
  problem = _binary_column_problem(ones, n)
  privatize = lambda k, value, m, sens: greedy.privatize(k, value, m, sens, update="gaussian")
  keys = jax.random.split(jax.random.key(0), 3000)
  released = jax.vmap(lambda k: curvature.released_smoothness(privatize, k, problem, jnp.int32(0),
                                                              jnp.float32(multiplier)))(keys)
  beta = problem.curvature
  sigma = multiplier * float(curvature.moment_sensitivity(jnp.float32(1.0), n))
  residual = np.asarray(released, float) / beta - ones / n - curvature.MARGIN * sigma
  assert scipy.stats.kstest(residual, "norm", args=(0, sigma)).pvalue > 1e-3
  for wrong in (2 / 3, 3 / 2):
    assert scipy.stats.kstest(residual, "norm", args=(0, wrong * sigma)).pvalue < 1e-6


def test_released_curvature_is_capped_by_the_public_bound_and_floored_at_the_noise():
  n = 100
  problem = _binary_column_problem(n, n)  # every x = 1: the moment is the bound
  exact = lambda k, value, m, sens: value - jnp.float32(10.0)  # a large negative draw
  low = curvature.released_smoothness(exact, jax.random.key(0), problem, jnp.int32(0), jnp.float32(0.1))
  sigma = 0.1 * float(curvature.moment_sensitivity(jnp.float32(1.0), n))
  np.testing.assert_allclose(float(low), problem.curvature * sigma, rtol=1e-6)
  high = lambda k, value, m, sens: value + jnp.float32(10.0)
  capped = curvature.released_smoothness(high, jax.random.key(0), problem, jnp.int32(0), jnp.float32(0.1))
  np.testing.assert_allclose(float(capped), problem.curvature * 1.0, rtol=1e-6)


def _problem():
  rng = np.random.default_rng(0)
  X = (rng.uniform(size=(400, 30)) < 0.1).astype(np.float32)
  y = np.where(X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=400) > 0, 1.0, -1.0)
  return dg.make_problem(X, y, "logistic", feature_bound=1.0)


def test_fit_charges_one_curvature_release_per_step_at_the_ratio():
  problem = _problem()
  result = dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-6, passes=7, selection="gumbel",
                         update="gaussian", curvature="released")
  entries = {e.label: e for e in result.privacy.entries}
  assert entries["curvature"].count == entries["update"].count == 7
  assert entries["curvature"].event == mechanisms.update("gaussian").event(
      dg.dp_gcd.CURVATURE_RATIO * entries["update"].event.noise)
  public = dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-6, passes=7, selection="gumbel",
                         update="gaussian")
  assert "curvature" not in {e.label for e in public.privacy.entries}
  # the same total: the release costs noise elsewhere, not budget
  np.testing.assert_allclose(result.privacy.epsilon, public.privacy.epsilon, rtol=1e-3)
  assert entries["update"].event.noise > {e.label: e for e in public.privacy.entries}["update"].event.noise


@pytest.mark.slow
def test_secure_fit_releases_the_curvature_with_a_discrete_mechanism():
  result = dg.dp_gcd.fit(_problem(), jax.random.key(0), epsilon=1.0, delta=1e-6, passes=5, secure_noise=True,
                         update="gaussian", curvature="released")
  curv = [e for e in result.privacy.entries if e.label == "curvature"]
  assert curv and type(curv[0].event).__name__.startswith("Discrete")
  assert np.all(np.isfinite(np.asarray(result.w)))


def test_run_needs_a_curvature_noise_and_warns_when_it_is_zero_beside_noise():
  problem = _problem()
  with pytest.raises(ValueError, match="curvature_noise"):
    dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(1.0, 0.5, 5.0, 5.0), passes=3,
                  curvature="released")
  with pytest.warns(dg.PrivacyLeakWarning, match="curvature_noise=0"):
    dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(1.0, 0.5, 5.0, 5.0, 0.0), passes=3,
                  curvature="released")
  with warnings.catch_warnings():
    warnings.simplefilter("error", dg.PrivacyLeakWarning)
    dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(1.0, 0.5, 5.0, 5.0, 10.0), passes=3,
                  curvature="released")


def test_released_steps_reach_further_than_the_public_bound_on_rare_features():
  """Non-private limit (no noise, no clip): with rare binary features the public bound's step
  1 / (beta B^2) is 1/q too short; the released curvature's is the theory step."""
  problem = _problem()
  params = dg.dp_gcd.Params(1.0, jnp.inf, 0.0, 0.0, 0.0)
  obj = lambda w: float(dg.objective(problem, w))
  public = dg.dp_gcd.run(problem, jax.random.key(0), params, passes=20).w
  released = dg.dp_gcd.run(problem, jax.random.key(0), params, passes=20, curvature="released").w
  assert obj(released) < obj(public) - 0.05


def test_curvature_option_is_checked_by_name():
  with pytest.raises(ValueError, match="curvature"):
    dg.dp_gcd.run(_problem(), jax.random.key(0), dg.dp_gcd.Params(), passes=2, curvature="exact")
  X = np.ones((10, 2), np.float32)
  no_bound = dg.make_problem(X, np.ones(10, np.float32), "logistic", smoothness=np.ones(2))
  with pytest.raises(ValueError, match="feature bound"):
    dg.dp_gcd.run(no_bound, jax.random.key(0), dg.dp_gcd.Params(curvature_noise=1.0), passes=2,
                  curvature="released")
