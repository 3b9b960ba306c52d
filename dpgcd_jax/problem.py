"""A private ERM problem: data, per-example loss, smooth l2 term and separable penalty.

$$
F(w) = \\frac1n \\sum_{i=1}^n l(w; x_i, y_i) + \\frac{\\lambda_2}{2} \\|w\\|_2^2 + \\psi(w)
$$

The data term and `l2` are smooth; `psi` (a [`dpgcd_jax.penalties`][] object) is
handled by its prox. Neighbouring data sets differ in one record (replace-one; `n` is public).

Coordinate smoothness `M_j` bounds the curvature of `f = data term + l2 term` along
`e_j`; it sets step sizes, score normalizations and clipping thresholds, so where it comes
from matters for privacy. [`make_problem`][dpgcd_jax.problem.make_problem] records its source:

- `"declared"`: public constants passed as `smoothness=` (the data-term part, without
  `l2`). Public by the user's declaration.
- `"feature_bound"`: a public bound `B` on the features passed as `feature_bound=`:
  every entry is clipped to `[-B_j, B_j]` when the problem is built (a per-record
  transformation with public parameters) and `M_j = beta B_j^2`, with `beta >= phi''` the
  loss's curvature bound: no look at the data.
- `"data"` (the default when neither is given): `M_j` computed from the raw data, kept
  for non-private use (`run` without noise, reference solvers). It is NOT public: every
  private entry point (`fit`) ignores it and releases a feature bound with an accounted
  mechanism instead ([`dpgcd_jax.privacy.bounds`][]), and `run` with noise warns.
- `"data_nonprivate"`: `smoothness="from_data_nonprivate"`, the explicit opt-in to use the
  data-derived `M` in private runs (the paper's convention for standardized data). It is
  NOT private (measured: an audit finds epsilon >= 6.7 against a claim of 1 when one record's
  features change); it warns with [`PrivacyLeakWarning`][dpgcd_jax.PrivacyLeakWarning] and is recorded in
  `result.privacy`.

Data-derived `M` is computed as: `beta * mean_i x_ij^2` for a GLM loss with a known
curvature bound; for a GLM loss without one, the largest `phi''` over the labels and a grid
of margins (a numerical estimate); for any other loss, the Hessian diagonal of the
per-example losses at `w = 0` via `jax.jvp` of `jax.grad` (a local estimate).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import penalties
from dpgcd_jax import sparse
from dpgcd_jax.sizes import bucket  # noqa: F401  (public here: `dpgcd_jax.problem.bucket`)

Array = jax.Array
PrivacyLeakWarning = _validate.PrivacyLeakWarning
FROM_DATA_NONPRIVATE = "from_data_nonprivate"
BOUND_RANGE = (2.0**-60, 2.0**60)  # declared feature bounds: B^2 (a smoothness) is a normal float32


class SmoothnessSource(str, enum.Enum):
  """Where a problem's coordinate smoothness comes from (module docstring): publicness as a
  type. `public` says whether a private run may use it as it is."""

  DECLARED = "declared"
  FEATURE_BOUND = "feature_bound"
  DATA = "data"
  DATA_NONPRIVATE = "data_nonprivate"

  @property
  def public(self) -> bool:
    """Public by the user's declaration (constants, or a feature bound): never read from the data."""
    return self in (SmoothnessSource.DECLARED, SmoothnessSource.FEATURE_BOUND)

  def __str__(self) -> str:
    return str(self.value)

  def __repr__(self) -> str:
    return repr(self.value)


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["XT", "y", "smoothness", "l2", "penalty", "rows", "columns"],
    meta_fields=["loss", "smoothness_source"],
)
@dataclasses.dataclass(frozen=True)
class Problem:
  """Data and objective of a private ERM problem (a pytree; `loss` is static).

  Build it with [`make_problem`][dpgcd_jax.problem.make_problem], which validates the inputs.

  The features are stored column-major, `XT = X.T` of shape (p, n): the clipped
  coordinate gradient then reduces over contiguous memory (about 2x faster on CPU, and it
  vmaps well) and column `j` is one contiguous row.

  Attributes:
    XT: (p, n) transposed features (`X` is a property): a dense array, or
      [`dpgcd_jax.sparse.SparseColumns`][] for sparse features.
    y: (n,) targets or labels.
    smoothness: (p,) coordinate smoothness of the data term (without `l2`).
    l2: strength of the smooth ridge term `l2 / 2 ||w||^2`.
    penalty: separable penalty `psi` (see [`dpgcd_jax.penalties`][]).
    loss: the per-example loss.
    smoothness_source: where `smoothness` comes from, a
      [`SmoothnessSource`][dpgcd_jax.problem.SmoothnessSource] ("declared", "feature_bound",
      "data" or "data_nonprivate": the module docstring); a string is converted.
    rows: None, or the true number of examples `n` (a traced int) when `XT` is padded with
      zero records to a public bucket ([`pad`][dpgcd_jax.problem.pad]); means divide by it.
    columns: None, or the true number of features when `XT` is padded with zero features;
      the padded coordinates are never selected.
  """

  XT: Array | sparse.SparseColumns
  y: Array
  smoothness: Array
  l2: Array
  penalty: Any
  loss: losses_lib.Loss
  smoothness_source: SmoothnessSource = SmoothnessSource.DECLARED
  rows: Array | None = None
  columns: Array | None = None

  def __post_init__(self) -> None:
    object.__setattr__(self, "smoothness_source", SmoothnessSource(self.smoothness_source))

  @property
  def X(self) -> Array:
    """The (n, p) features (dense problems only)."""
    if isinstance(self.XT, sparse.SparseColumns):
      raise ValueError("Expected a dense problem for problem.X, got sparse features "
                       "(problem.XT.todense() gives the dense (p, n) array).")
    return self.XT.T

  @property
  def num_examples(self) -> int:
    """The stored records (padded ones included: see `mean_count`)."""
    return self.XT.shape[1]

  @property
  def mean_count(self) -> int | Array:
    """`n`, the divisor of every mean over the records: `rows` for a padded problem."""
    return self.XT.shape[1] if self.rows is None else self.rows

  @property
  def column_mask(self) -> Array | None:
    """None, or a (p,) mask of the true features of a problem padded with zero features."""
    return None if self.columns is None else jnp.arange(self.XT.shape[0]) < self.columns

  @property
  def num_features(self) -> int:
    return self.XT.shape[0]

  @property
  def curvature(self) -> float:
    """`beta`, the loss's curvature bound (1 when unknown): the unit of a scalar `clip`."""
    return 1.0 if self.loss.curvature is None else float(self.loss.curvature)


