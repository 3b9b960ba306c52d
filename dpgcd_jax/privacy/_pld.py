"""Exact privacy-loss distributions: randomized-response groups composed with a Gaussian part.

Host-side NumPy / SciPy. Any eps-DP step is dominated, under adaptive composition, by binary
randomized response with parameter eps (Kairouz, Oh & Viswanath 2015): its privacy loss is
`+eps` with probability `e^eps / (1 + e^eps)` and `-eps` otherwise under `P`. `T`
Gaussian steps of multiplier `s` compose exactly to `mu`-GDP with `mu^2 = sum T / s^2`
(Dong, Roth & Su 2019), whose privacy profile is (Balle & Wang 2018)

$$
\\delta_G(\\varepsilon) = \\Phi(-\\varepsilon/\\mu + \\mu/2)
- e^{\\varepsilon}\\Phi(-\\varepsilon/\\mu - \\mu/2).
$$

With groups `(eps_i, T_i)` the composed loss is `L = sum_i eps_i (2 A_i - T_i) + L_G`,
`A_i ~ Bin(T_i, e^eps_i / (1 + e^eps_i))` under `P`, and

$$
\\delta(\\varepsilon) = E_P[(1 - e^{\\varepsilon - L})_+].
$$
We enumerate the joint outcomes of every group but the largest (the "outer" groups) and, for
each, evaluate the profile `f(x) = E_P[(1 - e^{x - L_in})_+]` of the largest group (plus
the Gaussian part) in closed form: binomial survival functions under `P` and under the
flipped `Q` without a Gaussian part, an expectation of `delta_G` with one. Outcomes of
probability below `e^-700` are dropped and their mass added to delta (each contributes at
most its probability), so the result is an upper bound equal to the exact value up to
floating point.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize
from scipy import special
from scipy import stats

# Largest number of joint outcomes of the outer groups enumerated.
MAX_OUTER = 200_000
_LOG_TINY = -700.0


def log_gaussian_delta(eps: np.ndarray, mu: float) -> np.ndarray:
  """log delta_G(eps) for mu-GDP (any real eps), vectorized, in log space."""
  eps = np.asarray(eps, dtype=float)
  if mu == 0.0:
    with np.errstate(divide="ignore"):
      return np.where(eps < 0.0, np.log(-np.expm1(np.minimum(eps, 0.0))), -np.inf)
  l1 = special.log_ndtr(-eps / mu + mu / 2.0)
  l2 = eps + special.log_ndtr(-eps / mu - mu / 2.0)
  with np.errstate(divide="ignore", invalid="ignore"):
    out = l1 + np.log(-np.expm1(np.minimum(l2 - l1, 0.0)))
  return np.where(np.isnan(out), -np.inf, out)


@functools.lru_cache(maxsize=64)
def rr_tables(eps: float, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Binomial tables of `steps` randomized responses with parameter eps.

  Returns:
    `log P(A = a)` under `P` (`A ~ Bin(steps, e^eps / (1 + e^eps))`) and, padded with
    `-inf` at index `steps + 1`, `log P(A >= a)` under `P` and under `Q` (the flipped
    binomial, `log Q(A = a) = log P(A = a) - eps (2a - steps)`), by cumulative log-sums.
  """
  a = np.arange(steps + 1)
  log_p = stats.binom.logpmf(a, steps, special.expit(eps))
  log_q = log_p - eps * (2.0 * a - steps)
  pad = np.array([-np.inf])
  ge_p = np.concatenate([np.logaddexp.accumulate(log_p[::-1])[::-1], pad])
  ge_q = np.concatenate([np.logaddexp.accumulate(log_q[::-1])[::-1], pad])
  for x in (log_p, ge_p, ge_q):
    x.setflags(write=False)
  return log_p, ge_p, ge_q


def merge_groups(groups) -> list[tuple[float, int]]:
  merged: dict[float, int] = {}
  for e, t in groups:
    if e > 0.0 and t > 0:
      merged[float(e)] = merged.get(float(e), 0) + int(t)
  return sorted(merged.items(), key=lambda g: (g[1], g[0]))


def outer_losses(groups: list[tuple[float, int]], laplace: tuple[float, int] | None = None
           ) -> tuple[np.ndarray, np.ndarray, float]:
  """Joint losses and log-probabilities (under P) of the outer parts, and the dropped mass.

  The outer parts are the randomized-response `groups` and, if given, `T` Laplace steps
  of parameter eps (`laplace = (eps, T)`, exact lattice PLD of `_laplace`).
  """
  losses, log_p, dropped = np.zeros(1), np.zeros(1), 0.0
  if laplace is not None and laplace[0] > 0.0 and laplace[1] > 0:
    from dpgcd_jax.privacy import _laplace  # pylint: disable=g-import-not-at-top
    losses, probs, dropped = _laplace.laplace_pmf(float(laplace[0]), int(laplace[1]))
    with np.errstate(divide="ignore"):
      log_p = np.log(probs)
    keep = log_p > _LOG_TINY
    dropped += float(np.sum(probs[~keep]))
    losses, log_p = losses[keep], log_p[keep]
  for e, t in groups:
    if losses.size * (t + 1) > MAX_OUTER:
      raise NotImplementedError("too many joint outcomes for the exact route")
    lp, _, _ = rr_tables(e, t)
    losses = (losses[:, None] + e * (2.0 * np.arange(t + 1) - t)[None, :]).ravel()
    log_p = (log_p[:, None] + lp[None, :]).ravel()
    keep = log_p > _LOG_TINY
    dropped += float(np.sum(np.exp(log_p[~keep])))
    losses, log_p = losses[keep], log_p[keep]
  return losses, log_p, dropped


