"""The estimators' "auto" defaults on small tables: held-out accuracy / R^2 per set.

The figures behind the regressor's "auto" clip and the intercept clipped apart
(`dpgcd_jax.estimators._defaults.intercept_bound`; `DPGCDRegressor`'s docstring):

* ``breast_cancer``, ``wine`` (raw, private scales), ``cancer_std_b3`` (standardized, NOT
  privately: the scaler reads the data; declared bound 3), classification, epsilon = 1;
* ``imb4000_b3``: 4000 rows, one N(0, 1) feature, labels ``x + 0.5 z > 1.28`` (about 10%
  positive), declared bound 3, epsilon = 1: balanced accuracy (a model stuck on its
  intercept scores 0.5);
* ``diabetes`` (raw, private scales, epsilon = 5), ``gauss600`` (600 x 5 N(0, 1), 3 non-zeros,
  declared bounds 3 and 4, epsilon = 1), ``gauss600_priv`` (the same, private scales and
  target bound), ``offset6000`` (6000 x 5 features over 4 decades, target offset 50, private
  scales and target bound, epsilon = 2): regression, R^2.

70/30 splits (seeds 0, 1, 2, also the fits' `random_state`); prints the mean and the three
scores per set, with the clip, step and `T` that ran.

Usage:
  python benchmarks/bench_small_defaults.py                        # every set, the defaults
  python benchmarks/bench_small_defaults.py "{'clip': 0.1}" diabetes gauss600
"""

from __future__ import annotations

import ast
import sys
import warnings

import numpy as np
from sklearn import datasets
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import train_test_split

import dpgcd_jax as dg

RNG = np.random.default_rng(0)


def gauss(n: int = 600) -> tuple[np.ndarray, np.ndarray]:
  X = RNG.normal(size=(n, 5))
  return X, X @ np.array([1.0, -1.0, 0.0, 0.0, 0.5]) + 0.3 * RNG.normal(size=n)


def offset(n: int = 6000) -> tuple[np.ndarray, np.ndarray]:
  Z = RNG.normal(size=(n, 5))
  return Z * 10 ** RNG.uniform(-2, 2, 5), 50 + Z @ np.array([2.0, -1.0, 0.0, 1.0, 0.0]) + RNG.normal(size=n)


def imbalanced(n: int = 4000) -> tuple[np.ndarray, np.ndarray]:
  x = RNG.normal(size=(n, 1))
  return x, (x[:, 0] + 0.5 * RNG.normal(size=n) > 1.28).astype(int)


def standardized_cancer() -> tuple[np.ndarray, np.ndarray]:
  X, y = datasets.load_breast_cancer(return_X_y=True)
  return (X - X.mean(0)) / X.std(0), y  # NOT private: the scaler reads the data


SETS = {  # name: (loader, task, declared kwargs, epsilon)
    "breast_cancer": (lambda: datasets.load_breast_cancer(return_X_y=True), "c", {}, 1.0),
    "wine": (lambda: datasets.load_wine(return_X_y=True), "c", {}, 1.0),
    "cancer_std_b3": (standardized_cancer, "c", dict(feature_bound=3.0), 1.0),
    "imb4000_b3": (imbalanced, "c", dict(feature_bound=3.0), 1.0),
    "diabetes": (lambda: datasets.load_diabetes(return_X_y=True, scaled=False), "r", {}, 5.0),
    "gauss600": (gauss, "r", dict(feature_bound=3.0, target_bound=4.0), 1.0),
    "gauss600_priv": (gauss, "r", {}, 1.0),
    "offset6000": (offset, "r", {}, 2.0),
}


def main() -> None:
  warnings.filterwarnings("ignore")
  extra = ast.literal_eval(sys.argv[1]) if len(sys.argv) > 1 else {}  # a dict literal
  for name in sys.argv[2:] or SETS:
    load, task, declared, epsilon = SETS[name]
    X, y = load()
    scores = []
    for seed in range(3):
      X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed)
      kwargs = dict(declared, epsilon=epsilon, random_state=seed, **extra)
      if task == "c":
        model = dg.DPGCDClassifier(classes=np.unique(y), **kwargs).fit(X_train, y_train)
        scores.append(balanced_accuracy_score(y_test, model.predict(X_test)) if name.startswith("imb")
                      else model.score(X_test, y_test))
      else:
        model = dg.DPGCDRegressor(**kwargs).fit(X_train, y_train)
        scores.append(model.score(X_test, y_test))
    print(f"{name:15s} {np.mean(scores):.3f} {np.round(scores, 3)} clip {model.clip_:.3g} "
          f"step {model.step_size_:.3g} T {model.n_iter_}", flush=True)


if __name__ == "__main__":
  main()
