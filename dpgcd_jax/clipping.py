"""Per-example clipping and the sensitivities it buys (shared by every solver and transform).

Coordinate-wise clipping (DP-GCD, DP-CD): each example's coordinate gradient is clipped
before averaging, `c_ij = clip(grad_j l(w; d_i), -C_j, C_j)`, `g_j = (1/n) sum_i c_ij`.
Replacing one record changes `g_j` by at most `Delta_j = 2 C_j / n`.

Units of `clip`. A scalar `clip = c` sets `C_j = c sqrt(M_j / beta)`, with `M_j` the
coordinate smoothness and `beta` the loss's curvature bound (`sup phi''`; 1 when unknown).
For a GLM loss with features bounded by `B_j` (`M_j = beta B_j^2`), `C_j = c B_j`: the
per-example gradient is `phi'(z, y) x_ij`, so `c` is a bound on `|phi'|` and
`c >= sup |phi'|` clips nothing (logistic: `c = 1`; Huber(delta): `c = delta`; squared
loss: the residual `|<x, w> - y|` is clipped at `c`). The rule keeps the DP-CD property
that `Delta_j / sqrt(M_j)` is the same for every coordinate, and does not depend on the
dimension. An explicit (p,) vector of thresholds is used as given. `c = inf` disables
clipping (and makes the sensitivity infinite: only noise-free runs make sense then).

Fail closed: a non-finite per-example gradient (a loss that overflows on an extreme record)
is replaced by 0 BEFORE clipping ([`finite_or_zero`][dpgcd_jax.clipping.finite_or_zero]), so such a record is
indistinguishable from one with a zero gradient and the sensitivity bound holds for every
input. Why before: `jnp.clip` maps `+-inf` to `+-C_j` but keeps a NaN, and one NaN term
would make the sum, hence the release, depend on the record without bound.

GLM losses (the dense kernel of [`dpgcd_jax.kernels.clipped_gradient`][], the sparse ones of
[`dpgcd_jax.sparse`][]): the guard is applied to the length-`n` derivative `phi'`, not to
the `(p, n)` products `phi'_i x_ij`, where it costs a pass over the products (and, under
`jax.vmap` over `K` configurations, a `K x block x n` temporary). Same
guarantee: with `phi'_i` finite (guarded) and `x_ij` finite (validated by
`make_problem`), the float product is never NaN (a NaN needs a NaN factor or `0 x inf`);
it is `+-inf` only when the real product exceeds the largest float, and then clips to
`+-C_j`. So every clipped term is in `[-C_j, C_j]`, the bound the
sensitivity needs. Values: a non-finite `phi'_i` zeroes the whole per-example gradient,
exactly as the guard on the products did (`+-inf x x_ij` is `+-inf` or, for `x_ij = 0`,
NaN: 0 either way); a finite one gives bit-for-bit the old terms, except a product that
overflows, which was 0 and is now `+-C_j` (its real clipped value).

Per-example l2 clipping (DP-SGD): `c_i = g_i min(1, C / ||g_i||_2)`, and 0 for a row whose
norm is not finite (a NaN or infinite entry, or an overflowing norm); replacing one record
changes the sum of clipped gradients by at most `2 C`.

Sums that meet the sensitivity in floating point ([`clipped_mean`][dpgcd_jax.clipping.clipped_mean]). A float32 sum of
`n` clipped terms is not the real sum: its rounding depends on every term, and at
`n = 6e6` two neighbours' float32 means differed by `1.073 x 2C/n`. The clipped means are
therefore computed EXACTLY, on a public fixed-point grid ([`dpgcd_jax.exact_sums`][]: the
grid `h_j`, a power of two with `C_j / h_j < 2^(k+1)`; the exact integer sum `Q_j`; one
rounding of `Q_j h_j / n`, relative `r`). What clipping contributes is the map applied to each
record, with public parameters, before any sum ([`quantize`][dpgcd_jax.clipping.quantize]):
`q_ij = trunc(clip(g_ij, -C_j, C_j) / h_j)`, an integer with `|q_ij h_j| <= |clip(g_ij)| <= C_j`
(truncation toward zero never increases a magnitude; the division by a power of two is a
multiplication by `2^(k+1-e_j)`, exact or flushed toward 0). Replacing one record changes
`sum_i q_ij h_j` by at most `2 C_j`: the real-arithmetic argument, now about integers.

What the ledger's sensitivity is, and why it is FOLDED, not carried. The value handed to
the mechanism is the rounded `g_j`; between neighbours it moves by at most `2 C_j / n + 2 r
C_j` (`r`: [`rounding_bound`][dpgcd_jax.exact_sums.rounding_bound]).
[`mean_sensitivity`][dpgcd_jax.clipping.mean_sensitivity] returns this bound, times `1 + 8 eps` (`eps` the dtype's
machine epsilon) so that its own float evaluation (at most five roundings, `n` itself
rounding above `2^24`) never falls below it: `Delta_j = (2 C_j / n + 2 r C_j)(1 + 8 eps)`.
Every noise scale (`multiplier x Delta`) uses it, so the ledger, which counts in units of
`Delta`, is unchanged. Relative cost on the noise: `n r` (float32: 6e-5 at n = 1000,
0.6% at 1e5, 6% at 1e6, 36% at 6e6; float64: none measurable). Carrying `g` in higher precision
until the noise is added would avoid the cost, but every later float32 operation before the noise
(adding the public `l2 w_j`, the score `g_j / sqrt(M_j)` of the selection) rounds again by a
relative `u`: carrying only pays if the whole selection and update run in higher precision. That
arithmetic after the data-dependent sum (public offsets, scores, the noise draw and its addition)
is treated, like every floating-point DP implementation without snapping, as the mechanism's own
arithmetic; the secure-noise option is what closes that gap (Mironov 2012).

DP-SGD's per-record map ([`quantize_l2`][dpgcd_jax.clipping.quantize_l2]; the grid and the exact
float64 sum that needs no fold: [`dpgcd_jax.exact_sums`][], "DP-SGD's sums"): `q_i = trunc(g_i m_i)`
with `m_i = min(1, C' / ||g_i||_2) / h`, the norm and factor in float64,
`C' = C` [`l2_shrink`][dpgcd_jax.clipping.l2_shrink] `(dtype, p)` (`1 - 2e-6` for float32)
covering every rounding before the truncation, so `||q_i h||_2 <= C` in real arithmetic:
each record moves the sum by at most `C` (add / remove), `2 C` (replace-one), whatever
the ledger's relation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import exact_sums

Array = jax.Array


def coordinate_thresholds(clip: Array, smoothness: Array, curvature: float = 1.0) -> Array:
  """Per-coordinate thresholds `C_j`: `clip sqrt(M_j / beta)` for a scalar, else `clip`."""
  clip = jnp.asarray(clip, smoothness.dtype)
  if clip.ndim == 0:
    return clip * jnp.sqrt(smoothness / curvature)
  return jnp.broadcast_to(clip, smoothness.shape)


def finite_or_zero(x: Array) -> Array:
  """`x` with every NaN or infinite entry replaced by 0 (fail closed before clipping)."""
  return jnp.where(jnp.isfinite(x), x, jnp.zeros_like(x))


def clip_coordinates(per_example_grads: Array, thresholds: Array) -> Array:
  """Clips per-example gradients coordinate-wise to [-C_j, C_j] (`thresholds` broadcasts).

  `+-inf` becomes `+-C_j`; the input must hold no NaN: pass it through
  [`finite_or_zero`][dpgcd_jax.clipping.finite_or_zero] first (or, for GLM products, the derivative; module docstring).
  """
  thresholds = jnp.broadcast_to(thresholds, per_example_grads.shape)
  return jnp.clip(per_example_grads, -thresholds, thresholds)


def when_finite(thresholds: Array, exact: Callable[..., Any], plain: Callable[..., Any], *operands: Any) -> Any:
  """`exact(thresholds, *operands)` when every threshold is finite, else `plain(...)`.

  `jax.lax.cond`, except under `jax.vmap`: a cond whose predicate is batched (a vmap over
  `clip`) runs BOTH branches and selects (measured: K = 16 clipped passes then cost 70x one
  pass). Here a batch whose thresholds are all finite (every private run) runs the batched
  `exact` only, and a batch with some infinite thresholds runs both and picks per member;
  nested vmaps apply the same rule level by level. `exact` and `plain` must read traced
  arrays only through their arguments (a closure over a value that a vmap batches is an error).
  """

  @jax.custom_batching.custom_vmap
  def branch(thresholds, *operands):
    return jax.lax.cond(jnp.all(jnp.isfinite(thresholds)), exact, plain, thresholds, *operands)

  @branch.def_vmap
  def batched_branch(axis_size, in_batched, thresholds, *operands):
    # One in_axes entry per operand: a pytree operand (sparse columns) has a pytree of flags.
    axes = tuple(jax.tree.map(lambda b: 0 if b else None, flags) for flags in in_batched)
    batched_exact = jax.vmap(exact, in_axes=axes, axis_size=axis_size)
    batched_plain = jax.vmap(plain, in_axes=axes, axis_size=axis_size)
    if not in_batched[0]:  # one predicate for the whole batch
      return when_finite(thresholds, batched_exact, batched_plain, *operands), True

    def mixed(thresholds, *operands):
      finite = jnp.all(jnp.isfinite(thresholds.reshape(axis_size, -1)), axis=1)
      pick = lambda a, b: jnp.where(finite.reshape((axis_size,) + (1,) * (a.ndim - 1)), a, b)
      return jax.tree.map(pick, batched_exact(thresholds, *operands), batched_plain(thresholds, *operands))

    return when_finite(thresholds, batched_exact, mixed, *operands), True

  return branch(thresholds, *operands)


def clip_l2(per_example_grads: Array, clip: Array) -> Array:
  """Rescales each row of an (n, p) matrix to l2 norm at most `clip` (non-finite rows -> 0)."""
  norms = jnp.linalg.norm(per_example_grads, axis=-1, keepdims=True)
  factor = jnp.minimum(1.0, clip / jnp.maximum(norms, jnp.finfo(norms.dtype).tiny))
  # A row with a NaN or infinite entry (or whose norm overflows) has a non-finite norm: 0.
  return jnp.where(jnp.isfinite(norms), per_example_grads * factor, 0.0)


def mean_sensitivity(thresholds: Array, num_examples: int | Array) -> Array:
  """Replace-one sensitivity of the computed mean of values clipped to [-C, C].

  `(2 C / n + 2 r C)(1 + 8 eps)`: the real-arithmetic `2 C / n` plus the final rounding of
  [`clipped_mean`][dpgcd_jax.clipping.clipped_mean] on both neighbours (see the module docstring), evaluated so that the
  float result is never below the bound. `r` and `eps` are those of the thresholds' dtype.
  """
  thresholds = jnp.asarray(thresholds)
  dtype = thresholds.dtype if jnp.issubdtype(thresholds.dtype, jnp.floating) else jnp.result_type(float)
  r = exact_sums.rounding_bound(dtype)
  margin = 1.0 + 8.0 * float(np.finfo(dtype).eps)
  return (2.0 * thresholds / num_examples + (2.0 * r) * thresholds) * margin


def with_roundings(sensitivity: Array, size: Array, *, roundings: int) -> Array:
  """`sensitivity + roundings eps size`: a sensitivity widened by the rounding of up to
  `roundings` float operations on either neighbour (each at most `u size`, `u = eps / 2` the
  unit roundoff, so `2 roundings u size` in all, doubled for margin), on values of magnitude at
  most the PUBLIC `size`. The secure (grid) mechanisms of DP-FW, DP-IHT and two-stage use it
  for the arithmetic between the exact clipped mean and the released score or value."""
  eps = jnp.finfo(jnp.result_type(sensitivity, jnp.float32)).eps
  return sensitivity + roundings * eps * size


# ----------------------------------------------------------------------------------------
# Per-record maps onto the grid of `dpgcd_jax.exact_sums`, and the clipped mean.
# ----------------------------------------------------------------------------------------


def _int_dtype(dtype: Any) -> Any:
  return jnp.int64 if np.dtype(dtype) == np.float64 else jnp.int32


def quantize(per_example_grads: Array, thresholds: Array, scale: Array) -> Array:
  """`trunc(clip(g, -C, C) * scale)` as integers (`scale = 1 / h` broadcasts like `C`; `g` without NaN)."""
  clipped = clip_coordinates(per_example_grads, thresholds)
  return (clipped * scale).astype(_int_dtype(per_example_grads.dtype))


def clipped_mean(per_example_grads: Array, thresholds: Array, axis: int = -1,
                 count: int | Array | None = None) -> Array:
  """`mean(clip(g, -C, C))` along `axis`, exact up to one rounding (sensitivity: `mean_sensitivity`).

  `count`: the divisor (default: the length of `axis`); a padded problem passes its true `n`
  (its padded terms are exact zeros).

  `thresholds` broadcasts against `per_example_grads` with `axis` reduced (e.g. (p, 1)
  for a (p, n) array and `axis=1`). Non-finite entries count as 0
  ([`finite_or_zero`][dpgcd_jax.clipping.finite_or_zero]).
  Any infinite threshold (clipping off): a plain float mean.
  """
  g = per_example_grads
  if jnp.dtype(g.dtype).itemsize < 4:
    raise TypeError(f"Expected float32 or float64 values for an exact clipped mean, got dtype {g.dtype}: "
                    f"half precision overflows the fixed-point grid (promote with _validate.compute_dtype).")
  n = g.shape[axis]
  divisor = n if count is None else count
  thresholds = jnp.broadcast_to(jnp.asarray(thresholds, g.dtype), jnp.broadcast_shapes(
      jnp.shape(thresholds), jnp.shape(jnp.sum(g, axis=axis, keepdims=True))))

  def exact(thresholds, g, divisor):
    bits = exact_sums.grid_bits(g.dtype, n)
    scale = exact_sums.grid_scale(thresholds, bits)
    total = exact_sums.exact_sum(quantize(g, thresholds, scale), axis=axis)
    return exact_sums.exact_mean(total, jnp.squeeze(scale, axis=axis), divisor, g.dtype)

  def plain(thresholds, g, divisor):
    return (jnp.sum(clip_coordinates(g, thresholds), axis=axis) / divisor).astype(g.dtype)

  return when_finite(thresholds, exact, plain, finite_or_zero(g), jnp.asarray(divisor))


# ----------------------------------------------------------------------------------------
# Noise scales: never below the product of multiplier and sensitivity that the ledger charges.
# ----------------------------------------------------------------------------------------


def rounded_up(noise: Any, dtype: Any) -> Any:
  """A known noise multiplier in `dtype`, rounded toward +inf: the run's noise is never below the
  one the ledger accounts (round-to-nearest could lose half an ulp, ~6e-8 relative in float32).
  A traced value is cast as it is (its caller's arithmetic)."""
  if not _validate.is_concrete(noise):
    return noise
  exact = np.asarray(noise, np.float64)
  cast = exact.astype(dtype)
  return np.where(cast.astype(np.float64) < exact, np.nextafter(cast, np.asarray(np.inf, dtype)), cast)


def scale_above(multiplier: Any, sensitivity: Any, dtype: Any) -> Any:
  """`multiplier * sensitivity` formed on the host and rounded toward +inf in `dtype` (known values):
  never below the real product that the ledger charges (a float32 product or cast rounds to
  nearest). Fails closed: a negative or NaN factor gives NaN; a zero multiplier gives 0."""
  m, s = float(multiplier), float(sensitivity)
  if not (m >= 0 and s >= 0):
    return np.asarray(np.nan, dtype)
  return rounded_up(math.nextafter(m * s, math.inf) if m > 0 else 0.0, dtype)


SENSITIVITY_ROUNDINGS = 32
"""The most float roundings any in-program sensitivity formula takes from its public inputs
(`C_j`, `n`, `M_j`, `w`) to its value, along any path: the built-in ones take at most about 12
(e.g. `greedy.score_sensitivity`: `mean_sensitivity` 5, `/ sqrt(M)` 2, the widening 5)."""


def noise_scale(multiplier: Array, sensitivity: Array) -> Array:
  """`multiplier * sensitivity` in the program, rounded up past its float arithmetic; fails closed.

  The ledger charges `m s`: `m` the multiplier it reads, `s` the REAL value of the sensitivity
  formula on its public (float) inputs. In the program, `multiplier >= m` (cast rounding up,
  [`rounded_up`][dpgcd_jax.clipping.rounded_up]) and `sensitivity` is the formula evaluated in
  floats: at most `SENSITIVITY_ROUNDINGS` roundings of nonnegative terms (`+`, `*`, `/`,
  `sqrt`, `max`, `abs`; no cancellation), each relative `1 +- u`, `u = eps / 2` (`eps` of the
  least precise input dtype), so `sensitivity >= s (1 - u)^32`. Both are cast up to a common
  dtype of at least float32 (exact) and multiplied; the product rounds to nearest once more. The
  scale drawn is `next_up(fl(fl(multiplier sensitivity) (1 + 64 eps)))`: `next_up` of a
  round-to-nearest result is above the real value it rounded, so the scale is at least
  `m s (1 - u)^33 (1 + 64 eps) >= m s` (`(1 - eps / 2)^33 >= 1 - 17 eps`), and at most about
  `2^-16` relative above it in float32. Subnormals: a term of the formula flushed to zero is
  below the smallest normal `tiny`, so it moves a sensitivity `>= tiny / eps` by at most one
  more rounding; a smaller sensitivity with a positive multiplier fails closed (NaN), since its
  flushed terms could be all of it.

  A multiplier of exactly 0 gives 0 (the non-private limit, even when clipping is off). A
  negative or NaN multiplier, or a NaN / negative sensitivity (e.g. a NaN clip traced through
  `jax.vmap`, where host validation cannot see values), gives NaN: the run's outputs are
  NaN, never a noiseless release.
  """
  multiplier, sensitivity = jnp.asarray(multiplier), jnp.asarray(sensitivity)
  dtype = jnp.result_type(multiplier, sensitivity, jnp.float32)
  # the roundings happened in the LEAST precise of the two inputs (a float32 sensitivity times a
  # float64 multiplier, a half-precision value): widen by its eps, multiply in `dtype`
  eps = max(float(jnp.finfo(d).eps) for d in (multiplier.dtype, sensitivity.dtype, np.dtype(dtype))
            if jnp.issubdtype(d, jnp.floating))
  multiplier, sensitivity = multiplier.astype(dtype), sensitivity.astype(dtype)
  product = multiplier * sensitivity
  # a sensitivity below 2^(mantissa bits) x the smallest normal may hide flushed subnormal terms
  # (a relative bound no longer holds): fail closed, never a near-noiseless release
  floor = float(jnp.finfo(sensitivity.dtype).tiny) / float(jnp.finfo(sensitivity.dtype).eps)
  valid = (multiplier >= 0) & (sensitivity >= 0) & ((multiplier == 0) | (sensitivity >= floor))
  widen = 1.0 + 64.0 * eps  # exact in `dtype`: 1 + 2^-17 for float32 roundings
  above = jnp.nextafter(product * jnp.asarray(widen, dtype), jnp.asarray(jnp.inf, dtype))
  scale = jnp.where(multiplier > 0, above, jnp.zeros_like(product))
  return jnp.where(valid, scale, jnp.nan)


# ----------------------------------------------------------------------------------------
# DP-SGD's per-record map: l2 clipping onto the grid (module docstring, "DP-SGD's per-record map").
# ----------------------------------------------------------------------------------------


def l2_shrink(dtype: Any, num_features: int) -> float:
  """`1 - 32 u - (p + 64) 2^-50` (`u`: the dtype's unit roundoff): the norm `quantize_l2`
  clips to, in units of `C`.

  It covers every rounding between the row and its quantized value: the float64 sum of squares
  (in any order: at most `p 2^-53` relative), the square root, `C'`, the factor (two more
  float64 roundings if the division becomes a product by a reciprocal square root), the
  per-row multiplier rounded to the data's dtype and the product by it (`2 u`): in all at most
  `2 u + (p / 2 + 7) 2^-53` relative, which the margin exceeds 16 times. The computed quantized
  row therefore has REAL l2 norm `<= C`. Exact in float64 (a multiple of `2^-53` in [1/2, 1]).
  """
  u = float(np.finfo(dtype).eps) / 2
  return 1.0 - 32 * u - (num_features + 64) * 2.0**-50


def quantize_l2(per_example_grads: Array, clip: Array, scale: Array) -> Array:
  """Row-wise `trunc(clip_2(g_i, C) / h)`: integer-valued, in the rows' dtype (`C` finite).

  `clip_2(v, C) = v min(1, C' / ||v||_2)`, `C' = C` [`l2_shrink`][dpgcd_jax.clipping.l2_shrink], with the norm and
  the factor computed in float64 (the squares of float32 entries are exact there, and the sum
  errs by at most `p 2^-53` relative in any order), then one multiplier per row
  `m_i = factor_i / h` rounded to the rows' dtype and `q_ij = trunc(g_ij m_i)`: truncation
  toward zero never increases a magnitude, so `||q_i h||_2 <= C` in real arithmetic (the
  shrink covers every rounding before the truncation). Every `|q_ij| < 2^(bits + 1)`: an
  integer that float32 or float64 holds exactly. A row with a non-finite norm (a NaN or
  infinite entry, an overflowing norm), or whose multiplier would be subnormal (`C` below
  about `2^-100` times the row's norm), is 0: a zero row meets any bound. `C = inf`
  (clipping off, infinite sensitivity) returns the rows with non-finite rows zeroed (a plain sum).

  Args:
    per_example_grads: (k, p) per-example gradients (float32 or float64).
    clip: `C`, a scalar in the rows' dtype (may be a tracer).
    scale: `1 / h = 2^(bits + 1 - e)` from `exact_sums.grid_scale(C, exact_sums.l2_grid_bits(n))`.

  Returns:
    (k, p) in the rows' dtype.
  """
  g = per_example_grads
  dtype = g.dtype
  with jax.enable_x64(True):
    norms = jnp.sqrt(jnp.sum(jnp.square(g.astype(jnp.float64)), axis=-1, keepdims=True))
    c = jnp.asarray(clip).astype(jnp.float64)
    factor = jnp.minimum(1.0, c * l2_shrink(dtype, g.shape[-1]) / jnp.maximum(norms, jnp.finfo(jnp.float64).tiny))
    finite_c = jnp.isfinite(c)
    multiplier = (factor * jnp.where(finite_c, jnp.asarray(scale).astype(jnp.float64), 1.0)).astype(dtype)
    keep = jnp.isfinite(norms) & (multiplier >= jnp.finfo(dtype).tiny)
  multiplier = jnp.where(keep, multiplier, jnp.zeros((), dtype))
  scaled = jnp.where(keep, g, jnp.zeros((), dtype)) * multiplier
  return jnp.where(finite_c, jnp.trunc(scaled), scaled)


