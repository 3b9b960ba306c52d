"""Private hyperparameter selection: repeat a private run a random number of times, keep the best.

Papernot & Steinke (ICLR 2022, "Hyperparameter Tuning with Renyi Differential Privacy"): run a
private mechanism ``Q`` (one training run on a randomly drawn candidate, scored privately)
``K`` times, ``K`` random and independent of the data, and release only the best run. With
``Q`` ``(lambda, eps(lambda))``-RDP for every order, the selection ``A`` is RDP with

* truncated negative binomial ``K`` (shape ``eta >= 0``, ``P(K = k) ~ C(k + eta - 1, k)
  (1 - gamma)^k``, ``k >= 1``; ``eta = 0`` logarithmic, ``eta = 1`` geometric), their
  Theorem 2: ``eps_A(lambda) = eps(lambda) + (1 + eta) min_mu [(1 - 1/mu) eps(mu) +
  log(1 / gamma) / mu] + log(E[K]) / (lambda - 1)``;
* Poisson ``K`` (mean ``m``; ``shape = inf``), their Theorem 6: with ``Q``
  ``(eps_hat, delta_hat)``-DP for ``eps_hat = log(1 + 1 / (lambda - 1))``,
  ``eps_A(lambda) = eps(lambda) + m delta_hat + log(m) / (lambda - 1)``.

Both bounds hold at every order; Renyi divergence is non-decreasing in the order, so the
envelope ``min_{mu >= lambda} eps_A(mu)`` is taken. The event composes with others in a
:class:`~dpgcd_jax.privacy.ledger.Ledger` through the RDP route (the only route that applies).
``gamma`` is solved from ``E[K]`` by bisection, keeping the smaller (conservative) value.
Delta slack of the inner ledger counts ``E[K]`` times (union bound over the runs).

Each candidate's score must itself be computed privately inside ``Q`` (e.g. a noisy validation
accuracy with its own event in the inner ledger); the released output is the best candidate.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Hashable

import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax.privacy import _rdp
from dpgcd_jax.privacy import events as ev
from dpgcd_jax.privacy import ledger as ledger_lib


def tnb_mean(gamma: float, shape: float) -> float:
  """``E[K]`` of the truncated negative binomial (``shape = 0``: logarithmic)."""
  if shape == 0.0:
    return (1.0 / gamma - 1.0) / math.log(1.0 / gamma) if gamma < 1.0 else 1.0
  if shape == 1.0:
    return 1.0 / gamma
  return shape * (1.0 / gamma - 1.0) / -math.expm1(shape * math.log(gamma)) if gamma < 1.0 \
      else 1.0


def tnb_gamma(mean: float, shape: float) -> float:
  """The ``gamma`` of the truncated negative binomial with ``E[K] = mean`` (conservative).

  ``E[K]`` decreases in ``gamma``; bisection keeps the smaller end (``E[K] >= mean``), which
  only increases the ``log(1 / gamma)`` term of the bound.
  """
  if shape == 1.0:
    return 1.0 / mean
  lo, hi = 0.0, min(1.0, 2.0 * (shape + 1.0) / mean)
  while hi > lo * (1.0 + 1e-12) and hi - lo > 1e-300:
    mid = 0.5 * (lo + hi)
    if tnb_mean(mid, shape) >= mean:
      lo = mid
    else:
      hi = mid
  return lo


@dataclasses.dataclass(frozen=True)
class RepeatAndSelect(ev.PrivacyEvent):
  """Release the best of ``K`` runs of the ``inner`` ledger's mechanism, ``K`` random.

  Attributes:
    inner: the :class:`Ledger` of ONE run (training + private scoring of one candidate).
    mean: ``E[K] >= 1``.
    shape: 0 (logarithmic), 1 (geometric), any ``eta > 0`` (truncated negative binomial) or
      ``inf`` (Poisson).
  """

  inner: ledger_lib.Ledger
  mean: float
  shape: float

  def __post_init__(self):
    if not isinstance(self.inner, ledger_lib.Ledger):
      raise ValueError(f"Expected inner to be a Ledger, got inner={self.inner!r}.")
    _validate.check_number("mean", self.mean, low=1.0)
    _validate.check_number("shape", self.shape, low=0.0, allow_inf=True)
    object.__setattr__(self, "mean", float(self.mean))
    object.__setattr__(self, "shape", float(self.shape))

  @property
  def slack(self) -> float:
    return self.mean * self.inner.slack

  def describe(self) -> str:
    kind = {0.0: "logarithmic", 1.0: "geometric", math.inf: "Poisson"}.get(
        self.shape, f"truncated negative binomial, shape {self.shape:g}")
    runs = "; ".join(f"{e.count} x {e.event.describe()}" for e in self.inner)
    return f"RepeatAndSelect(mean={self.mean:g}, {kind}; per run: {runs})"

  def _inner_curve(self, a: np.ndarray) -> np.ndarray:
    total = np.zeros(np.shape(a))
    for event, count in self.inner.aggregated():
      total = total + count * event.rdp(a)
    return total

  def rdp(self, orders):
    orders = np.asarray(orders, dtype=float)
    grid = np.union1d(_rdp.ALPHA_GRID, orders)
    r = self._inner_curve(grid)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
      if math.isinf(self.shape):
        # delta_hat at eps_hat = log(1 + 1 / (lambda - 1)) by the RDP conversion.
        eps_hat = np.log1p(1.0 / (grid - 1.0))
        conv = ((grid[None, :] - 1.0) * (r[None, :] - eps_hat[:, None]
                                         + np.log1p(-1.0 / grid[None, :]))
                - np.log(grid[None, :]))
        delta_hat = np.exp(np.minimum(np.nanmin(conv, axis=1), 0.0))
        out = r + self.mean * delta_hat + math.log(self.mean) / (grid - 1.0)
      else:
        gamma = tnb_gamma(self.mean, self.shape)
        c = (1.0 + self.shape) * np.nanmin((1.0 - 1.0 / grid) * r - math.log(gamma) / grid)
        out = r + c + math.log(self.mean) / (grid - 1.0)
    out = np.where(np.isnan(out), np.inf, out)
    envelope = np.minimum.accumulate(out[::-1])[::-1]
    return envelope[np.searchsorted(grid, orders)]


def repeat_and_select_ledger(inner: ledger_lib.Ledger, *, mean: float, shape: float,
                             label: str = "hyperparameter search") -> ledger_lib.Ledger:
  """The ledger of a private selection: one :class:`RepeatAndSelect` entry."""
  return ledger_lib.Ledger.of((label, RepeatAndSelect(inner, mean, shape), 1))


def calibrate_repeat_and_select(
    inner_factory: Callable[[float], ledger_lib.Ledger],
    epsilon: float,
    delta: float,
    *,
    mean: float,
    shape: float,
    key: Hashable | None = None,
    guess: float | None = None,
) -> tuple[float, ledger_lib.PrivacyReport]:
  """The smallest scale of ONE run such that the whole selection is (epsilon, delta)-DP.

  Args:
    inner_factory: ``scale -> Ledger`` of one run, monotone (more scale, more private).
    epsilon: total target epsilon > 0 (selection included).
    delta: total target delta in (0, 1).
    mean: ``E[K]``, the expected number of runs.
    shape: distribution of ``K`` (see :class:`RepeatAndSelect`).
    key: hashable description of ``inner_factory`` for the cache.
    guess: a starting scale.

  Returns:
    ``(scale, report)`` as :func:`dpgcd_jax.privacy.calibrate`.
  """
  factory = lambda k: repeat_and_select_ledger(inner_factory(k), mean=mean, shape=shape)
  return ledger_lib.calibrate(
      factory, epsilon, delta, guess=guess,
      key=None if key is None else ("repeat_and_select", key, float(mean), float(shape)))
