"""Problems on a device layout: built on public sizes, padded, clipped to public bounds, restricted.

Every function here maps a problem record by record with public parameters (declared bounds,
public sizes `n`, `p` and their buckets, a public or released subset of the features): none adds
a privacy cost, and each says why.
[`from_columns`][dpgcd_jax.layout.from_columns] makes the problem on a
[`dpgcd_jax.dense.columns`][] layout, [`pad`][dpgcd_jax.layout.pad] pads a problem to public
sizes ([`dpgcd_jax.problem.bucket`][]), [`with_feature_bound`][dpgcd_jax.layout.with_feature_bound]
and [`clip_features`][dpgcd_jax.layout.clip_features] clip to public bounds,
[`restrict`][dpgcd_jax.layout.restrict] keeps the features of a public or released subset, and
[`record_statistic`][dpgcd_jax.layout.record_statistic] is the statistic a private feature bound
is released from.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import penalties
from dpgcd_jax import sparse
from dpgcd_jax.privacy import bounds
from dpgcd_jax.problem import DataSmoothness
from dpgcd_jax.problem import Problem
from dpgcd_jax.problem import PublicSmoothness
from dpgcd_jax.problem import check_feature_bound
from dpgcd_jax.problem import check_penalty
from dpgcd_jax.problem import check_smoothness
from dpgcd_jax.problem import is_sparse

Array = jax.Array


def from_columns(XT: Array, y: Any, loss: losses_lib.Loss | str, *, feature_bound: Any,
                 num_examples: int, num_features: int, penalty: penalties.Penalty | None = None) -> Problem:
  """The problem on a layout from [`columns`][dpgcd_jax.dense.columns], with a public feature bound.

  `XT` is (P, N): `num_examples = n <= N` records and `num_features = p <= P` features, the
  rest zero padding. `XT` is clipped to `feature_bound` (scalar or (p,)) in place (the
  buffer is donated: do not reuse `XT`), `M_j = beta B_j^2`, `y` ((n,) or (N,)) is padded
  with the loss's last label (0 without labels), and padded features get bound 1, smoothness
  `beta` and penalty parameters 0, as in [`pad`][dpgcd_jax.layout.pad] (which says why the
  padding is private). The same problem as `pad(make_problem(X, y, loss,
  feature_bound=feature_bound, penalty=penalty), N, P)`, with `X` read once.

  `feature_bound=None`: the bound is released inside the fit, by the `prelude` of
  [`dpgcd_jax.solvers.budget.private_fit`][] (the estimators: one program for the release and
  the runs). `XT` is then left as it is, the smoothness is NaN (`run` on it raises, naming
  this) and `smoothness_source` is "data".
  """
  loss = losses_lib.get(loss)
  P, N = XT.shape
  n, p = operator.index(num_examples), operator.index(num_features)
  if not (0 < n <= N and 0 < p <= P):
    raise ValueError(f"Expected 0 < num_examples <= {N} and 0 < num_features <= {P}, got num_examples={n} and "
                     f"num_features={p}.")
  _validate.check_finite_array("y", y, ndim=1)
  if np.shape(y)[0] not in (n, N):
    raise ValueError(f"Expected y to have num_examples={n} (or {N}) entries, got y.shape={np.shape(y)}.")
  if feature_bound is None and loss.curvature is None:
    raise ValueError(f"Expected a feature_bound for loss {loss.name!r}, which has no known curvature bound "
                     f"(a bound released in the fit needs one), got feature_bound=None.")
  released = feature_bound is None
  checked, beta = check_feature_bound(1.0 if released else feature_bound, p, loss, XT.dtype)
  # Padded on the host (public values; no per-shape device program): bound 1 on padded features.
  bound = np.pad(np.broadcast_to(checked, (p,)), (0, P - p), constant_values=1.0)
  label = 0.0 if loss.labels is None else loss.labels[-1]
  # jax.device_put: a host array becomes a device array without a per-shape program.
  y = jax.device_put(np.pad(np.asarray(y, XT.dtype), (0, N - np.shape(y)[0]), constant_values=label))
  smoothness = jax.device_put(np.full(P, np.nan, XT.dtype) if released else XT.dtype.type(beta) * bound**2)
  problem = Problem(XT=XT if released else _clip_rows(XT, jax.device_put(bound)), y=y, smoothness=smoothness,
                    l2=jax.device_put(XT.dtype.type(0.0)),
                    penalty=_padded_penalty(check_penalty(penalty, p), P), loss=loss,
                    smoothness_source=DataSmoothness.DATA if released else PublicSmoothness.FEATURE_BOUND,
                    rows=_true_size(n, N),
                    columns=_true_size(p, P))
  if not released:
    check_smoothness(problem)
  return problem


@functools.partial(jax.jit, donate_argnums=0)
def _clip_rows(XT: Array, bound: Array) -> Array:
  return jnp.clip(XT, -bound[:, None], bound[:, None])


def _padded_penalty(penalty: Any, num_features: int) -> Any:
  """The penalty with its per-feature parameters padded with 0 to `num_features`."""
  def grow(leaf: Any) -> Any:  # host leaves on the host (no per-shape device program)
    if jnp.ndim(leaf) != 1:
      return leaf
    return (np.pad if isinstance(leaf, np.ndarray) else jnp.pad)(leaf, (0, num_features - jnp.shape(leaf)[0]))

  return jax.tree.map(grow, penalty)


def _true_size(size: int, padded: int) -> Array | None:
  """The true size as a traced count when padded (a `Problem`'s `rows` / `columns`), else None."""
  return jax.device_put(np.int32(size)) if padded > size else None


def pad(problem: Problem, num_examples: int, num_features: int) -> Problem:
  """`problem` padded with zero records and zero features to public sizes (e.g. [`bucket`][dpgcd_jax.problem.bucket]).

  Privacy: the padding is a function of the public `n` and `p` only. A padded record has
  `x = 0`, so its per-example GLM gradient `phi'(0, y) x` is exactly 0 in every coordinate
  and the exact clipped sums are unchanged; every mean divides by the true `n`
  (`problem.rows`), so the means, their sensitivity `2 C_j / n` and the ledger are those of
  the unpadded problem. A padded feature is all zeros with `M_j = beta` (bound 1) and is
  masked out of every selection (`problem.columns`): it is never selected, so its weight
  stays 0. With the same key a padded DP-GCD run releases what the unpadded run releases
  (the noise draws of the true coordinates are the same: JAX's partitionable threefry draws
  element `j` from `j` alone), when the sizes come from `bucket` (any larger size is as
  private, with a coarser grid for the exact sums). Dense GLM problems only (a padded record
  of another loss may have a non-zero gradient), with a public smoothness (`fit` refuses to
  release a feature bound on a padded problem: its statistic would count the padded records).
  """
  if is_sparse(problem) or not problem.loss.is_glm:
    raise ValueError(f"Expected a dense problem with a GLM loss to pad, got loss {problem.loss.name!r}"
                     f"{' with sparse features' if is_sparse(problem) else ''}.")
  p, n = problem.XT.shape
  if num_examples < n or num_features < p:
    raise ValueError(f"Expected padded sizes >= the problem's ({n}, {p}), got ({num_examples}, {num_features}).")
  if problem.rows is not None or problem.columns is not None:
    raise ValueError("Expected an unpadded problem to pad.")
  label = 0.0 if problem.loss.labels is None else problem.loss.labels[-1]
  XT = problem.XT
  assert not isinstance(XT, sparse.SparseColumns)  # checked above
  return dataclasses.replace(
      problem,
      XT=jnp.pad(XT, ((0, num_features - p), (0, num_examples - n))),
      y=jnp.pad(problem.y, (0, num_examples - n), constant_values=label),
      smoothness=jnp.pad(problem.smoothness, (0, num_features - p), constant_values=problem.curvature),
      penalty=_padded_penalty(problem.penalty, num_features),
      rows=_true_size(n, num_examples),
      columns=_true_size(p, num_features),
      factors=None,
  ) if (num_examples, num_features) != (n, p) else problem


def with_feature_bound(problem: Problem, bound: Array, *, unit: bool = False) -> Problem:
  """The problem with public feature bounds `B_j` > 0, (p,): features clipped to `[-B_j, B_j]`
  and `M_j = beta B_j^2`; with `unit`, the clipped features divided by `B_j` too (in `[-1, 1]`
  after rounding: division is correctly rounded and monotone) and `M_j = beta`. Jittable.

  A per-record map with public `B`: it adds no privacy cost. `B_j` must be a normal float
  (`BOUND_RANGE`): `B_j^2` then neither overflows nor vanishes.
  """
  clipped = clip_features(problem, bound)
  XT = clipped.XT
  if unit:
    if isinstance(XT, sparse.SparseColumns):
      raise ValueError("Expected dense features for unit=True (scale sparse features on the host).")
    XT = XT / bound[:, None]
  beta = jnp.asarray(problem.curvature, problem.smoothness.dtype)
  smoothness = jnp.broadcast_to(beta if unit else beta * jnp.square(bound.astype(problem.smoothness.dtype)),
                                problem.smoothness.shape)
  return dataclasses.replace(clipped, XT=XT, smoothness=smoothness,
                             smoothness_source=PublicSmoothness.FEATURE_BOUND, factors=None)


def clip_features(problem: Problem, bound: Array) -> Problem:
  """The problem with every feature entry clipped to `[-B_j, B_j]` (a per-record map)."""
  XT = problem.XT
  if isinstance(XT, sparse.SparseColumns):
    return dataclasses.replace(problem, XT=XT.clip_entries(bound), factors=None)
  bound = jnp.broadcast_to(bound, (problem.num_features,))
  return dataclasses.replace(problem, XT=jnp.clip(XT, -bound[:, None], bound[:, None]), factors=None)


def restrict(problem: Problem, columns: Array) -> Problem:
  """The problem on the features `columns` ((s,) indices, may be traced): a jittable gather.

  Columns of `X`, their smoothness and the penalty's per-coordinate parameters; `y`,
  `l2`, the loss and the smoothness source are kept, and the features' int8 limbs when a run made
  them (`factors`, derivative clipping). Sparse features: each selected column's window of `K`
  stored entries (zero-padded), O(s K).

  A per-record map (each record keeps its entries in `columns`): no privacy cost of its own
  when `columns` is public or released (the support of [`dpgcd_jax.solvers.two_stage`][]).
  """
  XT = problem.XT
  XT = _sparse_columns(XT, columns) if isinstance(XT, sparse.SparseColumns) else XT[columns]
  factors = None if problem.factors is None else problem.factors[:, columns]
  return dataclasses.replace(problem, XT=XT, smoothness=problem.smoothness[columns],
                             penalty=penalties.coordinate(problem.penalty, columns), factors=factors)


def _sparse_columns(XT: sparse.SparseColumns, columns: Array) -> sparse.SparseColumns:
  """The (s, n) [`SparseColumns`][dpgcd_jax.sparse.SparseColumns] of `columns`: `K` entries each."""
  k, s = XT.window, columns.shape[0]
  rows, vals = jax.vmap(XT.column)(columns)  # (s, K), zero values past each column's end
  padded = lambda a, fill: jnp.concatenate([a.reshape(-1), jnp.full(k, fill, a.dtype)])
  return sparse.SparseColumns(
      rows=padded(rows, 0), cols=padded(jnp.repeat(jnp.arange(s, dtype=jnp.int32), k), s - 1),
      vals=padded(vals, 0), indptr=jnp.arange(s + 1, dtype=jnp.int32) * k,
      shape=(s, XT.shape[1]), window=k)


FEATURE_BATCH = 64  # features per step of `record_statistic` on a dense layout


def record_statistic(XT: Any, num_features: Any) -> Array:
  """(N,) the statistic `s_i` of a private feature bound ([`dpgcd_jax.privacy.bounds`][]: the
  grid point below which lie 9 in 10 of record `i`'s nonzero magnitudes) over the first
  `num_features` features of a layout: dense (P, N) or [`dpgcd_jax.sparse.SparseColumns`][]
  (an intercept's row and padded features past `num_features` do not count; a padded record
  gets 0). Jittable, `num_features` may be traced.

  Dense: a histogram over the public grid filled by batches of `FEATURE_BATCH` features, no
  temporary the size of `XT` (a plain reduction of `|XT|` left a 1.3x copy of X at 20000 x 2000).
  """
  P, N = XT.shape
  histogram = bounds.empty_histogram(N)
  if isinstance(XT, sparse.SparseColumns):
    magnitudes = jnp.where(XT.cols < num_features, jnp.abs(XT.vals), 0)
    return bounds.record_quantiles(bounds.add_to_histogram(histogram, magnitudes, XT.rows))
  batch = min(FEATURE_BATCH, P)
  records = jnp.broadcast_to(jnp.arange(N), (batch, N))

  def add_batch(b: Array, histogram: Array) -> Array:
    start = jnp.minimum(b * batch, P - batch)  # the last batch overlaps: its repeated features are masked
    features = start + jnp.arange(batch)
    counted = (features < num_features) & (features >= b * batch)
    rows = jax.lax.dynamic_slice_in_dim(XT, start, batch)
    return bounds.add_to_histogram(histogram, jnp.where(counted[:, None], jnp.abs(rows), 0), records)

  return bounds.record_quantiles(jax.lax.fori_loop(0, -(-P // batch), add_batch, histogram))


