"""Scale-free DP-GCD (`scale="per-step"`): sign scores select, a bound released per step sizes the update.

DP-GCD's scores with one public bound `B` (`scale="public"`) are `|(1/n) sum_i clip(phi'_i x_ij, cB)|`
over `sqrt(beta) B`: a feature whose values are 100x below `B` scores 100x too low and is never
selected. On a dense table whose columns have unequal scales no private release of `p`
per-feature scales from `n ~ p` records is precise enough to fix that
(`benchmarks/results/raw_dense.md`). This variant needs no scale for the selection and one per step
for the update. Iteration `t`, from `w^0 = 0` and the sticky bounds `B_j` "not yet released":

1. **Selection** on scale-free features `s_ij = sign(x_ij)` (for the public `fixed` columns, such as
   the intercept's, `x_ij / K_j` with their declared bound `K_j`):
   `g^s_j = (1/n) sum_i clip(phi'_i s_ij, -c, c)`, the private greedy rule on `g^s / sqrt(beta)`
   with the run's selection mechanism.
2. **Bound** of the selected `j_t`: the `QUANTILE`-quantile of `|x_ij|` over the records, released by
   AboveThreshold on the public grid ([`dpgcd_jax.privacy.bounds.bound_at_rank`][]) at
   `epsilon_b = min(1 / bound_noise, bounds.MAX_EPSILON)`, capped by the problem's public bound. A feature
   keeps the first bound released for it (sticky); the release is drawn at every step all the same, so
   the draws and the ledger do not depend on the data.
3. **Update** of `j_t` on its features clipped at `B_j`: `g_j = (1/n) sum_i clip(phi'_i clip(x_ij, B_j), cB_j)`
   with the update mechanism, and the step `gamma / M_j`, `M_j` released at `B_j`
   ([`dpgcd_jax.curvature`][], `curvature="released"`) or `beta B_j^2` (`"public"`). The margins add
   `delta w_j clip(x_ij, B_j)`: the model is `sum_j w_j clip(x_j, B_j)`, the one an estimator predicts with.

Privacy (replace-one, `n` public). Selection: every term is clipped at `c`, the mean is exact up to
one rounding ([`dpgcd_jax.clipping.clipped_mean`][]), so each normalized score moves by
`mean_sensitivity(c, n) / sqrt(beta)` (plus the rule's roundings, [`dpgcd_jax.solvers.greedy`][]): the
sensitivity of DP-GCD's scores under one bound, whose thresholds `cB` are normalized by `sqrt(beta) B`,
so the selection's event is unchanged. Bound: each record moves each count `#{i : |x_ij| <= b_k}` by at
most 1, so the release is `PureDp(epsilon_b)` (the proof in [`dpgcd_jax.privacy.bounds`][]), plus its
`GRID.size + 1` discrete draws; `j_t` is a released value (adaptive composition). Update and curvature:
`B_j` is released, so the thresholds `cB_j` and the moment's range `B_j^2` are public and the events are
DP-GCD's. The ledger of `T` iterations adds the entry "column bound", `T` times
([`dpgcd_jax.solvers.dp_gcd.iterations_plan`][]).

Measured (`benchmarks/results/raw_dense.md`, DPGCDClassifier, 4 seeds): raw Gaussian features of
scales `10^U[-1, 1]`, n = 4000, p = 5000, eps = 1: 0.679 with one bound, 0.778 scale-free; standardized
features 0.785 with one bound, 0.765 scale-free (the estimators choose by a private vote,
[`dpgcd_jax.privacy.scale_spread`][]). Dense only, GLM loss, no penalty: the scores and the penalty
would be on different scales.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import clipping
from dpgcd_jax import curvature as curvature_lib
from dpgcd_jax import kernels
from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import release_mechanisms
from dpgcd_jax import sparse
from dpgcd_jax.privacy import bounds as bounds_lib
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import _coordinate
from dpgcd_jax.solvers import greedy

Array = jax.Array
OPTIONS = ("public", "per-step")
QUANTILE = 0.9  # of a column's magnitudes: its released bound (the record statistic's quantile)
DRAWS = bounds_lib.GRID.size + 1  # one AboveThreshold release: a draw per grid point and one for its threshold


def check(problem: problem_lib.Problem, scale: Any, clipping_mode: str) -> str:
  """`scale` validated against the problem (ValueErrors naming it)."""
  if not (isinstance(scale, str) and scale in OPTIONS):
    raise ValueError(f"Expected scale in {OPTIONS}, got scale={scale!r}.")
  if scale == "public":
    return scale
  public_bound = problem.smoothness_source is problem_lib.PublicSmoothness.FEATURE_BOUND
  no_penalty = isinstance(problem.penalty, penalties.Zero) and float(problem.l2) == 0.0
  if isinstance(problem.XT, sparse.SparseColumns) or not problem.loss.is_glm or not public_bound or not no_penalty:
    raise ValueError(f"Expected a dense problem with a GLM loss, a public feature bound (the cap of the released "
                     f"bounds) and no penalty with scale='per-step', got loss {problem.loss.name!r}, "
                     f"{'sparse' if isinstance(problem.XT, sparse.SparseColumns) else 'dense'} features, "
                     f"smoothness_source={problem.smoothness_source!r}, penalty={problem.penalty!r}, "
                     f"l2={problem.l2!r}; use scale='public'.")
  if clipping_mode != "coordinate":
    raise ValueError(f"Expected clipping_mode='coordinate' with scale='per-step', got clipping_mode={clipping_mode!r}.")
  return scale


def dense(problem: problem_lib.Problem) -> Array:
  """`problem.XT`, dense (`check`)."""
  return cast(Array, problem.XT)


def caps(problem: problem_lib.Problem) -> Array:
  """(p,) the problem's public bounds `sqrt(M_j / beta)`: the caps of the released ones."""
  return jnp.sqrt(problem.smoothness / jnp.asarray(problem.curvature, problem.smoothness.dtype))


