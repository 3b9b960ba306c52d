"""Do the estimators' post-fit warnings fire on the fits that failed, and only on those? (issue 31, item 3)

Every fit is an estimator's defaults (with the bounds each data set declares or not), on a 70 / 30
split: the estimator sees the training rows only, and its warnings read released values only
(`dpgcd_jax.estimators._diagnostics.diagnose`). This harness then scores the model on the held-out
rows (the harness may read them: it is not the estimator) and sorts each fit:

* **zero**: every coefficient is 0 (the model is its intercept);
* **constant**: not zero, and every held-out prediction is the same class (classifier), or the
  held-out predictions' standard deviation is under 1% of the target's (regressor);
  split by whether the released model proves it (`box`: one class for every input within the
  public bounds, `b_k - b_l > sum_j |w_kj - w_lj| B_j`) or only the rows show it;
* **learned**: accuracy at least the majority share of the held-out rows + 0.05, or R^2 >= 0.1;
* **weak**: none of these (reported, not scored).

Rates: false positives = learned fits that raised any post-fit UserWarning (at `fit`, or at
`predict` on the held-out rows: `dpgcd_jax.estimators._predictions`) / learned fits
(target <= 5%); detection = failed (zero or constant) fits that warned / failed fits (target
>= 95%), with Wilson 95% intervals. The `before` columns apply the rules of the code before this
change (commit 323de33: w = 0; one class over the bounds from per-class score intervals; a
regressor's predictions under 5% of 2T; the run's noise bound on a prediction above T / 4, "expect
R^2 near or below 0"; the one-bound fallback of scaling="auto" on every such fit) to the same fits'
released values.

Data sets (small n, so that the whole run takes a few minutes on 2 cores):

* synthetic, 400 x 10 Gaussian features, labels from a logistic model on 3 of them:
  `blobs` (declared bound 3), `blobs_auto` (the bound released), `weak` (a quarter of the
  signal), `imbalanced` (85 / 15 classes, weak signal), `imbalanced_positive` (the same with
  |x|: non-negative features), `correlated` (one factor behind every feature, 80 / 20),
  `multiclass` (4 classes, 50 / 20 / 20 / 10), `l1` (penalty="l1", alpha = 1);
* scikit-learn's `breast_cancer` (569 x 30) and `wine` (178 x 13, 3 classes), raw (the bound
  released) and standardized (a NON-private StandardScaler fitted on the training rows, then a
  declared bound 3: data preparation outside the guarantee, to have real data that learns);
* regression, 400 x 10 Gaussian features, `y = x_1 - x_2 + x_3 / 2 + 0.5 noise`: `linear`
  (declared feature and target bounds), `linear_released_T` (the target bound released),
  `linear_offset` (`y` shifted by 300 and scaled by 20, T released), `linear_l1` (alpha = 1);
  scikit-learn's `diabetes` (442 x 10) with raw y, raw features (`diabetes_raw`) or
  standardized ones (`diabetes_std`).

CV estimators: at these `n`, `n epsilon` is below `SELECTION_MIN_N_EPSILON`, so
`DPGCDClassifierCV` / `DPGCDRegressorCV` run the defaults; the last table checks that every such
fit says so (`fell_back_`, `fallback_reason_` and a warning). That warning states what ran, not a
failure, and is not counted above.

Run: ``python benchmarks/bench_warnings.py [--seeds 40] [--eps 0.3 1 5] [--quick]``; writes
``benchmarks/results/warnings.md`` (``--quick``: 4 seeds, ``warnings_quick.md``).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import math
import pathlib
import platform
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"
LEARNED_MARGIN = 0.05  # accuracy above the majority share of the held-out rows
LEARNED_R2 = 0.1
CONSTANT_STD = 0.01  # a regressor's held-out prediction std under this share of y's


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------
def _logistic(seed: int, *, n: int = 400, p: int = 10, signal: float = 1.0, prior: tuple[float, ...] = (0.5, 0.5),
              factor: bool = False) -> tuple[np.ndarray, np.ndarray]:
  rng = np.random.default_rng(seed)
  if factor:
    X = 0.9 * rng.normal(size=(n, 1)) + math.sqrt(1 - 0.81) * rng.normal(size=(n, p))
  else:
    X = rng.normal(size=(n, p))
  k = len(prior)
  W = np.zeros((p, k))
  W[:3] = signal * rng.normal(size=(3, k))
  logits = X @ W + np.log(prior)
  prob = np.exp(logits - logits.max(1, keepdims=True))
  prob /= prob.sum(1, keepdims=True)
  y = (rng.uniform(size=(n, 1)) > np.cumsum(prob, 1)).sum(1)
  return X, y


def _linear(seed: int, *, n: int = 400, p: int = 10, offset: float = 0.0, scale: float = 1.0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  w = np.zeros(p)
  w[:3] = [1.0, -1.0, 0.5]
  return X, offset + scale * (X @ w + 0.5 * rng.normal(size=n))


_REAL: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def _real(name: str) -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
  def load(seed: int) -> tuple[np.ndarray, np.ndarray]:
    del seed  # the split's seed varies, the table does not
    if name not in _REAL:
      import sklearn.datasets  # pylint: disable=import-outside-toplevel
      loader = getattr(sklearn.datasets, f"load_{name}")
      kwargs = {"scaled": False} if name == "diabetes" else {}
      X, y = loader(return_X_y=True, **kwargs)
      _REAL[name] = np.asarray(X, float), np.asarray(y)
    return _REAL[name]
  return load


@dataclasses.dataclass(frozen=True)
class Case:
  name: str
  task: str  # "classification" | "regression"
  data: Callable[[int], tuple[np.ndarray, np.ndarray]]
  kwargs: dict[str, Any]
  standardize: bool = False  # a NON-private StandardScaler on the training rows (data preparation)


CASES = [
    Case("blobs", "classification", _logistic, dict(feature_bound=3.0)),
    Case("blobs_auto", "classification", _logistic, {}),
    Case("weak", "classification", lambda s: _logistic(s, signal=0.25), dict(feature_bound=3.0)),
    Case("imbalanced", "classification", lambda s: _logistic(s, signal=0.5, prior=(0.85, 0.15)),
         dict(feature_bound=3.0)),
    Case("imbalanced_positive", "classification",
         lambda s: (lambda X, y: (np.abs(X), y))(*_logistic(s, signal=0.5, prior=(0.8, 0.2))),
         dict(feature_bound=3.0)),
    Case("correlated", "classification", lambda s: _logistic(s, signal=1.5, prior=(0.8, 0.2), factor=True),
         dict(feature_bound=3.0)),
    Case("multiclass", "classification", lambda s: _logistic(s, signal=1.5, prior=(0.5, 0.2, 0.2, 0.1)),
         dict(feature_bound=3.0)),
    Case("l1", "classification", _logistic, dict(feature_bound=3.0, penalty="l1", alpha=1.0)),
    Case("breast_cancer_raw", "classification", _real("breast_cancer"), {}),
    Case("breast_cancer_std", "classification", _real("breast_cancer"), dict(feature_bound=3.0), True),
    Case("wine_raw", "classification", _real("wine"), {}),
    Case("wine_std", "classification", _real("wine"), dict(feature_bound=3.0), True),
    Case("linear", "regression", _linear, dict(feature_bound=3.0, target_bound=5.0)),
    Case("linear_released_T", "regression", _linear, dict(feature_bound=3.0)),
    Case("linear_offset", "regression", lambda s: _linear(s, offset=300.0, scale=20.0), dict(feature_bound=3.0)),
    Case("linear_l1", "regression", _linear, dict(feature_bound=3.0, target_bound=5.0, penalty="l1", alpha=1.0)),
    Case("diabetes_raw", "regression", _real("diabetes"), {}),
    Case("diabetes_std", "regression", _real("diabetes"), dict(feature_bound=3.0), True),
]


# ---------------------------------------------------------------------------------------------
# Fits
# ---------------------------------------------------------------------------------------------
KINDS = (("predictions", "reads only the predictions returned"),
         ("zero", "every coefficient is 0"), ("box", "within the feature bounds"),
         ("ellipsoid", "most likely for every row"), ("flat", "nearly constant"),
         ("feature bound noise", "released feature bound"), ("target bound noise", "released target bound"),
         ("budget below the planning rule", "ln p ="))


def _kinds(messages: list[str]) -> list[str]:
  return [next((k for k, key in KINDS if key in m), "other") for m in messages]


def _before(model: Any, n: int, regressor: bool) -> bool:
  """Whether the rules of 323de33 warn on this fit's released values (module docstring)."""
  from dpgcd_jax.estimators import _diagnostics  # pylint: disable=import-outside-toplevel
  coef, intercept = np.atleast_2d(model.coef_), np.atleast_1d(model.intercept_)
  reach = np.abs(coef) @ model.feature_bound_
  if not np.any(coef):
    return True
  if model.scaling_ == "bound" and model.scaling == "auto":
    return True  # the one-bound fallback warned on every such fit
  if not regressor:
    if intercept.shape[0] == 1:
      return bool(abs(intercept[0]) >= reach[0])
    low, high = intercept - reach, intercept + reach
    best = int(np.argmax(low))
    return bool(low[best] > np.max(np.delete(high, best)))
  if 2.0 * reach[0] < 0.05 * 2.0 * model.target_bound_:
    return True
  update = next(e.event for e in model.privacy_.entries if e.label == "update")
  noise = _diagnostics.prediction_noise(update.noise, step_size=model.step_size_,
                                     clip=model.clip_, curvature=model._curvature, n=n,  # pylint: disable=protected-access
                                     steps=model.n_iter_)
  return noise > 0.25


