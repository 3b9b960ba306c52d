"""Poisson subsampling for DP-SGD: exact in law up to 2^-64 per step, O(batch) work per step.

Poisson sampling includes every example independently with probability ``q``; the
privacy amplification of DP-SGD (the Poisson-subsampled Gaussian mechanism accounted by
:func:`dpgcd_jax.privacy.calibrate_sgd`) assumes exactly this law, so the sampler must
realize it, not an approximation whose error is not accounted.

Method: the positions of the included examples are the partial sums of i.i.d. gaps
``G ~ Geometric(q)``, ``P(G = k) = q (1 - q)^(k - 1)``. With ``rho = 1 - q`` and
``F(k) = 1 - rho^k``, each gap is drawn by inversion of a 128-bit uniform ``U`` against
thresholds rounded to multiples of 2^-128, with the tail ``G > K`` lumped into one outcome
(``K = n``, or smaller when ``rho^K`` is below 2^-129):

.. math::

   G' = 1 + \\#\\{k \\le K : T_k \\le U\\}, \\qquad T_k = 2^{128} - \\mathrm{round}(2^{128} \\rho^k).

The inversion is tabulated as a Walker alias table over ``2^m >= K + 1`` buckets, built
on the host in exact integer arithmetic: the top ``m`` bits of ``U`` choose a bucket, the
remaining ``128 - m`` bits are compared with the bucket's split point. Only the first
32-bit word of ``U`` is drawn on the fast path; the three lower words are drawn (from an
independent key) only when the first word ties with a split point, probability at most
``2^-(32 - m)`` per gap. Lower words are independent of the first, so drawing them lazily
does not change the law: ``G'`` is a fixed function of a 128-bit uniform. Why not the
alternatives: Bernoulli trials from integer bits cost ``n`` random words per step (on a
CPU threefry costs about 15 ns a word: 150 us per step at ``n = 10^4``, ten times an
optax DP-SGD step); float inversion (``jax.random.geometric``) has 2^23 levels, so at
``q = 0.01`` no gap exceeds 1587 and inclusion is not independent.

Static shapes without truncation: the fast path draws ``capacity`` gaps (a batch near
``n q``, see :func:`default_capacity`). When all of them land inside the data set (the
batch may hold more, probability :attr:`PoissonPlan.overflow_probability`), the sample is
completed exactly: by memorylessness, the examples after the last drawn position form a
Poisson(``q``) sample of their own, drawn as independent Bernoulli trials, each a 128-bit
uniform against ``round(q 2^128)``. No batch is ever truncated.

Privacy argument (what the accountant must add). Let ``tau`` be the total-variation
distance between ``G'`` and ``min(G, n + 1)`` and ``tau_b = |q - round(q 2^128) 2^-128|``
(0 whenever ``q`` has at most 128 fractional bits, e.g. every float ``q >= 2^-75``). Couple
the exact and the implemented gap sequences index by index. The sample is determined by
the gaps it consumes, at most ``|S| + 1`` of them; whether gap ``j`` is consumed depends
only on gaps ``< j``, so the samples differ with probability at most
``E[|S| + 1] tau + n tau_b``:

.. math::

   \\eta = (n q + 1)\\, \\tau + n\\, \\tau_b, \\qquad
   \\tau \\le \\sum_{k=1}^{n} |F'(k) - F(k)| \\quad (\\text{computed on the host}).

A T-step run is then within ``T eta`` of the ideal one in total variation, so an
(epsilon, delta)-DP guarantee for exact Poisson sampling gives
(epsilon, delta + (1 + e^epsilon) T eta) for this sampler. :func:`step_total_variation`
and :func:`total_variation_slack` compute ``eta`` and ``T eta``; for every ``n < 2^30``
and every ``q``, ``eta <= MAX_STEP_TOTAL_VARIATION = 2^-64`` (``tau <= n 2^-127``), so
``(1 + e^epsilon) T 2^-64`` is a valid, negligible slack. As everywhere in JAX, the
argument assumes the PRNG's bits are independent and uniform.

Cost: the alias table has ``2^m`` entries (20 bytes each) and is built on the host in
O(min(n, 89 / q)) Python integer operations (measured on a busy 2-core CPU: 0.07 s at
``n = 10^4``, 0.7 s at ``10^5``, 7 s at ``10^6``), once per ``(n, q)`` (cached). Per
step: one PRNG call for ``capacity`` words, two table lookups per gap, a cumulative sum,
then ``per_example`` on the smallest of :attr:`PoissonPlan.tiers` rows
that holds the sample (``lax.switch``); the exact completion costs O(n) and runs with
probability ``overflow_probability`` (at most ``1 / n`` by default).

Example:

  >>> import jax
  >>> from dpgcd_jax import sampling
  >>> p = sampling.plan(10_000, 0.001)
  >>> p.capacity, p.tiers
  (24, (14, 24))
  >>> mask = sampling.sample_mask(jax.random.key(0), p)  # (10000,) bool, about 10 True
  >>> total = sampling.subsample_sum(jax.random.key(0), p, lambda idx: idx[:, None] * 1.0)
  >>> sampling.total_variation_slack(10_000, 0.001, steps=10_000) < 1e-20
  True
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

Array = jax.Array

MAX_STEP_TOTAL_VARIATION = 2.0**-64
_PRECISION_BITS = 128  # U has four 32-bit words
_GUARD_BITS = 64  # extra fixed-point bits when computing rho^k
_MAX_TABLE_BITS = 22  # alias tables up to 4M buckets (n up to about 4 million)
_MAX_EXAMPLES = 2**30  # positions stay below 2^31 before the first one past n


@dataclasses.dataclass(frozen=True, eq=False)
class PoissonPlan:
  """Host-side tables of a Poisson(``q``) sampler over ``n`` examples (static, cached).

  Build it with :func:`plan`. Arrays are read-only NumPy arrays, turned into constants
  when traced.

  Attributes:
    num_examples: ``n``.
    sampling_rate: ``q`` in (0, 1]; 1 means every example, every step.
    capacity: number of gaps drawn on the fast path (the largest static batch).
    tiers: increasing static batch sizes, the last one ``capacity``: a sample of ``K``
      examples gathers the smallest tier ``>= K`` rows. The first is the 90% quantile of
      ``Binomial(n, q)``, so the same small branch runs nine steps in ten (finer tiers
      measured no faster: alternating between compiled branches costs what fewer rows save).
    table_bits: ``m``; the alias table has ``2^m`` buckets.
    split_hi: (2^m,) uint32, top ``32 - m`` bits of each bucket's split point.
    split_lo: (2^m, 3) uint32, its lower 96 bits.
    alias: (2^m,) int32, the outcome of a bucket's upper part (outcome ``o`` = gap ``o + 1``).
    inclusion_words: (4,) uint32, ``round(q 2^128)`` in 32-bit words (most significant first).
    gap_total_variation: bound on ``tau``, the total-variation distance of one gap.
    inclusion_total_variation: ``tau_b = |q - round(q 2^128) 2^-128|``.
    overflow_probability: ``P(Binomial(n, q) > capacity)``, how often the exact O(n)
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
    """True when ``q = 1``: the batch is the whole data set, with no randomness."""
    return self.sampling_rate >= 1.0

  @property
  def step_total_variation(self) -> float:
    """``eta = (n q + 1) tau + n tau_b``: distance of one step's sample to exact Poisson(q)."""
    n, q = self.num_examples, self.sampling_rate
    return (n * q + 1.0) * self.gap_total_variation + n * self.inclusion_total_variation


