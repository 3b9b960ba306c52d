"""Renyi-DP curves of the privacy events and the conversion to (epsilon, delta).

Host-side NumPy, vectorized over orders `a > 1`. Every function returns an upper bound on
the Renyi divergence `D_a(M(D) || M(D'))` of one release for replace-one neighbours
(both directions: every curve here is symmetric or bounds both).

Conversion (Canonne, Kamath & Steinke 2020, Prop. 12; dp_accounting's conversion): an
`(a, r)`-RDP mechanism is `(epsilon, delta)`-DP with

$$
\\varepsilon = r + \\log(1 - 1/a) - (\\log\\delta + \\log a) / (a - 1),
\\qquad
\\log\\delta = (a - 1)(r - \\varepsilon + \\log(1 - 1/a)) - \\log a.
$$

Every order gives a valid bound, so minimizing over any set of orders is valid; we use a
dense log grid of `a - 1` in `[1e-4, 1e6]` refined around the best order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy import special

# Dense grid of alpha - 1 for the conversion.
ALPHA_GRID = 1.0 + np.logspace(-4, 6, 1500)
# Orders for dp_accounting's RDP accountant (integers: exact and fast formulas there).
SGD_RDP_ORDERS = np.array(
    list(range(2, 65)) + [72, 80, 96, 112, 128, 160, 192, 256, 384, 512], dtype=float)


def rr_rdp(eps: float, a: np.ndarray) -> np.ndarray:
  """RDP of binary randomized response with parameter eps (tight for any eps-DP step).

  $$
  r(a) = \\frac{1}{a - 1} \\log \\frac{e^{a\\varepsilon} + e^{(1-a)\\varepsilon}}
  {1 + e^{\\varepsilon}} \\le \\min(\\varepsilon, a\\varepsilon^2 / 2).
  $$
  """
  if eps == 0.0:
    return np.zeros_like(a)
  if math.isinf(eps):
    return np.full_like(a, np.inf)
  r = (np.logaddexp(a * eps, (1.0 - a) * eps) - np.logaddexp(0.0, eps)) / (a - 1.0)
  return np.clip(r, 0.0, np.minimum(eps, a * eps * eps / 2.0))


def br_rdp(eps: float, a: np.ndarray) -> np.ndarray:
  """RDP of an eps-bounded-range (and eps-DP) step: `min(a eps^2 / 8, RR(eps))`.

  eps-bounded range implies `eps^2 / 8`-zCDP (Cesar & Rogers 2021, Lemma 3.2) and eps-DP.
  """
  if math.isinf(eps):
    return np.full_like(a, np.inf)
  return np.minimum(a * eps * eps / 8.0, rr_rdp(eps, a))


def laplace_rdp(eps: float, a: np.ndarray) -> np.ndarray:
  """Exact RDP of the Laplace mechanism with pure parameter eps = 1 / b (Mironov 2017).

  $$
  r(a) = \\varepsilon + \\frac{1}{a - 1}\\log\\Big(1 + (a - 1)
  \\frac{e^{(1 - 2a)\\varepsilon} - 1}{2a - 1}\\Big).
  $$
  """
  if eps == 0.0:
    return np.zeros_like(a)
  if math.isinf(eps):
    return np.full_like(a, np.inf)
  r = eps + np.log1p((a - 1.0) * np.expm1((1.0 - 2.0 * a) * eps) / (2.0 * a - 1.0)) / (a - 1.0)
  return np.clip(r, 0.0, np.minimum(eps, a * eps * eps / 2.0))


def gaussian_rdp(noise: float, a: np.ndarray) -> np.ndarray:
  """RDP of the Gaussian mechanism with multiplier `s`: `a / (2 s^2)`."""
  if noise == 0.0:
    return np.full_like(a, np.inf)
  return a / (2.0 * noise * noise)


def replace_from_add_remove(orders: np.ndarray, rdp: np.ndarray
                            ) -> tuple[np.ndarray, np.ndarray]:
  """Replace-one RDP from an add/remove curve by the weak triangle inequality.

  For orders `a1, a2 > 1` let `p = 1 + (a1 - 1) / a2` and `alpha = a1 / p`; then
  (Mironov 2017, Prop. 11, with the intermediate dataset `D \\ {x}`)
  `D_alpha(M(D) || M(D')) <= (a1 - 1) / (a1 - p) R(a1) + R(a2)`.

  Returns:
    The orders `alpha` and bounds for every pair `(a1, a2)` (flattened).
  """
  a1, a2 = np.meshgrid(orders, orders, indexing="ij")
  r1, r2 = np.meshgrid(rdp, rdp, indexing="ij")
  p = 1.0 + (a1 - 1.0) / a2
  alpha = a1 / p
  with np.errstate(invalid="ignore"):
    bound = (a1 - 1.0) / (a1 - p) * r1 + r2
  return alpha.ravel(), np.where(np.isnan(bound), np.inf, bound).ravel()


def sampled_gaussian_rdp(noise: float, q: float, orders: np.ndarray) -> np.ndarray:
  """Add/remove RDP of one Poisson-sampled Gaussian step at INTEGER orders.

  Mironov, Talwar & Zhang (2019, Sec. 3.3): for integer `a >= 2`
  `R(a) = log(sum_k C(a, k) (1 - q)^{a - k} q^k exp((k^2 - k) / (2 s^2))) / (a - 1)`,
  which bounds both directions of the add/remove pair (the same values as dp_accounting's
  RDP accountant, computed here in one vectorized log-sum-exp).
  """
  a = np.asarray(orders, dtype=float)
  if q >= 1.0:
    return a / (2.0 * noise * noise)
  k = np.arange(int(a.max()) + 1, dtype=float)
  with np.errstate(divide="ignore"):
    log_terms = (special.gammaln(a[:, None] + 1.0) - special.gammaln(k[None, :] + 1.0)
                 - special.gammaln(np.maximum(a[:, None] - k[None, :], 0.0) + 1.0)
                 + (a[:, None] - k[None, :]) * math.log1p(-q) + k[None, :] * math.log(q)
                 + (k * k - k)[None, :] / (2.0 * noise * noise))
  log_terms = np.where(k[None, :] <= a[:, None], log_terms, -np.inf)
  return special.logsumexp(log_terms, axis=1) / (a - 1.0)


@functools.lru_cache(maxsize=256)
def _psg_envelope(noise: float, q: float) -> tuple[np.ndarray, np.ndarray]:
  """Sorted orders and the monotone envelope of the replace-one bounds of one PSG step.

  The add/remove curve `R` of one Poisson-sampled Gaussian step
  (`sampled_gaussian_rdp`), turned into replace-one bounds at orders `alpha_k` by
  `replace_from_add_remove`. Renyi divergence is non-decreasing in the order, so a
  bound at `alpha_k` holds at every `a <= alpha_k`: the envelope
  `B(a) = min_{alpha_k >= a} bound_k` is valid at every order up to `max alpha_k`.
  """
  return _replace_one_envelope(sampled_gaussian_rdp(noise, q, SGD_RDP_ORDERS))


def _replace_one_envelope(add_remove: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Sorted orders and the monotone envelope of the replace-one bounds from an add/remove curve
  at `SGD_RDP_ORDERS` (both directions; `replace_from_add_remove`), read-only."""
  alpha, bound = replace_from_add_remove(SGD_RDP_ORDERS, add_remove)
  order = np.argsort(alpha)
  alpha, bound = alpha[order], bound[order]
  envelope = np.minimum.accumulate(bound[::-1])[::-1]
  for x in (alpha, envelope):
    x.setflags(write=False)
  return alpha, envelope