def _ellipsoid_ratio(coef: np.ndarray, intercept: np.ndarray, bound: np.ndarray) -> float:
  """The largest `min_l (b_k - b_l) / ||(w_k - w_l) B||_2` (two classes: `|b| / ||w B||_2`): above 1,
  the ellipsoid warning fires."""
  scaled = coef * bound
  if coef.shape[0] == 1:
    reach = np.linalg.norm(scaled[0])
    return float(abs(intercept[0]) / reach) if reach > 0 else math.inf
  best = -math.inf
  for k in range(coef.shape[0]):
    ratios = [(intercept[k] - intercept[l]) / max(np.linalg.norm(scaled[k] - scaled[l]), 1e-300)
              for l in range(coef.shape[0]) if l != k]
    best = max(best, float(min(ratios)))
  return best


def _split(X: np.ndarray, y: np.ndarray, seed: int, classification: bool):
  from sklearn.model_selection import train_test_split  # pylint: disable=import-outside-toplevel
  return train_test_split(X, y, test_size=0.3, random_state=seed, stratify=y if classification else None)


def fit_one(case: Case, epsilon: float, seed: int, cv: bool = False) -> dict[str, Any]:
  from sklearn.preprocessing import StandardScaler  # pylint: disable=import-outside-toplevel

  from dpgcd_jax import estimators  # pylint: disable=import-outside-toplevel
  classification = case.task == "classification"
  X, y = case.data(seed)
  X_train, X_test, y_train, y_test = _split(X, y, seed, classification)
  if case.standardize:
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
  name = ("DPGCDClassifier" if classification else "DPGCDRegressor") + ("CV" if cv else "")
  kwargs = dict(case.kwargs, epsilon=epsilon, random_state=seed)
  if classification:
    kwargs["classes"] = np.unique(y).tolist()  # public: the data set's documented label set
  model = getattr(estimators, name)(**kwargs)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit(X_train, y_train)
  messages = [str(w.message) for w in caught
              if w.category is UserWarning and str(w.message).startswith(f"{name}.fit:")]
  record: dict[str, Any] = dict(case=case.name, epsilon=epsilon, seed=seed)
  if cv:
    fallback = [m for m in messages if "search was skipped" in m]
    return dict(record, fell_back=bool(model.fell_back_), reason=model.fallback_reason_, warned=bool(fallback))
  coef = np.atleast_2d(model.coef_)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    prediction = model.predict(X_test)
  messages += [str(w.message) for w in caught
               if w.category is UserWarning and str(w.message).startswith(f"{name}.predict:")]
  losses: dict[str, float] = {}
  if classification:
    majority = np.max(np.unique(y_test, return_counts=True)[1]) / y_test.size
    score = float(np.mean(prediction == y_test))
    constant = np.unique(prediction).size == 1
    learned = score >= majority + LEARNED_MARGIN
    from dpgcd_jax.estimators import _diagnostics  # pylint: disable=import-outside-toplevel
    provable = _diagnostics._constant_winner(  # pylint: disable=protected-access
        coef, np.atleast_1d(model.intercept_), model.feature_bound_, 1)[0] is not None
    ratio = _ellipsoid_ratio(coef, np.atleast_1d(model.intercept_), model.feature_bound_)
    losses = _log_losses(model, X_test, y_test, y_train)
  else:
    score = float(1.0 - np.mean((prediction - y_test) ** 2) / np.var(y_test))
    constant = bool(np.std(prediction) < CONSTANT_STD * np.std(y_test))
    learned = score >= LEARNED_R2
    provable, ratio = False, math.nan
  outcome = "zero" if not np.any(coef) else "constant" if constant else "learned" if learned else "weak"
  return dict(record, outcome=outcome, score=score, provable=provable, ratio=ratio, kinds=_kinds(messages),
              warned=bool(messages), before=_before(model, X_train.shape[0], not classification), **losses)