def start(problem: problem_lib.Problem, *, scale: str = "public", fixed: tuple[int, ...] = (),
          **options: Any) -> _coordinate.State:
  """DP-GCD's initial state for a run with these options: with `scale="per-step"`, the sticky bounds
  (the public cap of the `fixed` columns, -1, not yet released, for the others)."""
  del options
  state = _coordinate.init(problem)
  if scale != "per-step":
    return state
  released = jnp.full(problem.num_features, -1.0, problem.XT.dtype)
  return state._replace(bounds=jnp.where(fixed_mask(problem, fixed), caps(problem), released))


def fixed_mask(problem: problem_lib.Problem, fixed: tuple[int, ...]) -> Array:
  """(p,) True at the public indices `fixed`."""
  return jnp.isin(jnp.arange(problem.num_features), jnp.asarray(fixed, jnp.int32))


def bound_epsilon(bound_noise: Any, xp: Any = jnp) -> Any:
  """The epsilon of one bound release, `min(1 / bound_noise, MAX_EPSILON)`. The run's (`xp=jnp`, in the
  params' dtype) is scaled by `1 - 2^-20`: never above the ledger's (`xp=np`, float64), whatever the
  roundings of `1 / bound_noise` (relative error `2^-24` each in float32)."""
  if xp is np:
    return min(1.0 / float(bound_noise), bounds_lib.MAX_EPSILON)
  return jnp.minimum(1.0 / bound_noise * (1.0 - 2.0**-20), bounds_lib.MAX_EPSILON)


def release_ledger(bound_noise: Any, steps: int) -> ledger_lib.Ledger:
  """The ledger of `steps` bound releases: "column bound", `PureDp(epsilon_b)` (AboveThreshold,
  [`dpgcd_jax.privacy.bounds`][]), and their `DRAWS` discrete draws each at that epsilon."""
  epsilon = bound_epsilon(bound_noise, np)
  event = release_mechanisms.AboveThreshold().event(epsilon)
  return ledger_lib.Ledger.of(("column bound", event, steps)).with_draws(DRAWS, steps, epsilon)


def selection_problem(problem: problem_lib.Problem, fixed: Array | None) -> problem_lib.Problem:
  """The problem of the selection: features `sign(x_ij)` (`x_ij / K_j` for the `fixed` columns), all
  bounded by 1, smoothness `beta`, no penalty term (module docstring, step 1)."""
  XT = jnp.sign(dense(problem))
  if fixed is not None:
    XT = jnp.where(fixed[:, None], dense(problem) / caps(problem)[:, None], XT)
  beta = jnp.full(problem.num_features, problem.curvature, problem.smoothness.dtype)
  return dataclasses.replace(problem, XT=XT, smoothness=beta, factors=None)


def column_bound(key: Array, problem: problem_lib.Problem, bounds: Array, j: Array, bound_noise: Array) -> Array:
  """`B_j` of the selected `j`: its sticky value, or the one released now (module docstring, step 2;
  released at every step). NaN when the release fails (an invalid `bound_noise`): fail closed."""
  epsilon = bound_epsilon(bound_noise)
  magnitudes = jnp.abs(jax.lax.dynamic_index_in_dim(dense(problem), j, axis=0, keepdims=False))
  n = problem.mean_count
  rank = jnp.ceil(QUANTILE * jnp.asarray(n, jnp.float32)).astype(jnp.int32)
  released = bounds_lib.bound_at_rank(key, magnitudes, epsilon, rank, padding=problem.num_examples - n)
  fresh = jnp.minimum(released.astype(bounds.dtype), caps(problem)[j])
  return jnp.where(bounds[j] > 0, bounds[j], fresh)


