"""Categorical columns declared publicly, one-hot encoded inside the estimators.

`categories={column: [category, ...], ...}` names a column (a DataFrame's column name, or its
integer position) and its categories. The categories are the user's declaration, public: they
are not read from the data, so the encoding is the same function on neighbouring data sets and
no shape, branch or error depends on a record's value. Each declared column becomes one 0/1
column per category, in the declared order; a value outside the declared categories (a
missing one included) encodes as all zeros, as scikit-learn's
`OneHotEncoder(categories=..., handle_unknown="ignore")`, with no error and no warning (either
would tell whether the data hold such a value). Values compare with Python's `==`, as in that
encoder: `True` and `1.0` are the category `1` (and `[True, 1]` is refused as one category
declared twice), the string `"1"` is not. The other columns stay numeric, in their
order; the encoded columns are laid out column by column in the input's order.

Bounds: a one-hot entry lies in `[0, 1]`, so its symmetric bound `1` is public and exact.
With a declared `feature_bound` (a scalar applies to the numeric columns; a per-feature one
has one entry per *input* column, the entries of the categorical columns unused), the one-hot
columns are bounded by 1 and no budget is spent on them; with `feature_bound=None` every
encoded column's bound is released as for numeric columns.

`coef_` has one entry per encoded column, named by `get_feature_names_out()` as
`column_category` (scikit-learn's `OneHotEncoder` names).
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import numpy as np

from dpgcd_jax.estimators import _ranges


class Encoding(NamedTuple):
  """The public one-hot encoding of an estimator's input columns.

  Attributes:
    names_in: the input columns' names (a DataFrame's, else `x0, ..., x{p-1}`).
    categories: per input column, its declared categories (a tuple), or None (numeric).
  """

  names_in: tuple[str, ...]
  categories: tuple[tuple[Any, ...] | None, ...]

  @property
  def width(self) -> int:
    """The number of encoded columns."""
    return sum(1 if c is None else len(c) for c in self.categories)

  def names_out(self) -> np.ndarray:
    """`column_category` for a one-hot column, the column's name for a numeric one."""
    out: list[str] = []
    for name, cats in zip(self.names_in, self.categories, strict=True):
      out += [name] if cats is None else [f"{name}_{c}" for c in cats]
    return np.asarray(out, dtype=object)

  def encode(self, X: Any) -> np.ndarray:
    """The encoded (n, width) float64 features of the input `X` (a DataFrame or a 2-d array)."""
    columns = _columns(X, len(self.names_in))
    blocks = []
    for values, cats in zip(columns, self.categories, strict=True):
      if cats is None:
        blocks.append(np.asarray(values, dtype=float)[:, None])
      else:
        values = np.asarray(values, dtype=object)
        blocks.append(np.stack([_equal(values, c) for c in cats], axis=1).astype(float))
    return np.concatenate(blocks, axis=1) if blocks else np.empty((len(columns[0]), 0))

  def expand(self, feature: _ranges.Range | None) -> _ranges.Range | None:
    """The declared range of the input columns, over the encoded ones: a one-hot column's
    range is `[-1, 1]` (its entries lie in `[0, 1]`), a numeric column keeps its own."""
    if feature is None:
      return None
    p = len(self.names_in)
    centre, half = (np.broadcast_to(np.asarray(a, float), (p,)) for a in feature)
    out_centre, out_half = [], []
    for j, cats in enumerate(self.categories):
      k = 1 if cats is None else len(cats)
      out_centre += [centre[j] if cats is None else 0.0] * k
      out_half += [half[j] if cats is None else 1.0] * k
    return _ranges.Range(np.asarray(out_centre), np.asarray(out_half))


def _equal(values: np.ndarray, category: Any) -> np.ndarray:
  """`values == category` elementwise on an object array (False for a missing or other value)."""
  if isinstance(category, (str, bytes, int, float, np.generic)):  # a scalar: elementwise, vectorized
    try:
      equal = values == category
      if isinstance(equal, np.ndarray) and equal.shape == values.shape:
        return equal.astype(bool)
    except (TypeError, ValueError):
      pass
  return np.fromiter((v == category if _comparable(v, category) else False for v in values), bool, len(values))