def _log_losses(model: Any, X_test: np.ndarray, y_test: np.ndarray, y_train: np.ndarray) -> dict[str, float]:
  """Held-out log loss of `predict_proba` and of the training rows' class shares (the prior; read
  by this harness, not by the estimator), for issue 31's item 6."""
  from sklearn.metrics import log_loss  # pylint: disable=import-outside-toplevel
  labels = model.classes_
  prior = np.array([np.mean(y_train == c) for c in labels])
  return dict(log_loss=float(log_loss(y_test, model.predict_proba(X_test), labels=labels)),
              prior_log_loss=float(log_loss(y_test, np.tile(prior, (y_test.size, 1)), labels=labels)))


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
  if n == 0:
    return float("nan"), float("nan")
  p = k / n
  centre = (p + z * z / (2 * n)) / (1 + z * z / n)
  half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
  return max(0.0, centre - half), min(1.0, centre + half)


def _rate(k: int, n: int) -> str:
  if n == 0:
    return "-"
  low, high = wilson(k, n)
  return f"{k}/{n} = {k / n:.1%} [{low:.1%}, {high:.1%}]"


def _cell(rows: list[dict[str, Any]], outcomes: tuple[str, ...], key: str = "warned") -> str:
  chosen = [r for r in rows if r["outcome"] in outcomes]
  return f"{sum(r[key] for r in chosen)}/{len(chosen)}" if chosen else "-"


