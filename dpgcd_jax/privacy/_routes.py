"""Composition routes of the ledger: each turns aggregated `(event, count)` entries into a
privacy profile (`delta(epsilon)` and `epsilon(delta)`), each a valid upper bound.

* `"pld"`: exact privacy-loss distributions on lattices aligned with the events
  (`dpgcd_jax.privacy._pld`): pure-DP and bounded-range steps as randomized response
  (Kairouz, Oh & Viswanath 2015), Gaussian steps as one GDP part. Exact for ledgers of
  `PureDp` and `Gaussian` events (the worst case of any eps-DP step is randomized
  response), an upper bound otherwise.
* `"bounded_range"`: adaptive composition of bounded-range steps by a Bellman recursion on
  an exact lattice (`dpgcd_jax.privacy._br`), the other events as fixed dominating pairs
  (randomized response, GDP) revealed first. Needs a `BoundedRange` event.
* `"rdp"`: sum of the events' RDP curves, converted with the optimal conversion over a dense
  set of orders (`dpgcd_jax.privacy._rdp`). Applies to every event.
* `"fft_pld"`: ledgers of Poisson-sampled Gaussians (DP-SGD): dp_accounting's pair and
  pessimistic connect-the-dots discretization, vectorized (`_fft_pld`).
* `"dp_accounting_pld"`: dp_accounting's discretized PLD (`_adapters`). In `best`
  only when the ledger holds a Poisson-sampled Gaussian with other events (no other PLD
  route applies); otherwise available by name, as a cross-check.

DeltaSlack entries are not seen by the routes: the ledger adds their deltas.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import numpy as np

from dpgcd_jax.privacy import _adapters
from dpgcd_jax.privacy import _br
from dpgcd_jax.privacy import _fft_pld as _fft_pld_lib
from dpgcd_jax.privacy import _pld
from dpgcd_jax.privacy import _rdp
from dpgcd_jax.privacy import events as ev

Entries = tuple[tuple[ev.PrivacyEvent, int], ...]


@dataclasses.dataclass(frozen=True)
class Route:
  """One composition route.

  Attributes:
    name: the route's name (reported by the ledger).
    supports: whether the route applies to the entries.
    delta: `delta(entries, epsilon)`, an upper bound on the privacy profile.
    epsilon: `epsilon(entries, delta)`, the smallest epsilon the route certifies.
    exact: whether the route is exact for the entries (then `best` stops there).
    in_best: whether `best` considers the route for the entries.
    cost: 0 (closed form, ~1 ms), 1 (vectorized sums, ~10 ms), 2 (~0.1-1 s).
    lower: optional cheap LOWER bound on `delta(entries, epsilon)` (helps calibration).
    upper: optional cheap UPPER bound on `delta(entries, epsilon)` (helps calibration).
    margin: "epsilon" when `epsilon(delta)` is about as cheap as `delta(epsilon)` (then
      calibration compares epsilons, smoother in the scale than log-deltas), else "delta".
    priority: calibration tries routes by (priority, cost): a route expected to win can go
      first (the others then only need to be checked near its solution).
  """

  name: str
  supports: Callable[[Entries], bool]
  delta: Callable[[Entries, float], float]
  epsilon: Callable[[Entries, float], float]
  exact: Callable[[Entries], bool] = lambda entries: False
  in_best: Callable[[Entries], bool] = lambda entries: True
  cost: int = 1
  lower: Callable[[Entries, float], float] | None = None
  upper: Callable[[Entries, float], float] | None = None
  margin: str = "delta"
  priority: int = 0


# ----------------------------------------------------------------------------------------
# RDP.
# ----------------------------------------------------------------------------------------


def _rdp_parts(entries: Entries):
  def curve(a):
    total = np.zeros(np.shape(a))
    for event, count in entries:
      total = total + count * event.rdp(a)
    return total
  extra = [_rdp.psg_orders(e.noise, e.sampling_rate) for e, _ in entries
           if isinstance(e, ev.PoissonSampledGaussian)]
  extra += [_rdp.psdg_orders(e.noise, e.sampling_rate) for e, _ in entries
            if isinstance(e, ev.PoissonSampledDiscreteGaussian)]
  return curve, (np.concatenate(extra) if extra else None)


def _rdp_epsilon(entries: Entries, delta: float) -> float:
  curve, extra = _rdp_parts(entries)
  return _rdp.rdp_epsilon(curve, delta, extra)


def _rdp_delta(entries: Entries, epsilon: float) -> float:
  curve, extra = _rdp_parts(entries)
  return _rdp.rdp_delta(curve, epsilon, extra)


# ----------------------------------------------------------------------------------------
# Exact lattice PLD.
# ----------------------------------------------------------------------------------------

_PURE_TYPES = (ev.PureDp, ev.BoundedRange, ev.Laplace)


def pld_parts(entries: Entries
              ) -> tuple[list[tuple[float, int]], float, tuple[float, int] | None]:
  """Randomized-response groups `[(eps, T)]`, the GDP `mu` and the exact Laplace part.

  The most frequent `Laplace` event gets its exact PLD (`(eps, T)`); other Laplace,
  pure-DP and bounded-range events are randomized response.
  """
  laps = [(e.epsilon, c) for e, c in entries if isinstance(e, ev.Laplace) and e.epsilon > 0]
  laplace = max(laps, key=lambda x: (x[1], -x[0])) if laps else None
  if laplace is not None and _outer_size([], laplace) > _pld.MAX_OUTER:
    laplace = None  # Too long for the exact Laplace lattice: randomized response instead.
  groups, mu2 = [], 0.0
  for event, count in entries:
    if isinstance(event, ev.Laplace) and laplace is not None and (
        event.epsilon, count) == laplace:
      continue
    if isinstance(event, _PURE_TYPES):
      groups.append((event.epsilon, count))
    elif isinstance(event, ev.PoissonSampledGaussian):  # q = 1: Gaussian, sensitivity 2.
      mu2 += count * (math.inf if event.noise == 0.0 else 2.0 / event.noise) ** 2
    elif isinstance(event, ev.Gaussian):
      mu2 += count * event.mu ** 2
    else:
      raise ValueError(f"Expected events of the pld route (_pld_types), got {event.describe()}.")
  return groups, math.sqrt(mu2), laplace


def _outer_size(groups, laplace) -> int:
  size = math.prod(t + 1 for _, t in groups)
  if laplace is not None:
    size *= 2 * 16 * laplace[1] + 1
  return size


def _pld_types(entries: Entries) -> bool:
  """Pure-DP, bounded-range, Laplace, Gaussian, and full-batch (q = 1) DP-SGD steps."""
  return all(isinstance(e, _PURE_TYPES + (ev.Gaussian,)) or (
      isinstance(e, ev.PoissonSampledGaussian) and e.sampling_rate == 1.0) for e, _ in entries)


def _pld_supports(entries: Entries) -> bool:
  if not _pld_types(entries):
    return False
  groups, mu, laplace = pld_parts(entries)
  merged = _pld.merge_groups(groups)
  outer = _outer_size(merged[:-1], laplace)
  if mu > 0.0 and merged:
    return outer * (merged[-1][1] + 1) <= 10 * _pld.MAX_OUTER
  return outer <= _pld.MAX_OUTER


def _pld_exact(entries: Entries) -> bool:
  return all(isinstance(e, (ev.PureDp, ev.Gaussian, ev.PoissonSampledGaussian))
             for e, _ in entries)


def _pld_delta(entries: Entries, epsilon: float) -> float:
  groups, mu, laplace = pld_parts(entries)
  return _pld.pld_delta(epsilon, groups, mu, laplace)


def _pld_epsilon(entries: Entries, delta: float) -> float:
  groups, mu, laplace = pld_parts(entries)
  return _pld.pld_epsilon(groups, mu, delta, laplace)


def _pld_bound(entries: Entries, epsilon: float, upper: bool) -> float:
  """The exact Laplace part replaced by randomized response that brackets it.

  Upper: RR(eps) dominates any eps-DP step. Lower: the Laplace pair dominates its
  post-processing `1{x < 1/2}`, randomized response with `log(2 e^{eps/2} - 1)`.
  """
  groups, mu, laplace = pld_parts(entries)
  if laplace is not None:
    e, t = laplace
    rr = e if upper or math.isinf(e) else math.log(2.0 * math.exp(e / 2.0) - 1.0)
    groups = list(groups) + [(rr, t)]
  return _pld.pld_delta(epsilon, groups, mu)


# ----------------------------------------------------------------------------------------
# Adaptive bounded range (Bellman recursion on a lattice).
# ----------------------------------------------------------------------------------------

# Largest (bounded-range steps) x (lattice points) for "best" (about a second).
_BR_BUDGET = 2e7
_BR_MAX_EPS = 20.0


def br_parts(entries: Entries):
  """`(br_eps, br_steps, groups, mu, laplace)`: the most frequent BR event is adaptive.

  None when no bounded-range event has `0 < eps <= _BR_MAX_EPS` (the route then falls back
  on the exact lattice route, bounded range as randomized response).
  """
  br = [(e.epsilon, c) for e, c in entries if isinstance(e, ev.BoundedRange)
        and 0.0 < e.epsilon <= _BR_MAX_EPS]
  if not br:
    return None
  br_eps, br_steps = max(br, key=lambda x: (x[1], x[0]))
  others = tuple((e, c) for e, c in entries
                 if not (isinstance(e, ev.BoundedRange) and e.epsilon == br_eps))
  groups, mu, laplace = pld_parts(others)
  return br_eps, br_steps, groups, mu, laplace


def _br_supports(entries: Entries) -> bool:
  if not _pld_types(entries) or not any(isinstance(e, ev.BoundedRange) for e, _ in entries):
    return False
  parts = br_parts(entries)
  if parts is None:
    return _pld_supports(entries)
  merged = _pld.merge_groups(parts[2])
  return _outer_size(merged, parts[4]) <= _pld.MAX_OUTER


def _br_in_best(entries: Entries) -> bool:
  parts = br_parts(entries)
  if parts is None:
    return True
  br_eps, br_steps, groups, mu, laplace = parts
  if math.isinf(mu):
    return True
  # Window: the bounded-range and Gaussian spreads, the pure parts' central range.
  spread2 = sum(e * e * t for e, t in groups if math.isfinite(e))
  if laplace is not None and math.isfinite(laplace[0]):
    spread2 += laplace[0] ** 2 * laplace[1]
  width = 2.0 * (8.5 * 0.5 * br_eps * math.sqrt(br_steps) + 9.0 * mu + 10.0 * math.sqrt(
      spread2)) + 1.0
  return br_steps * width / (br_eps / _br.M) <= _BR_BUDGET


def _br_delta(entries: Entries, epsilon: float) -> float:
  parts = br_parts(entries)
  return _pld_delta(entries, epsilon) if parts is None else _br.delta(epsilon, *parts)


def _br_epsilon(entries: Entries, delta: float) -> float:
  parts = br_parts(entries)
  return _pld_epsilon(entries, delta) if parts is None else _br.epsilon(delta, *parts)


def _br_lower(entries: Entries, epsilon: float) -> float:
  """The non-adaptive strategy t = 1/2 (randomized response with eps / 2) at every step.

  The Laplace part is replaced by the randomized response it dominates (see _pld_bound).
  """
  parts = br_parts(entries)
  if parts is None:
    return _pld_delta(entries, epsilon)
  br_eps, br_steps, groups, mu, laplace = parts
  groups = list(groups) + [(br_eps / 2.0, br_steps)]
  if laplace is not None:
    e, t = laplace
    groups.append((e if math.isinf(e) else math.log(2.0 * math.exp(e / 2.0) - 1.0), t))
  return _pld.pld_delta(epsilon, groups, mu)


# ----------------------------------------------------------------------------------------
# Registry.
# ----------------------------------------------------------------------------------------


def _has_psg(entries: Entries) -> bool:
  return any(isinstance(e, ev.PoissonSampledGaussian) for e, _ in entries)


# ----------------------------------------------------------------------------------------
# Fast discretized PLD of Poisson-sampled Gaussian steps.
# ----------------------------------------------------------------------------------------


def _fft_supports(entries: Entries) -> bool:
  return bool(entries) and all(
      isinstance(e, ev.PoissonSampledGaussian) and e.sampling_rate < 1.0 for e, _ in entries)


def _psg_entries(entries: Entries) -> list[tuple[ev.PoissonSampledGaussian, int]]:
  """The entries of the route (`_fft_supports`: Poisson-sampled Gaussians only)."""
  out = []
  for event, count in entries:
    if not isinstance(event, ev.PoissonSampledGaussian):
      raise ValueError(f"Expected Poisson-sampled Gaussian events for the fft_pld route, got {event.describe()}.")
    out.append((event, count))
  return out


def _fft_pld(entries: list[tuple[ev.PoissonSampledGaussian, int]]):
  """The composed PLD and its lattice step (finer for longer compositions: error ~ T h^2)."""
  steps = sum(c for _, c in entries)
  h = min(1e-3, 1e-3 * math.sqrt(30.0 / steps))
  if any(e.noise == 0.0 for e, _ in entries):
    return None, h
  parts = [_fft_pld_lib.composed(e.noise, e.sampling_rate, c, h) for e, c in entries
           if math.isfinite(e.noise)]
  return (_fft_pld_lib.combine(parts) if parts else None), h


def _fft_delta(entries: Entries, epsilon: float) -> float:
  psg = _psg_entries(entries)
  pld, h = _fft_pld(psg)
  if pld is None:
    return 1.0 if any(e.noise == 0.0 for e, _ in psg) else 0.0
  return _fft_pld_lib.delta(pld, h, epsilon)


def _fft_epsilon(entries: Entries, delta: float) -> float:
  psg = _psg_entries(entries)
  pld, h = _fft_pld(psg)
  if pld is None:
    return math.inf if any(e.noise == 0.0 for e, _ in psg) else 0.0
  return _fft_pld_lib.epsilon(pld, h, delta)


ROUTES: dict[str, Route] = {
    "pld": Route("pld", _pld_supports, _pld_delta, _pld_epsilon, exact=_pld_exact, cost=1,
                 lower=lambda entries, e: _pld_bound(entries, e, upper=False),
                 upper=lambda entries, e: _pld_bound(entries, e, upper=True)),
    "bounded_range": Route("bounded_range", _br_supports, _br_delta, _br_epsilon,
                           in_best=_br_in_best, cost=2, lower=_br_lower),
    "rdp": Route("rdp", lambda entries: True, _rdp_delta, _rdp_epsilon, cost=0,
                 margin="epsilon"),
    "fft_pld": Route("fft_pld", _fft_supports, _fft_delta, _fft_epsilon, cost=1,
                     margin="epsilon", priority=-1),
    "dp_accounting_pld": Route(
        "dp_accounting_pld",
        lambda entries: all(isinstance(e, _adapters.SUPPORTED) for e, _ in entries),
        _adapters.delta, _adapters.epsilon,
        in_best=lambda entries: _has_psg(entries) and not _fft_supports(entries), cost=2,
        margin="epsilon"),
}


def register(route: Route, *, first: bool = False) -> None:
  """Adds a route (`first`: tried before the others, e.g. a tighter specialized route). A route
  that replaces one of the same name also drops `evaluate`'s cached values (keyed by name)."""
  global ROUTES  # pylint: disable=global-statement
  if first:
    ROUTES = {route.name: route, **{k: v for k, v in ROUTES.items() if k != route.name}}
  else:
    ROUTES[route.name] = route
  evaluate.cache_clear()


@functools.lru_cache(maxsize=4096)
def evaluate(entries: Entries, route: str, kind: str, x: float) -> float:
  """Cached `ROUTES[route].delta(entries, x)` (kind "delta") or `.epsilon` ("epsilon")."""
  r = ROUTES[route]
  return float(r.delta(entries, x) if kind == "delta" else r.epsilon(entries, x))