def _comparable(value: Any, category: Any) -> bool:
  """Whether `value == category` is a plain bool (not an array, not a NaN-like missing value)."""
  try:
    return isinstance(value == category, (bool, np.bool_))
  except (TypeError, ValueError):
    return False


def _columns(X: Any, width: int) -> list[Any]:
  """The input's columns (a DataFrame's, or a 2-d array's), checking the count."""
  if hasattr(X, "columns") and hasattr(X, "iloc"):
    columns = [X.iloc[:, j].to_numpy() for j in range(X.shape[1])]
  else:
    array = np.asarray(X, dtype=object)
    if array.ndim != 2:
      raise ValueError(f"Expected X to be 2-d (n, p), got X of shape {array.shape}.")
    columns = [array[:, j] for j in range(array.shape[1])]
  if len(columns) != width:
    raise ValueError(f"Expected X with {width} columns (as in fit), got {len(columns)}.")
  return columns


def declared(categories: Any, X: Any) -> Encoding | None:
  """The encoding that `categories=` declares for the input `X` (None when `categories` is None).

  Raises a ValueError naming `categories` for a column that `X` lacks, an empty, repeated or
  unhashable category list, a non-dict value or a sparse `X`; before any work.
  """
  if categories is None:
    return None
  check(categories)
  if hasattr(X, "tocsr") or hasattr(X, "toarray"):
    raise ValueError(f"Expected a dense X (a DataFrame or an array) with categories=, got X of type "
                     f"{type(X).__name__}.")
  if hasattr(X, "columns") and hasattr(X, "iloc"):
    names = tuple(str(c) for c in X.columns)
  else:
    shape = np.shape(X)
    if len(shape) != 2:
      raise ValueError(f"Expected X to be 2-d (n, p), got X of shape {shape}.")
    names = tuple(f"x{j}" for j in range(shape[1]))
  per_column: list[tuple[Any, ...] | None] = [None] * len(names)
  for column, cats in categories.items():
    j = _position(column, names)
    if per_column[j] is not None:
      raise ValueError(f"Expected each column once in categories, got column {column!r} twice (as "
                       f"{names[j]!r} and position {j}).")
    per_column[j] = tuple(cats)
  return Encoding(names, tuple(per_column))


def check(categories: Any) -> None:
  """Validates `categories=` on its own (its columns are checked against `X` in fit)."""
  if categories is None:
    return
  if not isinstance(categories, dict) or not categories:
    raise ValueError(f"Expected categories to be None or a non-empty dict {{column: [category, ...]}}, "
                     f"got categories={categories!r}.")
  for column, cats in categories.items():
    if isinstance(cats, (str, bytes)) or not hasattr(cats, "__iter__"):
      raise ValueError(f"Expected categories[{column!r}] to be a list of categories, got {cats!r}.")
    cats = list(cats)
    try:
      unique = len(set(cats))
    except TypeError:
      raise ValueError(f"Expected hashable categories in categories[{column!r}], got {cats!r}.") from None
    if not cats or unique != len(cats):
      raise ValueError(f"Expected a non-empty list of distinct categories in categories[{column!r}], got {cats!r}.")


def _position(column: Any, names: tuple[str, ...]) -> int:
  """A column's position: by name first (a DataFrame's, integer names included), else an integer
  position."""
  if str(column) in names and not isinstance(column, bool):
    return names.index(str(column))
  if isinstance(column, (int, np.integer)) and not isinstance(column, bool):
    if not 0 <= column < len(names):
      raise ValueError(f"Expected a column position in [0, {len(names)}) in categories, got {column!r}.")
    return int(column)
  raise ValueError(f"Expected the columns of categories among X's columns {list(names)}, got {column!r}.")