def report(rows: list[dict[str, Any]], cv_rows: list[dict[str, Any]], args: argparse.Namespace,
           seconds: float) -> str:
  import jax  # pylint: disable=import-outside-toplevel
  import sklearn  # pylint: disable=import-outside-toplevel
  learned = [r for r in rows if r["outcome"] == "learned"]
  failed = [r for r in rows if r["outcome"] in ("zero", "constant")]
  by_case = {r["case"] for r in rows}
  lines = [
      "# Post-fit warnings: false positives on fits that learned, detection of failed fits",
      "",
      f"`python benchmarks/bench_warnings.py{''.join(' ' + a for a in args.argv)}`",
      f"({len(rows)} fits, {len(args.eps)} epsilons x {args.seeds} seeds x {len(by_case)} data sets, "
      f"{seconds:.0f} s; jax {jax.__version__}, scikit-learn {sklearn.__version__}, "
      f"python {platform.python_version()}, {platform.machine()}). Definitions: the module docstring of "
      f"`benchmarks/bench_warnings.py`. Targets (issue 31): false positives <= 5%, detection >= 95%.",
      "",
      "## Totals",
      "",
      "| | now | before (the rules of 323de33 on the same fits) |",
      "|---|---|---|",
      f"| false positives: learned fits that warned | {_rate(sum(r['warned'] for r in learned), len(learned))} | "
      f"{_rate(sum(r['before'] for r in learned), len(learned))} |",
      f"| detection: zero or constant fits that warned | {_rate(sum(r['warned'] for r in failed), len(failed))} | "
      f"{_rate(sum(r['before'] for r in failed), len(failed))} |",
  ]
  for label, chosen in (
      ("zero (w = 0)", [r for r in failed if r["outcome"] == "zero"]),
      ("constant, proved by the released model (box)", [r for r in failed if r["outcome"] == "constant"
                                                         and r["provable"]]),
      ("constant on the held-out rows only", [r for r in failed if r["outcome"] == "constant"
                                              and not r["provable"]])):
    lines.append(f"| detection, {label} | {_rate(sum(r['warned'] for r in chosen), len(chosen))} | "
                 f"{_rate(sum(r['before'] for r in chosen), len(chosen))} |")
  lines.append(f"| weak fits (neither; not scored) that warned | "
               f"{_cell(rows, ('weak',))} | {_cell(rows, ('weak',), 'before')} |")
  lines += [
      "",
      "## Per data set and epsilon",
      "",
      "`warned/fits` per outcome, now (before).",
      "",
      "| data set | eps | learned: warned (before) | zero: warned (before) | constant: warned (before) | "
      "of which provable | weak: warned (before) | mean score |",
      "|---|---|---|---|---|---|---|---|",
  ]
  by_cell: dict[tuple[str, float], list[dict[str, Any]]] = collections.defaultdict(list)
  for r in rows:
    by_cell[(r["case"], r["epsilon"])].append(r)
  for (name, eps), cell in by_cell.items():
    constant = [r for r in cell if r["outcome"] == "constant"]
    lines.append(
        f"| {name} | {eps:g} | {_cell(cell, ('learned',))} ({_cell(cell, ('learned',), 'before')}) | "
        f"{_cell(cell, ('zero',))} ({_cell(cell, ('zero',), 'before')}) | {_cell(cell, ('constant',))} "
        f"({_cell(cell, ('constant',), 'before')}) | {sum(r['provable'] for r in constant) if constant else '-'} | "
        f"{_cell(cell, ('weak',))} ({_cell(cell, ('weak',), 'before')}) | "
        f"{np.mean([r['score'] for r in cell]):.3f} |")
  lines += ["", "## Which warning fired", "", "Fits on which each warning fired, by outcome.", "",
            "| warning | learned | zero | constant | weak |", "|---|---|---|---|---|"]
  for kind, _ in KINDS + (("other", ""),):
    counts = collections.Counter(r["outcome"] for r in rows if kind in r["kinds"])
    if counts:
      lines.append(f"| {kind} | {counts['learned']} | {counts['zero']} | {counts['constant']} | {counts['weak']} |")
  missed = collections.Counter(r["case"] for r in failed if not r["warned"])
  learned_ratios = [r["ratio"] for r in learned if not math.isnan(r["ratio"])]
  missed_ratios = sorted(r["ratio"] for r in failed if not r["warned"] and not math.isnan(r["ratio"])
                         and r["outcome"] == "constant")
  lines += ["", "## Failed fits that did not warn", "",
            ", ".join(f"{name}: {count}" for name, count in missed.most_common()) or "none", "",
            "- Features in a corner of the bounds `[-B, B]` (non-negative ones: `imbalanced_positive`, raw "
            "`breast_cancer` and `wine`): the model answers one class on the rows, not over the bounds, and no "
            "released value tells it from a model that separates centred data. `predict` sees it on the rows it "
            "returns (the `predictions` warning, a function of its output only, from 30 rows).",
            "- Models near the threshold on centred data: the ellipsoid test fires when the intercept margin "
            "exceeds `||w B||_2` (ratio > 1). Largest ratio among the fits that learned: "
            f"{max(learned_ratios, default=math.nan):.2f}; ratios of the missed constant classifiers: "
            f"{', '.join(f'{x:.2f}' for x in missed_ratios[-12:]) or 'none'} (the largest 12).",
            "- A regressor's target bound that its noise put low although, at that n and epsilon, the noise "
            "rarely does (`noise_probability` < 0.5): the predictions are then ~0 and vary by more than 1% of "
            "that T but less than 1% of the standard deviation of y, which neither the released values nor the "
            "predictions (without y) tell from a small target.",
            ""] + _probability_lines(rows) + [
            "", "## CV estimators: the fallback to the defaults", "",
            "| estimator | fits | fell_back_ | warned | fallback_reason_ (first) |", "|---|---|---|---|---|"]
  for name in ("DPGCDClassifierCV", "DPGCDRegressorCV"):
    chosen = [r for r in cv_rows if r["estimator"] == name]
    if chosen:
      lines.append(f"| {name} | {len(chosen)} | {sum(r['fell_back'] for r in chosen)} | "
                   f"{sum(r['warned'] for r in chosen)} | {chosen[0]['reason']} |")
  return "\n".join(lines) + "\n"


