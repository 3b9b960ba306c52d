"""diffprivlib's whole private pipeline on the saved splits of bench_estimators.py.

Runs in benchmarks/.venv-dpl (made by benchmarks/diffprivlib_env.sh): diffprivlib does not
import with scikit-learn >= 1.8, which the project's venv has. Reads one data set's npz (``X``,
``y``, ``task``, ``train_<seed>``, ``test_<seed>``, written by bench_estimators.py) and writes
a json with one record per (epsilon, seed). Imports nothing from dpgcd_jax.

The pipeline, at total epsilon ``eps`` (basic composition of its two steps):

* ``diffprivlib.models.StandardScaler(epsilon=share * eps, bounds=None)``: diffprivlib halves
  it again between the mean and the variance;
* ``diffprivlib.models.LogisticRegression(epsilon=(1 - share) * eps, data_norm=None)``
  (classification; diffprivlib splits it evenly over the one-vs-rest classes) or
  ``diffprivlib.models.LinearRegression(epsilon=(1 - share) * eps, bounds_X=None,
  bounds_y=None)`` (regression, on the raw target).

Bounds: diffprivlib's documentation gives no private way to choose them; when they are not
given it computes them on the data (min / max per feature for the scaler and the regressor,
max row norm for the logistic regression) and raises a ``PrivacyLeakWarning``, and says that to
stay private they must come from domain knowledge. The benchmark's data have no such public
bounds, so this column uses the documented fallback: every record lists the
``PrivacyLeakWarning`` messages it caught, and is marked NOT end-to-end private when there is
one. The label set of its LogisticRegression is ``np.unique(y)`` (it has no ``classes=``).

Usage (as bench_estimators.py calls it):
  benchmarks/.venv-dpl/bin/python benchmarks/_diffprivlib_worker.py DATA.npz OUT.json \
      --seeds 0 1 --eps 1 2 [--scaler-share 0.5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np


def versions() -> dict:
  import diffprivlib  # pylint: disable=g-import-not-at-top
  import scipy  # pylint: disable=g-import-not-at-top
  import sklearn  # pylint: disable=g-import-not-at-top
  return {"python": sys.version.split()[0], "diffprivlib": diffprivlib.__version__,
          "scikit-learn": sklearn.__version__, "numpy": np.__version__, "scipy": scipy.__version__}


def pipeline(task: str, eps: float, share: float, seed: int):
  from diffprivlib import models  # pylint: disable=g-import-not-at-top
  from sklearn.pipeline import Pipeline  # pylint: disable=g-import-not-at-top
  scaler = models.StandardScaler(epsilon=share * eps, bounds=None, random_state=seed)
  if task == "classification":
    model = models.LogisticRegression(epsilon=(1 - share) * eps, data_norm=None, random_state=seed)
  else:
    model = models.LinearRegression(epsilon=(1 - share) * eps, bounds_X=None, bounds_y=None,
                                    random_state=seed)
  return Pipeline([("scaler", scaler), ("model", model)])


def one(task: str, X_train, y_train, X_test, y_test, eps: float, share: float, seed: int) -> dict:
  from diffprivlib.accountant import BudgetAccountant  # pylint: disable=g-import-not-at-top
  from diffprivlib.utils import PrivacyLeakWarning  # pylint: disable=g-import-not-at-top
  BudgetAccountant.pop_default()  # a fresh default accountant (no budget cap) per fit
  record = {"eps": eps, "seed": seed, "score": None, "fit_s": None, "error": None}
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
      model = pipeline(task, eps, share, seed)
      start = time.perf_counter()
      model.fit(X_train, y_train)
      record["fit_s"] = time.perf_counter() - start
      score = float(model.score(X_test, y_test))
      record["score"] = score if np.isfinite(score) else None
      if not np.isfinite(score):
        record["error"] = f"non-finite score {score}"
      if task == "classification":
        record["constant"] = bool(np.unique(model.predict(X_test)).size == 1)
    except Exception as e:  # pylint: disable=broad-except
      record["error"] = f"{type(e).__name__}: {e}"[:300]
  leaks = sorted({str(w.message).split("\n")[0][:120] for w in caught
                  if issubclass(w.category, PrivacyLeakWarning)})
  steps = []
  if any("Bounds parameter hasn't" in m for m in leaks):
    steps.append("scaler bounds from data")
  if any("Data norm" in m for m in leaks):
    steps.append("data_norm from data")
  if any("Bounds parameters haven't" in m for m in leaks):
    steps.append("bounds_X, bounds_y from data")
  if task == "classification":
    steps.append("label set from y")
  record["not_private"] = steps
  record["leak_warnings"] = leaks
  record["privacy"] = "end-to-end" if not steps else "NOT private: " + "; ".join(steps)
  return record


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("data", help="npz written by bench_estimators.py")
  parser.add_argument("out", help="json to write")
  parser.add_argument("--seeds", type=int, nargs="+", required=True)
  parser.add_argument("--eps", type=float, nargs="+", required=True)
  parser.add_argument("--scaler-share", type=float, default=0.5,
                      help="share of epsilon for the private StandardScaler (rest: the model)")
  args = parser.parse_args()
  data = np.load(args.data, allow_pickle=False)
  task = str(data["task"])
  X, y = data["X"], data["y"]
  records = []
  for seed in args.seeds:
    train, test = data[f"train_{seed}"], data[f"test_{seed}"]
    for eps in args.eps:
      rec = one(task, X[train], y[train], X[test], y[test], eps, args.scaler_share, seed)
      records.append(rec)
      print(f"  diffprivlib seed={seed} eps={eps:g} score={rec['score']} {rec['error'] or ''}",
            flush=True)
  out = {"versions": versions(), "scaler_share": args.scaler_share, "task": task,
         "records": records}
  with open(args.out, "w") as f:
    json.dump(out, f, indent=1)


if __name__ == "__main__":
  main()