def column_gradient(problem: problem_lib.Problem, margins: Array, j: Array, bound: Array, clip: Array) -> Array:
  """`(1/n) sum_i clip(phi'_i clip(x_ij, B_j), -c B_j, c B_j)`, exact up to one rounding (step 3)."""
  x = jnp.clip(jax.lax.dynamic_index_in_dim(dense(problem), j, axis=0, keepdims=False), -bound, bound)
  dphi = kernels.clipped_derivatives(problem, margins, clip * bound, "coordinate")
  threshold = jnp.reshape(clip * bound, (1, 1))
  return clipping.clipped_mean((dphi * x)[None, :], threshold, count=problem.mean_count)[0]


def smoothness_at(privatize: Any, key: Array, problem: problem_lib.Problem, j: Array, bound: Array,
                  curvature: str, multiplier: Array) -> Array:
  """`M_j` at the bound `B_j`: released (`curvature="released"`) or `beta B_j^2`."""
  beta = jnp.asarray(problem.curvature, bound.dtype)
  if curvature == "public":
    return beta * bound**2
  moment = curvature_lib.shifted_moment(problem, j, bound**2)
  return curvature_lib.smoothness_of_moment(privatize, key, moment, bound**2, beta, problem.l2, problem.mean_count,
                                            multiplier)


def set_coordinate(problem: problem_lib.Problem, state: _coordinate.State, j: Array, new_wj: Array,
                   bound: Array) -> _coordinate.State:
  """`w_j <- new_wj`, the margins by `delta w_j clip(x_ij, B_j)` and the sticky `B_j` recorded."""
  x = jnp.clip(jax.lax.dynamic_index_in_dim(dense(problem), j, axis=0, keepdims=False), -bound, bound)
  at_j = jnp.arange(state.w.shape[0]) == j  # no scatter: vmaps well
  margins, bounds = cast(Array, state.margins), cast(Array, state.bounds)  # a GLM's, a per-step run's
  return state._replace(w=jnp.where(at_j, new_wj, state.w), margins=margins + (new_wj - state.w[j]) * x,
                        bounds=jnp.where(at_j, bound, bounds))


def step(key: Array, state: _coordinate.State, problem: problem_lib.Problem, params: Any, *, selection: Any,
         update: Any, rule: str, curvature: str, fixed: tuple[int, ...]) -> tuple[_coordinate.State, Array]:
  """One scale-free DP-GCD iteration (module docstring): the new state and the selected coordinate.
  `params`: DP-GCD's `Params` with a scalar `clip` (`c`) and `bound_noise`; `fixed`: the public indices of
  the columns that keep their declared bound (static)."""
  if jnp.ndim(params.clip) != 0:
    raise ValueError(f"Expected a scalar clip with scale='per-step', got clip of shape {jnp.shape(params.clip)}.")
  p = problem.num_features
  chooser = selection_problem(problem, fixed_mask(problem, fixed) if fixed else None)
  ones = chooser.smoothness  # beta for every scale-free feature
  thresholds = clipping.coordinate_thresholds(params.clip, ones, problem.curvature)  # c
  mask = problem.column_mask
  if mask is not None:  # padded features: a finite threshold (as dp_gcd.step)
    thresholds = jnp.where(mask, thresholds, 1.0)
  g = kernels.clipped_gradient(chooser, state.w, state.margins, thresholds)
  zero = jnp.zeros_like(state.w)  # no penalty, no l2 (`check`): no public part of the gradient
  key_select, key_update = jax.random.split(key)
  j, ok = greedy.select_checked(key_select, g, state.w, ones, chooser.penalty, params.selection_noise,
                                greedy.score_sensitivity(rule, thresholds, ones, problem.mean_count, state.w, zero,
                                                         chooser.penalty, mask),
                                selection=selection, rule=rule, column_mask=mask)
  margins = cast(Array, state.margins)  # a GLM's (`check`)
  bound = column_bound(jax.random.fold_in(key, 3), problem, cast(Array, state.bounds), j, params.bound_noise)
  privatize = lambda k, value, multiplier, sens: greedy.privatize(k, value, multiplier, sens, update=update)
  M_j = smoothness_at(privatize, jax.random.fold_in(key, 2), problem, j, bound, curvature, params.curvature_noise)
  at_j = jnp.arange(p) == j
  g_j = column_gradient(problem, margins, j, bound, params.clip)
  new_wj = greedy.private_update(key_update, j, g_j, state.w, jnp.where(at_j, M_j, ones),
                                 jnp.where(at_j, params.clip * bound, thresholds), problem.mean_count, chooser.penalty,
                                 params.step_size, params.update_noise, ok, public_gradient=zero, update=update)
  return set_coordinate(problem, state, j, new_wj, bound), j
