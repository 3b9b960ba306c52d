"""Privately released coordinate curvature: the step `1 / M_j` of the selected coordinate.

For a GLM loss `phi(<x, w>, y)` with `phi'' <= beta` the coordinate smoothness is
`M_j = beta m_j + l2` with `m_j = (1/n) sum_i x_ij^2`, and greedy coordinate descent's
theory step is `1 / M_j`. A public feature bound `|x_ij| <= B_j` only gives
`m_j <= B_j^2`: for a binary word of frequency `q` that is `1 / q` too large, so every step
is `1 / q` too short. DP-GCD therefore releases, at each iteration, the second moment of the
coordinate it has just selected (and only that one), and steps by the released value:

$$
\\tilde m_{j_t} = \\Big[\\frac1n \\sum_i \\big(x_{ij_t}^2 - B_{j_t}^2 / 2\\big) + \\xi_t\\Big] + \\frac{B_{j_t}^2}{2},
\\qquad
\\hat M_{j_t} = \\beta \\, \\mathrm{clip}\\big(\\tilde m_{j_t} + 3 \\sigma_{j_t},\\ \\sigma_{j_t},\\ B_{j_t}^2\\big)
  + \\lambda_2 ,
$$

with `xi_t` the update mechanism's noise (Gaussian, Laplace or their discrete versions) at
the multiplier `curvature_noise` times the sensitivity `Delta^M_j` below, and `sigma_j` that
noise's scale (multiplier times sensitivity).

Sensitivity (replace-one, `n` public). The features are clipped to the public bounds, so
`x_ij^2 - B_j^2 / 2` lies in `[-B_j^2 / 2, B_j^2 / 2]`: the mean of these values, computed by
[`dpgcd_jax.clipping.clipped_mean`][] (exact fixed-point sum, one rounding), moves by at most
`Delta^M_j = mean_sensitivity(B_j^2 / 2, n)` (`B_j^2 / n` plus the rounding term) when one
record is replaced. The noise is added to that shifted mean itself; the public `B_j^2 / 2` is
added to the noisy value (post-processing). Adding it before the noise would put one more
float rounding, of up to an ulp of `B_j^2`, inside the query: measured 1.0125 x the bound at
n = 10^6 (tested). The index `j_t` is a
release of the same iteration (the selection), so the query is chosen adaptively from
released values only: one curvature release per iteration is the update mechanism at
multiplier `curvature_noise`, composed over the `T` iterations in the run's ledger (entry
"curvature", [`dpgcd_jax.solvers.dp_gcd.fit`][]).

The shift and the clip are post-processing. The shift by `MARGIN = 3` noise scales makes the
released moment an upper confidence bound: overestimating `M_j` only shortens the step, while
underestimating it by a factor `r` makes the step `r` times the theory step, which overshoots
(measured on a dense 4-feature regression, n = 300, eps = 5: R^2 from -1.9 to 0.93 over keys
without the shift, 0.85 to 0.99 with it, `T` from 5 to 50). `B_j^2` is the public upper bound
(the release never makes a step shorter than the public one), and the floor `sigma_j` (the
noise scale, a public quantity) bounds every step by `1 / (beta sigma_j)`.

Why lazily (one release per iteration) rather than all `p` moments at once: the `p` moments
form a vector of l2 sensitivity `sqrt(p) B^2 / n`, so releasing all of them at one budget
costs a noise `sqrt(p / T)` times larger per moment than `T` releases of one moment each
(`T` = 10-20 iterations, `p` in the thousands: 15-30x), and DP-GCD only ever steps on the
`T` coordinates it selects. A shared scale (one number for every feature) cannot suit the
intercept and rare words together. Measured: `benchmarks/results/high_dim.md`.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import sparse

Array = jax.Array
OPTIONS = ("public", "released")
MARGIN = 3.0  # the upper-confidence shift of the released moment, in units of its noise scale


def column_squares(problem: problem_lib.Problem, j: Array) -> Array:
  """`x_ij^2` of the (clipped) feature `j` for every stored record, (N,), padded records 0."""
  XT = problem.XT
  if isinstance(XT, sparse.SparseColumns):
    rows, vals = XT.column(j)
    return jnp.zeros(XT.shape[1], XT.dtype).at[rows].add(vals * vals)
  return jnp.square(jax.lax.dynamic_index_in_dim(XT, j, axis=0, keepdims=False))


def moment_sensitivity(bound_sq: Array, num_examples: int | Array) -> Array:
  """`Delta^M_j`: the replace-one sensitivity of the computed second moment (module docstring)."""
  return clipping.mean_sensitivity(bound_sq / 2, num_examples)


def shifted_moment(problem: problem_lib.Problem, j: Array, bound_sq: Array) -> Array:
  """`(1/n) sum_i (min(x_ij^2, B_j^2) - B_j^2 / 2)` over the true records: the exact clipped mean the
  release perturbs (module docstring); the second moment is this plus `B_j^2 / 2`."""
  squares = jnp.minimum(column_squares(problem, j), bound_sq)  # a no-op on features clipped at the bound
  half = bound_sq / 2
  true = jnp.arange(squares.shape[0]) < problem.mean_count
  shifted = jnp.where(true, squares - half, 0.0)
  return clipping.clipped_mean(shifted[None, :], half[None], count=problem.mean_count)[0]


def released_smoothness(privatize: Any, key: Array, problem: problem_lib.Problem, j: Array, multiplier: Array) -> Array:
  """`hat M_j` (module docstring): the released curvature of the selected coordinate `j`.

  `privatize(key, value, multiplier, sensitivity)` is the run's update mechanism
  ([`dpgcd_jax.solvers.greedy.privatize`][] with its `update`); NaN (a failed discrete draw, an
  invalid multiplier) propagates: the step is then NaN (fail closed).
  """
  beta = jnp.asarray(problem.curvature, problem.smoothness.dtype)
  bound_sq = problem.smoothness[j] / beta  # M_j = beta B_j^2: the public bound's square
  return smoothness_of_moment(privatize, key, shifted_moment(problem, j, bound_sq), bound_sq, beta, problem.l2,
                              problem.mean_count, multiplier)


def smoothness_of_moment(privatize: Any, key: Array, moment: Array, bound_sq: Array, beta: Array, l2: Array,
                         num_examples: int | Array, multiplier: Array) -> Array:
  """`hat M_j` from the exact shifted moment `(1/n) sum_i (x_ij^2 - B_j^2 / 2)` (clipped on the
  public grid; [`shifted_moment`][dpgcd_jax.curvature.shifted_moment] in memory, the streamed
  fit's exact totals over its chunks): the release, the upper confidence shift and the clip."""
  sensitivity = moment_sensitivity(bound_sq, num_examples)
  noisy = privatize(key, moment, multiplier, sensitivity) + bound_sq / 2
  scale = multiplier * sensitivity
  return beta * jnp.clip(noisy + MARGIN * scale, jnp.minimum(scale, bound_sq), bound_sq) + l2


def check(problem: problem_lib.Problem, curvature: Any) -> str:
  """`curvature` validated against the problem: "released" needs a GLM loss with a public
  feature bound (the bound on `x_ij^2` the sensitivity uses)."""
  if not (isinstance(curvature, str) and curvature in OPTIONS):
    raise ValueError(f"Expected curvature in {OPTIONS}, got curvature={curvature!r}.")
  if curvature == "released" and not (problem.loss.is_glm
                                   and problem.smoothness_source is problem_lib.PublicSmoothness.FEATURE_BOUND):
    raise ValueError(f"Expected a GLM loss with a public feature bound (make_problem(..., feature_bound=B)) "
                     f"with curvature='released', got loss {problem.loss.name!r} with "
                     f"smoothness_source={problem.smoothness_source!r}; use curvature='public'.")
  return curvature


def check_noise(params: Any, curvature: str) -> None:
  """`curvature="released"` needs `params.curvature_noise` (a ValueError naming it), and warns
  (`PrivacyLeakWarning`) when it is 0 while the other multipliers add noise: the moments
  would be released exactly. `params`: DP-GCD's `Params` ([`dpgcd_jax.solvers.dp_gcd.run`][]),
  read by position (the selection, update and curvature multipliers are its fields 2 to 4):
  another solver's params, which `base.run` refuses by name afterwards, may reach here."""
  if curvature != "released":
    return
  noise = params[4] if len(params) > 4 else None
  if noise is None:
    raise ValueError("Expected params.curvature_noise (a multiplier >= 0) with curvature='released', "
                     "got curvature_noise=None.")
  others = params[2:4]
  if all(_validate.is_concrete(v) for v in (noise, *others)) and np.all(np.asarray(noise) == 0) and any(
      np.any(np.asarray(v) > 0) for v in others):
    warnings.warn("run with curvature='released' and curvature_noise=0 while the selection or update adds "
                  "noise: the selected features' second moments are released exactly (not private).",
                  _validate.PrivacyLeakWarning, stacklevel=3)  # the caller of dp_gcd.run
