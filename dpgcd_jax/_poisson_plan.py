"""Host side of [`dpgcd_jax.sampling`][]: the exact tables of the Poisson sampler, built once per (n, q).

See [`dpgcd_jax.sampling`][] for the sampler, why it is exact and its total-variation bound.
This module computes the tables (gap thresholds in exact rational arithmetic, an alias table
over the gap outcomes) and the bounds that the ledger adds as a delta slack. The public names
are re-exported by [`dpgcd_jax.sampling`][].
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from scipy import stats

MAX_STEP_TOTAL_VARIATION = 2.0**-64
_PRECISION_BITS = 128  # U has four 32-bit words
_GUARD_BITS = 64  # extra fixed-point bits when computing rho^k
_MAX_TABLE_BITS = 22  # alias tables up to 4M buckets (n up to about 4 million)
_MAX_EXAMPLES = 2**30  # positions stay below 2^31 before the first one past n


@dataclasses.dataclass(frozen=True, eq=False)
class PoissonPlan:
  """Host-side tables of a Poisson(`q`) sampler over `n` examples (static, cached).

  Build it with [`plan`][dpgcd_jax._poisson_plan.plan]. Arrays are read-only NumPy arrays, turned into constants
  when traced.

  Attributes:
    num_examples: `n`.
    sampling_rate: `q` in (0, 1]; 1 means every example, every step.
    capacity: number of gaps drawn on the fast path (the largest static batch).
    tiers: increasing static batch sizes, the last one `capacity`: a sample of `K`
      examples gathers the smallest tier `>= K` rows. The first is the 90% quantile of
      `Binomial(n, q)`, so the same small branch runs nine steps in ten (finer tiers
      measured no faster: alternating between compiled branches costs what fewer rows save).
    table_bits: `m`; the alias table has `2^m` buckets.
    split_hi: (2^m,) uint32, top `32 - m` bits of each bucket's split point.
    split_lo: (2^m, 3) uint32, its lower 96 bits.
    alias: (2^m,) int32, the outcome of a bucket's upper part (outcome `o` = gap `o + 1`).
    inclusion_words: (4,) uint32, `round(q 2^128)` in 32-bit words (most significant first).
    gap_total_variation: bound on `tau`, the total-variation distance of one gap.
    inclusion_total_variation: `tau_b = |q - round(q 2^128) 2^-128|`.
    overflow_probability: `P(Binomial(n, q) > capacity)`, how often the exact O(n)
      completion runs.
  """

  num_examples: int
  sampling_rate: float
  capacity: int
  tiers: tuple[int, ...]
  table_bits: int
  split_hi: np.ndarray
  split_lo: np.ndarray
  alias: np.ndarray
  inclusion_words: np.ndarray
  gap_total_variation: float
  inclusion_total_variation: float
  overflow_probability: float

  @property
  def full(self) -> bool:
    """True when `q = 1`: the batch is the whole data set, with no randomness."""
    return self.sampling_rate >= 1.0

  @property
  def step_total_variation(self) -> float:
    """`eta = (n q + 1) tau + n tau_b`: distance of one step's sample to exact Poisson(q)."""
    n, q = self.num_examples, self.sampling_rate
    return (n * q + 1.0) * self.gap_total_variation + n * self.inclusion_total_variation




def _check_inputs(num_examples: int, sampling_rate: float) -> tuple[int, float]:
  if isinstance(num_examples, bool) or not isinstance(num_examples, (int, np.integer)):
    raise ValueError(f"Expected num_examples to be a Python int, got num_examples={num_examples!r}.")
  if not 1 <= num_examples < _MAX_EXAMPLES:
    raise ValueError(f"Expected num_examples in [1, 2^30), got num_examples={num_examples}.")
  try:
    q = float(sampling_rate)
  except (TypeError, ValueError) as e:
    raise ValueError(f"Expected sampling_rate to be a number, got sampling_rate={sampling_rate!r}.") from e
  if not 0.0 < q <= 1.0:  # also rejects NaN
    raise ValueError(f"Expected sampling_rate in (0, 1], got sampling_rate={sampling_rate!r}.")
  return int(num_examples), q


def default_capacity(num_examples: int, sampling_rate: float) -> int:
  """Smallest `c` with `P(Binomial(n, q) > c) <= 1 / n` (at least 1, at most `n`).

  The exact completion costs O(n) work, so this keeps its expected cost per step near one
  example's, while the fast batch stays within a few standard deviations of `n q`.
  """
  n, q = _check_inputs(num_examples, sampling_rate)
  if q >= 1.0:
    return n
  c = int(stats.binom.isf(1.0 / n, n, q))
  while c < n and stats.binom.sf(c, n, q) > 1.0 / n:  # isf may be one off either way
    c += 1
  while c > 1 and stats.binom.sf(c - 1, n, q) <= 1.0 / n:
    c -= 1
  return min(max(c, 1), n)


