"""Private hyperparameter selection: repeat a private run a random number of times, keep the best.

Papernot & Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022.
One repetition ``Q`` draws a candidate uniformly at random from a public grid, trains it
privately and releases a private score; the protocol runs ``K`` independent repetitions,
with ``K`` drawn from a truncated negative binomial distribution ``TNB(eta, gamma)``
(:func:`sample_repetitions`), and outputs ONLY the repetition with the best score (its
candidate, model and noisy score; ``K`` and every other repetition stay hidden).

.. math::

   P(K = k) \\propto \\binom{k + \\eta - 1}{k} (1 - \\gamma)^k \\quad (k \\ge 1), \\qquad
   \\eta = 0:\\ P(K = k) \\propto (1 - \\gamma)^k / k \\ \\text{(logarithmic)}, \\quad
   \\eta = 1: \\text{geometric}.

Privacy (Papernot & Steinke 2022, Thm 2): if ``Q`` is ``(lambda, eps(lambda))``-RDP at every
order, the protocol is ``(lambda, eps'(lambda))``-RDP with, for any ``lambda_hat >= 1``,

.. math::

   \\varepsilon'(\\lambda) = \\varepsilon(\\lambda) + (1 + \\eta)\\Big(1 - \\frac1{\\hat\\lambda}\\Big)
   \\varepsilon(\\hat\\lambda) + \\frac{(1 + \\eta)\\log(1/\\gamma)}{\\hat\\lambda}
   + \\frac{\\log \\mathbb E[K]}{\\lambda - 1},

minimized over ``lambda_hat`` (:func:`repeat_and_select_rdp`), then made non-decreasing in
``lambda`` (a bound at a larger order holds at a smaller one). :class:`RepeatAndSelect` is
the ledger event of the whole protocol: the RDP curve of ``Q`` is bounded by the pointwise
maximum of the curves of its ``parts``, which covers both a candidate drawn at random (Renyi
divergence is jointly quasi-convex, so a mixture with public weights is bounded by its worst
component) and a training / validation split fixed before the data is seen (one record lives
in exactly one part: parallel composition). The composed total is converted to
``(epsilon, delta)`` by the ledger's RDP route; ``dp_accounting``'s ``RepeatAndSelectDpEvent``
gives the same curve on its own orders (checked in the tests).

The Poisson distribution of the paper (Thm 6) is not offered: it draws ``K = 0`` with
positive probability, and the protocol then has nothing to return.

Examples:
  >>> from dpgcd_jax.privacy import Gaussian, Ledger
  >>> one_run = Ledger.of(("update", Gaussian(8.0), 10))
  >>> tuned = Ledger.of(("selection", RepeatAndSelect((one_run,), mean=4.0), 1))
  >>> round(one_run.epsilon(1e-6), 2), round(tuned.epsilon(1e-6), 2)
  (1.74, 3.15)

The estimators :class:`~dpgcd_jax.estimators.DPGCDClassifierCV` and
:class:`~dpgcd_jax.estimators.DPGCDRegressorCV` run this protocol over DP-GCD candidates.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax.privacy import events as ev
from dpgcd_jax.privacy import ledger as ledger_lib

# lambda_hat grid of the minimization: 1 (where (1 - 1/lambda_hat) eps = 0) and a dense log grid.
HAT_ORDERS = np.concatenate([[1.0], 1.0 + np.logspace(-4, 6, 2000)])
DEFAULT_SHAPE = 1.0


def _check_mean_shape(mean: float, shape: float) -> tuple[float, float]:
  _validate.check_number("mean_repetitions", mean, low=1.0)
  _validate.check_number("repetition_shape", shape, low=0.0)
  return float(mean), float(shape)


def tnb_mean(gamma: float, shape: float) -> float:
  """``E[K]`` of ``TNB(shape, gamma)``, ``gamma`` in (0, 1] (1 gives ``K = 1``)."""
  if gamma >= 1.0:
    return 1.0
  log_gamma = math.log(gamma)
  if shape == 0.0:
    return (1.0 - gamma) / (gamma * -log_gamma)
  return shape * (1.0 - gamma) / (gamma * -math.expm1(shape * log_gamma))


@functools.lru_cache(maxsize=256)
def tnb_gamma(mean: float, shape: float) -> float:
  """The ``gamma`` of ``TNB(shape, gamma)`` whose mean is ``mean`` (bisection in ``log gamma``).

  Args:
    mean: ``E[K] >= 1``.
    shape: ``eta >= 0``, finite.

  Returns:
    ``gamma`` in (0, 1], relative precision 1e-12 (the mean is decreasing in ``gamma``).
  """
  mean, shape = _check_mean_shape(mean, shape)
  if mean == 1.0:
    return 1.0
  lo, hi = -1.0, 0.0  # log gamma
  while tnb_mean(math.exp(lo), shape) < mean:
    lo *= 2.0
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    if tnb_mean(math.exp(mid), shape) < mean:
      hi = mid
    else:
      lo = mid
    if hi - lo < 1e-13:
      break
  return math.exp(0.5 * (lo + hi))


def sample_repetitions(rng: np.random.Generator, mean: float, shape: float) -> int:
  """Draws ``K ~ TNB(shape, gamma)`` with ``E[K] = mean`` exactly (``K >= 1``).

  ``shape = 0``: logarithmic distribution (NumPy's ``logseries``); ``shape > 0``: a negative
  binomial conditioned on ``K >= 1`` by rejection (exact).
  """
  mean, shape = _check_mean_shape(mean, shape)
  gamma = tnb_gamma(mean, shape)
  if gamma >= 1.0:
    return 1
  if shape == 0.0:
    return int(rng.logseries(1.0 - gamma))
  while True:
    k = int(rng.negative_binomial(shape, gamma))
    if k >= 1:
      return k


def repeat_and_select_rdp(orders: np.ndarray, rdp: np.ndarray, mean: float, shape: float, *,
                          hat_orders: np.ndarray | None = None,
                          hat_rdp: np.ndarray | None = None) -> np.ndarray:
  """RDP of the repeat-and-select protocol from the RDP of one repetition (module docstring).

  Args:
    orders: (m,) orders ``lambda > 1`` (sorted or not).
    rdp: (m,) RDP of one repetition at ``orders``.
    mean: ``E[K] >= 1``.
    shape: ``eta >= 0``, finite.
    hat_orders, hat_rdp: the ``lambda_hat`` grid of the minimization and the RDP there
      (default: ``orders`` and ``rdp``); ``lambda_hat = 1`` contributes
      ``(1 + eta) log(1 / gamma)``.

  Returns:
    (m,) RDP of the protocol at ``orders``, non-decreasing in the order.
  """
  mean, shape = _check_mean_shape(mean, shape)
  orders, rdp = np.asarray(orders, float), np.asarray(rdp, float)
  if hat_orders is None:
    hat_orders, hat_rdp = orders, rdp
  hat_orders, hat_rdp = np.asarray(hat_orders, float), np.asarray(hat_rdp, float)
  log_inv_gamma = -math.log(tnb_gamma(mean, shape))
  with np.errstate(invalid="ignore"):
    hat = np.where(hat_orders == 1.0, 0.0, (1.0 - 1.0 / hat_orders) * hat_rdp)
    hat = hat + log_inv_gamma / hat_orders
  c = (1.0 + shape) * float(np.nanmin(hat))
  with np.errstate(divide="ignore"):
    out = np.where(orders > 1.0, rdp + math.log(mean) / (orders - 1.0) + c, np.inf)
  order = np.argsort(orders)
  envelope = np.minimum.accumulate(out[order][::-1])[::-1]
  result = np.empty_like(out)
  result[order] = envelope
  return result


def _ledger_rdp(ledger: ledger_lib.Ledger, orders: np.ndarray) -> np.ndarray:
  total = np.zeros(np.shape(orders))
  for event, count in ledger.aggregated():
    total = total + count * event.rdp(orders)
  return total


@dataclasses.dataclass(frozen=True)
class RepeatAndSelect(ev.PrivacyEvent):
  """The repeat-and-select protocol (Papernot & Steinke 2022, Thm 2) as ONE ledger event.

  Attributes:
    parts: ledgers whose pointwise-maximum RDP curve bounds one repetition (candidates drawn
      at random, or mechanisms on disjoint parts of the data; see the module docstring).
    mean: ``E[K] >= 1``, the mean number of repetitions.
    shape: ``eta >= 0`` of the truncated negative binomial (0 logarithmic, 1 geometric).
  """

  parts: tuple[ledger_lib.Ledger, ...]
  mean: float
  shape: float = DEFAULT_SHAPE

  def __post_init__(self):
    parts = tuple(self.parts)
    if not parts or not all(isinstance(p, ledger_lib.Ledger) for p in parts):
      raise ValueError(f"Expected parts to be a non-empty tuple of Ledgers, got parts={self.parts!r}.")
    if any(isinstance(e.event, ev.DeltaSlack) and e.event.delta > 0 and e.count
           for e in itertools.chain(*parts)):
      raise ValueError("Expected parts without DeltaSlack entries (their delta has no RDP curve).")
    mean, shape = _check_mean_shape(self.mean, self.shape)
    object.__setattr__(self, "parts", parts)
    object.__setattr__(self, "mean", mean)
    object.__setattr__(self, "shape", shape)

  def repetition_rdp(self, orders: np.ndarray) -> np.ndarray:
    """RDP of one repetition: the pointwise maximum over the parts."""
    return np.max([_ledger_rdp(p, orders) for p in self.parts], axis=0)

  def rdp(self, orders):
    orders = np.asarray(orders, float)
    grid = np.union1d(orders[orders > 1.0], HAT_ORDERS[1:])
    hat = np.concatenate([[0.0], self.repetition_rdp(HAT_ORDERS[1:])])
    out = repeat_and_select_rdp(grid, self.repetition_rdp(grid), self.mean, self.shape,
                                hat_orders=HAT_ORDERS, hat_rdp=hat)
    i = np.searchsorted(grid, orders)
    return np.where(orders > 1.0, out[np.minimum(i, grid.size - 1)], np.inf)

  def describe(self) -> str:
    return (f"RepeatAndSelect(mean={self.mean:.6g}, shape={self.shape:.6g}, "
            f"parts={len(self.parts)})")


def check_param_grid(param_grid: Any, allowed: Sequence[str]) -> list[dict[str, Any]]:
  """Validates a candidate grid and lists its candidates (scikit-learn's ``ParameterGrid`` order).

  Args:
    param_grid: a dict ``name -> non-empty list of values`` or a non-empty list of such dicts.
    allowed: the hyperparameter names that may be searched.

  Raises:
    ValueError: naming ``param_grid`` for an empty grid, an unknown name, a value that is not a
      non-empty list.
  """
  grids = [param_grid] if isinstance(param_grid, Mapping) else param_grid
  if isinstance(grids, (str, bytes)) or not isinstance(grids, Sequence) or not grids:
    raise ValueError(f"Expected param_grid to be a non-empty dict of lists or a non-empty list of "
                     f"such dicts, got param_grid={param_grid!r}.")
  candidates = []
  for grid in grids:
    if not isinstance(grid, Mapping) or not grid:
      raise ValueError(f"Expected every grid in param_grid to be a non-empty dict, got {grid!r}.")
    for name, values in grid.items():
      if name not in allowed:
        raise ValueError(f"Expected param_grid keys in {tuple(allowed)}, got {name!r}.")
      if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)) or \
          len(values) == 0:
        raise ValueError(f"Expected param_grid[{name!r}] to be a non-empty list, got {values!r}.")
    names = sorted(grid)
    for values in itertools.product(*(list(grid[k]) for k in names)):
      candidates.append(dict(zip(names, values)))
  return candidates


def repeat_and_select(rng: np.random.Generator, num_candidates: int,
                      run: Callable[[int, int], list[tuple[float, Any]]], *, mean: float,
                      shape: float = DEFAULT_SHAPE) -> tuple[int, float, Any]:
  """Runs the protocol: ``K ~ TNB``, ``K`` candidates uniformly at random, the best one kept.

  Args:
    rng: host randomness for ``K`` and the candidates (never released).
    num_candidates: size of the public grid.
    run: ``run(candidate, count) -> [(noisy_score, output), ...]``, ``count`` independent
      private repetitions of one candidate (repetitions of a candidate are batched).
    mean, shape: of the distribution of ``K``.

  Returns:
    ``(candidate, noisy_score, output)`` of the repetition with the highest noisy score (ties,
    of probability 0 with continuous noise: the lowest candidate index). Only this may be
    released.
  """
  k = sample_repetitions(rng, mean, shape)
  counts = np.bincount(rng.integers(num_candidates, size=k), minlength=num_candidates)
  best = None
  for candidate in np.flatnonzero(counts):
    for score, output in run(int(candidate), int(counts[candidate])):
      if best is None or score > best[1]:
        best = (int(candidate), float(score), output)
  return best
