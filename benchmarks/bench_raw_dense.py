"""Raw dense features on unequal scales: the gap to standardized data, and the scale-free selection that closes it.

The high-dimensional benchmark's `"dense"` set (`dpgcd_jax.experiments.high_dim`: Gaussian
features of standard deviation `10^U[-1, 1]`, 10 informative ones) against `"dense_std"` (the
same on unit scales), `n = 4000`, `p = 5000`, eps = 1, `DPGCDClassifier` with only `classes` given,
4 seeds, accuracy on 4000 held-out rows. Rows:

- the defaults on `dense_std` and on `dense`, private end to end: `scaling="auto"` releases the
  records' vote on whether their scales spread (`dpgcd_jax.privacy.scale_spread`) and runs one
  released bound (`"bound"`) or the scale-free selection with per-step bounds (`"per-step"`,
  `dpgcd_jax.solvers.scale_free`); the column `scaling_` says which ran;
- `scaling="bound"` on `dense` (the default before the scale-free selection), `scaling="per-step"`
  on `dense_std` (what scale-freedom costs on equal scales), `scaling="private"` (per-feature
  scales released by the noisy search);
- `"dense"` with its last 20 columns replaced by a one-hot column of 20 categories on which the label
  also depends (a table a user might not scale): the defaults and `scaling="bound"`;
- `feature_bound = k sigma_j` declared from the generator's true scales (NOT private: a
  stand-in for per-feature scales known in public), with `k` 2 or 3, and the same with each
  scale off by a random factor `2^U[-a, a]` (NOT private): how precise per-feature scales
  must be for the gap to close.

Run: ``python benchmarks/bench_raw_dense.py`` (about 3 minutes on 2 cores). Writes
`benchmarks/results/raw_dense.md` and `raw_dense.json`.
"""

from __future__ import annotations

import json
import pathlib
import warnings

import numpy as np

import dpgcd_jax as dg
from dpgcd_jax.experiments import high_dim

OUT = pathlib.Path(__file__).parent / "results"
N, P, TEST, SEEDS = 4000, 5000, 4000, (0, 1, 2, 3)
CATEGORIES = 20
# (label, set, private, estimator arguments, oracle bound: (k, a) or None)
ROWS = (
    ("defaults, standardized", "dense_std", "yes (standardization: by the generator)", {}, None),
    ("defaults, raw", "dense", "yes", {}, None),
    ('scaling="bound", raw', "dense", "yes", dict(scaling="bound"), None),
    ('scaling="per-step", standardized', "dense_std", "yes (standardization: by the generator)",
     dict(scaling="per-step"), None),
    ('scaling="private", raw', "dense", "yes", dict(scaling="private"), None),
    ("defaults, raw + one-hot column", "dense_onehot", "yes", {}, None),
    ('scaling="bound", raw + one-hot column', "dense_onehot", "yes", dict(scaling="bound"), None),
    ("feature_bound = 2 sigma_j (true scales)", "dense", "NO: oracle", {}, (2.0, 0.0)),
    ("feature_bound = 3 sigma_j (true scales)", "dense", "NO: oracle", {}, (3.0, 0.0)),
    ("2 sigma_j x 2^U[-0.5, 0.5]", "dense", "NO: oracle", {}, (2.0, 0.5)),
    ("2 sigma_j x 2^U[-1, 1]", "dense", "NO: oracle", {}, (2.0, 1.0)),
)


def make_set(name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """The set `name`; `"dense_onehot"`: `"dense"` with its last columns a one-hot column of `CATEGORIES`
  categories (frequency 1/20 each), the label redrawn with log-odds +-1.5 on categories 0 and 1."""
  if name != "dense_onehot":
    return high_dim.make_set(name, seed, N + TEST, P)
  X, y = high_dim.make_set("dense", seed, N + TEST, P)
  rng = np.random.default_rng(500 + seed)
  onehot = np.eye(CATEGORIES, dtype=X.dtype)[rng.integers(0, CATEGORIES, size=N + TEST)]
  z = 1.5 * (onehot[:, 0] - onehot[:, 1])
  y = np.where(z != 0, (rng.random(N + TEST) < 1.0 / (1.0 + np.exp(-z))).astype(int), y)
  return np.concatenate([X[:, :P - CATEGORIES], onehot], axis=1), y


def accuracy(name: str, seed: int, params: dict, oracle: tuple[float, float] | None) -> tuple[float, str]:
  X, y = make_set(name, seed)
  if oracle is not None:
    k, a = oracle
    jitter = 2.0 ** np.random.default_rng(seed + 7).uniform(-a, a, P)
    params = dict(params, feature_bound=(k * high_dim.feature_scales(name, seed, P) * jitter).astype(np.float32))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model = dg.DPGCDClassifier(epsilon=1.0, classes=[0, 1], random_state=seed, **params).fit(X[:N], y[:N])
  return float(np.mean(model.predict(X[N:]) == y[N:])), model.scaling_


def main() -> None:
  results = []
  for label, name, private, params, oracle in ROWS:
    accs, ran = zip(*(accuracy(name, seed, params, oracle) for seed in SEEDS), strict=True)
    scaling = "/".join(sorted(set(ran)))
    results.append(dict(row=label, set=name, private=private, scaling=scaling, accuracies=list(accs),
                        mean=float(np.mean(accs))))
    print(f"{label} ({scaling}): {np.round(accs, 3)} mean {np.mean(accs):.3f}", flush=True)
  lines = [f"Raw dense features, n = {N}, p = {P}, eps = 1, DPGCDClassifier defaults (seeds {SEEDS}); "
           "accuracy on 4000 held-out rows (`python benchmarks/bench_raw_dense.py`).", "",
           "| row | set | private | scaling_ | accuracy (mean) | per seed |", "|---|---|---|---|---|---|"]
  lines += [f"| {r['row']} | {r['set']} | {r['private']} | {r['scaling']} | {r['mean']:.3f} | "
            + ", ".join(f"{a:.3f}" for a in r["accuracies"]) + " |" for r in results]
  OUT.mkdir(exist_ok=True)
  (OUT / "raw_dense.md").write_text("\n".join(lines) + "\n")
  (OUT / "raw_dense.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
  main()