def _gap_thresholds(n: int, q: float) -> tuple[list[int], Fraction]:
  """`D_k = round(2^128 rho^k)` for `k = 1..K` and a bound on `tau` (exact integers).

  `rho = 1 - q` exactly (`q` is a binary fraction `a / 2^e`). `R_k = floor(R_{k-1}
  (2^e - a) / 2^e)` with `R_0 = 2^S`, `S = 192`, satisfies `0 <= 2^S rho^k - R_k < k`.
  The table stops at `K = n` or before the first `k` with `D_k = 0`.
  """
  a, d = Fraction(q).as_integer_ratio()
  e = d.bit_length() - 1  # d = 2^e
  shift = _PRECISION_BITS + _GUARD_BITS
  num, r = d - a, 1 << shift
  half = 1 << (_GUARD_BITS - 1)
  D: list[int] = []
  err = 0  # sum_k |D_k 2^64 - R_k| + k, in units of 2^-192
  for k in range(1, n + 1):
    r = (r * num) >> e
    dk = (r + half) >> _GUARD_BITS
    if dk == 0:
      break
    D.append(dk)
    err += abs((dk << _GUARD_BITS) - r) + k
  tau = Fraction(err, 1 << shift)
  K = len(D)
  if K < n:  # F'(k) = 1 for k > K: add sum_{k > K} rho^k <= rho^(K+1) / q
    rho_next = Fraction(r + K + 1, 1 << shift)
    tau += rho_next / Fraction(q)
  return D, tau


def _alias_table(D: list[int]) -> tuple[int, list[int], list[int]]:
  """Exact Walker/Vose alias table of the outcomes `0..K` (gap `o + 1`).

  Outcome masses in units of 2^-128: `w_o = D_o - D_{o+1}` (`D_0 = 2^128`) for
  `o < K` and `w_K = D_K`; they sum to 2^128 exactly. Every bucket holds
  `C = 2^(128 - m)` units: `split[b]` for outcome `b`, the rest for `alias[b]`.
  """
  one = 1 << _PRECISION_BITS
  K = len(D)
  bounds = [one] + D
  mass = [bounds[o] - bounds[o + 1] for o in range(K)] + [D[-1] if K else one]
  m = max(1, (len(mass) - 1).bit_length())
  if m > _MAX_TABLE_BITS:
    raise ValueError(
        f"Expected an alias table of at most 2^{_MAX_TABLE_BITS} buckets; num_examples and "
        f"sampling_rate need 2^{m} (reduce num_examples or raise sampling_rate).")
  size = 1 << m
  cap = 1 << (_PRECISION_BITS - m)
  mass += [0] * (size - len(mass))
  split = [cap] * size
  alias = list(range(size))
  small = [o for o in range(size) if mass[o] < cap]
  large = [o for o in range(size) if mass[o] >= cap]
  while small and large:
    s, l = small.pop(), large[-1]
    split[s], alias[s] = mass[s], l
    mass[l] -= cap - mass[s]
    if mass[l] < cap:
      large.pop()
      small.append(l)
  for o in small + large:  # exact arithmetic: what is left is full
    if mass[o] != cap:
      raise AssertionError("alias table construction lost mass")
  return m, split, alias


def _words(x: int, count: int) -> list[int]:
  """`x` as `count` 32-bit words, most significant first."""
  return [(x >> (32 * (count - 1 - i))) & 0xFFFFFFFF for i in range(count)]


class _Tables(NamedTuple):
  table_bits: int
  split_hi: np.ndarray
  split_lo: np.ndarray
  alias: np.ndarray
  inclusion_words: np.ndarray
  gap_total_variation: float
  inclusion_total_variation: float