def _at_orders(alpha: np.ndarray, envelope: np.ndarray, a: np.ndarray) -> np.ndarray:
  """The envelope at the orders `a` (the bound of the first `alpha_k >= a`; `inf` beyond them)."""
  i = np.searchsorted(alpha, a, side="left")
  out = np.full(np.shape(a), np.inf)
  ok = i < alpha.size
  out[ok] = envelope[i[ok]]
  return out


def psg_orders(noise: float, q: float) -> np.ndarray:
  """The orders at which `psg_rdp` is evaluated without loss (the `alpha_k`)."""
  if noise == 0.0 or math.isinf(noise):
    return np.empty(0)
  return _psg_envelope(noise, q)[0]


def psg_rdp(noise: float, q: float, a: np.ndarray) -> np.ndarray:
  """Replace-one RDP bound of one Poisson-sampled Gaussian step (`inf` beyond the orders).

  See `_psg_envelope`. Noise multiplier `s` in units of the per-example clipping norm.
  """
  if noise == 0.0:
    return np.full_like(a, np.inf)
  if math.isinf(noise):
    return np.zeros_like(a)
  return _at_orders(*_psg_envelope(noise, q), a)


def _add_remove_from_integer_curve(base: Callable[[np.ndarray], np.ndarray], q: float,
                                   orders: np.ndarray) -> np.ndarray:
  """Add/remove RDP, both directions, of a Poisson(`q`)-subsampled mechanism at INTEGER orders.

  `base(l)`: an upper bound on `D_l(P || Q)` and `D_l(Q || P)` at the integer orders
  `l = 2, ..., max(orders)`, for every pair `P = M(S + x)`, `Q = M(S)` of the base mechanism,
  `P` and `Q` mutually absolutely continuous (the discrete Gaussian: full support). The
  subsampled outputs are mixtures over the sample `S` of the other records, with the same
  weights, of `A = (1 - q) Q + q P` and `Q`; `(X, Y) -> E_Y[(X / Y)^a]` is jointly convex, so
  it suffices to bound both directions for one pair. With `L = P / Q` (`E_Q[L] = 1`):

  1. `E_Q[(A / Q)^a] = E_Q[(1 - q + q L)^a] = sum_l C(a, l) (1 - q)^(a-l) q^l E_Q[L^l]`
     (integer `a`: the binomial expansion), `E_Q[L^l] = e^((l-1) D_l(P || Q))`: the formula of
     Mironov, Talwar & Zhang (2019) with `base` in place of the Gaussian's (equal to
     `sampled_gaussian_rdp` for `base(l) = l / (2 s^2)`).
  2. `E_A[(Q / A)^a] = E_Q[h(L - 1)]`, `h(z) = (1 + q z)^(1-a)`. Taylor with Lagrange
     remainder at 0 (`E_Q[L - 1] = 0`; the intermediate point is `>= -1`, where
     `h'' <= a (a - 1) q^2 (1 - q)^-(a+1)`): `<= 1 + C(a, 2) q^2 (1 - q)^-(a+1) E_Q[(L - 1)^2]`,
     `E_Q[(L - 1)^2] = e^(D_2(P || Q)) - 1`.
  3. Joint convexity alone: `E[(A / Q)^a] - 1 <= q (e^((a-1) D_a(P || Q)) - 1)`, and the same
     for the reverse direction (at `q = 1`: the base curve). Tighter at large orders.

  The result is `min(max(1, 2), 3)` in RDP units (`log(.) / (a - 1)`). Non-integer orders are
  not claimed: `inf` there. Zhu & Wang (ICML 2019, Thm 6) give a general bound with a factor
  3 on the terms `l >= 3` of (1) for the reverse direction; (2) avoids it (their bound costs a
  12x multiplier at q = 0.01, T = 1000, eps = 1).
  """
  a = np.asarray(orders, dtype=float)
  out = np.full(a.shape, np.inf)
  integer = (a >= 2.0) & (a == np.floor(a)) & np.isfinite(a)
  if not integer.any():
    return out
  ai = a[integer]
  with np.errstate(divide="ignore", over="ignore"):  # log(1 - q + q e^x), x = (a - 1) base(a)
    log1m_q = math.log1p(-q) if q < 1.0 else -np.inf
    convex = np.logaddexp(log1m_q, math.log(q) + (ai - 1.0) * base(ai)) / (ai - 1.0)
  if q >= 1.0:
    out[integer] = convex  # = base(a)
    return out
  ells = np.arange(2, int(ai.max()) + 1, dtype=float)[None, :]
  cgf = (ells - 1.0) * np.asarray(base(ells[0]), dtype=float)[None, :]  # (l - 1) base(l)
  with np.errstate(divide="ignore", invalid="ignore"):
    log_terms = (special.gammaln(ai[:, None] + 1.0) - special.gammaln(ells + 1.0)
                 - special.gammaln(np.maximum(ai[:, None] - ells, 0.0) + 1.0)
                 + (ai[:, None] - ells) * math.log1p(-q) + ells * math.log(q) + cgf)
  log_terms = np.where(ells <= ai[:, None], log_terms, -np.inf)
  first = (ai - 1.0) * math.log1p(-q) + np.log1p((ai - 1.0) * q)  # l = 0, 1: (1-q)^(a-1) (a q - q + 1)
  forward = special.logsumexp(np.concatenate([first[:, None], log_terms], axis=1), axis=1) / (ai - 1.0)
  with np.errstate(over="ignore"):
    reverse = np.log1p(ai * (ai - 1.0) / 2.0 * q * q * np.exp(-(ai + 1.0) * math.log1p(-q))
                       * np.expm1(float(base(np.array([2.0]))[0]))) / (ai - 1.0)
  out[integer] = np.minimum(np.maximum(forward, reverse), convex)
  return out