PROBABILITY_SLACK = 0.02  # nats: a held-out log loss above the prior's by more than this is "worse"


def _probability_lines(rows: list[dict[str, Any]]) -> list[str]:
  """Issue 31, item 6: `predict_proba`'s held-out log loss against the class prior's."""
  chosen = [r for r in rows if "log_loss" in r]
  if not chosen:
    return []
  lines = ["## Honest probabilities: predict_proba against the class prior", "",
           f"Held-out log loss (nats) of `predict_proba` and of the training rows' class shares; `worse`: fits whose "
           f"log loss exceeds the prior's by more than {PROBABILITY_SLACK:g}.", "",
           "| data set | eps | log loss | prior | worse | largest excess |", "|---|---|---|---|---|---|"]
  by_cell: dict[tuple[str, float], list[dict[str, Any]]] = collections.defaultdict(list)
  for r in chosen:
    by_cell[(r["case"], r["epsilon"])].append(r)
  for (name, eps), cell in by_cell.items():
    excess = np.array([r["log_loss"] - r["prior_log_loss"] for r in cell])
    lines.append(f"| {name} | {eps:g} | {np.mean([r['log_loss'] for r in cell]):.3f} | "
                 f"{np.mean([r['prior_log_loss'] for r in cell]):.3f} | {int(np.sum(excess > PROBABILITY_SLACK))}/"
                 f"{len(cell)} | {np.max(excess):+.3f} |")
  worse = sum(r["log_loss"] - r["prior_log_loss"] > PROBABILITY_SLACK for r in chosen)
  lines += ["", f"In all: {_rate(worse, len(chosen))} of the classifier fits are worse than the prior.", ""]
  return lines


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--seeds", type=int, default=40)
  parser.add_argument("--eps", type=float, nargs="+", default=[0.3, 1.0, 5.0])
  parser.add_argument("--cases", nargs="+", default=[c.name for c in CASES])
  parser.add_argument("--quick", action="store_true", help="4 seeds, writes warnings_quick.md")
  parser.add_argument("--out", type=pathlib.Path, default=None)
  args = parser.parse_args()
  import sys  # pylint: disable=import-outside-toplevel
  args.argv = sys.argv[1:]
  if args.quick:
    args.seeds = 4
  out = args.out or RESULTS / ("warnings_quick.md" if args.quick else "warnings.md")
  cases = [c for c in CASES if c.name in args.cases]
  start = time.perf_counter()
  rows, cv_rows = [], []
  for case in cases:
    for eps in args.eps:
      for seed in range(args.seeds):
        rows.append(fit_one(case, eps, seed))
      print(f"{case.name} eps={eps:g}: {time.perf_counter() - start:.0f} s", flush=True)
    cv_rows.append(dict(fit_one(case, args.eps[0], 0, cv=True),
                        estimator="DPGCDClassifierCV" if case.task == "classification" else "DPGCDRegressorCV"))
  text = report(rows, cv_rows, args, time.perf_counter() - start)
  out.parent.mkdir(parents=True, exist_ok=True)
  out.write_text(text)
  print(text)


if __name__ == "__main__":
  main()
