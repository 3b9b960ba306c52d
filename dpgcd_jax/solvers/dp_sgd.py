"""DP-SGD: (proximal) stochastic gradient descent with per-example clipping and Poisson sampling.

Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar, Zhang, "Deep Learning with Differential
Privacy", CCS 2016.

One step, from `w^0 = prox(0)`: every example joins the batch `B` independently with
probability `q = batch_size / n` (Poisson sampling), then

$$
\\hat g = \\frac{1}{q n}\\Big(\\sum_{i \\in B} \\mathrm{clip}_2(\\nabla l(w; d_i), C)
         + N(0, (s C)^2 I_p)\\Big) + \\lambda_2 w, \\qquad
w \\leftarrow \\mathrm{prox}_{\\gamma \\psi}(w - \\gamma \\hat g)
$$

with `clip_2(v, C) = v min(1, C / ||v||_2)`. The step size `gamma` is absolute (not scaled
by a smoothness constant). One pass over the data is `n / batch_size` steps (the paper's
convention with `batch_size = 1`: `n` single-example steps).

Privacy: the sum of clipped gradients has l2 sensitivity `C` (add / remove one record) and
the noise is `N(0, (s C)^2)`: a Poisson-subsampled Gaussian mechanism per step, accounted
for replace-one neighbours by `dpgcd_jax.privacy.calibrate_sgd` (dp_accounting).
The sum meets that sensitivity in floating point (a float32 sum of `2^20` clipped rows at
`C = 0.7` moved by `1.027 x 2C` when one record flipped): each clipped row is quantized by
truncation toward zero on a public power-of-two grid (`||q_i h||_2 <= C` exactly, the
clipping norm shrunk by `2e-6` relative to absorb the float roundings), the integers are
summed exactly in float64, the noise is added to that exact sum in float64 and the result is
rounded once (`g = ((Q h + Z) / (q n))` cast to the data's dtype, then `+ l2 w`): the
release is post-processing of the noisy exact sum ([`dpgcd_jax.exact_sums`][], "DP-SGD's sums").
Sampling is exactly Poisson ([`dpgcd_jax.sampling`][]: gaps by inversion of 128-bit uniforms
against exact geometric thresholds, a small static batch with an exact O(n) overflow branch,
no truncation); its total-variation distance to ideal Poisson sampling is at most
`eta = 2^-64` per step (for n < 2^30), and [`fit`][dpgcd_jax.solvers.dp_sgd.fit] adds `(1 + e^epsilon) T eta` to the
ledger as a delta slack. DP-SGD uses no smoothness constant (absolute step size, l2 clipping),
so `fit` releases no feature bound. The objective values in the trace are NOT private.

Secure mode (`secure_noise=True` in [`run`][dpgcd_jax.solvers.dp_sgd.run], `fit`, `private_plan`,
`dg.fit(dg.dp_sgd, ...)`): no float noise. The grid is the discrete mechanisms' public one,
`h = 2^floor(log2(s C / 8192))` (`dpgcd_jax.discrete_grid`, from the multiplier and `C`),
each clipped row is quantized on it (`||q_i h||_2 <= C`, as above), the batch's integer sum `Q`
is exact (`|q_ij| <= C / h < 2^23`, `n < 2^30`: below `2^53`), and the mechanism layer adds iid
discrete Gaussians of integer `sigma = floor(s D) + 1 > s C / h` (`D = ceil(C / h) + 1`) to each
coordinate of `Q` (`dpgcd_jax.mechanisms.DiscreteGaussianNoise.perturb_integers`); the step
uses `(Q + Z) h / (q n)`, post-processing of one integer vector. Privacy: one step is
[`PoissonSampledDiscreteGaussian`][dpgcd_jax.privacy.events.PoissonSampledDiscreteGaussian]`(s, q)`
(the sum's integer l2 change between add/remove neighbours is `||q_x||_2 <= C / h < sigma / s`),
accounted by RDP only (the proof is in the event and in `dpgcd_jax.privacy._rdp`), plus the
sampler's slack as above; a capped draw, an invalid multiplier or a scale above
`discrete_noise.MAX_SCALE` makes the step NaN (fail closed). Multiplier 0: the exact sum, no noise
(the non-private limit). The noise is `sigma h / (s C) <= 1 + (2 s + 1) / 8192` times the float
mode's at the same multiplier, and the RDP accounting needs a larger multiplier than the float
mode's PLD (x1.31 at `eps = 1, delta = 1e-5, q = 0.01, T = 1000`; docs/secure_noise.md).
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import discrete_grid
from dpgcd_jax import exact_sums
from dpgcd_jax import mechanisms
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import sampling
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import guards

Array = jax.Array


class Params(NamedTuple):
  """Hyperparameters of DP-SGD (array leaves: vmappable, never recompiles).

  The defaults (no clipping, no noise) are the NON-PRIVATE limit; use `fit` or
  calibrated multipliers from [`dpgcd_jax.privacy`][] for a private run.

  Attributes:
    step_size: `gamma` > 0, the (absolute) step size.
    clip: `C` > 0, per-example l2 clipping norm; `inf` disables clipping.
    noise: `s` >= 0, noise std on the sum of clipped gradients in units of `C`.
  """

  step_size: Any = 0.1
  clip: Any = jnp.inf
  noise: Any = 0.0


class State(NamedTuple):
  """The state of DP-SGD.

  Attributes:
    w: (p,) the iterate.
  """

  w: Array


class Info(NamedTuple):
  """What one DP-SGD step reports besides its state.

  Attributes:
    batch_size: the realized size `|B|` of the step's Poisson batch (an int32 scalar; its
      mean is `q n`). A diagnostic: the privacy analysis covers the model, not this count,
      and [`run`][dpgcd_jax.solvers.dp_sgd.run] does not return it (nor compute it).
  """

  batch_size: Array


def init(problem: problem_lib.Problem) -> State:
  """`w^0 = prox(0)` (the origin for the built-in penalties)."""
  return State(problem.penalty.prox(jnp.zeros(problem.num_features, problem.XT.dtype), 1.0))


def max_batch_size(num_examples: int, sampling_rate: float) -> int:
  """The fast-path batch of [`dpgcd_jax.sampling`][] (host side): `P(Binomial(n, q) > b) <= 1/n`.

  Larger samples are not truncated: they take the exact O(n) completion branch.
  """
  return sampling.default_capacity(num_examples, sampling_rate)


def sample_batch(key: Array, num_examples: int, sampling_rate: float, max_batch: int) -> tuple[Array, Array]:
  """The Poisson(q) batch that [`step`][dpgcd_jax.solvers.dp_sgd.step] uses for `key`, as `(arange(n), mask)` (O(n)).

  Each example is in the batch independently with probability `q` (exactly, up to the
  2^-64 total-variation bound of [`dpgcd_jax.sampling`][]); `max_batch` is the fast-path
  capacity, which changes the cost and which sample a key gives, never the law. For tests
  and audits; [`step`][dpgcd_jax.solvers.dp_sgd.step] gathers only `max_batch` rows unless the sample is larger.
  """
  p = sampling.plan(num_examples, sampling_rate, max_batch)
  return jnp.arange(num_examples), sampling.sample_mask(key, p)


def step(key: Array, state: State, problem: problem_lib.Problem, params: Params, *,
         sampling_rate: float, max_batch: int | None = None,
         X: Array | None = None, secure_noise: bool = False) -> tuple[State, Info]:
  """One DP-SGD step (pure, jittable): the new state and the realized batch size.

  Args:
    key: a JAX PRNG key, used once (split into the sample's key and the noise's key).
    state: from [`init`][dpgcd_jax.solvers.dp_sgd.init] or the previous step.
    problem: from [`dpgcd_jax.make_problem`][] (dense features).
    params: [`Params`][dpgcd_jax.solvers.dp_sgd.Params] as arrays ([`run`][dpgcd_jax.solvers.dp_sgd.run] validates and
      casts them).
    sampling_rate: `q` in (0, 1] (static).
    max_batch: the sampler's fast-path capacity (static; default
      [`max_batch_size`][dpgcd_jax.solvers.dp_sgd.max_batch_size]).
    X: the row-major features `problem.X`, gathered by rows; pass it when stepping in a
      loop ([`run`][dpgcd_jax.solvers.dp_sgd.run] builds it once per run), else each step transposes `problem.XT`.
    secure_noise: discrete Gaussian noise on the integer sum (static; module docstring).

  Returns:
    `(State, Info)`.
  """
  n = problem.num_examples
  max_batch = max_batch_size(n, sampling_rate) if max_batch is None else max_batch
  X = problem.X if X is None else X
  key_sample, key_noise = jax.random.split(key)
  plan = sampling.plan(n, sampling_rate, max_batch)

  dtype = state.w.dtype
  clip = jnp.asarray(params.clip, dtype)  # C: the clipping norm AND the noise's unit
  scale = exact_sums.grid_scale(clip, exact_sums.l2_grid_bits(n))  # 1 / h; n: the largest batch
  if secure_noise:  # the public grid of the discrete mechanisms (module docstring, "Secure mode")
    gran, sigma, valid = discrete_grid.grid_and_scale(params.noise, clip)
    scale = jnp.where(params.noise == 0, scale, (1.0 / gran).astype(dtype))

  def clipped_gradients(indices):
    grads = jax.vmap(jax.grad(problem.loss.fn), in_axes=(None, 0, 0))(state.w, X[indices], problem.y[indices])
    return clipping.quantize_l2(grads, clip, scale)  # integers q_i, ||q_i h||_2 <= C

  total, size = sampling.subsample_sum(key_sample, plan, clipped_gradients, with_size=True,
                                       reduce=exact_sums.masked_float64_sum)  # Q, exactly
  if secure_noise:
    released = _secure_release(key_noise, total, params.noise, sigma, valid, exact_sums.grid_step(clip, scale))
  else:
    noise = mechanisms.GaussianNoise().noise(key_noise, state.w.shape, dtype, clipping.noise_scale(params.noise, clip))
    with jax.enable_x64(True):  # the exact sum Q h plus the noise, then ONE rounding
      released = total * exact_sums.grid_step(clip, scale) + noise.astype(jnp.float64)
  with jax.enable_x64(True):
    released = released / (sampling_rate * n)
  g = released.astype(dtype) + problem.l2 * state.w
  w = problem.penalty.prox(state.w - params.step_size * g, params.step_size)
  return state._replace(w=w), Info(size)  # _replace: a state of the old layout keeps its type


def _secure_release(key: Array, total: Array, multiplier: Array, sigma: Array, valid: Array,
                    grid_step: Array) -> Array:
  """`(Q + Z) h` in float64: `Z` iid discrete Gaussian of int32 `sigma` added to the exact integer
  sum `Q` by the mechanism layer; NaN unless every draw and the scale are valid (fail closed);
  multiplier 0: `Q h` (no noise, the non-private limit)."""
  noisy, ok = mechanisms.DiscreteGaussianNoise().perturb_integers(key, total, sigma)
  with jax.enable_x64(True):
    released = jnp.where(multiplier == 0, total, jnp.where(valid & jnp.all(ok), noisy, jnp.nan))
    return released * grid_step


def _check_batch_size(batch_size: int, n: int) -> int:
  batch_size = _validate.check_int("batch_size", batch_size, low=1)
  if batch_size > n:
    raise ValueError(f"Expected batch_size <= n={n}, got batch_size={batch_size}.")
  return batch_size


def _steps_per_pass(problem: problem_lib.Problem, *, batch_size: int, secure_noise: bool = False) -> int:
  del secure_noise
  return problem.num_examples // batch_size


def _step_options(problem: problem_lib.Problem, *, batch_size: int, secure_noise: bool = False) -> dict[str, Any]:
  n = problem.num_examples
  return dict(sampling_rate=batch_size / n, max_batch=max_batch_size(n, batch_size / n), X=problem.X,
              secure_noise=secure_noise)


def _check_secure(secure_noise: Any) -> bool:
  if not isinstance(secure_noise, bool):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  return secure_noise


def private_plan(problem: problem_lib.Problem, *, passes: int, runs: int = 1, epsilon: float = 1.0,
                 batch_size: int = 1, step_size: Any = 0.1, clip: Any = 1.0,
                 secure_noise: bool = False) -> budget.Plan:
  """DP-SGD's privacy side ([`Plan`][dpgcd_jax.solvers.budget.Plan]): at noise scale `s`, each of the
  `passes * (n // batch_size)` steps of each of the `runs` runs is a Poisson(`q = batch_size / n`)
  subsampled Gaussian of multiplier `s` (`secure_noise`: a `PoissonSampledDiscreteGaussian(s, q)`,
  RDP only), and the sampler's total-variation distance `T eta` (`T` all steps,
  [`dpgcd_jax.sampling`][]) is charged at the ledger's epsilon, `(1 + e^epsilon) T eta`
  (`events.TotalVariation`; `epsilon` is not used); `secure_noise` also charges
  the `p` discrete Gaussian draws of each step (`Ledger.with_draws`)."""
  secure_noise = _check_secure(secure_noise)
  guards.check_dense(problem)
  batch_size = _check_batch_size(batch_size, problem.num_examples)
  steps = base.total_steps(SOLVER, problem, passes, batch_size=batch_size) * runs
  del epsilon
  q = batch_size / problem.num_examples

  def ledger_of(params: Params) -> Any:  # secure: one discrete Gaussian per coordinate of the sum, per step
    return baseline_accounting.sgd_ledger(params.noise, steps=steps, sampling_rate=q, secure_noise=secure_noise,
                                          features=problem.num_features)

  return budget.Plan(lambda scale: Params(step_size, clip, scale), ledger_of,
                     dict(batch_size=batch_size, secure_noise=secure_noise))


SOLVER = base.Solver(Params, init, step, info=Info, noises=("noise",), steps_per_pass=_steps_per_pass,
                     step_options=_step_options, vector_clip=False, uses_smoothness=False,
                     dense_only=True, sequential_runs=True, private_plan=private_plan)


def run(problem: problem_lib.Problem, key: Array, params: Params, *, passes: int, batch_size: int = 1,
        store_objective: bool = False, secure_noise: bool = False) -> base.Result:
  """Runs `passes * (n // batch_size)` DP-SGD steps under jit (objective once per pass).

  Args:
    problem: from [`dpgcd_jax.make_problem`][] (dense features).
    key: a JAX PRNG key (required).
    params: [`Params`][dpgcd_jax.solvers.dp_sgd.Params] (the noise multiplier from `dpgcd_jax.privacy.calibrate_sgd`,
      or use [`fit`][dpgcd_jax.solvers.dp_sgd.fit] with a budget).
    passes: number of passes over the data (a runtime value: a new one does not recompile).
    batch_size: expected batch size, 1 <= batch_size <= n (static); `q = batch_size / n`.
    store_objective: record the (NOT private) objective after every pass.
    secure_noise: discrete Gaussian noise on the exact integer sum (module docstring, "Secure
      mode"; calibrate with `calibrate_sgd(..., secure_noise=True, features=p)`).

  Returns:
    A [`dpgcd_jax.Result`][] (`trace.coordinates` is None: every step moves all coordinates).
  """
  guards.check_problem(problem)
  batch_size = _check_batch_size(batch_size, problem.num_examples)
  return base.run(SOLVER, problem, key, params, passes=passes, store_objective=store_objective,
                  batch_size=batch_size, secure_noise=_check_secure(secure_noise))


def fit(problem: problem_lib.Problem, key: Array, *, epsilon: float, delta: float, passes: int,
        batch_size: int = 1, step_size: float = 0.1, clip: float = 1.0,
        store_objective: bool = False, prior: Any = None, targets: Any = None,
        secure_noise: bool = False) -> base.Result:
  """(epsilon, delta)-DP DP-SGD: [`dpgcd_jax.solvers.budget.fit`][] with this solver, one ledger
  (Poisson-subsampled Gaussian steps + the sampler's total-variation slack,
  [`private_plan`][dpgcd_jax.solvers.dp_sgd.private_plan]), calibrated, then run. `key` may be a batch
  of keys; `prior` and `targets` are as in [`dpgcd_jax.dp_gcd.fit`][]. DP-SGD reads no smoothness, so
  no feature bound is released. `secure_noise`: discrete Gaussian noise on the exact integer sum,
  each step charged as `PoissonSampledDiscreteGaussian` (module docstring, "Secure mode")."""
  return budget.fit(SOLVER, problem, key, epsilon=epsilon, delta=delta, passes=passes,
                    store_objective=store_objective, prior=prior, targets=targets, batch_size=batch_size,
                    step_size=step_size, clip=clip, secure_noise=secure_noise)
