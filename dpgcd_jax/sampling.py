"""Poisson subsampling for DP-SGD: exact in law up to 2^-64 per step, O(batch) work per step.

Poisson sampling includes every example independently with probability `q`; the
privacy amplification of DP-SGD (the Poisson-subsampled Gaussian mechanism accounted by
`dpgcd_jax.privacy.calibrate_sgd`) assumes exactly this law, so the sampler must
realize it, not an approximation whose error is not accounted.

Method: the positions of the included examples are the partial sums of i.i.d. gaps
`G ~ Geometric(q)`, `P(G = k) = q (1 - q)^(k - 1)`. With `rho = 1 - q` and
`F(k) = 1 - rho^k`, each gap is drawn by inversion of a 128-bit uniform `U` against
thresholds rounded to multiples of 2^-128, with the tail `G > K` lumped into one outcome
(`K = n`, or smaller when `rho^K` is below 2^-129):

$$
G' = 1 + \\#\\{k \\le K : T_k \\le U\\}, \\qquad T_k = 2^{128} - \\mathrm{round}(2^{128} \\rho^k).
$$

The inversion is tabulated as a Walker alias table over `2^m >= K + 1` buckets, built
on the host in exact integer arithmetic: the top `m` bits of `U` choose a bucket, the
remaining `128 - m` bits are compared with the bucket's split point. Only the first
32-bit word of `U` is drawn on the fast path; the three lower words are drawn (from an
independent key) only when the first word ties with a split point, probability at most
`2^-(32 - m)` per gap. Lower words are independent of the first, so drawing them lazily
does not change the law: `G'` is a fixed function of a 128-bit uniform. Why not the
alternatives: Bernoulli trials from integer bits cost `n` random words per step (on a
CPU threefry costs about 15 ns a word: 150 us per step at `n = 10^4`, ten times an
optax DP-SGD step); float inversion (`jax.random.geometric`) has 2^23 levels, so at
`q = 0.01` no gap exceeds 1587 and inclusion is not independent.

Static shapes without truncation: the fast path draws `capacity` gaps (a batch near
`n q`, see [`default_capacity`][dpgcd_jax.sampling.default_capacity]). When all of them land inside the data set (the
batch may hold more, probability `PoissonPlan.overflow_probability`), the sample is
completed exactly: by memorylessness, the examples after the last drawn position form a
Poisson(`q`) sample of their own, drawn as independent Bernoulli trials, each a 128-bit
uniform against `round(q 2^128)`. No batch is ever truncated.

Privacy argument (what the accountant must add). Let `tau` be the total-variation
distance between `G'` and `min(G, n + 1)` and `tau_b = |q - round(q 2^128) 2^-128|`
(0 whenever `q` has at most 128 fractional bits, e.g. every float `q >= 2^-75`). Couple
the exact and the implemented gap sequences index by index. The sample is determined by
the gaps it consumes, at most `|S| + 1` of them; whether gap `j` is consumed depends
only on gaps `< j`, so the samples differ with probability at most
`E[|S| + 1] tau + n tau_b`:

$$
\\eta = (n q + 1)\\, \\tau + n\\, \\tau_b, \\qquad
\\tau \\le \\sum_{k=1}^{n} |F'(k) - F(k)| \\quad (\\text{computed on the host}).
$$

A T-step run is then within `T eta` of the ideal one in total variation, so an
(epsilon, delta)-DP guarantee for exact Poisson sampling gives
(epsilon, delta + (1 + e^epsilon) T eta) for this sampler.
[`step_total_variation`][dpgcd_jax.sampling.step_total_variation]
and [`total_variation_slack`][dpgcd_jax.sampling.total_variation_slack] compute `eta` and `T eta`; for every `n < 2^30`
and every `q`, `eta <= MAX_STEP_TOTAL_VARIATION = 2^-64` (`tau <= n 2^-127`), so
`(1 + e^epsilon) T 2^-64` is a valid, negligible slack. As everywhere in JAX, the
argument assumes the PRNG's bits are independent and uniform.

Cost: the alias table has `2^m` entries (20 bytes each) and is built on the host in
O(min(n, 89 / q)) Python integer operations (measured on a busy 2-core CPU: 0.07 s at
`n = 10^4`, 0.7 s at `10^5`, 7 s at `10^6`), once per `(n, q)` (cached). Per
step: one PRNG call for `capacity` words, two table lookups per gap, a cumulative sum,
then `per_example` on the smallest of `PoissonPlan.tiers` rows
that holds the sample (`lax.switch`); the exact completion costs O(n) and runs with
probability `overflow_probability` (at most `1 / n` by default).

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

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax._poisson_plan import MAX_STEP_TOTAL_VARIATION
from dpgcd_jax._poisson_plan import PoissonPlan
from dpgcd_jax._poisson_plan import default_capacity
from dpgcd_jax._poisson_plan import plan
from dpgcd_jax._poisson_plan import step_total_variation
from dpgcd_jax._poisson_plan import total_variation_slack

Array = jax.Array
__all__ = ["Batch", "MAX_STEP_TOTAL_VARIATION", "PoissonPlan", "complete_mask", "default_capacity", "plan",
           "sample", "sample_gaps", "sample_mask", "step_total_variation", "subsample_sum",
           "total_variation_slack"]

class Batch(NamedTuple):
  """The fast-path part of a Poisson sample (fixed shape `(capacity,)`).

  Attributes:
    indices: (capacity,) int32 increasing sampled indices; padding entries hold 0.
    valid: (capacity,) bool, True for sampled entries (a prefix).
    overflow: () bool, True when every entry is valid and the sample may hold more
      examples after `indices[-1]`; [`sample_mask`][dpgcd_jax.sampling.sample_mask] then completes it exactly.
  """

  indices: Array
  valid: Array
  overflow: Array


# --------------------------------------------------------------------------- device side


def _less_128(x: Array, y: Array) -> Array:
  """Lexicographic `x < y` over the last axis (uint32 words, most significant first)."""
  less = x[..., -1] < y[..., -1]
  for i in range(x.shape[-1] - 2, -1, -1):
    less = (x[..., i] < y[..., i]) | ((x[..., i] == y[..., i]) & less)
  return less


def _draw(key: Array, num: int) -> tuple[Array, Array]:
  """`num` first words of the gaps' uniforms, and a key for the rare branches.

  One PRNG call per step: the data of `jax.random.split(key, m)`, `m` fresh keys of
  `w` uniform 32-bit words each (`w = 2` for threefry), hold the `num` words and one
  more key (used only through `fold_in`). Splitting keeps every word a counter-mode
  output yields, and `m <= 16` lets XLA unroll the CPU threefry loop.
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
  """Outcomes `o = G' - 1` of the 128-bit uniforms whose first words are `u`.

  The three lower words are drawn only when some first word ties with its bucket's split
  point (probability at most `capacity 2^-(32 - m)`); they are independent of `u`.
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
  """`num` i.i.d. gaps `G'` (int32, in [1, K + 1]) of the sampler (for tests and audits).

  Their law is within `p.gap_total_variation` of `min(G, n + 1)`, `G ~ Geometric(q)`;
  any gap above `n` ends a sample.
  """
  if p.full:
    raise ValueError(f"Expected a plan with sampling_rate < 1, got sampling_rate={p.sampling_rate}.")
  if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
    raise ValueError(f"Expected num to be an int >= 1, got num={num!r}.")
  u, extra = _draw(key, num)
  return _exact_outcomes(u, extra, p) + 1


def _batch(outcomes: Array, n: int) -> Batch:
  positions = jnp.cumsum(outcomes + 1) - 1
  if outcomes.shape[0] * (n + 1) < 2**31:  # no int32 overflow: positions increase  # noqa: SIM108
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
  """The fast part of a Poisson(`q`) sample: the first `capacity` sampled indices.

  When `overflow` is False the batch is the whole sample. Otherwise the sample also holds
  the examples after `indices[-1]` that [`complete_mask`][dpgcd_jax.sampling.complete_mask] adds;
  [`subsample_sum`][dpgcd_jax.sampling.subsample_sum]
  handles both cases under `jit`.

  Args:
    key: a JAX PRNG key (used once: pass a fresh key every step).
    p: a [`PoissonPlan`][dpgcd_jax.sampling.PoissonPlan] from [`plan`][dpgcd_jax.sampling.plan] (static).

  Returns:
    A [`Batch`][dpgcd_jax.sampling.Batch].
  """
  if p.full:
    return _full_batch(p.num_examples)
  u, extra = _draw(key, p.capacity)
  return _batch(_exact_outcomes(u, extra, p), p.num_examples)


def _batch_mask(n: int, batch: Batch) -> Array:
  return jnp.zeros(n, bool).at[jnp.where(batch.valid, batch.indices, n)].set(True, mode="drop")


def _complete(extra: Array, p: PoissonPlan, batch: Batch) -> Array:
  """The batch's mask plus the exact tail after an overflow (`p.full` is False)."""
  n = p.num_examples
  mask = _batch_mask(n, batch)
  u = jax.random.bits(jax.random.fold_in(extra, 1), (n, 4), jnp.uint32)
  bernoulli = _less_128(u, jnp.broadcast_to(jnp.asarray(p.inclusion_words), (n, 4)))
  tail = bernoulli & (jnp.arange(n) > batch.indices[-1]) & batch.overflow
  return mask | tail