@functools.lru_cache(maxsize=16)
def _tables(n: int, q: float) -> _Tables:
  """The capacity-independent part of a plan (the expensive one, cached)."""
  one = 1 << _PRECISION_BITS
  a, d = Fraction(q).as_integer_ratio()
  inclusion = (a * one + d // 2) // d  # round(q 2^128)
  tau_b = abs(Fraction(a, d) - Fraction(inclusion, one))
  words = np.array(_words(min(inclusion, one - 1), 4), np.uint32)
  if q >= 1.0:
    return _Tables(1, np.zeros(2, np.uint32), np.zeros((2, 3), np.uint32), np.zeros(2, np.int32), words,
                   0.0, 0.0)
  D, tau = _gap_thresholds(n, q)
  m, split, alias = _alias_table(D)
  low_bits = _PRECISION_BITS - 32
  split_hi = np.array([s >> low_bits for s in split], np.uint32)
  split_lo = np.array([_words(s & ((1 << low_bits) - 1), 3) for s in split], np.uint32).reshape(-1, 3)
  # Round the bounds up so that float rounding never understates them.
  gap_tv = math.nextafter(float(tau), math.inf)
  incl_tv = math.nextafter(float(tau_b), math.inf) if tau_b else 0.0
  return _Tables(m, split_hi, split_lo, np.array(alias, np.int32), words, gap_tv, incl_tv)


_TIER_QUANTILES = (0.9,)


def _tiers(n: int, q: float, capacity: int) -> tuple[int, ...]:
  """Batch sizes of the fast path: quantiles of `Binomial(n, q)` below `capacity`, then it."""
  if q >= 1.0:
    return (capacity,)
  sizes = {max(1, int(stats.binom.ppf(level, n, q))) for level in _TIER_QUANTILES}
  return tuple(sorted(c for c in sizes if c < capacity)) + (capacity,)


@functools.lru_cache(maxsize=64)
def _plan(n: int, q: float, capacity: int) -> PoissonPlan:
  t = _tables(n, q)
  overflow = 0.0 if q >= 1.0 else float(stats.binom.sf(capacity, n, q))
  result = _freeze(PoissonPlan(n, q, capacity, _tiers(n, q, capacity), t.table_bits, t.split_hi,
                               t.split_lo, t.alias, t.inclusion_words, t.gap_total_variation,
                               t.inclusion_total_variation, overflow))
  if result.step_total_variation > MAX_STEP_TOTAL_VARIATION:
    raise AssertionError(f"sampler total variation {result.step_total_variation} exceeds 2^-64")
  return result


def _freeze(p: PoissonPlan) -> PoissonPlan:
  for field in ("split_hi", "split_lo", "alias", "inclusion_words"):
    getattr(p, field).setflags(write=False)
  return p


def plan(num_examples: int, sampling_rate: float, capacity: int | None = None) -> PoissonPlan:
  """Builds (or fetches from a cache) the sampler of Poisson(`q`) over `n` examples.

  Args:
    num_examples: `n`, 1 <= n < 2^30.
    sampling_rate: `q` in (0, 1] (a Python float; static).
    capacity: gaps drawn on the fast path, 1 <= capacity <= n; default
      [`default_capacity`][dpgcd_jax._poisson_plan.default_capacity]. It changes the cost, never the law of the sample
      (it does
      change which sample a given key produces).

  Returns:
    A [`PoissonPlan`][dpgcd_jax._poisson_plan.PoissonPlan].

  Raises:
    ValueError: naming the argument, for values outside these ranges.
  """
  n, q = _check_inputs(num_examples, sampling_rate)
  if capacity is None:
    capacity = default_capacity(n, q)
  if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
    raise ValueError(f"Expected capacity to be a Python int, got capacity={capacity!r}.")
  if not 1 <= capacity <= n:
    raise ValueError(f"Expected capacity in [1, num_examples={n}], got capacity={capacity}.")
  return _plan(n, q, n if q >= 1.0 else int(capacity))


def step_total_variation(num_examples: int, sampling_rate: float) -> float:
  """`eta`: the total-variation distance of one step's sample to exact Poisson(`q`).

  `eta = (n q + 1) tau + n tau_b <= MAX_STEP_TOTAL_VARIATION = 2^-64`; independent of
  the capacity (see the module docstring for the argument).
  """
  n, q = _check_inputs(num_examples, sampling_rate)
  t = _tables(n, q)
  return (n * q + 1.0) * t.gap_total_variation + n * t.inclusion_total_variation


def total_variation_slack(num_examples: int, sampling_rate: float, steps: int) -> float:
  """`T eta`: the total-variation distance of `T` steps' samples to exact Poisson sampling.

  An (epsilon, delta)-DP accounting of exact Poisson sampling holds for this sampler with
  `delta + (1 + e^epsilon) total_variation_slack(n, q, T)`.

  Raises:
    ValueError: when `steps` is not an int >= 0.
  """
  if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
    raise ValueError(f"Expected steps to be an int >= 0, got steps={steps!r}.")
  eta = step_total_variation(num_examples, sampling_rate)
  return math.nextafter(steps * eta, math.inf) if eta and steps else 0.0
