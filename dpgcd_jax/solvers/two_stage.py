"""Two-stage private sparse ERM: select a support by peeling, then DP-GCD restricted to it.

In the spirit of Kifer, Smith & Thakurta, "Private Convex Empirical Risk Minimization and
High-dimensional Regression", COLT 2012 (private support selection, then a private
low-dimensional ERM). From `w^0 = prox(0)` (`0` for the built-in penalties):

$$
\\begin{aligned}
S &= \\mathrm{peel}_s\\big(|g_j(w^0)| / \\sqrt{M_j};\\ b_0 \\bar\\Delta\\big),
\\quad g_j(w^0) = \\frac1n \\sum_i \\mathrm{clip}(\\nabla_j l(w^0; d_i), -C_j, C_j) \\\\
w^{t+1} &= \\text{DP-GCD iteration } t \\text{ on the problem restricted to the columns } S
\\ (w_j = w^0_j \\text{ for } j \\notin S)
\\end{aligned}
$$

with `Delta_bar = max_j Delta_j / sqrt(M_j)`, `Delta_j = 2 C_j / n`
([`dpgcd_jax.clipping.mean_sensitivity`][]), `b_0` = `support_noise` and `peel_s` =
[`dpgcd_jax.peeling.peel`][] (`s` rounds of the exponential mechanism without replacement).
For a GLM at `w^0 = 0` the score is the clipped correlation of feature `j` with
`-phi'(0, y)` (squared loss: with `y`). Stage 2 is [`dpgcd_jax.dp_gcd.step`][] on the
restricted problem ([`dpgcd_jax.layout.restrict`][]: the `s` columns, their smoothness, penalty and
thresholds), so its selection, update, rules and noise are DP-GCD's; the result is a
`p`-vector equal to `w^0` (0) outside `S`.

Step `t = 0` does both: it selects `S` (the support in [`State`][dpgcd_jax.solvers.two_stage.State] is empty until then)
and runs the first DP-GCD iteration on it; `passes` is the number `T` of DP-GCD iterations
(one pass over the data each; the gradient of the selection is the first iteration's, over all
`p` columns). Under `jax.vmap` (a batch of keys, `targets`) the selection's branch is
evaluated at every step (a `lax.cond` becomes a select): correct, but each step then costs a
full gradient.

Privacy (replace-one neighbours `D`, `D'` of the same public size `n`).

* Stage 1. `w^0` is public, so `g_j(w^0)` moves by at most `Delta_j` and the score
  `|g_j| / sqrt(M_j)` by at most `Delta_j / sqrt(M_j) <= Delta_bar` (with equality up to
  rounding under the scalar clip rule `C_j ∝ sqrt(M_j)`). Peeling at temperature
  `b_0 Delta_bar`: `s` adaptive `BoundedRange(2 / b_0)` rounds ([`dpgcd_jax.peeling`][]).
* Stage 2. `S` is released, hence public for what follows: the restricted problem is a
  function of the data and of `S` only, its coordinates' sensitivities are the same
  `Delta_j` (clipping is per coordinate) and its `Delta_bar` is a max over `S`, at most
  the full one. Each iteration is one DP-GCD selection and one update, with DP-GCD's events
  ([`dpgcd_jax.solvers.dp_gcd`][]): `T` of each.
* Composition. One ledger ([`two_stage_ledger`][dpgcd_jax.solvers.two_stage.two_stage_ledger]): `s` rounds
  `BoundedRange(2 / b_0)`,
  `T` selections and `T` updates, composed adaptively by the ledger's best valid route, and
  calibrated once by [`fit`][dpgcd_jax.solvers.two_stage.fit] to `(epsilon, delta)`. The model and `trace.coordinates`
  (indices in `1..p`) are post-processing. The coordinate smoothness `M` must be public
  ([`fit`][dpgcd_jax.solvers.two_stage.fit] makes it so). The objective values in the trace are NOT private.

Floating point: stage 1's sensitivity is widened, in both modes, by the rounding of the two
float operations between the exact mean and the score (`l2 w_j`'s addition, the division by
`sqrt(M_j)`; values of size at most the public `max_j (C_j + |l2 w_j|) / sqrt(M_j)`,
[`dpgcd_jax.clipping.with_roundings`][]); stage 2 is DP-GCD's kernel, widened the same way
([`dpgcd_jax.solvers.greedy`][]). The Gumbel draw of stage 1 is not snapped. With a discrete
stage-2 selection (`selection="discrete_laplace"`, the estimators' `secure_noise=True`), stage
1 is secure peeling too ([`dpgcd_jax.peeling.peel_secure`][], `PureDp(2 / b_0)` per round), on
the same scores. A failed draw releases NaN.
"""

