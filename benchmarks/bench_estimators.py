"""Estimators: test accuracy and fit time against non-private scikit-learn (and diffprivlib).

Two data sets: breast_cancer (569 x 30) and a 5000 x 2000 synthetic set
(``make_classification``, 10 informative features), each split 70/30 per seed with a
``StandardScaler`` fit on the training part. Methods, at every epsilon:

* ``sklearn``: ``LogisticRegression()`` (non-private, l2, C = 1; the same at every epsilon);
* ``sklearn_l1``: ``LogisticRegression(l1_ratio=1, C=0.1, solver="liblinear")`` (non-private,
  sparse, C fixed and untuned: on the synthetic set the l2 default overfits its 2000 features);
* ``dpgcd``: ``DPGCDClassifier()`` with its defaults (feature bound released privately);
* ``dpgcd_cv``: ``DPGCDClassifierCV()``, hyperparameters selected privately (default grid,
  selection included in the budget);
* ``diffprivlib``: ``diffprivlib.models.LogisticRegression`` when it imports (it does not
  with scikit-learn >= 1.8: the row is then left out and the reason printed).

Prints a markdown table (mean +- std over seeds, mean fit time) and saves a plot.

Usage:
  python benchmarks/bench_estimators.py                  # 10 seeds, epsilon 0.1 .. 5
  python benchmarks/bench_estimators.py --seeds 2 --quick  # smoke run (breast_cancer only)
"""

from __future__ import annotations

import argparse
import pathlib
import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from dpgcd_jax.estimators import DPGCDClassifier, DPGCDClassifierCV

EPSILONS = (0.1, 0.5, 1.0, 2.0, 5.0)
RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def datasets(quick: bool) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  out = {"breast_cancer": load_breast_cancer(return_X_y=True)}
  if not quick:
    out["synthetic_5000x2000"] = make_classification(
        n_samples=5000, n_features=2000, n_informative=10, n_redundant=0, n_clusters_per_class=1,
        class_sep=1.0, flip_y=0.01, random_state=0)
  return out


def diffprivlib_factory():
  """``epsilon, seed -> model`` for diffprivlib, or a string saying why it is unavailable."""
  try:
    from diffprivlib.models import LogisticRegression as DplLogisticRegression  # pylint: disable=g-import-not-at-top
  except Exception as e:  # pylint: disable=broad-except
    return f"diffprivlib unavailable: {type(e).__name__}: {e}"
  return lambda eps, seed: DplLogisticRegression(epsilon=eps, data_norm=None, random_state=seed)


def methods(dpl):
  out = {
      "sklearn": lambda eps, seed: LogisticRegression(max_iter=1000),
      "sklearn_l1": lambda eps, seed: LogisticRegression(l1_ratio=1.0, C=0.1, solver="liblinear"),
      "dpgcd": lambda eps, seed: DPGCDClassifier(epsilon=eps, random_state=seed),
      "dpgcd_cv": lambda eps, seed: DPGCDClassifierCV(epsilon=eps, random_state=seed),
  }
  if not isinstance(dpl, str):
    out["diffprivlib"] = dpl
  return out


def run(seeds: int, epsilons: tuple[float, ...], quick: bool) -> dict:
  dpl = diffprivlib_factory()
  if isinstance(dpl, str):
    print(dpl)
  results = {}
  for name, (X, y) in datasets(quick).items():
    splits = []
    for seed in range(seeds):
      X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed)
      scaler = StandardScaler().fit(X_train)
      splits.append((scaler.transform(X_train), scaler.transform(X_test), y_train, y_test))
    for method, make in methods(dpl).items():
      for eps in epsilons:
        if method.startswith("sklearn") and eps != epsilons[0]:
          results[name, method, eps] = results[name, method, epsilons[0]]
          continue
        # Warm-up fit (compilation is per data shape and number of steps): not timed, not
        # counted; enough repetitions that every candidate of the search runs.
        with warnings.catch_warnings():
          warnings.simplefilter("ignore")
          warm = make(eps, 10_000)
          if method == "dpgcd_cv":
            warm.set_params(mean_repetitions=30)
          warm.fit(splits[0][0], splits[0][2])
        accuracies, times = [], []
        for seed, (X_train, X_test, y_train, y_test) in enumerate(splits):
          with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            model = make(eps, seed).fit(X_train, y_train)
            times.append(time.perf_counter() - start)
          accuracies.append(model.score(X_test, y_test))
        results[name, method, eps] = (np.mean(accuracies), np.std(accuracies), np.mean(times))
        print(f"{name:20s} {method:12s} eps={eps:<4g} acc={np.mean(accuracies):.3f} "
              f"+- {np.std(accuracies):.3f}  fit={np.mean(times):.3f}s", flush=True)
  return results


def table(results: dict, epsilons: tuple[float, ...]) -> str:
  names = sorted({k[0] for k in results})
  meths = list(dict.fromkeys(k[1] for k in results))
  lines = ["| data set | method | " + " | ".join(f"eps={e:g}" for e in epsilons) + " | fit time (s) |",
           "|---|---|" + "---|" * (len(epsilons) + 1)]
  for name in names:
    for m in meths:
      if (name, m, epsilons[0]) not in results:
        continue
      cells = [f"{results[name, m, e][0]:.3f} +- {results[name, m, e][1]:.3f}" for e in epsilons]
      fit = np.mean([results[name, m, e][2] for e in epsilons])
      lines.append(f"| {name} | {m} | " + " | ".join(cells) + f" | {fit:.3f} |")
  return "\n".join(lines)


def plot(results: dict, epsilons: tuple[float, ...], path: pathlib.Path) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  names = sorted({k[0] for k in results})
  fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
  for ax, name in zip(axes[0], names):
    for m in dict.fromkeys(k[1] for k in results if k[0] == name):
      mean = [results[name, m, e][0] for e in epsilons]
      std = [results[name, m, e][1] for e in epsilons]
      ax.errorbar(epsilons, mean, yerr=std, marker="o", capsize=3, label=m,
                  linestyle="--" if m.startswith("sklearn") else "-")
    ax.set_xscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("test accuracy")
    ax.set_title(name)
    ax.legend()
  fig.tight_layout()
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=120)
  print(f"saved {path}")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seeds", type=int, default=10)
  parser.add_argument("--epsilons", type=float, nargs="+", default=list(EPSILONS))
  parser.add_argument("--quick", action="store_true", help="breast_cancer only")
  parser.add_argument("--out", type=pathlib.Path, default=RESULTS / "estimators.png")
  args = parser.parse_args()
  epsilons = tuple(args.epsilons)
  results = run(args.seeds, epsilons, args.quick)
  print(table(results, epsilons))
  plot(results, epsilons, args.out)


if __name__ == "__main__":
  main()
