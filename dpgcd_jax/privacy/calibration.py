"""Calibration: the smallest noise scale whose ledger meets an (epsilon, delta) target.

`calibrate(factory, epsilon, delta)` searches `scale` for a monotone `factory(scale) ->
Ledger` (more scale, more noise, more private: every route is monotone in the scale by
post-processing). Search on `log scale`: secant steps to bracket the target, then Illinois
(regula falsi) until the bracket is within `rel_tol`; the feasible end is returned, so the
result always meets the target. The cheapest route goes first; a costlier route is searched
only below the best scale so far, between its cheap lower bound and that scale.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from collections.abc import Hashable

from dpgcd_jax import _validate
from dpgcd_jax.privacy import _routes
from dpgcd_jax.privacy.ledger import Ledger
from dpgcd_jax.privacy.ledger import PrivacyReport
from dpgcd_jax.privacy.ledger import check_budget_delta

REL_TOL = 2e-4
_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_SIZE = 512


def _margin(ledger: Ledger, route: str, epsilon: float, delta: float, bound: str = ""
            ) -> float:
  """<= 0 iff `route` certifies (epsilon, delta) for the ledger.

  `log(delta_route(epsilon) + slack) - log(delta)`, or `log(epsilon_route(delta - slack))
  - log(epsilon)` for routes whose epsilon is cheap (`margin="epsilon"`; nearly linear in
  the log of the scale, which the secant steps exploit); with `bound="lower"`
  / `"upper"`, the route's cheap lower / upper bound on its delta instead. `slack` includes
  the samplers' charge at the target, `ledger.sampler_charge(epsilon)`: a route epsilon at most
  the target is certified with a charge at most that one.
  """
  slack, agg = ledger.slack + ledger.sampler_charge(epsilon), ledger.aggregated()
  if slack >= delta:
    return math.inf
  if not agg:
    return -math.inf
  r = _routes.ROUTES[route]
  if bound:
    d = getattr(r, bound)(agg, epsilon) + slack
  elif r.margin == "epsilon":
    eps = _routes.evaluate(agg, route, "epsilon", delta - slack)
    return math.log(eps) - math.log(epsilon) if eps > 0.0 else -math.inf
  else:
    d = _routes.evaluate(agg, route, "delta", epsilon) + slack
  return math.log(d) - math.log(delta) if d > 0.0 else -math.inf


def _solve(g: Callable[[float], float], lo: float, hi: float, f_lo: float,
           f_hi: float | None, rel_tol: float) -> float:
  """Smallest feasible scale in `[lo, hi]` to `rel_tol` (`g(lo) > 0 >= g(hi)`).

  Illinois (regula falsi) on `log k`; each new point stays `tol / 2` inside the bracket,
  and `hi` is always feasible, so the returned `hi` is feasible. `f_hi=None`: `g(hi)`
  unknown (`hi` feasible by another route); the first point is then a quarter of the way.
  """
  x_lo, x_hi, tol, side = math.log(lo), math.log(hi), math.log1p(rel_tol), 0
  while x_hi - x_lo > tol:
    if f_hi is None:
      x = x_lo + 0.25 * (x_hi - x_lo)
    elif math.isfinite(f_lo) and math.isfinite(f_hi) and f_lo != f_hi:
      x = x_hi - f_hi * (x_hi - x_lo) / (f_hi - f_lo)
    else:
      x = 0.5 * (x_lo + x_hi)
    x = min(max(x, x_lo + tol / 2.0), x_hi - tol / 2.0)
    f = g(math.exp(x))
    if f <= 0.0:
      x_hi, f_hi = x, f
      if side == 1:
        f_lo /= 2.0
      side = 1
    else:
      x_lo, f_lo = x, f
      if side == -1 and f_hi is not None:
        f_hi /= 2.0
      side = -1
  return math.exp(x_hi)


_LOG_TINY = math.log(1e-250)


class _Unbounded(Exception):
  """Feasible down to `1e-250` (the smallest feasible scale found is `args[0]`)."""


def _bracket_down(g: Callable[[float], float], hi: float, f_hi: float
                  ) -> tuple[float, float, float, float]:
  """From a feasible `hi` (`g(hi) <= 0`), finds `lo < hi` with `g(lo) > 0`.

  Secant extrapolation of `g` against `log k` (aiming 1% past the predicted root), with
  geometric steps (first `|g(hi)| / 2` in log, at least x1.05 and at most x4, then
  doubling in log) when the secant is not usable.
  """
  x_hi = math.log(hi)
  step = min(max(math.log(1.05), 0.5 * abs(f_hi)), math.log(4.0)) if math.isfinite(
      f_hi) else math.log(4.0)
  x_prev: float | None = None
  f_prev: float | None = None
  while x_hi > _LOG_TINY:
    if x_prev is not None and f_prev is not None and f_prev != f_hi and math.isfinite(f_prev) and math.isfinite(f_hi):
      root = x_hi - f_hi * (x_hi - x_prev) / (f_hi - f_prev)
      x = min(root - 0.01, x_hi - 1e-3) if root < x_hi else x_hi - step
    else:
      x = x_hi - step
    x = max(x, x_hi - 10.0 * step, _LOG_TINY)
    f = g(math.exp(x))
    if f > 0.0:
      return math.exp(x), f, math.exp(x_hi), f_hi
    x_prev, f_prev, x_hi, f_hi = x_hi, f_hi, x, f
    step *= 2.0
  raise _Unbounded(math.exp(x_hi))


def _bracket_up(g: Callable[[float], float], lo: float, f_lo: float
                ) -> tuple[float, float, float, float]:
  """From an infeasible `lo` (`g(lo) > 0`), finds `hi > lo` with `g(hi) <= 0`.

  The mirror image of `_bracket_down` under `k -> 1 / k`, `g -> -g`.
  """
  try:
    m_lo, m_f_lo, m_hi, m_f_hi = _bracket_down(lambda k: -g(1.0 / k), 1.0 / lo, -f_lo)
  except _Unbounded:
    raise ValueError("Could not meet the privacy target with finite noise (scale up to "
                     "1e250 tried).") from None
  # Mirror: m_lo has -g(1 / m_lo) > 0 (feasible), m_hi has -g(1 / m_hi) <= 0.
  return 1.0 / m_hi, -m_f_hi, 1.0 / m_lo, -m_f_lo


def _find(g: Callable[[float], float], guess: float, rel_tol: float) -> float:
  """Smallest feasible scale (`g <= 0`) to `rel_tol`: secant bracketing, then Illinois."""
  f = g(guess)
  if f <= 0.0:
    try:
      lo, f_lo, hi, f_hi = _bracket_down(g, guess, f)
    except _Unbounded as tiny:  # Private at any scale (e.g. nothing is released).
      return tiny.args[0]
  else:
    lo, f_lo, hi, f_hi = _bracket_up(g, guess, f)
  return _solve(g, lo, hi, f_lo, f_hi, rel_tol)


def bisect_scale(feasible: Callable[[float], bool], guess: float, rel_tol: float = REL_TOL,
                 step: float = 2.0) -> float:
  """Smallest `k > 0` with `feasible(k)` (monotone), up to `rel_tol`; returns a feasible k.

  The bracket is found by moving from `guess` by factors of `step`, then bisected in log
  space until `hi / lo <= 1 + rel_tol`.

  Raises:
    ValueError: when no finite `k` is feasible.
  """
  lo, hi = guess, guess
  if feasible(guess):
    lo = guess / step
    while feasible(lo):
      hi, lo = lo, lo / step
      if lo < 1e-300:
        return hi
  else:
    hi = guess * step
    while not feasible(hi):
      lo, hi = hi, hi * step
      if hi > 1e300:
        raise ValueError("Could not meet the privacy target with finite noise.")
  while hi / lo > 1.0 + rel_tol:
    mid = math.sqrt(lo * hi)
    if feasible(mid):
      hi = mid
    else:
      lo = mid
  return hi


def _verified(cached: tuple[float, PrivacyReport], factory: Callable[[float], Ledger], epsilon: float,
              delta: float, route: str) -> bool:
  """Whether a cached `(scale, report)` is this `factory`'s: the same entries at that scale,
  within the target (one accountant evaluation, itself cached per ledger)."""
  scale, report = cached
  again = factory(scale).report(delta, route=route)
  return again.entries == report.entries and again.epsilon <= epsilon


def calibrate(
    factory: Callable[[float], Ledger],
    epsilon: float,
    delta: float,
    *,
    guess: float | None = None,
    route: str = "best",
    key: Hashable | None = None,
    rel_tol: float = REL_TOL,
) -> tuple[float, PrivacyReport]:
  """Smallest scale whose ledger is (epsilon, delta)-DP, with its report.

  `factory(scale)` must return a [`Ledger`][dpgcd_jax.privacy.Ledger] that gets more private as `scale` grows
  (more noise; every route is then monotone in `scale` by post-processing). Each route of
  the ledger is searched in log space (secant bracketing, then Illinois) to within
  `rel_tol`: the first route (cheapest, or expected to win) from `guess`, the others only
  below the best scale so far (between their cheap lower and upper bounds when they have
  some). The smallest feasible scale wins, and its report is computed with the best route at
  that scale.

  Args:
    factory: `scale -> Ledger`, monotone.
    epsilon: target epsilon > 0 (finite).
    delta: target delta in (0, 1), slack included.
    guess: a starting scale (default 1); a good one saves a few evaluations.
    route: "best" or one route name (see `Ledger.routes`).
    key: a hashable description of `factory` for the cache (default: `factory` itself,
      so a new lambda is a new entry); results are cached per (key, epsilon, delta, route).
      A hit is re-verified: the cached scale is used only if `factory` at that scale gives
      the cached ledger and meets the target (a key that does not describe `factory`
      recalibrates instead of returning another ledger's scale).
    rel_tol: relative precision of the returned scale.

  Returns:
    `(scale, report)` with `report.epsilon <= epsilon`; `scale / (1 + rel_tol)` is
    infeasible for every route considered.

  Raises:
    ValueError: for a bad argument (the message names it), or when no finite scale works.
  """
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  delta = check_budget_delta(delta)
  epsilon = float(epsilon)
  if guess is not None:
    _validate.check_positive("guess", guess)
  cache_key = (key if key is not None else factory, epsilon, delta, route, rel_tol)
  if cache_key in _CACHE and _verified(_CACHE[cache_key], factory, epsilon, delta, route):
    _CACHE.move_to_end(cache_key)
    return _CACHE[cache_key]
  guess = 1.0 if guess is None else float(guess)
  probe = factory(guess)
  if not isinstance(probe, Ledger):
    raise ValueError(f"Expected factory to return a Ledger, got factory({guess})={probe!r}.")
  if probe.slack + probe.sampler_charge(epsilon) >= delta:
    # The samplers' charge grows like e^epsilon: aim at the largest epsilon' <= epsilon whose
    # charge takes at most half of what the slack leaves (a report at epsilon' meets epsilon).
    room = 0.5 * (delta - probe.slack)
    if room <= 0.0 or probe.sampler_charge(0.0) > room:
      raise ValueError(f"Expected delta above the ledger's slack {probe.slack} plus the discrete samplers' "
                       f"charge {probe.sampler_charge(0.0):.3g} (dpgcd_jax.privacy.events.DiscreteDraws), got "
                       f"delta={delta}.")
    low, high = 0.0, epsilon
    for _ in range(100):
      middle = 0.5 * (low + high)
      low, high = (middle, high) if probe.sampler_charge(middle) <= room else (low, middle)
    return calibrate(factory, low, delta, guess=guess, route=route, key=key, rel_tol=rel_tol)
  names = probe._candidates(route)  # pylint: disable=protected-access
  # The first route from the guess, then the others near its solution (the set of routes
  # in "best" may depend on the scale: it is taken at that solution).
  first = names[0]
  best_k = _find(lambda k: _margin(factory(k), first, epsilon, delta), guess, rel_tol)
  for name in factory(best_k)._candidates(route):  # pylint: disable=protected-access
    if name == first:
      continue
    g = lambda k, name=name: _margin(factory(k), name, epsilon, delta)
    # best_k is feasible by a route already tried: a costlier route only matters below it.
    hi, f_hi = best_k, None
    if _routes.ROUTES[name].upper is not None:
      # The route's delta is below its upper bound: feasible where the bound is.
      g_up = lambda k, name=name: _margin(factory(k), name, epsilon, delta, bound="upper")
      hi = min(hi, bisect_scale(lambda k: g_up(k) <= 0.0, hi, 1e-3, step=1.02))  # noqa: B023
    if _routes.ROUTES[name].lower is not None:
      # The route's delta is above its lower bound: infeasible where the bound is.
      g_low = lambda k, name=name: _margin(factory(k), name, epsilon, delta, bound="lower")
      lo = bisect_scale(lambda k: g_low(k) <= 0.0, hi, 1e-3, step=1.02) / (1.0 + 1e-3)  # noqa: B023
      if lo >= hi:
        continue
      f_lo = g_low(lo)
    else:
      lo, f_lo = hi / (1.0 + rel_tol), g(hi / (1.0 + rel_tol))
      if f_lo > 0.0:  # Cannot beat the best so far.
        continue
      try:
        lo, f_lo, hi, f_hi = _bracket_down(g, lo, f_lo)
      except _Unbounded as tiny:
        best_k = min(best_k, tiny.args[0])
        continue
    best_k = min(best_k, _solve(g, lo, hi, f_lo, f_hi, rel_tol))
  k = best_k
  for _ in range(200):  # Safety net: the reported epsilon must meet the target.
    report = factory(k).report(delta, route=route)
    if report.epsilon <= epsilon:
      break
    k *= 1.0 + rel_tol / 10.0
  else:  # pragma: no cover
    raise RuntimeError("calibration failed to meet its target")
  result = (k, report)
  _CACHE[cache_key] = result
  if len(_CACHE) > _CACHE_SIZE:
    _CACHE.popitem(last=False)
  return result
