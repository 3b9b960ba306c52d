"""Privacy events: the privacy cost of ONE release of a mechanism (host side, NumPy).

An event is a small frozen, hashable dataclass. It says what is known about one release for
replace-one neighbours (datasets of the same public size differing in one record), in the
units the mechanisms use: noise multipliers in units of sensitivity, pure parameters as
epsilons. A [`Ledger`][dpgcd_jax.privacy.ledger.Ledger] composes `(label, event, count)`
entries by the best valid route; the events only expose what every route needs:

* `pure_epsilon`: an `eps` such that the release is `eps`-DP (`inf` if none);
* `rdp(orders)`: an upper bound on the Renyi divergence of one release at each order.

Mechanisms of this library and their events (`Delta` = the sensitivity the multiplier
refers to, see [`dpgcd_jax.privacy.accounting`][]):

| mechanism | event |
|---|---|
| report-noisy-max with `Lap(b Delta)` noise | `PureDp(2 / b)` |
| exponential mechanism / Gumbel-max, scale b | `BoundedRange(2 / b)` |
| Laplace noise `Lap(b Delta)` on a value | `Laplace(1 / b)` |
| Gaussian noise `N(0, (s Delta)^2)` | `Gaussian(s)` |
| discrete Laplace `t >= b D` on an integer | `DiscreteLaplace(1 / b)` (pure DP) |
| discrete Gaussian `sigma >= s D` on integer | `DiscreteGaussian(s)` (zCDP) |
| Poisson sampling (rate q) + Gaussian on a sum | `PoissonSampledGaussian(s, q)` |
| Poisson sampling (rate q) + discrete Gaussian on an integer sum | `PoissonSampledDiscreteGaussian(s, q)` (RDP) |
| a total-variation / truncation slack | `DeltaSlack(delta)` |
| `k` draws of the exact discrete samplers, beside a discrete event | `DiscreteDraws(k)` (a delta charge) |
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax.privacy import _rdp

DRAW_TOTAL_VARIATION = 3.5e-18
"""Total variation of one discrete sampler draw to its exact law, at every scale in `[1, MAX_SCALE]`
(the proof: `dpgcd_jax.discrete_noise`, "Total variation per draw", beside the caps it counts)."""


class PrivacyEvent:
  """Base class of the events (not instantiated)."""

  @property
  def pure_epsilon(self) -> float:
    """An epsilon such that one release is epsilon-DP (`inf` when there is none)."""
    return math.inf

  def rdp(self, orders: np.ndarray) -> np.ndarray:
    """Upper bound on `D_a(M(D) || M(D'))` (both directions) at each order `a > 1`."""
    raise NotImplementedError

  @property
  def slack(self) -> float:
    """Delta added to the total per release, outside every route (0 for most events)."""
    return 0.0

  @property
  def total_variation(self) -> float:
    """Total variation of one release's secure sampler draws to their exact law (`DiscreteDraws`),
    which the ledger charges as `(1 + e^epsilon) TV` (0 for most events)."""
    return 0.0

  def describe(self) -> str:
    """Short description for the report tables (floats to 6 significant digits)."""
    show = lambda v: f"{v:.6g}" if isinstance(v, (float, int)) else repr(v)
    fields = ", ".join(f"{f.name}={show(getattr(self, f.name))}"
                       for f in dataclasses.fields(self))  # type: ignore[arg-type]
    return f"{type(self).__name__}({fields})"


def _set_float(obj, name: str, value) -> None:
  object.__setattr__(obj, name, float(value))


def _check_epsilon(obj) -> None:
  _validate.check_number("epsilon", obj.epsilon, low=0.0, allow_inf=True)
  _set_float(obj, "epsilon", obj.epsilon)


def _check_noise(obj) -> None:
  _validate.check_positive("noise", obj.noise, allow_zero=True, allow_inf=True)
  _set_float(obj, "noise", obj.noise)


@dataclasses.dataclass(frozen=True)
class PureDp(PrivacyEvent):
  """Any `epsilon`-DP release, accounted as binary randomized response.

  Every `epsilon`-DP mechanism is dominated by randomized response with parameter
  `epsilon`, also under adaptive composition (Kairouz, Oh & Viswanath 2015), so the
  routes use its exact privacy-loss distribution and its RDP curve
  `log((e^{a eps} + e^{(1 - a) eps}) / (1 + e^eps)) / (a - 1)`.
  Examples: report-noisy-max with Laplace noise of scale `b Delta` (`eps = 2 / b`), a
  private quantile.
  """

  epsilon: float

  def __post_init__(self):
    _check_epsilon(self)

  @property
  def pure_epsilon(self) -> float:
    return self.epsilon

  def rdp(self, orders):
    return _rdp.rr_rdp(self.epsilon, orders)


@dataclasses.dataclass(frozen=True)
class BoundedRange(PrivacyEvent):
  """An `epsilon`-bounded-range release (exponential mechanism, Gumbel-max selection).

  Bounded range (Durfee & Rogers 2019): for neighbours the privacy loss `log(P(y) / Q(y))`
  takes values in an interval of length `epsilon`. It implies `epsilon`-DP and
  `epsilon^2 / 8`-zCDP (Cesar & Rogers 2021). The exponential mechanism with a score of
  sensitivity `Delta` and temperature `b Delta` (Gumbel-max: argmax of score plus
  `b Delta G_j`, `G_j ~ Gumbel(0, 1)`) is `2 / b`-bounded-range.
  """

  epsilon: float

  def __post_init__(self):
    _check_epsilon(self)

  @property
  def pure_epsilon(self) -> float:
    return self.epsilon

  def rdp(self, orders):
    return _rdp.br_rdp(self.epsilon, orders)


@dataclasses.dataclass(frozen=True)
class Laplace(PrivacyEvent):
  """The Laplace mechanism: noise of scale `sensitivity / epsilon` on a real value.

  `epsilon`-DP; the routes use its exact RDP curve (Mironov 2017, Prop. 6) and its exact
  privacy-loss distribution (atoms `+-epsilon` and a continuous part in between).
  """

  epsilon: float

  def __post_init__(self):
    _check_epsilon(self)

  @property
  def pure_epsilon(self) -> float:
    return self.epsilon

  def rdp(self, orders):
    return _rdp.laplace_rdp(self.epsilon, orders)


@dataclasses.dataclass(frozen=True)
class Gaussian(PrivacyEvent):
  """The Gaussian mechanism with standard deviation `noise * sensitivity`.

  `(1 / noise)`-GDP (Dong, Roth & Su 2019): its privacy-loss distribution is
  `N(mu^2 / 2, mu^2)` with `mu = 1 / noise`; RDP `a / (2 noise^2)`. `noise = 0`
  means no privacy, `inf` a free release.
  """

  noise: float

  def __post_init__(self):
    _check_noise(self)

  @property
  def mu(self) -> float:
    """The GDP parameter `1 / noise`."""
    return math.inf if self.noise == 0.0 else 1.0 / self.noise

  def rdp(self, orders):
    return _rdp.gaussian_rdp(self.noise, orders)


@dataclasses.dataclass(frozen=True)
class ZCdp(PrivacyEvent):
  """A `rho`-zCDP release (Bun & Steinke 2016): RDP `a rho` at every order."""

  rho: float

  def __post_init__(self):
    _validate.check_number("rho", self.rho, low=0.0, allow_inf=True)
    _set_float(self, "rho", self.rho)

  def rdp(self, orders):
    return np.asarray(orders, dtype=float) * self.rho


@dataclasses.dataclass(frozen=True)
class DiscreteLaplace(PureDp):
  """The discrete Laplace mechanism on an integer (`dpgcd_jax.discrete_noise`): `epsilon`-DP.

  Integer value of sensitivity `D`, noise `P(z) ∝ exp(-|z| / t)` with `t >= D / epsilon`:
  `D / t <= epsilon`-DP. Accounted as any pure-DP release (randomized response dominates it);
  the exact PLD of the continuous [`Laplace`][dpgcd_jax.privacy.events.Laplace] is NOT claimed for it.
  """


@dataclasses.dataclass(frozen=True)
class DiscreteGaussian(PrivacyEvent):
  """The discrete Gaussian mechanism with `sigma >= noise * D` on an integer of sensitivity `D`.

  Canonne, Kamath & Steinke (NeurIPS 2020, Thm 4): `rho = D^2 / (2 sigma^2) <= 1 / (2 noise^2)`
  zCDP, i.e. RDP `alpha / (2 noise^2)`. Only the RDP route uses it (its privacy-loss
  distribution is close to, but not claimed to be dominated by, the continuous Gaussian's).
  """

  noise: float

  def __post_init__(self):
    _check_noise(self)

  @property
  def rho(self) -> float:
    """The zCDP parameter `1 / (2 noise^2)`."""
    return math.inf if self.noise == 0.0 else 0.5 / self.noise**2

  def rdp(self, orders):
    return np.asarray(orders, dtype=float) * self.rho


def _check_sampled(event: PoissonSampledGaussian | PoissonSampledDiscreteGaussian) -> None:
  """A Poisson-sampled step's checks: its noise multiplier, and a sampling rate in (0, 1]."""
  _check_noise(event)
  _validate.check_number("sampling_rate", event.sampling_rate, low=0.0, high=1.0, low_open=True)
  _set_float(event, "sampling_rate", event.sampling_rate)


@dataclasses.dataclass(frozen=True)
class PoissonSampledGaussian(PrivacyEvent):
  """One DP-SGD step: Poisson sampling at rate `sampling_rate`, Gaussian noise on the sum.

  The noise on the sum of the sampled clipped per-example gradients is `N(0, (s C)^2 I)`,
  `C` the per-example l2 clipping norm, `s = noise`. Replace-one neighbours: the
  dp_accounting PLD route uses its `REPLACE_ONE` pair; the RDP route takes dp_accounting's
  add/remove curve through the weak triangle inequality (see
  `dpgcd_jax.privacy._rdp.replace_from_add_remove`).
  """

  noise: float
  sampling_rate: float

  def __post_init__(self):
    _check_sampled(self)

  def rdp(self, orders):
    return _rdp.psg_rdp(self.noise, self.sampling_rate, orders)


@dataclasses.dataclass(frozen=True)
class PoissonSampledDiscreteGaussian(PrivacyEvent):
  """One secure DP-SGD step: Poisson sampling at rate `q`, discrete Gaussian noise on an integer sum.

  The release is `Q + Z`: `Q = sum_{i in B} q_i` over the Poisson(`q`) batch `B`, `q_i` integer
  vectors with `||q_i||_2 <= C / h <= D` (the clipped rows on a public grid `h`,
  `D = ceil(C / h) + 1`), and `Z` iid
  discrete Gaussians `N_Z(0, sigma^2)` per coordinate, integer `sigma >= s D`. NOT a
  `PoissonSampledGaussian`: no PLD route claims it, only RDP, built in three steps.

  (a) Base mechanism, add/remove neighbours (`Q' = Q + q_x`, an integer vector): for integers
  `mu, nu`, `D_a(N_Z(mu, sigma^2) || N_Z(nu, sigma^2)) <= a (mu - nu)^2 / (2 sigma^2)` at every
  order `a > 1` (Canonne, Kamath & Steinke, NeurIPS 2020: the one-dimensional bound behind their
  Thm 4, which `DiscreteGaussian` uses; symmetric in `mu, nu`, so both directions), and Renyi
  divergence adds over independent coordinates (a product of distributions; van Erven &
  Harremoes 2014): `<= a ||q_x||_2^2 / (2 sigma^2) <= a / (2 s^2)`.
  (b) Poisson subsampling of any mechanism with that RDP at the integer orders `2..a`, both
  directions, by joint convexity reduced to one pair `((1 - q) Q + q P, Q)`: the binomial
  expansion (forward), a Taylor bound with Lagrange remainder (reverse) and joint convexity
  alone, the least of the valid bounds (`dpgcd_jax.privacy._rdp._add_remove_from_integer_curve`;
  not Zhu & Wang's ICML 2019 Thm. 6, whose factor 3 costs a 12x multiplier).
  (c) Replace-one from add/remove by the weak triangle inequality (Mironov 2017, Prop. 11,
  through `D \\ {x}`; `_rdp.replace_from_add_remove`), which needs only an add/remove bound in
  both directions at the orders it combines: integer orders here (`_rdp.SGD_RDP_ORDERS`).
  """

  noise: float
  sampling_rate: float

  def __post_init__(self):
    _check_sampled(self)

  def rdp(self, orders):
    return _rdp.psdg_rdp(self.noise, self.sampling_rate, orders)


@dataclasses.dataclass(frozen=True)
class DeltaSlack(PrivacyEvent):
  """A fixed `delta` added to the total (a total-variation or truncation slack): the privacy
  profile of the whole composition moves up by at most `delta` per such release."""

  delta: float

  def __post_init__(self):
    _validate.check_number("delta", self.delta, low=0.0, high=1.0, high_open=True)
    _set_float(self, "delta", self.delta)

  @property
  def pure_epsilon(self) -> float:
    return 0.0

  @property
  def slack(self) -> float:
    return self.delta

  def rdp(self, orders):
    return np.zeros(np.shape(orders))


@dataclasses.dataclass(frozen=True)
class TotalVariation(PrivacyEvent):
  """A mechanism within total variation `distance` of the accounted one on every input (DP-SGD's
  Poisson sampler): charged `(1 + e^epsilon) distance` at the epsilon of the ledger it ends in, as
  [`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws] (same proof). No route sees it."""

  distance: float

  def __post_init__(self):
    _validate.check_number("distance", self.distance, low=0.0, high=1.0)
    _set_float(self, "distance", self.distance)

  @property
  def pure_epsilon(self) -> float:
    return 0.0

  @property
  def total_variation(self) -> float:
    return self.distance

  def rdp(self, orders):
    return np.zeros(np.shape(orders))


@dataclasses.dataclass(frozen=True)
class DiscreteDraws(PrivacyEvent):
  """`draws` draws of the discrete samplers (`dpgcd_jax.discrete_noise`) per release: a delta charge.

  A secure release is accounted by its exact mechanism's event (`DiscreteLaplace`,
  `DiscreteGaussian`, `PureDp`, `PoissonSampledDiscreteGaussian`), and this entry beside it
  counts the sampler draws the release makes. Each draw's law is within total variation
  `eta = DRAW_TOTAL_VARIATION = 3.5e-18` of the exact one, at every scale and independently
  of the data; the ledger adds `(1 + e^epsilon) N eta` to its delta, `N` the draws of all its
  `DiscreteDraws` entries (`Ledger.sampler_charge`).

  Proof. Coupling the `N` draws one at a time, each given the run so far, `TV(M'(D), M(D)) <=
  N eta` for every `D`; if the exact `M` is `(epsilon, delta)`-DP, `P[M'(D) in S] <= P[M(D) in S]
  + N eta <= e^epsilon P[M'(D') in S] + delta + (1 + e^epsilon) N eta`. `N` is fixed by the
  shapes and counts every draw that can reach a released value (one whose row is discarded
  whatever its value, e.g. the scales' intercept row, cannot). A scale outside `[1, MAX_SCALE]`
  fails with probability 1: a constant NaN, dominated by any event. No route sees this event.

  `release_epsilon`: the draws of one pure `e_r`-DP release (AboveThreshold, noisy counts, a
  score) cost `(1 + e^e) draws eta`, `e = min(epsilon, e_r)`. Proof, for an exact pair `P <=
  e^e_r Q` within `tau` of the real one under any prefix and adaptive suffix: in the composed
  hockey-stick sum at `e^epsilon`, moving mass `d_x` off `Q(x)` raises its term by at most
  `min(e^epsilon, e^e_r) d_x` times the other factors (summing to at most 1), and mass added to
  `P` by that mass: `(1 + e^e) tau` in all, whatever event composes the exact release.
  """

  draws: int
  release_epsilon: float | None = None

  def __post_init__(self):
    _validate.check_int("draws", self.draws, low=0)
    object.__setattr__(self, "draws", int(self.draws))
    if self.release_epsilon is not None:
      _validate.check_number("release_epsilon", self.release_epsilon, low=0.0)
      object.__setattr__(self, "release_epsilon", float(self.release_epsilon))

  def charge(self, epsilon: float) -> float:
    """The delta these draws add to an `(epsilon, .)` certificate: `(1 + e^e) draws eta`,
    `e = min(epsilon, release_epsilon)`."""
    if self.release_epsilon is not None:
      epsilon = min(epsilon, self.release_epsilon)
    return tv_charge(epsilon, self.total_variation)

  @property
  def pure_epsilon(self) -> float:
    return 0.0

  @property
  def total_variation(self) -> float:
    """`draws * eta`: the total variation of one release's draws to the exact law."""
    return self.draws * DRAW_TOTAL_VARIATION

  def rdp(self, orders):
    return np.zeros(np.shape(orders))


def tv_charge(epsilon: float, total_variation: float) -> float:
  """`(1 + e^epsilon) tv`, the delta a total variation adds at `epsilon` (inf above 700)."""
  if total_variation <= 0.0:
    return 0.0
  return math.inf if epsilon > 700.0 else (1.0 + math.exp(epsilon)) * total_variation
