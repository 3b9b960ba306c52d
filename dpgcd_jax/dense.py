"""The dense device layout: a (n, p) `X` as the (P, N) transposed, clipped, zero-padded array.

The counterpart of [`dpgcd_jax.sparse.SparseColumns`][] for dense features: column `j` of `X`
is one contiguous row of the layout, so a coordinate's clipped gradient reduces over contiguous
memory. [`dpgcd_jax.layout`][] builds problems on it and pads them to public sizes.
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

_DIRECT_BYTES = 1 << 20  # up to 1 MB: the layout is built on the host and copied once to the device
_CHUNK_BYTES = 1 << 20  # above: 1 MB chunks of records (16 MB chunks left 2.26x X at peak, 1 MB 2.02x)
_TILE_ROWS = 128  # host_columns: records per tile (the fastest of 32 to 256, 65536 x 64 float32)
_ALIGN = 64  # host_columns: XLA's CPU runtime uses a host array in place when it is aligned to 64 bytes


def columns(X: Any, dtype: Any, *, bound: Any = None, num_examples: int | None = None,
            num_features: int | None = None, intercept: bool = False) -> Array:
  """The (P, N) feature layout of a dense (n, p) `X`, built once on the device.

  Rows `0..p-1` hold `X.T` in `dtype` (clipped to the (p,) `bound` when given), row `p`
  holds ones when `intercept` (the constant feature of an intercept), and every other entry
  is 0: `num_features = P >= p + intercept` features and `num_examples = N >= n` records,
  zero padding ([`pad`][dpgcd_jax.layout.pad] says why padding is private).

  Memory: a layout up to 1 MB is built on the host and copied once; above, chunks of
  about 1 MB of records are laid out on the host and written in place into the device array
  (a donated buffer), so the peak is `X` plus the layout (2.02x `X` at 20000 x 20000
  float32, `benchmarks/bench_scale.py`), not several copies. The chunks have one shape per
  `(N, P)` (the last one ends at `N`), so a new `n` or `p` within the same buckets compiles
  nothing. A `jax.Array` (sharded data included) is transposed by XLA.
  """
  n, p = X.shape
  width = p + bool(intercept)
  N = n if num_examples is None else operator.index(num_examples)
  P = width if num_features is None else operator.index(num_features)
  if N < n or P < width:
    raise ValueError(f"Expected num_examples >= {n} and num_features >= {width}, got num_examples={N} and "
                     f"num_features={P}.")
  host_bound = None if bound is None else np.asarray(bound, dtype).reshape(p, 1)
  if isinstance(X, jax.Array):
    XT = jnp.asarray(X, dtype).T
    if bound is not None:
      XT = jnp.clip(XT, -jnp.asarray(host_bound), jnp.asarray(host_bound))
    if intercept:
      XT = jnp.concatenate([XT, jnp.ones((1, n), dtype)])
    return jnp.pad(XT, ((0, P - width), (0, N - n))) if (N, P) != (n, width) else XT

  def block(start: int, stop: int) -> np.ndarray:  # records start..stop-1 as (P, stop - start), zero padded
    out = np.zeros((P, stop - start), dtype)
    records = X[start:min(stop, n)]
    with np.errstate(over="ignore"):  # no warning that depends on the data (float64 above float32's max: inf)
      out[:p, :records.shape[0]] = records.T
    if host_bound is not None:
      np.clip(out[:p], -host_bound, host_bound, out=out[:p])
    out[p:width, :records.shape[0]] = 1.0
    return out

  itemsize = np.dtype(dtype).itemsize
  rows = max(1, _CHUNK_BYTES // (P * itemsize))
  if N * P * itemsize <= _DIRECT_BYTES or N <= rows:
    return jax.device_put(block(0, N))
  XT = jnp.zeros((P, N), dtype)
  for start in range(0, n, rows):
    start = min(start, N - rows)  # the last chunk ends at N: one chunk shape
    XT = _write_columns(XT, jax.device_put(block(start, start + rows)), jnp.asarray(start))
  return XT


def host_columns(X: np.ndarray, dtype: Any, bound: Any) -> tuple[np.ndarray, bool]:
  """The (p, n) host array of `columns(X, dtype, bound=bound)` (no padding, no intercept) from a
  NumPy `X`, and whether `X` passes `make_problem`'s check of its values.

  For row chunks streamed to the device one at a time (`dpgcd_jax.solvers.streamed`), in
  less than half the time of `columns` (`benchmarks/results/out_of_core.md`). NumPy walks a
  transposed copy in the order of the destination, one feature of every record at a time
  (2-3x slower, measured); here the transpose is two copies that stay in the cache, tiles of
  `_TILE_ROWS` records cast to `dtype` into a (tiles, p, rows) buffer, then its contiguous
  rows, then one clip in place, as `columns` casts and clips: the same values. The array is
  aligned for XLA's CPU runtime (64 bytes), so `jax.device_put(..., may_alias=True)` can use
  it without a copy. The check is `_validate.check_finite_array`'s with `dtype`:
  every entry finite and, from a wider float, within `dtype`'s range (`False`: the layout is
  not for use, and `make_problem` names the entries).
  """
  n, p = X.shape
  size = p * n * np.dtype(dtype).itemsize
  raw = np.empty(size + _ALIGN, np.uint8)
  start = -raw.ctypes.data % _ALIGN
  out = raw[start:start + size].view(dtype).reshape(p, n)
  tiles, head = n // _TILE_ROWS, n // _TILE_ROWS * _TILE_ROWS
  buffer = np.empty((tiles, p, _TILE_ROWS), dtype)
  with np.errstate(over="ignore"):  # no warning that depends on the data (float64 above float32's max: inf)
    buffer[...] = X[:head].reshape(tiles, _TILE_ROWS, p).transpose(0, 2, 1)
    out[:, head:] = X[head:].T
  out[:, :head].reshape(p, tiles, _TILE_ROWS)[...] = buffer.transpose(1, 0, 2)  # a view: the head's tiles
  host_bound = np.broadcast_to(np.asarray(bound, dtype), (p,)).reshape(p, 1)
  np.clip(out, -host_bound, host_bound, out=out)
  limit = np.finfo(dtype).max
  valid = not np.issubdtype(X.dtype, np.floating) or bool(X.max() <= limit and X.min() >= -limit)  # NaN: False
  return out, valid


@functools.partial(jax.jit, donate_argnums=0)
def _write_columns(XT: Array, chunk: Array, start: Array) -> Array:
  return jax.lax.dynamic_update_slice(XT, chunk, (jnp.zeros_like(start), start))