from __future__ import annotations

import math
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import layout
from dpgcd_jax import mechanisms
from dpgcd_jax import peeling
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import greedy
from dpgcd_jax.solvers import guards

Array = jax.Array


class Params(NamedTuple):
  """Hyperparameters of the two-stage solver; every field is an array leaf (vmappable).

  The defaults (no clipping, no noise) are the NON-PRIVATE limit.

  Attributes:
    step_size: `gamma` > 0 of stage 2 (DP-GCD: coordinate j moves by `gamma / M_j`).
    clip: `C` > 0, a scalar (thresholds `C_j = C sqrt(M_j / beta)`) or a (p,) vector of
      thresholds, for both stages; `inf` disables clipping (only with zero noise).
    support_noise: `b_0` >= 0, the peeling temperature of stage 1 in units of
      `Delta_bar`; each of its `s` rounds is `2 / b_0`-bounded-range.
    selection_noise: `b` >= 0, DP-GCD's selection noise (units of `Delta_bar`).
    update_noise: `b'` >= 0, DP-GCD's update noise (units of `Delta_j`).
  """

  step_size: Any = 1.0
  clip: Any = jnp.inf
  support_noise: Any = 0.0
  selection_noise: Any = 0.0
  update_noise: Any = 0.0


class State(NamedTuple):
  """The state of the two-stage solver.

  Attributes:
    w: (p,) the iterate, `w^0` outside the support.
    margins: (n,) `X w` for GLM losses (None otherwise), updated in O(n) per iteration.
    support: (p,) bool, the selected columns; all False before the first step.
  """

  w: Array
  margins: Array | None
  support: Array


class Info(NamedTuple):
  """What one step reports besides its state.

  Attributes:
    coordinate: the coordinate DP-GCD updated, an index in `0..p-1` (released; [`run`][dpgcd_jax.solvers.two_stage.run]
      stacks it into `trace.coordinates`).
  """

  coordinate: Array


def init(problem: problem_lib.Problem) -> State:
  """DP-GCD's `w^0 = prox(0)`, its margins, and an empty support."""
  start = dp_gcd.init(problem)
  return State(start.w, start.margins, jnp.zeros(problem.num_features, bool))


def select_support(key: Array, problem: problem_lib.Problem, state: State, params: Params, *,
                   sparsity: int, clipping_mode: str = "coordinate", secure: bool = False) -> tuple[Array, Array]:
  """Stage 1: `(columns, ok)`, the (s,) columns drawn by peeling on `|g_j(w)| / sqrt(M_j)`
  (secure peeling when `secure`; `ok` False when a discrete draw failed; module docstring)."""
  M = problem_lib.coordinate_smoothness(problem)
  thresholds = clipping.coordinate_thresholds(params.clip, M, problem.curvature)
  g = kernels.clipped_gradient(problem, state.w, state.margins, thresholds, clipping_mode)
  scores = jnp.abs(g) / jnp.sqrt(M)
  # both modes: the two roundings after the exact mean (+ l2 w, / sqrt(M)), of public size
  size = jnp.max((thresholds + jnp.abs(problem.l2 * state.w)) / jnp.sqrt(M))
  sensitivity = clipping.with_roundings(greedy.selection_sensitivity(thresholds, M, problem.num_examples), size,
                                        roundings=2)
  if not secure:
    return peeling.peel(key, scores, sparsity, params.support_noise, sensitivity), jnp.asarray(True)
  return peeling.peel_secure(key, scores, sparsity, params.support_noise, sensitivity)


