"""The typical size of a record's features in units of their bounds, released privately.

A clipping threshold that follows the data. With public bounds `B_j`, a GLM's per-example
coordinate derivative at `w = 0` is `phi'(0) x_ij`, in units of `B_j`: `phi'(0) |x_ij| / B_j`.
Its size depends on how tight the bounds are: binary features under `B = 1` give terms equal to
`phi'(0)` exactly, Gaussian features under a loose `B = 10 sigma` give terms 12x smaller. A
fixed clip is wrong for one of them: too low, every term is clipped and the gradient becomes a
count of signs; too high, the noise (scaled to the clip) drowns terms far below it. This module
releases the median of the per-record statistic

$$
s_i = \\frac{1}{|S_i|} \\sum_{j \\in S_i} \\min(|x_{ij}| / B_j, 1), \\qquad
S_i = \\{j : x_{ij} \\ne 0\\},
$$

the mean size of the record's nonzero features in units of their bounds (`s_i = 1` for a record
with no nonzero feature: it adds nothing to any gradient, and 1 is the value of a tight bound,
the fixed rule's; a low value would clip every other record's terms). The classifier clips at
`phi'(0)` times it ([`dpgcd_jax.estimators`][]).

A regressor's residual at `w = 0` is its target `y_i - c` in units of the declared bound `T`:
the same statistic of the one column `y - c` under the bound `T`, `s_i = min(|y_i - c| / T, 1)`
(`1` for `y_i = c`), released the same way under the label
`TARGET_LABEL`; the regressor clips at a fixed
multiple of it (`DPGCDRegressor`).

Mechanism: the noisy binary search of [`dpgcd_jax.privacy.scales`][] on one "feature", the
counts `N_k = #{i : s_i <= g_k}` on the public grid [`GRID`][dpgcd_jax.privacy.typical_size.GRID]
(`2^{k/4}`, `k = -24..0`: from 1/64 to 1, 25 points, 5 rounds), threshold `q n` with
`q = 1/2`. The release is a grid point.

Sensitivity (replace-one neighbours, `n` public). `s_i` is a function of record `i` alone (a
row's own sum; how it is rounded does not matter), so replacing a record moves every `N_k` by
at most 1: the search's sensitivity is 1 in every round, the case `p = 1` of the scales'
argument, and its ledger is the scales' ledger with `L = 5` rounds
([`ledger`][dpgcd_jax.privacy.typical_size.ledger]). Counts are exact integers (host int64,
int32 in the search: `n < 2^31` is checked, a public condition), the noise is the exact
discrete Gaussian: no floating-point event depends on the data (as for the scales, in every
mode).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import scales
from dpgcd_jax.privacy import scales_budget

GRID = 2.0 ** (np.arange(-24, 1) / 4.0)
"""The public grid: quarter octaves from `2^-6` to 1 (25 points, 5 rounds)."""
QUANTILE = 0.5
LABEL = "typical feature size"
TARGET_LABEL = "typical target size"
ROW_BLOCK = 4096  # rows per block of the dense statistic: a (block, p) temporary, not a copy of X


def record_sizes(X: Any, bound: Any) -> np.ndarray:
  """`s_i` (module docstring) of every record of `X`, (n,) float64 in [0, 1].

  Args:
    X: (n, p) dense array or scipy.sparse matrix, finite.
    bound: (p,) or scalar positive public bounds.
  """
  from scipy import sparse

  bound = np.asarray(bound, np.float64)
  with np.errstate(all="ignore"):  # no data-dependent floating-point warning or error (under a user's seterr)
    total, count = _sums(X, bound) if not sparse.issparse(X) else _sparse_sums(sparse.csr_array(X, copy=True), bound)
    return np.where(count > 0, total / np.maximum(count, 1.0), 1.0)


def _sparse_sums(rows: Any, bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Per record: the sum of `min(|x_ij| / B_j, 1)` and the count of nonzero entries (duplicates
  summed first, as the runs see them)."""
  rows.sum_duplicates()
  bounds = np.broadcast_to(bound, (rows.shape[1],))
  size = np.minimum(np.abs(rows.data.astype(np.float64)) / bounds[rows.indices], 1.0)
  row_of = np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr))
  total = np.bincount(row_of, weights=size, minlength=rows.shape[0])
  return total, np.bincount(row_of, weights=(rows.data != 0).astype(np.float64), minlength=rows.shape[0])