def discrete_gaussian_base(noise: float) -> Callable[[np.ndarray], np.ndarray]:
  """The base curve of the secure DP-SGD step: `l / (2 s^2)` (CKS 2020, module docstring of
  `events.PoissonSampledDiscreteGaussian`)."""
  return lambda orders: np.asarray(orders, dtype=float) / (2.0 * noise * noise)


@functools.lru_cache(maxsize=256)
def _psdg_envelope(noise: float, q: float) -> tuple[np.ndarray, np.ndarray]:
  """As `_psg_envelope`, for the Poisson-subsampled discrete Gaussian: the add/remove curve of
  `_add_remove_from_integer_curve` at the integer `SGD_RDP_ORDERS`, then replace-one."""
  return _replace_one_envelope(_add_remove_from_integer_curve(discrete_gaussian_base(noise), q, SGD_RDP_ORDERS))


def psdg_orders(noise: float, q: float) -> np.ndarray:
  """The orders at which `psdg_rdp` is evaluated without loss."""
  if noise == 0.0 or math.isinf(noise):
    return np.empty(0)
  return _psdg_envelope(noise, q)[0]


def psdg_rdp(noise: float, q: float, a: np.ndarray) -> np.ndarray:
  """Replace-one RDP bound of one Poisson-subsampled discrete Gaussian step (`inf` beyond the
  orders; see `_psdg_envelope`)."""
  if noise == 0.0:
    return np.full_like(np.asarray(a, dtype=float), np.inf)
  if math.isinf(noise):
    return np.zeros_like(np.asarray(a, dtype=float))
  return _at_orders(*_psdg_envelope(noise, q), a)


