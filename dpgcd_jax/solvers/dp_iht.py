"""DP-IHT: differentially private (proximal) iterative hard thresholding, with peeling.

Wang & Gu, "Differentially Private Iterative Gradient Hard Thresholding for Sparse Learning",
IJCAI 2019; Hu et al. (2022) for the high-dimensional analysis; peeling as in Dwork, Su &
Zhang (2021) and Cai, Wang & Zhang (2021).

Minimizes `F = f + psi` over `s`-sparse vectors (`||w||_0 <= s`, `s` = `sparsity`).
From `w^0 = 0`, step `t = 0, 1, ...`, with `eta_j = gamma / M_j` (coordinate steps, as
DP-GCD):

$$
\\begin{aligned}
g_j &= \\frac1n \\sum_i \\mathrm{clip}(\\nabla_j l(w^t; d_i), -C_j, C_j) + \\lambda_2 w^t_j \\\\
u_j &= w^t_j - \\eta_j g_j \\\\
S_t &= \\mathrm{peel}_s\\big(\\sqrt{M_j} |\\mathrm{prox}_{\\eta_j \\psi_j}(u_j)|;\\ b \\gamma \\bar\\Delta\\big) \\\\
w^{t+1}_j &= \\mathrm{prox}_{\\eta_j \\psi_j}\\big(w^t_j - \\eta_j (g_j + \\xi_j)\\big) \\ (j \\in S_t),
\\quad 0 \\ (j \\notin S_t),
\\quad \\xi_j \\sim N\\big(0, (\\sigma \\sqrt{s}\\, \\Delta_j)^2\\big)
\\end{aligned}
$$

with `Delta_j = 2 C_j / n` ([`dpgcd_jax.clipping.mean_sensitivity`][], which adds the one
rounding of the exact clipped mean), `Delta_bar = max_j Delta_j / sqrt(M_j)`, `b` =
`selection_noise` and `sigma` = `update_noise`. `peel_s` is [`dpgcd_jax.peeling.peel`][]:
`s` rounds of the exponential mechanism without replacement (one Gumbel top-`s` draw).
With `b = sigma = 0` and `psi = 0` it is IHT in the metric `diag(M)`: the kept
coordinates are the `s` largest `M_j u_j^2`, i.e. the best `s`-sparse approximation of
the gradient step `u` in the norm `sum_j M_j x_j^2`.

Why the score is the gradient step `u` and not the gradient `g`: IHT keeps the coordinates
that matter after the step. At the optimum of a support the gradient vanishes on it, so a
selection on `|g_j|` would drop the support for coordinates whose only signal is noise; the
score `|u_j|` keeps the model's large coordinates (`u_j ≈ w_j`) and admits a new one only
when its gradient is large. The price is nothing: `w^t` is public, so `u_j` has the
sensitivity of `eta_j g_j`.

Privacy (replace-one neighbours `D`, `D'` of the same public size `n`).

* Public inputs of a step. `w^t` is a function of the earlier releases (supports and noisy
  values) and of public constants, so it is the same on `D` and `D'`; so are `M`,
  `C_j`, `eta_j`, `l2 w^t_j` and the prox. Coordinate `j` of the clipped mean moves by at
  most `Delta_j` (exact sums, [`dpgcd_jax.clipping`][]), hence `|u_j(D) - u_j(D')| <= eta_j
  Delta_j =: a_j` for every `j`.
* Selection. The prox of a convex `psi_j` is 1-Lipschitz and `| |x| - |y| | <= |x - y|`, so
  the score `sqrt(M_j) |prox(u_j)|` moves by at most `sqrt(M_j) a_j = gamma Delta_j /
  sqrt(M_j) <= gamma Delta_bar =: Delta_u` (with equality up to rounding under the scalar
  clip rule `C_j ∝ sqrt(M_j)`, where `Delta_j / sqrt(M_j)` is the same for every `j`).
  Peeling at temperature `b Delta_u` is then `s` adaptive `BoundedRange(2 / b)` rounds
  ([`dpgcd_jax.peeling`][]).
* Values. Given `S_t` (already released, so fixed), the step releases `(g_j + xi_j)_{j in
  S_t}`; `w^{t+1}` is post-processing of it. Divide coordinate `j` by the public `Delta_j`:
  `g_j / Delta_j + sigma sqrt(s) N(0, 1)`, i.i.d. noise of standard deviation `sigma sqrt(s)`
  on a vector whose `s` entries each move by at most 1, i.e. whose l2 sensitivity is at most
  `sqrt(s)` (attained, up to rounding, by a record whose clipped gradient goes from `-C_j`
  to `+C_j` in every coordinate of `S_t`). That is the Gaussian mechanism with multiplier
  `sigma sqrt(s) / sqrt(s) = sigma`: the event `Gaussian(sigma)`. The `sqrt(s)` in the
  noise is the price of releasing `s` coordinates of one gradient at once.
* Composition. `T` steps: `T s` rounds `BoundedRange(2 / b)` and `T` releases
  `Gaussian(sigma)`, adaptively ([`iht_ledger`][dpgcd_jax.solvers.dp_iht.iht_ledger]; the ledger composes them by its
  best
  valid route). The thresholds of a scalar `clip` read the coordinate smoothness `M`,
  which must be public: [`fit`][dpgcd_jax.solvers.dp_iht.fit] makes it so, as for DP-GCD. The objective values in the
  trace are NOT private.

Floating point: the arithmetic between the exact clipped mean and a score or a released value
rounds, by amounts of public size (below); both modes add them to the sensitivities (a large
`l2 w` or `|w|` would otherwise move neighbouring scores by more than `Delta_u`, as found for
DP-FW), and the float mode draws its Gaussian noise on `g` like the secure mode. By default the
noise itself (Gumbel, Gaussian) is float, not snapped. `secure_noise=True`
(`selection="discrete_laplace"` in [`run`][dpgcd_jax.solvers.dp_iht.run]) draws every release on the
public grid instead:

* the support by secure peeling ([`dpgcd_jax.peeling.peel_secure`][]: `s` rounds of discrete
  Laplace report-noisy-max, `PureDp(2 / b)` each), on the same scores, with the sensitivity
  `Delta_u` plus the rounding of the float operations between the exact mean and the score
  ([`dpgcd_jax.clipping.with_roundings`][]: at most 8 roundings per neighbour, each moving a
  value of size at most the public `V = max_j sqrt(M_j) (|w_j| + eta_j (C_j + |l2 w_j|) +
  |prox(0)_j|)` by `u V`, `u` the unit roundoff; 16 `u V` charged; this bounds the built-in
  penalties' prox arithmetic: a user prox whose intermediates exceed `V` (e.g. an l1 toward a
  far reference point) is not covered);
* the values: the gradient `g_j` (not `u_j`) of every coordinate with discrete Gaussian noise
  of multiplier `sigma sqrt(s)` on the grid of its sensitivity `Delta_j` plus the rounding of
  the public `l2 w_j`'s addition (`2 eps (C_j + |l2 w_j|)`), then `u_j = w_j - eta_j hat g_j`
  (post-processing). Over the `s` released coordinates, each `DiscreteGaussian(sigma sqrt(s))`
  (`rho < 1 / (2 s sigma^2)`-zCDP, CKS Thm 4), the zCDP adds up to `1 / (2 sigma^2)`: one event
  `DiscreteGaussian(sigma)` per step (RDP, `alpha / (2 sigma^2)`, which the ledger composes).
  A failed draw (a scale out of the samplers' range, a capped draw) releases NaN.

Coordinates outside the support are set to 0: the penalty should allow 0 (every built-in
penalty does, except a box that excludes 0). One step reads every example once: `passes`
is the number of steps `T`. The margins `X w` are recomputed after each step (up to
`2 s` coordinates change): O(np), or O(nnz) for sparse features, like the gradient.
"""

