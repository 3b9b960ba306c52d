"""A differentially private public feature bound: what `fit` spends when none is declared.

Private runs need the coordinate smoothness `M_j` (steps, score normalizations, clipping
thresholds) to be public. Without a declaration, `fit` releases a bound `B` on the
features with this mechanism, clips every entry of `X` to `[-B, B]` (a per-record
transformation with the released `B`) and uses `M_j = beta B^2`.

Mechanism (AboveThreshold, Dwork & Roth 2014, Thm 3.23): per record the statistic
`s_i = max_j |x_ij|`; for the public geometric grid `b_k = 2^{k/4}`, `k = -64..64`
(`2^-16 .. 2^16`), the counts `c_k = #{i : s_i <= b_k}` (sensitivity 1 under
replace-one), the noisy threshold `T = ceil(q n) + Lap(2 / epsilon)` and noisy counts
`c_k + Lap(4 / epsilon)`; `B` is the first `b_k` whose noisy count reaches `T` (the
largest grid point if none does). This is `epsilon`-DP (pure), whatever the data; every
query after the first success is ignored, so drawing all the noise at once is the same
mechanism. The noise makes `B` land somewhat below the `q`-quantile at small
`n epsilon` (more records clipped: bias, not a privacy loss); features above `2^16` are
always clipped. A declared bound (`make_problem(..., feature_bound=B)`) is free and exact:
prefer it whenever the features have a known range.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array
GRID = 2.0 ** (np.arange(-64, 65) / 4.0)
DEFAULT_QUANTILE = 0.9


def private_feature_bound(key: Array, record_max_abs: Array, epsilon: Any,
                          quantile: float = DEFAULT_QUANTILE) -> Array:
  """`epsilon`-DP bound `B` on the features (see the module docstring); jittable, vmappable.

  Args:
    key: a JAX PRNG key.
    record_max_abs: (n,) the statistic `s_i = max_j |x_ij|` of every record
      ([`dpgcd_jax.problem.record_max_abs`][]).
    epsilon: the budget, > 0 (a non-positive or NaN value gives `B = NaN`: fail closed).
    quantile: the target share `q` of records whose features are not clipped.

  Returns:
    A scalar `B` from the public grid `GRID`.
  """
  return bound_at_rank(key, record_max_abs, epsilon, math.ceil(quantile * record_max_abs.shape[0]))


def bound_at_rank(key: Array, record_max_abs: Array, epsilon: Any, rank: Any, *, padding: Any = 0) -> Array:
  """[`private_feature_bound`][dpgcd_jax.privacy.bounds.private_feature_bound] at the public rank
  `ceil(q n)`, on a statistic padded with zero records; jittable, `rank` and `padding` may be traced.

  The last `padding` entries of `record_max_abs` are padded records whose statistic is 0
  (zero features, [`dpgcd_jax.problem.pad`][]): each lies below every grid value, so it adds
  exactly 1 to every count, and `padding` (public: a function of the public `n`) is
  subtracted from the exact integer counts before they are noised. The released bound is
  then that of the unpadded statistic for the same key (the noise draws do not depend on `n`),
  and so is the privacy argument of the module docstring.

  Arithmetic: each query is the exact integer `N_k - rank`, clamped to `[-2^23, 2^23]` (a
  1-Lipschitz map: sensitivity still 1) so that it is exact in float32 at every `n` (a count
  above 2^24 would otherwise round, and neighbouring counts could land 2 apart); the mechanism
  compares `query_k + Lap(4 / epsilon) >= Lap(2 / epsilon)`, AboveThreshold on those queries.
  """
  dtype = record_max_abs.dtype
  if isinstance(padding, int) and not 0 <= padding < record_max_abs.shape[0]:
    raise ValueError(f"Expected 0 <= padding < {record_max_abs.shape[0]} (the statistic's length), got "
                     f"padding={padding}.")
  grid = jnp.asarray(GRID, dtype)
  # #{i : s_i <= b_k}: O(n K) comparisons, exact integers, no sort (a small program to compile).
  counts = jnp.sum(record_max_abs[None, :] <= grid[:, None], axis=1, dtype=jnp.int32) - padding
  limit = 1 << 23
  queries = jnp.clip(counts - jnp.asarray(rank, jnp.int32), -limit, limit).astype(dtype)
  key_threshold, key_counts = jax.random.split(key)
  epsilon = jnp.asarray(epsilon, dtype)
  threshold = 2.0 / epsilon * jax.random.laplace(key_threshold, (), dtype)
  noisy = queries + 4.0 / epsilon * jax.random.laplace(key_counts, grid.shape, dtype)
  above = noisy >= threshold
  index = jnp.where(jnp.any(above), jnp.argmax(above), grid.shape[0] - 1)
  return jnp.where(epsilon > 0, grid[index], jnp.nan)
