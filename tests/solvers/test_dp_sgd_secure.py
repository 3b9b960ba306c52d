"""`dpgcd_jax.solvers.dp_sgd`: DP-SGD's secure mode: discrete Gaussian noise on the exact integer sum, charged as
`PoissonSampledDiscreteGaussian` (RDP only). Accounting checks against dp_accounting and exact one-dimensional discrete
Gaussian divergences; the solver's release, determinism, fail-closed paths."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from scipy import special

import dpgcd_jax as dg
from dpgcd_jax import discrete_grid
from dpgcd_jax.privacy import _rdp
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.privacy import events
from dpgcd_jax.solvers import dp_sgd

FLOAT_EVENTS = (events.Gaussian, events.Laplace, events.BoundedRange, events.PoissonSampledGaussian)
INT_ORDERS = np.arange(2, 65, dtype=float)


@pytest.mark.parametrize("noise,q", [(0.8, 0.01), (1.0, 0.01), (2.0, 0.01), (3.0, 0.001), (1.5, 0.1)])
def test_add_remove_bound_with_gaussian_base_dominates_exact_sampled_gaussian(noise, q):
  bound = _rdp._add_remove_from_integer_curve(_rdp.discrete_gaussian_base(noise), q, INT_ORDERS)
  exact = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, noise, INT_ORDERS)
  assert np.all(bound >= exact * (1 - 1e-9))
  ratio = bound / exact
  if q <= 0.01 and noise <= 2.0:  # the typical DP-SGD setting: close (the reverse direction's Taylor term)
    assert ratio.max() < 1.3, ratio.max()  # measured: 1.03 (s = 1), 1.27 (s = 2)


def test_q_one_is_the_base_curve_and_non_integer_orders_are_not_claimed():
  base = _rdp.discrete_gaussian_base(1.3)
  np.testing.assert_allclose(_rdp._add_remove_from_integer_curve(base, 1.0, INT_ORDERS), base(INT_ORDERS),
                             rtol=1e-12)
  assert np.all(np.isinf(_rdp._add_remove_from_integer_curve(base, 0.01, np.array([1.5, 2.5, 1.0]))))


def _log_discrete_gaussian(mu, sigma, support):
  log_w = -(support - mu) ** 2 / (2 * sigma**2)
  return log_w - special.logsumexp(log_w)


@pytest.mark.parametrize("sigma,shift,q", [(2.0, 2, 0.1), (3.0, 2, 0.3), (1.0, 1, 0.05)])
def test_bound_covers_exact_one_dimensional_discrete_gaussian_both_directions(sigma, shift, q):
  # An independent check: exact divergences by summation over the integers (|z| <= 60 sigma), in logs.
  z = np.arange(-int(60 * sigma) - shift, int(60 * sigma) + shift + 1, dtype=float)
  log_q, log_p = _log_discrete_gaussian(0, sigma, z), _log_discrete_gaussian(shift, sigma, z)
  log_a = np.logaddexp(math.log1p(-q) + log_q, math.log(q) + log_p)
  noise = sigma / shift  # sigma = s D with D = shift
  base = _rdp.discrete_gaussian_base(noise)
  bound = _rdp._add_remove_from_integer_curve(base, q, INT_ORDERS[:20])
  for i, a in enumerate(INT_ORDERS[:20]):
    renyi = lambda x, y, a=a: special.logsumexp(a * x + (1 - a) * y) / (a - 1)
    assert renyi(log_p, log_q) <= base(np.array([a]))[0] * (1 + 1e-9)  # CKS: the base bound
    assert renyi(log_a, log_q) <= bound[i] * (1 + 1e-9) + 1e-15
    assert renyi(log_q, log_a) <= bound[i] * (1 + 1e-9) + 1e-15


def test_secure_calibration_and_event():
  float_cal = baseline_accounting.calibrate_sgd(1.0, 1e-5, steps=1000, sampling_rate=0.01)
  secure = baseline_accounting.calibrate_sgd(1.0, 1e-5, steps=1000, sampling_rate=0.01, secure_noise=True, features=4)
  assert secure.method == "rdp"
  # dp_accounting's own RDP -> (eps, delta) conversion of the same curve: the calibrated multiplier meets eps = 1
  orders = _rdp.psdg_orders(secure.update_noise, 0.01)
  eps, _ = rdp_lib.compute_epsilon(orders, 1000 * _rdp.psdg_rdp(secure.update_noise, 0.01, orders), 1e-5)
  assert 0.99 <= eps <= 1.0, eps
  assert 1.0 < secure.update_noise / float_cal.update_noise < 1.4  # measured 1.31
  ledger = baseline_accounting.sgd_ledger(2.0, steps=10, sampling_rate=0.01, secure_noise=True, features=4)
  assert ledger.routes() == ("rdp",)
  with pytest.raises(ValueError, match="method"):
    baseline_accounting.calibrate_sgd(1.0, 1e-5, steps=10, sampling_rate=0.01, method="fft_pld", secure_noise=True,
                                      features=4)
  with pytest.raises(ValueError, match="secure_noise"):
    baseline_accounting.sgd_ledger(2.0, steps=10, sampling_rate=0.01, secure_noise=1)


def _problem(n=400):
  rng = np.random.default_rng(0)
  X = rng.normal(size=(n, 4))
  y = np.sign(X[:, 0] + 0.5 * X[:, 1] + 0.1)
  return dg.make_problem(X, y, loss="logistic", feature_bound=4.0)


@pytest.mark.slow
def test_secure_fit_has_no_float_event_and_learns():
  problem = _problem()
  found = {}
  for secure in (True, False):
    res = dg.fit(dg.dp_sgd, problem, jax.random.key(0), epsilon=2.0, delta=1e-5, passes=3, batch_size=20,
                 step_size=0.5, store_objective=True, secure_noise=secure)
    found[secure] = [type(e.event).__name__ for e in res.privacy.entries if isinstance(e.event, FLOAT_EVENTS)]
    steps = [e for e in res.privacy.entries if e.label == "step"]  # every step run, at the multiplier it ran with
    assert len(steps) == 1 and steps[0].count == 3 * (400 // 20), res.privacy.entries
    assert float(res.params.noise) >= steps[0].event.noise
    assert float(res.trace.nonprivate_objective[-1]) < math.log(2.0)  # below w = 0
  assert found[True] == [] and found[False] == ["PoissonSampledGaussian"]


def test_release_is_one_integer_vector_on_the_grid():
  gran, sigma, valid = discrete_grid.grid_and_scale(jnp.float32(1.5), jnp.float32(0.7))
  with jax.enable_x64(True):  # the step's exact sum is float64 (exact_sums.masked_float64_sum)
    total, step = jnp.asarray(np.arange(-3, 5, dtype=np.float64) * 2.0**40), jnp.asarray(gran, jnp.float64)
  out = dp_sgd._secure_release(jax.random.key(3), total, jnp.float32(1.5), sigma, valid, step)
  assert out.dtype == jnp.float64
  k = np.asarray(out) / float(gran)
  np.testing.assert_array_equal(k, np.round(k))  # (Q + Z) h: an integer vector times the public step
  z = k - np.asarray(total)
  assert np.all(z == np.round(z)) and np.any(z != 0)
  assert int(sigma) > 1.5 * 0.7 / float(gran)


def test_noise_scale_is_the_integer_sigma():
  gran, sigma, valid = discrete_grid.grid_and_scale(jnp.float32(2.0), jnp.float32(1.0))
  with jax.enable_x64(True):
    total, step = jnp.zeros(40000, jnp.float64), jnp.ones((), jnp.float64)
  out = dp_sgd._secure_release(jax.random.key(0), total, jnp.float32(2.0), sigma, valid, step)
  std = float(np.std(np.asarray(out)))
  assert abs(std / int(sigma) - 1.0) < 0.03  # the discrete Gaussian's std ~ sigma at sigma >> 1
  assert 2.0 * 1.0 / float(gran) < int(sigma) <= 2.0 * (1.0 / float(gran) + 2) + 1


@pytest.mark.slow
def test_secure_run_deterministic_jit_vmap_and_fail_closed():
  problem = _problem(200)
  params = dp_sgd.Params(step_size=0.3, clip=1.0, noise=1.5)
  run = lambda key, p=params: dp_sgd.run(problem, key, p, passes=1, batch_size=20, secure_noise=True).w
  a, b = run(jax.random.key(1)), run(jax.random.key(1))
  np.testing.assert_array_equal(a, b)
  assert np.all(np.isfinite(a)) and not np.array_equal(a, run(jax.random.key(2)))
  keys = jax.random.split(jax.random.key(1), 2)
  state = dp_sgd.init(problem)
  opts = dict(sampling_rate=0.1, max_batch=dp_sgd.max_batch_size(200, 0.1), secure_noise=True)
  step = jax.jit(lambda k, p: dp_sgd.step(k, state, problem, p, **opts)[0].w)
  batched = jax.vmap(lambda k: step(k, params))(keys)
  np.testing.assert_array_equal(batched[0], step(keys[0], params))
  too_large = params._replace(noise=jnp.float32(1e6))  # sigma above the samplers' MAX_SCALE
  assert np.all(np.isnan(step(keys[0], too_large)))
  assert np.all(np.isnan(step(keys[0], params._replace(noise=jnp.float32(jnp.nan)))))
  exact = step(keys[0], params._replace(noise=jnp.float32(0.0)))  # the non-private limit: no noise
  np.testing.assert_allclose(exact, dp_sgd.step(keys[0], state, problem, params._replace(noise=jnp.float32(0.0)),
                                                **{**opts, "secure_noise": False})[0].w, rtol=1e-5, atol=1e-7)
  with pytest.raises(ValueError):
    dp_sgd.run(problem, keys[0], params._replace(noise=-1.0), passes=1, batch_size=20, secure_noise=True)
  with pytest.raises(ValueError, match="secure_noise"):
    dp_sgd.run(problem, keys[0], params, passes=1, batch_size=20, secure_noise="yes")