from __future__ import annotations

import math
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import mechanisms
from dpgcd_jax import peeling
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import greedy
from dpgcd_jax.solvers import guards

Array = jax.Array


class Params(NamedTuple):
  """Hyperparameters of DP-IHT; every field is an array leaf (vmappable, never recompiles).

  The defaults (no clipping, no noise) are the NON-PRIVATE limit.

  Attributes:
    step_size: `gamma` > 0; coordinate `j` steps by `gamma / M_j`. Since `s`
      coordinates move at once, `gamma` below 1 is safer with correlated features.
    clip: `C` > 0, a scalar (thresholds `C_j = C sqrt(M_j / beta)`, see
      [`dpgcd_jax.clipping`][]) or a (p,) vector of thresholds; `inf` (the default)
      disables clipping (only with zero noise).
    selection_noise: `b` >= 0, the peeling temperature in units of `gamma Delta_bar`;
      each of the `s` rounds of a step is `2 / b`-bounded-range.
    update_noise: `sigma` >= 0, the Gaussian multiplier of the `s` released values (noise
      `sigma sqrt(s) eta_j Delta_j` on coordinate `j`): the event `Gaussian(sigma)`.
  """

  step_size: Any = 0.5
  clip: Any = jnp.inf
  selection_noise: Any = 0.0
  update_noise: Any = 0.0


