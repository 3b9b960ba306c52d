"""The regressor's clip under a declared target bound: following the target against the fixed clip.

`DPGCDRegressor`'s "auto" clip under a declared `target_bound` T is `min(0.15, s)`, `s` the typical
`|y - c| / T` released privately (`dpgcd_jax.estimators._defaults.target_clip`); before, it was
the fixed 0.15. This prints both, side by side, on:

- the full preset's least-squares sets (`log2_ls`, `log1_ls`, `square`; n = 1000, features
  clipped at B = 3, `T = 3 sd(y)` from the generator's documentation, the estimator's defaults
  end to end as `dpgcd_jax.experiments.private.defaults_row` fits them): relative error on the
  paper's objective, median over 20 seeds;
- scikit-learn's `make_regression` (50 features, 5 informative, noise 10, features / 3 under
  the bound 1.5; also with Student-t(2) noise added to y), sets the rule was not tuned on: test
  R^2, median over 6 seeds, with `T` = 3 and 10 times sd(y).

Private: every fit (epsilon = 1, the size's release included in its ledger). NOT private: the
relative errors and R^2 (measured on the data), and `T` of the `make_regression` rows, taken
from sd(y) as a stand-in for a public declaration. Writes `benchmarks/results/target_clip.md`.

Run: ``python benchmarks/bench_target_clip.py`` (about 15 s on 2 cores).
"""

from __future__ import annotations

import pathlib
import warnings

import jax
import numpy as np
from sklearn.datasets import make_regression

import dpgcd_jax as dg
from dpgcd_jax import data as data_lib
from dpgcd_jax.experiments import prepared as prepared_lib
from dpgcd_jax.experiments import private as private_lib
from dpgcd_jax.experiments import runner

RESULTS = pathlib.Path(__file__).parent / "results"
CLIPS = ("auto", 0.15)


def paper_sets(seeds: int = 20) -> list[str]:
  lines = ["| set | T / realized sd(y) | relative error, clip following y | relative error, fixed clip 0.15 |",
           "|---|---|---|---|"]
  for name in ("log2_ls", "log1_ls", "square"):
    with jax.enable_x64(True):
      spec = private_lib.PUBLIC[name]
      public = private_lib.prepare(runner.build(data_lib.get(name)).dataset, spec)
      X, y = public.dataset.X, np.asarray(public.dataset.y)
      kwargs = dict(epsilon=1.0, delta=1.0 / public.dataset.n**2, feature_bound=spec.feature_bound,
                    fit_intercept=False, target_bound=3.0 * spec.target_scale)
      if public.dataset.penalty_strength:
        kwargs.update(penalty=type(public.dataset.penalty).__name__.lower(), alpha=public.dataset.penalty_strength)
      elif public.dataset.l2:
        kwargs.update(penalty="l2", alpha=public.dataset.l2)
      medians = [np.median([float(prepared_lib.relative_error(public, np.ravel(
          dg.DPGCDRegressor(random_state=s, clip=clip, **kwargs).fit(X, y).coef_))) for s in range(seeds)])
                 for clip in CLIPS]
    lines.append(f"| {name} | {3.0 * spec.target_scale / y.std():.1f} | {medians[0]:.3f} | {medians[1]:.3f} |")
    print(lines[-1], flush=True)
  return lines


def make_regression_sets(seeds: int = 6) -> list[str]:
  lines = ["| n | noise | T / sd(y) | R^2, clip following y | R^2, fixed clip 0.15 |", "|---|---|---|---|---|"]
  for n, heavy in ((2000, False), (5000, False), (5000, True)):
    X, y = make_regression(n_samples=2 * n, n_features=50, n_informative=5, noise=10.0, random_state=0)
    if heavy:
      y = y + 20.0 * np.random.default_rng(0).standard_t(2, size=2 * n)
    X = X / 3.0
    for k in (3.0, 10.0):
      bound = k * y[:n].std()  # NOT private: a stand-in for a public declaration
      medians = [np.median([dg.DPGCDRegressor(epsilon=1.0, feature_bound=1.5, target_bound=bound, clip=clip,
                                              random_state=s).fit(X[:n], y[:n]).score(X[n:], y[n:])
                            for s in range(seeds)]) for clip in CLIPS]
      lines.append(f"| {n} | {'Gaussian + Student-t(2)' if heavy else 'Gaussian'} | {k:g} | {medians[0]:.3f} | "
                   f"{medians[1]:.3f} |")
      print(lines[-1], flush=True)
  return lines


def main() -> None:
  warnings.filterwarnings("ignore")
  text = ["# The regressor's clip under a declared target bound", "",
          "`python benchmarks/bench_target_clip.py`: the module docstring says what is private.", "",
          "## The full preset's least-squares sets (median of 20 seeds)", "", *paper_sets(), "",
          "## make_regression (median of 6 seeds)", "", *make_regression_sets()]
  (RESULTS / "target_clip.md").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
  main()
