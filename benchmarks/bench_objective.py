"""Relative objective error of DP-GCD's defaults on the sparse binary set (issue 30's target).

For cells `(p, n)` of `dpgcd_jax.experiments.high_dim`'s `"binary"` set, eps = 1, delta = 1/n^2
(the estimator's default), the default fit exactly as `high_dim.run` makes it
(`DPGCDClassifier(epsilon=1, classes=[0, 1], random_state=seed, feature_bound=1.0)`), this
measures, besides test accuracy on 4000 held-out rows:

- `F`, the estimator's training objective (default `penalty=None`): the mean logistic loss over
  the n training rows of `(coef_, intercept_)`, labels in {0, 1}.
- `F*`, its minimum (unpenalized, with intercept): scikit-learn L-BFGS (`C=inf`). When that
  model separates the training rows (every margin > 0) the infimum is 0 and is not attained:
  `F* = 0`. Otherwise the gradient's max norm at the returned point is reported.
- `F(0)`: at `w = 0`, intercept 0 (`log 2`, the reference used); also reported at `w = 0`
  with the best intercept alone (`F(0, b*)`).
- The relative error `(F - F*) / (F(0) - F*)`, the target being <= 0.1.
- A sparse reference: `F_l = F + lambda ||w||_1` with `lambda = 1 / (C n)`, `C` the one that
  `high_dim.run`'s L1 column picks (liblinear, best test accuracy over its grid), intercept
  unpenalized. `F*_l` from liblinear (`intercept_scaling=100`, tol 1e-6), the intercept
  re-optimized exactly, certified by a duality gap (reported). The private model's
  relative error on `F_l`, and the L1 model's (high_dim.run's liblinear fit at that C) on both
  objectives; and the generating `w_true` (intercept `-mean(<x, w_true>)`) on both.

NOT private: `F*`, `F*_l`, the choice of `C` on the test rows, the L1 model and `w_true`:
references only. Only the DP-GCD fit is private. Writes `benchmarks/results/objective.md` and
`objective.json`.

Run: ``python benchmarks/bench_objective.py [--quick]`` (full: about 4 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time
import warnings
from typing import Any

import numpy as np
from scipy import special

from dpgcd_jax.experiments import high_dim

OUT = pathlib.Path(__file__).parent / "results"
FULL = [(5000, 32000), (20000, 32000), (5000, 8000)]  # the target's cells first
QUICK = [(5000, 8000)]
C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)  # high_dim.run's L1 grid
TEST = 4000


def objective(X: Any, y: np.ndarray, w: np.ndarray, b: float) -> float:
  """Mean logistic loss of `(w, b)` over the rows of `X` (labels in {0, 1})."""
  z = X @ w + b
  return float(np.mean(np.logaddexp(0.0, z) - y * z))


def best_intercept(X: Any, y: np.ndarray, w: np.ndarray, b: float = 0.0) -> float:
  """The intercept minimizing `objective` for fixed `w` (1-D Newton)."""
  z = X @ w
  for _ in range(100):
    s = special.expit(z + b)
    g, h = np.mean(s - y), np.mean(s * (1.0 - s))
    b -= g / h
    if abs(g) < 1e-14:
      break
  return float(b)


def true_w(seed: int, X: Any) -> tuple[np.ndarray, float]:
  """`X = make_set("binary", seed, n, p)[0]`'s `w_true` and intercept `-mean(<x, w_true>)` (its
  random draws replayed: the module's generator, copied)."""
  (n, p), rng = X.shape, np.random.default_rng(seed)
  support = rng.choice(p, size=high_dim.INFORMATIVE, replace=False)
  signs = rng.choice([-1.0, 1.0], high_dim.INFORMATIVE)
  freq = np.minimum(rng.lognormal(np.log(0.03), 1.0, size=p), 0.5)
  freq[support] = 0.15
  counts = rng.binomial(n, freq)
  for c in counts:
    rng.choice(n, size=c, replace=False)
  w = np.zeros(p)
  w[support] = signs * rng.uniform(2.0, 4.0, high_dim.INFORMATIVE) * 0.5
  return w, -float(np.mean(X @ w))


