"""Separable penalties `psi(w) = sum_j psi_j(w_j)`: value, prox, subdifferential distance.

A penalty is a small pytree (its strengths are array leaves, scalars or per-coordinate
vectors, so `jax.vmap` over them works and new values do not recompile) with three
methods, all vectorized over coordinates:

`coordinate_values(w) -> array`
    `psi_j(w_j)` per coordinate (`value(w)` is their sum).
`prox(v, step) -> array`
    `prox_{step * psi}(v) = argmin_x  psi(x) + (x - v)^2 / (2 step)`, coordinate-wise,
    `step` a scalar or a per-coordinate vector.
`subdiff_distance(w, g) -> array`
    `dist(-g_j, d psi_j(w_j))` per coordinate: zero at every coordinate iff `w`
    minimizes `f + psi` when `g = grad f(w)` (the optimality check, and the GS-s score).

Writing a new penalty: subclass [`SeparablePenalty`][dpgcd_jax.penalties.SeparablePenalty], decorate the class with
[`penalty`][dpgcd_jax.penalties.penalty] (a frozen dataclass whose fields are array leaves), write the three
methods, and validate parameters in `__post_init__` (see [`L1`][dpgcd_jax.penalties.L1]). Solvers call
nothing else; [`coordinate`][dpgcd_jax.penalties.coordinate] restricts a penalty to one coordinate.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import TYPE_CHECKING
from typing import Any
from typing import ClassVar
from typing import Protocol
from typing import TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _pytree
from dpgcd_jax import _validate

if TYPE_CHECKING:  # typing's from Python 3.11 (the type checkers ship typing_extensions)
  from typing_extensions import dataclass_transform
else:
  def dataclass_transform(**_kwargs: Any) -> Any:
    """A marker for type checkers only (no effect at run time)."""
    return lambda decorated: decorated

Array = jax.Array
_P = TypeVar("_P")


class Penalty(Protocol):
  """What a solver needs from a separable penalty."""

  def coordinate_values(self, w: Array) -> Array: ...

  def value(self, w: Array) -> Array: ...

  def prox(self, v: Array, step: Array) -> Array: ...

  def subdiff_distance(self, w: Array, g: Array) -> Array: ...


@dataclass_transform(frozen_default=True)
def penalty(cls: type[_P]) -> type[_P]:
  """Class decorator: a frozen dataclass whose fields are all pytree (array) leaves."""
  data_cls: Any = dataclasses.dataclass(frozen=True)(cls)  # a dataclass from here (not in its static type)
  names = [f.name for f in dataclasses.fields(data_cls)]
  return _pytree.dataclass_pytree(data_fields=names)(data_cls)


class SeparablePenalty:
  """Base of the built-in penalties: `value` is the sum of `coordinate_values`.

  Capability: `differentiable` (a class attribute, False unless a penalty says otherwise): the
  penalty is differentiable everywhere, so its subdifferential at every point is one gradient
  (`jax.grad(penalty.value)`). Solvers read the capability, never the class: e.g. DP-GCD's
  Laplace selection puts its noise inside the GS-s score `|.|` only for differentiable
  penalties (a V-shaped score without plateau), and DP Frank-Wolfe accepts only those.
  """

  differentiable: ClassVar[bool] = False

  def coordinate_values(self, w: Array) -> Array:
    raise NotImplementedError(f"{type(self).__name__} defines no coordinate_values")

  def value(self, w: Array) -> Array:
    return jnp.sum(self.coordinate_values(w))


def is_differentiable(pen: Any) -> bool:
  """Whether a penalty declares itself differentiable everywhere (`SeparablePenalty`)."""
  return bool(getattr(pen, "differentiable", False))


def coordinate(pen: Penalty, j: Array) -> Penalty:
  """The penalty of coordinate `j` alone (per-coordinate parameter vectors indexed at j)."""
  return jax.tree.map(lambda leaf: jnp.asarray(leaf)[j] if jnp.ndim(leaf) else leaf, pen)


def _soft_threshold(v: Array, t: Array) -> Array:
  return jnp.sign(v) * jnp.maximum(jnp.abs(v) - t, 0.0)


def _is_value(x: Any) -> bool:
  # Pytree unflattening (inside jit, vmap, tree_map) rebuilds penalties from tracers or
  # placeholder objects: only validate real numbers.
  return isinstance(x, (numbers.Number, np.ndarray, jax.Array)) and _validate.is_concrete(x)


def _check(**fields: Any) -> None:
  for name, x in fields.items():
    if _is_value(x):
      _validate.check_positive(name, x, allow_zero=True)


@penalty
class Zero(SeparablePenalty):
  """No penalty: `psi = 0`."""

  differentiable: ClassVar[bool] = True

  def coordinate_values(self, w: Array) -> Array:
    return jnp.zeros_like(w)

  def prox(self, v: Array, step: Array) -> Array:
    del step
    return v

  def subdiff_distance(self, w: Array, g: Array) -> Array:
    del w
    return jnp.abs(g)


@penalty
class L1(SeparablePenalty):
  """`psi(w) = strength * ||w||_1`; prox = soft thresholding."""

  strength: Any

  def __post_init__(self):
    _check(strength=self.strength)

  def coordinate_values(self, w: Array) -> Array:
    return self.strength * jnp.abs(w)

  def prox(self, v: Array, step: Array) -> Array:
    return _soft_threshold(v, step * self.strength)

  def subdiff_distance(self, w: Array, g: Array) -> Array:
    at_zero = jnp.maximum(jnp.abs(g) - self.strength, 0.0)
    return jnp.where(w == 0, at_zero, jnp.abs(g + self.strength * jnp.sign(w)))


@penalty
class L2(SeparablePenalty):
  """`psi(w) = strength / 2 * ||w||_2^2` (as a proximal term); prox = shrinkage."""

  differentiable: ClassVar[bool] = True
  strength: Any

  def __post_init__(self):
    _check(strength=self.strength)

  def coordinate_values(self, w: Array) -> Array:
    return 0.5 * self.strength * w**2

  def prox(self, v: Array, step: Array) -> Array:
    return v / (1.0 + step * self.strength)

  def subdiff_distance(self, w: Array, g: Array) -> Array:
    return jnp.abs(g + self.strength * w)


@penalty
class ElasticNet(SeparablePenalty):
  """`psi(w) = strength * (l1_ratio ||w||_1 + (1 - l1_ratio) / 2 ||w||_2^2)` (scikit-learn's)."""

  strength: Any
  l1_ratio: Any

  def __post_init__(self):
    _check(strength=self.strength)
    if _is_value(self.l1_ratio):
      _validate.check_number("l1_ratio", self.l1_ratio, low=0.0, high=1.0)

  def coordinate_values(self, w: Array) -> Array:
    return self.strength * (self.l1_ratio * jnp.abs(w) + 0.5 * (1.0 - self.l1_ratio) * w**2)

  def prox(self, v: Array, step: Array) -> Array:
    shrunk = _soft_threshold(v, step * self.strength * self.l1_ratio)
    return shrunk / (1.0 + step * self.strength * (1.0 - self.l1_ratio))

  def subdiff_distance(self, w: Array, g: Array) -> Array:
    smooth_g = g + self.strength * (1.0 - self.l1_ratio) * w
    return L1(self.strength * self.l1_ratio).subdiff_distance(w, smooth_g)


def in_target_units(penalty: Any, unit: Any) -> Any:
  """The penalty of a fit on targets divided by `unit` (a regressor's target bound `T`).

  With `y' = y / T` and `w' = w / T`, the squared-loss objective
  `(1/2n) ||X w - y||^2 + psi(w)` is `T^2` times `(1/2n) ||X w' - y'||^2 + psi(T w') / T^2`:
  an l1 strength becomes `strength / T`, an l2 strength is unchanged (elastic net: each part
  so). So `alpha` means what it means in raw units (scikit-learn's `Lasso`, `Ridge`,
  `ElasticNet`). Other penalties are returned as they are. Jittable (`unit` may be traced).
  """
  if isinstance(penalty, L1):
    return L1(penalty.strength / unit)
  if isinstance(penalty, ElasticNet):
    l1 = penalty.strength * penalty.l1_ratio / unit
    l2 = penalty.strength * (1.0 - penalty.l1_ratio)
    total = l1 + l2
    return ElasticNet(total, jnp.where(total > 0, l1 / jnp.where(total > 0, total, 1.0), penalty.l1_ratio))
  return penalty


@penalty
class Box(SeparablePenalty):
  """Indicator of `lower <= w <= upper` (`Box(0, inf)`: non-negativity); prox = clip."""

  lower: Any
  upper: Any

  def __post_init__(self):
    if _is_value(self.lower) and _is_value(self.upper):
      lo, hi = np.asarray(self.lower, float), np.asarray(self.upper, float)
      if np.any(np.isnan(lo) | np.isnan(hi)):
        raise ValueError(f"Expected box bounds without NaN, got lower={self.lower}, upper={self.upper}.")
      if np.any(lo > hi):
        raise ValueError(f"Expected lower <= upper, got lower={self.lower}, upper={self.upper}.")

  def coordinate_values(self, w: Array) -> Array:
    inside = (w >= self.lower) & (w <= self.upper)
    return jnp.where(inside, 0.0, jnp.inf).astype(w.dtype)

  def prox(self, v: Array, step: Array) -> Array:
    del step
    return jnp.clip(v, self.lower, self.upper)

  def subdiff_distance(self, w: Array, g: Array) -> Array:
    at_lower = jnp.maximum(-g, 0.0)  # normal cone (-inf, 0]: need -g <= 0
    at_upper = jnp.maximum(g, 0.0)  # normal cone [0, inf): need -g >= 0
    inside = jnp.abs(g)
    dist = jnp.where(w <= self.lower, at_lower, jnp.where(w >= self.upper, at_upper, inside))
    return jnp.where(jnp.asarray(self.lower) == jnp.asarray(self.upper), 0.0, dist)


def non_negative() -> Box:
  """The constraint `w >= 0`."""
  return Box(0.0, jnp.inf)