def step(
    key: Array,
    state: State,
    problem: problem_lib.Problem,
    params: Params,
    *,
    sparsity: int,
    selection: str = "laplace",
    update: str = "laplace",
    rule: str = "gs-s",
    clipping_mode: str = "coordinate",
) -> tuple[State, Info]:
  """One step (pure, jittable): the support if none yet, then one DP-GCD iteration on it.

  Args:
    key: a JAX PRNG key, used once (split into the selection's key and DP-GCD's).
    state: from [`init`][dpgcd_jax.solvers.two_stage.init] or the previous step.
    problem: from [`dpgcd_jax.make_problem`][].
    params: [`Params`][dpgcd_jax.solvers.two_stage.Params] as arrays ([`run`][dpgcd_jax.solvers.two_stage.run] validates
      and casts them).
    sparsity: `s`, static, `1 <= s <= p`.
    selection, update, rule, clipping_mode: static; see [`run`][dpgcd_jax.solvers.two_stage.run].

  Returns:
    `(State, Info)`.
  """
  p = problem.num_features
  key_support, key_gcd = jax.random.split(key)
  secure = mechanisms.is_discrete(mechanisms.selection(selection))

  def draw_support() -> tuple[Array, Array]:
    columns, ok = select_support(key_support, problem, state, params, sparsity=sparsity,
                                 clipping_mode=clipping_mode, secure=secure)
    return peeling.indicator(columns, p), ok

  support, ok = jax.lax.cond(jnp.any(state.support), lambda: (state.support, jnp.asarray(True)), draw_support)
  columns = jnp.nonzero(support, size=sparsity)[0]
  clip = params.clip if jnp.ndim(params.clip) == 0 else params.clip[columns]
  restricted, info = dp_gcd.step(
      key_gcd, dp_gcd.State(state.w[columns], state.margins), layout.restrict(problem, columns),
      dp_gcd.Params(params.step_size, clip, params.selection_noise, params.update_noise),
      selection=selection, update=update, rule=rule, clipping_mode=clipping_mode)
  j = columns[info.coordinate]
  w = jnp.where(jnp.arange(p) == j, restricted.w[info.coordinate], state.w)  # no scatter
  w = jnp.where(ok, w, jnp.nan)  # a failed secure peeling: a NaN model, data-independent
  return State(w, restricted.margins, support), Info(j)


def two_stage_ledger(support_noise: float, selection_noise: float, update_noise: float, *, steps: int,
                     sparsity: int, selection: str = "laplace", update: str = "laplace",
                     runs: int = 1) -> ledger_lib.Ledger:
  """The ledger of `runs` two-stage runs of `steps` DP-GCD iterations in all.

  `runs` peelings of `sparsity` rounds `BoundedRange(2 / b_0)` (`PureDp(2 / b_0)`, secure
  peeling, with a discrete `selection`), then DP-GCD's
  [`dpgcd_jax.privacy.accounting.gcd_ledger`][] for `steps` iterations.
  """
  stage1 = peeling.SELECTIONS[mechanisms.is_discrete(mechanisms.selection(selection))]
  return (peeling.ledger("support selection", support_noise, sparsity, runs, stage1)
          + accounting.gcd_ledger(selection_noise, update_noise, steps=steps, selection=selection,
                                  update=update))


def multipliers(scale: float, *, sparsity: int, passes: int, selection: str, update: str,
                support_share: float) -> tuple[float, float, float]:
  """`(b_0, b, b')` at calibration scale `k`: `b = b' = k`, stage 1 a share of the zCDP.

  Stage 2 costs `rho_2 = T (c_sel + c_upd) / k^2` (the mechanisms' `zcdp_per_unit`), the
  peeling `rho_1 = s / (2 b_0^2)`; `b_0` makes `rho_1 / (rho_1 + rho_2) = support_share`.
  Only the split uses zCDP; the ledger composes the exact events.
  """
  per_step = mechanisms.selection(selection).zcdp_per_unit + mechanisms.update(update).zcdp_per_unit
  b0 = scale * math.sqrt(0.5 * sparsity * (1.0 - support_share) / (support_share * passes * per_step))
  return b0, scale, scale


