"""Sparse features: O(nnz) clipped coordinate gradients and O(nnz_j) coordinate updates.

DP-GCD's use case is high dimension (the paper's dorothea: 800 x 100,000 binary, about 1%
non-zeros). [`dpgcd_jax.make_problem`][] accepts `scipy.sparse` matrices (any format) and
`jax.experimental.sparse.BCOO`; it stores them as [`SparseColumns`][dpgcd_jax.sparse.SparseColumns] in the problem's
`XT` slot, and every operation the solvers need reads the stored entries only:

- clipped coordinate gradients `g_j = (1/n) sum_i clip(phi'(z_i, y_i) x_ij, -C_j, C_j)`:
  a zero entry contributes `clip(0) = 0` exactly, so the sum over the stored entries (a
  segment sum by column) equals the dense result; O(nnz);
- the margins `z = Xw` (segment sum by row) and their update after `w_j` changes: the
  column's entries, found through column pointers, in O(K) (the column window, below);
- the smoothness `M_j = beta mean_i x_ij^2`, the feature clipping to a bound and the
  per-record statistic of [`dpgcd_jax.privacy.bounds`][], all O(nnz).

Memory: O(nnz) (three arrays of `capacity + K` entries, plus column pointers). Only GLM losses
`phi(<x, w>, y)` have this structure; DP-SGD and custom per-example losses need dense rows.

Shapes: `p` and `n` are public; the stored entries are padded with zeros to a capacity, and
every column is read through a window of `K` entries ([`from_matrix`][dpgcd_jax.sparse.from_matrix]).
Declared (`capacity=`, `window=`, e.g. from a public bound on the non-zeros of a record), they
make every shape, hence the program that runs and its running time, a function of public values
only. By default they are the buckets ([`dpgcd_jax.problem.bucket`][]) of `nnz` and of the
largest column's count, which the shapes then reveal (through memory and running time; a
neighbour moves `nnz` by at most `p`). No released value depends on the padding: the padded
entries are exact zeros, every operation reads them as zeros, and the noise of every release is
drawn over the `p` features (a public shape), so the same key gives the same release, bit for
bit, at any capacity and window.

DP-GCD runs one selection path whatever the data ([`dpgcd_jax.solvers.dp_gcd`][]): the noise of
all `p` features is drawn at every step, O(nnz + p) per iteration.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse

from dpgcd_jax import _pytree
from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import exact_sums
from dpgcd_jax import sizes

Array = jax.Array


@_pytree.dataclass_pytree(data_fields=["rows", "cols", "vals", "indptr"], meta_fields=["shape", "window"])
@dataclasses.dataclass(frozen=True)
class SparseColumns:
  """The transposed features `X^T` (shape (p, n)) as column-sorted coordinates (a pytree).

  Attributes:
    rows: (capacity + K,) example index of every stored entry, sorted by feature (column of X).
    cols: (capacity + K,) feature index of every entry.
    vals: (capacity + K,) values; the first `nnz` are the stored entries, the rest zero padding
      (example 0, feature `p - 1`): a public length (module docstring), and a window of `K`
      entries from any column's start stays in bounds.
    indptr: (p + 1,) column pointers: feature j's entries are `indptr[j]:indptr[j + 1]`.
    shape: `(p, n)`, as `XT` of a dense problem.
    window: `K`, a public number of entries at least the largest number of entries of one
      feature (declared, or a bucket: [`from_matrix`][dpgcd_jax.sparse.from_matrix]).
  """

  rows: Array
  cols: Array
  vals: Array
  indptr: Array
  shape: tuple[int, int]
  window: int

  @property
  def dtype(self) -> Any:
    return self.vals.dtype

  @property
  def capacity(self) -> int:
    """The public number of entry slots before the window's padding (at least `nnz`)."""
    return int(self.vals.shape[0]) - self.window

  @property
  def nnz(self) -> Array:
    """The number of stored entries, a traced count (`indptr[p]`; never a shape)."""
    return self.indptr[-1]

  def margins(self, w: Array) -> Array:
    """`X w`, (n,)."""
    return jax.ops.segment_sum(self.vals * w[self.cols], self.rows, num_segments=self.shape[1])

  def column(self, j: Array) -> tuple[Array, Array]:
    """Example indices and values of feature `j` (`K` of them, zero-padded)."""
    k = self.window
    start = self.indptr[j]
    rows = jax.lax.dynamic_slice(self.rows, (start,), (k,))
    vals = jax.lax.dynamic_slice(self.vals, (start,), (k,))
    return rows, jnp.where(jnp.arange(k) < self.indptr[j + 1] - start, vals, 0.0)

  def update_margins(self, margins: Array, j: Array, change: Array) -> Array:
    """Margins after `w_j += change`: O(K)."""
    rows, vals = self.column(j)
    return margins.at[rows].add(change * vals)

  def clipped_mean(self, dphi: Array, thresholds: Array) -> Array:
    """`(1/n) sum_i clip(dphi_i x_ij, -C_j, C_j)` for every j, over the stored entries.

    Exact up to one rounding, as [`dpgcd_jax.clipping.clipped_mean`][] (same grid, so the
    same value as the dense path): the quantized entries are summed by column exactly (at most
    `n` terms below `2^(k+1)`: in float64 for float32 data, where `n 2^(k+1) <= 2^53`; in
    int64 for float64 data), then scaled once. A zero entry (a padded one too) quantizes to 0. A
    non-finite `dphi_i` counts as 0 (the guard on the derivative, [`dpgcd_jax.clipping`][]).
    """
    n, p = self.shape[1], self.shape[0]

    def exact(thresholds, X, dphi):
      bits = exact_sums.grid_bits(X.dtype, n)
      return exact_sums.exact_mean(X.clipped_total(dphi, thresholds, bits), exact_sums.grid_scale(thresholds, bits), n,
                                 X.dtype)

    def plain(thresholds, X, dphi):
      grads = clipping.clip_coordinates(dphi[X.rows] * X.vals, thresholds[X.cols])
      return jax.ops.segment_sum(grads, X.cols, num_segments=p) / n

    return clipping.when_finite(thresholds, exact, plain, self, clipping.finite_or_zero(dphi))

  def clipped_total(self, dphi: Array, thresholds: Array, bits: int) -> Array:
    """`Q_j`, the exact integer sum of the quantized `clip(dphi_i x_ij, -C_j, C_j)` over the
    stored entries on the public grid of `bits` (as [`dpgcd_jax.kernels.clipped_total`][] for
    dense features: the totals of any partition of the records add up to the same `Q`).
    `dphi` finite, `thresholds` finite."""
    p = self.shape[0]
    scale = exact_sums.grid_scale(thresholds, bits)
    q = clipping.quantize(dphi[self.rows] * self.vals, thresholds[self.cols], scale[self.cols])
    with jax.enable_x64(True):
      # float32 data: every partial sum is an integer below n 2^(k+1) <= 2^53 (exact in float64,
      # in any order, and 1.5x faster than int64 on CPU); float64 data: int64.
      exact = jnp.float64 if self.dtype == jnp.float32 else jnp.int64
      return jax.ops.segment_sum(q.astype(exact), self.cols, num_segments=p, indices_are_sorted=True)

  def derivative_total(self, dphi: Array, bounds: Array, c: Array) -> Array:
    """`Q_j = sum_i v_ij u_i` over the stored entries, exactly (int64): the sparse form of
    [`dpgcd_jax.kernels.derivative_total`][] (the same factor grids, so the same totals as the
    dense features; an unstored or padded entry is 0 on the grid)."""
    v = exact_sums.on_factor_grid(self.vals, bounds[self.cols])
    u = exact_sums.on_factor_grid(dphi, c)
    with jax.enable_x64(True):  # each product is below 2^26 in magnitude, each sum below n 2^26
      terms = v.astype(jnp.int64) * u[self.rows].astype(jnp.int64)
      return jax.ops.segment_sum(terms, self.cols, num_segments=self.shape[0], indices_are_sorted=True)

  def clipped_coordinate_mean(self, dphi: Array, thresholds: Array, j: Array) -> Array:
    """Coordinate `j` of `clipped_mean` in O(K) (the same exact mean and grid)."""
    rows, vals = self.column(j)
    n = self.shape[1]
    bits = exact_sums.grid_bits(self.dtype, n)  # the grid of n records, not of this column

    def exact(c, terms):
      scale = exact_sums.grid_scale(c, bits)
      return exact_sums.exact_mean(exact_sums.exact_sum(clipping.quantize(terms, c, scale), bits=bits), scale, n,
                                 self.dtype)

    plain = lambda c, terms: jnp.sum(clipping.clip_coordinates(terms, c)) / n
    return clipping.when_finite(thresholds[j], exact, plain, clipping.finite_or_zero(dphi[rows]) * vals)

  def mean_squares(self) -> Array:
    """`(1/n) sum_i x_ij^2` for every j."""
    return jax.ops.segment_sum(self.vals**2, self.cols, num_segments=self.shape[0]) / self.shape[1]

  def clip_entries(self, bound: Array) -> SparseColumns:
    """Every entry clipped to `[-B_j, B_j]` (zeros stay zero)."""
    bound = jnp.broadcast_to(bound, (self.shape[0],))[self.cols]
    return dataclasses.replace(self, vals=jnp.clip(self.vals, -bound, bound))

  def todense(self) -> Array:
    """The dense (p, n) array (for tests and small problems)."""
    return jnp.zeros(self.shape, self.dtype).at[self.cols, self.rows].add(self.vals)