def _log_inner(x: np.ndarray, group: tuple[float, int] | None, mu: float
               ) -> tuple[np.ndarray, float]:
  """log f(x) for the inner group (and the Gaussian part), and the mass dropped (per x)."""
  if group is None:
    return log_gaussian_delta(x, mu), 0.0
  e, t = group
  log_p, ge_p, ge_q = rr_tables(e, t)
  if mu == 0.0:
    # P(L_in > x) - e^x Q(L_in > x), with i the smallest a whose loss exceeds x.
    i = np.clip(np.floor((x / e + t) / 2.0) + 1, 0, t + 1).astype(np.int64)
    t1, t2 = ge_p[i], x + ge_q[i]
    with np.errstate(divide="ignore", invalid="ignore"):
      out = t1 + np.log(-np.expm1(np.minimum(t2 - t1, 0.0)))
    return np.where(np.isnan(out), -np.inf, out), 0.0
  a = np.arange(t + 1)
  keep = log_p > _LOG_TINY
  dropped = float(np.sum(np.exp(log_p[~keep])))
  loss = e * (2.0 * a[keep] - t)
  terms = log_p[keep][None, :] + log_gaussian_delta(x[:, None] - loss[None, :], mu)
  return special.logsumexp(terms, axis=1), dropped


def pld_delta(eps: float, groups, mu: float, laplace: tuple[float, int] | None = None
              ) -> float:
  """Exact delta(eps) of randomized-response groups `[(eps_i, T_i)]` composed with mu-GDP.

  Args:
    eps: the epsilon at which to evaluate the privacy profile (any real).
    groups: randomized-response steps, `T_i` steps of parameter `eps_i >= 0`.
    mu: the GDP parameter of the Gaussian part (0 for none).
    laplace: `(eps_L, T_L)`: `T_L` Laplace steps by their exact lattice PLD (an upper
      bound, the middle losses rounded up), or None.

  Returns:
    `delta(eps) = E_P[(1 - exp(eps - L))_+]` (1 if a part is not private).

  Raises:
    NotImplementedError: when the outer groups have more than `MAX_OUTER` joint outcomes.
  """
  groups = merge_groups(groups)
  if laplace is not None and (laplace[0] == 0.0 or laplace[1] == 0):
    laplace = None
  if math.isinf(mu) or any(math.isinf(e) for e, _ in groups) or (
      laplace is not None and math.isinf(laplace[0])):
    return 1.0
  if not groups and laplace is None:
    return float(np.exp(log_gaussian_delta(np.array(eps), mu)))
  inner = groups[-1] if groups else None
  losses, log_p, dropped = outer_losses(groups[:-1], laplace)
  if mu > 0.0 and inner is not None and losses.size * (inner[1] + 1) > 10 * MAX_OUTER:
    raise NotImplementedError("too many joint outcomes for the exact route")
  log_f, dropped_inner = _log_inner(eps - losses, inner, mu)
  terms = log_p + log_f
  total = float(np.exp(special.logsumexp(terms))) if np.any(terms > -np.inf) else 0.0
  return min(total + dropped + dropped_inner, 1.0)


def pld_epsilon(groups, mu: float, delta: float, laplace: tuple[float, int] | None = None
                ) -> float:
  """Smallest eps with `pld_delta(eps) <= delta` (root-finding, result feasible)."""
  groups = merge_groups(groups)
  if any(math.isinf(e) for e, _ in groups) or math.isinf(mu) or (
      laplace is not None and math.isinf(laplace[0])):
    return math.inf
  f = lambda e: pld_delta(e, groups, mu, laplace) - delta
  if f(0.0) <= 0.0:
    return 0.0
  extra = laplace[0] * laplace[1] if laplace is not None else 0.0
  hi = extra + sum(e * t for e, t in groups) + mu * mu / 2.0 + mu * math.sqrt(
      2.0 * math.log(1.0 / delta)) + 1e-3
  for _ in range(200):
    if f(hi) <= 0.0:
      break
    hi *= 2.0
  else:
    return math.inf
  root = optimize.brentq(f, 0.0, hi, xtol=1e-13, rtol=1e-13)
  # Make sure the returned value is on the feasible side.
  for _ in range(60):
    if f(root) <= 0.0:
      return float(root)
    root = min(root * (1.0 + 1e-12) + 1e-15, hi)
  return float(hi)
