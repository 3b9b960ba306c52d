"""A NumPy prototype (not the library's solver) of a scale-free DP-GCD selection, for the next step.

`benchmarks/bench_raw_dense.py` shows that the raw dense set's gap to standardized data is the
per-feature scales: declared true scales close it, scales off by up to 2x still give most of
it, and no private release of 5000 scales from 4000 rows is that precise. This prototype tests a
design that needs no scale for the selection and one scale per step for the update:

- selection: the exponential mechanism (Gumbel noise) on `|mean_i clip(phi'_i, c) sign(x_ij)|`,
  whose sensitivity `2 c / n` is the same for every feature, whatever its scale
  (`--select sign`); or, as the library does today, on the derivative with `x` clipped at one
  bound `B` (the 0.9-quantile of `|x|`, taken here without noise), sensitivity `2 c B / n`
  (`--select bound`);
- update of the selected `j`: its bound `B_j`, the 0.9-quantile of `|x_ij|` at a rank noised by
  Laplace(6 / eps_b) (AboveThreshold's error), released per step (`--lazy 1`), or the one `B`
  (`--lazy 0`); the clipped coordinate derivative with Gaussian noise of sensitivity
  `2 c B_j / n`, and the step `1 / M_j`, `M_j = (B_j / 1.645)^2 / 4`.

Budget: eps = 1, delta = 1/n^2 as zCDP `rho = 0.0144`, split per step 0.6 / 0.1 / 0.3 between
selection (`rho = eps^2 / 8`), bound (`eps^2 / 2`) and update. The zCDP split is cruder than the
library's PLD accounting, so compare the rows with each other, not with the library's figures.
No intercept (balanced labels). Measured (2 seeds, n = 4000, p = 5000, T = 10):

| selection | update bound | dense_std | dense (raw) |
|---|---|---|---|
| bound `B` | per step `B_j` | 0.607 | 0.625 |
| sign | per step `B_j` | 0.680 | 0.721 |
| sign | one `B` | 0.691 | 0.568 |

Run: ``python benchmarks/prototype_scale_free_selection.py dense --select sign --lazy 1``.
"""

from __future__ import annotations

import argparse

import numpy as np

from dpgcd_jax.experiments import high_dim

N, P, TEST = 4000, 5000, 4000
RHO = 0.0144  # zCDP of (1, 1/n^2)-DP at n = 4000: rho + 2 sqrt(rho log(1 / delta)) = 1
SHARES = (0.6, 0.1, 0.3)  # selection, bound, update


def accuracy(name: str, seed: int, *, select: str, lazy: bool, steps: int = 10, clip: float = 1.0) -> float:
  X, y = high_dim.make_set(name, seed, N + TEST, P)
  Xtr, ytr = X[:N].astype(np.float64), y[:N]
  rng = np.random.default_rng(1000 + seed)
  rho = RHO / steps
  eps_sel, eps_bound = np.sqrt(8 * SHARES[0] * rho), np.sqrt(2 * SHARES[1] * rho)
  bound = np.quantile(np.abs(Xtr), 0.9)
  w, margins = np.zeros(P), np.zeros(N)
  for _ in range(steps):
    r = np.clip(1.0 / (1.0 + np.exp(-margins)) - ytr, -clip, clip)
    if select == "sign":
      scores, sensitivity = np.abs(np.sign(Xtr).T @ r) / N, 2 * clip / N
    else:
      scores, sensitivity = np.abs(np.clip(Xtr, -bound, bound).T @ r) / N, 2 * clip * bound / N
    j = int(np.argmax(scores + rng.gumbel(scale=2 * sensitivity / eps_sel, size=P)))
    if lazy:
      rank = int(np.clip(round(0.9 * N + rng.laplace(scale=6 / eps_bound)), 0, N - 1))
      b_j = max(float(np.sort(np.abs(Xtr[:, j]))[rank]), 1e-6)
    else:
      b_j = bound
    g = r @ np.clip(Xtr[:, j], -b_j, b_j) / N
    sigma = (2 * clip * b_j / N) / np.sqrt(2 * SHARES[2] * rho)
    step = -(g + rng.normal(scale=sigma)) / (0.25 * (b_j / 1.645) ** 2)
    w[j] += step
    margins += step * Xtr[:, j]
  return float(np.mean(((X[N:] @ w) > 0).astype(int) == y[N:]))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("set", choices=("dense", "dense_std"))
  parser.add_argument("--select", choices=("sign", "bound"), default="sign")
  parser.add_argument("--lazy", type=int, choices=(0, 1), default=1)
  args = parser.parse_args()
  accs = [accuracy(args.set, seed, select=args.select, lazy=bool(args.lazy)) for seed in (0, 1)]
  print(f"{args.set} select={args.select} lazy={args.lazy}: {np.round(accs, 3)} mean {np.mean(accs):.3f}")


if __name__ == "__main__":
  main()
