"""The public grid of the floating-point-safe mechanisms: snapping, integer sensitivities and scales.

A discrete mechanism (`dpgcd_jax.mechanisms`, `discrete = True`) releases an integer: the value
snapped to a public grid of step `gran`, plus integer noise drawn exactly by the samplers of
`dpgcd_jax.discrete_noise`, multiplied back by `gran`. The released float is a function of one
integer, so every float computation after the sampler is post-processing (Mironov, CCS 2012;
Canonne, Kamath & Steinke, NeurIPS 2020). This module is the arithmetic around the samplers, all
of it on public values or exact; it draws no noise.

Grid. `gran = 2^floor(log2(multiplier Delta / 8192))` (`grid_step`: public, a power of two, so
`value / gran` and `k * gran` are exact), integer sensitivity `D = ceil(Delta / gran) + 1`
(`grid_sensitivity`: the snapping `round(value / gran)` adds one step), integer scale
`t = floor(multiplier D) + 1 > multiplier D` (`integer_scale`); `grid_and_scale` forms the three
for a mechanism. The released integer is `clip(round(value / gran), +-2^52) + Z`
(`noisy_integer`), exact in float64.

Integer releases of counts (the private scales and bounds, `dpgcd_jax.privacy`): the exact query
`count_query`, and `integer_scale_above`, an integer scale strictly above a float expression of
public reals.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import discrete_noise

Array = jax.Array

GRID_TARGET = 2**13
"""The grid makes the noise scale between `GRID_TARGET` and `2 GRID_TARGET` grid steps."""


def grid_step(noise_scale: Array, target: int = GRID_TARGET) -> Array:
  """The public grid step: the power of two `2^floor(log2(noise_scale / target))`.

  `noise_scale` (`multiplier * sensitivity`) is public, so the grid is. A power of two
  makes `value / gran` and `k * gran` exact in floating point (no under/overflow), so the
  grid-unit sensitivity below is exact and the released `k * gran` depends on `k` only.
  """
  noise_scale = jnp.asarray(noise_scale)
  exponent = jnp.floor(jnp.log2(noise_scale / target))
  ok = jnp.isfinite(exponent) & (jnp.abs(exponent) < 126)
  gran = jnp.ldexp(jnp.ones_like(noise_scale), jnp.where(ok, exponent, 0).astype(jnp.int32))
  return jnp.where(ok, gran, jnp.nan)  # ldexp: exactly a power of two (exp2 may not be)


def grid_sensitivity(sensitivity: Array, gran: Array) -> Array:
  """Integer sensitivity, in grid steps, of `round(value / gran)`: `ceil(Delta / gran) + 1`.

  If `|v - v'| <= Delta` then `|round(v / gran) - round(v' / gran)| <= Delta / gran + 1`
  (each rounding moves by at most 1/2), and the difference is an integer. `Delta / gran`
  is exact (`gran` a power of two), so the ceiling is. The `+ 1` is exact below `2^23`
  (float32 holds every integer up to `2^24`); above (a multiplier `b < 2^-10`, `2 / b > 2000`
  per step) it would be lost, so the result is NaN there: an invalid scale, and the
  mechanism fails closed (found by the review).
  """
  steps = jnp.ceil(sensitivity / gran)
  return jnp.where(steps < 2.0**23, steps + 1.0, jnp.nan)


def integer_scale(multiplier: Array, grid_sens: Array, xp=jnp) -> tuple[Array, Array]:
  """`(t, valid)`: the int32 scale `floor(multiplier * D) + 1 > multiplier * D`.

  `floor(fl(x)) + 1` exceeds the exact `x` whenever the float error is below 1, which
  holds for `x < MAX_SCALE` (`dpgcd_jax.discrete_noise.MAX_SCALE`, the samplers' largest).
  `valid` is False for a scale outside `[1, MAX_SCALE]` or a non-finite one (the mechanisms
  then release NaN). `xp=numpy` evaluates the same IEEE operations on the host (the same
  integers, no compiled program).
  """
  t = xp.floor(multiplier * grid_sens) + 1.0
  valid = xp.isfinite(t) & (t >= 1.0) & (t <= discrete_noise.MAX_SCALE)
  return xp.where(valid, t, 1.0).astype(np.int32), valid


def snap(value: Array, gran: Array) -> Array:
  """`round(value / gran)` (ties to even), an integer held in `value`'s float dtype."""
  return jnp.round(value / gran)


def grid_and_scale(multiplier: Array, sensitivity: Array) -> tuple[Array, Array, Array]:
  """`(gran, t, valid)`: the public grid step and integer noise scale (module docstring, "Grid")."""
  gran = grid_step(multiplier * sensitivity)
  grid_sens = grid_sensitivity(sensitivity, gran)
  t, valid = integer_scale(multiplier, grid_sens)
  valid = valid & (multiplier > 0) & (sensitivity > 0) & jnp.isfinite(gran) & (gran > 0)
  return jnp.where(valid, gran, 1.0), t, valid


def grid_noise_scale(multiplier: Any, sensitivity: Any) -> Array:
  """The noise scale, in value units, of a discrete update of `multiplier` x `sensitivity`:
  `t gran` (the integer scale on the public grid; `> multiplier x sensitivity`), NaN if invalid."""
  multiplier, sensitivity = jnp.asarray(multiplier), jnp.asarray(sensitivity)
  gran, t, valid = grid_and_scale(multiplier, sensitivity)
  return jnp.where(valid, t * gran, jnp.nan)


INTEGER_LIMIT = 2.0**52
"""The clamp of `round(value / gran)`: every integer up to `2^53` is exact in float64."""


def noisy_integer(value: Array, gran: Array, z: Array) -> Array:
  """`clip(round(value / gran), +-2^52) + z`, an exact integer held in float64 (trace under x64).

  `z`: int32 noise (`FAILED` counts as 0: the caller then releases nothing). Exact: `value`
  (float32 or float64) is exact in float64, `value / gran` divides by a power of two, the
  rounding is exact, the clamp is 1-Lipschitz (the grid sensitivity `D` is kept), and
  integers below `2^53` add exactly. An int32 clamp at `2^30` (before) released a wrong value,
  deterministically, once `value / gran` passed it: at `n = 1e6` and multiplier 2 a released
  curvature of 1 came out as 0.25.
  """
  k = jnp.clip(snap(jnp.asarray(value, jnp.float64), jnp.asarray(gran, jnp.float64)),
               -INTEGER_LIMIT, INTEGER_LIMIT)
  return k + jnp.where(z == discrete_noise.FAILED, 0, z).astype(jnp.float64)


SCALE_MARGIN = 2.0**-16
"""Relative margin of `integer_scale_above`."""


def integer_scale_above(scale: Array, xp=jnp) -> tuple[Array, Array]:
  """`(t, valid)`: an int32 scale `t > scale`, strictly above the EXACT real that `scale` computes.

  `t = floor(scale * (1 + 2^-16)) + 1`, in float32 or wider. Why the margin: `scale` is a
  short float expression of public reals (a noise multiplier cast to float32, a square root,
  a product, a quotient: at most four operations, each within 2 ulps, so within a relative
  `2^-20` of the exact real in float32). The factor `1 + 2^-16` (exact in float32) is larger
  than that error and than the rounding of the product itself, so `scale * (1 + 2^-16)` is
  above the exact real, and `floor(.) + 1` strictly above it: the noise is never below the
  accounted one (the relative cost, `2^-16`, is below the integer rounding's). `valid` is
  False for a non-finite scale or one outside `[1, MAX_SCALE]` (`t` is then 1: the caller
  fails closed). `xp=numpy`: the same operations on the host.
  """
  scale = xp.asarray(scale)
  scale = scale.astype(np.promote_types(scale.dtype, np.float32))
  return integer_scale(scale * scale.dtype.type(1.0 + SCALE_MARGIN), xp.ones((), scale.dtype), xp)


QUERY_LIMIT = 2**29
"""The clamp of `count_query`: a query plus any noise the
samplers draw (`|z| < 65 MAX_SCALE < 2^22`) stays inside int32."""


def count_query(counts: Array, rank: Array) -> Array:
  """The exact integer query `clip(N - rank, -2^29, 2^29)` (int32) of counts `N` at a public rank.

  Sensitivity: if every count moves by at most 1 between neighbours, so does its query
  (subtracting a public integer, then clipping, are 1-Lipschitz maps of the integers). All of
  it is int32 arithmetic: exact at any `n < 2^31` (a count in float32 rounds to even above
  `2^24`, and neighbouring counts could then land 2 apart). `counts - rank` does not wrap
  for `0 <= N, rank < 2^31`.
  """
  return jnp.clip(jnp.asarray(counts, jnp.int32) - jnp.asarray(rank, jnp.int32), -QUERY_LIMIT, QUERY_LIMIT)