class State(NamedTuple):
  """The state of DP-IHT.

  Attributes:
    w: (p,) the iterate, at most `s` non-zeros after the first step.
    margins: (n,) `X w` for GLM losses (None otherwise).
  """

  w: Array
  margins: Array | None


class Info(NamedTuple):
  """What one DP-IHT step reports besides its state.

  Attributes:
    support: (s,) the indices kept, in the order peeling drew them (released). [`run`][dpgcd_jax.solvers.dp_iht.run]
      drops it (`trace.coordinates` is None: a step changes up to `2 s` coordinates).
  """

  support: Array


def init(problem: problem_lib.Problem) -> State:
  """`w^0 = 0` and its margins."""
  w0 = jnp.zeros(problem.num_features, problem.XT.dtype)
  return State(w0, kernels.init_margins(problem, w0))


def step(
    key: Array,
    state: State,
    problem: problem_lib.Problem,
    params: Params,
    *,
    sparsity: int,
    clipping_mode: str = "coordinate",
    selection: str = "gumbel",
) -> tuple[State, Info]:
  """One DP-IHT step (pure, jittable): the new state and the support.

  Args:
    key: a JAX PRNG key, used once ([`run`][dpgcd_jax.solvers.dp_iht.run] draws `fold_in(key, t)` at step `t`).
    state: from [`init`][dpgcd_jax.solvers.dp_iht.init] or the previous step.
    problem: from [`dpgcd_jax.make_problem`][].
    params: [`Params`][dpgcd_jax.solvers.dp_iht.Params] as arrays ([`run`][dpgcd_jax.solvers.dp_iht.run] validates and
      casts them).
    sparsity: `s`, static, `1 <= s <= p`.
    clipping_mode, selection: static; see [`run`][dpgcd_jax.solvers.dp_iht.run].

  Returns:
    `(State, Info)`.
  """
  p, n = problem.num_features, problem.num_examples
  M = problem_lib.coordinate_smoothness(problem)
  thresholds = clipping.coordinate_thresholds(params.clip, M, problem.curvature)
  g = kernels.clipped_gradient(problem, state.w, state.margins, thresholds, clipping_mode)
  eta = jnp.where(params.step_size > 0, params.step_size / M, jnp.nan)  # fail closed under tracing
  u = state.w - eta * g
  key_select, key_noise = jax.random.split(key)
  scores = jnp.sqrt(M) * jnp.abs(problem.penalty.prox(u, eta))
  # Both modes: the scores and the released values carry float roundings after the exact mean,
  # of public size (module docstring, "Floating point"), added to the sensitivities.
  size = jnp.sqrt(M) * (jnp.abs(state.w) + eta * (thresholds + jnp.abs(problem.l2 * state.w))
                        + jnp.abs(problem.penalty.prox(jnp.zeros_like(u), eta)))
  sensitivity = clipping.with_roundings(params.step_size * greedy.selection_sensitivity(thresholds, M, n),
                                        jnp.max(size), roundings=8)
  value_sensitivity = clipping.with_roundings(clipping.mean_sensitivity(thresholds, n),
                                              thresholds + jnp.abs(problem.l2 * state.w), roundings=2)
  if selection == "discrete_laplace":  # secure_noise (module docstring, "Floating point")
    support, ok = peeling.peel_secure(key_select, scores, sparsity, params.selection_noise, sensitivity)
    # sigma sqrt(s) rounded UP: the float product may land just below the real one, and the integer
    # scale floor(multiplier D) + 1 must exceed the exact sigma sqrt(s) D (found by the review)
    multiplier = params.update_noise * (math.sqrt(sparsity) * (1.0 + 2.0**-20))
    g_hat = UPDATE_SECURE.perturb(key_noise, g, multiplier, value_sensitivity)
  else:
    support, ok = peeling.peel(key_select, scores, sparsity, params.selection_noise, sensitivity), jnp.asarray(True)
    scale = clipping.noise_scale(params.update_noise, math.sqrt(sparsity) * value_sensitivity)
    g_hat = mechanisms.GaussianNoise().perturb(key_noise, g, scale)
  noisy = state.w - eta * g_hat  # post-processing of the released g_hat on the support
  w = jnp.where(peeling.indicator(support, p), problem.penalty.prox(noisy, eta), 0.0)
  if selection == "discrete_laplace":
    w = jnp.where(ok & jnp.all(jnp.isfinite(g_hat)), w, jnp.nan)  # a failed discrete draw: a NaN model
  return State(w, kernels.init_margins(problem, w)), Info(support)