def make_problem(
    X: Any,
    y: Any,
    loss: losses_lib.Loss | str | Callable[..., Any] = "squared",
    *,
    l2: float = 0.0,
    penalty: penalties.Penalty | None = None,
    smoothness: Any | None = None,
    feature_bound: Any | None = None,
    sparse_capacity: tuple[int, int] | None = None,
) -> Problem:
  """Validates the inputs and builds a [`Problem`][dpgcd_jax.problem.Problem].

  Args:
    X: (n, p) finite features.
    y: (n,) finite targets (in `loss.labels` when the loss has a label domain: {-1, +1} for
      the logistic loss).
    loss: a [`dpgcd_jax.Loss`][], a built-in name ("squared", "logistic", "huber"), or a
      plain function `loss(w, x, y) -> scalar` (wrapped with [`dpgcd_jax.custom_loss`][]).
    l2: smooth ridge strength, >= 0.
    penalty: separable penalty object from [`dpgcd_jax.penalties`][] (default: none), e.g.
      `dg.penalties.L1(0.1)`.
    smoothness: public (p,) coordinate smoothness of the data term (declared), or
      `"from_data_nonprivate"` to opt in to the data-derived one in private runs (NOT
      private: warns). See the module docstring.
    feature_bound: public bound `B > 0` on `|x_ij|` (scalar or (p,)): features are clipped
      to it and `M_j = beta B_j^2` (needs a loss with a known curvature bound `beta`).
    sparse_capacity: sparse `X` only: `(capacity, window)`, public upper bounds on the stored
      entries of `X` and of one of its columns, that fix the stored shapes
      ([`dpgcd_jax.sparse.from_matrix`][]); default (None) their public buckets.

  Raises:
    ValueError: naming the argument, for NaN / infinite data (a dense X also for entries the
      cast to the compute dtype would make infinite, e.g. 1e300 in float32), mismatched shapes, a loss
      that does not return a scalar, labels that are not in {-1, +1} for the logistic loss,
      negative `l2`, a penalty that is not a penalty object or has the wrong length, bad
      `smoothness` or `feature_bound`.
  """
  loss = losses_lib.get(loss)
  sparse_XT: sparse.SparseColumns | None = None
  if sparse.is_sparse(X):
    if not loss.is_glm:
      raise ValueError(f"Expected a GLM loss (phi(<x, w>, y)) with sparse X, got loss {loss.name!r}: "
                       f"pass a dense X (e.g. X.toarray()) for other losses.")
    capacity, window = (None, None) if sparse_capacity is None else sparse_capacity
    sparse_XT = sparse.from_matrix(X, capacity=capacity, window=window)
    dtype, (p, n) = sparse_XT.dtype, sparse_XT.shape
  else:
    if sparse_capacity is not None:
      raise ValueError(f"Expected sparse_capacity=None with a dense X, got sparse_capacity={sparse_capacity!r}.")
    _check_dense_type(X)
    X = X if isinstance(X, jax.Array) else np.asarray(X)
    dtype = _validate.compute_dtype(X.dtype)
    _validate.check_finite_array("X", X, ndim=2, dtype=dtype)
    n, p = X.shape
  _validate.check_finite_array("y", y, ndim=1)
  y = jnp.asarray(y, dtype)
  if y.shape[0] != n:
    raise ValueError(f"Expected y to have X.shape[0]={n} entries, got y.shape={y.shape}.")
  out = jax.eval_shape(loss.fn, jnp.zeros(p, dtype), jnp.zeros(p, dtype), y[0])
  if getattr(out, "shape", None) != ():
    raise ValueError(
        f"Expected loss {loss.name!r} to return a scalar per example, got output shape "
        f"{getattr(out, 'shape', out)}."
    )
  if loss.labels is not None:  # the loss's capability: the label domain it is defined on
    labels = np.unique(_validate.host_values(y))
    if not set(labels.tolist()) <= set(loss.labels):
      domain = ", ".join(f"{v:+g}" if v > 0 else f"{v:g}" for v in loss.labels)
      raise ValueError(
          f"Expected y in {{{domain}}} for the {loss.name} loss, got labels {labels[:5].tolist()}"
          f"{' ...' if labels.size > 5 else ''}: encode them (e.g. y = 2 * y01 - 1 for {{-1, +1}}), or "
          f"use dpgcd_jax.estimators.DPGCDClassifier, which encodes any two labels.")
  _validate.check_positive("l2", l2, allow_zero=True)
  penalty = _check_penalty(penalty, p)
  if smoothness is not None and feature_bound is not None:
    raise ValueError("Expected at most one of smoothness and feature_bound, got both.")
  bound, bound_smoothness = None, None
  if feature_bound is not None:
    checked, beta = _check_feature_bound(feature_bound, p, loss, dtype)
    bound = jnp.broadcast_to(checked, (p,))
    bound_smoothness = beta * bound**2
  XT: Array | sparse.SparseColumns
  if sparse_XT is None:
    XT = columns(X, dtype, bound=bound)
  else:
    XT = sparse_XT if bound is None else sparse_XT.clip_entries(bound)
  problem = Problem(XT=XT, y=y, smoothness=jnp.zeros(p, dtype), l2=jnp.asarray(l2, dtype),
                    penalty=penalty, loss=loss)
  if bound_smoothness is not None:
    smoothness, source = bound_smoothness, SmoothnessSource.FEATURE_BOUND
  elif isinstance(smoothness, str):
    if smoothness != FROM_DATA_NONPRIVATE:
      raise ValueError(f"Expected smoothness to be an array or {FROM_DATA_NONPRIVATE!r}, got "
                       f"smoothness={smoothness!r}.")
    warnings.warn(
        "smoothness='from_data_nonprivate': the coordinate smoothness is computed from the raw "
        "data and used without noise; the privacy guarantee of private runs does NOT hold "
        "(pass public constants or feature_bound= instead).", PrivacyLeakWarning, stacklevel=2)
    smoothness, source = _data_smoothness(problem), SmoothnessSource.DATA_NONPRIVATE
  elif smoothness is None:
    smoothness, source = _data_smoothness(problem), SmoothnessSource.DATA
  else:
    _validate.check_finite_array("smoothness", smoothness, ndim=1)
    _validate.check_positive("smoothness", smoothness, allow_zero=True)
    if jnp.shape(smoothness) != (p,):
      raise ValueError(f"Expected smoothness.shape=({p},), got smoothness.shape={jnp.shape(smoothness)}.")
    source = SmoothnessSource.DECLARED
  smoothness = jnp.asarray(smoothness, dtype)
  problem = dataclasses.replace(problem, smoothness=smoothness, smoothness_source=source)
  if source is not SmoothnessSource.DATA:
    # Not on the default path: a data-derived M is never used by a private entry point (fit
    # releases a feature bound instead), so a check of it there would be an exception that
    # depends on the private data (one record holding a column's only non-zero value).
    check_smoothness(problem)
  return problem


