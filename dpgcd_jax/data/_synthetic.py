"""Generators (deterministic from an integer `seed`): the paper's synthetic sets and offline stand-ins.

Each is ONE function registered with [`dpgcd_jax.data.register`][]; it returns a
[`Raw`][dpgcd_jax.data.Raw] and the decorator turns it into a [`Dataset`][dpgcd_jax.data.Dataset].
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import sparse

from dpgcd_jax import _validate
from dpgcd_jax import losses
from dpgcd_jax import penalties
from dpgcd_jax.data._dataset import Raw
from dpgcd_jax.data._dataset import import_module
from dpgcd_jax.data._dataset import standardize
from dpgcd_jax.data._dataset import to_labels
from dpgcd_jax.data._registry import register

LOG_L2 = 1e-3


def check_seed(seed: Any) -> int:
  """A non-negative Python int, else ValueError naming `seed`."""
  return _validate.check_int("seed", seed, low=0)


def _log(name: str, seed: int, sigma: float, n: int, p: int, noise: float, *, least_squares: bool) -> Raw:
  """log1 / log2 and their least-squares readings: the same draws for the same seed."""
  seed = check_seed(seed)
  _validate.check_int("n", n, low=2)
  _validate.check_int("p", p, low=1)
  _validate.check_positive("noise", noise, allow_zero=True)
  rng = np.random.default_rng(seed)
  x = standardize(rng.standard_normal((n, p)))
  w = rng.lognormal(mean=0.0, sigma=sigma, size=p)
  signal = x @ w
  z = signal + noise * rng.standard_normal(n)
  recipe = f"X {n} x {p} standard Gaussian (standardized columns), w_true ~ LogNormal(0, {sigma})"
  if least_squares:
    snr = float(np.sum(signal**2) / max(np.sum((z - signal) ** 2), np.finfo(float).tiny))
    description = (
        f"Synthetic least squares with a quasi-sparse parameter: {recipe}, y = X w_true + N(0, {noise}^2) "
        f"(not rescaled; empirical SNR ||X w_true||^2 / ||noise||^2 = {snr:.3g}); squared loss + smooth ridge "
        f"(l2 / 2) ||w||^2 with l2 = {LOG_L2}, no penalty."
    )
    y = z
  else:
    description = (
        f"Synthetic logistic regression with a quasi-sparse parameter: {recipe}, y = sign(X w_true + "
        f"N(0, {noise}^2)); logistic loss + smooth ridge (l2 / 2) ||w||^2 with l2 = {LOG_L2}, no penalty."
    )
    y = np.where(z >= 0, 1.0, -1.0)
  return Raw(x, y, w_true=w, description=description, source=f"generator {name}(seed={seed})")


@register(kind="generator", loss=losses.logistic, l2=LOG_L2, summary="1000 x 100, LogNormal(0, 1) w, sign labels")
def log1(seed: int = 0, *, n: int = 1000, p: int = 100, noise: float = 1.0) -> Raw:
  """Synthetic logistic regression with a quasi-sparse solution (paper section 5).

  `X` is n x p standard Gaussian with standardized columns, `w_true` has i.i.d.
  LogNormal(0, sigma = 1) entries (all positive, a few dominate), labels are
  `sign(X w_true + N(0, noise^2))` in {-1, +1} (0 maps to +1). Logistic loss with a
  smooth ridge `(1e-3 / 2) ||w||^2` and no penalty.

  This is one reading of the paper's "y = X w_true + eps": logistic loss on
  sign labels. With noise 1 against `||w_true||` of 18-34 (seeds 0-4) the labels are
  nearly separable and the optimum is bounded mostly by the ridge. The other reading is
  `log1_ls`.

  ASSUMPTION: the paper's log1 / log2 differ by the sigma of the log-normal; we could not
  check the values and use sigma = 1 for log1 and sigma = 2 for log2.

  Args:
    seed: Non-negative int; the same seed gives the same dataset.
    n: Number of records.
    p: Number of features.
    noise: Standard deviation of the Gaussian noise added before taking the sign.

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset] (`w_true` set).
  """
  return _log("log1", seed, 1.0, n, p, noise, least_squares=False)


@register(kind="generator", loss=losses.logistic, l2=LOG_L2, summary="1000 x 100, LogNormal(0, 2) w, sign labels")
def log2(seed: int = 0, *, n: int = 1000, p: int = 100, noise: float = 1.0) -> Raw:
  """Like `log1` with sigma = 2: a heavier tail, hence a sparser-looking w_true.

  Least-squares reading: `log2_ls`.
  """
  return _log("log2", seed, 2.0, n, p, noise, least_squares=False)


@register(kind="generator", loss=losses.squared, l2=LOG_L2, summary="1000 x 100, LogNormal(0, 1) w, y = Xw + noise")
def log1_ls(seed: int = 0, *, n: int = 1000, p: int = 100, noise: float = 1.0) -> Raw:
  """The least-squares reading of `log1`: `y = X w_true + N(0, noise^2)`, squared loss.

  Same `X`, `w_true` and noise draws as `log1` for the same seed; only the targets
  and the loss differ. Squared loss `(z - y)^2 / 2` with the same smooth ridge
  `(1e-3 / 2) ||w||^2` and no penalty; `y` is not rescaled.

  Noise level and signal-to-noise ratio: the noise standard deviation is `noise` (1 by
  default). The columns being (nearly) independent with unit variance, the per-record
  signal variance is about `||w_true||^2`, whose expectation is
  `p E[w^2] = p exp(2 sigma^2) = 100 e^2 ~ 739` for sigma = 1: an expected SNR of about
  740 (29 dB). The realized SNR `||X w_true||^2 / ||noise||^2` is in the description:
  362, 410, 902, 1129 and 380 on seeds 0-4 (26-30 dB).
  The optimum is close to `w_true`: all p coordinates non-zero, a few dominant.

  Args:
    seed: Non-negative int; the same seed gives the same dataset.
    n: Number of records.
    p: Number of features.
    noise: Standard deviation of the Gaussian noise on y.

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset] (`w_true` set).
  """
  return _log("log1_ls", seed, 1.0, n, p, noise, least_squares=True)


@register(kind="generator", loss=losses.squared, l2=LOG_L2, summary="1000 x 100, LogNormal(0, 2) w, y = Xw + noise")
def log2_ls(seed: int = 0, *, n: int = 1000, p: int = 100, noise: float = 1.0) -> Raw:
  """The least-squares reading of `log2` (sigma = 2), as `log1_ls` is of `log1`.

  Noise level and signal-to-noise ratio: noise standard deviation `noise` (1 by
  default); expected signal variance `p exp(2 sigma^2) = 100 e^8 ~ 3.0e5` for sigma = 2,
  with a heavy tail across seeds (a few log-normal draws dominate `||w_true||^2`): the
  realized SNR (in the description) is 6.7e3, 1.1e4, 1.1e5, 3.0e5 and 1.1e4 on seeds 0-4
  (38-55 dB). The problem is nearly noiseless: least squares recovers `w_true` almost
  exactly.

  Args:
    seed: Non-negative int; the same seed gives the same dataset.
    n: Number of records.
    p: Number of features.
    noise: Standard deviation of the Gaussian noise on y.

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset] (`w_true` set).
  """
  return _log("log2_ls", seed, 2.0, n, p, noise, least_squares=True)


@register(kind="generator", loss=losses.squared, penalty=penalties.L1, lambda_fraction=0.1,
          summary="1000 x 1000, 10 true non-zeros")
def square(seed: int = 0, *, n: int = 1000, p: int = 1000, nnz: int = 10, noise: float = 1.0) -> Raw:
  """Synthetic sparse least squares (Lasso) with 10 true non-zeros (paper section 5).

  `X` is n x p standard Gaussian with standardized columns; `w_true` has `nnz`
  non-zeros on a uniformly random support, with random signs and magnitudes
  Uniform[1, 2]; `y = X w_true + N(0, noise^2)` (not rescaled). Squared loss + l1 with
  `lambda = 0.1 * lambda_max` (`lambda_max = ||X^T y||_inf / n`).

  The fraction 0.1 was chosen so that the Lasso optimum (sklearn `Lasso(alpha=lambda,
  fit_intercept=False)`, the same objective) has about 10 non-zeros: with the defaults,
  seeds 0-4 give exactly 10, the true support. The count stays 10 for fractions in
  [0.07, 0.5] on these seeds; 0.05 adds 1-5 noise coordinates and 0.6 drops true ones,
  so 0.1 sits well inside the plateau. `tests/data/test_datasets.py` checks the range
  [10, 12] on two seeds.

  Args:
    seed: Non-negative int; the same seed gives the same dataset.
    n: Number of records.
    p: Number of features.
    nnz: Number of non-zeros of `w_true` (at most p).
    noise: Standard deviation of the Gaussian noise on y.

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset] (`w_true` set).
  """
  seed = check_seed(seed)
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
  description = (
      f"Synthetic sparse regression: X {n} x {p} standard Gaussian (standardized columns), w_true with {nnz} "
      f"non-zeros (random signs, magnitudes U[1, 2]), y = X w_true + N(0, {noise}^2); squared loss + l1, "
      "lambda = 0.1 lambda_max."
  )
  return Raw(x, y, w_true=w, description=description, source=f"generator square(seed={seed})")


@register(kind="generator", loss=losses.logistic, penalty=penalties.L1, lambda_fraction=0.05,
          summary="2600 x 500 MADELON recipe")
def madelon_synth(seed: int = 0, *, n: int = 2600) -> Raw:
  """Offline generator of MADELON, following its published recipe (Guyon, NIPS 2003).

  `sklearn.datasets.make_classification` implements the recipe: 32 Gaussian clusters
  (16 per class) on the vertices of a 5-dimensional hypercube give 5 informative
  features, 15 redundant features are random linear combinations of them, and 480 probe
  features are pure noise (p = 500), with 1% of labels flipped. Columns are standardized,
  labels in {-1, +1}. Logistic loss + l1 with `lambda = 0.05 * lambda_max`
  (`lambda_max = ||X^T y||_inf / (2 n)`): the optimum (sklearn `LogisticRegression`
  with `C = 1 / (n lambda)`, no intercept) has 14-18 non-zeros on seeds 0-2, close to
  the 20 relevant features (0.04 gives 35-41, 0.06 gives 5-7).

  Args:
    seed: Non-negative int; the same seed gives the same dataset (for a given
      scikit-learn version).
    n: Number of records (2600 = MADELON's train + validation sets).

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset] (no `w_true`: the classes are not linearly generated).
  """
  seed = check_seed(seed)
  _validate.check_int("n", n, low=2)
  sk_datasets = import_module("sklearn.datasets", "scikit-learn")
  x, y = sk_datasets.make_classification(
      n_samples=n, n_features=500, n_informative=5, n_redundant=15, n_repeated=0, n_classes=2,
      n_clusters_per_class=16, flip_y=0.01, class_sep=1.0, hypercube=True, shuffle=True, random_state=seed,
  )
  description = (
      f"MADELON recipe: {n} x 500, 5 informative + 15 redundant + 480 probe features, 32 clusters on a 5-d "
      "hypercube, 1% label noise; standardized; logistic + l1, lambda = 0.05 lambda_max."
  )
  return Raw(standardize(x), to_labels(y), description=description,
             source=f"generator madelon_synth(seed={seed}) via sklearn.datasets.make_classification")


@register(kind="generator", loss=losses.logistic, penalty=penalties.L1, lambda_fraction=0.3,
          summary="800 x 100000 sparse binary (0.9% non-zeros), 20 true non-zeros")
def dorothea_synth(seed: int = 0, *, n: int = 800, p: int = 100_000, density: float = 0.009, nnz: int = 20,
                   noise: float = 1.0) -> Raw:
  """DOROTHEA-shaped sparse binary classification: `X` is a CSR matrix.

  Shape and density follow DOROTHEA's training set (800 x 100,000 binary features, about
  1% non-zeros there, `density = 0.9%` here, i.e. about 720,000 stored ones and 900 per
  row). Column frequencies are heterogeneous, `q_j` proportional to LogNormal(0, 1)
  draws with mean `density` (capped at 1); every column has at least one 1 (no all-zero
  column, so every coordinate smoothness is positive). The `nnz` informative columns
  have frequency 0.1; `w_true` is zero elsewhere and, on them, half +1 half -1 signs
  times magnitudes Uniform[1, 2]. Labels `y = sign(X w_true + N(0, noise^2))` in
  {-1, +1} (about balanced; real DOROTHEA has about 10% positives). `X` stays binary
  (no centering: it would densify the matrix; no scaling), so `M_j = beta * q_j` differs
  per column.

  Solution sparsity: logistic + l1 with `lambda = 0.3 * lambda_max`
  (`||X^T y||_inf / (2 n)`); the optimum (sklearn `LogisticRegression`, liblinear,
  `C = 1 / (n lambda)`, no intercept) has 23-26 non-zeros on seeds 0-2, all 20 true
  ones among them (0.2 gives 40-65, 0.1 about 200, 0.4 gives 17-20, mostly true ones).
  Frequent noise columns enter first at small lambda: without centering they act as an
  intercept. `w_true` itself predicts 74-79% of the labels (rows that meet no
  informative column, about 12%, get random labels).

  Args:
    seed: Non-negative int; the same seed gives the same dataset.
    n: Number of records.
    p: Number of features.
    density: Target fraction of non-zeros of `X`, in (0, 1).
    nnz: Number of informative features (non-zeros of `w_true`), at most p.
    noise: Standard deviation of the Gaussian noise added before taking the sign.

  Returns:
    The [`Dataset`][dpgcd_jax.data.Dataset] (`X` a `scipy.sparse.csr_array`, `w_true` set).
  """
  seed = check_seed(seed)
  _validate.check_int("n", n, low=2)
  _validate.check_int("p", p, low=1)
  _validate.check_number("density", density, low=0.0, high=1.0, low_open=True, high_open=True)
  _validate.check_int("nnz", nnz, low=1)
  if nnz > p:
    raise ValueError(f"Expected nnz <= p={p}, got nnz={nnz}.")
  _validate.check_positive("noise", noise, allow_zero=True)
  rng = np.random.default_rng(seed)
  freq = rng.lognormal(0.0, 1.0, size=p)
  freq = np.minimum(freq * (density / freq.mean()), 1.0)
  support = rng.choice(p, size=nnz, replace=False)
  freq[support] = 0.1
  counts = np.maximum(rng.binomial(n, freq), 1)
  cols = np.repeat(np.arange(p, dtype=np.int32), counts)
  rows = rng.integers(0, n, size=cols.size, dtype=np.int32)
  x = sparse.csr_array((np.ones(cols.size), (rows, cols)), shape=(n, p))
  x.sum_duplicates()
  x.data[:] = 1.0
  w = np.zeros(p)
  signs = rng.permutation(np.resize([1.0, -1.0], nnz))
  w[support] = signs * rng.uniform(1.0, 2.0, size=nnz)
  y = np.where(x @ w + noise * rng.standard_normal(n) >= 0, 1.0, -1.0)
  description = (
      f"DOROTHEA-shaped synthetic set: X {n} x {p} sparse binary (CSR, {x.nnz / (n * p):.2%} non-zeros, "
      f"heterogeneous column frequencies), w_true with {nnz} non-zeros on columns of frequency 0.1, "
      f"y = sign(X w_true + N(0, {noise}^2)); not standardized; logistic + l1, lambda = 0.3 lambda_max."
  )
  return Raw(x, y, w_true=w, description=description, source=f"generator dorothea_synth(seed={seed})")
