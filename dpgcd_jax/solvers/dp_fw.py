"""DP-FW: differentially private Frank-Wolfe on the l1 ball.

Talwar, Thakurta, Zhang, "Nearly Optimal Private LASSO", NeurIPS 2015 (Algorithm 1).

Minimizes the smooth objective `f` (data term plus `l2`, plus an `L2` penalty if the
problem has one) over the l1 ball `{w : ||w||_1 <= r}`. From `w^0 = 0`, step `t = 0, 1, ...`:

$$
\\begin{aligned}
g_j &= \\frac1n \\sum_i \\mathrm{clip}(\\nabla_j l(w^t; d_i), -C_j, C_j) + \\lambda_2 w^t_j \\\\
s_t &= \\text{vertex } \\sigma r e_j \\ (\\sigma = \\pm 1) \\text{ drawn with probability }
      \\propto \\exp\\big(-\\langle \\sigma r e_j, g \\rangle / (b \\Delta_u)\\big),
      \\quad \\Delta_u = r \\max_j \\Delta_j \\\\
w^{t+1} &= (1 - \\mu_t) w^t + \\mu_t s_t, \\quad \\mu_t = 2 / (t + 2)
\\end{aligned}
$$

with `Delta_j = 2 C_j / n` ([`dpgcd_jax.clipping.mean_sensitivity`][], which adds the
one rounding of the exact clipped mean) and `b` = `selection_noise`. The draw is the
exponential mechanism with utility `u(s) = -<s, g>` over the `2p` vertices, sampled by
Gumbel-max (`dpgcd_jax.mechanisms.GumbelMax`): `argmax_s u(s) + b Delta_u G_s`,
`G_s ~ Gumbel(0, 1)`. With `b = 0` it is the exact linear minimization of Frank-Wolfe,
`s_t = -r sign(g_j) e_j` with `j = argmax |g_j|` (ties: the lowest index, `+r e_j`
before `-r e_j`). Every iterate is a convex combination of vertices: `||w^t||_1 <= r`.
There is no update noise: the vertex is the only release of a step.

Privacy (replace-one neighbours `D`, `D'` of the same public size `n`).

* Sensitivity of the utility. `w^t` is a function of the earlier released vertices and of
  public constants only (`r`, `mu_t`), so it is the same on `D` and `D'`, and so are
  the data-independent terms `l2 w^t` and the penalty's gradient. Coordinate `j` of the
  clipped mean moves by at most `Delta_j` ([`dpgcd_jax.clipping`][], exact sums). For the
  vertex `s = sigma r e_j`, `|u_D(s) - u_D'(s)| = r |g_j(D) - g_j(D')| <= r Delta_j <=
  r max_k Delta_k = Delta_u`. This is exactly the replace-one sensitivity bound used, over all
  `2p` vertices (it is attained up to the rounding term when some record's clipped gradient
  in the coordinate of largest `C_j` goes from `-C_j` to `+C_j`).
* One step. Gumbel-max samples `s` with probability `exp(u(s) / (b Delta_u)) / Z_D`, so
  `log P_D(s) - log P_D'(s) = (u_D(s) - u_D'(s)) / (b Delta_u) - log(Z_D / Z_D')`: the first
  term lies in `[-1/b, 1/b]` for every `s`, the second does not depend on `s`. The
  privacy loss therefore takes values in an interval of length `2 / b`: the step is
  `2 / b`-bounded-range (Durfee & Rogers 2019), hence `2 / b`-DP, i.e. the event
  `BoundedRange(2 / b)` of `dpgcd_jax.mechanisms.GumbelMax`. In the usual notation
  the vertex is drawn from `softmax(eps0 u / (2 Delta_u))` with `eps0 = 2 / b`. The radius
  cancels (`u / Delta_u = -sigma g_j / max_k Delta_k`): `r` does not change the privacy.
* Composition. `T` steps are `T` adaptive `BoundedRange(2 / b)` releases
  ([`fw_ledger`][dpgcd_jax.solvers.dp_fw.fw_ledger]; the ledger composes them by its best valid route, the adaptive
  bounded-range PLD in "best" up to about 2000 steps). The iterates, the returned model and
  `trace.coordinates` are post-processing of the vertices. The thresholds `C_j` of a
  scalar `clip` read the coordinate smoothness `M`, which must be public: [`fit`][dpgcd_jax.solvers.dp_fw.fit]
  makes it so, as for DP-GCD. The objective values in the trace are NOT private.

Floating point: the Gumbel draw is not snapped. With `secure_noise=True` the vertex is drawn
by report-noisy-max with discrete Laplace noise on the public grid instead
(`dpgcd_jax.mechanisms.DiscreteLaplaceNoisyMax`, selection "discrete_laplace"): the
utilities `+-r g_j` snapped to integers, plus integer noise of scale `floor(b D) + 1`, the
event `PureDp(2 / b)` per step (an upper bound on the exact mechanism; it is `2 / b`-DP like
the exponential mechanism, and the ledger composes it as pure DP instead of bounded range).
Its sensitivity adds the arithmetic after the exact clipped mean to `Delta_u`
([`secure_sensitivity`][dpgcd_jax.solvers.dp_fw.secure_sensitivity]): `g_j` is the mean (its
rounding in `Delta_j`) plus the public `l2 w_j` and penalty gradient, then times the public
`r`; each of those two roundings moves a value of size at most `V = r max_j (C_j + |l2 w_j| +
|psi'_j(w)|)` (public: `w` is) by at most `u V` (`u` the unit roundoff), on either
neighbour. The float (Gumbel) path uses the same widened `Delta_u`: its utilities carry the
same roundings. An invalid multiplier or a capped draw releases NaN (fail closed).

One step reads every example once: `passes` (the argument of [`run`][dpgcd_jax.solvers.dp_fw.run] and
  [`fit`][dpgcd_jax.solvers.dp_fw.fit])
is the number of Frank-Wolfe steps `T`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import NamedTuple
from typing import cast

import jax
import jax.numpy as jnp

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import mechanisms
from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import guards

Array = jax.Array

SELECTION = mechanisms.GumbelMax()  # the exponential mechanism, BoundedRange(2 / b) per use
# secure_noise=False / True: registry names (secure: discrete report-noisy-max, PureDp(2 / b) per use)
SELECTIONS = (SELECTION.name, mechanisms.DiscreteLaplaceNoisyMax().name)


class Params(NamedTuple):
  """Hyperparameters of DP-FW; every field is an array leaf (vmappable, never recompiles).

  Attributes:
    radius: `r` > 0, the radius of the l1 ball (required).
    clip: `C` > 0, a scalar (thresholds `C_j = C sqrt(M_j / beta)`, see
      [`dpgcd_jax.clipping`][]) or a (p,) vector of thresholds; `inf` (the default)
      disables clipping (only with zero noise).
    selection_noise: `b` >= 0, the temperature of the exponential mechanism in units of the
      utility sensitivity `Delta_u = r max_j Delta_j`; each step is `2 / b`-bounded-range.
      0 (the default) is the non-private Frank-Wolfe step.
  """

  radius: Any
  clip: Any = jnp.inf
  selection_noise: Any = 0.0

  @property
  def step_size(self) -> Any:
    """`radius`, under the name the solver protocol checks (> 0; NaN output otherwise).

    [`dpgcd_jax.solvers.guards.as_params`][] and `fail_closed` require a positive
    `step_size`; for Frank-Wolfe the scale of a step is the radius (`mu_t` is fixed).
    """
    return self.radius


class State(NamedTuple):
  """The state of DP-FW.

  Attributes:
    w: (p,) the iterate, in the l1 ball.
    margins: (n,) `X w` for GLM losses (None otherwise), kept up to date in O(n) per step
      (`(1 - mu) margins + mu sigma r X[:, j]`; O(nnz of column j) more for sparse X).
    count: the global step index `t` (int32), which sets `mu_t = 2 / (t + 2)`.
  """

  w: Array
  margins: Array | None
  count: Array  # type: ignore[assignment]  # public field name; it shadows tuple.count


class Info(NamedTuple):
  """What one DP-FW step reports besides its state.

  Attributes:
    coordinate: `j` of the selected vertex `sigma r e_j` (released; [`run`][dpgcd_jax.solvers.dp_fw.run] stacks it
      into `trace.coordinates`).
    sign: `sigma` in {-1, +1} (released with `j`; dropped by [`run`][dpgcd_jax.solvers.dp_fw.run]).
  """

  coordinate: Array
  sign: Array


def init(problem: problem_lib.Problem) -> State:
  """`w^0 = 0` (the centre of the ball), its margins, `t = 0`."""
  w0 = jnp.zeros(problem.num_features, problem.XT.dtype)
  return State(w0, kernels.init_margins(problem, w0), jnp.zeros((), jnp.int32))


def utility_sensitivity(radius: Array, thresholds: Array, num_examples: int) -> Array:
  """`Delta_u = r max_j Delta_j`: replace-one sensitivity of every utility `-<s, g>`."""
  return radius * jnp.max(clipping.mean_sensitivity(thresholds, num_examples))


def secure_sensitivity(sensitivity: Array, radius: Array, thresholds: Array, public_gradient: Array) -> Array:
  """`Delta_u` widened by the rounding of the two float operations after the exact mean
  (module docstring, "Floating point"; [`dpgcd_jax.clipping.with_roundings`][]) on values of
  size at most `V = r max_j (C_j + |public_gradient_j|)`."""
  size = radius * jnp.max(thresholds + jnp.abs(public_gradient))
  return clipping.with_roundings(sensitivity, size, roundings=4)


def select_vertex(key: Array, g: Array, radius: Array, multiplier: Array,
                  sensitivity: Array, *, selection: str = "gumbel") -> tuple[Array, Array, Array]:
  """`(j, sigma)` of the vertex `sigma r e_j` drawn by the exponential mechanism.

  Utilities `u = r (-g, +g)` (index `k < p`: `+r e_k`; `k >= p`: `-r e_(k-p)`),
  Gumbel-max at scale `multiplier * sensitivity` (`sensitivity` =
  [`utility_sensitivity`][dpgcd_jax.solvers.dp_fw.utility_sensitivity]):
  `P(sigma r e_j) = softmax(u / (multiplier sensitivity))`. A multiplier of 0 is the exact
  argmax; an invalid one gives NaN scores (a data-independent index, and `run` returns NaN).
  `selection="discrete_laplace"` (`secure_noise`): report-noisy-max on the public grid, with
  `sensitivity` from [`secure_sensitivity`][dpgcd_jax.solvers.dp_fw.secure_sensitivity].

  Returns:
    `(j, sigma, ok)`: `ok` False when a discrete draw failed (the step then releases NaN).
  """
  p = g.shape[0]
  utilities = radius * jnp.concatenate([-g, g])
  # The score ignores w, M, penalty (None here), and the mechanisms ignore rule: select is typed
  # for DP-GCD's call (mechanisms.py), so it is called here through an untyped view of itself.
  mechanism = mechanisms.selection(selection)
  select = cast(Callable[..., Any], mechanism.select)
  if mechanisms.is_discrete(mechanism):
    k, ok = select(key, lambda u, *_: u, utilities, None, None, None, multiplier, sensitivity, "gs-s")
  else:
    k, ok = select(key, lambda u, *_: u, utilities, None, None, None,
                   clipping.noise_scale(multiplier, sensitivity), None), jnp.asarray(True)
  sign = jnp.where(k < p, 1, -1).astype(g.dtype)
  return k % p, sign, ok


def step(
    key: Array,
    state: State,
    problem: problem_lib.Problem,
    params: Params,
    *,
    clipping_mode: str = "coordinate",
    selection: str = "gumbel",
) -> tuple[State, Info]:
  """One DP-FW step (pure, jittable): the new state and the selected vertex.

  Args:
    key: a JAX PRNG key, used once ([`run`][dpgcd_jax.solvers.dp_fw.run] draws `fold_in(key, t)` at step `t`).
    state: from [`init`][dpgcd_jax.solvers.dp_fw.init] or the previous step.
    problem: from [`dpgcd_jax.make_problem`][] (penalty none or `L2`).
    params: [`Params`][dpgcd_jax.solvers.dp_fw.Params] as arrays ([`run`][dpgcd_jax.solvers.dp_fw.run] validates and
      casts them).
    clipping_mode, selection: static; see [`run`][dpgcd_jax.solvers.dp_fw.run].

  Returns:
    `(State, Info)`.
  """
  M = problem_lib.coordinate_smoothness(problem)
  thresholds = clipping.coordinate_thresholds(params.clip, M, problem.curvature)
  g = kernels.clipped_gradient(problem, state.w, state.margins, thresholds, clipping_mode)
  penalty_gradient = _penalty_gradient(problem.penalty, state.w)
  g = g + penalty_gradient
  sensitivity = utility_sensitivity(params.radius, thresholds, problem.num_examples)
  # Both modes: the float Gumbel path's utilities carry the same roundings (found by the review:
  # with a large l2 w they moved 259 x Delta_u between neighbours without this widening).
  public = jnp.abs(problem.l2 * state.w) + jnp.abs(penalty_gradient)  # bounds each intermediate, not their sum
  sensitivity = secure_sensitivity(sensitivity, params.radius, thresholds, public)
  j, sign, ok = select_vertex(key, g, params.radius, params.selection_noise, sensitivity, selection=selection)
  mu = (2.0 / (state.count + 2.0)).astype(state.w.dtype)
  move = mu * sign * params.radius
  w = (1.0 - mu) * state.w + jnp.where(jnp.arange(state.w.shape[0]) == j, move, 0.0)  # no scatter
  w = jnp.where(ok, w, jnp.nan)  # a failed discrete draw: a NaN model, data-independent
  margins = None
  if state.margins is not None:
    margins = kernels.update_margins(problem, (1.0 - mu) * state.margins, j, move)
  return State(w, margins, state.count + 1), Info(j, sign)


def _penalty_gradient(penalty: Any, w: Array) -> Array:
  """The gradient of a differentiable penalty (data-independent; `_check_problem`)."""
  return jax.grad(penalty.value)(w)


def fw_ledger(selection_noise: float, steps: int, selection: str = "gumbel") -> ledger_lib.Ledger:
  """The ledger of `steps` DP-FW steps: one vertex selection each, `BoundedRange(2 / b)`
  (`selection="gumbel"`) or `PureDp(2 / b)` (`"discrete_laplace"`, `secure_noise`)."""
  steps = _validate.check_int("steps", steps, low=0)
  _validate.check_positive("selection_noise", selection_noise, allow_zero=True, allow_inf=True)
  _validate.check_choice("selection", selection, SELECTIONS)
  event = mechanisms.selection(selection).event(float(selection_noise))
  return ledger_lib.Ledger.of(("vertex selection", event, steps))


def _check_radius(radius: Any) -> None:
  _validate.check_positive("radius", radius)


def _check_params_radius(params: Any) -> None:
  if isinstance(params, (tuple, list)) and len(params) >= 1:
    _check_radius(params[0])


def _check_problem(problem: problem_lib.Problem, clipping_mode: str) -> None:
  guards.check_problem(problem)
  if not penalties.is_differentiable(problem.penalty):
    raise ValueError(f"Expected a problem without a penalty (or a differentiable one, e.g. L2) for DP-FW, "
                     f"whose constraint is the l1 ball, got penalty={problem.penalty!r}.")
  kernels.check_clipping_mode(problem, clipping_mode)


def run(
    problem: problem_lib.Problem,
    key: Array,
    params: Params,
    *,
    passes: int,
    clipping_mode: str = "coordinate",
    store_objective: bool = False,
    selection: str = "gumbel",
) -> base.Result:
  """Runs `passes` DP-FW steps (one step = one pass over the data) under jit.

  Args:
    problem: from [`dpgcd_jax.make_problem`][], no penalty (or `L2`); dense or sparse X.
    key: a JAX PRNG key (required; the same key gives the same result).
    params: [`Params`][dpgcd_jax.solvers.dp_fw.Params] (or use [`fit`][dpgcd_jax.solvers.dp_fw.fit] with a budget).
    passes: number of steps `T` (a runtime value: a new one does not recompile).
    clipping_mode: "coordinate" (per-coordinate clipping, as DP-GCD) or "derivative" (clip the
      scalar `phi'` of a GLM loss with bounded features; same sensitivity).
    store_objective: record the (NOT private) objective after every step (off by default).
    selection: "gumbel" (the exponential mechanism, default) or "discrete_laplace"
      (report-noisy-max on the public grid, floating-point safe; module docstring).

  Returns:
    A [`dpgcd_jax.Result`][]: the final iterate and the trace (the coordinate of each
    selected vertex, `nonprivate_objective`).

  Examples:
    >>> import jax, dpgcd_jax as dg
    >>> from dpgcd_jax.solvers import dp_fw
    >>> X = jax.random.normal(jax.random.key(0), (50, 8))
    >>> problem = dg.make_problem(X, X[:, 0], "squared", feature_bound=5.0)
    >>> params = dp_fw.Params(radius=1.0, clip=1.0, selection_noise=5.0)
    >>> res = dp_fw.run(problem, jax.random.key(1), params, passes=10)
    >>> res.w.shape, res.trace.coordinates.shape
    ((8,), (10,))
  """
  _check_params_radius(params)
  _check_problem(problem, clipping_mode)
  _validate.check_choice("selection", selection, SELECTIONS)
  return base.run(SOLVER, problem, key, params, passes=passes, store_objective=store_objective,
                  clipping_mode=clipping_mode, selection=selection)


def private_plan(problem: problem_lib.Problem, *, passes: int, runs: int = 1, epsilon: float = 1.0,
                 radius: Any, clip: Any = 1.0, clipping_mode: str = "coordinate",
                 secure_noise: bool = False) -> budget.Plan:
  """DP-FW's privacy side ([`Plan`][dpgcd_jax.solvers.budget.Plan]): at noise scale `b`, each of the
  `passes` steps of each of the `runs` runs selects a vertex by report-noisy-max at multiplier `b`
  ([`fw_ledger`][dpgcd_jax.solvers.dp_fw.fw_ledger]: `BoundedRange(2 / b)`, or `PureDp(2 / b)` with
  `secure_noise` and its `2p` sampler draws, `Ledger.with_draws`; `epsilon` is not used)."""
  del epsilon
  if not isinstance(secure_noise, bool):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  selection = SELECTIONS[secure_noise]
  _check_radius(radius)
  _check_problem(problem, clipping_mode)
  steps = base.total_steps(SOLVER, problem, passes) * runs
  draws = 2 * problem.num_features if secure_noise else 0  # a discrete Laplace per vertex, per step
  return budget.Plan(lambda scale: Params(radius, clip, scale),
                     lambda params: fw_ledger(params.selection_noise, steps, selection).with_draws(draws, steps),
                     dict(clipping_mode=clipping_mode, selection=selection))


SOLVER = base.Solver(Params, init, step, info=Info, noises=("selection_noise",), private_plan=private_plan)


def fit(
    problem: problem_lib.Problem,
    key: Array,
    *,
    epsilon: float,
    delta: float,
    passes: int,
    radius: Any,
    clip: Any = 1.0,
    bound_share: float = budget.DEFAULT_BOUND_SHARE,
    store_objective: bool = False,
    prior: Any = None,
    targets: Any = None,
    prelude: Any = None,
    clipping_mode: str = "coordinate",
    secure_noise: bool = False,
) -> base.Result:
  """(epsilon, delta)-DP Frank-Wolfe on the l1 ball of radius `radius`.

  The private path of [`dpgcd_jax.dp_gcd.fit`][]: a public smoothness (declared, from a
  declared feature bound, or from a feature bound released with a share `bound_share` of
  `epsilon`), then the smallest selection multiplier `b` such that the `passes`
  `BoundedRange(2 / b)` selections ([`fw_ledger`][dpgcd_jax.solvers.dp_fw.fw_ledger]), with `prior` and the bound, are
  `(epsilon, delta)`-DP. `result.privacy` lists what was spent.

  Args:
    problem: from [`dpgcd_jax.make_problem`][], no penalty (or `L2`).
    key: a JAX PRNG key, or a batch of keys (leading axis): one independent private run per
      key, each spending the whole budget.
    epsilon: total budget, > 0.
    delta: in (0, 1).
    passes: steps `T` (one step is one pass over the data).
    radius: `r` > 0, the l1 radius (public).
    clip: per-coordinate clipping (see [`Params`][dpgcd_jax.solvers.dp_fw.Params]); with features bounded by `B`,
      `C_j = clip B` bounds `|phi'|`.
    bound_share: the share of `epsilon` spent on the feature bound when one is needed.
    store_objective: also return `trace.nonprivate_objective` (NOT private).
    prior: a [`dpgcd_jax.privacy.Ledger`][] of releases already made from the same data
      toward this budget.
    targets: None, or (K, n) targets on the same features: one run per row, composed.
    prelude: None, or releases to make before the runs, in their program (a
      [`Prelude`][dpgcd_jax.solvers.base.Prelude], as in [`private_fit`][dpgcd_jax.solvers.budget.private_fit]: the
      estimators' bounds), whose `ledger` joins the one ledger.
    clipping_mode: see [`run`][dpgcd_jax.solvers.dp_fw.run].
    secure_noise: draw each vertex by discrete report-noisy-max on the public grid
      (`PureDp(2 / b)` per step; module docstring, "Floating point") instead of Gumbel noise.

  Returns:
    A [`dpgcd_jax.Result`][] whose `privacy` is the privacy report.
  """
  return budget.fit(SOLVER, problem, key, epsilon=epsilon, delta=delta, passes=passes, bound_share=bound_share,
                    store_objective=store_objective, prior=prior, targets=targets, prelude=prelude,
                    radius=radius, clip=clip, clipping_mode=clipping_mode, secure_noise=secure_noise)
