"""Differentially private per-feature scales: a noisy binary search on a public log grid.

Private scaling needs one bound `B_j` per feature (clip `x_ij` to `[-B_j, B_j]`, divide by
`B_j`). This module releases `B_j`, an estimate of the `q`-quantile of `|x_ij|` over the
records, rounded up to a PUBLIC geometric grid `b_0 < ... < b_{K-1}` (default [`GRID`][dpgcd_jax.privacy.scales.GRID],
`2^{k/4}`, `k = -64..63`: quarter octaves from `2^-16` to `2^15.75`, `K = 128`).

Mechanism (all features in parallel, `L = ceil(log2 K)` rounds, `L = 7` by default). For
feature `j` and grid point `b_k` let

$$
N_{jk} = \\#\\{i : |x_{ij}| \\le b_k\\}, \\qquad t = q n .
$$

Feature `j` runs a binary search for the smallest `k` with `N_jk >= t` on the index range
`[lo_j, hi_j] = [0, K - 1]`. In round `r` every feature queries its midpoint
`m_j = floor((lo_j + hi_j) / 2)` and the round releases the vector of noisy integer queries

$$
\\tilde Q_j^{(r)} = \\mathrm{clip}(N_{j m_j} - \\lceil t \\rceil) + Z_j, \\qquad
Z_j \\sim \\mathcal N_{\\mathbb Z}(0, \\sigma^2) \\text{ i.i.d.}, \\qquad \\sigma > s \\sqrt{p},
$$

(`clip` to `[-2^29, 2^29]`, `dpgcd_jax.discrete_grid.count_query`; `Z_j` the exact
discrete Gaussian of `dpgcd_jax.discrete_noise.discrete_gaussian`, of integer `sigma`
rounded up from `s sqrt(p)`: [`count_sigma`][dpgcd_jax.release_mechanisms.count_sigma]), then
`hi_j = m_j` if `tilde Q_j >= 0` (i.e. the noisy count reaches `t`) else `lo_j = m_j + 1` (a
feature with `lo_j = hi_j` stays put). The release is `B_j = b_{lo_j}`: the grid point where
the noisy count of records below it first reaches `q n` (the top point `b_{K-1}` when none
does).

Sparse `X` ([`dpgcd_jax.sparse.SparseColumns`][]): zeros are values too. `|0| <= b_k` for
every grid point, so feature `j` contributes `n - nnz_j` to every `N_jk` (`nnz_j` stored
entries, explicit zeros included, counted by their value); the counts equal the dense ones.
A feature with more than `(1 - q) n` zeros has `q`-quantile 0 and gets `B_j = b_0`.

Sensitivity (replace-one neighbours, `n` public). Replacing record `i` by `i'` changes
`N_jk` by `1[|x'_ij| <= b_k] - 1[|x_ij| <= b_k]` in `{-1, 0, 1}`, for every `j` and
`k`, and so every query (`count_query` is 1-Lipschitz on the integers). Whatever the queried
indices `m_j` (one per feature), the integer vector `(Q_{j m_j})_j` moves by at most 1 in
each of its `p` coordinates: l2 sensitivity `sqrt(p)`, attained (e.g. a record moved from
below `b_0` to above `b_{K-1}` in every feature). Guarantee: the discrete Gaussian mechanism
on an integer of sensitivity `D` has Renyi divergence at most `alpha D^2 / (2 sigma^2)`
(Canonne, Kamath & Steinke 2020, Thm 4) and independent coordinates add theirs, so one
round has `alpha p / (2 sigma^2) < alpha / (2 s^2)` at every order: the event
`DiscreteGaussian(s)` (`1 / (2 s^2)`-zCDP; no GDP or PLD route claims it: the ledger
composes it by RDP). The indices `m_j` are functions of the earlier rounds' releases only,
so this holds conditionally on the past and the `L` rounds compose adaptively:
`DiscreteGaussian(s)` with count `L`, `rho = L / (2 s^2)`; `B` is post-processing.
[`scales_ledger`][dpgcd_jax.privacy.scales_budget.scales_ledger] is that ledger entry, to be added to
the ledger of the run that uses `B` (one composition, one calibration);
[`calibrate_scales`][dpgcd_jax.privacy.scales_budget.calibrate_scales] gives the `s` at which the
scales alone are `(epsilon, delta)`-DP. Whether a release at a budget is informative, from
public `n` and `p` only: [`dpgcd_jax.privacy.scales_budget`][].

Why this mechanism. Two alternatives were measured on the same data (50,000 x 200 down to
400 x 30, scales over 5 decades, `q = 0.9`; `benchmarks/bench_scales.py`): (a) one Gaussian
histogram of `|x_ij|` over the grid (l2 sensitivity `sqrt(2p)`) and the first grid point
whose noisy cumulative count reaches `q n`: a cumulative count sums the noise of many bins
(`sigma sqrt(K/4)` in the middle even with the known total `n`), and a finer grid hurts;
(b) per-feature exponential mechanisms (Gumbel-max, score `-|N_jk - q n|`, sensitivity 1,
`BoundedRange` composed over `p`): its error is `(2 / eps_j) log K` counts, and when this
approaches `(1 - q) n` it picks points in the empty region above the data, whose score is
only `(1 - q) n` below the best. The binary search pays `L = log2 K` rounds but each query
reads ONE count; it was as good as (a) at large `n` and informative from 2-4x smaller `n`
than (a), and (b) was worst below 20,000 rows. Resolution is cheap: halving the grid step
costs one more round (8 rounds for eighth octaves, measured no better than quarter octaves).

Floating point: none on the data's side. Counts, queries, noise and comparisons are int32
(exact at any `n < 2^31`; float32 counts round to even above `2^24`, which doubled the
sensitivity), the samplers use integer arithmetic only, and the one float, the public
`sigma`, is rounded up (`dpgcd_jax.discrete_grid.integer_scale_above`). A float Gaussian
would not do, in any mode: JAX's float32 normal takes `2^23` values, none above 5.3, so a
count more than `5.3 sigma` below the threshold never crosses it on `D` and can on `D'`,
and the mass of such events (about `2^-23` per draw, `L p` draws) is far above any useful
delta. What is left: a sampler cap (probability `< 3.5e-18` per draw, drawn before and apart
from the data) releases `B_j = NaN`; with the other caps, each draw's law is within total
variation `3.5e-18` of the exact one (`dpgcd_jax.discrete_noise`), charged as for the secure
solvers: [`scales_ledger`][dpgcd_jax.privacy.scales_budget.scales_ledger]`(..., features=p)`
adds its `L p` draws, and the ledger `(1 + e^epsilon) L p 3.5e-18` to delta
([`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws]). The sampler's range
`sigma <= MAX_SCALE` (32767) bounds `s sqrt(p)`: beyond, every `B_j` is NaN, and
[`scales_informative`][dpgcd_jax.privacy.scales_budget.scales_informative] is False. Only grid
points are released (the noisy queries enter comparisons only). The draws are made in the
mechanism layer, by [`NoisySearch`][dpgcd_jax.release_mechanisms.NoisySearch] (its event is the
one charged above); [`noisy_search`][dpgcd_jax.release_mechanisms.noisy_search] and
[`count_sigma`][dpgcd_jax.release_mechanisms.count_sigma] are re-exported here.

Examples:
  >>> import jax, numpy as np
  >>> from dpgcd_jax.privacy import scales, scales_budget
  >>> rng = np.random.default_rng(0)
  >>> X = rng.normal(size=(20_000, 3)) * np.array([0.01, 1.0, 100.0])
  >>> noise = scales_budget.calibrate_scales(0.5, 1e-8, features=3)
  >>> B = scales.private_feature_scales(jax.random.key(0), X.T, noise)
  >>> ratio = np.asarray(B) / np.quantile(abs(X), 0.9, axis=0)   # B_j rounds up to the grid
  >>> bool(np.all((ratio >= 0.5) & (ratio <= 2.0)))
  True
  >>> ledger = scales_budget.scales_ledger(noise, features=3)   # compose with the run's ledger
  >>> round(ledger.epsilon(1e-8), 3)
  0.5

References:
  * Karp, Kleinberg. Noisy binary search and its applications. SODA 2007.
  * Canonne, Kamath, Steinke. The Discrete Gaussian for Differential Privacy. NeurIPS 2020.
  * Bun, Steinke. Concentrated Differential Privacy. TCC 2016.
  * Durfee, Rogers. Practical Differentially Private Top-k Selection with Pay-what-you-get
    Composition. NeurIPS 2019 (bounded range, alternative (b)).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import release_mechanisms
from dpgcd_jax import sparse as sparse_lib

# The device side (the draws), in the mechanism layer; re-exported here, where the release is.
from dpgcd_jax.release_mechanisms import Search  # noqa: F401
from dpgcd_jax.release_mechanisms import count_sigma  # noqa: F401
from dpgcd_jax.release_mechanisms import noisy_search  # noqa: F401

Array = jax.Array

GRID = 2.0 ** (np.arange(-64, 64) / 4.0)
"""The default public grid: quarter octaves `2^{k/4}`, `k = -64..63` (128 points, 7 rounds)."""
DEFAULT_QUANTILE = 0.9


def _check_grid(grid: Any) -> np.ndarray:
  if not _validate.is_concrete(grid):
    raise ValueError("Expected grid to be a public (concrete) array, got a traced value.")
  g = np.asarray(grid, dtype=float)
  if g.ndim != 1 or g.size < 2 or not np.all(np.isfinite(g)) or np.any(g <= 0.0) or np.any(
      np.diff(g) <= 0.0):
    raise ValueError(f"Expected grid to be a 1-D strictly increasing array of >= 2 positive "
                     f"finite values, got grid={np.array2string(g, threshold=6)}.")
  return g


def num_rounds(grid: Any = GRID) -> int:
  """`L = ceil(log2 K)`: the rounds of the binary search over a grid of `K` points."""
  return max(1, math.ceil(math.log2(_check_grid(grid).size)))


HISTOGRAM_BATCH = 64  # features per batch of grid_counts (dense, above HISTOGRAM_DIRECT_ENTRIES)
HISTOGRAM_DIRECT_ENTRIES = 1 << 20  # up to 4 MB of bins: one vectorized pass


def grid_counts(XT: Any, grid: Any = GRID) -> Array:
  """`N_jk = #{i : |x_ij| <= b_k}`, (p, K): the exact counts the search queries (jittable).

  Args:
    XT: (p, n) dense features (the `XT` slot of a problem) or a
      [`dpgcd_jax.sparse.SparseColumns`][] (zeros are counted, see the module docstring).
    grid: the public grid, (K,), strictly increasing and positive.

  Returns:
    (p, K) counts (int32), nondecreasing in `k`, at most `n`.
  """
  g = _check_grid(grid)
  K = g.size
  if isinstance(XT, sparse_lib.SparseColumns):
    p, n = XT.shape
    vals, cols = XT.vals, XT.cols
    stored = (jnp.arange(vals.shape[0]) < XT.nnz).astype(jnp.int32)  # not the padding (a public length)
    bins = jnp.searchsorted(jnp.asarray(g, vals.dtype), jnp.abs(vals), side="left")
    hist = jax.ops.segment_sum(stored, cols * (K + 1) + bins, num_segments=p * (K + 1)).reshape(p, K + 1)
    zeros = n - jnp.diff(XT.indptr).astype(jnp.int32)
    hist = hist.at[:, 0].add(zeros)
  else:
    XT = jnp.asarray(XT)
    if XT.ndim != 2:
      raise ValueError(f"Expected XT to have 2 dimensions (p, n), got XT.shape={XT.shape}.")
    p, n = XT.shape
    grid = jnp.asarray(g, XT.dtype)

    def histograms(rows: Array) -> Array:  # (rows, K + 1) histograms; bin c: |x| <= b_k iff c <= k
      bins = jnp.searchsorted(grid, jnp.abs(rows), side="left")
      ids = jnp.arange(rows.shape[0], dtype=jnp.int32)[:, None] * (K + 1) + bins
      return jax.ops.segment_sum(jnp.ones(ids.size, jnp.int32), ids.ravel(),
                                 num_segments=rows.shape[0] * (K + 1)).reshape(-1, K + 1)

    if p * n <= HISTOGRAM_DIRECT_ENTRIES or p <= HISTOGRAM_BATCH:
      hist = histograms(XT)  # small: one vectorized pass (its (p, n) bins are small too)
    else:
      # Batches of features, the last one starting at p - batch (rows written twice get the
      # same values): the (batch, n) bins are the only temporary, not a copy of X.
      def batch(b: Array, hist: Array) -> Array:
        start = jnp.minimum(b * HISTOGRAM_BATCH, p - HISTOGRAM_BATCH)
        block = histograms(jax.lax.dynamic_slice_in_dim(XT, start, HISTOGRAM_BATCH))
        return jax.lax.dynamic_update_slice_in_dim(hist, block, start, axis=0)

      hist = jax.lax.fori_loop(0, -(-p // HISTOGRAM_BATCH), batch, jnp.zeros((p, K + 1), jnp.int32))
  return jnp.cumsum(hist, axis=1)[:, :K]


def private_feature_scales(key: Array, XT: Any, noise: Any, *, quantile: Any = DEFAULT_QUANTILE,
                           grid: Any = GRID, num_examples: int | Array | None = None,
                           num_features: int | Array | None = None) -> Array:
  """Private per-feature bounds `B_j` from the public `grid` (module docstring); jittable.

  The release is `DiscreteGaussian(noise)` composed [`num_rounds`][dpgcd_jax.privacy.scales.num_rounds]
  times (`rho = L / (2 noise^2)` zCDP) for replace-one neighbours with `n` public:
  [`scales_ledger`][dpgcd_jax.privacy.scales_budget.scales_ledger]. Vmappable over `key`, `noise` and `quantile`.

  Args:
    key: a JAX PRNG key.
    XT: (p, n) dense features (records are columns, as a problem's `XT`) or
      [`dpgcd_jax.sparse.SparseColumns`][].
    noise: the multiplier `s` (e.g. from
      [`calibrate_scales`][dpgcd_jax.privacy.scales_budget.calibrate_scales]); the count
      noise is the discrete Gaussian of integer `sigma > s sqrt(p)`. NaN, negative or beyond
      the sampler's range (`s sqrt(p) >= MAX_SCALE`) gives `B = NaN` (fail closed); 0 is the
      exact, non-private rounded quantile.
    quantile: `q` in (0, 1): `B_j` estimates the `q`-quantile of `|x_ij|` rounded up to
      the grid (the top of the grid when it lies above).
    grid: the public grid (default [`GRID`][dpgcd_jax.privacy.scales.GRID]).
    num_examples, num_features: for a dense layout padded with zeros
      ([`dpgcd_jax.dense.columns`][]: (P, N), the data in the first `n` columns and `p`
      rows): the true `n` and `p` (public). The counts of the first `p` rows are taken and
      the `N - n` padded records, zeros that lie in every count, subtracted: the exact counts
      of the unpadded data, so the release (and its noise draws, of shape (p,)) is the
      unpadded one for the same key. A traced `num_features` (one program for every `p` of
      a layout) keeps the `P` rows: the first `p` are the release above (JAX's partitionable
      threefry, `jax_threefry_partitionable`, the default of recent JAX versions, draws entry
      `j` from `j` alone, and every loop of the samplers is masked per entry: the same draws
      and indices; with `jax_threefry_partitionable=False` the draws differ, equally private),
      the rest NaN.

  Returns:
    (p,) bounds `B_j`, grid values ((P,) for a traced `num_features`, NaN beyond `p`).

  Raises:
    ValueError: for a bad `XT`, `grid` or a concrete `quantile` outside (0, 1).
  """
  _validate.check_key("key", key)
  _validate.check_number("quantile", quantile, low=0.0, high=1.0, low_open=True, high_open=True)
  g = _check_grid(grid)
  counts = grid_counts(XT, g)  # validates XT
  P, N = XT.shape
  n = N if num_examples is None else num_examples
  for name, value, size in (("num_examples", num_examples, N), ("num_features", num_features, P)):
    if isinstance(value, int) and not 0 < value <= size:
      raise ValueError(f"Expected 0 < {name} <= {size} (XT.shape={XT.shape}), got {name}={value}.")
  traced = num_features is not None and not isinstance(num_features, int)
  counts = (counts if traced else counts[:num_features]) - (N - n)
  search = release_mechanisms.NoisySearch().run(key, counts, noise, jnp.asarray(quantile) * n,
                                                num_features=num_features if traced else None)
  values = jnp.asarray(g, jnp.result_type(float))
  found = search.index >= 0
  if traced:
    found &= jnp.arange(P) < jnp.asarray(num_features)
  return jnp.where(found, values[jnp.maximum(search.index, 0)], jnp.nan)
