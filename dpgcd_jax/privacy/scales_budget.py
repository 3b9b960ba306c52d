"""What private feature scales cost and when they pay, from public numbers only (host side).

The release of [`dpgcd_jax.privacy.scales`][] is `DiscreteGaussian(s)` with count `L`, the
rounds of its binary search: `rho = L / (2 s^2)` zCDP for replace-one neighbours with `n`
public (the proof is beside the mechanism, in that module's docstring). Here: its ledger entry
([`scales_ledger`][dpgcd_jax.privacy.scales_budget.scales_ledger], to be added to the ledger of
the run that uses `B`), the multiplier at a budget
([`calibrate_scales`][dpgcd_jax.privacy.scales_budget.calibrate_scales],
[`count_noise`][dpgcd_jax.privacy.scales_budget.count_noise]) and at a `rho`
([`noise_for_rho`][dpgcd_jax.privacy.scales_budget.noise_for_rho],
[`scales_rho`][dpgcd_jax.privacy.scales_budget.scales_rho]), and from what `n` a release is
informative (below). Nothing here reads data, draws noise or runs under `jit`; it reads the
mechanism's public grid and the discrete sampler's range (so, unlike the JAX-free accounting
modules such as [`dpgcd_jax.privacy.accounting`][], importing it loads JAX).

When it pays. A query's noise `sigma` must be small against `(1 - q) n`, the count gap
between the `q`-quantile and the empty region above the data. Measured
(`benchmarks/results/scales.md`, Gaussian features, scales over 5 decades, delta = 1/n^2):
ONE release puts at least 90% of the features within 2x of their true 0.9-quantile from
`(1 - q) n / sigma` of about 1.6-2.6, and the median over seeds from about 1; the smallest
such `n` is, for one release,

| p | eps = 0.1 | eps = 0.2 | eps = 0.5 |
|---|---|---|---|
| 30 | 15,000 | 7,000 | 2,000 |
| 200 | 30-50,000 | 15,000 | 7,000 |

(it grows as `sqrt(p) / epsilon`, up to the log factor of delta; measured with the continuous
Gaussian's calibration, whose GDP accounting needs 5-9% less noise than the discrete one's RDP
accounting at these budgets: the rule below follows `sigma`).
[`scales_informative`][dpgcd_jax.privacy.scales_budget.scales_informative]
decides it from public `n`, `p`, `epsilon`, `delta` with the rule
`(1 - q) n >= INFORMATIVE_RATIO * sigma` (ratio 2, a little conservative against the table);
[`min_informative_n`][dpgcd_jax.privacy.scales_budget.min_informative_n] inverts it. Below it, ask for public bounds.
"""

from __future__ import annotations

import math
from typing import Any

from dpgcd_jax import _validate
from dpgcd_jax import discrete_grid
from dpgcd_jax import discrete_noise
from dpgcd_jax import release_mechanisms
from dpgcd_jax.privacy import calibration
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import scales

LABEL = "feature scales"
INFORMATIVE_RATIO = 2.0
"""`(1 - q) n >= INFORMATIVE_RATIO * sigma` is the informative regime (measured; see module)."""


def scales_ledger(noise: float, *, features: int, grid: Any = scales.GRID, label: str = LABEL) -> ledger_lib.Ledger:
  """The ledger of one release at multiplier `noise`: `(label, DiscreteGaussian(noise), L)`, and
  `(f"{label} draws", DiscreteDraws(features), L)`: each round draws one discrete Gaussian per
  searched feature (the samplers' delta charge, [`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws]).

  Add it to the ledger of the run that uses the scales (`solver_ledger + scales_ledger(s,
  features=p)`): the ledger composes both by the best valid route (RDP: the discrete Gaussian has
  no GDP claim). `features`: the number of features searched (required: the draws it charges).
  """
  rounds, mechanism = scales.num_rounds(grid), release_mechanisms.NoisySearch()
  spent = ledger_lib.Ledger.of((label, mechanism.event(noise), rounds))
  features = _validate.check_int("features", features, low=0)
  return spent.add(f"{label} draws", mechanism.draws(features), rounds) if features else spent


def scales_rho(noise: float, *, grid: Any = scales.GRID) -> float:
  """The zCDP `rho = L / (2 noise^2)` of one release."""
  _validate.check_positive("noise", noise, allow_inf=True)
  return scales.num_rounds(grid) / (2.0 * float(noise) ** 2)


def noise_for_rho(rho: float, *, grid: Any = scales.GRID) -> float:
  """The multiplier whose release is `rho`-zCDP: `sqrt(L / (2 rho))`."""
  _validate.check_positive("rho", rho)
  return math.sqrt(scales.num_rounds(grid) / (2.0 * float(rho)))


