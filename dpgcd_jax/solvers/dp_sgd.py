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
Implementation detail that matters for privacy: to keep shapes static, at most
``max_batch`` sampled examples are used, with ``max_batch`` the smallest b such that
``P(Binomial(n, q) > b) <= 1e-15``. The truncation changes each step's output distribution by
at most 1e-15 in total variation; :func:`fit` accounts for it by calibrating for
``delta - (1 + e^epsilon) T 1e-15``. The objective values in the trace are NOT private.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.solvers import _coordinate
from dpgcd_jax.solvers import _driver

Array = jax.Array
TRUNCATION_PROBABILITY = 1e-15


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
  """Smallest b with ``P(Binomial(n, q) > b) <= 1e-15`` (host side)."""
  if sampling_rate >= 1.0:
    return num_examples
  b = int(stats.binom.isf(TRUNCATION_PROBABILITY, num_examples, sampling_rate)) + 1
  return min(max(b, 1), num_examples)


def sample_batch(key: Array, num_examples: int, sampling_rate: float, max_batch: int) -> tuple[Array, Array]:
  """Poisson sampling in O(max_batch): indices (padded to ``max_batch``) and a validity mask.

  The positions of the successes in n independent Bernoulli(q) trials have i.i.d.
  Geometric(q) gaps, so the first ``max_batch`` sampled indices are cumulative sums of
  geometric draws; those past ``n - 1`` are padding.
  """
  if sampling_rate >= 1.0:
    return jnp.arange(num_examples), jnp.ones(num_examples, bool)
  gaps = jax.random.geometric(key, sampling_rate, (max_batch,))
  indices = jnp.cumsum(gaps) - 1
  valid = indices < num_examples
  return jnp.where(valid, indices, 0), valid


def step(problem: problem_lib.Problem, params: Params, key: Array, state: _coordinate.State, *,
         sampling_rate: float, max_batch: int, X: Array) -> tuple[_coordinate.State, None]:
  """One DP-SGD step (``X``: the row-major features, gathered by rows)."""
  key_sample, key_noise = jax.random.split(key)
  indices, valid = sample_batch(key_sample, problem.num_examples, sampling_rate, max_batch)
  rows = X[indices]
  grads = jax.vmap(jax.grad(problem.loss.fn), in_axes=(None, 0, 0))(state.w, rows, problem.y[indices])
  clipped_sum = jnp.sum(clipping.clip_l2(grads, params.clip) * valid[:, None], axis=0)
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
        store_objective: bool = True) -> _driver.Result:
  """Runs ``passes * (n // batch_size)`` DP-SGD steps under jit (objective once per pass).

  Args:
    problem: from :func:`dpgcd_jax.make_problem`.
    params: :class:`Params`.
    key: a JAX PRNG key (required).
    passes: number of passes over the data (static).
    batch_size: expected batch size, 1 <= batch_size <= n (static); ``q = batch_size / n``.
    store_objective: record the (NOT private) objective after every pass.
  """
  passes = _driver.check_run_inputs(problem, key, passes, name="passes")
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
  return _driver.Result(state.w, _driver.Trace(None, objectives))


def fit(problem: problem_lib.Problem, key: Array, *, epsilon: float, delta: float, passes: int,
        batch_size: int = 1, step_size: float = 0.1, clip: float = 1.0,
        store_objective: bool = True) -> _driver.Result:
  """(epsilon, delta)-DP DP-SGD: calibrates ``s`` (with the truncation slack), then runs."""
  from dpgcd_jax.privacy import accounting  # pylint: disable=g-import-not-at-top

  passes = _driver.check_run_inputs(problem, key, passes, name="passes")
  _check_batch_size(batch_size, problem.num_examples)
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
  steps = passes * (problem.num_examples // batch_size)
  slack = (1.0 + np.exp(epsilon)) * steps * TRUNCATION_PROBABILITY
  calibration = accounting.calibrate_sgd(epsilon, delta - slack, steps=steps,
                                         sampling_rate=batch_size / problem.num_examples)
  result = run(problem, Params(step_size, clip, calibration.update_noise), key, passes=passes,
               batch_size=batch_size, store_objective=store_objective)
  return result._replace(privacy=calibration)
