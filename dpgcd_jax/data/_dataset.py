"""The [`Dataset`][dpgcd_jax.data._dataset.Dataset] type, `lambda_max` and the preprocessing shared by the loaders."""

from __future__ import annotations

import dataclasses
import importlib
import types
from collections.abc import Callable
from typing import Any
from typing import NamedTuple
from typing import TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse
from scipy import sparse

from dpgcd_jax import _validate
from dpgcd_jax import losses as losses_lib
from dpgcd_jax import penalties as penalties_lib
from dpgcd_jax import problem as problem_lib

Matrix: TypeAlias = np.ndarray | sparse.csr_array
PenaltyFactory = Callable[[float], Any]


class Raw(NamedTuple):
  """What a registered dataset function returns (see [`dpgcd_jax.data.register`][]).

  Attributes:
    X: Features (n, p): a NumPy array or a `scipy.sparse` matrix.
    y: Targets or labels (n,).
    w_true: Parameter the data was generated from (generators only).
    description: What the data is (overrides the first paragraph of the docstring).
    source: Where it comes from (URL, package or generator call).
  """

  X: Any
  y: Any
  w_true: Any = None
  description: str = ""
  source: str = ""


def import_module(module: str, package: str) -> types.ModuleType:
  """Imports an optional dependency of a loader, with an install hint when it is missing."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    raise ImportError(f"This dataset needs the package {package!r}: pip install 'dpgcd_jax[experiments]'.") from e


def as_matrix(name: str, X: Any) -> Matrix:
  """Validates features: a finite float64 array, or a finite float64 CSR `scipy.sparse` array.

  Sparse input stays sparse (`csr_array`, canonical format); nothing is densified.

  Raises:
    ValueError: naming `name`, for a wrong rank, NaN / infinite entries or an unsupported type.
  """
  if isinstance(X, jsparse.JAXSparse):
    raise ValueError(
        f"Expected {name} to be a NumPy array or a scipy.sparse matrix, got {type(X).__name__}: convert it "
        f"with scipy.sparse.coo_array((data, indices.T), shape) first."
    )
  if not sparse.issparse(X):
    x = np.asarray(X, dtype=np.float64)
    _validate.check_finite_array(name, x, ndim=2)
    return x
  if X.ndim != 2:
    raise ValueError(f"Expected {name} to have 2 dimension(s), got {name}.shape={X.shape}.")
  x = X if isinstance(X, sparse.csr_array) and X.dtype == np.float64 else sparse.csr_array(X, dtype=np.float64)
  if not x.has_canonical_format:
    x = x.copy()
    x.sum_duplicates()
  if not np.all(np.isfinite(x.data)):
    bad = int(np.sum(~np.isfinite(x.data)))
    raise ValueError(f"Expected {name} to be finite, got {bad} NaN or infinite entries in {name}.")
  return x


def column_mean_squares(X: Matrix) -> np.ndarray:
  """`mean_i x_ij^2` per column, float64, without densifying a sparse `X`."""
  n, p = X.shape
  if sparse.issparse(X):
    x = sparse.csr_array(X)
    return np.bincount(x.indices, weights=np.asarray(x.data, np.float64) ** 2, minlength=p) / n
  x = np.asarray(X, np.float64)
  return np.einsum("ij,ij->j", x, x) / n


def lambda_max(X: Any, y: Any, loss: losses_lib.Loss | str) -> float:
  """Smallest l1 strength for which `w = 0` is optimal: `||grad f(0)||_inf`, ridge excluded.

  `||X^T phi'(0, y)||_inf / n` for a GLM loss `phi`: `||X^T y||_inf / n` for the squared
  loss, `||X^T y||_inf / (2 n)` for the logistic loss (labels in {-1, +1}). `X` may be sparse.

  Args:
    X: Features (n, p), dense or `scipy.sparse`.
    y: Targets (n,), labels in {-1, +1} for the logistic loss.
    loss: A GLM [`dpgcd_jax.Loss`][] or a built-in name ("squared", "logistic", "huber").

  Returns:
    lambda_max as a Python float (computed in float64).

  ```pycon
  >>> import numpy as np
  >>> lambda_max(np.array([[1.0], [-1.0]]), np.array([1.0, -1.0]), "logistic")
  0.5

  ```
  """
  loss = losses_lib.get(loss)
  phi = loss.phi
  if phi is None:
    raise ValueError(f"Expected a GLM loss (dpgcd_jax.glm_loss) for lambda_max, got loss={loss.name!r}.")
  x = as_matrix("X", X)
  t = np.asarray(y, np.float64)
  _validate.check_finite_array("y", t, ndim=1)
  if t.shape[0] != x.shape[0]:
    raise ValueError(f"Expected X and y to have as many rows, got X.shape={x.shape}, y.shape={t.shape}.")
  with jax.enable_x64(True):  # phi'(0, y_i) in float64 whatever the global flag says.
    dphi = jax.vmap(jax.grad(phi), in_axes=(None, 0))(jnp.float64(0.0), jnp.asarray(t))
  return float(np.max(np.abs(x.T @ np.asarray(dphi, np.float64))) / x.shape[0])


def standardize(X: Any) -> np.ndarray:
  """Drops constant columns, then centers and scales every column to unit variance.

  The variance is the population variance (`ddof=0`), so that `mean_i x_ij^2 = 1`.
  Dense only: centering would densify a sparse matrix (see `prepare_sparse_binary`).

  Args:
    X: Features (n, p), numeric and finite.

  Returns:
    A new float64 array (n, p') with p' the number of non-constant columns.
  """
  if sparse.issparse(X):
    raise ValueError(f"Expected a dense X (centering densifies), got a sparse X of shape {X.shape}.")
  x = np.asarray(X, dtype=np.float64)
  _validate.check_finite_array("X", x, ndim=2)
  x = x[:, np.ptp(x, axis=0) > 0]
  x = x - x.mean(axis=0)
  x /= x.std(axis=0)
  return x


def standardize_target(y: Any) -> np.ndarray:
  """Centers a regression target and scales it to unit variance (centering replaces the intercept)."""
  t = np.asarray(y, dtype=np.float64)
  t = t - t.mean()
  sd = t.std()
  if sd == 0:
    raise ValueError("Expected a non-constant regression target y, got a constant one.")
  return t / sd


def to_labels(y: Any) -> np.ndarray:
  """Maps two-class labels to {-1, +1} (the smaller raw value becomes -1)."""
  t = np.asarray(y, dtype=np.float64)
  values = np.unique(t)
  if values.shape[0] != 2:
    raise ValueError(f"Expected exactly two classes in y, got {values.shape[0]} distinct values: {values[:6]}.")
  return np.where(t == values[1], 1.0, -1.0)


def _targets(y: Any, loss: losses_lib.Loss) -> np.ndarray:
  return to_labels(y) if loss.labels is not None else standardize_target(y)


def prepare_dense(raw: Raw, loss: losses_lib.Loss) -> Raw:
  """Real data: standardized columns (constant ones dropped); standardized target or +-1 labels."""
  return raw._replace(X=standardize(raw.X), y=_targets(raw.y, loss))


def prepare_sparse_binary(raw: Raw, loss: losses_lib.Loss) -> Raw:
  """Sparse data: CSR float64, all-zero columns dropped, values kept (no centering, no scaling).

  Centering would densify the matrix, so columns keep their raw scale and the coordinate
  smoothness `M_j = beta * mean_i x_ij^2` differs per column (binary data: the column's
  frequency). Targets as in `prepare_dense`.
  """
  x = sparse.csr_array(raw.X, dtype=np.float64)
  x.sum_duplicates()
  used = np.flatnonzero(np.bincount(x.indices[x.data != 0], minlength=x.shape[1]))
  return raw._replace(X=x[:, used], y=_targets(raw.y, loss))


def _check_penalty(pen: Any) -> None:
  if not all(callable(getattr(pen, m, None)) for m in ("value", "prox", "subdiff_distance")):
    raise ValueError(
        f"Expected penalty to be a dpgcd_jax.penalties object such as penalties.L1(0.1), got penalty={pen!r}."
    )


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
  """An ERM problem: data, loss and penalty (see [`dpgcd_jax.data`][] for the conventions).

  Attributes:
    name: Registry name.
    X: Features (n, p): float64 NumPy array, or float64 `scipy.sparse.csr_array` (never densified).
    y: Targets, float64 (n,); labels in {-1, +1} for the logistic loss.
    loss: A [`dpgcd_jax.Loss`][] (built-in names are converted).
    penalty: A [`dpgcd_jax.penalties`][] object `psi` (the possibly non-smooth part).
    l2: Strength of the smooth ridge term `(l2 / 2) ||w||^2` inside `f`; 0 if none.
    lambda_fraction: `penalty_strength / lambda_max` (None when there is no penalty strength).
    description: What the data is and how it was preprocessed.
    source: Where the data comes from (URL, package or generator recipe).
    w_true: Parameter the data was generated from (generators only), else None.
    solution_nnz: Number of non-zeros of the non-private optimum when known, else None.

  ```pycon
  >>> from dpgcd_jax import data
  >>> ds = data.get("diabetes")
  >>> (ds.n, ds.p, ds.loss.name, type(ds.penalty).__name__, ds.lambda_fraction)
  (442, 10, 'squared', 'L1', 0.05)

  ```
  """

  name: str
  X: Matrix = dataclasses.field(repr=False)
  y: np.ndarray = dataclasses.field(repr=False)
  loss: losses_lib.Loss
  penalty: Any = penalties_lib.Zero()
  l2: float = 0.0
  lambda_fraction: float | None = None
  description: str = ""
  source: str = ""
  w_true: np.ndarray | None = dataclasses.field(default=None, repr=False)
  solution_nnz: int | None = None

  def __post_init__(self) -> None:
    if not isinstance(self.name, str) or not self.name:
      raise ValueError(f"Expected name to be a non-empty str, got name={self.name!r}.")
    x = as_matrix("X", self.X)
    y = np.asarray(self.y, dtype=np.float64)
    _validate.check_finite_array("y", y, ndim=1)
    if x.shape[0] != y.shape[0]:
      raise ValueError(f"Expected X and y to have as many rows, got X.shape={x.shape}, y.shape={y.shape}.")
    loss = losses_lib.get(self.loss)
    _check_penalty(self.penalty)
    _validate.check_positive("l2", self.l2, allow_zero=True)
    if self.lambda_fraction is not None:
      _validate.check_positive("lambda_fraction", self.lambda_fraction, allow_zero=True)
    if loss.labels is not None and not np.all(np.isin(y, loss.labels)):
      raise ValueError(f"Expected labels y in {{-1, +1}} for the logistic loss, got values {np.unique(y)[:6]}.")
    for field, value in (("X", x), ("y", y), ("loss", loss), ("l2", float(self.l2))):
      object.__setattr__(self, field, value)
    if self.w_true is not None:
      w = np.asarray(self.w_true, dtype=np.float64)
      _validate.check_finite_array("w_true", w, ndim=1)
      if w.shape[0] != x.shape[1]:
        raise ValueError(f"Expected w_true of shape ({x.shape[1]},), got w_true.shape={w.shape}.")
      object.__setattr__(self, "w_true", w)
    if self.solution_nnz is not None:
      _validate.check_int("solution_nnz", self.solution_nnz, low=0)
      if self.solution_nnz > x.shape[1]:
        raise ValueError(f"Expected solution_nnz <= p={x.shape[1]}, got solution_nnz={self.solution_nnz}.")

  @property
  def n(self) -> int:
    """Number of records."""
    return int(self.X.shape[0])

  @property
  def p(self) -> int:
    """Number of features."""
    return int(self.X.shape[1])

  @property
  def is_sparse(self) -> bool:
    """Whether `X` is a `scipy.sparse` matrix."""
    return sparse.issparse(self.X)

  @property
  def penalty_strength(self) -> float | None:
    """The penalty's `strength` (0 for no penalty; None for a penalty without one, e.g. a box)."""
    if isinstance(self.penalty, penalties_lib.Zero):
      return 0.0
    strength = getattr(self.penalty, "strength", None)
    return None if strength is None else float(strength)

  @property
  def lambda_max(self) -> float:
    """`||grad f(0)||_inf` without the ridge term (see [`lambda_max`][dpgcd_jax.data._dataset.Dataset.lambda_max])."""
    return lambda_max(self.X, self.y, self.loss)

  @property
  def true_nnz(self) -> int | None:
    """Number of non-zeros of `w_true` (None for real data)."""
    return None if self.w_true is None else int(np.count_nonzero(self.w_true))

  def with_lambda_fraction(self, fraction: float, penalty: PenaltyFactory | None = None) -> Dataset:
    """Returns a copy whose penalty strength is `fraction * lambda_max`.

    Args:
      fraction: New fraction of `lambda_max`, >= 0.
      penalty: Penalty factory called with the strength, e.g. `penalties.L1` or
        `functools.partial(penalties.ElasticNet, l1_ratio=0.5)`; if None, the current
        penalty with its `strength` replaced.

    Returns:
      The new [`Dataset`][dpgcd_jax.data._dataset.Dataset] (`solution_nnz` reset to None).
    """
    _validate.check_positive("fraction", fraction, allow_zero=True)
    strength = float(fraction) * self.lambda_max
    current = self.penalty
    if penalty is not None:
      new = penalty(strength)
    elif (dataclasses.is_dataclass(current) and not isinstance(current, type)
          and "strength" in {f.name for f in dataclasses.fields(current)}):
      new = dataclasses.replace(current, strength=strength)
    else:
      raise ValueError(
          f"Expected penalty= (e.g. penalties.L1) for a dataset whose penalty has no strength, got "
          f"penalty=None with the current penalty {self.penalty!r}."
      )
    return dataclasses.replace(self, penalty=new, lambda_fraction=float(fraction), solution_nnz=None)

  def with_solution_nnz(self, nnz: int) -> Dataset:
    """Returns a copy recording the number of non-zeros of the non-private optimum."""
    return dataclasses.replace(self, solution_nnz=nnz)

  def smoothness(self) -> np.ndarray:
    """Coordinate smoothness of the data term, `curvature * mean_i x_ij^2`, float64 (p,).

    NOT private: computed from the data itself (see [`to_problem`][dpgcd_jax.data._dataset.Dataset.to_problem]).
    """
    if self.loss.curvature is None:
      raise ValueError(
          f"Expected a GLM loss with a known curvature bound to derive the smoothness, got "
          f"loss={self.loss.name!r}: pass smoothness= to to_problem."
      )
    return float(self.loss.curvature) * column_mean_squares(self.X)

  def to_problem(self, dtype: Any = np.float64, **kwargs: Any) -> problem_lib.Problem:
    """The [`dpgcd_jax.Problem`][] of this dataset, in `dtype`, with its smoothness declared.

    Returns `make_problem(X, y, loss, l2=l2, penalty=penalty, smoothness=S, **kwargs)` with
    `S_j = loss.curvature * mean_i x_ij^2` computed in float64
    ([`smoothness`][dpgcd_jax.data._dataset.Dataset.smoothness]).

    WARNING, NOT PRIVATE: this is the paper's protocol. The columns were standardized with
    the data's own statistics and `S` is computed from the data; both are treated as
    public BY ASSUMPTION (standardized columns give `S_j = curvature` for every `j`).
    The privacy guarantee of a solver run on this problem holds only conditionally on that
    preprocessing. The end-to-end private path instead scales features with PUBLIC bounds
    (e.g. `|x_ij| <= B_j` known a priori) and derives the smoothness from those bounds,
    or spends budget on [`dpgcd_jax.privacy.private_smoothness`][].

    Args:
      dtype: Floating dtype of the problem's arrays (`np.float64` needs JAX's x64 mode,
        e.g. inside `with jax.enable_x64(True):`).
      **kwargs: Forwarded to [`dpgcd_jax.make_problem`][]; a `smoothness=` here
        replaces the data-derived constants.

    Returns:
      The problem.

    Raises:
      ValueError: `dtype` is not floating or not available in the current JAX mode.
    """
    try:
      dt = np.dtype(dtype)
    except TypeError as e:
      raise ValueError(f"Expected dtype to be a NumPy floating dtype, got dtype={dtype!r}.") from e
    if not np.issubdtype(dt, np.floating):
      raise ValueError(f"Expected dtype to be a floating dtype, got dtype={dt.name}.")
    if jax.dtypes.canonicalize_dtype(dt) != dt:
      raise ValueError(
          f"Expected dtype={dt.name} to be available in JAX, got {jax.dtypes.canonicalize_dtype(dt).name}: "
          "turn on 64-bit mode around the call, e.g. `with jax.enable_x64(True): ds.to_problem(np.float64)`."
      )
    options = {"l2": self.l2, "penalty": self.penalty, **kwargs}
    if "smoothness" not in kwargs:
      options["smoothness"] = self.smoothness()
    return problem_lib.make_problem(self.X.astype(dt), self.y.astype(dt), self.loss, **options)
