"""Public ranges as users write them: a bound `B` (`|x| <= B`) or a pair `(lower, upper)`.

`feature_bound=` and a regressor's `target_bound=` take a positive scalar or array `B`
(the symmetric range `[-B, B]`), or a Python tuple `(lower, upper)` whose ends are scalars or
per-feature arrays. A tuple is always a range: per-feature symmetric bounds are a list or an
array. The estimators use a range through its centre and half-width,

    c = (lower + upper) / 2,    h = (upper - lower) / 2,

and fit on the centred values `x - c`, clipped to `[-h, h]` inside the run (for a regressor,
`y - c_y` clipped to `[-h_y, h_y]`). The model on the centred features,
`<w, x - c> + b`, is returned in raw units: `coef_ = w`, `intercept_ = b - <w, c>` (`+ c_y`).

Sensitivity: after the clip every centred entry has `|x'_ij| <= h_j`, which is all that the
proofs of the releases and of the run use of a symmetric bound `B_j`; so each one holds with
`B_j = h_j`. The centre is public (declared), so the shift reads no data beyond the entry it
moves; its floating-point rounding happens before the clip, so the bound `|x'_ij| <= h_j`
holds exactly whatever it rounds to. A range narrower than the symmetric bound that covers
it (`max(|lower|, |upper|)`) halves the clipping loss and the noise's relative size for
one-sided data such as counts in `[0, u]`.
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import numpy as np

from dpgcd_jax.estimators import _released


class Range(NamedTuple):
  """A public range `[centre - half_width, centre + half_width]` (scalars or (p,) arrays)."""

  centre: np.ndarray
  half_width: np.ndarray

  @property
  def centred(self) -> bool:
    """Whether the centre is 0 (a symmetric bound: the data are used as they are)."""
    return not np.any(self.centre)


def declared(name: str, bound: Any, size: int | None = None, *, scalar: bool = False) -> Range | None:
  """The range a user declared as `name` (None when `bound` is None), validated.

  `size`: the number of features the arrays must have (None: any length); `scalar`: scalars
  only (a target). Raises a ValueError naming `name` for a bad length, shape, ordering or value.
  """
  if bound is None:
    return None
  if scalar:
    size = 0
  if not isinstance(bound, tuple):
    half = _released.check_positive_bound(name, bound, _shape(bound, size))
    return Range(np.zeros_like(half), half)
  if len(bound) != 2:
    raise ValueError(f"Expected {name} to be a bound B > 0 or a tuple (lower, upper), got a tuple of "
                     f"{len(bound)} values: {name}={bound!r}.")
  lower, upper = (_end(f"{name}[{i}]", end, size) for i, end in enumerate(bound))
  if not np.all(lower < upper):
    raise ValueError(f"Expected {name}=(lower, upper) with lower < upper (every feature), got {name}={bound!r}.")
  with np.errstate(over="ignore"):
    half = (upper - lower) / 2.0
  _released.check_positive_bound(f"the half-width (upper - lower) / 2 of {name}", half, _shape(half, size))
  return Range(lower + half, half)


def _shape(values: Any, size: int | None) -> tuple[int, ...] | None:
  """The shape a 1-d bound must have (None: a scalar only); `size` 0 means scalars only."""
  if np.ndim(values) != 1 or size == 0:
    return None
  return np.shape(values) if size is None else (size,)


def _end(name: str, end: Any, size: int | None) -> np.ndarray:
  """One end of a range: a finite real scalar, or an array of `size` (any length when None)."""
  try:
    values = np.asarray(end, dtype=float)
  except (TypeError, ValueError):
    values = None
  if values is None or np.asarray(end).dtype.kind not in "iuf" or values.ndim > 1 or (
      values.ndim == 1 and size is not None and values.shape != (size,)):
    expected = ("a real scalar" if size == 0 else "a real scalar or a 1-d array" if size is None else
                f"a real scalar or of shape ({size},)")
    raise ValueError(f"Expected {name} to be {expected}, got {name}={end!r}.")
  if not np.all(np.isfinite(values)):
    raise ValueError(f"Expected {name} finite, got {name}={end!r}.")
  return values

