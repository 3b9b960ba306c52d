"""A differentially private public feature bound: what `fit` spends when none is declared.

Private runs need the coordinate smoothness `M_j` (steps, score normalizations, clipping
thresholds) to be public. Without a declaration, `fit` releases a bound `B` on the
features with this mechanism, clips every entry of `X` to `[-B, B]` (a per-record
transformation with the released `B`) and uses `M_j = beta B^2`.

The statistic: per record `i`, `s_i`, the smallest grid point `b_k` that holds at least a
share `RECORD_QUANTILE = 0.9` of the record's nonzero magnitudes `|x_ij|` (0 for an empty
record; above the grid, `inf`): [`record_quantiles`][dpgcd_jax.privacy.bounds.record_quantiles].
The bound follows the features' typical size, not their extreme: on standard Gaussian
features the per-record maximum over `p = 5000` features is about 4.8 and grows with `p`, while
`s_i` stays about 1.7; clipping only the top tenth of each record's entries keeps nearly all of
the signal and shrinks every score's noise, which is in units of `B` (measured,
`dpgcd_jax.experiments.high_dim`, p = 5000, n = 4000, eps = 1, 2 seeds: DPGCDClassifier's
accuracy 0.734 -> 0.754 on standardized features and 0.629 -> 0.678 on raw features of unequal
scales, with the maximum then with this statistic, the rest of the defaults unchanged). On
binary features `s_i = 1` (the maximum). Any per-record statistic has the same privacy
argument: one record moves one `s_i`, hence each count below by at most 1.

Mechanism (AboveThreshold, Dwork & Roth 2014, Thm 3.23, on integers): for the public geometric
grid `b_k = 2^{k/4}`,
`k = -64..64` (`2^-16 .. 2^16`), the counts `c_k = #{i : s_i <= b_k}` and the exact integer
queries `Q_k = clip(c_k - ceil(q n))` (sensitivity 1 under replace-one:
`dpgcd_jax.discrete_grid.count_query`); an integer noisy threshold `rho`, discrete
Laplace of scale `t_1 > 2 / epsilon`, and integer noises `nu_k`, discrete Laplace of scale
`t_2 > 4 / epsilon` (`dpgcd_jax.discrete_noise.discrete_laplace`, the scales rounded up:
[`above_threshold_scales`][dpgcd_jax.release_mechanisms.above_threshold_scales]); `B` is the
first `b_k` with `Q_k + nu_k >= rho`, compared exactly in int32 (the largest grid point if
none). This is `epsilon`-DP (pure), whatever the data; every query after the first success
is ignored, so drawing all the noise at once is the same mechanism. The noise makes `B` land
somewhat below the `q`-quantile at small `n epsilon` (more records clipped: bias, not a
privacy loss); features above `2^16` are always clipped. A declared bound
(`make_problem(..., feature_bound=B)`) is free and exact: prefer it whenever the features
have a known range.

Proof (the continuous proof, with sums over integers). Let `D'` be a neighbour, `Q'_k` its
queries (`|Q'_k - Q_k| <= 1`), and fix the output `k`. `P_D(k) = sum_rho P(rho) prod_{j<k}
P(nu_j < rho - Q_j) P(nu_k >= rho - Q_k)`. Substitute `rho = rho' - 1` (an integer shift):
`P(rho' - 1) <= e^{1 / t_1} P(rho')`; for `j < k`, `rho' - 1 - Q_j <= rho' - Q'_j`, so each
factor is at most `P(nu_j < rho' - Q'_j)`; and `rho' - 1 - Q_k >= rho' - Q'_k - 2`, so
`P(nu_k >= rho' - 1 - Q_k) <= P(nu_k >= rho' - Q'_k - 2) <= e^{2 / t_2} P(nu_k >= rho' - Q'_k)`
(the discrete Laplace's `P(Z >= a) <= e^{c / t} P(Z >= a + c)`). Hence
`P_D(k) <= e^{1 / t_1 + 2 / t_2} P_D'(k) < e^{epsilon} P_D'(k)`; the output "none above"
(released as the top point) has the bound `e^{1 / t_1}` the same way. Every value is an
integer, so no float rounding enters (a float Laplace is not pure DP: its finite range makes
events of probability 0 on one side). A sampler cap (probability `< 3.5e-18` per draw, independent of
the data) or a scale out of the sampler's range (`4 / epsilon >= MAX_SCALE`, i.e. `epsilon`
below about 1.2e-4) releases NaN; each of the `K + 1 = 130` draws is within total variation
`3.5e-18` of its exact law (`dpgcd_jax.discrete_noise`), charged by the ledger entry "sampler
draws" ([`dpgcd_jax.solvers.budget.release_ledger`][]): the release is
`(epsilon, (1 + e^epsilon) 130 x 3.5e-18)`-DP. The draws are made in the mechanism layer, by
[`AboveThreshold`][dpgcd_jax.release_mechanisms.AboveThreshold] (its event `PureDp(epsilon)` is the
one charged).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import discrete_grid
from dpgcd_jax import release_mechanisms

# The thresholds' scales, in the mechanism layer with the draws; re-exported here, where the release is.
from dpgcd_jax.release_mechanisms import above_threshold_scales  # noqa: F401

Array = jax.Array
GRID = 2.0 ** (np.arange(-64, 65) / 4.0)
DEFAULT_QUANTILE = 0.9  # of the records (the rank of the release)
# The largest budget a release spends (`release_epsilon`): at 10 the count noise's scales are
# 0.2 and 0.4 records, already exact in effect, and the samplers' charge stays about 1e-11
# (`dpgcd_jax.privacy.events.DiscreteDraws`); a larger share of a large budget goes to the run.
MAX_EPSILON = 10.0


def release_epsilon(epsilon: float) -> float:
  """The budget a release spends out of a share `epsilon`: `min(epsilon, MAX_EPSILON)` (public)."""
  return min(float(epsilon), MAX_EPSILON)
RECORD_QUANTILE = 0.9  # of a record's nonzero magnitudes (its statistic `s_i`)


def empty_histogram(num_records: int) -> Array:
  """(K + 1, N) int32 zeros: per record, the count of its nonzero magnitudes in each grid cell
  (cell `k`: `b_{k-1} < |x| <= b_k`; cell `K`: above the grid)."""
  return jnp.zeros((GRID.size + 1, num_records), jnp.int32)


def add_to_histogram(histogram: Array, magnitudes: Array, records: Array) -> Array:
  """`histogram` ([`empty_histogram`][dpgcd_jax.privacy.bounds.empty_histogram]) plus one count
  per nonzero magnitude `magnitudes[m] = |x_ij|` of record `records[m]` (same shape), in the cell of
  the first grid point `b_k >= |x|` (exact float comparisons); zeros are not counted. Jittable."""
  cell = jnp.searchsorted(jnp.asarray(GRID, magnitudes.dtype), magnitudes, side="left", method="scan")
  cell = jnp.where(magnitudes > 0, cell, histogram.shape[0])  # past the last cell: dropped
  return histogram.at[cell, records].add(1, mode="drop")


def record_quantiles(histogram: Array, quantile: float = RECORD_QUANTILE) -> Array:
  """(N,) the statistic `s_i` of the module docstring from the records' histogram: the smallest
  grid point holding at least `ceil(quantile m_i)` of record `i`'s `m_i` nonzero magnitudes,
  `inf` when that is above the grid, 0 when `m_i = 0`. A grid value, so the release's
  comparisons `s_i <= b_k` are exact. Jittable."""
  below = jnp.cumsum(histogram, axis=0)
  total = below[-1]
  needed = jnp.maximum(jnp.ceil(quantile * total.astype(jnp.float32)).astype(jnp.int32), 1)
  cell = jnp.argmax(below >= needed[None, :], axis=0)
  values = jnp.append(jnp.asarray(GRID, jnp.float32), jnp.inf)
  return jnp.where(total > 0, values[cell], 0.0)


def private_feature_bound(key: Array, statistic: Array, epsilon: Any,
                          quantile: float = DEFAULT_QUANTILE) -> Array:
  """`epsilon`-DP bound `B` on the features (see the module docstring); jittable, vmappable.

  Args:
    key: a JAX PRNG key.
    statistic: (n,) the statistic `s_i` of every record (module docstring;
      [`dpgcd_jax.layout.record_statistic`][]).
    epsilon: the budget, > 0 (a non-positive or NaN value gives `B = NaN`: fail closed).
    quantile: the target share `q` of records whose features are not clipped.

  Returns:
    A scalar `B` from the public grid `GRID`.
  """
  return bound_at_rank(key, statistic, epsilon, math.ceil(quantile * statistic.shape[0]))


def bound_at_rank(key: Array, statistic: Array, epsilon: Any, rank: Any, *, padding: Any = 0) -> Array:
  """[`private_feature_bound`][dpgcd_jax.privacy.bounds.private_feature_bound] at the public rank
  `ceil(q n)`, on a statistic padded with zero records; jittable, `rank` and `padding` may be traced.

  The last `padding` entries of `statistic` are padded records whose statistic is 0
  (zero features, [`dpgcd_jax.layout.pad`][]): each lies below every grid value, so it adds
  exactly 1 to every count, and `padding` (public: a function of the public `n`) is
  subtracted from the exact integer counts before they are noised. The released bound is
  then that of the unpadded statistic for the same key (the noise draws do not depend on `n`),
  and so is the privacy argument of the module docstring.

  Arithmetic: int32 throughout (module docstring): the counts, the queries
  `clip(N_k - rank, -2^29, 2^29)` (1-Lipschitz: sensitivity still 1), the discrete Laplace
  noises and the comparison `query_k + nu_k >= rho`, exact at every `n < 2^31`.
  """
  if isinstance(padding, int) and not 0 <= padding < statistic.shape[0]:
    raise ValueError(f"Expected 0 <= padding < {statistic.shape[0]} (the statistic's length), got "
                     f"padding={padding}.")
  grid = jnp.asarray(GRID, statistic.dtype)
  # #{i : s_i <= b_k}: O(n K) comparisons, exact integers, no sort (a small program to compile).
  counts = jnp.sum(statistic[None, :] <= grid[:, None], axis=1, dtype=jnp.int32) - padding
  index = release_mechanisms.AboveThreshold().run(key, discrete_grid.count_query(counts, rank), epsilon)
  return jnp.where(index >= 0, grid[jnp.maximum(index, 0)], jnp.nan)