UPDATE_SECURE = mechanisms.DiscreteGaussianNoise()


def iht_ledger(selection_noise: float, update_noise: float, steps: int, sparsity: int,
               selection: str = "gumbel") -> ledger_lib.Ledger:
  """The ledger of `steps` DP-IHT steps: `sparsity` peeling rounds and one Gaussian each
  (`selection="discrete_laplace"`, `secure_noise`: `PureDp(2 / b)` rounds and one
  `DiscreteGaussian(sigma)`)."""
  steps = _validate.check_int("steps", steps, low=0)
  _validate.check_positive("update_noise", update_noise, allow_zero=True, allow_inf=True)
  values = events.Gaussian if selection == "gumbel" else events.DiscreteGaussian
  return (peeling.ledger("support selection", selection_noise, sparsity, steps, selection)
          + ledger_lib.Ledger.of(("update", values(float(update_noise)), steps)))


def multipliers(scale: float, sparsity: int, selection_share: float) -> tuple[float, float]:
  """`(b, sigma)` at calibration scale `k`: a share of each step's zCDP for the selection.

  A step costs `rho = s (2 / b)^2 / 8 + 1 / (2 sigma^2)` (bounded range is `eps^2 / 8`-zCDP);
  `b = k sqrt(s / (2 share))` and `sigma = k / sqrt(2 (1 - share))` give the selection the
  share `share` of `rho = 1 / k^2`. Only the split uses zCDP; the ledger composes the exact
  events.
  """
  return (scale * math.sqrt(sparsity / (2.0 * selection_share)),
          scale / math.sqrt(2.0 * (1.0 - selection_share)))


def _check_problem(problem: problem_lib.Problem, sparsity: int, clipping_mode: str) -> int:
  guards.check_problem(problem)
  kernels.check_clipping_mode(problem, clipping_mode)
  return peeling.check_sparsity(sparsity, problem.num_features)