def unpenalized_optimum(X: Any, y: np.ndarray) -> dict[str, Any]:
  """`F*` by L-BFGS (C = inf); 0 when the returned model separates the rows."""
  from sklearn.linear_model import LogisticRegression

  m = LogisticRegression(C=np.inf, solver="lbfgs", max_iter=5000, tol=1e-10).fit(X, y)
  w, b = m.coef_.ravel().astype(float), float(m.intercept_[0])
  z = X @ w + b
  r = special.expit(z) - y
  margins = np.where(y == 1, z, -z)
  separable = bool(np.min(margins) > 0)
  return dict(F_star=0.0 if separable else objective(X, y, w, b), F_lbfgs=objective(X, y, w, b),
              separable=separable, min_margin=float(np.min(margins)), lbfgs_iter=int(m.n_iter_[0]),
              grad_max=float(max(np.max(np.abs(X.T @ r)) / len(y), abs(np.mean(r)))),
              norm_w=float(np.linalg.norm(w)))


def l1_optimum(X: Any, y: np.ndarray, lam: float) -> dict[str, Any]:
  """`min F + lam ||w||_1` (intercept unpenalized) and its duality gap."""
  from sklearn.linear_model import LogisticRegression

  n = len(y)
  m = LogisticRegression(l1_ratio=1.0, C=1.0 / (lam * n), solver="liblinear", intercept_scaling=100.0, tol=1e-6,
                         max_iter=1000).fit(X, y)
  w = m.coef_.ravel().astype(float)
  b = best_intercept(X, y, w, float(m.intercept_[0]))
  primal = objective(X, y, w, b) + lam * np.sum(np.abs(w))
  # Dual point u = s (sigmoid(z) - y): sum u = 0 (b optimal), ||X^T u||_inf / n <= lam after scaling s.
  r = special.expit(X @ w + b) - y
  s = min(1.0, lam * n / np.max(np.abs(X.T @ r)))
  a = np.clip(y + s * r, 1e-300, 1.0 - 1e-16)
  dual = float(np.mean(special.entr(a) + special.entr(1.0 - a)))
  return dict(F_l_star=primal, gap=primal - dual, w=w, b=b, nnz=int(np.sum(w != 0)))


def relative(F: float, F0: float, F_star: float) -> float:
  return (F - F_star) / (F0 - F_star)


def cell(p: int, n: int, seed: int) -> dict[str, Any]:
  from sklearn.linear_model import LogisticRegression

  import dpgcd_jax as dg

  X, y = high_dim.make_set("binary", seed, n + TEST, p)
  Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
  row: dict[str, Any] = dict(p=p, n=n, seed=seed, nnz=int(Xtr.nnz))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    model = dg.DPGCDClassifier(epsilon=1.0, classes=[0, 1], random_state=seed, feature_bound=1.0).fit(Xtr, ytr)
    row["fit_seconds"] = time.perf_counter() - start
    row["accuracy"] = float(np.mean(model.predict(Xte) == yte))
    w, b = np.asarray(model.coef_, float).ravel(), float(np.ravel(model.intercept_)[0])
    row["dp_nnz"] = int(np.sum(w != 0))
    start = time.perf_counter()
    l1_models = [LogisticRegression(l1_ratio=1.0, C=C, solver="liblinear").fit(Xtr, ytr) for C in C_GRID]
    accs = [float(np.mean(m.predict(Xte) == yte)) for m in l1_models]
    k = int(np.argmax(accs))
    l1 = l1_models[k]
    w1, b1 = l1.coef_.ravel().astype(float), float(l1.intercept_[0])
    row.update(C=C_GRID[k], l1_accuracy=accs[k], l1_nnz=int(np.sum(w1 != 0)))
    star = unpenalized_optimum(Xtr, ytr)
    lam = 1.0 / (C_GRID[k] * n)
    opt_l = l1_optimum(Xtr, ytr, lam)
    row["reference_seconds"] = time.perf_counter() - start
  wt, bt = true_w(seed, X)
  F0, F_star = float(np.log(2.0)), star["F_star"]
  F0b = objective(Xtr, ytr, np.zeros(p), best_intercept(Xtr, ytr, np.zeros(p)))
  F, F1, Ft = objective(Xtr, ytr, w, b), objective(Xtr, ytr, w1, b1), objective(Xtr, ytr, wt, bt)
  Fl, Fl_star = lambda w_, b_: objective(Xtr, ytr, w_, b_) + lam * np.sum(np.abs(w_)), opt_l["F_l_star"]
  row.update({k_: v for k_, v in star.items()}, lam=lam, F_l_star=Fl_star, l1_gap=opt_l["gap"],
             l1_opt_nnz=opt_l["nnz"], F0=F0, F0_best_b=F0b, F=F, F_l1=F1, F_true=Ft,
             rel=relative(F, F0, F_star), rel_best_b=relative(F, F0b, F_star),
             rel_l=relative(Fl(w, b), F0, Fl_star), l1_rel=relative(F1, F0, F_star),
             l1_rel_l=relative(Fl(w1, b1), F0, Fl_star), l1opt_rel=relative(objective(Xtr, ytr, opt_l["w"], opt_l["b"]),
                                                                           F0, F_star),
             true_rel=relative(Ft, F0, F_star), true_rel_l=relative(Fl(wt, bt), F0, Fl_star))
  return row


