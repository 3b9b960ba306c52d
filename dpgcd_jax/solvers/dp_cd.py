"""DP-CD: differentially private (proximal) randomized coordinate descent.

Mangold, Bellet, Salmon, Tommasi, "Differentially Private Coordinate Descent for Composite
Empirical Risk Minimization", ICML 2022.

One step, from `w^0 = prox(0)`: draw `j` uniformly from `{1..p}` (public randomness), then

$$
w_j \\leftarrow \\mathrm{prox}_{\\gamma_j \\psi_j}\\big(w_j - \\gamma_j (g_j + \\eta)\\big), \\quad
g_j = \\frac1n \\sum_i \\mathrm{clip}(\\nabla_j l(w; d_i), -C_j, C_j) + \\lambda_2 w_j, \\quad
\\eta \\sim N(0, (s \\Delta_j)^2), \\quad \\gamma_j = \\gamma / M_j
$$

with the clipping rule and `Delta_j = 2 C_j / n` of [`dpgcd_jax.clipping`][]. One pass over
the data is `p` steps (each reads one column: O(n) for GLM losses).

Privacy: each step is a Gaussian mechanism on one coordinate, `rho = 1 / (2 s^2)`-zCDP;
`T` steps compose to `T / (2 s^2)` (no amplification by the random choice is claimed).
[`fit`][dpgcd_jax.solvers.dp_cd.fit] turns a budget into `s` (the ledger of
[`private_plan`][dpgcd_jax.solvers.dp_cd.private_plan]; `dpgcd_jax.privacy.calibrate_cd` for a
bare run). The objective values in
the trace are NOT private.
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import _coordinate
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import greedy

Array = jax.Array


class Params(NamedTuple):
  """Hyperparameters of DP-CD (array leaves: vmappable, never recompiles).

  The defaults (no clipping, no noise) are the NON-PRIVATE limit; use `fit` or
  calibrated multipliers from [`dpgcd_jax.privacy`][] for a private run.

  Attributes:
    step_size: `gamma` > 0 (coordinate j moves by `gamma / M_j` times its gradient).
    clip: `C` > 0 (scalar: DP-CD rule; or a (p,) vector); `inf` disables clipping.
    noise: `s` >= 0, Gaussian noise in units of `Delta_j`.
  """

  step_size: Any = 1.0
  clip: Any = jnp.inf
  noise: Any = 0.0


State = _coordinate.State
init = _coordinate.init


class Info(NamedTuple):
  """What one DP-CD step reports besides its state.

  Attributes:
    coordinate: the updated coordinate (an integer scalar), drawn uniformly from the step's
      key (public randomness, independent of the data); [`run`][dpgcd_jax.solvers.dp_cd.run] stacks it into
      `trace.coordinates`.
  """

  coordinate: Array


def coordinate_of_step(key: Array, num_features: int) -> Array:
  """The uniformly random coordinate of a step, drawn from the step's key."""
  return jax.random.randint(key, (), 0, num_features)


def step(key: Array, state: State, problem: problem_lib.Problem, params: Params, *,
         update: str = "gaussian") -> tuple[State, Info]:
  """One DP-CD step (pure, jittable): the new state and the updated coordinate.

  Args:
    key: a JAX PRNG key, used once (split into the coordinate's key and the noise's key).
    state: from `init` or the previous step.
    problem: from [`dpgcd_jax.make_problem`][].
    params: [`Params`][dpgcd_jax.solvers.dp_cd.Params] as arrays ([`run`][dpgcd_jax.solvers.dp_cd.run] validates and
      casts them).
    update: "gaussian", or "discrete_gaussian" (floating-point-safe, `secure_noise`:
      `dpgcd_jax.discrete_noise`; a failed draw gives NaN). Static.

  Returns:
    `(State, Info)`.
  """
  M = problem_lib.coordinate_smoothness(problem)
  thresholds = clipping.coordinate_thresholds(params.clip, M, problem.curvature)
  key_coordinate, key_noise = jax.random.split(key)
  j = coordinate_of_step(key_coordinate, problem.num_features)
  g_j = kernels.clipped_coordinate_gradient(problem, state.w, state.margins, thresholds, j)
  # Delta_j and the rounding of l2 w_j's addition (dpgcd_jax.solvers.greedy, "Floating point")
  sensitivity_j = greedy.update_sensitivity(thresholds[j], problem.num_examples, problem.l2 * state.w[j])
  noisy_g = greedy.privatize(key_noise, g_j, params.noise, sensitivity_j, update=update)
  return _coordinate.prox_step(problem, state, j, noisy_g, params.step_size, M), Info(j)