def _check_options(problem: problem_lib.Problem, sparsity: int, selection: str, update: str, rule: str,
                   clipping_mode: str) -> int:
  guards.check_problem(problem)
  greedy.check_options(selection, update, rule)
  kernels.check_clipping_mode(problem, clipping_mode)
  return peeling.check_sparsity(sparsity, problem.num_features)


def run(
    problem: problem_lib.Problem,
    key: Array,
    params: Params,
    *,
    passes: int,
    sparsity: int,
    selection: str = "laplace",
    update: str = "laplace",
    rule: str = "gs-s",
    clipping_mode: str = "coordinate",
    store_objective: bool = False,
) -> base.Result:
  """Selects `sparsity` columns, then runs `passes` DP-GCD iterations on them, under jit.

  Args:
    problem: from [`dpgcd_jax.make_problem`][]; dense or sparse X.
    key: a JAX PRNG key (required; the same key gives the same result).
    params: [`Params`][dpgcd_jax.solvers.two_stage.Params] (or use [`fit`][dpgcd_jax.solvers.two_stage.fit] with a
      budget).
    passes: DP-GCD iterations `T` (a runtime value: a new one does not recompile).
    sparsity: `s`, the number of columns selected, `1 <= s <= p` (static).
    selection, update, rule, clipping_mode: stage 2's, see [`dpgcd_jax.dp_gcd.run`][];
      `clipping_mode` applies to stage 1 too.
    store_objective: record the (NOT private) objective after every iteration (off by default).

  Returns:
    A [`dpgcd_jax.Result`][]: the final iterate and the trace (the coordinate of each
    iteration, `nonprivate_objective`).

  Examples:
    >>> import jax, dpgcd_jax as dg
    >>> from dpgcd_jax.solvers import two_stage
    >>> X = jax.random.normal(jax.random.key(0), (50, 8))
    >>> problem = dg.make_problem(X, X[:, 0], "squared", feature_bound=5.0)
    >>> params = two_stage.Params(clip=1.0, support_noise=2.0, selection_noise=5.0, update_noise=5.0)
    >>> res = two_stage.run(problem, jax.random.key(1), params, passes=10, sparsity=3)
    >>> res.w.shape, res.trace.coordinates.shape, int((res.w != 0).sum()) <= 3
    ((8,), (10,), True)
  """
  sparsity = _check_options(problem, sparsity, selection, update, rule, clipping_mode)
  greedy.check_private_rule(rule, getattr(params, "selection_noise", 0.0), getattr(params, "update_noise", 0.0))
  return base.run(SOLVER, problem, key, params, passes=passes, store_objective=store_objective,
                  sparsity=sparsity, selection=selection, update=update, rule=rule,
                  clipping_mode=clipping_mode)


def private_plan(problem: problem_lib.Problem, *, passes: int, runs: int = 1, epsilon: float = 1.0,
                 sparsity: int, step_size: Any = 1.0, clip: Any = 1.0, selection: str = "laplace",
                 update: str = "laplace", rule: str = "gs-s", support_share: float = 0.25,
                 clipping_mode: str = "coordinate") -> budget.Plan:
  """Two-stage's privacy side ([`Plan`][dpgcd_jax.solvers.budget.Plan]): at scale `k`, the multipliers
  [`multipliers`][dpgcd_jax.solvers.two_stage.multipliers] `(k, ...)`; each of the `runs` runs is
  charged its peeling once and its `passes` DP-GCD iterations
  ([`two_stage_ledger`][dpgcd_jax.solvers.two_stage.two_stage_ledger]), plus the discrete mechanisms'
  sampler draws (`Ledger.with_draws`; `epsilon` is not used)."""
  del epsilon
  _validate.check_number("support_share", support_share, low=0.0, high=1.0, low_open=True,
                         high_open=True)
  sparsity = _check_options(problem, sparsity, selection, update, rule, clipping_mode)
  greedy.check_private_rule(rule, np.inf)  # a fit is private
  steps = base.total_steps(SOLVER, problem, passes) * runs
  share = float(support_share)
  # Sampler draws: a discrete selection peels over the p columns once per run (`sparsity` rounds), then
  # noises the `sparsity` restricted scores per step; a discrete update draws one per step.
  secure = int(mechanisms.is_discrete(mechanisms.selection(selection)))
  peeling_draws, step_draws = secure * sparsity * problem.num_features, (
      secure * sparsity + int(mechanisms.is_discrete(mechanisms.update(update))))

  def ledger_of(params: Params) -> ledger_lib.Ledger:
    spent = two_stage_ledger(params.support_noise, params.selection_noise, params.update_noise, steps=steps,
                             sparsity=sparsity, selection=selection, update=update, runs=runs)
    return spent.with_draws(peeling_draws, runs).with_draws(step_draws, steps)

  return budget.Plan(
      lambda scale: Params(step_size, clip, *multipliers(scale, sparsity=sparsity, passes=passes,
                                                         selection=selection, update=update, support_share=share)),
      ledger_of,
      dict(sparsity=sparsity, selection=selection, update=update, rule=rule, clipping_mode=clipping_mode))


