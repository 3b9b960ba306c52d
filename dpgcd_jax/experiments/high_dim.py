"""The high-dimensional benchmark: sparse optima, `p` in the thousands, `n` from 2000 to 128000.

Three generated sets (labels balanced, 10 informative features, `w_true` zero elsewhere):

- `"binary"`: sparse binary bag of words; noise words with log-normal frequencies (median
  0.03), the 10 informative ones at frequency 0.15, weights of magnitude U[1, 2]. Public
  declaration: `feature_bound=1` (binary features).
- `"text"`: the same with rarer words (median 0.01) and informative words at frequency 0.03
  (weights of magnitude U[2, 4]): text-like, where a word's curvature is 30x below its bound.
- `"dense"`: Gaussian features on unequal scales `10^U[-1, 1]` (raw) or standardized
  (`"dense_std"`), the 10 informative ones in units of their scale. No declaration: the
  estimators release per-feature scales.

Labels: `y ~ Bernoulli(sigmoid(<x, w_true> - mean))`. [`run`][dpgcd_jax.experiments.high_dim.run]
fits, for one cell `(set, p, n)`, the majority class, non-private L1 logistic regression
(scikit-learn, best of a small C grid on the test rows: NOT private, a reference), the same on the
generator's true support (`"support"`: what the best selection could reach; NOT private), the private
estimators with their defaults (DP-GCD, its CV version, DP-FW, DP-IHT), and an oracle grid
of DP-GCD runs whose best point is chosen on the test rows (NOT private, labelled so).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
from scipy import sparse

SETS = ("binary", "text", "dense", "dense_std")
DECLARED = {"binary": 1.0, "text": 1.0}
INFORMATIVE = 10


def _design(name: str, seed: int, p: int) -> tuple[np.random.Generator, np.ndarray, np.ndarray]:
  """The generator of set `name` at `seed`, after its first draws: the support and the signs."""
  if name not in SETS:
    raise ValueError(f"Expected name in {SETS}, got name={name!r}.")
  rng = np.random.default_rng(seed)
  return rng, rng.choice(p, size=INFORMATIVE, replace=False), rng.choice([-1.0, 1.0], INFORMATIVE)


def _scales(name: str, rng: np.random.Generator, p: int) -> np.ndarray:
  return 10.0 ** rng.uniform(-1.0, 1.0, size=p) if name == "dense" else np.ones(p)


def feature_scales(name: str, seed: int, p: int) -> np.ndarray:
  """The standard deviations of the features of a dense set (`"dense"`: `10^U[-1, 1]`;
  `"dense_std"`: 1), as `make_set` draws them: the generator's truth, for oracle (NOT private)
  stand-ins in benchmarks."""
  if name not in ("dense", "dense_std"):
    raise ValueError(f"Expected name in ('dense', 'dense_std'), got name={name!r}.")
  rng, _, _ = _design(name, seed, p)
  return _scales(name, rng, p)


def make_set(name: str, seed: int, n: int, p: int) -> tuple[Any, np.ndarray]:
  """`(X, y)` of the set `name` (module docstring) with `n` records and `p` features."""
  rng, support, signs = _design(name, seed, p)
  if name in ("binary", "text"):
    rare = name == "text"
    freq = np.minimum(rng.lognormal(np.log(0.01 if rare else 0.03), 1.0, size=p), 0.5)
    freq[support] = 0.03 if rare else 0.15
    counts = rng.binomial(n, freq)
    cols = np.repeat(np.arange(p, dtype=np.int32), counts)
    rows = np.concatenate([rng.choice(n, size=c, replace=False) for c in counts]).astype(np.int32)
    X = sparse.csr_array((np.ones(rows.size, np.float32), (rows, cols)), shape=(n, p))
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    w = np.zeros(p)
    w[support] = signs * rng.uniform(2.0, 4.0, INFORMATIVE) * (1.0 if rare else 0.5)
    z = X @ w
  else:
    scales = _scales(name, rng, p)
    Z = rng.standard_normal((n, p)).astype(np.float32)
    w = np.zeros(p)
    w[support] = signs * rng.uniform(0.5, 1.0, INFORMATIVE)
    z = Z @ w
    X = Z * scales.astype(np.float32)
  y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(z - z.mean())))).astype(int)
  return X, y


def _accuracy(model: Any, X: Any, y: np.ndarray) -> float:
  return float(np.mean(model.predict(X) == y))


def run(name: str, *, n: int, p: int, seed: int = 0, epsilon: float = 1.0, columns: tuple[str, ...] = (
    "majority", "l1", "support", "dp_gcd", "dp_gcd_cv", "dp_fw", "dp_iht", "oracle"), test_size: int = 4000,
        estimator_params: dict[str, Any] | None = None) -> dict[str, Any]:
  """One cell of the benchmark: accuracy of each column on `test_size` held-out rows (see the
  module docstring; "l1", "support" and "oracle" are NOT private), and the seconds of the default fit."""
  from sklearn.linear_model import LogisticRegression

  import dpgcd_jax as dg

  X, y = make_set(name, seed, n + test_size, p)
  Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
  declared = {"feature_bound": DECLARED[name]} if name in DECLARED else {}
  common = dict(epsilon=epsilon, classes=[0, 1], random_state=seed, **declared, **(estimator_params or {}))
  row: dict[str, Any] = dict(set=name, n=n, p=p, seed=seed, epsilon=epsilon)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if "majority" in columns:
      row["majority"] = float(max(np.mean(yte), 1.0 - np.mean(yte)))
    if "l1" in columns:
      row["l1"] = max(_accuracy(LogisticRegression(l1_ratio=1.0, C=C, solver="liblinear").fit(Xtr, ytr), Xte, yte)
                      for C in (0.01, 0.03, 0.1, 0.3, 1.0))
    if "support" in columns:
      support = np.sort(_design(name, seed, p)[1])
      row["support"] = max(_accuracy(LogisticRegression(C=C).fit(Xtr[:, support], ytr), Xte[:, support], yte)
                           for C in (0.1, 1.0, 100.0))
    for column, kw in (("dp_gcd", {}), ("dp_fw", dict(solver="dp_fw")), ("dp_iht", dict(solver="dp_iht"))):
      if column in columns:
        start = time.perf_counter()
        row[column] = _accuracy(dg.DPGCDClassifier(**common, **kw).fit(Xtr, ytr), Xte, yte)
        row[column + "_seconds"] = time.perf_counter() - start
    if "dp_gcd_cv" in columns:
      row["dp_gcd_cv"] = _accuracy(dg.DPGCDClassifierCV(**common).fit(Xtr, ytr), Xte, yte)
    if "oracle" in columns:
      row["oracle"] = max(
          _accuracy(dg.DPGCDClassifier(**dict(common, max_iter=T, clip=c)).fit(Xtr, ytr), Xte, yte)
          for T in (5, 10, 20, 40) for c in (0.25, 0.5, 1.0))
  return row
