"""One ledger for every private computation, one `calibrate` for every noise scale.

A [`Ledger`][dpgcd_jax.privacy.ledger.Ledger] is an immutable, hashable sequence of entries `(label, event, count)`:
`count` adaptive releases of the mechanism described by `event` (see
[`dpgcd_jax.privacy.events`][]), for replace-one neighbours. It answers

* `ledger.epsilon(delta)`: the smallest epsilon such that the whole sequence is
  (epsilon, delta)-DP, and `ledger.delta(epsilon)`, the matching delta,

each as the minimum over every VALID composition route for the events present (see
`dpgcd_jax.privacy._routes`): the exact lattice PLD (randomized response, exact
Laplace, GDP), the adaptive bounded-range PLD, RDP with the optimal conversion, and
dp_accounting's PLD. Every route is an upper bound on the same privacy profile, so their
minimum is one too. `DeltaSlack` entries add their delta to the total, and `DiscreteDraws`
entries (the secure samplers' draws) add `(1 + e^epsilon) N eta` at the reported epsilon
(`Ledger.sampler_charge`; the proof is in [`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws]).

Privacy argument: each route composes, for adaptively chosen mechanisms, per-release
guarantees that hold conditionally on all previous outputs (dominating pairs for the PLD
routes, Renyi divergence bounds for RDP), so the reported (epsilon, delta) holds for the
whole adaptive sequence, and for anything computed from its outputs (post-processing).

Examples:
  >>> from dpgcd_jax.privacy import Ledger, Gaussian, PureDp, calibrate
  >>> ledger = Ledger.of(("smoothness", PureDp(0.05), 1), ("update", Gaussian(60.0), 100))
  >>> round(ledger.epsilon(1e-6), 3)
  0.713
  >>> scale, report = calibrate(lambda k: Ledger.of(("update", Gaussian(k), 100)), 1.0, 1e-6)
  >>> round(scale), report.route, report.epsilon <= 1.0
  (42, 'pld', True)
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple
from typing import overload

from dpgcd_jax import _validate
from dpgcd_jax.privacy import _routes
from dpgcd_jax.privacy import events as ev


class Entry(NamedTuple):
  """`count` adaptive releases of a mechanism with privacy event `event`."""

  label: str
  event: ev.PrivacyEvent
  count: int = 1  # type: ignore[assignment]  # public field; shadows tuple.count (mypy flags the name)


def _entry(x) -> Entry:
  entry = Entry(*x)
  if not isinstance(entry.label, str):
    raise ValueError(f"Expected an entry label to be a str, got label={entry.label!r}.")
  if not isinstance(entry.event, ev.PrivacyEvent):
    raise ValueError(f"Expected a privacy event (dpgcd_jax.privacy.events), got "
                     f"event={entry.event!r} for entry {entry.label!r}.")
  _validate.check_int("count", entry.count, low=0)
  return Entry(entry.label, entry.event, int(entry.count))


def check_budget_delta(delta: float) -> float:
  _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
  return float(delta)


def check_budget_epsilon(epsilon: float) -> float:
  _validate.check_number("epsilon", epsilon, low=0.0)
  return float(epsilon)


@dataclasses.dataclass(frozen=True)
class Ledger:
  """Immutable, hashable sequence of `(label, event, count)` entries.

  Attributes:
    entries: the entries, in the order they were added.
  """

  entries: tuple[Entry, ...] = ()

  def __post_init__(self):
    object.__setattr__(self, "entries", tuple(_entry(e) for e in self.entries))

  @classmethod
  def of(cls, *entries) -> Ledger:
    """`Ledger.of(("selection", BoundedRange(0.01), 1000), ...)`."""
    return cls(tuple(entries))

  def add(self, label: str, event: ev.PrivacyEvent, count: int = 1) -> Ledger:
    """A new ledger with one more entry."""
    return Ledger(self.entries + (Entry(label, event, count),))

  def with_draws(self, draws: int, count: int, release_epsilon: float | None = None) -> Ledger:
    """A new ledger with the entry "sampler draws": `count` releases of `draws` draws of the
    discrete samplers each ([`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws], a delta
    charge; the draws of one pure `release_epsilon`-DP release charged at that epsilon); the same
    ledger when `draws` is 0 (float noise: no entry)."""
    return self.add("sampler draws", ev.DiscreteDraws(draws, release_epsilon), count) if draws else self

  @overload
  def __add__(self, other: Ledger) -> Ledger: ...

  @overload
  def __add__(self, other: PrivacyReport) -> PrivacyReport: ...

  def __add__(self, other: Ledger | PrivacyReport) -> Ledger | PrivacyReport:
    """`self` then `other`: a ledger with both entries; with a report, a report (the ledger's
    releases join the report's at the report's delta, as `report + report` composes in
    [`PrivacyReport`][dpgcd_jax.privacy.ledger.PrivacyReport])."""
    if isinstance(other, PrivacyReport):
      return other._compose(self, first=True)
    if not isinstance(other, Ledger):
      return NotImplemented
    return Ledger(self.entries + other.entries)

  def __iter__(self):
    return iter(self.entries)

  def __len__(self) -> int:
    return len(self.entries)

  @property
  def slack(self) -> float:
    """Sum of the events' slacks (`DeltaSlack` deltas, inner slacks of selections)."""
    return sum(e.event.slack * e.count for e in self.entries)

  @property
  def total_variation(self) -> float:
    """`sum_i count_i TV_i`: the total variation of all the secure sampler draws to their exact law
    (`DiscreteDraws` entries, `TV_i = draws_i * eta`, and those inside a private selection)."""
    return sum(e.event.total_variation * e.count for e in self.entries)

  def sampler_charge(self, epsilon: float) -> float:
    """The delta the secure samplers' deviation adds to an `(epsilon, .)` certificate: `(1 +
    e^epsilon) TV` over all the draws, except the draws of a pure release, charged at its own
    epsilon when smaller (the proofs are in [`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws]);
    0 without sampler draws."""
    own = lambda event: isinstance(event, ev.DiscreteDraws) and event.release_epsilon is not None
    tv = sum(e.event.total_variation * e.count for e in self.entries if not own(e.event))
    rest = ev.tv_charge(epsilon, tv)
    return rest + sum(e.event.charge(epsilon) * e.count for e in self.entries if own(e.event))  # type: ignore[attr-defined]

  def aggregated(self) -> _routes.Entries:
    """Identical events merged (counts summed), slack, draw counts and empty entries dropped."""
    counts: dict[ev.PrivacyEvent, int] = {}
    for entry in self.entries:
      if entry.count > 0 and not isinstance(entry.event, (ev.DeltaSlack, ev.DiscreteDraws, ev.TotalVariation)):
        counts[entry.event] = counts.get(entry.event, 0) + entry.count
    return tuple(sorted(counts.items(), key=lambda x: (type(x[0]).__name__, repr(x[0]))))

  def routes(self) -> tuple[str, ...]:
    """Names of the routes that apply to this ledger (registry order)."""
    agg = self.aggregated()
    return tuple(name for name, r in _routes.ROUTES.items() if r.supports(agg))

  def _candidates(self, route: str) -> list[str]:
    agg = self.aggregated()
    if route == "best":
      names = [n for n, r in _routes.ROUTES.items() if r.supports(agg) and r.in_best(agg)]
      for n in names:  # An exact route makes the others pointless.
        if _routes.ROUTES[n].exact(agg):
          return [n]
      return sorted(names, key=lambda n: (_routes.ROUTES[n].priority, _routes.ROUTES[n].cost))
    if route not in _routes.ROUTES or not _routes.ROUTES[route].supports(agg):
      raise ValueError(f"Expected route to be 'best' or one of {self.routes()}, "
                       f"got route={route!r}.")
    return [route]

  def epsilon_and_route(self, delta: float, route: str = "best") -> tuple[float, str]:
    """The smallest certified epsilon at `delta` and the route that certifies it.

    With `DiscreteDraws` entries, the best route's epsilon `e = h(c)` at
    `delta - slack - sampler_charge(c)` is certified once `e <= c` (`sampler_charge(e) <=
    sampler_charge(c)`); `c` starts just above the uncharged epsilon and follows
    `c <- h(c) (1 + 1e-6) + 1e-6` (`h` increases, slowly: one step in practice). Where the
    charge is a real share of `delta` that can take many steps: after 8, the certified delta
    `f(c)` (route, slack and charge at `c`) is minimized by golden-section search up to where
    the charge alone exceeds `delta`, and the smallest `c` left of the minimum with `f(c) <=
    delta` is bisected for (any such `c` is certified); `inf` if `f` stays above `delta`.
    """
    delta = check_budget_delta(delta)
    names = self._candidates(route)
    slack, agg = self.slack, self.aggregated()
    eps, name = self._route_epsilon(agg, names, delta - slack)
    if not self.sampler_charge(0.0):
      return eps, name
    h = lambda c: self._route_epsilon(agg, [name], delta - slack - self.sampler_charge(c))[0]
    for _ in range(8):
      cap = eps * (1.0 + 1e-6) + 1e-6
      eps = h(cap)
      if eps <= cap:
        return eps, name
    # f(c), the certified delta at c, falls with the route's delta and rises with the charge:
    # golden-section search for its least value up to where the charge alone exceeds delta, then
    # the smallest c left of it with f(c) <= delta (any such c is certified).
    f = lambda c: self.delta_and_route(c, name)[0]
    low, high = cap, 2.0 * cap
    for _ in range(64):
      if self.sampler_charge(high) >= delta - slack:
        break
      high *= 2.0
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = low, high
    for _ in range(100):
      c, d = b - ratio * (b - a), a + ratio * (b - a)
      a, b = (a, d) if f(c) <= f(d) else (c, b)
    best = 0.5 * (a + b)
    if f(best) > delta:
      return math.inf, name
    for _ in range(100):
      if best - low <= 1e-12 * best:
        break
      middle = 0.5 * (low + best)
      low, best = (low, middle) if f(middle) <= delta else (middle, best)
    return best, name

  @staticmethod
  def _route_epsilon(agg: _routes.Entries, names: list[str], delta: float) -> tuple[float, str]:
    """The smallest epsilon of the routes `names` at `delta` (the ledger's slack removed)."""
    if delta <= 0.0:
      return math.inf, names[0]
    if not agg:
      return 0.0, names[0]
    best = (math.inf, names[0])
    for name in names:
      eps = _routes.evaluate(agg, name, "epsilon", delta)
      if eps < best[0]:
        best = (eps, name)
    return best

  def delta_and_route(self, epsilon: float, route: str = "best") -> tuple[float, str]:
    """The smallest certified delta at `epsilon` and the route that certifies it."""
    epsilon = check_budget_epsilon(epsilon)
    names = self._candidates(route)
    slack, agg = self.slack + self.sampler_charge(epsilon), self.aggregated()
    if not agg:
      return min(slack, 1.0), names[0]
    best = (math.inf, names[0])
    for name in names:
      d = _routes.evaluate(agg, name, "delta", epsilon)
      if d < best[0]:
        best = (d, name)
    return min(best[0] + slack, 1.0), best[1]

  def epsilon(self, delta: float, route: str = "best") -> float:
    """Smallest epsilon with (epsilon, delta)-DP over the valid routes (or one `route`)."""
    return self.epsilon_and_route(delta, route)[0]

  def delta(self, epsilon: float, route: str = "best") -> float:
    """Smallest delta with (epsilon, delta)-DP over the valid routes (or one `route`)."""
    return self.delta_and_route(epsilon, route)[0]

  def route_for(self, delta: float) -> str:
    """The route that certifies the smallest epsilon at `delta`."""
    return self.epsilon_and_route(delta)[1]

  def report(self, delta: float, *, route: str = "best", notes: tuple[str, ...] = ()
             ) -> PrivacyReport:
    """The [`PrivacyReport`][dpgcd_jax.privacy.ledger.PrivacyReport] of this ledger at `delta`."""
    eps, name = self.epsilon_and_route(delta, route)
    return PrivacyReport(self.entries, eps, float(delta), name, tuple(notes))


@dataclasses.dataclass(frozen=True)
class PrivacyReport:
  """What a private computation spent: its entries and the total (epsilon, delta).

  Attributes:
    entries: the ledger's `(label, event, count)` entries.
    epsilon: the total epsilon certified at `delta`.
    delta: the total delta (slack and the samplers' charge included).
    route: the composition route that certified `epsilon`.
    notes: free-form statements (e.g. "smoothness: public by declaration").
    not_private: the data-dependent steps the guarantee does NOT cover (e.g. "label set read
      from y"); empty when every quantity taken from the data is public by declaration or
      released by an entry of the ledger.
  """

  entries: tuple[Entry, ...]
  epsilon: float
  delta: float
  route: str
  notes: tuple[str, ...] = ()
  not_private: tuple[str, ...] = ()

  @property
  def end_to_end(self) -> bool:
    """True when nothing the computation read from the data is outside the ledger."""
    return not self.not_private

  @property
  def ledger(self) -> Ledger:
    return Ledger(self.entries)

  def with_notes(self, *notes: str) -> PrivacyReport:
    """A copy with more notes."""
    return dataclasses.replace(self, notes=self.notes + tuple(notes))

  def with_not_private(self, *steps: str) -> PrivacyReport:
    """A copy that records data-dependent steps outside the guarantee."""
    return dataclasses.replace(self, not_private=self.not_private + tuple(steps))

  def __add__(self, other: PrivacyReport | Ledger) -> PrivacyReport:
    """Sequential composition of two computations on the same data (`clf1.privacy_ + clf2.privacy_`).

    The sum's entries are both ledgers' (this one's first), composed exactly by the ledger's
    routes at the stated delta `delta_1 + delta_2` (a bare [`Ledger`][dpgcd_jax.privacy.Ledger]
    states no delta: it adds its entries, and its slack to the delta). Its epsilon is the smaller of two valid
    certificates at that delta: the composed ledger's `epsilon(delta_1 + delta_2)` (route
    named), and basic composition `epsilon_1 + epsilon_2` (route "basic": an
    `(eps_1, delta_1)`-DP then an adaptively chosen `(eps_2, delta_2)`-DP release is
    `(eps_1 + eps_2, delta_1 + delta_2)`-DP, Dwork & Roth 2014, Thm 3.16), which a
    route's discretization can exceed by a hair. Notes and `not_private` steps are merged (each
    once, in order): the sum is end to end only when both are.
    """
    if not isinstance(other, (PrivacyReport, Ledger)):
      return NotImplemented
    return self._compose(other)

  def __radd__(self, other: int) -> PrivacyReport:
    """`0 + report` is the report, so that `sum(reports)` composes a list of reports."""
    if isinstance(other, int) and not isinstance(other, bool) and other == 0:
      return self
    return NotImplemented

  def _compose(self, other: PrivacyReport | Ledger, *, first: bool = False) -> PrivacyReport:
    """`self + other` (`first=True`: `other + self`, the other's entries first)."""
    if isinstance(other, Ledger):  # its own certificate: (sum of the pure epsilons, its slack and charge)
      pure = sum(e.event.pure_epsilon * e.count for e in other.entries
                 if e.count and not isinstance(e.event, ev.DeltaSlack))
      charge = other.sampler_charge(pure) if math.isfinite(pure) else 0.0  # (inf, .) certifies nothing
      other = PrivacyReport(other.entries, pure, other.slack + charge, "basic")
    a, b = (other, self) if first else (self, other)
    ledger = Ledger(a.entries + b.entries)
    delta = min(a.delta + b.delta, 1.0)
    # delta = 1 certifies nothing: every computation is (0, 1)-DP.
    epsilon, route = ledger.epsilon_and_route(delta) if 0.0 < delta < 1.0 else (0.0 if delta else math.inf, "basic")
    if a.epsilon + b.epsilon < epsilon:
      epsilon, route = a.epsilon + b.epsilon, "basic"
    merge = lambda x, y: x + tuple(s for s in dict.fromkeys(y) if s not in x)
    return PrivacyReport(ledger.entries, epsilon, delta, route, merge(a.notes, b.notes),
                         merge(a.not_private, b.not_private))

  def __str__(self) -> str:
    rows = [("label", "event", "count")]
    rows += [(e.label, e.event.describe(), str(e.count)) for e in self.entries]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    lines = [f"{a:<{w0}}  {b:<{w1}}  {c:>6}" for a, b, c in rows]
    lines.append(f"total: ({self.epsilon:.6g}, {self.delta:.3g})-DP for replace-one "
                 f"neighbours (route: {self.route})")
    lines += [f"note: {n}" for n in self.notes]
    lines += [f"NOT PRIVATE: {s}" for s in self.not_private]
    return "\n".join(lines)