_DIRECT_BYTES = 1 << 20  # up to 1 MB: the layout is built on the host and copied once to the device
_CHUNK_BYTES = 1 << 20  # above: 1 MB chunks of records (16 MB chunks left 2.26x X at peak, 1 MB 2.02x)


def columns(X: Any, dtype: Any, *, bound: Any = None, num_examples: int | None = None,
            num_features: int | None = None, intercept: bool = False) -> Array:
  """The (P, N) feature layout of a dense (n, p) `X`, built once on the device.

  Rows `0..p-1` hold `X.T` in `dtype` (clipped to the (p,) `bound` when given), row `p`
  holds ones when `intercept` (the constant feature of an intercept), and every other entry
  is 0: `num_features = P >= p + intercept` features and `num_examples = N >= n` records,
  zero padding ([`pad`][dpgcd_jax.problem.pad] says why padding is private).

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


@functools.partial(jax.jit, donate_argnums=0)
def _write_columns(XT: Array, chunk: Array, start: Array) -> Array:
  return jax.lax.dynamic_update_slice(XT, chunk, (jnp.zeros_like(start), start))


def from_columns(XT: Array, y: Any, loss: losses_lib.Loss | str, *, feature_bound: Any,
                 num_examples: int, num_features: int, penalty: penalties.Penalty | None = None) -> Problem:
  """The problem on a layout from [`columns`][dpgcd_jax.problem.columns], with a public feature bound.

  `XT` is (P, N): `num_examples = n <= N` records and `num_features = p <= P` features, the
  rest zero padding. `XT` is clipped to `feature_bound` (scalar or (p,)) in place (the
  buffer is donated: do not reuse `XT`), `M_j = beta B_j^2`, `y` ((n,) or (N,)) is padded
  with the loss's last label (0 without labels), and padded features get bound 1, smoothness
  `beta` and penalty parameters 0, as in [`pad`][dpgcd_jax.problem.pad] (which says why the
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
  checked, beta = _check_feature_bound(1.0 if released else feature_bound, p, loss, XT.dtype)
  # Padded on the host (public values; no per-shape device program): bound 1 on padded features.
  bound = np.pad(np.broadcast_to(checked, (p,)), (0, P - p), constant_values=1.0)
  label = 0.0 if loss.labels is None else loss.labels[-1]
  # jax.device_put: a host array becomes a device array without a per-shape program.
  y = jax.device_put(np.pad(np.asarray(y, XT.dtype), (0, N - np.shape(y)[0]), constant_values=label))
  smoothness = jax.device_put(np.full(P, np.nan, XT.dtype) if released else XT.dtype.type(beta) * bound**2)
  problem = Problem(XT=XT if released else _clip_rows(XT, jax.device_put(bound)), y=y, smoothness=smoothness,
                    l2=jax.device_put(XT.dtype.type(0.0)),
                    penalty=_padded_penalty(_check_penalty(penalty, p), P), loss=loss,
                    smoothness_source=SmoothnessSource.DATA if released else SmoothnessSource.FEATURE_BOUND,
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


def _check_dense_type(X: Any) -> None:
  module = type(X).__module__ or ""
  if module.startswith("jax.experimental.sparse") or isinstance(X, (str, bytes, dict, set)):
    raise ValueError(f"Expected X to be a dense array, a scipy.sparse matrix or a BCOO matrix, got "
                     f"X of type {type(X).__module__}.{type(X).__name__}.")


def _check_penalty(penalty: Any, p: int) -> Any:
  if penalty is None:
    return penalties.Zero()
  if isinstance(penalty, (int, float, np.number, str)) or not hasattr(penalty, "prox"):
    raise ValueError(
        f"Expected penalty to be a penalty object such as dg.penalties.L1(0.1), "
        f"dg.penalties.L2(0.1) or dg.penalties.ElasticNet(0.1, 0.5), got penalty={penalty!r} "
        f"(the estimators take penalty='l1' with alpha=0.1).")
  for leaf in jax.tree.leaves(penalty):
    if jnp.ndim(leaf) not in (0, 1) or (jnp.ndim(leaf) == 1 and jnp.shape(leaf) != (p,)):
      raise ValueError(
          f"Expected every penalty parameter to be a scalar or of shape ({p},) (one per "
          f"feature), got shape {jnp.shape(leaf)} in penalty={penalty!r}.")
  return penalty


def _check_feature_bound(bound: Any, p: int, loss: losses_lib.Loss, dtype: Any) -> tuple[np.ndarray, float]:
  """The checked bound in `dtype` and the loss's curvature bound `beta` (which it needs)."""
  _validate.check_number("feature_bound", bound, low=0.0, low_open=True)
  if np.any(np.asarray(bound) < BOUND_RANGE[0]) or np.any(np.asarray(bound) > BOUND_RANGE[1]):
    raise ValueError(f"Expected feature_bound in [2^-60, 2^60] (M_j = beta B_j^2 must be a normal float32), "
                     f"got feature_bound={bound!r}.")
  if np.ndim(bound) not in (0, 1) or (np.ndim(bound) == 1 and np.shape(bound) != (p,)):
    raise ValueError(f"Expected feature_bound to be a scalar or of shape ({p},), got "
                     f"feature_bound.shape={np.shape(bound)}.")
  if loss.curvature is None:
    raise ValueError(
        f"Expected a loss with a known curvature bound for feature_bound= (M_j = beta B_j^2), "
        f"got loss {loss.name!r}: build it with dg.glm_loss(phi, curvature=beta), or pass "
        f"public smoothness= constants.")
  return np.asarray(bound, dtype), loss.curvature


def as_fit_runs(problem: Problem) -> tuple[bool, Problem]:
  """`(released, problem as fit runs it)`: a problem whose smoothness comes from the data gets
  a feature bound released by `fit` first, so its options are checked as on a feature bound."""
  released = getattr(problem, "smoothness_source", None) is SmoothnessSource.DATA
  return released, (dataclasses.replace(problem, smoothness_source=SmoothnessSource.FEATURE_BOUND) if released
                    else problem)


def check_smoothness(problem: Problem) -> None:
  """Raises when some `M_j + l2 <= 0` (a step `1 / M_j` would be infinite).

  Called by [`make_problem`][dpgcd_jax.problem.make_problem] for declared or public smoothness, and by the NON-private
  consumers of a data-derived one (`run`, the reference solvers); never by `fit`.
  """
  M, l2, loss, source = (np.asarray(problem.smoothness), float(problem.l2), problem.loss,
                         problem.smoothness_source)
  total = M + l2
  if np.all(total > 0):
    return
  cols = np.flatnonzero(~(total > 0))[:5].tolist()  # NaN too
  if np.any(np.isnan(total)):
    why = ("the smoothness is NaN: a problem from from_columns(feature_bound=None) gets its bounds "
           "released inside fit (pass them to from_columns for run)")
  elif source is SmoothnessSource.DECLARED:
    why = "declared smoothness + l2 is not positive"
  elif not loss.is_glm and np.any(M < 0):
    why = (f"the curvature of loss {loss.name!r} at w = 0 is negative: is the loss convex? "
           f"Pass public smoothness= constants")
  elif not loss.is_glm:
    why = (f"the curvature of loss {loss.name!r} at w = 0 is zero (a loss that is locally flat, "
           f"or all-zero columns): pass public smoothness= constants or add l2 > 0")
  else:
    why = "all-zero columns: drop them or add l2 > 0"
  raise ValueError(f"Expected a positive coordinate smoothness for every column, got M_j <= 0 for "
                   f"columns {cols}: {why}.")


def _data_smoothness(problem: Problem) -> Array:
  loss, y, XT = problem.loss, problem.y, problem.XT
  if loss.phi is not None:
    beta: float | Array
    if loss.curvature is None:
      z = jnp.linspace(-40.0, 40.0, 4001, dtype=XT.dtype)
      phi2 = jax.vmap(jax.vmap(jax.grad(jax.grad(loss.phi)), (0, None)), (None, 0))
      beta = jnp.max(jax.lax.map(lambda yi: phi2(z, yi[None]), jnp.unique(y)))
    else:
      beta = loss.curvature
    if isinstance(XT, sparse.SparseColumns):
      return beta * XT.mean_squares()
    return beta * jnp.mean(XT**2, axis=1)
  X = problem.X
  p = X.shape[1]
  w0 = jnp.zeros(p, X.dtype)

  def hessian_diag_at_zero(x, yi):
    grad = jax.grad(loss.fn)
    return jax.vmap(lambda e: jax.jvp(lambda w: grad(w, x, yi), (w0,), (e,))[1] @ e)(jnp.eye(p, dtype=X.dtype))

  return jnp.mean(jax.lax.map(lambda xy: hessian_diag_at_zero(*xy), (X, y)), axis=0)


def coordinate_smoothness(problem: Problem) -> Array:
  """`M_j` of the smooth part `f` (data term plus `l2`)."""
  return problem.smoothness + problem.l2


def is_sparse(problem: Problem) -> bool:
  """Whether the features are stored sparse ([`dpgcd_jax.sparse.SparseColumns`][])."""
  return isinstance(problem.XT, sparse.SparseColumns)


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
                             smoothness_source=SmoothnessSource.FEATURE_BOUND)


def clip_features(problem: Problem, bound: Array) -> Problem:
  """The problem with every feature entry clipped to `[-B_j, B_j]` (a per-record map)."""
  XT = problem.XT
  if isinstance(XT, sparse.SparseColumns):
    return dataclasses.replace(problem, XT=XT.clip_entries(bound))
  bound = jnp.broadcast_to(bound, (problem.num_features,))
  return dataclasses.replace(problem, XT=jnp.clip(XT, -bound[:, None], bound[:, None]))


def record_max_abs(problem: Problem) -> Array:
  """`max_j |x_ij|` per example, (n,): the statistic of [`dpgcd_jax.privacy.bounds`][]."""
  XT = problem.XT
  return XT.record_max_abs() if isinstance(XT, sparse.SparseColumns) else jnp.max(jnp.abs(XT), axis=0)
