"""Row chunks: the `(X, y)` chunks a fit over data larger than memory reads, one pass at a time.

A source of chunks (`Chunks`) is a function that yields the `(X_c, y_c)` row chunks of one pass
each time it is called: [`npy_chunks`][dpgcd_jax.row_chunks.npy_chunks] reads two `.npy` files
chunk by chunk, [`parquet_chunks`][dpgcd_jax.row_chunks.parquet_chunks] a Parquet dataset one
record batch at a time, so the process holds one chunk whatever the size of the data;
[`reader`][dpgcd_jax.row_chunks.reader] also takes a list of `(X, y)` pairs (held in memory: for
tests and small data). Under `jax.distributed` each process reads the chunks of its own rows,
and [`across_processes`][dpgcd_jax.row_chunks.across_processes] adds up the exact totals and row
counts of a pass over all the processes. [`chunk_problem`][dpgcd_jax.row_chunks.chunk_problem] makes
a chunk's problem, clipped to the declared bound ([`dense_chunk`][dpgcd_jax.row_chunks.dense_chunk]:
a dense chunk after the first, in one pass).

They are read by [`dpgcd_jax.solvers.streamed.fit`][] (DP-GCD over row chunks: what it releases,
and its privacy argument) and by the estimators' `fit_chunks`. Nothing here is released: the
chunks are the private records, handed over as they are read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from collections.abc import Iterable
from typing import Any

import jax
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import dense
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import sparse

Chunks = Callable[[], Iterable[tuple[Any, Any]]]


def npy_chunks(X_path: Any, y_path: Any, rows: int) -> Chunks:
  """Row chunks of `rows` records read from two `.npy` files (`np.save`), one chunk at a time.

  Each chunk is read with a seek and a read of its bytes (no memory map: the process holds
  one chunk, whatever the file's size).

  Args:
    X_path: an (n, p) `.npy` file in C order.
    y_path: an (n,) `.npy` file.
    rows: records per chunk, >= 1 (the last chunk may be shorter).

  Returns:
    A function that yields the `(X, y)` chunks of one pass each time it is called.
  """
  rows = _validate.check_int("rows", rows, low=1)
  (n, p), x_dtype, x_offset = _npy_header("X_path", X_path, ndim=2)
  (m,), y_dtype, y_offset = _npy_header("y_path", y_path, ndim=1)
  if m != n:
    raise ValueError(f"Expected y_path to hold {n} entries (the rows of X_path), got {m}.")

  def chunks() -> Iterable[tuple[np.ndarray, np.ndarray]]:
    with open(X_path, "rb") as fx, open(y_path, "rb") as fy:
      for start in range(0, n, rows):
        size = min(rows, n - start)
        fx.seek(x_offset + start * p * x_dtype.itemsize)
        fy.seek(y_offset + start * y_dtype.itemsize)
        yield np.fromfile(fx, x_dtype, size * p).reshape(size, p), np.fromfile(fy, y_dtype, size)

  return chunks


def parquet_chunks(path: Any, *, features: list[str], target: str, rows: int = 65536,
                   dtype: Any = np.float32) -> Chunks:
  """Row chunks of a Parquet dataset (a file, or a directory of files: pyarrow's dataset), one
  record batch at a time: the process holds one batch of `rows` records, whatever the size.

  Args:
    path: a Parquet file or a directory of Parquet files.
    features: the feature columns, in the model's order (numeric).
    target: the label or target column.
    rows: records per chunk at most, >= 1.
    dtype: the features' and targets' NumPy dtype.

  Returns:
    A function that yields the `(X, y)` chunks of one pass each time it is called. The order
    of the batches does not matter: the totals are exact integer sums.
  """
  rows = _validate.check_int("rows", rows, low=1)
  if isinstance(features, str) or not features or not all(isinstance(c, str) for c in features):
    raise ValueError(f"Expected features to be a non-empty list of column names, got features={features!r}.")
  import pyarrow.dataset as pa_dataset  # optional: pip install dpgcd_jax[parquet]
  import pyarrow.types as pa_types

  dataset = pa_dataset.dataset(path, format="parquet")
  missing = [c for c in [*features, target] if c not in dataset.schema.names]
  if missing:
    raise ValueError(f"Expected the columns {missing} in the Parquet dataset at path={str(path)!r} (its columns: "
                     f"{dataset.schema.names}).")
  numeric = lambda t: pa_types.is_integer(t) or pa_types.is_floating(t) or pa_types.is_boolean(t)
  other = [f"{c}: {dataset.schema.field(c).type}" for c in [*features, target]
           if not numeric(dataset.schema.field(c).type)]
  if other:  # from the schema (public types), before any value is read; a value is never echoed
    raise ValueError(f"Expected integer, float or bool columns in the Parquet dataset, got {other}.")

  def chunks() -> Iterable[tuple[np.ndarray, np.ndarray]]:
    for batch in dataset.to_batches(columns=[*features, target], batch_size=rows):
      nulls = [c for c in [*features, target] if batch.column(c).null_count]
      if nulls:  # a missing value is not finite: refused as make_problem refuses NaN, naming the columns
        raise ValueError(f"Expected no missing values in the Parquet columns, got some in {nulls}.")
      if batch.num_rows:
        with np.errstate(over="ignore"):  # no warning from a value: one beyond dtype's range is refused by the fit
          X = np.column_stack([batch.column(c).to_numpy(zero_copy_only=False) for c in features]).astype(dtype)
          y = batch.column(target).to_numpy(zero_copy_only=False).astype(dtype)
        yield X, y

  return chunks


def _npy_header(name: str, path: Any, *, ndim: int) -> tuple[tuple[int, ...], np.dtype, int]:
  """The shape, dtype and data offset of a C-order `.npy` file (ValueError naming `name`)."""
  with open(path, "rb") as f:
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read_header(f)
    offset = f.tell()
  if len(shape) != ndim or fortran_order or dtype.hasobject:
    raise ValueError(f"Expected {name} to hold a {ndim}-d numeric array in C order, got shape {shape}, "
                     f"fortran_order={fortran_order}, dtype {dtype}.")
  return shape, dtype, offset


def reader(chunks: Any) -> Chunks:
  """`chunks` as a function that yields one pass of `(X, y)` chunks."""
  if callable(chunks):
    return chunks
  if isinstance(chunks, (list, tuple)) and chunks and all(isinstance(c, (list, tuple)) and len(c) == 2
                                                          for c in chunks):
    return lambda: iter(chunks)
  raise ValueError(f"Expected chunks to be a function yielding (X, y) row chunks, or a non-empty list of "
                   f"(X, y) pairs, got chunks={type(chunks).__name__}.")


def first_chunk(read: Chunks) -> tuple[Any, Any]:
  """The first `(X, y)` chunk of a pass (a ValueError naming `chunks` when there is none)."""
  for X, y in read():
    return X, y
  raise ValueError("Expected chunks to yield at least one (X, y) chunk, got none.")


def chunk_problem(X: Any, y: Any, *, loss: Any, penalty: Any, feature_bound: Any,
                  like: problem_lib.Problem | None = None,
                  sparse_capacity: tuple[int, int] | None = None) -> problem_lib.Problem:
  """The chunk's problem, clipped to the declared bound; `like`: the first chunk's, whose
  width and dtype every chunk must have (a ValueError naming `chunks`, from public shapes).

  A dense NumPy chunk after the first is laid out by [`dense_chunk`][dpgcd_jax.row_chunks.dense_chunk]
  (the same problem, in less than half `make_problem`'s time); any other chunk, and one that
  fails its checks, by [`dpgcd_jax.make_problem`][] (which names what is wrong).
  """
  scipy_sparse = sparse.is_sparse(X) and hasattr(X, "tocsc")
  if (X.ndim if scipy_sparse else np.ndim(X)) != 2 or np.shape(X)[0] == 0 or (sparse.is_sparse(X) and not scipy_sparse):
    raise ValueError(f"Expected every chunk's X to be a non-empty (rows, p) array or scipy.sparse matrix, got "
                     f"{type(X).__name__} of shape {np.shape(X)} in chunks.")
  if like is not None and np.shape(X)[1] != like.num_features:
    raise ValueError(f"Expected every chunk to have the first chunk's {like.num_features} features, got "
                     f"{np.shape(X)[1]} in chunks.")
  chunk = None if like is None else dense_chunk(X, y, like, feature_bound)
  if chunk is None:
    capacity = sparse_capacity if scipy_sparse else None  # a dense chunk has no stored-entry shapes
    chunk = problem_lib.make_problem(X, y, loss, penalty=penalty, feature_bound=feature_bound,
                                     sparse_capacity=capacity)
  if like is not None and chunk.XT.dtype != like.XT.dtype:
    raise ValueError(f"Expected every chunk in the first chunk's dtype {like.XT.dtype}, got {chunk.XT.dtype} in "
                     f"chunks.")
  return chunk


def dense_chunk(X: Any, y: Any, like: problem_lib.Problem, feature_bound: Any) -> problem_lib.Problem | None:
  """`make_problem(X, y, like.loss, penalty=..., feature_bound=feature_bound)` for a dense NumPy
  chunk `X` with `like`'s width and dtype (`like`: the first chunk's problem, from `make_problem`),
  built in one pass: None for any other chunk, or when a check of `make_problem` fails.

  What depends on the chunk is rebuilt: its (p, rows) layout, transposed, cast and clipped to
  the declared bound on the host ([`dpgcd_jax.dense.host_columns`][], the NumPy operations of
  [`dpgcd_jax.dense.columns`][]: the same values) and copied once, and its targets; `make_problem`'s
  checks of the values run on them (`X` finite in the dtype, `y` one finite target per record,
  in the loss's labels). What does not is `like`'s: the loss, penalty, `l2` and the smoothness
  `beta B_j^2` of the declared bound (public). Which path runs follows the chunk's type, dtype and
  shape (public) and, for a chunk `make_problem` refuses, the refusal.
  """
  number = lambda a: np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)
  dtype = like.XT.dtype
  if (type(X) is not np.ndarray or type(y) is not np.ndarray or not (number(X) and number(y))
      or _validate.compute_dtype(X.dtype) != dtype or y.shape != X.shape[:1]):
    return None
  if not np.isfinite(y).all():  # make_problem's checks of y: finite, then in the labels after the cast
    return None
  with np.errstate(over="ignore"):  # make_problem's cast: no warning that depends on the data
    targets = y.astype(dtype)
  if like.loss.labels is not None and not np.isin(targets, like.loss.labels).all():
    return None
  bound, _ = problem_lib.check_feature_bound(feature_bound, X.shape[1], like.loss, dtype)
  layout, valid = dense.host_columns(X, dtype, bound)
  if not valid:
    return None
  # may_alias: the layout, new and never written again, becomes the device array without a copy (CPU)
  return dataclasses.replace(like, XT=jax.device_put(layout, may_alias=True), y=jax.device_put(targets), factors=None)


def across_processes(total: Any, rows: int) -> tuple[Any, int]:
  """The totals and row counts of every process added up (several hosts under
  `jax.distributed`, each streaming its own rows): integers (int64, or float64 below `2^53`),
  exact in any order, so every process holds the one-process totals and draws the same selection and
  noise from the shared key."""
  if jax.process_count() == 1:
    return total, rows
  from jax.experimental import multihost_utils  # only under jax.distributed
  with jax.enable_x64(True):  # float64 or int64 through the collective
    local = np.asarray(total)
    gathered = np.asarray(multihost_utils.process_allgather(np.append(local, np.asarray(rows, local.dtype))))
  summed = gathered.reshape(jax.process_count(), -1).sum(axis=0)
  return summed[:-1], int(summed[-1])

