"""Log-spaced hyperparameter grids that contain their optimum: edges and bounded extension.

A grid is the product of two log-spaced `Axis` (step size and clip). After a sweep the
best point (lowest mean relative error over the seeds) is *on an edge* when it takes the first
or last value of an axis: the optimum may then lie outside the grid, and a comparison at that
point compares grids, not algorithms. `edge_sides` finds those sides and `extend`
adds values beyond them, at the axis' own ratio; the runner repeats sweep / extend a bounded
number of rounds and flags every best point still on an edge.

Everything here is host-side and pure (no JAX).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

import numpy as np

LOW, HIGH = "low", "high"
# A best mean relative error at or above this is "no progress": no grid point beats w^0, so
# the position of the argmin among ties is meaningless and the grid is not extended.
NO_PROGRESS = 1.0 - 1e-6


@dataclasses.dataclass(frozen=True)
class Axis:
  """Increasing, log-spaced values of one hyperparameter.

  Attributes:
    name: the hyperparameter ("step_size" or "clip").
    values: at least two positive values with a constant ratio `values[i+1] / values[i]`.
  """

  name: str
  values: tuple[float, ...]

  def __post_init__(self):
    values = tuple(float(v) for v in self.values)
    if len(values) < 2 or not all(v > 0 and math.isfinite(v) for v in values):
      raise ValueError(f"Expected values to hold >= 2 positive finite numbers, got values={self.values!r}.")
    ratios = np.diff(np.log(values))
    if np.any(ratios <= 0) or not np.allclose(ratios, ratios[0], rtol=0.0, atol=1e-3):
      raise ValueError(f"Expected increasing log-spaced values, got values={self.values!r}.")
    object.__setattr__(self, "values", values)

  def _per_decade(self) -> int | None:
    """`m` when the values are `10^(j / m)` for consecutive integers `j` (4 digits), else None."""
    r = float(np.exp(np.mean(np.diff(np.log(self.values)))))
    m = round(math.log(10.0) / math.log(r))
    if m < 1:
      return None
    lattice = 10.0 ** (np.round(np.log10(self.values) * m) / m)
    return m if np.allclose(lattice, self.values, rtol=1e-3, atol=0.0) else None

  @property
  def ratio(self) -> float:
    """The spacing of the axis and of its extensions (`10^(1/m)` for m values per decade)."""
    m = self._per_decade()
    return 10.0 ** (1.0 / m) if m else float(np.exp(np.mean(np.diff(np.log(self.values)))))

  def extended(self, side: str, count: int = 2) -> Axis:
    """The axis with `count` more values beyond `side` ("low" or "high"), at the same ratio."""
    if side not in (LOW, HIGH):
      raise ValueError(f"Expected side in ('low', 'high'), got side={side!r}.")
    if int(count) != count or count < 1:
      raise ValueError(f"Expected count to be an int >= 1, got count={count!r}.")
    m = self._per_decade()
    edge = self.values[0] if side == LOW else self.values[-1]
    sign = -1 if side == LOW else 1
    if m:
      j = round(math.log10(edge) * m)
      new = [_round(10.0 ** ((j + sign * k) / m)) for k in range(1, count + 1)]
    else:
      new = [_round(edge * self.ratio ** (sign * k)) for k in range(1, count + 1)]
    if side == LOW:
      return Axis(self.name, tuple(reversed(new)) + self.values)
    return Axis(self.name, self.values + tuple(new))


def _round(x: float) -> float:
  return float(f"{x:.4g}")


def log_axis(name: str, low: float, high: float, per_decade: int = 2) -> Axis:
  """`per_decade` values per decade from `low` to `high` (both included, rounded to 4 digits)."""
  if not 0 < low < high:
    raise ValueError(f"Expected 0 < low < high, got low={low}, high={high}.")
  num = int(round(per_decade * math.log10(high / low))) + 1
  exps = np.linspace(math.log10(low), math.log10(high), num)
  return Axis(name, tuple(_round(10.0**e) for e in exps))


def points(axes: Sequence[Axis]) -> list[tuple[float, ...]]:
  """The product of the axes' values, first axis slowest."""
  return list(itertools.product(*(a.values for a in axes)))


def edge_sides(axes: Sequence[Axis], best: Sequence[float]) -> list[tuple[str, str]]:
  """`[(axis name, "low" | "high")]` for every axis whose first / last value `best` takes.

  Args:
    axes: the grid's axes.
    best: the best point, one value per axis.
  """
  if len(best) != len(axes):
    raise ValueError(f"Expected best to have {len(axes)} values, got best={tuple(best)!r}.")
  sides = []
  for axis, value in zip(axes, best, strict=True):
    if math.isclose(value, axis.values[0], rel_tol=1e-9):
      sides.append((axis.name, LOW))
    elif math.isclose(value, axis.values[-1], rel_tol=1e-9):
      sides.append((axis.name, HIGH))
  return sides


def extend(axes: Sequence[Axis], sides: Sequence[tuple[str, str]], count: int = 2) -> list[Axis]:
  """The axes with `count` values added beyond each of `sides` (from `edge_sides`)."""
  out = list(axes)
  names = [a.name for a in axes]
  for name, side in sides:
    i = names.index(name)
    out[i] = out[i].extended(side, count)
  return out


@dataclasses.dataclass
class Search:
  """The state of one grid search: the axes, every evaluated point and its per-seed errors.

  Attributes:
    axes: the current axes (after extensions).
    errors: point -> per-seed relative errors.
    nnz: point -> per-seed numbers of non-zeros.
    rounds: extension rounds done.
    extended: every `(axis, side)` extended, in order.
  """

  axes: list[Axis]
  errors: dict[tuple[float, ...], np.ndarray] = dataclasses.field(default_factory=dict)
  nnz: dict[tuple[float, ...], np.ndarray] = dataclasses.field(default_factory=dict)
  rounds: int = 0
  extended: list[tuple[str, str]] = dataclasses.field(default_factory=list)

  def missing(self) -> list[tuple[float, float]]:
    """Points `(step size, clip)` of the current grid (two axes) not evaluated yet."""
    return [(step, clip) for step, clip in points(self.axes) if (step, clip) not in self.errors]

  def best(self) -> tuple[float, ...]:
    """The evaluated point of lowest mean error (the first in grid order among ties)."""
    grid = [p for p in points(self.axes) if p in self.errors]
    means = np.array([float(np.mean(self.errors[p])) for p in grid])
    return grid[int(np.argmin(np.where(np.isfinite(means), means, np.inf)))]

  def no_progress(self) -> bool:
    """Whether no point beats `w^0` (best mean relative error >= 1 - 1e-6)."""
    return float(np.mean(self.errors[self.best()])) >= NO_PROGRESS

  def edges(self) -> list[tuple[str, str]]:
    """The sides of the grid the best point sits on (empty: interior)."""
    return edge_sides(self.axes, self.best())

  def step(self, max_rounds: int, count: int = 2) -> bool:
    """Extends the grid beyond the best point's edges; False when done.

    Done: the best point is interior, no point makes progress, or `max_rounds` were spent.
    """
    sides = self.edges()
    if not sides or self.no_progress() or self.rounds >= max_rounds:
      return False
    self.axes = extend(self.axes, sides, count)
    self.extended += sides
    self.rounds += 1
    return True
