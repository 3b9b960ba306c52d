"""A private ERM problem: data, per-example loss, smooth l2 term and separable penalty.

$$
F(w) = \\frac1n \\sum_{i=1}^n l(w; x_i, y_i) + \\frac{\\lambda_2}{2} \\|w\\|_2^2 + \\psi(w)
$$

The data term and `l2` are smooth; `psi` (a [`dpgcd_jax.penalties`][] object) is handled by its prox.
Neighbouring data sets differ in one record (replace-one; `n` is public).

Coordinate smoothness `M_j` bounds the curvature of `f = data term + l2 term` along `e_j`; it sets step sizes,
score normalizations and clipping thresholds, so where it comes from matters for privacy.
[`make_problem`][dpgcd_jax.problem.make_problem] records its source, whose type says whether it is public
([`SmoothnessSource`][dpgcd_jax.problem.SmoothnessSource]):

- [`PublicSmoothness`][dpgcd_jax.problem.PublicSmoothness] `"declared"`: public constants passed as
  `smoothness=` (the data-term part, without `l2`). Public by the user's declaration.
- `PublicSmoothness` `"feature_bound"`: a public bound `B` on the features passed as `feature_bound=`: every
  entry is clipped to `[-B_j, B_j]` when the problem is built (a per-record transformation with public
  parameters) and `M_j = beta B_j^2`, with `beta >= phi''` the loss's curvature bound: no look at the data
  (or a bound `fit` released privately).
- [`DataSmoothness`][dpgcd_jax.problem.DataSmoothness] `"data"` (the default when neither is given): `M_j`
  computed from the raw data, kept for non-private use (`run` without noise, reference solvers). NOT public:
  every private entry point (`fit`) releases a feature bound with an accounted mechanism instead
  ([`dpgcd_jax.privacy.bounds`][]), and `run` with noise warns.
- `DataSmoothness` `"data_nonprivate"`: `smoothness="from_data_nonprivate"`, the opt-in to the data-derived
  `M` (the paper's convention for standardized data) for non-private studies with `run`. NOT private (an
  audit finds epsilon 1.5 against a claim of 1 when one record's features change): it warns with
  [`PrivacyLeakWarning`][dpgcd_jax.PrivacyLeakWarning], and every private entry point refuses it by its
  type (`TypeError`) before reading any data.

Data-derived `M` is computed as: `beta * mean_i x_ij^2` for a GLM loss with a known curvature bound; for a
GLM loss without one, the largest `phi''` over the labels and a grid of margins (a numerical estimate); for
any other loss, the Hessian diagonal of the per-example losses at `w = 0` (`jax.jvp` of `jax.grad`, local).
"""

from __future__ import annotations

import dataclasses
import enum
import warnings
from collections.abc import Callable
from typing import Any
from typing import TypeAlias

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _pytree
from dpgcd_jax import _validate
from dpgcd_jax import dense
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import penalties
from dpgcd_jax import sparse
from dpgcd_jax.sizes import bucket  # noqa: F401  (public here: `dpgcd_jax.problem.bucket`)

Array = jax.Array
PrivacyLeakWarning = _validate.PrivacyLeakWarning
FROM_DATA_NONPRIVATE = "from_data_nonprivate"
BOUND_RANGE = (2.0**-60, 2.0**60)  # declared feature bounds: B^2 (a smoothness) is a normal float32


class _Source(str, enum.Enum):
  """A smoothness source: shown as its string value."""

  def __str__(self) -> str:
    return str(self.value)

  def __repr__(self) -> str:
    return repr(self.value)


class PublicSmoothness(_Source):
  """A public smoothness: a declaration (`DECLARED`: the user's, or the paper protocol's in `Dataset.to_problem`, NOT
  private, said there), or a feature bound, public or released ([`dpgcd_jax.layout`][]) (`FEATURE_BOUND`)."""

  DECLARED = "declared"
  FEATURE_BOUND = "feature_bound"


class DataSmoothness(_Source):
  """A smoothness computed from the raw data, NOT public: `DATA`, which a private fit replaces by a released
  feature bound, or `NONPRIVATE`, the opt-in that every private entry point refuses (`TypeError`)."""

  DATA = "data"
  NONPRIVATE = "data_nonprivate"


SmoothnessSource: TypeAlias = PublicSmoothness | DataSmoothness
"""Where a problem's coordinate smoothness comes from: publicness as a type (module docstring)."""


def smoothness_source(value: str | SmoothnessSource) -> SmoothnessSource:
  """The `PublicSmoothness` or `DataSmoothness` member of `value` (a string or a member); ValueError otherwise."""
  for kind in (PublicSmoothness, DataSmoothness):
    if isinstance(value, kind) or value in kind._value2member_map_:
      return kind(value)
  raise ValueError(f"Expected smoothness_source in ('declared', 'feature_bound', 'data', 'data_nonprivate'), "
                   f"got smoothness_source={value!r}.")


@_pytree.dataclass_pytree(data_fields=["XT", "y", "smoothness", "l2", "penalty", "rows", "columns", "factors"],
                          meta_fields=["loss", "smoothness_source"])
