"""Statistics of the experiments: quasi-sparsity of a solution and significance of a difference.

Host-side NumPy / SciPy only.
"""

from __future__ import annotations

import math
import warnings
from typing import Any
from typing import NamedTuple

import numpy as np
from scipy import stats as sp_stats

ALPHA = 0.05


def top_share(w: Any, k: int = 10) -> float:
  """Share of `||w||_2^2` held by the `k` largest coordinates in absolute value.

  The paper's argument for DP-GCD rests on quasi-sparse solutions: a few coordinates carry
  most of the norm, so a few greedy updates get most of the way. 1.0 for a solution with at
  most `k` non-zeros; `k / p` for a solution whose coordinates all have the same size.

  Args:
    w: (p,) the solution.
    k: number of coordinates, >= 1.

  Returns:
    The share in [0, 1]; NaN for `w = 0`.

  ```pycon
  >>> top_share([3.0, 4.0, 0.0], k=1)
  0.64

  ```
  """
  if int(k) != k or k < 1:
    raise ValueError(f"Expected k to be an int >= 1, got k={k!r}.")
  v = np.asarray(w, np.float64).ravel()
  if v.size == 0 or not np.all(np.isfinite(v)):
    raise ValueError(f"Expected w to be a non-empty finite vector, got w.shape={v.shape}.")
  sq = np.sort(v**2)[::-1]
  total = float(sq.sum())
  if total == 0.0:
    return math.nan
  return round(float(sq[: int(k)].sum()) / total, 12)


class Comparison(NamedTuple):
  """Welch's t-test of `mean(a) < mean(b)` (two-sided p-value).

  Attributes:
    difference: `mean(a) - mean(b)`.
    statistic: Welch's t.
    pvalue: two-sided p-value (0 when both samples are constant and differ, 1 when equal).
    significant: `pvalue < alpha`.
    n_a, n_b: sample sizes.
  """

  difference: float
  statistic: float
  pvalue: float
  significant: bool
  n_a: int
  n_b: int


def welch(a: Any, b: Any, alpha: float = ALPHA) -> Comparison:
  """Welch's unequal-variance t-test between two samples of relative errors.

  Args:
    a, b: 1-d samples, at least 2 values each.
    alpha: level of the test, in (0, 1).

  Returns:
    A `Comparison`.

  ```pycon
  >>> welch([1.0, 1.1, 0.9], [2.0, 2.1, 1.9]).significant
  True

  ```
  """
  x, y = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
  for name, s in (("a", x), ("b", y)):
    if s.size < 2 or not np.all(np.isfinite(s)):
      raise ValueError(f"Expected {name} to hold >= 2 finite values, got {name}.size={s.size}.")
  if not 0.0 < alpha < 1.0:
    raise ValueError(f"Expected alpha in (0, 1), got alpha={alpha}.")
  diff = float(x.mean() - y.mean())
  if x.var() == 0.0 and y.var() == 0.0:
    t, p = (0.0, 1.0) if diff == 0.0 else (math.copysign(math.inf, diff), 0.0)
  else:
    with warnings.catch_warnings():  # nearly constant samples (runs stuck at w^0): precision note
      warnings.simplefilter("ignore", RuntimeWarning)
      res = sp_stats.ttest_ind(x, y, equal_var=False)
    t, p = float(res.statistic), float(res.pvalue)
  return Comparison(diff, t, p, p < alpha, int(x.size), int(y.size))


def within_spread(mean_a: float, std_a: float, mean_b: float, std_b: float) -> bool:
  """Whether the intervals `mean +- std` of two results overlap (the brief's "within spread")."""
  return abs(mean_a - mean_b) <= std_a + std_b
