"""Host-side validators: every message names the argument and its value.

Checks that need values run only on concrete inputs; under `jax.jit` / `jax.vmap`
the values are tracers and only shapes and dtypes are checked.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


class PrivacyLeakWarning(UserWarning):
  """A computation reads the raw data in a way the privacy guarantee does not cover."""


def is_concrete(x: Any) -> bool:
  """True when `x` holds values (not a tracer inside jit / vmap / grad)."""
  return not isinstance(x, jax.core.Tracer)


def _values(name: str, x: Any) -> np.ndarray:
  """`x` as floats; text (`"1"`, which NumPy would convert) or anything not numeric is refused by name."""
  try:
    kind = np.asarray(x).dtype.kind
    if kind in "US" or (kind == "O" and any(isinstance(v, (str, bytes)) for v in np.ravel(np.asarray(x)))):
      raise TypeError(type(x).__name__)
    return np.asarray(x, dtype=float)
  except (TypeError, ValueError) as e:
    raise ValueError(f"Expected {name} to be numeric, got {name}={x!r} ({type(x).__name__}).") from e


def _show(x: np.ndarray) -> str:
  return repr(x.item()) if x.ndim == 0 else np.array2string(x, threshold=6)


def check_number(
    name: str,
    x: Any,
    *,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
    allow_inf: bool = False,
) -> None:
  """Checks that every entry of `x` lies in the interval [low, high] (ends open if asked)."""
  if not is_concrete(x):
    return
  v = _values(name, x)
  lo = "(" if low_open or (low == -math.inf and not allow_inf) else "["
  hi = ")" if high_open or (high == math.inf and not allow_inf) else "]"
  bad = np.isnan(v) | (~np.isfinite(v) & (not allow_inf))
  bad |= (v <= low) if low_open else (v < low)
  bad |= (v >= high) if high_open else (v > high)
  if np.any(bad):
    raise ValueError(f"Expected {name} in {lo}{low}, {high}{hi}, got {name}={_show(v)}.")


def check_positive(name: str, x: Any, *, allow_inf: bool = False, allow_zero: bool = False) -> None:
  check_number(name, x, low=0.0, low_open=not allow_zero, allow_inf=allow_inf)


def check_int(name: str, x: Any, *, low: int = 1) -> int:
  if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
    raise ValueError(f"Expected {name} to be a Python int, got {name}={x!r}.")
  if x < low:
    raise ValueError(f"Expected {name} >= {low}, got {name}={x}.")
  return int(x)


def check_choice(name: str, x: Any, choices: tuple[str, ...]) -> str:
  if x not in choices:
    raise ValueError(f"Expected {name} to be one of {choices}, got {name}={x!r}.")
  return x


def check_finite_array(name: str, x: Any, *, ndim: int, dtype: Any = None) -> None:
  """Checks the rank of `x` and, when concrete, that it holds no NaN or infinity, and (`dtype`
  given) no entry the cast to `dtype` would turn infinite (`check_in_range`)."""
  shape = jnp.shape(x)
  if len(shape) != ndim:
    raise ValueError(f"Expected {name} to have {ndim} dimension(s), got {name}.shape={shape}.")
  if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and not x.is_fully_addressable:
    # A global array over several processes (jax.distributed): no process can read it, so the
    # count is a reduction on the devices; every process gets the same count (and raises alike).
    if not jnp.issubdtype(x.dtype, jnp.number):
      raise ValueError(f"Expected {name} to be numeric, got dtype {x.dtype} ({type(x).__name__}).")
    n_bad = int(_count_nonfinite(x))
    if n_bad:
      raise ValueError(f"Expected {name} to be finite, got {n_bad} NaN or infinite entries in {name}.")
    return
  if is_concrete(x):
    v = np.asarray(x)
    if not np.issubdtype(v.dtype, np.number):
      raise ValueError(f"Expected {name} to be numeric, got dtype {v.dtype} ({type(x).__name__}).")
    rows = max(1, (1 << 22) // max(1, v[:1].size))  # chunks: no whole-array temporary
    n_bad = sum(int(np.sum(~np.isfinite(v[i:i + rows]))) for i in range(0, max(len(v), 1), rows))
    if n_bad:
      raise ValueError(f"Expected {name} to be finite, got {n_bad} NaN or infinite entries in {name}.")
    if dtype is not None:
      for i in range(0, max(len(v), 1), rows):
        check_in_range(name, v[i:i + rows], dtype)


def check_in_range(name: str, values: np.ndarray, dtype: Any) -> None:
  """Raises when a finite entry of `values` lies beyond `dtype`'s range: the cast to the compute
  dtype would make it infinite (1e300 in float32), which the finiteness check could not see.
  A finiteness check in the dtype the fit computes in, like the one above."""
  limit = np.finfo(dtype).max
  if np.issubdtype(values.dtype, np.floating) and np.finfo(values.dtype).max <= limit:
    return
  n_over = int(np.sum(np.abs(values) > limit))
  if n_over:
    raise ValueError(
        f"Expected {name} to be finite in {np.dtype(dtype).name}, the dtype the fit computes in, got "
        f"{n_over} entries of {name} beyond its range (|{name}| > {limit:.3g}) that the cast would make "
        f"infinite: rescale {name}, or enable float64 (jax.config.update('jax_enable_x64', True)).")


def compute_dtype(dtype: Any) -> np.dtype:
  """The float dtype a problem computes in, for features of `dtype`: JAX's canonical dtype
  (float64 only with x64), at least float32. A half-precision float is promoted: the exact
  counts and sums the sensitivities rest on need float32's 24-bit significand (float16 counts
  are inexact past 2048, and neighbouring counts could land 2 apart)."""
  floating = jnp.issubdtype(dtype, jnp.floating)
  dtype = np.dtype(jax.dtypes.canonicalize_dtype(dtype if floating else jnp.result_type(float)))
  return np.dtype(np.float32) if dtype.itemsize < 4 else dtype


def on_device(x: Any, dtype: Any) -> jax.Array:
  """`x` as a device array of `dtype`: a host value by `jax.device_put` (no program compiled per
  shape, unlike `jnp.asarray(x, dtype)` when it converts), a JAX array (or tracer) by `jnp.asarray`."""
  if isinstance(x, jax.Array):
    return jnp.asarray(x, dtype)
  return jax.device_put(np.asarray(x, dtype))


def host_values(x: Any) -> np.ndarray:
  """`np.asarray(x)`; a global array over several processes (jax.distributed) is gathered
  first, so every process gets all of it (for vectors such as `y`, not for `X`)."""
  if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and not x.is_fully_addressable:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(x)


@jax.jit
def _count_nonfinite(x: jax.Array) -> jax.Array:
  return jnp.sum(~jnp.isfinite(x))


def check_key(name: str, key: Any) -> None:
  """Accepts a typed key (`jax.random.key`) or a raw uint32[2] key (`jax.random.PRNGKey`)."""
  dtype = getattr(key, "dtype", None)
  shape = jnp.shape(key) if dtype is not None else None
  if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key):
    if shape != ():
      raise ValueError(f"Expected {name} to be a single PRNG key, got {name} with shape {shape}.")
    return
  if dtype == jnp.uint32 and shape == (2,):
    return
  raise ValueError(
      f"Expected {name} to be a PRNG key from jax.random.key(seed) or jax.random.PRNGKey(seed), "
      f"got {name}={key!r}."
  )


def check_key_or_batch(name: str, key: Any) -> int | None:
  """Accepts one key (returns None) or a batch of keys with one leading axis (returns its size)."""
  dtype = getattr(key, "dtype", None)
  if dtype is not None:
    shape = jnp.shape(key)
    if jnp.issubdtype(dtype, jax.dtypes.prng_key) and len(shape) == 1:
      return shape[0]
    if dtype == jnp.uint32 and len(shape) == 2 and shape[1] == 2:
      return shape[0]
  check_key(name, key)
  return None


def optional_module(name: str, needed_for: str, extra: str) -> Any:
  """Imports an optional dependency, or raises an ImportError naming the extra that installs it."""
  try:
    return importlib.import_module(name)
  except ImportError as e:
    raise ImportError(f"{needed_for} need the optional dependency {name!r}: "
                      f"pip install 'dpgcd_jax[{extra}]'.") from e