SOLVER = base.Solver(Params, init, step, info=Info,
                     noises=("support_noise", "selection_noise", "update_noise"), private_plan=private_plan)


def fit(
    problem: problem_lib.Problem,
    key: Array,
    *,
    epsilon: float,
    delta: float,
    passes: int,
    sparsity: int,
    step_size: Any = 1.0,
    clip: Any = 1.0,
    selection: str = "laplace",
    update: str = "laplace",
    rule: str = "gs-s",
    support_share: float = 0.25,
    bound_share: float = budget.DEFAULT_BOUND_SHARE,
    store_objective: bool = False,
    prior: Any = None,
    targets: Any = None,
    prelude: Any = None,
    clipping_mode: str = "coordinate",
) -> base.Result:
  """(epsilon, delta)-DP two-stage fit: both stages in one ledger, calibrated once.

  The private path of [`dpgcd_jax.dp_gcd.fit`][] (a public smoothness: declared, from a
  declared feature bound, or from a feature bound released with a share `bound_share` of
  `epsilon`), then the smallest scale `k` such that the peeling and the `passes` DP-GCD
  iterations at [`multipliers`][dpgcd_jax.solvers.two_stage.multipliers] `(k, ...)`
  ([`two_stage_ledger`][dpgcd_jax.solvers.two_stage.two_stage_ledger]), with `prior` and
  the bound, are `(epsilon, delta)`-DP. `result.privacy` lists what was spent.

  Args:
    problem: from [`dpgcd_jax.make_problem`][].
    key: a JAX PRNG key, or a batch of keys (leading axis): one independent private run per
      key, each spending the whole budget.
    epsilon: total budget, > 0.
    delta: in (0, 1).
    passes: DP-GCD iterations `T` of stage 2.
    sparsity: `s`, the number of columns selected, `1 <= s <= p` (public).
    step_size, clip: see [`Params`][dpgcd_jax.solvers.two_stage.Params].
    selection, update, rule, clipping_mode: see [`run`][dpgcd_jax.solvers.two_stage.run].
    support_share: the share of the zCDP budget (a split heuristic, see
      [`multipliers`][dpgcd_jax.solvers.two_stage.multipliers])
      spent on stage 1, in (0, 1).
    bound_share: the share of `epsilon` spent on the feature bound when one is needed.
    store_objective: also return `trace.nonprivate_objective` (NOT private).
    prior: a [`dpgcd_jax.privacy.Ledger`][] of releases already made from the same data
      toward this budget.
    targets: None, or (K, n) targets on the same features: one two-stage run per row (each
      with its own support), composed.
    prelude: None, or releases to make before the runs, in their program (a
      [`Prelude`][dpgcd_jax.solvers.base.Prelude], as in [`private_fit`][dpgcd_jax.solvers.budget.private_fit]: the
      estimators' bounds), whose `ledger` joins the one ledger.

  Returns:
    A [`dpgcd_jax.Result`][] whose `privacy` is the privacy report.
  """
  return budget.fit(SOLVER, problem, key, epsilon=epsilon, delta=delta, passes=passes, bound_share=bound_share,
                    store_objective=store_objective, prior=prior, targets=targets, prelude=prelude,
                    sparsity=sparsity, step_size=step_size, clip=clip, selection=selection, update=update,
                    rule=rule, support_share=support_share, clipping_mode=clipping_mode)
