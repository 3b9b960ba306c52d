"""Per-example losses: plain JAX functions `loss(w, x, y) -> scalar` and their curvature.

A [`Loss`][dpgcd_jax.losses.Loss] wraps a per-example loss. Losses of generalized-linear form
`l(w; x, y) = phi(<x, w>, y)` also carry `phi` and, when known, an upper bound
`curvature >= sup_z phi''(z, y)`; solvers then keep the margins `Xw` and update
them in O(n) after each coordinate step (the GLM fast path), and the coordinate
smoothness constants have the closed form `M_j = curvature * mean_i x_ij^2`.

Built-ins (closed-form curvature, checked against `jax.hessian` in the tests):

| name | phi(z, y) | sup phi'' |
|---|---|---|
| squared | (z - y)^2 / 2 | 1 |
| logistic | log(1 + exp(-y z)),  y in {-1, +1} | 1 / 4 |
| huber(delta) | r^2/2 if \\|r\\| <= delta else delta (\\|r\\| - delta/2),  r = z - y | 1 |

Custom losses:

```pycon
>>> import jax.numpy as jnp
>>> log_cosh = glm_loss(lambda z, y: jnp.logaddexp(z - y, y - z) - jnp.log(2.0),
...                     curvature=1.0, name="log_cosh")
>>> my_loss = custom_loss(lambda w, x, y: jnp.log(jnp.cosh(x @ w - y)))

```

A GLM loss without `curvature` gets a numerical estimate (see
[`dpgcd_jax.problem.coordinate_smoothness`][]); any other loss gets its
smoothness constants from the Hessian diagonal computed by JAX. Pass public
constants `smoothness=` to [`dpgcd_jax.make_problem`][] to avoid both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp

Array = jax.Array
PerExampleLoss = Callable[[Array, Array, Array], Array]
MarginLoss = Callable[[Array, Array], Array]


@dataclasses.dataclass(frozen=True)
class Loss:
  """A smooth convex per-example loss (static: part of the compiled structure).

  Attributes:
    fn: `fn(w, x, y) -> scalar`, the loss of one example `(x, y)` at `w`.
    name: a label for tables and errors.
    phi: for GLM losses, `phi(z, y)` with `fn(w, x, y) = phi(x @ w, y)`; else None.
    curvature: an upper bound on `phi''` (GLM losses), None when unknown.
    labels: the values `y` may take (e.g. `(-1.0, 1.0)` for the logistic loss), or None:
      any finite value (checked by [`dpgcd_jax.make_problem`][]).
  """

  fn: PerExampleLoss
  name: str
  phi: MarginLoss | None = None
  curvature: float | None = None
  labels: tuple[float, ...] | None = None

  @property
  def is_glm(self) -> bool:
    return self.phi is not None


@dataclasses.dataclass(frozen=True)
class _MarginComposition:
  """`fn(w, x, y) = phi(<x, w>, y)`: a picklable, hashable per-example loss (no lambda)."""

  phi: MarginLoss

  def __call__(self, w: Array, x: Array, y: Array) -> Array:
    return self.phi(jnp.dot(x, w), y)


def glm_loss(phi: MarginLoss, *, curvature: float | None = None, name: str = "glm",
             labels: tuple[float, ...] | None = None) -> Loss:
  """A loss `l(w; x, y) = phi(<x, w>, y)`; `curvature` bounds `phi''` if known; `labels`:
  the values `y` may take (None: any finite value)."""
  if curvature is not None and not curvature > 0:
    raise ValueError(f"Expected curvature > 0, got curvature={curvature!r}.")
  if labels is not None:
    labels = tuple(float(v) for v in labels)
  return Loss(fn=_MarginComposition(phi), name=name, phi=phi, curvature=curvature, labels=labels)


def custom_loss(fn: PerExampleLoss, *, name: str = "custom") -> Loss:
  """Any smooth convex per-example loss `fn(w, x, y) -> scalar`."""
  return Loss(fn=fn, name=name)


def _squared(z: Array, y: Array) -> Array:
  return 0.5 * (z - y) ** 2


def _logistic(z: Array, y: Array) -> Array:
  return jnp.logaddexp(0.0, -y * z)


def _weighted_logistic(z: Array, y: Array) -> Array:
  return jnp.abs(y) * jnp.logaddexp(0.0, -jnp.sign(y) * z)


squared = glm_loss(_squared, curvature=1.0, name="squared")
logistic = glm_loss(_logistic, curvature=0.25, name="logistic", labels=(-1.0, 1.0))
# The logistic loss weighted per example: the target y = +-w carries the label (its sign) and the
# weight w = |y| in [0, 1] (the estimators' class_weight): phi'' = |y| s (1 - s) <= 1/4.
weighted_logistic = glm_loss(_weighted_logistic, curvature=0.25, name="weighted_logistic")


@dataclasses.dataclass(frozen=True)
class _HuberPhi:
  """Huber `phi` with threshold `delta`; equal thresholds give equal (hashable) objects, so
  `huber(1.0)` built twice hits the same jit cache entry."""

  delta: float

  def __call__(self, z: Array, y: Array) -> Array:
    r = jnp.abs(z - y)
    return jnp.where(r <= self.delta, 0.5 * r**2, self.delta * (r - 0.5 * self.delta))


def huber(delta: float = 1.0) -> Loss:
  """Huber loss of the residual `z - y` with threshold `delta` (curvature 1)."""
  if not delta > 0:
    raise ValueError(f"Expected delta > 0, got delta={delta!r}.")
  return glm_loss(_HuberPhi(float(delta)), curvature=1.0, name=f"huber({delta:g})")


BUILTIN = {"squared": squared, "logistic": logistic, "huber": huber()}


def get(loss: Loss | str | PerExampleLoss) -> Loss:
  """Returns a [`Loss`][dpgcd_jax.losses.Loss] from a Loss, a built-in name or a plain function `fn(w, x, y)`."""
  if isinstance(loss, Loss):
    return loss
  if isinstance(loss, str) and loss in BUILTIN:
    return BUILTIN[loss]
  if callable(loss) and not isinstance(loss, str):
    return custom_loss(loss, name=getattr(loss, "__name__", "custom"))
  raise ValueError(
      f"Expected loss to be a dpgcd_jax.Loss, a function loss(w, x, y) -> scalar or one of "
      f"{tuple(BUILTIN)}, got loss={loss!r}."
  )
