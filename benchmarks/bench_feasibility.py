"""Where private high-dimensional learning pays: `n eps r* / ln p` against the measured gain.

`r*` is the strongest feature's effect, `max_j |(1/n) sum_i y_i x_ij| / B_j` with labels
`y_i = +-1` and `B_j` the feature's bound (1 for the binary and text sets, declared; for the
dense ones the one bound the estimators release, without its noise: the 0.9-quantile over
records of each record's 0.9-quantile of `|x_ij|`, `dpgcd_jax.privacy.bounds`). It is a property of the population a
user can guess before a fit (a pilot study, domain knowledge), NOT a private quantity: this
script computes it on the benchmark's synthetic sets to measure the rule's constant, and
joins it with the committed accuracies of `benchmarks/results/high_dim.json` (DP-GCD's
defaults, eps = 1, mean over the seeds there). Writes `benchmarks/results/feasibility.md`.

Run: ``python benchmarks/bench_feasibility.py`` (a minute on 2 cores; no fit).
"""

from __future__ import annotations

import collections
import json
import math
import pathlib

import numpy as np

from dpgcd_jax.experiments import high_dim

OUT = pathlib.Path(__file__).parent / "results"


def strongest_effect(name: str, seed: int, n: int, p: int) -> float:
  """`r*` of one draw of the set (module docstring)."""
  X, y = high_dim.make_set(name, seed, n, p)
  signs = 2.0 * y - 1.0
  if hasattr(X, "toarray"):
    return float(np.max(np.abs(X.T @ signs)) / n)  # binary words: B_j = 1
  bound = np.quantile(np.quantile(np.abs(X), 0.9, axis=1), 0.9)  # the released bound, noiseless
  return float(np.max(np.abs(X.T @ signs)) / n / bound)


def main() -> None:
  rows = json.loads((OUT / "high_dim.json").read_text())
  cells = collections.defaultdict(list)
  for row in rows:
    cells[(row["set"], row["p"], row["n"], row["epsilon"])].append(row)
  lines = ["# Where private learning pays (`python benchmarks/bench_feasibility.py`)", "",
           "`r*`: the strongest feature's effect `max_j |mean_i y_i x_ij| / B_j` (NOT private: a "
           "property of the population, for planning). Gain: DP-GCD defaults' accuracy minus the majority "
           "class (private end to end, eps = 1, from `high_dim.json`, mean over its seeds).", "",
           "| set | p | n | r* | n eps r* / ln p | gain |", "|---|---|---|---|---|---|"]
  for (name, p, n, eps), group in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
    effect = float(np.mean([strongest_effect(name, r["seed"], n, p) for r in group]))
    gain = float(np.mean([r["dp_gcd"] - r["majority"] for r in group]))
    lines.append(f"| {name} | {p} | {n} | {effect:.4f} | {n * eps * effect / math.log(p):.1f} | {gain:+.3f} |")
  (OUT / "feasibility.md").write_text("\n".join(lines) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