def calibrate_scales(epsilon: float, delta: float, *, features: int, grid: Any = scales.GRID) -> float:
  """The smallest multiplier `s` at which the release ALONE, on `features` features (its draws
  charged), is `(epsilon, delta)`-DP.

  Composed with a run in one ledger the total is smaller than the sum of the parts; an
  estimator that gives the scales a share of its budget calibrates `s` here at that share,
  then calibrates the run on `run_ledger + scales_ledger(s)` at the total.
  """
  _validate.check_positive("epsilon", epsilon)
  _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
  rounds = scales.num_rounds(grid)
  scale, _ = calibration.calibrate(lambda s: scales_ledger(s, features=features, grid=grid), float(epsilon),
                                   float(delta), key=("feature scales", "discrete_gaussian", rounds, int(features)))
  return float(scale)


def count_noise(p: int, epsilon: float, delta: float, *, grid: Any = scales.GRID) -> float:
  """`s sqrt(p)`: the standard deviation of every released count at this budget (before the
  rounding up to the integer [`count_sigma`][dpgcd_jax.privacy.scales.count_sigma]); `inf` where the
  samplers' charge of the `L p` draws alone exceeds half of `delta`."""
  p = _validate.check_int("p", p)
  if scales_ledger(1.0, features=p, grid=grid).sampler_charge(0.0) > 0.5 * float(delta):
    return math.inf  # the draws' charge alone would take more than half of delta (`calibrate`'s aim)
  return calibrate_scales(epsilon, delta, features=p, grid=grid) * math.sqrt(p)


def scales_informative(n: int, p: int, epsilon: float, delta: float | None = None, *,
                       quantile: float = scales.DEFAULT_QUANTILE, grid: Any = scales.GRID) -> bool:
  """Whether private scales at this budget are informative, from public quantities only.

  True iff `(1 - q) n >= INFORMATIVE_RATIO * sigma` (`= 2 sigma`) with `sigma` the count
  noise of [`count_noise`][dpgcd_jax.privacy.scales_budget.count_noise] (`delta` defaults to `1 / n^2`, the estimators'
  default), and `sigma` is inside the discrete sampler's range (`MAX_SCALE`; beyond, the
  release is NaN).
  From the boundary on, one release put at least about 90% of the features within 2x of their
  true `q`-quantile (Gaussian-like features with scales over 5 decades,
  `benchmarks/results/scales.md`). Below it, ask for public bounds. Heavy tails or many
  zeros change the count-to-value conversion: the rule is about counts, the 2x about values.

  Args:
    n: the number of records (public).
    p: the number of features.
    epsilon: the budget of the scale release alone.
    delta: its delta (default `1 / n^2`).
    quantile: `q`.
    grid: the public grid.
  """
  sigma = _count_noise_at(n, p, epsilon, delta, quantile, grid)
  in_range = (1.0 + discrete_grid.SCALE_MARGIN) * sigma <= discrete_noise.MAX_SCALE - 1
  return (1.0 - quantile) * n >= INFORMATIVE_RATIO * sigma and in_range


def _count_noise_at(n: int, p: int, epsilon: float, delta: float | None, quantile: float, grid: Any) -> float:
  n = _validate.check_int("n", n, low=2)
  _validate.check_number("quantile", quantile, low=0.0, high=1.0, low_open=True, high_open=True)
  return count_noise(p, epsilon, 1.0 / n**2 if delta is None else delta, grid=grid)


def min_informative_n(p: int, epsilon: float, delta: float | None = None, *,
                      quantile: float = scales.DEFAULT_QUANTILE, grid: Any = scales.GRID) -> int:
  """The smallest `n` with `(1 - q) n >= INFORMATIVE_RATIO * sigma` (`delta = 1/n^2` if None):
  where [`scales_informative`][dpgcd_jax.privacy.scales_budget.scales_informative] holds when `sigma`
  is inside the sampler's range (a condition on `p` and the budget that no `n` changes much)."""
  informative = lambda n: (1.0 - quantile) * n >= INFORMATIVE_RATIO * _count_noise_at(n, p, epsilon, delta,
                                                                                       quantile, grid)
  lo, hi = 1, 2
  while not informative(hi):
    lo, hi = hi, hi * 2
    if hi > 2**62:
      raise ValueError(f"Expected a budget that is informative at some n, got epsilon={epsilon!r}.")
  while hi - lo > max(1, hi // 1000):  # 0.1% precision is enough
    mid = (lo + hi) // 2
    if informative(mid):
      hi = mid
    else:
      lo = mid
  return hi