def _sums(X: Any, bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """`_sparse_sums` of a dense `X`, by blocks of rows."""
  X = np.asarray(X)
  total, count = np.empty(X.shape[0]), np.empty(X.shape[0])
  for start in range(0, X.shape[0], ROW_BLOCK):
    block = np.abs(X[start:start + ROW_BLOCK].astype(np.float64))
    total[start:start + ROW_BLOCK] = np.minimum(block / bound, 1.0).sum(axis=1)
    count[start:start + ROW_BLOCK] = np.count_nonzero(block, axis=1)
  return total, count


def informative(n: int, noise: float) -> bool:
  """Whether a release at multiplier `noise` on `n` records can tell sizes apart (public):
  the count noise `sigma` is at most `n / 4` (the median's count `n / 2` is 2 sigma above 0)
  and within the sampler's range. Measured on binary features (2000 keys, sigma = 211):
  the release fell below 1 with probability 0.40 at n = 500, 0.03 at 1000, 0 at 2000."""
  sigma, valid = scales.count_sigma(noise, 1)
  return bool(valid) and float(sigma) <= n / 4.0


def noise_at(epsilon: float, delta: float) -> float:
  """The multiplier at which the release ALONE is `(epsilon, delta)`-DP."""
  return scales_budget.calibrate_scales(epsilon, delta, features=1, grid=GRID)


def ledger(noise: float, label: str = LABEL) -> ledger_lib.Ledger:
  """The release's ledger: `(label, DiscreteGaussian(noise), 5)` and its one sampler draw per round
  (`label`: `LABEL` for the features,
  `TARGET_LABEL` for a regressor's target)."""
  return scales_budget.scales_ledger(noise, grid=GRID, label=label, features=1)


def release(key: jax.Array, X: Any, bound: Any, noise: float) -> float | None:
  """The private median of `s_i` (a grid point), or None when the sampler failed (a cap hit
  with probability `< 3.5e-18`, independent of the data, or a `noise` out of its range).

  Args:
    key: a JAX PRNG key.
    X: (n, p) features (dense or scipy.sparse), finite; bound: their public bounds.
    noise: the multiplier (`noise_at`); 0 is the exact, non-private median.
  """
  return release_counts(key, grid_counts(X, bound), np.shape(X)[0], noise)


def grid_counts(X: Any, bound: Any) -> np.ndarray:
  """The counts `N_k = #{i : s_i <= g_k}` of the records of `X` on `GRID`, (25,) int64.

  Counts of row chunks add up to the counts of their rows, exactly, in any order: the
  release over chunks ([`release_counts`][dpgcd_jax.privacy.typical_size.release_counts] on
  their sum) is the release on the whole `X`.
  """
  return np.searchsorted(np.sort(record_sizes(X, bound)), GRID, side="right").astype(np.int64)


def release_counts(key: jax.Array, counts: Any, num_examples: int, noise: float) -> float | None:
  """[`release`][dpgcd_jax.privacy.typical_size.release] from the exact `grid_counts` of all
  `num_examples` records (`n`, public)."""
  if num_examples >= 2**31:  # public: the search's counts are int32
    raise ValueError(f"Expected fewer than 2^31 records, got num_examples={num_examples}.")
  counts = np.asarray(counts, np.int64).astype(np.int32)[None, :]
  search = scales.noisy_search(key, counts, noise, QUANTILE * num_examples, num_features=1)
  index = int(np.asarray(search.index)[0])  # on the host: no small program compiled for the indexing
  return None if index < 0 else float(GRID[index])