def run(
    problem: problem_lib.Problem,
    key: Array,
    params: Params,
    *,
    passes: int,
    sparsity: int,
    clipping_mode: str = "coordinate",
    store_objective: bool = False,
    selection: str = "gumbel",
) -> base.Result:
  """Runs `passes` DP-IHT steps (one step = one pass over the data) under jit.

  Args:
    problem: from [`dpgcd_jax.make_problem`][]; dense or sparse X, any penalty allowing 0.
    key: a JAX PRNG key (required; the same key gives the same result).
    params: [`Params`][dpgcd_jax.solvers.dp_iht.Params] (or use [`fit`][dpgcd_jax.solvers.dp_iht.fit] with a budget).
    passes: number of steps `T` (a runtime value: a new one does not recompile).
    sparsity: `s`, the number of coordinates kept, `1 <= s <= p` (static: a new value
      compiles a new program).
    clipping_mode: "coordinate" (per-coordinate clipping, as DP-GCD) or "derivative" (clip the
      scalar `phi'` of a GLM loss with bounded features; same sensitivity).
    store_objective: record the (NOT private) objective after every step (off by default).
    selection: "gumbel" (peeling by the exponential mechanism and Gaussian values, default) or
      "discrete_laplace" (secure peeling and discrete Gaussian values on the public grid,
      floating-point safe; module docstring).

  Returns:
    A [`dpgcd_jax.Result`][]: the final iterate (at most `s` non-zeros) and the trace
    (`coordinates` is None, `nonprivate_objective`).

  Examples:
    >>> import jax, dpgcd_jax as dg
    >>> from dpgcd_jax.solvers import dp_iht
    >>> X = jax.random.normal(jax.random.key(0), (50, 8))
    >>> problem = dg.make_problem(X, X[:, 0], "squared", feature_bound=5.0)
    >>> params = dp_iht.Params(step_size=0.5, clip=1.0, selection_noise=5.0, update_noise=5.0)
    >>> res = dp_iht.run(problem, jax.random.key(1), params, passes=10, sparsity=2)
    >>> res.w.shape, int((res.w != 0).sum()) <= 2
    ((8,), True)
  """
  sparsity = _check_problem(problem, sparsity, clipping_mode)
  _validate.check_choice("selection", selection, peeling.SELECTIONS)
  return base.run(SOLVER, problem, key, params, passes=passes, store_objective=store_objective,
                  sparsity=sparsity, clipping_mode=clipping_mode, selection=selection)


def private_plan(problem: problem_lib.Problem, *, passes: int, runs: int = 1, epsilon: float = 1.0,
                 sparsity: int, step_size: Any = 0.5, clip: Any = 1.0, selection_share: float = 0.5,
                 clipping_mode: str = "coordinate", secure_noise: bool = False) -> budget.Plan:
  """DP-IHT's privacy side ([`Plan`][dpgcd_jax.solvers.budget.Plan]): at scale `k`, the multipliers
  [`multipliers`][dpgcd_jax.solvers.dp_iht.multipliers] `(k, sparsity, selection_share)`, and each of
  the `passes` steps of each of the `runs` runs charged as its peeling and its values
  ([`iht_ledger`][dpgcd_jax.solvers.dp_iht.iht_ledger]; with `secure_noise`, its `(sparsity + 1) p`
  sampler draws, `Ledger.with_draws`; `epsilon` is not used)."""
  del epsilon
  if not isinstance(secure_noise, bool):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  selection = peeling.SELECTIONS[secure_noise]
  _validate.check_number("selection_share", selection_share, low=0.0, high=1.0, low_open=True,
                         high_open=True)
  sparsity = _check_problem(problem, sparsity, clipping_mode)
  share = float(selection_share)
  steps = base.total_steps(SOLVER, problem, passes) * runs
  # secure: each peeling round draws a discrete Laplace per coordinate, the values a discrete Gaussian per coordinate
  draws = (sparsity + 1) * problem.num_features if secure_noise else 0
  return budget.Plan(
      lambda scale: Params(step_size, clip, *multipliers(scale, sparsity, share)),
      lambda params: iht_ledger(params.selection_noise, params.update_noise, steps, sparsity,
                                                  selection).with_draws(draws, steps),
      dict(sparsity=sparsity, clipping_mode=clipping_mode, selection=selection))


