"""Whether a dense table's features lie on unequal scales: a private majority vote of its records.

DP-GCD's selection with one released bound `B` drowns the features on a scale far below `B`;
its scale-free variant ([`dpgcd_jax.solvers.scale_free`][]) selects on `sign(x_ij)` and loses
about 0.02 of accuracy where the scales are equal (sign keeps `sqrt(2 / pi)` of a Gaussian
feature's correlation). The estimators choose between them from this release
([`dpgcd_jax.estimators`][], `scaling="auto"`).

The statistic. Record `i` votes "spread" when more than `THRESHOLD` of its nonzero magnitudes
`|x_ij|` lie below `s_i / RATIO`, `s_i` the `QUANTILE`-quantile of those magnitudes (the
record's typical size, as in [`dpgcd_jax.privacy.bounds`][]), and at least `MIXED` of its nonzero
entries have each sign; a record with no nonzero entry votes "equal". On standard Gaussian
features the share is `P(|Z| < 1.64 / 8) = 0.16` for every record; on Gaussian features of scales
`10^U[-1, 1]` about 0.55; binary features have none (every nonzero magnitude is the same). The
signs' condition: the scale-free selection reads `sign(x_ij)`, which says nothing on a column that
never changes sign (counts, prices, areas: raw breast_cancer's records all have the share 1.0), so
such tables keep one bound (declare their ranges `(lower, upper)` instead). The release says whether
the votes "spread" are a majority.

Mechanism. The vote is a function of record `i` alone, so replacing a record moves the count
`V` of "spread" votes by at most 1. AboveThreshold ([`dpgcd_jax.release_mechanisms.AboveThreshold`][],
the proof in [`dpgcd_jax.privacy.bounds`][]) on the two integer queries
`(clip(V - ceil(n / 2)), clip(n - ceil(n / 2)))` (the second is public: sensitivity 0) at
`epsilon_s = SHARE * epsilon`: "spread" when the first is above the noisy threshold. It is
`epsilon_s`-DP (pure), plus its 3 discrete draws (ledger entry "sampler draws" at `epsilon_s`).
At `n epsilon_s = 60` (the estimators' smallest, `MIN_N_EPSILON`) the noise scales are at most
33 and 67 votes against a margin of `n / 2` when the records agree.

Measured (a NumPy study of the vote's statistic with the global bound in place of `s_i`, and of
both designs' accuracy, eps = 1): it picks the better design, or one within noise of it, on the
high-dimensional dense sets (standardized, scales `10^U[-1, 1]`, partial spreads, a one-hot
column), scikit-learn's `make_classification` raw and rescaled, and breast_cancer, wine,
diabetes and iris, each centred and standardized; it picks the scale-free one on centred
`digits` (share 0.33), whose small-scale pixels carry no signal, and loses 0.02 there.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import discrete_grid
from dpgcd_jax import release_mechanisms
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import ledger as ledger_lib

SHARE = 0.03  # of epsilon
RATIO = 8.0
THRESHOLD = 0.29
QUANTILE = 0.9
MIXED = 0.1  # the least share of a record's nonzero entries of each sign for it to vote "spread"
LABEL = "scale spread"


def record_votes(X: np.ndarray) -> np.ndarray:
  """(n,) bool: the vote of every record of the dense (n, p) `X` (module docstring). Host, O(n p log p)."""
  magnitudes = np.sort(np.abs(np.asarray(X)), axis=1)  # each row's zeros first
  p = magnitudes.shape[1]
  nonzero = np.count_nonzero(magnitudes, axis=1)
  rank = np.ceil(QUANTILE * nonzero).astype(np.int64)  # the quantile's position among the nonzeros
  typical = np.take_along_axis(magnitudes, np.clip(p - nonzero + rank - 1, 0, p - 1)[:, None], axis=1)[:, 0]
  small = np.count_nonzero((magnitudes > 0) & (magnitudes < typical[:, None] / RATIO), axis=1)
  negative = np.count_nonzero(np.asarray(X) < 0, axis=1)
  mixed = (negative >= MIXED * nonzero) & (nonzero - negative >= MIXED * nonzero)
  return (nonzero > 0) & (small > THRESHOLD * nonzero) & mixed


def epsilon_of(epsilon: float) -> float:
  """The release's budget at a fit's `epsilon` (public): `SHARE` of it, at most `bounds.MAX_EPSILON`, as
  the mechanism computes it (in float32: the value charged is the value run)."""
  return float(np.float32(bounds.release_epsilon(SHARE * float(epsilon))))


def ledger(epsilon: float) -> ledger_lib.Ledger:
  """The release's ledger at the fit's `epsilon`: `(LABEL, PureDp(epsilon_s), 1)` and its 3 draws."""
  epsilon_s, mechanism = epsilon_of(epsilon), release_mechanisms.AboveThreshold()
  return ledger_lib.Ledger.of((LABEL, mechanism.event(epsilon_s), 1)).with_draws(mechanism.draws(2), 1, epsilon_s)


def release(key: jax.Array, X: np.ndarray, epsilon: float) -> bool | None:
  """Whether the records' "spread" votes are a majority, released at `epsilon_of(epsilon)`; None when
  the sampler failed (probability `< 3.5e-18` per draw, independent of the data)."""
  n = int(np.shape(X)[0])
  if n >= 2**31:  # public: int32 counts
    raise ValueError(f"Expected fewer than 2^31 records, got {n}.")
  counts = np.array([np.count_nonzero(record_votes(X)), n], np.int32)
  queries = discrete_grid.count_query(jnp.asarray(counts), jnp.int32(math.ceil(n / 2)))
  index = int(np.asarray(release_mechanisms.AboveThreshold().run(key, queries, np.float32(epsilon_of(epsilon)))))
  return None if index < 0 else index == 0
