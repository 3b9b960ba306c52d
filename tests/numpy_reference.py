"""Straightforward NumPy references for the tests and benchmarks (not shipped in the package).

They follow the definitions line by line, with no JAX, so that the solvers can be compared
with an independent implementation step for step.
"""

from __future__ import annotations

import numpy as np

_DPHI = {
    "squared": lambda z, y: z - y,
    "logistic": lambda z, y: -y / (1.0 + np.exp(y * z)),
}
_CURVATURE = {"squared": 1.0, "logistic": 0.25}


def glm_smoothness(X: np.ndarray, loss: str, l2: float = 0.0) -> np.ndarray:
  """``M_j = beta mean_i x_ij^2 + l2``."""
  return _CURVATURE[loss] * np.mean(X**2, axis=0) + l2


def dp_gcd(
    X: np.ndarray,
    y: np.ndarray,
    loss: str,
    *,
    steps: int,
    l2: float = 0.0,
    step_size: float = 1.0,
    clip: float = np.inf,
    selection_noise: float = 0.0,
    update_noise: float = 0.0,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
  """DP-GCD (Laplace selection inside |.|, Laplace update, no penalty) in plain NumPy.

  With zero noise and ``clip = inf`` this is greedy coordinate descent with the
  Gauss-Southwell-Lipschitz rule ``j = argmax |g_j| / sqrt(M_j)`` and steps ``1 / M_j``.
  Returns the final iterate and the selected coordinates.
  """
  n, p = X.shape
  M = glm_smoothness(X, loss, l2)
  C = clip * np.sqrt(M / _CURVATURE[loss])
  delta = 2.0 * C / n
  delta_bar = np.max(delta / np.sqrt(M))
  w = np.zeros(p, X.dtype)
  margins = np.zeros(n, X.dtype)
  coordinates = np.zeros(steps, dtype=int)
  for t in range(steps):
    per_example = _DPHI[loss](margins, y)[:, None] * X
    g = np.clip(per_example, -C, C).mean(axis=0) + l2 * w
    u = g / np.sqrt(M)
    if selection_noise > 0:
      u = u + rng.laplace(scale=selection_noise * delta_bar, size=p)
    j = int(np.argmax(np.abs(u)))
    g_j = g[j] + (rng.laplace(scale=update_noise * delta[j]) if update_noise > 0 else 0.0)
    change = -step_size * g_j / M[j]
    w[j] += change
    margins += change * X[:, j]
    coordinates[t] = j
  return w, coordinates


def discrete_noisy_max_law(k: np.ndarray, t: int) -> np.ndarray:
  """`P(argmax_s k_s + Z_s = s)` for integers `k`, iid discrete Laplace `Z` of scale `t`, ties
  to the lowest index (exact, by summing over the winner's noise)."""
  z = np.arange(-80 * t, 80 * t + 1)
  pmf = np.tanh(0.5 / t) * np.exp(-np.abs(z) / t)  # P(Z = z), discrete Laplace of scale t
  cdf = np.cumsum(pmf)
  below = lambda v: np.interp(v, z, cdf, left=0.0, right=1.0)  # P(Z <= v), v integer
  law = []
  for s in range(k.size):
    total = np.ones_like(z, float)
    for l in range(k.size):
      if l != s:  # a lower index wins ties: strictly below it, at or below a higher one
        total *= below(k[s] + z - k[l] - (1 if l < s else 0))
    law.append(np.sum(pmf * total))
  return np.array(law)


def record_statistic(X: np.ndarray, grid: np.ndarray | None = None, quantile: float = 0.9) -> np.ndarray:
  """The private feature bound's per-record statistic by its definition: per row, the smallest
  point `b_k` of the grid (float32; default `2^{k/4}`, `k = -64..64`) with at least
  `ceil(quantile m)` of the row's `m` nonzero `|x|` at or below it; `inf` when none, 0 for an
  empty row."""
  grid = (2.0 ** (np.arange(-64, 65) / 4.0) if grid is None else grid).astype(np.float32)
  out = np.zeros(X.shape[0], np.float32)
  for i, row in enumerate(np.abs(np.asarray(X, np.float32))):
    nonzero = row[row > 0]
    if nonzero.size:
      needed = int(np.ceil(np.float32(quantile) * np.float32(nonzero.size)))
      held = np.array([np.sum(nonzero <= b) for b in grid])
      out[i] = grid[np.argmax(held >= needed)] if held[-1] >= needed else np.inf
  return out