def complete_mask(key: Array, p: PoissonPlan, batch: Batch) -> Array:
  """The whole sample as an (n,) bool mask: `batch = sample(key, p)` plus its exact tail.

  On overflow the examples after `batch.indices[-1]` form a Poisson(`q`) sample of
  their own (memorylessness); each is included when a 128-bit uniform is below
  `round(q 2^128)`. O(n) work.
  """
  if p.full:
    return _batch_mask(p.num_examples, batch)
  return _complete(_draw(key, p.capacity)[1], p, batch)


def sample_mask(key: Array, p: PoissonPlan) -> Array:
  """The Poisson(`q`) sample of `key` as an (n,) bool mask (O(n); for tests and audits).

  The same sample as [`sample`][dpgcd_jax.sampling.sample] and [`subsample_sum`][dpgcd_jax.sampling.subsample_sum] for
  the same key and plan.
  """
  return complete_mask(key, p, sample(key, p))


def _masked_sum(values: Array, mask: Array) -> Array:
  mask = mask.reshape(mask.shape + (1,) * (values.ndim - 1))
  return jnp.sum(jnp.where(mask, values, jnp.zeros((), values.dtype)), axis=0)


def subsample_sum(key: Array, p: PoissonPlan, per_example: Callable[[Array], Array], *,
                  with_size: bool = False,
                  reduce: Callable[[Array, Array], Array] | None = None) -> Array | tuple[Array, Array]:
  """`sum_{i in S} per_example(i)` over a Poisson(`q`) sample `S` (fixed shapes).

  `per_example` maps an int32 index vector of shape (k,) to values of shape (k, ...).
  One `lax.switch` picks the branch: the smallest of `p.tiers` that holds the sample
  (`per_example` on that many rows), or, when a first word ties (the lower words are
  then drawn) or on overflow (probability `p.overflow_probability`), the exact path,
  which evaluates `per_example` on `capacity` rows, or on all `n` examples with the
  exact mask after an overflow. Entries outside the sample are dropped with `where`
  (never multiplied by 0), so a non-finite value of an unsampled example cannot reach the
  sum. The sample is the one [`sample_mask`][dpgcd_jax.sampling.sample_mask] returns for the same key. Under
  `jax.vmap` over keys the switch becomes a select and every branch runs (O(n) per
  step); vmapping over hyperparameters with one key keeps the real switch.

  Args:
    key: a JAX PRNG key (used once).
    p: a [`PoissonPlan`][dpgcd_jax.sampling.PoissonPlan] (static).
    per_example: the per-example function (traced once per branch).
    with_size: also return `|S|` (an int32 scalar, counted in the branch taken).
    reduce: `reduce(values, mask)` replaces the masked sum over the first axis (default:
      `sum(where(mask, values, 0), axis=0)` in `values`' dtype). It must drop the entries
      whose `mask` is False with `where` and return the same shape and dtype for every
      row count (1 to `n`). DP-SGD passes an exact float64 sum of integers.

  Returns:
    The sum, of shape `per_example(indices).shape[1:]`; with `with_size`, `(sum, |S|)`.
  """
  def summed(indices: Array, mask: Array) -> tuple[Array, Array]:
    return (reduce or _masked_sum)(per_example(indices), mask), jnp.sum(mask, dtype=jnp.int32)

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