COLUMNS = (("accuracy", "accuracy", ".3f"), ("rel", "rel err F", ".3f"), ("rel_l", "rel err F_l", ".3f"),
           ("l1_accuracy", "L1 accuracy", ".3f"), ("l1_rel", "L1 rel err F", ".3f"),
           ("l1_rel_l", "L1 rel err F_l", ".3f"), ("l1opt_rel", "argmin F_l: rel err F", ".3f"),
           ("true_rel", "w_true rel err F", ".3f"), ("true_rel_l", "w_true rel err F_l", ".3f"),
           ("F", "F", ".4f"), ("F_star", "F*", ".4f"),
           ("F0_best_b", "F(0, b*)", ".4f"), ("rel_best_b", "rel err F vs F(0, b*)", ".3f"),
           ("F_l_star", "F*_l", ".4f"), ("fit_seconds", "DP fit (s)", ".1f"),
           ("reference_seconds", "references (s)", ".0f"))


def table(rows: list[dict]) -> str:
  keys = sorted({(r["p"], r["n"]) for r in rows}, key=lambda k: (-k[1], k[0]))
  lines = ["| p | n | seeds | " + " | ".join(c[1] for c in COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 3)]
  for key in keys:
    cell_rows = [r for r in rows if (r["p"], r["n"]) == key]
    lines.append(f"| {key[0]} | {key[1]} | {len(cell_rows)} | " + " | ".join(
        format(float(np.mean([r[c] for r in cell_rows])), f) for c, _, f in COLUMNS) + " |")
  return "\n".join(lines)


def checks(rows: list[dict]) -> str:
  lines = ["| p | n | seed | C | lambda | F* separable | min margin | L-BFGS iter | max grad at F* | "
           "F_l duality gap | nnz (DP, L1, argmin F_l) |", "|" + "---|" * 11]
  for r in rows:
    lines.append(f"| {r['p']} | {r['n']} | {r['seed']} | {r['C']} | {r['lam']:.3g} | {r['separable']} | "
                 f"{r['min_margin']:.3g} | {r['lbfgs_iter']} | {r['grad_max']:.2g} | {r['l1_gap']:.2g} | "
                 f"{r['dp_nnz']}, {r['l1_nnz']}, {r['l1_opt_nnz']} |")
  return "\n".join(lines)


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--seeds", type=int, default=2)
  args = parser.parse_args()
  cells = QUICK if args.quick else FULL
  seeds = 1 if args.quick else args.seeds
  rows = []
  stem = "objective_quick" if args.quick else "objective"
  for p, n in cells:
    for seed in range(seeds):
      start = time.perf_counter()
      row = cell(p, n, seed)
      row["cell_seconds"] = time.perf_counter() - start
      rows.append(row)
      print(f"p={p} n={n} seed={seed}: acc {row['accuracy']:.3f} rel {row['rel']:.3f} rel_l {row['rel_l']:.3f} "
            f"L1 rel {row['l1_rel']:.3f} true rel {row['true_rel']:.3f} ({row['cell_seconds']:.0f} s)", flush=True)
      (OUT / f"{stem}.json").write_text(json.dumps(rows, indent=1))
  text = (f"# Relative objective error (`benchmarks/bench_objective.py{' --quick' if args.quick else ''}`)\n\n"
          "Binary set, eps = 1, delta = 1/n^2, DP-GCD defaults (`feature_bound=1`); seed means.\n"
          "`rel err F = (F - F*) / (F(0) - F*)`, `F(0) = log 2` (w = 0, intercept 0); `F_l = F + lambda ||w||_1`.\n"
          "NOT private: F*, F*_l, C (chosen on the test rows), the L1 model, w_true.\n\n"
          + table(rows) + "\n\nChecks (per seed):\n\n" + checks(rows) + "\n")
  (OUT / f"{stem}.md").write_text(text)
  print(text)


if __name__ == "__main__":
  main()
