"""dp_accounting adapters: the numerically discretized PLD route (needed for DP-SGD).

Every event but `ZCdp` maps to a dp_accounting privacy-loss distribution, built with
`pessimistic_estimate=True` (every loss rounded UP to the discretization lattice, truncated
mass moved to `+inf`: an upper bound on the privacy profile):

* `PureDp(eps)` / `BoundedRange(eps)` -> `from_randomized_response` (binary RR with
  parameter eps dominates any eps-DP step), self-composed `count` times (NOT through
  `PLDAccountant.compose`, which ignores `count` for randomized response in 0.6.0);
* `Laplace(eps)` -> `from_laplace_mechanism(1 / eps)` (exact pair, sensitivity 1);
* `Gaussian(s)` -> `from_gaussian_mechanism(s)`;
* `PoissonSampledGaussian(s, q)` -> `from_gaussian_mechanism(s, sampling_prob=q,
  neighboring_relation=REPLACE_ONE)`: the one-dimensional pair `(1 - q) N(0, s^2) +
  q N(1, s^2)` against `(1 - q) N(0, s^2) + q N(-1, s^2)`, which dp_accounting documents
  as the worst case of replace-one with Poisson sampling.

Rounding every loss up costs about `count * h / 2` of epsilon per entry (`h` the
discretization): at 1e-4 and T = 2000 steps that is ~0.1. This route therefore wins only
where no lattice-exact route applies (Poisson-sampled Gaussians); elsewhere it serves as the
independent cross-check.
"""

from __future__ import annotations

import functools
import math

from scipy import special

from dpgcd_jax.privacy import events as ev

# Default discretization of the losses.
DISCRETIZATION = 1e-4
SUPPORTED = (ev.PureDp, ev.BoundedRange, ev.Laplace, ev.Gaussian, ev.PoissonSampledGaussian,
             ev.DeltaSlack)


def _rr_noise(eps: float) -> float:
  """dp_accounting's RR noise parameter p with P(keep) = 1 - p / 2 = e^eps / (1 + e^eps)."""
  return 2.0 * float(special.expit(-eps))


@functools.lru_cache(maxsize=128)
def _single(event: ev.PrivacyEvent, count: int, discretization: float):
  """PLD of `count` releases of `event` (None for a free one, raises if non-private)."""
  import dp_accounting  # pylint: disable=g-import-not-at-top
  from dp_accounting.pld import privacy_loss_distribution as pld  # pylint: disable=g-import-not-at-top
  kw = dict(value_discretization_interval=discretization, pessimistic_estimate=True)
  if isinstance(event, (ev.PureDp, ev.BoundedRange, ev.Laplace)):
    eps = event.epsilon
    if eps == 0.0:
      return None
    if isinstance(event, ev.Laplace):
      one = pld.from_laplace_mechanism(1.0 / eps, **kw)
    else:
      one = pld.from_randomized_response(_rr_noise(eps), 2, **kw)
  elif isinstance(event, ev.Gaussian):
    if math.isinf(event.noise):
      return None
    one = pld.from_gaussian_mechanism(event.noise, **kw)
  elif isinstance(event, ev.PoissonSampledGaussian):
    if math.isinf(event.noise):
      return None
    one = pld.from_gaussian_mechanism(
        event.noise, sampling_prob=event.sampling_rate,
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE, **kw)
  else:  # pragma: no cover - filtered by the caller
    raise TypeError(f"unsupported event {event!r}")
  return one.self_compose(count) if count > 1 else one


@functools.lru_cache(maxsize=64)
def composed(entries: tuple[tuple[ev.PrivacyEvent, int], ...], discretization: float):
  """dp_accounting PLD of the aggregated `(event, count)` entries (None if all free)."""
  total = None
  for event, count in entries:
    if isinstance(event, ev.DeltaSlack):
      continue
    part = _single(event, count, discretization)
    if part is not None:
      total = part if total is None else total.compose(part)
  return total


def non_private(entries) -> bool:
  """True when an entry has no privacy at all (noise 0, or epsilon too large for
  dp_accounting's parametrization: reported as epsilon = inf, a valid bound)."""
  for event, _ in entries:
    if isinstance(event, (ev.PureDp, ev.BoundedRange, ev.Laplace)) and event.epsilon > 500.0:
      return True
    if isinstance(event, (ev.Gaussian, ev.PoissonSampledGaussian)) and event.noise == 0.0:
      return True
  return False


def delta(entries, epsilon: float, discretization: float = DISCRETIZATION) -> float:
  if non_private(entries):
    return 1.0
  pld = composed(entries, discretization)
  return 0.0 if pld is None else float(min(pld.get_delta_for_epsilon(epsilon), 1.0))


def epsilon(entries, delta_: float, discretization: float = DISCRETIZATION) -> float:
  if non_private(entries):
    return math.inf
  pld = composed(entries, discretization)
  return 0.0 if pld is None else float(max(pld.get_epsilon_for_delta(delta_), 0.0))