class Batch(NamedTuple):
  """The fast-path part of a Poisson sample (fixed shape ``(capacity,)``).

  Attributes:
    indices: (capacity,) int32 increasing sampled indices; padding entries hold 0.
    valid: (capacity,) bool, True for sampled entries (a prefix).
    overflow: () bool, True when every entry is valid and the sample may hold more
      examples after ``indices[-1]``; :func:`sample_mask` then completes it exactly.
  """

  indices: Array
  valid: Array
  overflow: Array


# ----------------------------------------------------------------------------- host side


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
  """Smallest ``c`` with ``P(Binomial(n, q) > c) <= 1 / n`` (at least 1, at most ``n``).

  The exact completion costs O(n) work, so this keeps its expected cost per step near one
  example's, while the fast batch stays within a few standard deviations of ``n q``.
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
  """``D_k = round(2^128 rho^k)`` for ``k = 1..K`` and a bound on ``tau`` (exact integers).

  ``rho = 1 - q`` exactly (``q`` is a binary fraction ``a / 2^e``). ``R_k = floor(R_{k-1}
  (2^e - a) / 2^e)`` with ``R_0 = 2^S``, ``S = 192``, satisfies ``0 <= 2^S rho^k - R_k < k``.
  The table stops at ``K = n`` or before the first ``k`` with ``D_k = 0``.
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
  """Exact Walker/Vose alias table of the outcomes ``0..K`` (gap ``o + 1``).

  Outcome masses in units of 2^-128: ``w_o = D_o - D_{o+1}`` (``D_0 = 2^128``) for
  ``o < K`` and ``w_K = D_K``; they sum to 2^128 exactly. Every bucket holds
  ``C = 2^(128 - m)`` units: ``split[b]`` for outcome ``b``, the rest for ``alias[b]``.
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
  """``x`` as ``count`` 32-bit words, most significant first."""
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
  """Batch sizes of the fast path: quantiles of ``Binomial(n, q)`` below ``capacity``, then it."""
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
  """Builds (or fetches from a cache) the sampler of Poisson(``q``) over ``n`` examples.

  Args:
    num_examples: ``n``, 1 <= n < 2^30.
    sampling_rate: ``q`` in (0, 1] (a Python float; static).
    capacity: gaps drawn on the fast path, 1 <= capacity <= n; default
      :func:`default_capacity`. It changes the cost, never the law of the sample (it does
      change which sample a given key produces).

  Returns:
    A :class:`PoissonPlan`.

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
  """``eta``: the total-variation distance of one step's sample to exact Poisson(``q``).

  ``eta = (n q + 1) tau + n tau_b <= MAX_STEP_TOTAL_VARIATION = 2^-64``; independent of
  the capacity (see the module docstring for the argument).
  """
  n, q = _check_inputs(num_examples, sampling_rate)
  t = _tables(n, q)
  return (n * q + 1.0) * t.gap_total_variation + n * t.inclusion_total_variation


