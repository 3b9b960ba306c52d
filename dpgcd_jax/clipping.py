"""Per-example clipping and the sensitivities it buys (shared by every solver and transform).

Coordinate-wise clipping (DP-GCD, DP-CD): each example's coordinate gradient is clipped
before averaging, ``c_ij = clip(grad_j l(w; d_i), -C_j, C_j)``, ``g_j = (1/n) sum_i c_ij``.
Replacing one record changes ``g_j`` by at most ``Delta_j = 2 C_j / n``.

Units of ``clip``. A scalar ``clip = c`` sets ``C_j = c sqrt(M_j / beta)``, with ``M_j`` the
coordinate smoothness and ``beta`` the loss's curvature bound (``sup phi''``; 1 when unknown).
For a GLM loss with features bounded by ``B_j`` (``M_j = beta B_j^2``), ``C_j = c B_j``: the
per-example gradient is ``phi'(z, y) x_ij``, so ``c`` is a bound on ``|phi'|`` and
``c >= sup |phi'|`` clips nothing (logistic: ``c = 1``; Huber(delta): ``c = delta``; squared
loss: the residual ``|<x, w> - y|`` is clipped at ``c``). The rule keeps the DP-CD property
that ``Delta_j / sqrt(M_j)`` is the same for every coordinate, and does not depend on the
dimension. An explicit (p,) vector of thresholds is used as given. ``c = inf`` disables
clipping (and makes the sensitivity infinite: only noise-free runs make sense then).

Fail closed: a non-finite per-example gradient (a loss that overflows on an extreme record)
is replaced by 0 BEFORE clipping, so such a record is indistinguishable from one with a zero
gradient and the sensitivity bound holds for every input.

Per-example l2 clipping (DP-SGD): ``c_i = g_i min(1, C / ||g_i||_2)``, and 0 for a row whose
norm is not finite (a NaN or infinite entry, or an overflowing norm); replacing one record
changes the sum of clipped gradients by at most ``2 C``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def coordinate_thresholds(clip: Array, smoothness: Array, curvature: float = 1.0) -> Array:
  """Per-coordinate thresholds ``C_j``: ``clip sqrt(M_j / beta)`` for a scalar, else ``clip``."""
  clip = jnp.asarray(clip, smoothness.dtype)
  if clip.ndim == 0:
    return clip * jnp.sqrt(smoothness / curvature)
  return jnp.broadcast_to(clip, smoothness.shape)


def finite_or_zero(x: Array) -> Array:
  """``x`` with every NaN or infinite entry replaced by 0 (fail closed before clipping)."""
  return jnp.where(jnp.isfinite(x), x, jnp.zeros_like(x))


def clip_coordinates(per_example_grads: Array, thresholds: Array) -> Array:
  """Clips per-example gradients coordinate-wise to [-C_j, C_j] (``thresholds`` broadcasts).

  Non-finite entries become 0 first (see the module docstring).
  """
  thresholds = jnp.broadcast_to(thresholds, per_example_grads.shape)
  return jnp.clip(finite_or_zero(per_example_grads), -thresholds, thresholds)


def clip_l2(per_example_grads: Array, clip: Array) -> Array:
  """Rescales each row of an (n, p) matrix to l2 norm at most ``clip`` (non-finite rows -> 0)."""
  norms = jnp.linalg.norm(per_example_grads, axis=-1, keepdims=True)
  factor = jnp.minimum(1.0, clip / jnp.maximum(norms, jnp.finfo(norms.dtype).tiny))
  # A row with a NaN or infinite entry (or whose norm overflows) has a non-finite norm: 0.
  return jnp.where(jnp.isfinite(norms), per_example_grads * factor, 0.0)


def mean_sensitivity(thresholds: Array, num_examples: int | Array) -> Array:
  """Replace-one sensitivity ``2 C / n`` of a mean of values clipped to [-C, C] (or l2 ball C)."""
  return 2.0 * thresholds / num_examples


def noise_scale(multiplier: Array, sensitivity: Array) -> Array:
  """``multiplier * sensitivity``; fails closed on invalid values.

  A multiplier of exactly 0 gives 0 (the non-private limit, even when clipping is off). A
  negative or NaN multiplier, or a NaN / negative sensitivity (e.g. a NaN clip traced through
  ``jax.vmap``, where host validation cannot see values), gives NaN: the run's outputs are
  NaN, never a noiseless release.
  """
  valid = (multiplier >= 0) & (sensitivity >= 0)
  scale = jnp.where(multiplier > 0, multiplier * sensitivity, jnp.zeros_like(multiplier * sensitivity))
  return jnp.where(valid, scale, jnp.nan)
