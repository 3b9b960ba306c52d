"""`dpgcd_jax.privacy.smoothness`: private smoothness estimate: noise distribution and scale, limits, floor,
validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import dpgcd_jax as dg
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy.smoothness import private_smoothness
from dpgcd_jax.privacy.smoothness import smoothness_ledger
from dpgcd_jax.privacy.smoothness import smoothness_noise_multiplier

DRAWS = 3000
KEYS = jax.random.split(jax.random.key(7), DRAWS)
N, P = 40, 5
X = 1.5 * np.random.default_rng(0).normal(size=(N, P))


def _clipped_mean(X, beta, clip):
  return np.mean(np.minimum(beta * X**2, clip), axis=0)


def _assert_scale(samples, dist):
  """KS accepts the right scale and rejects 2/3 and 3/2 of it."""
  assert stats.kstest(samples, dist.cdf).pvalue > 1e-3
  for wrong in (2 / 3, 3 / 2):
    assert stats.kstest(samples / wrong, dist.cdf).pvalue < 1e-6, wrong


@pytest.mark.parametrize("clip", [2.0, np.array([1.0, 2.0, 3.0, 2.0, 0.5])])
def test_laplace_noise_has_scale_p_c_over_n_epsilon(clip):
  epsilon = 4.0
  expected_scale = P * np.broadcast_to(clip, (P,)) / (N * epsilon)
  mean = _clipped_mean(X, 1.0, clip)
  assert np.all(mean / expected_scale > 12)  # the floor never binds: pure noise below
  draw = jax.jit(jax.vmap(lambda k: private_smoothness(X, "squared", epsilon=epsilon, key=k,
                                                       clip=clip)))
  noise = (np.asarray(draw(KEYS)) - mean) / expected_scale
  _assert_scale(noise.ravel(), stats.laplace)
  # Independent coordinates: no correlation between two of them.
  assert abs(np.corrcoef(noise[:, 0], noise[:, 1])[0, 1]) < 0.08


def test_gaussian_noise_has_scale_s_sqrt_p_c_over_n():
  epsilon, delta, clip = 4.0, 1e-6, 2.0
  s = baseline_accounting.calibrate_cd(epsilon, delta, steps=1).update_noise
  expected_scale = s * np.sqrt(P) * clip / N
  mean = _clipped_mean(X, 1.0, clip)
  assert np.all(mean / expected_scale > 6)  # the floor never binds: pure noise below
  draw = jax.vmap(lambda k: private_smoothness(X, "squared", epsilon=epsilon, key=k, clip=clip,
                                               noise="gaussian", delta=delta, floor=1e-9))
  noise = (np.asarray(draw(KEYS)) - mean) / expected_scale
  _assert_scale(noise.ravel(), stats.norm)


@pytest.mark.parametrize("noise, delta, dist", [("laplace", None, stats.laplace), ("gaussian", 1e-6, stats.norm)])
def test_secure_noise_is_the_discrete_counterpart_at_the_same_scale(noise, delta, dist):
  """`dpgcd_jax.privacy.smoothness` with `secure_noise=True`: discrete noise on a grid whose scale is
  the multiplier times `c / n` (KS: right scale accepted, 2/3 and 3/2 rejected), a draw other than
  the float one, and a ledger of discrete events and the `p` draws within the budget."""
  epsilon, clip = 4.0, 2.0
  multiplier = smoothness_noise_multiplier(P, epsilon=epsilon, noise=noise, delta=delta, secure_noise=True)
  draw = jax.jit(jax.vmap(lambda k, secure: private_smoothness(
      X, "squared", epsilon=epsilon, key=k, clip=clip, noise=noise, delta=delta, floor=1e-9, secure_noise=secure),
      in_axes=(0, None)), static_argnums=1)
  secure = np.asarray(draw(KEYS, True))
  assert np.all(np.isfinite(secure)) and not np.array_equal(secure, np.asarray(draw(KEYS, False)))
  noise_draws = (secure - _clipped_mean(X, 1.0, clip)) / (multiplier * clip / N)
  _assert_scale(noise_draws.ravel(), dist)
  ledger = smoothness_ledger(P, epsilon=epsilon, noise=noise, delta=delta, secure_noise=True)
  kinds = {type(entry.event) for entry in ledger}
  assert kinds == {events.DiscreteLaplace if noise == "laplace" else events.DiscreteGaussian, events.DiscreteDraws}
  assert sum(entry.event.draws * entry.count for entry in ledger if isinstance(entry.event, events.DiscreteDraws)) == P
  target = delta if delta is not None else ledger.sampler_charge(epsilon)
  assert ledger.delta(epsilon) <= target * (1 + 1e-9)
  float_kind = {type(entry.event) for entry in smoothness_ledger(P, epsilon=epsilon, noise=noise, delta=delta)}
  assert float_kind == {events.PureDp if noise == "laplace" else events.Gaussian}


@pytest.mark.parametrize("loss, beta", [("squared", 1.0), ("logistic", 0.25), ("huber", 1.0)])
def test_large_clip_and_epsilon_recover_beta_mean_x_squared(loss, beta):
  M_hat = private_smoothness(X, loss, epsilon=1e8, key=jax.random.key(0), clip=1e3)
  np.testing.assert_allclose(M_hat, beta * np.mean(X**2, axis=0), rtol=1e-4)
  # Same as the (non-private) data-derived smoothness of make_problem.
  np.testing.assert_allclose(M_hat, dg.make_problem(X, np.ones(N), loss).smoothness, rtol=1e-4)


def test_clipping_bias_without_noise():
  M_hat = private_smoothness(X, "squared", epsilon=1e9, key=jax.random.key(0), clip=0.5)
  np.testing.assert_allclose(M_hat, _clipped_mean(X, 1.0, 0.5), rtol=1e-5)
  assert np.all(np.asarray(M_hat) < np.mean(X**2, axis=0))


def test_floor_is_applied():
  keys = KEYS[:200]
  tiny = jax.vmap(lambda k: private_smoothness(X, "squared", epsilon=1e-3, key=k, clip=1.0))(keys)
  default_floor = P * 1.0 / (N * 1e-3)  # the noise scale
  assert np.all(np.asarray(tiny) >= default_floor)
  assert np.any(np.asarray(tiny) == default_floor)
  explicit = jax.vmap(lambda k: private_smoothness(X, "squared", epsilon=1e-3, key=k, clip=1.0,
                                                   floor=0.1))(keys)
  assert np.all(np.asarray(explicit) >= 0.1) and np.any(np.asarray(explicit) == 0.1)


def test_same_key_same_estimate_and_composes_with_the_solver():
  key_m, key_run = jax.random.split(jax.random.key(3))
  M_hat = private_smoothness(X, "squared", epsilon=0.5, key=key_m, clip=4.0)
  np.testing.assert_array_equal(M_hat, private_smoothness(X, "squared", epsilon=0.5, key=key_m,
                                                          clip=4.0))
  problem = dg.make_problem(X, X[:, 0], "squared", smoothness=M_hat)
  res = dg.dp_gcd.fit(problem, key_run, epsilon=0.5, delta=1e-6, passes=5, store_objective=False)
  assert np.all(np.isfinite(res.w)) and res.privacy.epsilon <= 0.5


_GOOD = dict(epsilon=1.0, key=jax.random.key(0), clip=1.0)


@pytest.mark.parametrize("changes, name", [
    (dict(epsilon=0.0), "epsilon"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(epsilon=np.inf), "epsilon"),
    (dict(epsilon=np.nan), "epsilon"),
    (dict(clip=0.0), "clip"),
    (dict(clip=-2.0), "clip"),
    (dict(clip=np.inf), "clip"),
    (dict(clip=np.ones(3)), "clip"),
    (dict(key=0), "key"),
    (dict(key=None), "key"),
    (dict(noise="uniform"), "noise"),
    (dict(noise="gaussian"), "delta"),
    (dict(noise="gaussian", delta=1.5), "delta"),
    (dict(delta=1e-6), "delta"),
    (dict(floor=0.0), "floor"),
    (dict(X=np.where(np.eye(N, P) > 0, np.nan, X)), "X"),
    (dict(X=np.ones(N)), "X"),
    (dict(loss="nope"), "loss"),
    (dict(loss=dg.custom_loss(lambda w, x, y: jnp.sum((x * w - y) ** 2))), "loss"),
    (dict(loss=dg.glm_loss(lambda z, y: (z - y) ** 4)), "loss"),  # curvature unknown
])
def test_bad_input_raises_naming_the_argument(changes, name):
  kwargs = dict(_GOOD, X=X, loss="squared")
  kwargs.update(changes)
  Xarg, loss = kwargs.pop("X"), kwargs.pop("loss")
  with pytest.raises(ValueError, match=name):
    private_smoothness(Xarg, loss, **kwargs)