def is_sparse(X: Any) -> bool:
  """Whether `X` is a sparse matrix this module reads (scipy.sparse or BCOO)."""
  return scipy.sparse.issparse(X) or _is_bcoo(X)


def _is_bcoo(X: Any) -> bool:
  return type(X).__name__ == "BCOO" and hasattr(X, "indices") and hasattr(X, "data")


def from_matrix(X: Any, dtype: Any = None, *, capacity: int | None = None,
                window: int | None = None, check_range: bool = False) -> SparseColumns:
  """[`SparseColumns`][dpgcd_jax.sparse.SparseColumns] of the transpose of an (n, p) scipy.sparse or BCOO matrix.

  Duplicate entries are summed. The entries are stored in `capacity + window` slots (rounded
  up to a multiple of `SLOT_ALIGNMENT`), the padding being exact zeros (module docstring, "Shapes").

  Args:
    X: the (n, p) matrix.
    dtype: the stored dtype (default: the compute dtype of `X`'s).
    capacity: a public upper bound on the stored entries `nnz` (declared: the shapes are then
      functions of public values only); default the public bucket of `nnz`,
      [`dpgcd_jax.problem.bucket`][]`(nnz)`.
    window: `K`, a public upper bound on the entries of one feature (at most `n` always holds);
      default `min(n, bucket(largest column count))`.

  Raises:
    ValueError: for a matrix that is not 2-D, has no rows or columns, or holds NaN or infinite
      values (checked on the stored entries only), with `check_range` also values the cast to
      `dtype` would make infinite (1e300 in float32, as for a dense X), or whose entries exceed a declared `capacity`
      or `window`. That last error depends on the data (replacing one record can cross a
      declared bound): it is outside the privacy guarantee, and its message names the bound,
      never a count; declare bounds with a margin (e.g. `n` times a public bound on a record's
      nonzeros for `capacity`).
  """
  if _is_bcoo(X):
    if X.n_batch or X.n_dense or X.ndim != 2:
      raise ValueError(f"Expected X to be a 2-D BCOO matrix without batch or dense dimensions, "
                       f"got X with shape {X.shape}, n_batch={X.n_batch}, n_dense={X.n_dense}.")
    if not all(getattr(a, "is_fully_addressable", True) for a in (X.data, X.indices)):
      raise ValueError(
          "Expected X (sparse) to be held by this process, got a BCOO matrix whose entries span "
          "several processes (jax.distributed): sparse features are not sharded (a sparse problem "
          "runs on one device). Pass a dense X sharded over examples "
          "(jax.make_array_from_process_local_data), or fit the sparse X in one process.")
    indices = np.asarray(X.indices)
    X = scipy.sparse.coo_matrix((np.asarray(X.data), (indices[:, 0], indices[:, 1])), shape=X.shape)
  if X.ndim != 2:
    raise ValueError(f"Expected X to have 2 dimensions, got X.shape={X.shape}.")
  if capacity is not None:
    capacity = _validate.check_int("capacity", capacity, low=0)
  if window is not None:
    window = _validate.check_int("window", window, low=1)
  csc = scipy.sparse.csc_matrix(X)
  csc.sum_duplicates()
  csc.sort_indices()
  if not np.issubdtype(csc.dtype, np.number):
    raise ValueError(f"Expected X to be numeric, got dtype {csc.dtype}.")
  if not np.all(np.isfinite(csc.data)):
    raise ValueError(f"Expected X to be finite, got {int(np.sum(~np.isfinite(csc.data)))} NaN or "
                     f"infinite entries in X.")
  n, p = csc.shape
  if dtype is None:
    dtype = _validate.compute_dtype(csc.dtype)
  if check_range:  # make_problem without a feature bound (a declared or released bound clips such entries)
    _validate.check_in_range("X", csc.data, dtype)
  counts = np.diff(csc.indptr)
  largest = int(counts.max(initial=0))
  # A declared bound exceeded is refused (the stored shapes are fixed by it): an error that depends on the
  # data, outside the guarantee (the docstring), whose message says which bound and never a count.
  if capacity is not None and csc.nnz > capacity:
    raise ValueError(f"Expected at most capacity={capacity} stored entries in X (declared), got more.")
  if window is not None and largest > window:
    raise ValueError(f"Expected at most window={window} stored entries in every column of X (declared), got "
                     f"a column with more.")
  k = min(n, sizes.bucket(max(largest, 1))) if window is None else window
  size = sizes.bucket(max(csc.nnz, 1)) if capacity is None else capacity
  total = -(-(size + k) // SLOT_ALIGNMENT) * SLOT_ALIGNMENT  # slots: capacity and window, aligned
  cols = np.repeat(np.arange(p, dtype=np.int32), counts)
  pad = lambda a, value, t: np.concatenate([a.astype(t), np.full(total - csc.nnz, value, t)])
  with np.errstate(over="ignore"):  # no warning that depends on the data: an entry beyond the dtype's range is inf
    vals = pad(csc.data, 0, np.dtype(dtype))  # (clipped to a feature bound, or refused with the smoothness)
  return SparseColumns(
      rows=jnp.asarray(pad(csc.indices, 0, np.int32)),
      cols=jnp.asarray(pad(cols, p - 1, np.int32)),
      vals=jnp.asarray(vals),
      indptr=jnp.asarray(csc.indptr.astype(np.int32)),
      shape=(p, n),
      window=k,
  )


SLOT_ALIGNMENT = 128  # XLA's CPU loops over a few 100k entries ran 2.5x slower at 99,997 than at 100,096