@dataclasses.dataclass(frozen=True)
class Problem:
  """Data and objective of a private ERM problem (a pytree; `loss` is static).

  Build it with [`make_problem`][dpgcd_jax.problem.make_problem], which validates the inputs. The features are
  stored column-major, `XT = X.T` of shape (p, n): a feature's records are contiguous (one row).

  Attributes:
    XT: (p, n) transposed features (`X` is a property): a dense array, or [`dpgcd_jax.sparse.SparseColumns`][].
    y: (n,) targets or labels.
    smoothness: (p,) coordinate smoothness of the data term (without `l2`).
    l2: strength of the smooth ridge term `l2 / 2 ||w||^2`.
    penalty: separable penalty `psi` (see [`dpgcd_jax.penalties`][]).
    loss: the per-example loss.
    smoothness_source: where `smoothness` comes from, a [`SmoothnessSource`][dpgcd_jax.problem.SmoothnessSource]:
      public ("declared", "feature_bound") or from the data ("data", "data_nonprivate"); a string is converted.
    rows: None, or the true number of examples `n` (a traced int) when `XT` is padded with zero records
      to a public bucket ([`pad`][dpgcd_jax.layout.pad]); means divide by it.
    columns: None, or the true number of features when `XT` is padded with zero features (never selected).
    factors: None, or `XT`'s int8 limbs for derivative clipping, set by a run ([`dpgcd_jax.kernels.prepared`][]).
  """

  XT: Array | sparse.SparseColumns
  y: Array
  smoothness: Array
  l2: Array
  penalty: Any
  loss: losses_lib.Loss
  smoothness_source: SmoothnessSource = PublicSmoothness.DECLARED
  rows: Array | None = None
  columns: Array | None = None
  factors: Array | None = None

  def __post_init__(self) -> None:
    object.__setattr__(self, "smoothness_source", smoothness_source(self.smoothness_source))

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
    smoothness: public (p,) coordinate smoothness of the data term (declared), or `"from_data_nonprivate"`:
      the data-derived one, for non-private runs (NOT private: warns; `fit` refuses it). See the module docstring.
    feature_bound: public bound `B > 0` on `|x_ij|` (scalar or (p,)): features are clipped
      to it and `M_j = beta B_j^2` (needs a loss with a known curvature bound `beta`).
    sparse_capacity: sparse `X` only: `(capacity, window)`, public upper bounds on the stored
      entries of `X` and of one of its columns, that fix the stored shapes
      ([`dpgcd_jax.sparse.from_matrix`][]); default (None) their public buckets.

  Raises:
    ValueError: naming the argument, for NaN / infinite data (also for entries the cast to the
      compute dtype would make infinite, e.g. 1e300 in float32, dense or sparse), mismatched shapes, a loss
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
    sparse_XT = sparse.from_matrix(X, capacity=capacity, window=window, check_range=feature_bound is None)
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
  penalty = check_penalty(penalty, p)
  if smoothness is not None and feature_bound is not None:
    raise ValueError("Expected at most one of smoothness and feature_bound, got both.")
  bound, bound_smoothness = None, None
  if feature_bound is not None:
    checked, beta = check_feature_bound(feature_bound, p, loss, dtype)
    bound = jnp.broadcast_to(checked, (p,))
    bound_smoothness = beta * bound**2
  XT: Array | sparse.SparseColumns
  if sparse_XT is None:
    XT = dense.columns(X, dtype, bound=bound)
  else:
    XT = sparse_XT if bound is None else sparse_XT.clip_entries(bound)
  problem = Problem(XT=XT, y=y, smoothness=jnp.zeros(p, dtype), l2=jnp.asarray(l2, dtype),
                    penalty=penalty, loss=loss)
  source: SmoothnessSource
  if bound_smoothness is not None:
    smoothness, source = bound_smoothness, PublicSmoothness.FEATURE_BOUND
  elif isinstance(smoothness, str):
    if smoothness != FROM_DATA_NONPRIVATE:
      raise ValueError(f"Expected smoothness to be an array or {FROM_DATA_NONPRIVATE!r}, got "
                       f"smoothness={smoothness!r}.")
    warnings.warn(
        "smoothness='from_data_nonprivate': the smoothness is computed from the raw data and used without "
        "noise: NOT private (fit refuses it; declare smoothness= or feature_bound= for a private run).",
        PrivacyLeakWarning, stacklevel=2)
    smoothness, source = _data_smoothness(problem), DataSmoothness.NONPRIVATE
  elif smoothness is None:
    smoothness, source = _data_smoothness(problem), DataSmoothness.DATA
  else:
    _validate.check_finite_array("smoothness", smoothness, ndim=1)
    _validate.check_positive("smoothness", smoothness, allow_zero=True)
    if jnp.shape(smoothness) != (p,):
      raise ValueError(f"Expected smoothness.shape=({p},), got smoothness.shape={jnp.shape(smoothness)}.")
    source = PublicSmoothness.DECLARED
  smoothness = jnp.asarray(smoothness, dtype)
  problem = dataclasses.replace(problem, smoothness=smoothness, smoothness_source=source)
  if source is not DataSmoothness.DATA:
    # Not on the default path: a data-derived M is never used by a private entry point (fit releases a
    # feature bound instead), so a check of it there would be an exception that depends on the private
    # data (one record holding a column's only non-zero value).
    check_smoothness(problem)
  return problem


def _check_dense_type(X: Any) -> None:
  module = type(X).__module__ or ""
  if module.startswith("jax.experimental.sparse") or isinstance(X, (str, bytes, dict, set)):
    raise ValueError(f"Expected X to be a dense array, a scipy.sparse matrix or a BCOO matrix, got "
                     f"X of type {type(X).__module__}.{type(X).__name__}.")


def check_penalty(penalty: Any, p: int) -> Any:
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


def check_feature_bound(bound: Any, p: int, loss: losses_lib.Loss, dtype: Any) -> tuple[np.ndarray, float]:
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
  released = getattr(problem, "smoothness_source", None) is DataSmoothness.DATA
  return released, (dataclasses.replace(problem, smoothness_source=PublicSmoothness.FEATURE_BOUND) if released
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
  elif source is PublicSmoothness.DECLARED:
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
