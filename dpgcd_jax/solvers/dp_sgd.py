"""DP-SGD: (proximal) stochastic gradient descent with per-example clipping and Poisson sampling.

Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep Learning with Differential
Privacy", CCS 2016.

One step, from ``w^0 = prox(0)``: every example joins the batch ``B`` independently with
probability ``q = batch_size / n`` (Poisson sampling), then

.. math::

   \\hat g = \\frac{1}{q n}\\Big(\\sum_{i \\in B} \\mathrm{clip}_2(\\nabla l(w; d_i), C)
            + N(0, (s C)^2 I_p)\\Big) + \\lambda_2 w, \\qquad
   w \\leftarrow \\mathrm{prox}_{\\gamma \\psi}(w - \\gamma \\hat g)

with ``clip_2(v, C) = v min(1, C / ||v||_2)``. The step size ``gamma`` is absolute (not scaled
by a smoothness constant). One pass over the data is ``n / batch_size`` steps (the paper's
convention with ``batch_size = 1``: ``n`` single-example steps).

Privacy: the sum of clipped gradients has l2 sensitivity ``C`` (add / remove one record) and
the noise is ``N(0, (s C)^2)``: a Poisson-subsampled Gaussian mechanism per step, accounted
for replace-one neighbours by :func:`dpgcd_jax.privacy.calibrate_sgd` (dp_accounting).
Sampling is exactly Poisson (:mod:`dpgcd_jax.sampling`: gaps by inversion of 128-bit uniforms
against exact geometric thresholds, a small static batch with an exact O(n) overflow branch,
no truncation); its total-variation distance to ideal Poisson sampling is at most
``eta = 2^-64`` per step (for n < 2^30), and :func:`fit` adds ``(1 + e^epsilon) T eta`` to the
ledger as a delta slack. DP-SGD uses no smoothness constant (absolute step size, l2 clipping),
so ``fit`` releases no feature bound. The objective values in the trace are NOT private.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import sampling
from dpgcd_jax.solvers import _coordinate
from dpgcd_jax.solvers import _driver
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.privacy import events

Array = jax.Array
# Per-step total-variation distance of the sampler to exact Poisson(q) (no batch is truncated any
# more; the name is kept for its callers). fit adds (1 + e^epsilon) T TRUNCATION_PROBABILITY to
# the delta it calibrates for; see dpgcd_jax.sampling for the bound (eta <= 2^-64 for n < 2^30).
TRUNCATION_PROBABILITY = sampling.MAX_STEP_TOTAL_VARIATION


class Params(NamedTuple):
  """Hyperparameters of DP-SGD (array leaves: vmappable, never recompiles).

  The defaults (no clipping, no noise) are the NON-PRIVATE limit; use ``fit`` or
  calibrated multipliers from :mod:`dpgcd_jax.privacy` for a private run.

  Attributes:
    step_size: ``gamma`` > 0, the (absolute) step size.
    clip: ``C`` > 0, per-example l2 clipping norm; ``inf`` disables clipping.
    noise: ``s`` >= 0, noise std on the sum of clipped gradients in units of ``C``.
  """

  step_size: Any = 0.1
  clip: Any = jnp.inf
  noise: Any = 0.0


def max_batch_size(num_examples: int, sampling_rate: float) -> int:
  """The fast-path batch of :mod:`dpgcd_jax.sampling` (host side): ``P(Binomial(n, q) > b) <= 1/n``.

  Larger samples are not truncated: they take the exact O(n) completion branch.
  """
  return sampling.default_capacity(num_examples, sampling_rate)


def sample_batch(key: Array, num_examples: int, sampling_rate: float, max_batch: int) -> tuple[Array, Array]:
  """The Poisson(q) batch that :func:`step` uses for ``key``, as ``(arange(n), mask)`` (O(n)).

  Each example is in the batch independently with probability ``q`` (exactly, up to the
  2^-64 total-variation bound of :mod:`dpgcd_jax.sampling`); ``max_batch`` is the fast-path
  capacity, which changes the cost and which sample a key gives, never the law. For tests
  and audits; :func:`step` gathers only ``max_batch`` rows unless the sample is larger.
  """
  p = sampling.plan(num_examples, sampling_rate, max_batch)
  return jnp.arange(num_examples), sampling.sample_mask(key, p)


def step(problem: problem_lib.Problem, params: Params, key: Array, state: _coordinate.State, *,
         sampling_rate: float, max_batch: int, X: Array) -> tuple[_coordinate.State, None]:
  """One DP-SGD step (``X``: the row-major features, gathered by rows)."""
  key_sample, key_noise = jax.random.split(key)
  plan = sampling.plan(problem.num_examples, sampling_rate, max_batch)

  def clipped_gradients(indices):
    grads = jax.vmap(jax.grad(problem.loss.fn), in_axes=(None, 0, 0))(state.w, X[indices], problem.y[indices])
    return clipping.clip_l2(grads, params.clip)

  clipped_sum = sampling.subsample_sum(key_sample, plan, clipped_gradients)
  noise = clipping.noise_scale(params.noise, params.clip) * jax.random.normal(key_noise, state.w.shape,
                                                                             state.w.dtype)
  g = (clipped_sum + noise) / (sampling_rate * problem.num_examples) + problem.l2 * state.w
  w = problem.penalty.prox(state.w - params.step_size * g, params.step_size)
  return _coordinate.State(w, None), None


def _check_batch_size(batch_size: int, n: int) -> int:
  batch_size = _validate.check_int("batch_size", batch_size, low=1)
  if batch_size > n:
    raise ValueError(f"Expected batch_size <= n={n}, got batch_size={batch_size}.")
  return batch_size


def run(problem: problem_lib.Problem, params: Params, key: Array, *, passes: int, batch_size: int = 1,
        store_objective: bool = False) -> _driver.Result:
  """Runs ``passes * (n // batch_size)`` DP-SGD steps under jit (objective once per pass).

  Args:
    problem: from :func:`dpgcd_jax.make_problem`.
    params: :class:`Params`.
    key: a JAX PRNG key (required).
    passes: number of passes over the data (static).
    batch_size: expected batch size, 1 <= batch_size <= n (static); ``q = batch_size / n``.
    store_objective: record the (NOT private) objective after every pass.
  """
  passes = _driver.check_run_inputs(problem, key, passes, name="passes", dense_only=True)
  n = problem.num_examples
  batch_size = _check_batch_size(batch_size, n)
  params = _driver.as_params(Params(*params), problem.XT.dtype, positive=("step_size", "clip"),
                             non_negative=("noise",), num_features=problem.num_features,
                             clip_may_be_vector=False)
  return _run(problem, params, key, passes=passes, batch_size=batch_size, store_objective=store_objective)


@functools.partial(jax.jit, static_argnames=("passes", "batch_size", "store_objective"))
def _run(problem, params, key, *, passes, batch_size, store_objective):
  n = problem.num_examples
  steps_per_pass = n // batch_size
  one_step = functools.partial(step, problem, params, sampling_rate=batch_size / n,
                               max_batch=max_batch_size(n, batch_size / n), X=problem.XT.T)
  record = (lambda s: problem_lib.objective(problem, s.w)) if store_objective else None
  state, _, objectives = _driver.run_steps(
      one_step, _coordinate.State(_coordinate.init(problem).w, None), key,
      steps=passes * steps_per_pass, record_every=steps_per_pass, record=record)
  return _driver.Result(_driver.fail_closed(params, state.w), _driver.Trace(None, objectives))


def fit(problem: problem_lib.Problem, key: Array, *, epsilon: float, delta: float, passes: int,
        batch_size: int = 1, step_size: float = 0.1, clip: float = 1.0,
        store_objective: bool = False) -> _driver.Result:
  """(epsilon, delta)-DP DP-SGD: one ledger (Poisson-subsampled Gaussian steps + the sampler's
  total-variation slack), calibrated, then run. ``key`` may be a batch of keys."""
  _driver.check_fit_inputs(problem, key, epsilon, delta, _driver.DEFAULT_BOUND_SHARE,
                           uses_smoothness=False)
  passes = _validate.check_int("passes", passes, low=1)
  _driver.check_dense(problem)
  batch_size = _check_batch_size(batch_size, problem.num_examples)
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  n = problem.num_examples
  steps = passes * (n // batch_size)
  q = batch_size / n
  slack = (1.0 + np.exp(min(float(epsilon), 700.0))) * steps * TRUNCATION_PROBABILITY

  def solver_ledger(scale):
    return baseline_accounting.sgd_ledger(scale, steps=steps, sampling_rate=q).add(
        "sampling (total variation)", events.DeltaSlack(slack), 1)

  def make_run(scale):
    params = _driver.as_params(Params(step_size, clip, scale), problem.XT.dtype,
                               positive=("step_size", "clip"), non_negative=("noise",),
                               num_features=problem.num_features, clip_may_be_vector=False)
    return lambda pb, k: _run(pb, params, k, passes=passes, batch_size=batch_size,
                              store_objective=store_objective)

  return _driver.private_fit(problem, key, epsilon=epsilon, delta=delta,
                             bound_share=_driver.DEFAULT_BOUND_SHARE, solver_ledger=solver_ledger,
                             make_run=make_run, cache_key=("dp_sgd", steps, q, slack),
                             uses_smoothness=False)
