"""A fast discretized PLD for Poisson-sampled Gaussian steps (replace-one), composed by FFT.

Route `"fft_pld"` of the ledger. Same pair and same pessimistic "connect the dots"
discretization as dp_accounting's `REPLACE_ONE` PLD (Doroshenko, Ghazi, Kamath, Kumar &
Manurangsi 2022), but vectorized: the inverse privacy loss has a closed form, so building one
step costs a few NumPy calls instead of one Python call per lattice point.

Pair (one step, noise multiplier `s`, sampling rate `q`, per-example norm 1):
`P = (1 - q) N(0, s^2) + q N(1, s^2)`, `Q = (1 - q) N(0, s^2) + q N(-1, s^2)`, which
dp_accounting documents as the worst case of replace-one with Poisson sampling. With
`r = q e^{-1 / (2 s^2)} / (1 - q)` and `u = x / s^2` the privacy loss is
`L = log(1 + r e^u) - log(1 + r e^{-u})`, increasing in `x`, with inverse
`e^u = ((e^l - 1) + sqrt((e^l - 1)^2 + 4 r^2 e^l)) / (2 r)`.

Discretization (pessimistic, an upper bound on the privacy profile):

* losses on the lattice `h Z`; the `P`- and `Q`-masses of each cell `(l_{k-1}, l_k]`
  go to the cell's two ends with the same total `P`- and `Q`-mass (any pair whose loss
  lies in `[a, b]` is a post-processing of that two-point pair);
* `P`-mass below the lowest lattice point is moved up to it, above the highest to `+inf`
  (both can only increase `delta(eps) = E_P[(1 - e^{eps - L})_+]`);
* composition by FFT convolution (squaring), after each product the lowest mass (below
  `TAIL`) moved up to the new lowest point and the highest moved to `+inf`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import fft as sp_fft
from scipy import special

TAIL = 1e-13  # Mass moved (pessimistically) per truncation.


def _ndtr_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """`Phi(b) - Phi(a)` for `a <= b`, accurate in both tails."""
  upper = a > 0.0
  out = np.where(upper, special.ndtr(-a) - special.ndtr(-b), special.ndtr(b) - special.ndtr(a))
  return np.maximum(out, 0.0)


def _inverse_loss(l: np.ndarray, r: float) -> np.ndarray:
  """`u` with `L(u) = l`: the positive root of `r y^2 + (1 - e^l) y - r e^l` (y = e^u)."""
  em1 = np.expm1(l)
  disc = np.sqrt(em1 * em1 + 4.0 * r * r * np.exp(l))
  # Stable for both signs of e^l - 1: y = (em1 + disc) / (2r) = 2 r e^l / (disc - em1).
  with np.errstate(divide="ignore", invalid="ignore"):
    y = np.where(em1 >= 0.0, (em1 + disc) / (2.0 * r), 2.0 * r * np.exp(l) / (disc - em1))
  return np.log(y)


def _loss(u: float, r: float) -> float:
  return math.log1p(r * math.exp(u)) - math.log1p(r * math.exp(-u)) if abs(u) < 700 else (
      math.copysign(abs(u) + math.log(r), u))


@functools.lru_cache(maxsize=64)
def single(noise: float, q: float, h: float) -> tuple[int, np.ndarray, float]:
  """One step's pessimistic PLD: `(k0, p, inf_mass)`, `p[i]` the mass at `(k0 + i) h`."""
  s2 = noise * noise
  if q >= 1.0:
    raise NotImplementedError("q = 1: use the Gaussian event (shift 2)")
  r = q * math.exp(-0.5 / s2) / (1.0 - q)
  z = math.sqrt(2.0) * special.erfcinv(2.0 * TAIL)  # Normal quantile of TAIL.
  x_lo, x_hi = -z * noise, 1.0 + z * noise
  k_lo = math.floor(_loss(x_lo / s2, r) / h)
  k_hi = math.ceil(_loss(x_hi / s2, r) / h)
  ks = np.arange(k_lo, k_hi + 1)
  x = _inverse_loss(ks * h, r) * s2  # Cell ends in x.

  def cdfs(lo, hi, shift):
    return _ndtr_diff((lo - shift) / noise, (hi - shift) / noise)

  lo_x, hi_x = x[:-1], x[1:]
  wp = (1.0 - q) * cdfs(lo_x, hi_x, 0.0) + q * cdfs(lo_x, hi_x, 1.0)
  wq = (1.0 - q) * cdfs(lo_x, hi_x, 0.0) + q * cdfs(lo_x, hi_x, -1.0)
  a, b = ks[:-1] * h, ks[1:] * h
  w_hi = np.clip((wp * np.exp(-a) - wq) / (np.exp(-a) - np.exp(-b)), 0.0, wp)
  p = np.zeros(ks.size)
  p[1:] += w_hi
  p[:-1] += wp - w_hi
  # Below the lowest end: moved up to it. Above the highest: +inf.
  p[0] += (1.0 - q) * special.ndtr(x[0] / noise) + q * special.ndtr((x[0] - 1.0) / noise)
  inf_mass = (1.0 - q) * special.ndtr(-x[-1] / noise) + q * special.ndtr(-(x[-1] - 1.0) / noise)
  p.setflags(write=False)
  return int(k_lo), p, float(inf_mass)


