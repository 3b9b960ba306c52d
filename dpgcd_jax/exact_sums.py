"""Exact sums on a public power-of-two grid: the fixed-point arithmetic of the clipped means.

A float32 sum of `n` clipped terms is not the real sum: its rounding depends on every term (so
on every record), and at `n = 6e6` two neighbours' float32 means differed by `1.073 x 2C/n`.
[`dpgcd_jax.clipping`][] therefore maps each record to integers on a public fixed-point grid,
and the sums are computed here EXACTLY, whatever order XLA picks, with one rounding at the end:

1. Grid. `h_j = 2^(e_j - 1 - k)` with `C_j = m 2^e_j`, `m in [1/2, 1)` (`frexp`): a
   power of two, a function of `C_j` only, `C_j / h_j < 2^(k+1)`
   ([`grid_scale`][dpgcd_jax.exact_sums.grid_scale] gives `1 / h_j`,
   [`grid_bits`][dpgcd_jax.exact_sums.grid_bits] the `k`).
2. Per record: `q_ij = trunc(clip(g_ij, -C_j, C_j) / h_j)`, integers with `|q_ij h_j| <= C_j`
   ([`quantize`][dpgcd_jax.clipping.quantize]; the privacy argument, one record moves
   `sum_i q_ij h_j` by at most `2 C_j`, is there).
3. Exact sum. float32 data: `|q| < 2^(k+1)` with `k = 22`, so a block of `m = 2^(30-k) =
   256` rows sums in int32 without overflow, in any order; the block sums (integers below
   `n 2^23 < 2^53`) are added in float64 (`jax.enable_x64` locally, O(p n / 256) work),
   again exactly in any order. float64 data: `k = min(50, 62 - ceil(log2 n))` and one int64
   sum. `Q_j = sum_i q_ij` is exact: the reduction order XLA picks cannot matter.
4. One rounding. `g_j = Q_j h_j / n`: the product by `h_j` is exact; the division by `n`
   in float64 and the cast to the data's dtype round, so `|g_j - Q_j h_j / n| <= r |Q_j h_j /
   n| <= r C_j` with `r = u + 2 u64` for float32 (`u = 2^-24`) and `r = 3 u64` for float64
   (the int64 -> float64 conversion, the division): [`rounding_bound`][dpgcd_jax.exact_sums.rounding_bound], which
   [`mean_sensitivity`][dpgcd_jax.clipping.mean_sensitivity] folds into the ledger's sensitivity.

Grid resolution: `h_j <= 2^-22 C_j` (float32; `2^-50` float64 at moderate `n`), a
per-term truncation at most one grid step, comparable with a float32 rounding of `C_j`.
`C_j = inf` (clipping off: infinite sensitivity, non-private runs only) uses a plain float
sum instead.

DP-SGD's sums ([`quantize_l2`][dpgcd_jax.clipping.quantize_l2],
[`masked_float64_sum`][dpgcd_jax.exact_sums.masked_float64_sum]). The sum of l2-clipped rows
over a Poisson batch is exact too, and needs no fold: the noise is added to the exact sum.

1. Per record: `q_i = trunc(g_i m_i)` with `||q_i h||_2 <= C` in real arithmetic
   ([`quantize_l2`][dpgcd_jax.clipping.quantize_l2], the privacy argument there). Grid
   `h = 2^(e - 1 - k)` (`C = m 2^e`), `k =`
   [`l2_grid_bits`][dpgcd_jax.exact_sums.l2_grid_bits] `(n) = min(50, 52 - ceil(log2 n))`: `n`, the largest batch the
   sampler can produce (its exact completion branch sums all `n` rows).
2. `Q = sum_{i in B} q_i` in float64: integers below `n 2^(k+1) <= 2^53`, exact in any order.
3. The release: `((Q h + Z) / (q n))` in float64 (`Q h` exact, `Z` the float32 noise),
   rounded once to the data's dtype: post-processing of the noisy exact sum, so the ledger's
   unit `C` holds as is (the noise addition itself is the mechanism's own arithmetic, as in
   [`dpgcd_jax.clipping`][]).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array


# ----------------------------------------------------------------------------------------
# Exact sums on a public power-of-two grid (module docstring, steps 1-4).
# ----------------------------------------------------------------------------------------

_BLOCK_BITS = 30  # an int32 block of 2^(30 - k) terms below 2^(k+1) stays below 2^31


def grid_bits(dtype: Any, num_terms: int) -> int:
  """`k`: the grid is `h_j = 2^(e_j - 1 - k)`; a function of the dtype and `n` only."""
  log_n = max(1, math.ceil(math.log2(max(num_terms, 2))))
  if np.dtype(dtype) == np.float64:
    return min(50, 62 - log_n)  # |Q| < n 2^(k+1) <= 2^63 in int64
  if log_n <= _BLOCK_BITS - 20:
    return min(22, _BLOCK_BITS - log_n)  # n <= 1024: one int32 group (k >= 20), no tail
  return min(22, 52 - log_n)  # |Q| < n 2^(k+1) <= 2^53: exact in float64


def grid_scale(thresholds: Array, bits: int) -> Array:
  """`1 / h_j = 2^(k + 1 - e_j)` (a power of two; `e_j` clamped below so it stays finite)."""
  _, e = jnp.frexp(thresholds)
  low = int(np.finfo(thresholds.dtype).minexp) + bits + 2  # h and 1 / h stay normal
  e = jnp.maximum(e, low)  # a tiny C_j: a coarser grid, still |q| < 2^(k+1)
  return power_of_two(bits + 1 - e, thresholds.dtype)


def power_of_two(exponent: Array, dtype: Any) -> Array:
  """`2^exponent` in `dtype` for integer exponents of normal numbers, built from its bits.

  The value of `jnp.ldexp(1, exponent)` (exactly: a normal power of two has one encoding), at a
  tenth of its cost (1e6 thresholds: 4 ms, more than a DP-GCD iteration's sparse gradient). In
  [`grid_scale`][dpgcd_jax.exact_sums.grid_scale] the exponent is in `[k + 1 - maxexp, -minexp - 1]`, inside the normal
  range.
  """
  info = np.finfo(dtype)
  int_dtype = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[np.dtype(dtype).itemsize]
  biased = (jnp.asarray(exponent) + (info.maxexp - 1)).astype(int_dtype)
  return jax.lax.bitcast_convert_type(biased << info.nmant, dtype)


def block_sums(q: Array, axis: int = -1, bits: int | None = None) -> Array:
  """Exact partial sums of the integers `q` along `axis` (moved last): (..., blocks).

  int32 terms below `2^(k+1)` (`k = bits`, the grid of the quantization; default
  [`grid_bits`][dpgcd_jax.exact_sums.grid_bits] for float32 and this length, which is only right when the terms were
  quantized for this length: a column of `K` stored entries of an `n`-record problem was
  quantized for `n`) are summed in groups of `m = 2^(30 - k)` (plus a shorter tail group): no overflow,
  whatever the order of the additions. The groups are strided (the head is viewed as (m,
  n // m) and summed over the first axis: vector adds of contiguous rows, about 1.5x faster
  on CPU than contiguous groups); any partition is exact. int64 terms: one group.
  """
  q = jnp.moveaxis(q, axis, -1)
  if q.dtype == jnp.int64:
    return jnp.sum(q, axis=-1, keepdims=True)
  n = q.shape[-1]
  block = 1 << (_BLOCK_BITS - (grid_bits(jnp.float32, n) if bits is None else bits))
  head = (n // block) * block
  parts = []
  if head:
    parts.append(jnp.sum(q[..., :head].reshape(q.shape[:-1] + (block, head // block)), axis=-2))
  if head < n:
    parts.append(jnp.sum(q[..., head:], axis=-1, keepdims=True))
  return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)


def exact_total(blocks: Array) -> Array:
  """`Q`, the sum of [`block_sums`][dpgcd_jax.exact_sums.block_sums] over the last axis, exactly (float64 or int64)."""
  with jax.enable_x64(True):
    if blocks.dtype == jnp.int64:
      return jnp.sum(blocks, axis=-1)
    return jnp.sum(blocks.astype(jnp.float64), axis=-1)  # integers below 2^53: exact


def exact_sum(q: Array, axis: int = -1, bits: int | None = None) -> Array:
  """The exact integer sum of `q` along `axis` (see [`block_sums`][dpgcd_jax.exact_sums.block_sums])."""
  return exact_total(block_sums(q, axis, bits))


# ----------------------------------------------------------------------------------------
# Factor grids (derivative clipping: `dpgcd_jax.kernels.derivative_total`): each factor of a
# product on its own power-of-two grid, so the products are exact integers.
# ----------------------------------------------------------------------------------------

FACTOR_BITS = 13  # each factor `v` on a grid of `|v| < 2^13` steps: two int8 limbs
FACTOR_ROWS = 1 << 18  # int32 partial sums of at most 2^18 products of limbs (each `|.| <= 2^12`): below 2^31


def factor_scale(bound: Array) -> Array:
  """`1 / h = 2^(FACTOR_BITS - e)` for `bound < 2^e` (`frexp`): a value clipped to `bound` is
  less than `2^13` grid steps `h` in magnitude. A power of two (`e` clamped so that it stays normal)."""
  _, e = jnp.frexp(bound)
  info = jnp.finfo(bound.dtype)
  e = jnp.clip(e, int(info.minexp) + FACTOR_BITS + 2, int(info.maxexp))
  return power_of_two(FACTOR_BITS - e, bound.dtype)


def on_factor_grid(values: Array, bound: Array) -> Array:
  """`round(values / h)` clipped to `±min(floor(bound / h), 2^13 - 1)` as int32, `h = 1 / factor_scale(bound)`:
  `|v h| <= bound` and `|v| < 2^13` for every bound, an infinite one too (the products by the
  power of two `1 / h` are exact; the cap holds where `e` is clamped). `values` finite.

  The rounding (to nearest, ties to even) adds `1.5 * 2^m` (`m` the mantissa's bits, and
  `|v| <= 2^13 < 2^(m - 1)`): the sum's low bits are then the integer, read by a bitcast. Half
  the cost of `jnp.round` and a float-to-int conversion on CPU, where this pass over X is the
  one a derivative-clipped run makes outside its steps.
  """
  scale = factor_scale(bound)
  top = jnp.minimum(jnp.floor(bound * scale), 2.0**FACTOR_BITS - 1)
  clipped = jnp.clip(values * scale, -top, top)  # between two integers: the rounding stays within
  dtype = clipped.dtype
  int_dtype = {4: jnp.int32, 8: jnp.int64}[np.dtype(dtype).itemsize]
  magic = jnp.asarray(1.5 * 2.0 ** np.finfo(dtype).nmant, dtype)
  as_int = lambda x: jax.lax.bitcast_convert_type(x, int_dtype)
  return (as_int(clipped + magic) - as_int(magic)).astype(jnp.int32)


def limbs(v: Array) -> tuple[Array, Array]:
  """`v = 128 hi + lo` for int32 `|v| < 2^13`: `lo` in [-64, 63], `hi` in [-64, 64], both int8."""
  hi = (v + 64) >> 7
  return hi.astype(jnp.int8), (v - (hi << 7)).astype(jnp.int8)


def exact_mean(total: Array, scale: Array, num_examples: int | Array, dtype: Any) -> Array:
  """`Q h / n` rounded once to `dtype` (`total = Q` from `exact_sum`, `scale = 1 / h`)."""
  with jax.enable_x64(True):
    h = 1.0 / scale.astype(jnp.float64)  # a power of two: exact
    return (total.astype(jnp.float64) * h / num_examples).astype(dtype)


def rounding_bound(dtype: Any) -> float:
  """`r`: relative error of the one rounding of an exact clipped mean (module docstring, 4)."""
  u64 = 2.0**-53
  if np.dtype(dtype) == np.float64:
    return 3 * u64  # int64 -> float64, then / n
  return float(np.finfo(dtype).eps) / 2 + 2 * u64  # / n in float64, then the cast


# ----------------------------------------------------------------------------------------
# Exact float64 sums of l2-clipped vectors (DP-SGD; module docstring, "DP-SGD's sums").
# ----------------------------------------------------------------------------------------


def l2_grid_bits(num_terms: int) -> int:
  """`k` for sums of up to `num_terms` quantized vectors accumulated in float64.

  `|q| < 2^(k+1)` and `num_terms 2^(k+1) <= 2^53`: every partial sum is an integer that
  float64 holds exactly, in any order. `k <= 50`, whatever the data's dtype.
  """
  log_n = max(1, math.ceil(math.log2(max(num_terms, 2))))
  return min(50, 52 - log_n)


def masked_float64_sum(values: Array, mask: Array) -> Array:
  """`sum(where(mask, values, 0), axis=0)` in float64.

  Exact when `values` are integers and every partial sum stays below `2^53` (then any
  order of the additions gives the same result). A reduction, not a product by the mask:
  `dot_general`'s batching rule (`jax.vmap` of a `lax.switch`, which re-traces the branch
  outside this function's `enable_x64`) would truncate a float64 accumulation to float32.
  """
  with jax.enable_x64(True):
    kept = jnp.where(mask.reshape(mask.shape + (1,) * (values.ndim - 1)), values, jnp.zeros((), values.dtype))
    return jnp.sum(kept.astype(jnp.float64), axis=0)


def grid_step(clip: Array, scale: Array) -> Array:
  """`h = 1 / scale` in float64 (exact: a power of two) when `C` is finite, else 1."""
  with jax.enable_x64(True):
    return jnp.where(jnp.isfinite(jnp.asarray(clip)), 1.0 / jnp.asarray(scale).astype(jnp.float64), 1.0)
