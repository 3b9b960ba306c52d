"""Exact privacy-loss distribution of `T` Laplace steps on a lattice (no accumulated bias).

The Laplace mechanism with scale `b = 1 / eps` (sensitivity 1) has the dominating pair
`P = Lap(0, b)`, `Q = Lap(1, b)` (a smaller shift is a post-processing of shift 1) and
the privacy loss `L(x) = eps (|x - 1| - |x|)`: `+eps` for `x <= 0` (probability
`1 / 2` under `P`), `-eps` for `x >= 1` (`e^{-eps} / 2`) and `eps (1 - 2x)` in
between, with density proportional to `e^{l / 2}` on `(-eps, eps)` (probability
`p_mid = (1 - e^{-eps}) / 2`). Conditionally on an atom the loss is binary randomized
response with parameter eps (`P(+eps | atom) = e^eps / (1 + e^eps)`). So `T` steps are:
`K ~ Bin(T, p_mid)` "middle" steps, the other `T - K` randomized response.

The randomized-response part lives exactly on the lattice `eps Z`; each middle loss is
spread onto the two ends of its cell of the lattice `h = eps / n` keeping its P- and
Q-masses (a dominating pair, see `_middle_step`). Only the `K` middle steps are
discretized (`E[K] = T p_mid`, about `T eps / 2`), and with a second-order error, so
nothing accumulates over the `T` steps.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special
from scipy import stats

# Lattice points per eps for the middle part.
N_MID = 16
_TAIL = 1e-30


def _middle_step(eps: float, n: int) -> np.ndarray:
  """pmf of one middle loss on the lattice `-eps + i h`, `i = 0..2n`, `h = eps / n`.

  The loss restricted to a cell `[l_{i-1}, l_i]` (P-mass `w`, Q-mass `w_Q = E_P[e^{-L};
  cell]`) is replaced by the two-point pair on the cell's ends with the same P- and Q-masses
  ("connect the dots", Doroshenko et al. 2022): any pair whose loss lies in `[a, b]` is a
  post-processing of that two-point pair (channel `K(y | b) = (P(y) e^{-a} - Q(y)) / (...)`
  as in `_br`), so the result dominates, with a second-order error only.
  """
  edges = np.linspace(-eps, eps, 2 * n + 1)
  # Density of the middle loss under P is c e^{l/2}: cell masses under P and under Q.
  w = 2.0 * np.diff(np.exp(edges / 2.0))
  wq = -2.0 * np.diff(np.exp(-edges / 2.0))
  a, b = edges[:-1], edges[1:]
  w_hi = (w * np.exp(-a) - wq) / (np.exp(-a) - np.exp(-b))
  w_hi = np.clip(w_hi, 0.0, w)
  out = np.zeros(2 * n + 1)
  out[1:] += w_hi
  out[:-1] += w - w_hi
  return out / w.sum()


def _binom_pmf(r: int, q: float) -> np.ndarray:
  a = np.arange(r + 1)
  log_pmf = (special.gammaln(r + 1) - special.gammaln(a + 1) - special.gammaln(r - a + 1)
             + a * math.log(q) + (r - a) * math.log1p(-q))
  return np.exp(log_pmf)


@functools.lru_cache(maxsize=32)
def laplace_pmf(eps: float, steps: int, n: int = N_MID
                ) -> tuple[np.ndarray, np.ndarray, float]:
  """Losses (on `h Z`, `h = eps / n`), their probabilities under `P`, dropped mass.

  Components with `K` middle steps of probability below 1e-30 are dropped; their mass is
  returned (to be added to delta: each contributes at most its probability).
  """
  k_all = np.arange(steps + 1)
  p_mid = -math.expm1(-eps) / 2.0
  pk = stats.binom.pmf(k_all, steps, p_mid)
  keep = pk >= _TAIL
  dropped = float(np.sum(pk[~keep]))
  w = 2 * n
  # total2d[c, o] <-> lattice index c * w + o <-> loss (c * w + o - steps * n) h.
  total2d = np.zeros((steps + 2, w))
  step = _middle_step(eps, n)
  mid = np.array([1.0])  # K-fold middle sum: index j <-> -K n + j (j = 0..2 K n).
  q = math.exp(eps) / (1.0 + math.exp(eps))
  for k in range(int(k_all[keep].max()) + 1):
    if k > 0:
      mid = np.convolve(mid, step)  # Each middle step adds -n + i, i = 0..2n.
    if not keep[k]:
      continue
    r = steps - k
    atoms = pk[k] * _binom_pmf(r, q)  # a keeps: loss (2a - r) eps = (a w - r n) h.
    # Component index a * w + j <-> loss (a w + j - r n - k n) h = (a w + j - steps n) h.
    padded = np.zeros(((mid.size + w - 1) // w) * w)
    padded[:mid.size] = mid
    blocks = padded.reshape(-1, w)
    for b in range(blocks.shape[0]):
      rows = min(r + 1, steps + 2 - b)
      total2d[b:b + rows] += atoms[:rows, None] * blocks[b][None, :]
  total = total2d.ravel()[:2 * n * steps + 1]
  losses = (np.arange(total.size) - steps * n) * (eps / n)
  nz = total > 0.0
  losses, probs = losses[nz], total[nz]
  for x in (losses, probs):
    x.setflags(write=False)
  return losses, probs, dropped