def _truncate(k0: int, p: np.ndarray, inf_mass: float) -> tuple[int, np.ndarray, float]:
  """Moves the lowest mass (< TAIL) up and the highest (< TAIL) to +inf."""
  c = np.cumsum(p)
  lo = int(np.searchsorted(c, TAIL, side="right"))
  tail = np.cumsum(p[::-1])
  hi = p.size - int(np.searchsorted(tail, TAIL, side="right"))
  lo, hi = min(lo, p.size - 1), max(hi, lo + 1)
  out = p[lo:hi].copy()
  out[0] += c[lo - 1] if lo > 0 else 0.0
  return k0 + lo, out, inf_mass + float(np.sum(p[hi:]))


def _product(a, b):
  (ka, pa, ia), (kb, pb, ib) = a, b
  n = pa.size + pb.size - 1
  size = sp_fft.next_fast_len(n, real=True)
  conv = sp_fft.irfft(sp_fft.rfft(pa, size) * sp_fft.rfft(pb, size), size)[:n]
  conv = np.maximum(conv, 0.0)
  return _truncate(ka + kb, conv, 1.0 - (1.0 - ia) * (1.0 - ib))


@functools.lru_cache(maxsize=64)
def composed(noise: float, q: float, steps: int, h: float) -> tuple[int, np.ndarray, float]:
  """`steps >= 1` self-compositions by repeated squaring (truncated after each product)."""
  if steps < 1:
    raise ValueError(f"Expected steps >= 1, got steps={steps}.")
  base = _truncate(*single(noise, q, h))
  while not steps & 1:  # Square up to the lowest set bit, which starts the product.
    base = _product(base, base)
    steps >>= 1
  result = base
  while steps := steps >> 1:
    base = _product(base, base)
    if steps & 1:
      result = _product(result, base)
  return result


def combine(parts) -> tuple[int, np.ndarray, float]:
  """Composition of several PLDs on the same lattice."""
  out = parts[0]
  for part in parts[1:]:
    out = _product(out, part)
  return out


def delta(pld, h: float, epsilon: float) -> float:
  """`inf_mass + sum_k p_k (1 - e^{eps - l_k})_+`."""
  k0, p, inf_mass = pld
  l = (k0 + np.arange(p.size)) * h
  m = l > epsilon
  return float(min(inf_mass + np.sum(p[m] * -np.expm1(epsilon - l[m])), 1.0))


def epsilon(pld, h: float, delta_target: float) -> float:
  """Smallest lattice-exact eps with `delta(eps) <= delta_target`."""
  k0, p, inf_mass = pld
  if inf_mass > delta_target:
    return math.inf
  l = (k0 + np.arange(p.size)) * h
  # delta(eps) is decreasing and convex; evaluate at the lattice points, then refine.
  lo, hi = 0.0, float(max(l[-1], 0.0))
  if delta(pld, h, 0.0) <= delta_target:
    return 0.0
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    if delta(pld, h, mid) <= delta_target:
      hi = mid
    else:
      lo = mid
    if hi - lo <= 1e-12 * max(1.0, hi):
      break
  return hi