def rdp_conversion(a: np.ndarray, r: np.ndarray, delta: float) -> np.ndarray:
  """epsilon(a) = r + log(1 - 1/a) - (log delta + log a) / (a - 1), clipped at 0."""
  with np.errstate(invalid="ignore", over="ignore"):
    eps = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
  eps = np.where(np.isnan(eps), np.inf, eps)
  return np.maximum(eps, 0.0)


def rdp_epsilon(curve: Callable[[np.ndarray], np.ndarray], delta: float,
                extra_orders: np.ndarray | None = None) -> float:
  """Minimizes the RDP conversion over orders: dense log grid, then a zoomed grid.

  Args:
    curve: the composed RDP curve, vectorized over orders.
    delta: the target delta in (0, 1).
    extra_orders: more orders to try (e.g. where a curve is known without loss).
  """
  a = ALPHA_GRID if extra_orders is None else np.union1d(ALPHA_GRID, extra_orders)
  eps = rdp_conversion(a, curve(a), delta)
  i = int(np.argmin(eps))
  best = float(eps[i])
  if not math.isfinite(best):
    return math.inf
  lo, hi = a[max(i - 1, 0)], a[min(i + 1, a.size - 1)]
  a2 = np.linspace(lo, hi, 65)
  a2 = a2[a2 > 1.0]
  eps2 = rdp_conversion(a2, curve(a2), delta)
  return float(min(best, np.min(eps2)))


def rdp_delta(curve: Callable[[np.ndarray], np.ndarray], epsilon: float,
              extra_orders: np.ndarray | None = None) -> float:
  """Smallest delta of the conversion at `epsilon` over the orders (capped at 1)."""
  a = ALPHA_GRID if extra_orders is None else np.union1d(ALPHA_GRID, extra_orders)

  def log_delta(a):
    with np.errstate(invalid="ignore", over="ignore"):
      out = (a - 1.0) * (curve(a) - epsilon + np.log1p(-1.0 / a)) - np.log(a)
    return np.where(np.isnan(out), np.inf, out)

  values = log_delta(a)
  i = int(np.argmin(values))
  lo, hi = a[max(i - 1, 0)], a[min(i + 1, a.size - 1)]
  a2 = np.linspace(lo, hi, 65)
  best = min(float(values[i]), float(np.min(log_delta(a2[a2 > 1.0]))))
  return float(min(math.exp(min(best, 0.0)), 1.0))
