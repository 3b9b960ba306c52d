"""A private ERM problem: data, per-example loss, smooth l2 term and separable penalty.

.. math::

   F(w) = \\frac1n \\sum_{i=1}^n l(w; x_i, y_i) + \\frac{\\lambda_2}{2} \\|w\\|_2^2 + \\psi(w)

The data term and ``l2`` are smooth; ``psi`` (a :mod:`dpgcd_jax.penalties` object) is
handled by its prox. Neighbouring data sets differ in one record (replace-one; ``n`` is public).

Coordinate smoothness: ``M_j`` bounds the curvature of ``f = data term + l2 term`` along
``e_j``. :func:`make_problem` computes it as follows, unless public constants are passed
as ``smoothness=`` (the data-term part, without ``l2``):

- GLM loss with a known curvature bound ``beta``: ``M_j = beta * mean_i x_ij^2`` (exact bound);
- GLM loss without it: ``beta`` is estimated as the largest ``phi''(z, y_i)`` over the
  labels and a grid of 4001 margins in [-40, 40] (a numerical estimate, not a proof);
- any other loss: ``M_j = mean_i d^2 l(w; x_i, y_i) / dw_j^2`` at ``w = 0``, computed with
  ``jax.jvp`` of ``jax.grad`` (exact for quadratics, a local estimate otherwise).

PRIVACY CAVEAT: ``M_j`` computed from the private ``X`` is itself a function of the data and
is used without noise (it scales steps, scores and clipping thresholds). The DP guarantee
then holds conditionally on ``M``, as in the paper, which treats ``M`` as public (standardized
columns give ``M_j = beta``). For an unconditional guarantee pass public constants, or spend
part of the budget on :func:`dpgcd_jax.privacy.private_smoothness`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import penalties

Array = jax.Array


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["XT", "y", "smoothness", "l2", "penalty"],
    meta_fields=["loss"],
)
@dataclasses.dataclass(frozen=True)
class Problem:
  """Data and objective of a private ERM problem (a pytree; ``loss`` is static).

  Build it with :func:`make_problem`, which validates the inputs.

  The features are stored column-major, ``XT = X.T`` of shape (p, n): the clipped
  coordinate gradient then reduces over contiguous memory (about 2x faster on CPU, and it
  vmaps well) and column ``j`` is one contiguous row.

  Attributes:
    XT: (p, n) transposed features (``X`` is a property).
    y: (n,) targets or labels.
    smoothness: (p,) coordinate smoothness of the data term (without ``l2``).
    l2: strength of the smooth ridge term ``l2 / 2 ||w||^2``.
    penalty: separable penalty ``psi`` (see :mod:`dpgcd_jax.penalties`).
    loss: the per-example loss.
  """

  XT: Array
  y: Array
  smoothness: Array
  l2: Array
  penalty: Any
  loss: losses_lib.Loss

  @property
  def X(self) -> Array:
    return self.XT.T

  @property
  def num_examples(self) -> int:
    return self.XT.shape[1]

  @property
  def num_features(self) -> int:
    return self.XT.shape[0]


def make_problem(
    X: Any,
    y: Any,
    loss: losses_lib.Loss | str = "squared",
    *,
    l2: float = 0.0,
    penalty: Optional[penalties.Penalty] = None,
    smoothness: Optional[Any] = None,
) -> Problem:
  """Validates the inputs and builds a :class:`Problem`.

  Args:
    X: (n, p) finite features.
    y: (n,) finite targets (labels in {-1, +1} for the logistic loss).
    loss: a :class:`dpgcd_jax.Loss` or a built-in name ("squared", "logistic", "huber").
    l2: smooth ridge strength, >= 0.
    penalty: separable penalty (default: none).
    smoothness: optional public (p,) coordinate smoothness of the data term; when omitted
      it is derived from the data (see the module docstring and its privacy caveat).

  Raises:
    ValueError: naming the argument, for NaN / infinite data, mismatched shapes, a loss
      that does not return a scalar, negative ``l2``, or bad ``smoothness``.
  """
  loss = losses_lib.get(loss)
  _validate.check_finite_array("X", X, ndim=2)
  _validate.check_finite_array("y", y, ndim=1)
  X = jnp.asarray(X)
  if not jnp.issubdtype(X.dtype, jnp.floating):
    X = X.astype(jnp.result_type(float))
  y = jnp.asarray(y, X.dtype)
  n, p = X.shape
  if y.shape[0] != n:
    raise ValueError(f"Expected y to have X.shape[0]={n} entries, got y.shape={y.shape}.")
  out = jax.eval_shape(loss.fn, jnp.zeros(p, X.dtype), X[0], y[0])
  if getattr(out, "shape", None) != ():
    raise ValueError(
        f"Expected loss {loss.name!r} to return a scalar per example, got output shape "
        f"{getattr(out, 'shape', out)}."
    )
  _validate.check_positive("l2", l2, allow_zero=True)
  if smoothness is None:
    smoothness = _data_smoothness(loss, X, y)
  else:
    _validate.check_finite_array("smoothness", smoothness, ndim=1)
    _validate.check_positive("smoothness", smoothness, allow_zero=True)
    if jnp.shape(smoothness) != (p,):
      raise ValueError(f"Expected smoothness.shape=({p},), got smoothness.shape={jnp.shape(smoothness)}.")
  smoothness = jnp.asarray(smoothness, X.dtype)
  total = np.asarray(smoothness) + float(l2)
  if np.any(total <= 0):
    cols = np.flatnonzero(total <= 0)[:5].tolist()
    raise ValueError(
        f"Expected a positive coordinate smoothness for every column, got M_j = 0 for columns "
        f"{cols} (all-zero columns?): drop them or add l2 > 0."
    )
  penalty = penalties.Zero() if penalty is None else penalty
  return Problem(XT=jnp.asarray(X.T), y=y, smoothness=smoothness, l2=jnp.asarray(l2, X.dtype), penalty=penalty, loss=loss)


def _data_smoothness(loss: losses_lib.Loss, X: Array, y: Array) -> Array:
  if loss.is_glm:
    beta = loss.curvature
    if beta is None:
      z = jnp.linspace(-40.0, 40.0, 4001, dtype=X.dtype)
      phi2 = jax.vmap(jax.vmap(jax.grad(jax.grad(loss.phi)), (0, None)), (None, 0))
      beta = jnp.max(jax.lax.map(lambda yi: phi2(z, yi[None]), jnp.unique(y)))
    return beta * jnp.mean(X**2, axis=0)
  p = X.shape[1]
  w0 = jnp.zeros(p, X.dtype)

  def hessian_diag_at_zero(x, yi):
    grad = jax.grad(loss.fn)
    return jax.vmap(lambda e: jax.jvp(lambda w: grad(w, x, yi), (w0,), (e,))[1] @ e)(jnp.eye(p, dtype=X.dtype))

  return jnp.mean(jax.lax.map(lambda xy: hessian_diag_at_zero(*xy), (X, y)), axis=0)


def coordinate_smoothness(problem: Problem) -> Array:
  """``M_j`` of the smooth part ``f`` (data term plus ``l2``)."""
  return problem.smoothness + problem.l2


def init_margins(problem: Problem, w: Array) -> Optional[Array]:
  """The cache of the GLM fast path: margins ``Xw`` (None for other losses)."""
  return w @ problem.XT if problem.loss.is_glm else None


def update_margins(problem: Problem, margins: Optional[Array], j: Array, change: Array) -> Optional[Array]:
  """Margins after ``w_j += change``: O(n)."""
  if margins is None:
    return None
  return margins + change * problem.XT[j]


def per_example_gradients_t(problem: Problem, w: Array, margins: Optional[Array]) -> Array:
  """(p, n) gradients of the per-example losses (data term only), one column per example."""
  if problem.loss.is_glm:
    dphi = jax.vmap(jax.grad(problem.loss.phi))(margins, problem.y)
    return problem.XT * dphi[None, :]
  return jax.vmap(jax.grad(problem.loss.fn), in_axes=(None, 0, 0), out_axes=1)(w, problem.X, problem.y)


def clipped_gradient(problem: Problem, w: Array, margins: Optional[Array], thresholds: Array) -> Array:
  """Gradient of ``f`` with coordinate-wise per-example clipping of the data term.

  ``(1/n) sum_i clip(grad l(w; d_i), -C, C) + l2 w``; the ``l2 w`` part is data-independent,
  so the replace-one sensitivity of coordinate j is ``2 C_j / n``.
  """
  grads_t = per_example_gradients_t(problem, w, margins)
  clipped = clipping.clip_coordinates(grads_t, thresholds[:, None])
  return jnp.mean(clipped, axis=1) + problem.l2 * w


def clipped_coordinate_gradient(problem: Problem, w: Array, margins: Optional[Array], thresholds: Array,
                                j: Array) -> Array:
  """Coordinate ``j`` of :func:`clipped_gradient`; O(n) for GLM losses."""
  if problem.loss.is_glm:
    dphi = jax.vmap(jax.grad(problem.loss.phi))(margins, problem.y)
    clipped = clipping.clip_coordinates(dphi * problem.XT[j], thresholds[j])
    return jnp.mean(clipped) + problem.l2 * w[j]
  return clipped_gradient(problem, w, margins, thresholds)[j]


def smooth_objective(problem: Problem, w: Array, margins: Optional[Array] = None) -> Array:
  """``f(w)``: data term plus the l2 term."""
  if problem.loss.is_glm:
    margins = w @ problem.XT if margins is None else margins
    data = jnp.mean(jax.vmap(problem.loss.phi)(margins, problem.y))
  else:
    data = jnp.mean(jax.vmap(problem.loss.fn, in_axes=(None, 0, 0))(w, problem.X, problem.y))
  return data + 0.5 * problem.l2 * jnp.sum(w**2)


def objective(problem: Problem, w: Array, margins: Optional[Array] = None) -> Array:
  """``F(w) = f(w) + psi(w)``. NOT private: a diagnostic computed from the raw data."""
  return smooth_objective(problem, w, margins) + problem.penalty.value(w)


def gradient(problem: Problem, w: Array) -> Array:
  """Unclipped gradient of ``f`` (for non-private reference solvers)."""
  return jax.grad(smooth_objective, argnums=1)(problem, w)
