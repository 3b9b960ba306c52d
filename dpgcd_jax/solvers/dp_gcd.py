"""DP-GCD: differentially private (proximal) greedy coordinate descent.

Mangold, Bellet, Salmon, Tommasi, "High-Dimensional Private Empirical Risk Minimization by
Greedy Coordinate Descent", AISTATS 2023.

One iteration, from `w^0 = prox(0)` (`0` for the built-in penalties):

$$
\\begin{aligned}
g_j &= \\frac1n \\sum_i \\mathrm{clip}(\\nabla_j l(w^t; d_i), -C_j, C_j) + \\lambda_2 w^t_j \\\\
j_t &= \\text{private greedy choice of } j \\text{ with rule GS-s / GS-r / GS-q on } g
      \\quad (\\text{noise } b\\,\\bar\\Delta) \\\\
w^{t+1}_{j_t} &= \\mathrm{prox}_{\\gamma_{j_t} \\psi_{j_t}}\\big(w^t_{j_t} - \\gamma_{j_t} (g_{j_t} + \\eta_t)\\big),
\\quad \\gamma_j = \\gamma / M_j,
\\quad \\eta_t \\sim \\mathrm{Lap}(s \\Delta_{j_t}) \\text{ or } N(0, (s \\Delta_{j_t})^2)
\\end{aligned}
$$

with `Delta_j = 2 C_j / n` and `Delta_bar = max_j Delta_j / sqrt(M_j)`.

Privacy: each iteration releases the index `j_t` and the noisy coordinate gradient, every
other quantity (the iterates, the returned model) is post-processing. Per iteration the
selection is `2 / b`-DP (`"laplace"`) or `2 / b`-bounded-range, `rho = 1 / (2 b^2)`
(`"gumbel"`), the update `1 / s`-DP (`"laplace"`) or `1 / (2 s^2)`-zCDP
(`"gaussian"`); [`dpgcd_jax.privacy.accounting`][] composes them over the iterations.
The coordinate smoothness `M` must be public: [`fit`][dpgcd_jax.solvers.dp_gcd.fit] makes it so (declared, from a
declared feature bound, or from a privately released one, see [`dpgcd_jax.problem`][]).
The objective values in the trace are NOT private.

One path: which code runs, and every shape, is a function of public inputs only (the shapes, for
sparse features the public capacity and window of [`dpgcd_jax.sparse.from_matrix`][], the options, the
dtype). The selection draws the noise of all `p` coordinates on dense and sparse features alike: one
float law of the released index for every data set (the law [`dpgcd_jax.solvers.greedy`][]'s argument covers).

One iteration reads every example once, so `passes` (the argument of [`run`][dpgcd_jax.solvers.dp_gcd.run] and
[`fit`][dpgcd_jax.solvers.dp_gcd.fit]) is the number of iterations `T`; [`dpgcd_jax.privacy.calibrate_gcd`][] counts
the same `T` mechanism invocations as `steps=T`.
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import curvature as curvature_lib
from dpgcd_jax import kernels
from dpgcd_jax import mechanisms
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import accounting
from dpgcd_jax.solvers import _coordinate
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import greedy
from dpgcd_jax.solvers import scale_free

Array = jax.Array
CURVATURE_RATIO = 2.0
# `scale="per-step"`: the bound release's multiplier `1 / epsilon_b` over the selection's (zCDP shares
# 0.6 / 0.1 for the selection and the bound, `epsilon_b^2 / 2 = rho_sel / 6`; 1.5 and 4 measured alike).
BOUND_RATIO = 2.5


class Params(NamedTuple):
  """Hyperparameters of DP-GCD; every field is an array leaf (vmappable, never recompiles).

  The defaults (no clipping, no noise) are the NON-PRIVATE limit; use `fit` or
  calibrated multipliers from [`dpgcd_jax.privacy`][] for a private run.

  Attributes:
    step_size: `gamma` > 0; coordinate j moves by `gamma / M_j` times its noisy gradient.
    clip: `C` > 0, a scalar (thresholds `C_j = C sqrt(M_j / sum M)`) or a (p,) vector of
      thresholds; `inf` disables clipping (only with zero noise).
    selection_noise: `b` >= 0, selection noise in units of `Delta_bar`.
    update_noise: `s` >= 0, update noise in units of `Delta_j`.
    curvature_noise: >= 0, the noise of the released curvature of the selected coordinate
      (`curvature="released"`, [`dpgcd_jax.curvature`][]) in units of its sensitivity;
      required there. With `curvature="public"` it is unused and may stay `None` (the
      default: no leaf, so `jax.vmap` over a `Params` of the four other fields still works).
    bound_noise: `1 / epsilon` of each bound release with `scale="per-step"`; `None` (no leaf) otherwise.
  """

  step_size: Any = 1.0
  clip: Any = jnp.inf
  selection_noise: Any = 0.0
  update_noise: Any = 0.0
  curvature_noise: Any = None
  bound_noise: Any = None


State = _coordinate.State
init = _coordinate.init


class Info(NamedTuple):
  """What one DP-GCD iteration reports besides its state: `coordinate`, the selected `j_t` (released, covered
  by the guarantee; [`run`][dpgcd_jax.solvers.dp_gcd.run] stacks it into `trace.coordinates`)."""

  coordinate: Array


def step(
    key: Array,
    state: State,
    problem: problem_lib.Problem,
    params: Params,
    *,
    selection: str = "laplace",
    update: str = "laplace",
    rule: str = "gs-s",
    clipping_mode: str = "coordinate",
    curvature: str = "public",
    scale: str = "public",
    fixed: tuple[int, ...] = (),
) -> tuple[State, Info]:
  """One DP-GCD iteration (pure, jittable): the new state and the selected coordinate.

  Args:
    key: a JAX PRNG key, used once ([`run`][dpgcd_jax.solvers.dp_gcd.run] draws `fold_in(key, t)` at iteration `t`).
    state: from `init` or the previous step.
    problem: from [`dpgcd_jax.make_problem`][].
    params: [`Params`][dpgcd_jax.solvers.dp_gcd.Params] as arrays ([`run`][dpgcd_jax.solvers.dp_gcd.run] validates and
      casts them).
    selection, update, rule, clipping_mode, curvature, scale, fixed: static; see
      [`run`][dpgcd_jax.solvers.dp_gcd.run].

  Returns:
    `(State, Info)`.
  """
  if scale == "per-step":
    state, j = scale_free.step(key, state, problem, params, selection=selection, update=update, rule=rule,
                               curvature=curvature, fixed=fixed)
    return state, Info(j)
  M = problem_lib.coordinate_smoothness(problem)
  thresholds = clipping.coordinate_thresholds(params.clip, M, problem.curvature)
  mask = problem.column_mask
  if mask is not None:  # padded features (zero columns): a finite threshold, so that the choice of
    thresholds = jnp.where(mask, thresholds, 1.0)  # the exact sums is decided by the true ones
  g = kernels.clipped_gradient(problem, state.w, state.margins, thresholds, clipping_mode)
  public_gradient = problem.l2 * state.w  # the data-independent part of g: sizes the roundings

  def update_at(key_update, j, g_j, ok):
    """The private step of the selected `j`: by `gamma / M_j` (public), or by `gamma / hat M_j`
    with `hat M_j` released (`curvature="released"`, [`dpgcd_jax.curvature`][])."""
    M_step = M
    if curvature == "released":
      privatize = lambda k, value, multiplier, sens: greedy.privatize(k, value, multiplier, sens, update=update)
      M_j = curvature_lib.released_smoothness(privatize, jax.random.fold_in(key, 2), problem, j,
                                              params.curvature_noise)
      M_step = M.at[j].set(M_j)
    return greedy.private_update(key_update, j, g_j, state.w, M_step, thresholds, problem.mean_count,
                                 problem.penalty, params.step_size, params.update_noise, ok,
                                 public_gradient=public_gradient, update=update)

  # One path for every problem, dense or sparse, whatever its entries (module docstring, "One
  # path"): the selection draws the noise of all `p` coordinates.
  if curvature == "public":
    j, new_wj = greedy.private_coordinate_step(
        key, g, state.w, M, thresholds, problem.mean_count, problem.penalty, params.step_size,
        params.selection_noise, params.update_noise, public_gradient=public_gradient, selection=selection,
        update=update, rule=rule, column_mask=mask)
  else:  # the same draws as private_coordinate_step, the step from the released curvature
    key_select, key_update = jax.random.split(key)
    j, ok = greedy.select_checked(key_select, g, state.w, M, problem.penalty, params.selection_noise,
                                  greedy.score_sensitivity(rule, thresholds, M, problem.mean_count, state.w,
                                                           public_gradient, problem.penalty, mask),
                                  selection=selection, rule=rule, column_mask=mask)
    new_wj = update_at(key_update, j, g[j], ok)
  return _coordinate.set_coordinate(problem, state, j, new_wj), Info(j)


def run(
    problem: problem_lib.Problem,
    key: Array,
    params: Params,
    *,
    passes: int,
    selection: str = "laplace",
    update: str = "laplace",
    rule: str = "gs-s",
    clipping_mode: str = "coordinate",
    store_objective: bool = False,
    secure_noise: bool = False,
    curvature: str = "public",
    scale: str = "public",
    fixed: tuple[int, ...] = (),
) -> base.Result:
  """Runs `passes` DP-GCD iterations (one iteration = one pass over the data) under jit.

  Args:
    problem: from [`dpgcd_jax.make_problem`][].
    key: a JAX PRNG key (required; the same key gives the same result).
    params: [`Params`][dpgcd_jax.solvers.dp_gcd.Params] (noise multipliers from [`dpgcd_jax.privacy.calibrate_gcd`][],
      or use [`fit`][dpgcd_jax.solvers.dp_gcd.fit] with a budget).
    passes: number of iterations `T` (a runtime value: a new one does not recompile).
    selection: "laplace" (paper-faithful noisy max) or "gumbel" (exponential mechanism).
    update: "laplace" or "gaussian" noise on the selected coordinate gradient.
    rule: greedy rule "gs-s", "gs-r" or "gs-q" (identical when there is no penalty).
    clipping_mode: "coordinate" (the paper's per-coordinate clipping) or "derivative" (clip the
      scalar `phi'` of a GLM loss; features bounded by `feature_bound`; same sensitivity,
      see [`dpgcd_jax.kernels.derivative_clip`][]).
    store_objective: record the (NOT private) objective after every iteration (off by default).
    secure_noise: floating-point-safe noise (Mironov 2012): selection and update become their exact
      discrete counterparts on a public grid ("laplace" -> "discrete_laplace", "gaussian" ->
      "discrete_gaussian"; "gumbel" raises; `dpgcd_jax.mechanisms`), with the same multipliers. Calibrate
      them with `fit`, or `calibrate_gcd` with the discrete names and `features=p` (it charges the draws;
      it knows neither `curvature="released"` nor `scale="per-step"`: use `fit` with them).
    curvature: "public" (steps `gamma / M_j` from the problem's public smoothness) or
      "released": each iteration also releases the second moment of the selected feature with
      the update mechanism at `params.curvature_noise` and steps by `gamma / hat M_j`
      ([`dpgcd_jax.curvature`][]; needs a GLM loss with a public feature bound).
    scale: "public" (scores and steps in units of the problem's bounds) or "per-step": selection on
      `sign(x_ij)`, a bound released per step at `epsilon = 1 / params.bound_noise` for the selected feature
      and kept ([`dpgcd_jax.solvers.scale_free`][]); `fixed`: the columns that keep their public bound.

  Returns:
    A [`dpgcd_jax.Result`][]: the final iterate and the trace (selected coordinates,
    `nonprivate_objective`; with `scale="per-step"`, `bounds`).

  Examples:
    >>> import jax, dpgcd_jax as dg
    >>> X = jax.random.normal(jax.random.key(0), (50, 8))
    >>> problem = dg.make_problem(X, X[:, 0], "squared", feature_bound=5.0)
    >>> params = dg.dp_gcd.Params(clip=1.0, selection_noise=5.0, update_noise=5.0)
    >>> res = dg.dp_gcd.run(problem, jax.random.key(1), params, passes=10)
    >>> res.w.shape, res.trace.coordinates.shape
    ((8,), (10,))
  """
  selection, update = greedy.mechanisms_run(selection, update, secure_noise)
  greedy.check_options(selection, update, rule)
  # another solver's params (no such fields) are refused by name in base.run
  greedy.check_private_rule(rule, getattr(params, "selection_noise", 0.0), getattr(params, "update_noise", 0.0))
  kernels.check_clipping_mode(problem, clipping_mode)
  curvature_lib.check(problem, curvature)
  curvature_lib.check_noise(params, curvature)
  scale_free.check(problem, scale, clipping_mode)
  return base.run(SOLVER, problem, key, params, passes=passes, store_objective=store_objective,
                  selection=selection, update=update, rule=rule, clipping_mode=clipping_mode, curvature=curvature,
                  scale=scale, fixed=tuple(int(i) for i in fixed))


def fit(
    problem: problem_lib.Problem,
    key: Array,
    *,
    epsilon: float,
    delta: float,
    passes: int,
    step_size: Any = 1.0,
    clip: Any = 1.0,
    selection: str = "laplace",
    update: str = "laplace",
    rule: str = "gs-s",
    selection_share: float | None = None,
    bound_share: float = budget.DEFAULT_BOUND_SHARE,
    store_objective: bool = False,
    prior: Any = None,
    targets: Any = None,
    prelude: Any = None,
    secure_noise: bool = False,
    clipping_mode: str = "coordinate",
    curvature: str = "public",
    curvature_ratio: float = CURVATURE_RATIO,
    scale: str = "public",
    fixed: tuple[int, ...] = (),
) -> base.Result:
  """(epsilon, delta)-DP DP-GCD: the private path from data to model, with default arguments.

  Everything taken from the data is public by declaration or released by an accounted mechanism:
  without a public smoothness (`make_problem` without `smoothness=` or `feature_bound=`) a share
  `bound_share` of `epsilon` releases a feature bound `B` ([`dpgcd_jax.privacy.bounds`][]), the features
  are clipped to it and `M_j = beta B^2`; the rest calibrates the smallest noise meeting the budget
  ([`private_plan`][dpgcd_jax.solvers.dp_gcd.private_plan], [`dpgcd_jax.solvers.budget.fit`][]).
  `result.privacy` lists what was spent.

  Args:
    problem: from [`dpgcd_jax.make_problem`][].
    key: a JAX PRNG key, or a batch of keys (leading axis): then every leaf of the result has
      that leading axis (independent private runs, each spending the whole budget).
    epsilon: total budget, > 0.
    delta: in (0, 1).
    passes: iterations `T` (one pass over the data each; a new value does not recompile).
    step_size: `gamma`; coordinate j moves by `gamma / M_j` times its noisy gradient. Or a
      function of the calibrated update noise multiplier `s` (public), e.g. to cap the noise
      a step adds (the estimators' regressor does).
    clip: per-coordinate clipping, in units of `sqrt(M_j / beta)` (see
      [`dpgcd_jax.clipping`][]): with features bounded by `B`, `C_j = clip B`, so
      `clip` bounds `|phi'|` (logistic: 1 clips nothing).
    selection, update, rule: see [`run`][dpgcd_jax.solvers.dp_gcd.run].
    selection_share: splits the solver's budget between selection and update (default: equal multipliers).
    bound_share: the share of `epsilon` spent on the feature bound when one is needed, in (0, 1).
    store_objective: also return `trace.nonprivate_objective` (NOT private; off by default).
    prior: a [`dpgcd_jax.privacy.Ledger`][] of releases already made from the same data
      toward this budget (e.g. private feature scales, [`dpgcd_jax.privacy.scales`][]): the
      run is calibrated so that `prior` and the run together are `(epsilon, delta)`-DP.
    targets: None, or (K, n) targets on the same features (e.g. one-vs-rest labels): one run
      per row, run `k` keyed by `fold_in(key, k)`, the K runs composed in the ledger;
      the result's leaves get a leading axis K.
    prelude: None, or releases to make before the runs, in their program (a
      [`Prelude`][dpgcd_jax.solvers.base.Prelude], as in [`private_fit`][dpgcd_jax.solvers.budget.private_fit]: the
      estimators' bounds), whose `ledger` joins the one ledger.
    clipping_mode: "coordinate" or "derivative" (see [`run`][dpgcd_jax.solvers.dp_gcd.run]; a problem without a
      public smoothness gets its feature bound released first, so "derivative" applies to it).
    secure_noise: floating-point-safe noise (see [`run`][dpgcd_jax.solvers.dp_gcd.run]); the ledger then holds the
      discrete mechanisms' events (`PureDp` selection, `DiscreteLaplace` or `DiscreteGaussian` update).
    curvature: "public" or "released" (see [`run`][dpgcd_jax.solvers.dp_gcd.run]): "released" adds the entry
      "curvature", the update mechanism at `curvature_ratio` times the update multiplier, per iteration.
    curvature_ratio: the curvature release's multiplier over the update's, > 0 (default
      `CURVATURE_RATIO = 2`: Gaussian updates at equal selection and update multipliers give
      the curvature a ninth of the run's zCDP budget).
    scale, fixed: see [`run`][dpgcd_jax.solvers.dp_gcd.run]; "per-step" adds the entry "column bound" per
      iteration, `bound_noise` at `BOUND_RATIO` times the selection multiplier.

  Returns:
    A [`dpgcd_jax.Result`][] whose `privacy` is the privacy report.

  Reusing a key across releases on overlapping data voids the guarantee: draw a fresh key per
  release.
  """
  return budget.fit(SOLVER, problem, key, epsilon=epsilon, delta=delta, passes=passes, bound_share=bound_share,
                    store_objective=store_objective, prior=prior, targets=targets, prelude=prelude,
                    step_size=step_size, clip=clip, selection=selection, update=update, rule=rule,
                    selection_share=selection_share, secure_noise=secure_noise, clipping_mode=clipping_mode,
                    curvature=curvature, curvature_ratio=curvature_ratio, scale=scale, fixed=fixed)


def step_draws(coordinates: int, *, selection: str, update: str, curvature: str) -> int:
  """The discrete sampler draws of one DP-GCD iteration (the ledger's "sampler draws"):
  [`gcd_draws`][dpgcd_jax.privacy.accounting.gcd_draws] (`coordinates` for a discrete selection, one
  for a discrete update) and one more for a released curvature (the update's mechanism)."""
  released = int(curvature == "released" and mechanisms.is_discrete(mechanisms.update(update)))
  return accounting.gcd_draws(selection, update, coordinates) + released


def iterations_plan(steps: int, *, coordinates: int, step_size: Any, clip: Any, selection: str, update: str,
                    selection_share: float | None, curvature: str = "public",
                    curvature_ratio: float = CURVATURE_RATIO, scale: str = "public") -> budget.Plan:
  """The [`Plan`][dpgcd_jax.solvers.budget.Plan] of `steps` DP-GCD iterations: which noise each step
  draws and which events the ledger charges for it, in one place (the in-memory fit's
  [`private_plan`][dpgcd_jax.solvers.dp_gcd.private_plan] and the streamed one,
  [`dpgcd_jax.solvers.streamed`][], use it alike). `selection` and `update`: the mechanisms run (after
  `secure_noise`); `coordinates`: `p`, the scores a selection noises (the ledger's "sampler draws",
  [`step_draws`][dpgcd_jax.solvers.dp_gcd.step_draws]; a per-step bound's at its own epsilon); the rest: `fit`'s."""
  _validate.check_number("curvature_ratio", curvature_ratio, low=0.0, low_open=True)
  share = accounting.check_share(selection_share)
  r_sel, r_upd = accounting.share_ratios(selection, update, share)
  r_curv = float(curvature_ratio) * r_upd if curvature == "released" else None  # None: no field, no release
  r_bound = BOUND_RATIO * r_sel if scale == "per-step" else None
  draws = step_draws(coordinates, selection=selection, update=update, curvature=curvature)

  def ledger_of(params: Params) -> Any:
    spent = accounting.gcd_ledger(params.selection_noise, params.update_noise, steps=steps, selection=selection,
                                  update=update)
    if curvature == "released":
      spent = spent.add("curvature", mechanisms.update(update).event(params.curvature_noise), steps)
    if scale == "per-step":
      spent = spent + scale_free.release_ledger(params.bound_noise, steps)
    return spent.with_draws(draws, steps)

  def params_at(noise: float) -> Params:  # a callable step size stays unevaluated: the ledger never reads it
    return Params(step_size, clip, noise * r_sel, noise * r_upd, None if r_curv is None else noise * r_curv,
                  None if r_bound is None else noise * r_bound)

  def finish(params: Params) -> Params:  # once, at the calibrated scale
    return params._replace(step_size=step_size(params.update_noise)) if callable(step_size) else params

  return budget.Plan(params_at, ledger_of, dict(selection=selection, update=update, curvature=curvature, scale=scale),
                     finish)


def private_plan(problem: problem_lib.Problem, *, passes: int, runs: int = 1, epsilon: float = 1.0,
                 step_size: Any = 1.0, clip: Any = 1.0, selection: str = "laplace", update: str = "laplace",
                 rule: str = "gs-s", selection_share: float | None = None, secure_noise: bool = False,
                 clipping_mode: str = "coordinate", curvature: str = "public",
                 curvature_ratio: float = CURVATURE_RATIO, scale: str = "public", fixed: Any = ()) -> budget.Plan:
  """DP-GCD's privacy side ([`Plan`][dpgcd_jax.solvers.budget.Plan]) for [`fit`][dpgcd_jax.solvers.dp_gcd.fit]:
  the options checked, then [`iterations_plan`][dpgcd_jax.solvers.dp_gcd.iterations_plan] of the
  `passes` iterations of each of the `runs` runs (`epsilon` is not used)."""
  del epsilon
  selection, update = greedy.mechanisms_run(selection, update, secure_noise)
  greedy.check_options(selection, update, rule)
  greedy.check_private_rule(rule, np.inf)  # a fit is private
  kernels.check_clipping_mode(problem, clipping_mode)
  curvature_lib.check(problem, curvature)
  scale_free.check(problem, scale, clipping_mode)
  plan = iterations_plan(base.total_steps(SOLVER, problem, passes) * runs, coordinates=problem.num_features,
                         step_size=step_size, clip=clip, selection=selection, update=update, scale=scale,
                         selection_share=selection_share, curvature=curvature, curvature_ratio=curvature_ratio)
  return plan._replace(options=dict(plan.options, rule=rule, clipping_mode=clipping_mode,
                                    fixed=tuple(int(i) for i in fixed)))


SOLVER = base.Solver(Params, init, step, info=Info,
                     noises=("selection_noise", "update_noise", "curvature_noise", "bound_noise"),
                     padded=True, private_plan=private_plan, start=scale_free.start)
