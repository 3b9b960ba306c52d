"""Private hyperparameter tuning: repeat a private run a random number of times, keep the best.

Papernot & Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022. One
repetition `Q` draws a candidate at random from a public grid, trains it privately and
releases a private score; the protocol runs `K` independent repetitions, `K` random and
independent of the data, and outputs ONLY the repetition with the best score (its candidate,
model and noisy score; `K` and every other repetition stay hidden). With `Q`
`(lambda, eps(lambda))`-RDP at every order, the protocol is RDP with

* `K` truncated negative binomial `TNB(eta, gamma)` (`P(K = k) ~ C(k + eta - 1, k)
  (1 - gamma)^k`, `k >= 1`; `eta = 0` logarithmic, `eta = 1` geometric), their Theorem 2:

    $$
    \\varepsilon'(\\lambda) = \\varepsilon(\\lambda) + (1 + \\eta) \\min_{\\hat\\lambda \\ge 1}
    \\Big[\\Big(1 - \\frac1{\\hat\\lambda}\\Big)\\varepsilon(\\hat\\lambda)
    + \\frac{\\log(1/\\gamma)}{\\hat\\lambda}\\Big] + \\frac{\\log \\mathbb E[K]}{\\lambda - 1}
    $$

    ([`repeat_and_select_rdp`][dpgcd_jax.privacy.tuning.repeat_and_select_rdp]);

* `K` Poisson with mean `m` (`shape = inf`, accounting only), their Theorem 6: with `Q`
  `(eps_hat, delta_hat)`-DP for `eps_hat = log(1 + 1 / (lambda - 1))`,
  `eps'(lambda) = eps(lambda) + m delta_hat + log(m) / (lambda - 1)`.
  [`repeat_and_select`][dpgcd_jax.privacy.tuning.repeat_and_select]
  does not run it: `K = 0` has positive probability and then nothing can be returned.

Both bounds hold at every order; Renyi divergence is non-decreasing in the order, so the
envelope `min_{mu >= lambda} eps'(mu)` is taken. [`RepeatAndSelect`][dpgcd_jax.privacy.tuning.RepeatAndSelect] is the
ledger event
of the whole protocol; it composes with other events through the RDP route (the only route
that applies). One repetition may be given as several ledgers (`inner` a tuple): its RDP
curve is bounded by their pointwise maximum, which covers a candidate drawn at random (Renyi
divergence is jointly quasi-convex, so a mixture with public weights is bounded by its worst
component) and a training / validation split fixed before the data is seen (one record lives
in exactly one part: parallel composition). Delta slack of a repetition counts `E[K]` times
(union bound over the runs). `dp_accounting`'s `RepeatAndSelectDpEvent` gives the same
curve on its own orders (checked in the tests).

Each candidate's score must itself be computed privately inside `Q` (e.g. a noisy validation
score with its own event in the repetition's ledger).

Examples:
  >>> from dpgcd_jax.privacy import Gaussian, Ledger
  >>> one_run = Ledger.of(("update", Gaussian(8.0), 10))
  >>> tuned = repeat_and_select_ledger(one_run, mean=4.0, shape=1.0)
  >>> round(one_run.epsilon(1e-6), 2), round(tuned.epsilon(1e-6), 2)
  (1.74, 3.15)

Calibrated by [`dpgcd_jax.solvers.budget.search_scale`][] (the one path from a budget to a
run) for the estimators [`DPGCDClassifierCV`][dpgcd_jax.estimators.DPGCDClassifierCV] /
[`DPGCDRegressorCV`][dpgcd_jax.estimators.DPGCDRegressorCV] and the experiments' end-to-end private column.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax.privacy import _rdp
from dpgcd_jax.privacy import events as ev
from dpgcd_jax.privacy import ledger as ledger_lib

DEFAULT_SHAPE = 1.0


def _check_mean_shape(mean: float, shape: float, *, allow_poisson: bool = True) -> tuple[float, float]:
  _validate.check_number("mean", mean, low=1.0)
  _validate.check_number("shape", shape, low=0.0, allow_inf=allow_poisson)
  return float(mean), float(shape)


def tnb_mean(gamma: float, shape: float) -> float:
  """`E[K]` of the truncated negative binomial `TNB(shape, gamma)` (`shape = 0`: logarithmic)."""
  if gamma >= 1.0:
    return 1.0
  if shape == 0.0:
    return (1.0 / gamma - 1.0) / math.log(1.0 / gamma)
  if shape == 1.0:
    return 1.0 / gamma
  return shape * (1.0 / gamma - 1.0) / -math.expm1(shape * math.log(gamma))


@functools.lru_cache(maxsize=256)
def tnb_gamma(mean: float, shape: float) -> float:
  """The `gamma` of `TNB(shape, gamma)` with `E[K] = mean`, on the conservative side.

  `E[K]` decreases in `gamma`; bisection keeps the smaller end (`E[K] >= mean`, relative
  precision 1e-12), which only increases the `log(1 / gamma)` term of the bound.
  """
  mean, shape = _check_mean_shape(mean, shape, allow_poisson=False)
  if shape == 1.0 or mean == 1.0:
    return 1.0 / mean
  lo, hi = 0.0, min(1.0, 2.0 * (shape + 1.0) / mean)
  while hi > lo * (1.0 + 1e-12) and hi - lo > 1e-300:
    mid = 0.5 * (lo + hi)
    if tnb_mean(mid, shape) >= mean:
      lo = mid
    else:
      hi = mid
  return lo


def sample_repetitions(rng: np.random.Generator, mean: float, shape: float) -> int:
  """Draws `K ~ TNB(shape, gamma)` with `E[K] = mean` (`K >= 1`; host randomness).

  `shape = 0`: logarithmic distribution (NumPy's `logseries`); `shape > 0`: a negative
  binomial conditioned on `K >= 1` by rejection (exact).
  """
  mean, shape = _check_mean_shape(mean, shape, allow_poisson=False)
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
  """RDP of the protocol with `K ~ TNB` from the RDP of one repetition (Theorem 2).

  Args:
    orders: (m,) orders `lambda > 1` (sorted or not).
    rdp: (m,) RDP of one repetition at `orders`.
    mean: `E[K] >= 1`.
    shape: `eta >= 0`, finite.
    hat_orders, hat_rdp: the `lambda_hat` grid of the minimization and the RDP there
      (default: `orders` and `rdp`); `lambda_hat = 1` contributes `(1 + eta) log(1 / gamma)`.

  Returns:
    (m,) RDP of the protocol at `orders`, non-decreasing in the order.
  """
  mean, shape = _check_mean_shape(mean, shape, allow_poisson=False)
  orders, rdp = np.asarray(orders, float), np.asarray(rdp, float)
  if hat_orders is None:
    hat_orders, hat_rdp = orders, rdp
  hat_orders, hat_rdp = np.asarray(hat_orders, float), np.asarray(hat_rdp, float)
  gamma = tnb_gamma(mean, shape)
  log_inv_gamma = -math.log(gamma)
  mean = tnb_mean(gamma, shape)  # >= the requested mean (gamma is on the conservative side)
  with np.errstate(invalid="ignore"):
    hat = np.where(hat_orders == 1.0, 0.0, (1.0 - 1.0 / hat_orders) * hat_rdp) + log_inv_gamma / hat_orders
  c = (1.0 + shape) * float(np.nanmin(hat))
  with np.errstate(divide="ignore"):
    out = np.where(orders > 1.0, rdp + math.log(mean) / (orders - 1.0) + c, np.inf)
  return _envelope(orders, out)


def _poisson_rdp(grid: np.ndarray, r: np.ndarray, mean: float) -> np.ndarray:
  """Theorem 6: `delta_hat` at `eps_hat = log(1 + 1 / (lambda - 1))` by the RDP conversion."""
  with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
    eps_hat = np.log1p(1.0 / (grid - 1.0))
    conv = ((grid[None, :] - 1.0) * (r[None, :] - eps_hat[:, None] + np.log1p(-1.0 / grid[None, :]))
            - np.log(grid[None, :]))
    delta_hat = np.exp(np.minimum(np.nanmin(conv, axis=1), 0.0))
    out = r + mean * delta_hat + math.log(mean) / (grid - 1.0)
  return _envelope(grid, np.where(np.isnan(out), np.inf, out))


def _envelope(orders: np.ndarray, out: np.ndarray) -> np.ndarray:
  """`min_{mu >= lambda} out(mu)`: a bound at a larger order holds at a smaller one."""
  order = np.argsort(orders)
  result = np.empty_like(out)
  result[order] = np.minimum.accumulate(out[order][::-1])[::-1]
  return result


@dataclasses.dataclass(frozen=True)
class RepeatAndSelect(ev.PrivacyEvent):
  """Release the best of `K` repetitions of a private run, `K` random: ONE ledger event.

  Attributes:
    inner: the [`Ledger`][dpgcd_jax.privacy.Ledger] of ONE repetition (training + private scoring of one
      candidate), or a non-empty tuple of ledgers whose pointwise-maximum RDP curve bounds one
      repetition (candidates drawn at random, or mechanisms on disjoint parts of the data).
    mean: `E[K] >= 1`.
    shape: 0 (logarithmic), 1 (geometric, the default), any `eta > 0` (truncated negative
      binomial) or `inf` (Poisson).
  """

  inner: Any
  mean: float
  shape: float = DEFAULT_SHAPE

  def __post_init__(self):
    parts = self.inner if isinstance(self.inner, tuple) else (self.inner,)
    if not parts or not all(isinstance(p, ledger_lib.Ledger) for p in parts):
      raise ValueError(f"Expected inner to be a Ledger or a non-empty tuple of Ledgers, got "
                       f"inner={self.inner!r}.")
    mean, shape = _check_mean_shape(self.mean, self.shape)
    object.__setattr__(self, "mean", mean)
    object.__setattr__(self, "shape", shape)

  @property
  def parts(self) -> tuple[ledger_lib.Ledger, ...]:
    """The ledgers bounding one repetition (`(inner,)` for a single ledger)."""
    return self.inner if isinstance(self.inner, tuple) else (self.inner,)

  @property
  def expected_runs(self) -> float:
    """`E[K]` of the distribution actually drawn (the truncated negative binomial's, `>= mean`)."""
    return self.mean if math.isinf(self.shape) else tnb_mean(tnb_gamma(self.mean, self.shape), self.shape)

  @property
  def slack(self) -> float:
    return self.expected_runs * max(p.slack for p in self.parts)

  @property
  def total_variation(self) -> float:
    """`E[K]` times the total variation of one repetition's sampler draws, summed over its parts:
    the draws of all `K` repetitions deviate with probability at most `E[K] sum_i TV_i` (a union
    bound over the draws, `K` drawn apart from the data), which the outer ledger charges like its
    own draws. The sum, not the largest part: parts on disjoint rows (a run and its score) all
    draw, whereas their privacy losses compose in parallel (`slack` and the routes take the
    largest); for alternative parts the sum is an upper bound."""
    return self.expected_runs * sum(p.total_variation for p in self.parts)

  def describe(self) -> str:
    kind = {0.0: "logarithmic", 1.0: "geometric", math.inf: "Poisson"}.get(
        self.shape, f"truncated negative binomial, shape {self.shape:g}")
    runs = " | ".join("; ".join(f"{e.count} x {e.event.describe()}" for e in p) for p in self.parts)
    return f"RepeatAndSelect(mean={self.mean:g}, {kind}, parts={len(self.parts)}; per run: {runs})"

  def repetition_rdp(self, orders: np.ndarray) -> np.ndarray:
    """RDP of one repetition: the pointwise maximum over the parts."""
    curves = []
    for part in self.parts:
      total = np.zeros(np.shape(orders))
      for event, count in part.aggregated():
        total = total + count * event.rdp(orders)
      curves.append(total)
    return np.max(curves, axis=0)

  def rdp(self, orders):
    orders = np.asarray(orders, dtype=float)
    grid = np.union1d(_rdp.ALPHA_GRID, orders[orders > 1.0])
    r = self.repetition_rdp(grid)
    if math.isinf(self.shape):
      out = _poisson_rdp(grid, r, self.mean)
    else:
      out = repeat_and_select_rdp(grid, r, self.mean, self.shape, hat_orders=np.concatenate([[1.0], grid]),
                                  hat_rdp=np.concatenate([[0.0], r]))
    i = np.minimum(np.searchsorted(grid, orders), grid.size - 1)
    return np.where(orders > 1.0, out[i], np.inf)


def repeat_and_select_ledger(inner: Any, *, mean: float, shape: float = DEFAULT_SHAPE,
                             label: str = "hyperparameter search") -> ledger_lib.Ledger:
  """The ledger of a private selection: one [`RepeatAndSelect`][dpgcd_jax.privacy.tuning.RepeatAndSelect] entry."""
  return ledger_lib.Ledger.of((label, RepeatAndSelect(inner, mean, shape), 1))


def repeat_and_select(rng: np.random.Generator, num_candidates: int,
                      run: Callable[[int, int], list[tuple[float, Any]]], *, mean: float,
                      shape: float = DEFAULT_SHAPE) -> tuple[int, float, Any]:
  """Runs the protocol: `K ~ TNB`, `K` candidates uniformly at random, the best one kept.

  Args:
    rng: host randomness for `K` and the candidates (never released).
    num_candidates: size of the public grid.
    run: `run(candidate, count) -> [(noisy_score, output), ...]`, `count` independent
      private repetitions of one candidate (repetitions of a candidate are batched).
    mean, shape: of the distribution of `K` (finite shape).

  Returns:
    `(candidate, noisy_score, output)` of the repetition with the highest noisy score (ties,
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
  if best is None:  # k >= 1 (sample_repetitions), so some candidate ran at least once
    raise RuntimeError("no repetition was run")
  return best
