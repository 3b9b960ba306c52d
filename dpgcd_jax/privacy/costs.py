"""The privacy cost of each noise mechanism, by name: host-side, no device code.

A cost is what the accounting needs to know of a mechanism: its `name`, the ledger event of one
use at a noise multiplier (`event(multiplier)`, [`dpgcd_jax.privacy.events`][]), and
`zcdp_per_unit` (`rho` of one use times `multiplier^2`, which splits a per-step budget
between a selection and an update). The device-side samplers (`dpgcd_jax.mechanisms`) carry
their cost (`mechanism.cost`) and read their event from it; the accounting
([`dpgcd_jax.privacy.accounting`][]) looks costs up here, so it never imports device code, and
events never know the mechanisms.

Events (sensitivity `Delta`, multiplier `b`; the proofs are beside the samplers):

| mechanism | kind | event of one use | `zcdp_per_unit` |
|---|---|---|---|
| `laplace` | selection | report-noisy-max with `Lap(b Delta)`: `PureDp(2 / b)` | 2 |
| `gumbel` | selection | exponential mechanism: `BoundedRange(2 / b)` | 1/2 |
| `discrete_laplace` | selection | `PureDp(2 / b)` (an upper bound, on the public grid) | 2 |
| `laplace` | update | `Laplace(1 / b)` | 1/2 |
| `gaussian` | update | `Gaussian(b)` | 1/2 |
| `discrete_laplace` | update | `DiscreteLaplace(1 / b)` | 1/2 |
| `discrete_gaussian` | update | `DiscreteGaussian(b)` | 1/2 |
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from dpgcd_jax.privacy import events


def pure_epsilon(numerator: float, multiplier: float) -> float:
  """`numerator / multiplier` (`inf` at multiplier 0: no noise, no privacy)."""
  return math.inf if multiplier == 0.0 else numerator / multiplier


@dataclasses.dataclass(frozen=True)
class Cost:
  """The privacy cost of one mechanism (module docstring).

  Attributes:
    name: the mechanism's name (`selection=` / `update=` of the solvers).
    event_of: `multiplier -> PrivacyEvent` of one use.
    zcdp_per_unit: `rho` of one use times `multiplier^2`.
    discrete: its sampler draws integers on the public grid (`dpgcd_jax.discrete_noise`), whose
      deviation from their exact law the ledger charges per draw
      ([`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws]).
  """

  name: str
  event_of: Callable[[float], events.PrivacyEvent]
  zcdp_per_unit: float
  discrete: bool = False

  def event(self, multiplier: float) -> events.PrivacyEvent:
    """The ledger event of one use at noise multiplier `multiplier`."""
    return self.event_of(multiplier)


SELECTIONS = {c.name: c for c in (
    Cost("laplace", lambda b: events.PureDp(pure_epsilon(2.0, b)), 2.0),  # (2 / b)^2 / 2
    Cost("gumbel", lambda b: events.BoundedRange(pure_epsilon(2.0, b)), 0.5),  # (2 / b)^2 / 8
    Cost("discrete_laplace", lambda b: events.PureDp(pure_epsilon(2.0, b)), 2.0, discrete=True),
)}
UPDATES = {c.name: c for c in (
    Cost("laplace", lambda b: events.Laplace(pure_epsilon(1.0, b)), 0.5),  # (1 / b)^2 / 2
    Cost("gaussian", events.Gaussian, 0.5),
    Cost("discrete_laplace", lambda b: events.DiscreteLaplace(pure_epsilon(1.0, b)), 0.5, discrete=True),
    Cost("discrete_gaussian", events.DiscreteGaussian, 0.5, discrete=True),
)}


def selection(mechanism: Any) -> Any:
  """The cost of a selection: a name of `SELECTIONS`, or a mechanism object as it is
  (with `select`, `name`, `event` and `zcdp_per_unit`); ValueError naming it otherwise."""
  return _lookup("selection", mechanism, SELECTIONS, "select")


def update(mechanism: Any) -> Any:
  """The cost of an update (as `selection`, over `UPDATES`)."""
  return _lookup("update", mechanism, UPDATES, "perturb")


def _lookup(kind: str, mechanism: Any, registry: dict[str, Cost], sampler: str) -> Any:
  if isinstance(mechanism, str) and mechanism in registry:
    return registry[mechanism]
  # An object: the mechanism itself, of the right kind (an update is never charged as a selection).
  if not isinstance(mechanism, str) and all(hasattr(mechanism, a) for a in ("name", "event", "zcdp_per_unit", sampler)):
    return mechanism
  raise ValueError(f"Expected {kind} to be one of {tuple(registry)} or a {kind} mechanism object "
                   f"(with {sampler}, name, event and zcdp_per_unit), got {kind}={mechanism!r}.")