def _features_per_pass(problem: problem_lib.Problem, **options: Any) -> int:
  del options
  return problem.num_features


def run(problem: problem_lib.Problem, key: Array, params: Params, *, passes: int,
        store_objective: bool = False, secure_noise: bool = False) -> base.Result:
  """Runs `passes * p` DP-CD steps under jit; the objective is recorded once per pass.

  Args:
    problem: from [`dpgcd_jax.make_problem`][].
    key: a JAX PRNG key (required).
    params: [`Params`][dpgcd_jax.solvers.dp_cd.Params] (the noise multiplier from `dpgcd_jax.privacy.calibrate_cd`
      with `steps = passes * p` and the same `secure_noise`, or use [`fit`][dpgcd_jax.solvers.dp_cd.fit] with a
      budget).
    passes: number of passes over the data (a runtime value: a new one does not recompile);
      steps = passes * p.
    store_objective: record the (NOT private) objective after every pass.
    secure_noise: discrete Gaussian update noise on a public grid (Canonne, Kamath & Steinke
      2020) instead of floating-point Gaussian noise (see `dpgcd_jax.discrete_noise`).

  Returns:
    A [`dpgcd_jax.Result`][] (`trace.coordinates`: the coordinate of every step).
  """
  return base.run(SOLVER, problem, key, params, passes=passes, store_objective=store_objective,
                  update=_update(secure_noise))


def _update(secure_noise: bool) -> str:
  if not isinstance(secure_noise, (bool, np.bool_)):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  return "discrete_gaussian" if secure_noise else "gaussian"


def private_plan(problem: problem_lib.Problem, *, passes: int, runs: int = 1, epsilon: float = 1.0,
                 step_size: Any = 1.0, clip: Any = 1.0, secure_noise: bool = False) -> budget.Plan:
  """DP-CD's privacy side ([`Plan`][dpgcd_jax.solvers.budget.Plan]): at noise scale `s`, every one of the
  `passes * p` steps of each of the `runs` runs releases one coordinate gradient with Gaussian noise of
  multiplier `s` (discrete Gaussian with `secure_noise`), charged as one Gaussian (`DiscreteGaussian`)
  event per step, plus its one sampler draw per step (`Ledger.with_draws`; `epsilon` is not used)."""
  del epsilon
  update = _update(secure_noise)
  steps = base.total_steps(SOLVER, problem, passes) * runs

  def ledger_of(params: Params) -> ledger_lib.Ledger:  # secure: one discrete Gaussian draw per step
    return baseline_accounting.cd_ledger(params.noise, steps=steps, secure_noise=update != "gaussian")

  return budget.Plan(lambda scale: Params(step_size, clip, scale), ledger_of, dict(update=update))


SOLVER = base.Solver(Params, init, step, info=Info, noises=("noise",), steps_per_pass=_features_per_pass,
                     private_plan=private_plan)


def fit(problem: problem_lib.Problem, key: Array, *, epsilon: float, delta: float, passes: int,
        step_size: float = 1.0, clip: Any = 1.0, bound_share: float = budget.DEFAULT_BOUND_SHARE,
        store_objective: bool = False, secure_noise: bool = False, prior: Any = None, targets: Any = None,
        prelude: Any = None) -> base.Result:
  """(epsilon, delta)-DP DP-CD on the private path: [`dpgcd_jax.solvers.budget.fit`][] with this solver.

  A feature bound is released first when the problem has no public smoothness (share
  `bound_share` of `epsilon`); `s` is calibrated for `passes * p` steps with the rest
  ([`private_plan`][dpgcd_jax.solvers.dp_cd.private_plan]). `key` may be a batch of keys.
  `clip` is in the units of [`dpgcd_jax.clipping`][]. `secure_noise`: discrete Gaussian updates
  (see [`run`][dpgcd_jax.solvers.dp_cd.run]), accounted as `DiscreteGaussian` events. `prior`,
  `targets` and `prelude` are as in [`dpgcd_jax.dp_gcd.fit`][] (the ledger counts the `K` runs of
  `targets`).
  """
  return budget.fit(SOLVER, problem, key, epsilon=epsilon, delta=delta, passes=passes, bound_share=bound_share,
                    store_objective=store_objective, prior=prior, targets=targets, prelude=prelude,
                    step_size=step_size, clip=clip, secure_noise=secure_noise)