def total_variation_slack(num_examples: int, sampling_rate: float, steps: int) -> float:
  """``T eta``: the total-variation distance of ``T`` steps' samples to exact Poisson sampling.

  An (epsilon, delta)-DP accounting of exact Poisson sampling holds for this sampler with
  ``delta + (1 + e^epsilon) total_variation_slack(n, q, T)``.

  Raises:
    ValueError: when ``steps`` is not an int >= 0.
  """
  if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
    raise ValueError(f"Expected steps to be an int >= 0, got steps={steps!r}.")
  eta = step_total_variation(num_examples, sampling_rate)
  return math.nextafter(steps * eta, math.inf) if eta and steps else 0.0


# --------------------------------------------------------------------------- device side


def _less_128(x: Array, y: Array) -> Array:
  """Lexicographic ``x < y`` over the last axis (uint32 words, most significant first)."""
  less = x[..., -1] < y[..., -1]
  for i in range(x.shape[-1] - 2, -1, -1):
    less = (x[..., i] < y[..., i]) | ((x[..., i] == y[..., i]) & less)
  return less


def _draw(key: Array, num: int) -> tuple[Array, Array]:
  """``num`` first words of the gaps' uniforms, and a key for the rare branches.

  One PRNG call per step: the data of ``jax.random.split(key, m)``, ``m`` fresh keys of
  ``w`` uniform 32-bit words each (``w = 2`` for threefry), hold the ``num`` words and one
  more key (used only through ``fold_in``). Splitting keeps every word a counter-mode
  output yields, and ``m <= 16`` lets XLA unroll the CPU threefry loop.
  """
  typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
  key_words = jax.random.key_data(key).shape[-1] if typed else key.shape[-1]
  keys = jax.random.split(key, -(-num // key_words) + 1)
  words = (jax.random.key_data(keys) if typed else keys).reshape(-1)
  return words[:num], keys[-1]


def _fast_outcomes(u: Array, p: PoissonPlan) -> tuple[Array, Array, Array, Array, Array]:
  """Alias lookup on the first word: outcomes, and which of them tie with their split point."""
  m = p.table_bits
  bucket = (u >> (32 - m)).astype(jnp.int32)
  rest = u & jnp.uint32((1 << (32 - m)) - 1)
  split_hi = jnp.asarray(p.split_hi)[bucket]
  alias = jnp.asarray(p.alias)[bucket]
  return jnp.where(rest < split_hi, bucket, alias), rest == split_hi, bucket, rest, split_hi


def _exact_outcomes(u: Array, extra: Array, p: PoissonPlan) -> Array:
  """Outcomes ``o = G' - 1`` of the 128-bit uniforms whose first words are ``u``.

  The three lower words are drawn only when some first word ties with its bucket's split
  point (probability at most ``capacity 2^-(32 - m)``); they are independent of ``u``.
  """
  fast, tie, bucket, rest, split_hi = _fast_outcomes(u, p)

  def exact():
    lo = jax.random.bits(jax.random.fold_in(extra, 0), u.shape + (3,), jnp.uint32)
    mine = jnp.concatenate([rest[:, None], lo], axis=1)
    bound = jnp.concatenate([split_hi[:, None], jnp.asarray(p.split_lo)[bucket]], axis=1)
    alias = jnp.asarray(p.alias)[bucket]
    return jnp.where(_less_128(mine, bound), bucket, alias)

  return jax.lax.cond(jnp.any(tie), exact, lambda: fast)


def sample_gaps(key: Array, p: PoissonPlan, num: int) -> Array:
  """``num`` i.i.d. gaps ``G'`` (int32, in [1, K + 1]) of the sampler (for tests and audits).

  Their law is within ``p.gap_total_variation`` of ``min(G, n + 1)``, ``G ~ Geometric(q)``;
  any gap above ``n`` ends a sample.
  """
  if p.full:
    raise ValueError(f"Expected a plan with sampling_rate < 1, got sampling_rate={p.sampling_rate}.")
  if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
    raise ValueError(f"Expected num to be an int >= 1, got num={num!r}.")
  u, extra = _draw(key, num)
  return _exact_outcomes(u, extra, p) + 1


def _batch(outcomes: Array, n: int) -> Batch:
  positions = jnp.cumsum(outcomes + 1) - 1
  if outcomes.shape[0] * (n + 1) < 2**31:  # no int32 overflow: positions increase
    valid = positions < n
  else:
    # Every gap is at most n + 1 and n < 2^30: the first position past n is below 2^31,
    # so an int32 overflow further on cannot bring an entry back (validity is a prefix).
    valid = jnp.cumsum(positions >= n) == 0
  indices = jnp.where(valid, positions, 0).astype(jnp.int32)
  return Batch(indices, valid, valid[-1])


def _full_batch(n: int) -> Batch:
  return Batch(jnp.arange(n, dtype=jnp.int32), jnp.ones(n, bool), jnp.array(False))


def sample(key: Array, p: PoissonPlan) -> Batch:
  """The fast part of a Poisson(``q``) sample: the first ``capacity`` sampled indices.

  When ``overflow`` is False the batch is the whole sample. Otherwise the sample also holds
  the examples after ``indices[-1]`` that :func:`complete_mask` adds; :func:`subsample_sum`
  handles both cases under ``jit``.

  Args:
    key: a JAX PRNG key (used once: pass a fresh key every step).
    p: a :class:`PoissonPlan` from :func:`plan` (static).

  Returns:
    A :class:`Batch`.
  """
  if p.full:
    return _full_batch(p.num_examples)
  u, extra = _draw(key, p.capacity)
  return _batch(_exact_outcomes(u, extra, p), p.num_examples)


def _complete(extra: Array, p: PoissonPlan, batch: Batch) -> Array:
  n = p.num_examples
  mask = jnp.zeros(n, bool).at[jnp.where(batch.valid, batch.indices, n)].set(True, mode="drop")
  if p.full:
    return mask
  u = jax.random.bits(jax.random.fold_in(extra, 1), (n, 4), jnp.uint32)
  bernoulli = _less_128(u, jnp.broadcast_to(jnp.asarray(p.inclusion_words), (n, 4)))
  tail = bernoulli & (jnp.arange(n) > batch.indices[-1]) & batch.overflow
  return mask | tail


def complete_mask(key: Array, p: PoissonPlan, batch: Batch) -> Array:
  """The whole sample as an (n,) bool mask: ``batch = sample(key, p)`` plus its exact tail.

  On overflow the examples after ``batch.indices[-1]`` form a Poisson(``q``) sample of
  their own (memorylessness); each is included when a 128-bit uniform is below
  ``round(q 2^128)``. O(n) work.
  """
  return _complete(None if p.full else _draw(key, p.capacity)[1], p, batch)


def sample_mask(key: Array, p: PoissonPlan) -> Array:
  """The Poisson(``q``) sample of ``key`` as an (n,) bool mask (O(n); for tests and audits).

  The same sample as :func:`sample` and :func:`subsample_sum` for the same key and plan.
  """
  return complete_mask(key, p, sample(key, p))


def _masked_sum(values: Array, mask: Array) -> Array:
  mask = mask.reshape(mask.shape + (1,) * (values.ndim - 1))
  return jnp.sum(jnp.where(mask, values, jnp.zeros((), values.dtype)), axis=0)


def subsample_sum(key: Array, p: PoissonPlan, per_example: Callable[[Array], Array], *,
                  with_size: bool = False) -> Array | tuple[Array, Array]:
  """``sum_{i in S} per_example(i)`` over a Poisson(``q``) sample ``S`` (fixed shapes).

  ``per_example`` maps an int32 index vector of shape (k,) to values of shape (k, ...).
  One ``lax.switch`` picks the branch: the smallest of ``p.tiers`` that holds the sample
  (``per_example`` on that many rows), or, when a first word ties (the lower words are
  then drawn) or on overflow (probability ``p.overflow_probability``), the exact path,
  which evaluates ``per_example`` on ``capacity`` rows, or on all ``n`` examples with the
  exact mask after an overflow. Entries outside the sample are dropped with ``where``
  (never multiplied by 0), so a non-finite value of an unsampled example cannot reach the
  sum. The sample is the one :func:`sample_mask` returns for the same key. Under
  ``jax.vmap`` over keys the switch becomes a select and every branch runs (O(n) per
  step); vmapping over hyperparameters with one key keeps the real switch.

  Args:
    key: a JAX PRNG key (used once).
    p: a :class:`PoissonPlan` (static).
    per_example: the per-example function (traced once per branch).
    with_size: also return ``|S|`` (an int32 scalar, counted in the branch taken).

  Returns:
    The sum, of shape ``per_example(indices).shape[1:]``; with ``with_size``, ``(sum, |S|)``.
  """
  def summed(indices: Array, mask: Array) -> tuple[Array, Array]:
    return _masked_sum(per_example(indices), mask), jnp.sum(mask, dtype=jnp.int32)

  def result(total_and_size: tuple[Array, Array]) -> Array | tuple[Array, Array]:
    return total_and_size if with_size else total_and_size[0]

  if p.full:
    batch = _full_batch(p.num_examples)
    return result(summed(batch.indices, batch.valid))
  u, extra = _draw(key, p.capacity)
  fast, tie, *_ = _fast_outcomes(u, p)
  batch = _batch(fast, p.num_examples)

  def first(b: Batch, size: int) -> tuple[Array, Array]:
    return summed(b.indices[:size], b.valid[:size])

  def exact_path():
    exact = _batch(_exact_outcomes(u, extra, p), p.num_examples)

    def complete():
      return summed(jnp.arange(p.num_examples, dtype=jnp.int32), _complete(extra, p, exact))

    return jax.lax.cond(exact.overflow, complete, lambda: first(exact, p.capacity))

  # Tier j holds the sample when entry tiers[j] (0-based) is not valid (validity is a prefix).
  tier = sum(batch.valid[c].astype(jnp.int32) for c in p.tiers[:-1])
  branch = jnp.where(jnp.any(tie) | batch.overflow, len(p.tiers), tier)
  paths = [functools.partial(first, batch, c) for c in p.tiers]
  return result(jax.lax.switch(branch, paths + [exact_path]))
