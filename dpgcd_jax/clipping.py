"""Per-example clipping and the sensitivities it buys (shared by every solver and transform).

Coordinate-wise clipping (DP-GCD, DP-CD): each example's coordinate gradient is clipped
before averaging, ``c_ij = clip(grad_j l(w; d_i), -C_j, C_j)``, ``g_j = (1/n) sum_i c_ij``.
Replacing one record changes ``g_j`` by at most ``Delta_j = 2 C_j / n``.

One hyperparameter ``C`` sets all thresholds (the DP-CD rule)
``C_j = C sqrt(M_j / sum_k M_k)``, so that ``Delta_j / sqrt(M_j)`` is the same for every
coordinate; an explicit vector of thresholds is used as given. ``C = inf`` disables
clipping (and makes the sensitivity infinite: only noise-free runs make sense then).

Per-example l2 clipping (DP-SGD): ``c_i = g_i min(1, C / ||g_i||_2)``; replacing one record
changes the sum of clipped gradients by at most ``2 C`` in l2 norm.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array


def coordinate_thresholds(clip: Array, smoothness: Array) -> Array:
  """Per-coordinate thresholds ``C_j``: the DP-CD rule for a scalar ``clip``, else ``clip``."""
  clip = jnp.asarray(clip, smoothness.dtype)
  if clip.ndim == 0:
    return clip * jnp.sqrt(smoothness / jnp.sum(smoothness))
  return jnp.broadcast_to(clip, smoothness.shape)


def clip_coordinates(per_example_grads: Array, thresholds: Array) -> Array:
  """Clips per-example gradients coordinate-wise to [-C_j, C_j] (``thresholds`` broadcasts)."""
  thresholds = jnp.broadcast_to(thresholds, per_example_grads.shape)
  return jnp.clip(per_example_grads, -thresholds, thresholds)


def clip_l2(per_example_grads: Array, clip: Array) -> Array:
  """Rescales each row of an (n, p) matrix to l2 norm at most ``clip``."""
  norms = jnp.linalg.norm(per_example_grads, axis=-1, keepdims=True)
  factor = jnp.minimum(1.0, clip / jnp.maximum(norms, jnp.finfo(norms.dtype).tiny))
  return per_example_grads * factor


def mean_sensitivity(thresholds: Array, num_examples: int | Array) -> Array:
  """Replace-one sensitivity ``2 C / n`` of a mean of values clipped to [-C, C] (or l2 ball C)."""
  return 2.0 * thresholds / num_examples


def noise_scale(multiplier: Array, sensitivity: Array) -> Array:
  """``multiplier * sensitivity``, with 0 when the multiplier is 0 (even if clipping is off)."""
  return jnp.where(multiplier > 0, multiplier * sensitivity, 0.0)