SOLVER = base.Solver(Params, init, step, info=Info, noises=("selection_noise", "update_noise"),
                     private_plan=private_plan)


def fit(
    problem: problem_lib.Problem,
    key: Array,
    *,
    epsilon: float,
    delta: float,
    passes: int,
    sparsity: int,
    step_size: Any = 0.5,
    clip: Any = 1.0,
    selection_share: float = 0.5,
    bound_share: float = budget.DEFAULT_BOUND_SHARE,
    store_objective: bool = False,
    prior: Any = None,
    targets: Any = None,
    prelude: Any = None,
    clipping_mode: str = "coordinate",
    secure_noise: bool = False,
) -> base.Result:
  """(epsilon, delta)-DP iterative hard thresholding with `sparsity` non-zeros.

  The private path of [`dpgcd_jax.dp_gcd.fit`][]: a public smoothness (declared, from a
  declared feature bound, or from a feature bound released with a share `bound_share` of
  `epsilon`), then the smallest scale `k` such that `passes` steps at the multipliers
  [`multipliers`][dpgcd_jax.solvers.dp_iht.multipliers] `(k, sparsity, selection_share)`
  ([`iht_ledger`][dpgcd_jax.solvers.dp_iht.iht_ledger]), with `prior`
  and the bound, are `(epsilon, delta)`-DP. `result.privacy` lists what was spent.

  Args:
    problem: from [`dpgcd_jax.make_problem`][].
    key: a JAX PRNG key, or a batch of keys (leading axis): one independent private run per
      key, each spending the whole budget.
    epsilon: total budget, > 0.
    delta: in (0, 1).
    passes: steps `T` (one step is one pass over the data).
    sparsity: `s`, `1 <= s <= p` (public).
    step_size: `gamma` (see [`Params`][dpgcd_jax.solvers.dp_iht.Params]).
    clip: per-coordinate clipping (see [`Params`][dpgcd_jax.solvers.dp_iht.Params]); with features bounded by `B`,
      `C_j = clip B` bounds `|phi'|`.
    selection_share: the share of each step's zCDP spent on the peeling, in (0, 1).
    bound_share: the share of `epsilon` spent on the feature bound when one is needed.
    store_objective: also return `trace.nonprivate_objective` (NOT private).
    prior: a [`dpgcd_jax.privacy.Ledger`][] of releases already made from the same data
      toward this budget.
    targets: None, or (K, n) targets on the same features: one run per row, composed.
    prelude: None, or releases to make before the runs, in their program (a
      [`Prelude`][dpgcd_jax.solvers.base.Prelude], as in [`private_fit`][dpgcd_jax.solvers.budget.private_fit]: the
      estimators' bounds), whose `ledger` joins the one ledger.
    clipping_mode: see [`run`][dpgcd_jax.solvers.dp_iht.run].
    secure_noise: secure peeling and discrete Gaussian values on the public grid (module
      docstring, "Floating point") instead of float Gumbel and Gaussian noise.

  Returns:
    A [`dpgcd_jax.Result`][] whose `privacy` is the privacy report.
  """
  return budget.fit(SOLVER, problem, key, epsilon=epsilon, delta=delta, passes=passes, bound_share=bound_share,
                    store_objective=store_objective, prior=prior, targets=targets, prelude=prelude,
                    sparsity=sparsity, step_size=step_size, clip=clip, selection_share=selection_share,
                    clipping_mode=clipping_mode, secure_noise=secure_noise)
