"""Peeling (`dpgcd_jax.peeling`) and DP-SGD's noisy clipped sum (`dpgcd_jax.solvers.dp_sgd`) against the
DP-Sniper-style distinguisher (`dpgcd_jax.privacy.distinguisher`), each in float mode and with `secure_noise`.

As in tests/privacy/test_mechanism_audit.py (the registry's one-use mechanisms): each mechanism runs at the
multiplier whose ledger (the events the library charges for it, at the audit's delta) costs `EPSILON`, on
the worst-case neighbouring pair of its proof (stated at each pair). The distinguisher's lower bound must
stay below the charged epsilon (the noise is correct) and must exceed it when the noise is cut to a
quarter (the test can fail). The bound holds with probability 0.95 (the distinguisher's confidence);
the seeds are fixed, so each figure below is reproducible.

Outputs: peeling releases indices (the ordered tuple, one code per tuple: exact values, `bins=None`, as
the registry's selections). DP-SGD releases a float32 iterate, binned in 200 quantile bins as the
registry's updates are: exact float32 values can refute a float mechanism (Mironov 2012; the registry
audit's `test_exact_values_refute_the_float_updates_not_the_discrete_ones`), which says nothing about its
noise. Here they do not: on exact values the float step's bound is 0.0 at 400,000 runs (the noise is added
to the exact sum in float64 and the result rounded once; the values are too many to estimate a ratio
from), which is no proof either; the secure release is an integer of scale >= 8192 under a public map.

Measured (CPU; `python tests/privacy/test_composite_audit.py` prints them): peeling (s = 2 of 6), float 1.17 /
secure 1.28 below the charged 1.50, a quarter of the noise 3.67 / 3.98; DP-SGD (q = 1/2), float 1.39 / secure
0.40 below 1.50 (the secure step is charged by RDP, looser than the float mode's PLD, which gives 0.54 at the
same multiplier), a quarter of the noise 5.56 / 2.54.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import peeling
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.privacy import calibration
from dpgcd_jax.privacy import distinguisher
from dpgcd_jax.solvers import dp_sgd

EPSILON = 1.5  # the charged epsilon of one peeling (all its rounds) / one DP-SGD step, at the audit's delta
SECURE = [pytest.param(False, id="float"), pytest.param(True, id="secure")]

# ---------------------------------------------------------------------------------------------------
# Peeling: `SPARSITY` rounds, each `BoundedRange(2 / b)` (Gumbel) or `PureDp(2 / b)` (secure), composed.
# ---------------------------------------------------------------------------------------------------

PEEL_DELTA = 1e-6
CANDIDATES, SPARSITY, GAP, OFFSET, SENSITIVITY = 6, 2, 2.0, 1.0, 0.01
PEEL_RUNS = {False: 400_000, True: 50_000}  # per data set (the secure rounds' exact samplers are slower)
PEEL_POWER_RUNS, PEEL_CHUNK = 20_000, 25_000


@functools.cache
def _peel_claim(secure):
  """(multiplier, charged epsilon): the `b` whose `peeling.ledger` of one peeling costs `EPSILON`."""
  selection = peeling.SELECTIONS[secure]
  b, report = calibration.calibrate(lambda m: peeling.ledger("peeling", m, SPARSITY, selection=selection),
                                    EPSILON, PEEL_DELTA, key=("peeling audit", secure))
  return b, report.epsilon


def _peel_pair():
  """(u, u', Delta). Every score moves by at most `Delta` between neighbours. Round `r` draws `j` from
  the remaining set `R_r` with log-ratio `(u'_j - u_j) / (b Delta) - log(Z'_r / Z_r)`, at most `2 / b`:
  reached when the drawn coordinate moves up by `Delta` and the rest of `R_r`'s mass moves down by
  `Delta`. So the `SPARSITY` coordinates that peeling would pick on `D'` (0 and 1) sit `GAP Delta` below
  the others (they hold little of any round's mass) and move up by `Delta` while the others move down:
  every round of the output `(0, 1)` nears its `2 / b` at once."""
  up = np.arange(CANDIDATES) < SPARSITY
  u = (OFFSET + GAP * SENSITIVITY * ~up).astype(np.float32)
  u2 = (u + np.where(up, SENSITIVITY, -SENSITIVITY)).astype(np.float32)
  return u, u2, float(np.max(np.abs(u2.astype(np.float64) - u.astype(np.float64))))


@functools.partial(jax.jit, static_argnums=0)
def _peel(secure, keys, scores, multiplier, sensitivity):
  """One code `sum_r j_r p^(r - 1)` of the ordered indices per key, and whether every draw succeeded."""
  if secure:
    indices, ok = jax.vmap(lambda k: peeling.peel_secure(k, scores, SPARSITY, multiplier, sensitivity))(keys)
  else:
    indices = jax.vmap(lambda k: peeling.peel(k, scores, SPARSITY, multiplier, sensitivity))(keys)
    ok = jnp.ones(keys.shape[0], bool)
  return jnp.sum(indices * CANDIDATES ** jnp.arange(SPARSITY)[None, :], axis=1), ok


def _peel_draws(secure, runs, shrink, seed):
  """Codes on D and on D' (`runs` each) at the claim's multiplier, given `Delta / shrink` (4: a quarter of
  the noise the pair needs)."""
  u, u2, sensitivity = _peel_pair()
  out = []
  for key, scores in zip(jax.random.split(jax.random.key(seed)), (u, u2), strict=True):
    parts = []
    chunk = min(runs, PEEL_CHUNK)
    for k in jax.random.split(key, -(-runs // chunk)):
      code, ok = _peel(secure, jax.random.split(k, chunk), jnp.asarray(scores), _peel_claim(secure)[0],
                       sensitivity / shrink)
      assert bool(jnp.all(ok))  # no failed draw
      parts.append(np.asarray(code))
    out.append(np.concatenate(parts)[:runs])
  return out


@pytest.mark.slow
@pytest.mark.parametrize("secure", SECURE)
def test_peeling_stays_below_its_charge_on_its_worst_case_pair(secure):
  """`dpgcd_jax.peeling` (`peel`: Gumbel-top-k; `peel_secure`: rounds of discrete report-noisy-max): the
  bound on the ordered indices stays below the charge of `peeling.ledger` and reaches most of it."""
  charged = _peel_claim(secure)[1]
  res = distinguisher.likelihood_ratio_audit(*_peel_draws(secure, PEEL_RUNS[secure], 1.0, seed=0),
                                             delta=PEEL_DELTA, bins=None)
  assert 0.6 * charged <= res.epsilon_lower_bound <= charged, (secure, charged, res)


@pytest.mark.slow
@pytest.mark.parametrize("secure", SECURE)
def test_peeling_with_a_quarter_of_the_noise_is_refuted(secure):
  """`dpgcd_jax.peeling` given `Delta / 4` while the scores move by `Delta`: the bound exceeds the charge."""
  res = distinguisher.likelihood_ratio_audit(*_peel_draws(secure, PEEL_POWER_RUNS, 4.0, seed=1),
                                             delta=PEEL_DELTA, bins=None)
  assert res.epsilon_lower_bound > _peel_claim(secure)[1], (secure, res)


# ---------------------------------------------------------------------------------------------------
# DP-SGD: one step, `PoissonSampledGaussian(s, q)` / `PoissonSampledDiscreteGaussian(s, q)`.
# ---------------------------------------------------------------------------------------------------

SGD_DELTA = 1e-2  # as the registry audit's Gaussian events
EXAMPLES, BATCH, CLIP, TARGET = 4, 2, 1.0, 10.0  # q = 1/2
SGD_RUNS = {False: 400_000, True: 100_000}
SGD_POWER_RUNS = {False: 100_000, True: 50_000}
SGD_CHUNK = 50_000


@functools.cache
def _sgd_claim(secure):
  """(multiplier s, charged epsilon): the `s` whose one-step ledger (`baseline_accounting.sgd_ledger`,
  what `dp_sgd.private_plan` charges per step, the sampler's slack included) costs `EPSILON`."""
  q = BATCH / EXAMPLES
  s, report = calibration.calibrate(
      lambda m: baseline_accounting.sgd_ledger(m, steps=1, sampling_rate=q, secure_noise=secure, features=1),
      EPSILON, SGD_DELTA, key=("dp-sgd audit", secure))
  return s, report.epsilon


def _sgd_problem(sign):
  """The pair (replace-one, one feature, squared loss, `w = 0`): records 1..3 have `x = y = 0` (gradient
  0); record 0 has `x = 1` and `y = +TARGET` on D (gradient `-TARGET`, clipped to `-C`) and `-TARGET` on D'
  (clipped to `+C`). The sum then moves from `-C` to `+C` when record 0 is sampled and not at all
  otherwise: the pair `(1 - q) N(0, s^2) + q N(-+1, s^2)` in units of `C` that the accounting calls the
  worst case of replace-one with Poisson sampling (`dpgcd_jax.privacy._fft_pld`); other records with a
  nonzero gradient would only add their own sampling noise."""
  X = np.zeros((EXAMPLES, 1), np.float32)
  X[0, 0] = 1.0
  y = np.zeros(EXAMPLES, np.float32)
  y[0] = sign * TARGET
  return dg.make_problem(X, y, loss="squared")


@functools.partial(jax.jit, static_argnums=0)
def _sgd_step(secure, keys, problem, noise):
  """The iterate `w_1 = -(released sum) / (q n)` (step size 1) of one `dp_sgd.step` per key."""
  state = dp_sgd.init(problem)
  params = dp_sgd.Params(jnp.float32(1.0), jnp.float32(CLIP), jnp.asarray(noise, jnp.float32))
  one = lambda k: dp_sgd.step(k, state, problem, params, sampling_rate=BATCH / EXAMPLES, secure_noise=secure)[0].w[0]
  return jax.vmap(one)(keys)


def _sgd_draws(secure, runs, shrink, seed):
  """Iterates on D and on D' (`runs` each) at the claim's multiplier divided by `shrink` (4: a quarter)."""
  out = []
  for key, sign in zip(jax.random.split(jax.random.key(seed)), (1.0, -1.0), strict=True):
    problem, parts = _sgd_problem(sign), []
    chunk = min(runs, SGD_CHUNK)
    for k in jax.random.split(key, -(-runs // chunk)):
      parts.append(np.asarray(_sgd_step(secure, jax.random.split(k, chunk), problem,
                                        _sgd_claim(secure)[0] / shrink)))
      assert np.all(np.isfinite(parts[-1]))  # no failed (NaN) release
    out.append(np.concatenate(parts)[:runs])
  return out


@pytest.mark.slow
@pytest.mark.parametrize("secure", SECURE)
def test_dp_sgd_step_stays_below_its_charge_on_its_worst_case_pair(secure):
  """`dpgcd_jax.solvers.dp_sgd` (one step: Poisson sampling, the exact sum of quantized clipped gradients,
  Gaussian noise or, secure, discrete Gaussian noise on the integer sum): the bound stays below the charge.
  Float: the PLD charge is near exact, and the audit reaches most of it. Secure: the RDP charge is looser;
  the audit reaches most of what the float mode's PLD gives at the same multiplier (the discrete noise is
  at least as large)."""
  s, charged = _sgd_claim(secure)
  res = distinguisher.likelihood_ratio_audit(*_sgd_draws(secure, SGD_RUNS[secure], 1.0, seed=0), delta=SGD_DELTA)
  near = baseline_accounting.sgd_ledger(s, steps=1, sampling_rate=BATCH / EXAMPLES).epsilon(SGD_DELTA)
  assert 0.6 * near <= res.epsilon_lower_bound <= charged, (secure, charged, near, res)


@pytest.mark.slow
@pytest.mark.parametrize("secure", SECURE)
def test_dp_sgd_step_with_a_quarter_of_the_noise_is_refuted(secure):
  """`dpgcd_jax.solvers.dp_sgd` at a quarter of the calibrated multiplier: the bound exceeds the charge."""
  res = distinguisher.likelihood_ratio_audit(*_sgd_draws(secure, SGD_POWER_RUNS[secure], 4.0, seed=1),
                                             delta=SGD_DELTA)
  assert res.epsilon_lower_bound > _sgd_claim(secure)[1], (secure, res)


if __name__ == "__main__":  # the figures of the module docstring
  audit = distinguisher.likelihood_ratio_audit
  for secure in (False, True):
    b, charged = _peel_claim(secure)
    ok = audit(*_peel_draws(secure, PEEL_RUNS[secure], 1.0, seed=0), delta=PEEL_DELTA, bins=None)
    power = audit(*_peel_draws(secure, PEEL_POWER_RUNS, 4.0, seed=1), delta=PEEL_DELTA, bins=None)
    print(f"peeling secure={secure}: b={b:.4g} charged={charged:.3f} bound={ok.epsilon_lower_bound:.3f} "
          f"quarter={power.epsilon_lower_bound:.2f}")
  for secure in (False, True):
    s, charged = _sgd_claim(secure)
    ok = audit(*_sgd_draws(secure, SGD_RUNS[secure], 1.0, seed=0), delta=SGD_DELTA)
    power = audit(*_sgd_draws(secure, SGD_POWER_RUNS[secure], 4.0, seed=1), delta=SGD_DELTA)
    print(f"dp-sgd secure={secure}: s={s:.4g} charged={charged:.3f} bound={ok.epsilon_lower_bound:.3f} "
          f"quarter={power.epsilon_lower_bound:.2f}")
