"""Exact discrete Laplace and discrete Gaussian samplers in JAX.

Why. A float sampler `mean + b * laplace()` cannot output every float, and the set of floats
it CAN output depends on `mean`: Mironov (CCS 2012) showed that an observed output then
identifies the mean, whatever the noise scale. The remedy (Canonne, Kamath & Steinke 2020) is
to release an integer: snap the value to a public grid of step `gran`, add integer noise
drawn exactly, and multiply back. The released float is a function of one integer, so every
float computation after the sampler is post-processing.

Samplers (Canonne, Kamath & Steinke, NeurIPS 2020, Algorithms 1-3), integer arithmetic only:

- `bernoulli_rational`: `Bernoulli(num / den)` as `U < num / den` for a uniform `U`
  drawn as 30-bit words (three base-1024 digits each), compared with the digits of the exact
  long division (int32: remainders `< 2^21`), words drawn lazily until decided (at most 3:
  a tie of 90 bits).
- `bernoulli_exp`: `Bernoulli(exp(-num / den))` (Algorithm 1): the integer part `n`
  by `U < exp(-n)` against a table of the exact 90-bit expansions of `exp(-k / 2)`,
  `k <= 128` (computed on the host with correctly rounded 60-digit decimals); the fractional
  part `gamma` by the series `K = 1, 2, ...` while `Bernoulli(gamma / K)`, `K` odd.
- `discrete_laplace`: `P(Z = z) ∝ exp(-|z| / t)` on the integers, integer `t >= 1`
  (Algorithm 2 with `s = 1`): `U` uniform in `[0, t)` (masked random bits, rejected
  when `>= t`) kept with `Bernoulli(exp(-U / t))`, `V` geometric (`P(V >= v) = e^-v`,
  one uniform against the table), `X = U + t V`, a random sign, `-0` rejected.
- `discrete_gaussian`: `P(Z = z) ∝ exp(-z^2 / (2 t^2))`, integer `t = sigma >= 1`
  (Algorithm 3): `Y` discrete Laplace of scale `t`, kept with
  `Bernoulli(exp(-(|Y| - sigma^2 / t)^2 / (2 sigma^2)))`. Algorithm 3 holds for any Laplace
  scale; taking it equal to the integer `sigma` makes `sigma^2 / t = t` an integer, and the
  exponent `x^2 / (2 t^2)` (`x = |Y| - t = q t + r`) is split into
  `q^2 / 2 + q r / t + r^2 / (2 t^2)`: three exact Bernoulli draws whose integers fit in int32
  (`r^2 / (2 t^2 K) = (r / t) (r / (2 t K))`). Acceptance about `e^-1/2 sqrt(pi / 2) = 0.76`.

Rejection is vectorized: 8 candidate rounds per output at once, in a `lax.while_loop` that
runs one round for the first `N / 8 + 32` outputs still pending per iteration, until every
output has an accepted candidate (at most 32 rounds per output).

What is floating-point: nothing inside the samplers. All randomness is uniform `uint32`
bits from `jax.random.bits`, all arithmetic is int32, the outputs are int32. The only floats
are in the mechanisms around them (`dpgcd_jax.mechanisms`), on the public grid of
`dpgcd_jax.discrete_grid`: the grid step (a power of two built with `ldexp`, so `value / gran`
and `k * gran` are exact), the integer scale `t = floor(multiplier * D) + 1` and the snapping
`round(value / gran)`, where the sensitivity grows by one grid step (`grid_sensitivity` there).
The samplers' closed-form laws, for tests and documentation: `dpgcd_jax.discrete_pmfs`.

Caps, and what happens there (each is a documented deviation or a fail-closed FAILED):

- a comparison of 90 bits that ties: FAILED (probability `2^-90` per Bernoulli draw);
- the series reaching `K = 20`: FAILED (probability `<= 1/20! < 5e-19`);
- `Bernoulli(exp(-gamma))` with `gamma >= 65` (or `q >= 12` in the Gaussian's
  `q^2 / 2`) returns 0: its exact probability of 1 is below `e^-64`; so the discrete
  Gaussian never releases `|z| >= 13 t`;
- the geometric `V` reaching 62: FAILED (probability `2^-90`: the table's 90-bit `exp(-62)`,
  `exp(-63)`, `exp(-64)` are 1, 0, 0 units of `2^-90`, and a tie fails), so the discrete
  Laplace never releases `|z| >= 62 t` (both caps' zero-versus-positive mass at values `D`
  apart is below `e^-60` per release while `D / t <= 2`: tests/privacy/test_float_law.py);
- no accepted candidate among 32 x 8 (acceptance >= 0.24 per candidate): FAILED (< 1e-30).

FAILED is `FAILED` (the smallest int32); the mechanisms turn it into NaN (fail closed), never into a
noiseless release. Total variation per draw: `3.5e-18` (`privacy.events.DRAW_TOTAL_VARIATION`). Couple a sampler with
the exact algorithm (unbounded loops, exact uniforms) on the same bits: they agree unless a cap is hit
in a candidate examined up to the first accepted one, or all `32 x 8 = 256` candidates are rejected. A
discrete Gaussian candidate (a Laplace one is part of it) hits a cap with probability
`c <= (2 + 2^-20) / 20! + 146 x 2^-90 + e^-72 < 8.23e-19`: two series with `gamma <= 1` (the Laplace's
`exp(-u / t)`, the fractional part of `exp(-q r / t)`) and one with `gamma <= 1/2` (`exp(-r^2 / (2 t^2))`)
reaching `K = 20`; at most `2 + 64 + 4 x 20 = 146` comparisons of 90 bits that may tie (`exp(-q^2 / 2)`,
`exp(-n)`, the geometric's 64 thresholds, whose cap lies inside their ties, 20 per series and 20 more
for the product one); `q >= 12` rejecting what the exact algorithm accepts with probability `< e^-72`.
Whether the `j`-th candidate is examined depends on the earlier ones only: a draw deviates with
probability `<= c / a + (1 - a)^256 < 3.43e-18 + 3e-31`, `a >= 0.24` the acceptance of an exact Gaussian
candidate at every `t <= MAX_SCALE` (tests/privacy/test_sampler_deviation.py checks both). So each
draw's law, FAILED included, is within `3.5e-18` of the exact one: `dpgcd_jax.privacy.events.DiscreteDraws`.

Scales: `1 <= t <= MAX_SCALE = 2^15 - 1`; outside, FAILED.

What this does NOT protect: JAX's threefry generator is not a cryptographic generator (and a
reused key replays the noise); timing is not constant (the loops run a random number of
rounds). See docs/secure_noise.md.

References:
  Mironov. On Significance of the Least Significant Bits for Differential Privacy. CCS 2012.
  Canonne, Kamath, Steinke. The Discrete Gaussian for Differential Privacy. NeurIPS 2020.
"""

from __future__ import annotations

import decimal

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

FAILED = np.iinfo(np.int32).min
"""Value returned where a sampler hit one of its caps (probability < 3.5e-18 per draw)."""


MAX_SCALE = 2**15 - 1
"""Largest integer scale `t` of the samplers (every denominator `<= 2 t K < 2^21`)."""

_I32 = jnp.int32
_DIGIT_BITS = 10          # base-1024 digits: r * 1024 < 2^31 for every remainder r < 2^21.
_WORD_DIGITS = 3          # three digits per uniform word: 30 random bits of one uint32.
_WORDS = 3                # 90 bits: an undecided comparison has probability 2^-90.
_WORD_MASK = (1 << (_DIGIT_BITS * _WORD_DIGITS)) - 1
_SERIES = 20              # Algorithm 1's series stops at K = 20: P(reaching it) <= 1/20! < 5e-19.
_TABLE_HALVES = 128       # exp(-k / 2) tabulated for k = 0..128 (exp(-v) for v <= 64).
_CANDIDATES = 8           # rejection rounds drawn at once per output.
_ROUNDS = 32              # batches of candidates before FAILED (acceptance >= 0.24: < 1e-30).


# ----------------------------------------------------------------------------------------
# Exact Bernoulli draws: comparisons of uniform 30-bit words with exact expansions.
# ----------------------------------------------------------------------------------------


def _exp_words(halves: int) -> list[int]:
  """The first 90 bits of `exp(-halves / 2)`, exactly, as three 30-bit words (host side, Python integers).

  `decimal`'s `exp` is correctly rounded at 60 digits; `floor(2^90 exp(-k/2))` is exact
  because the product is checked to be at least 1e-20 away from an integer. `exp(0) = 1` is
  the word `2^30` followed by zeros (every `U < 1`).
  """
  bits = _DIGIT_BITS * _WORD_DIGITS
  if halves == 0:
    return [1 << bits] + [0] * (_WORDS - 1)
  with decimal.localcontext() as ctx:
    ctx.prec = 60
    scaled = (decimal.Decimal(-halves) / 2).exp() * (2 ** (bits * _WORDS))
    whole = int(scaled)
    assert decimal.Decimal("1e-20") < scaled - whole < 1 - decimal.Decimal("1e-20")
  return [(whole >> (bits * (_WORDS - 1 - i))) & _WORD_MASK for i in range(_WORDS)]


_EXP_TABLE = np.array([_exp_words(k) for k in range(_TABLE_HALVES + 1)], dtype=np.int32)


def _random_words(key: Array, shape: tuple[int, ...]) -> tuple[Array, ...]:
  """A uniform `U` in [0, 1) as three uniform 30-bit words (int32 in [0, 2^30)), each of `shape`."""
  bits = jax.random.bits(key, (_WORDS,) + shape, jnp.uint32) & _WORD_MASK
  return tuple(bits[i].astype(_I32) for i in range(_WORDS))


def _less(words: tuple[Array, ...], target: tuple[Array, ...]) -> tuple[Array, Array]:
  """`(U < x, decided)` for `U = 0.words`, `x = 0.target` (base `2^30`, most significant first).

  Decided at the first word where they differ; undecided (a tie of 90 bits) otherwise.
  Elementwise (the words broadcast): no gather, one fused loop.
  """
  less, equal = words[0] < target[0], words[0] == target[0]
  for u, x in zip(words[1:], target[1:], strict=True):
    less = less | (equal & (u < x))
    equal = equal & (u == x)
  return less, ~equal


def bernoulli_rational(key: Array, num: Array, den: Array) -> tuple[Array, Array]:
  """`(Bernoulli(num / den), ok)` for int32 `0 <= num`, `1 <= den < 2^21`; 1 if `num >= den`.

  `U < num / den` for a uniform `U` given by 90 random bits, compared word by word (three
  base-1024 digits per 30-bit word) with the exact long division of `num` by `den`
  (remainders `< 2^21`, so `1024 r` fits in int32); `ok` is False when the 90 bits tie
  (probability `2^-90`).
  """
  num, den = jnp.broadcast_arrays(jnp.asarray(num, _I32), jnp.asarray(den, _I32))
  below = num < den

  # Words are drawn lazily: the loop stops once every comparison is decided (the first word
  # decides with probability 1 - 2^-30).
  def cond(carry):
    i, _, _, _, undecided = carry
    return (i < _WORDS) & jnp.any(undecided)

  def long_division(carry):  # the i-th 30-bit word of num / den, compared with U's.
    i, key, r, less, undecided = carry
    key, sub = jax.random.split(key)
    c = (jax.random.bits(sub, num.shape, jnp.uint32) & _WORD_MASK).astype(_I32)
    word = jnp.zeros(num.shape, _I32)
    for _ in range(_WORD_DIGITS):
      r = r * 1024
      word = word * 1024 + r // den
      r = r % den
    return i + 1, key, r, less | (undecided & (c < word)), undecided & (c == word)

  init = (jnp.asarray(0, _I32), key, jnp.where(below, num, 0), jnp.zeros(num.shape, bool), below)
  _, _, _, less, undecided = jax.lax.while_loop(cond, long_division, init)
  return jnp.where(below, less, True), ~undecided


def _bernoulli_exp_halves(key: Array, halves: Array) -> tuple[Array, Array]:
  """`(Bernoulli(exp(-halves / 2)), ok)` by comparison with the tabulated expansion.

  `halves > 128` gives 0 (its exact probability of 1 is below `e^-64`).
  """
  inside = halves <= _TABLE_HALVES
  table = jnp.asarray(_EXP_TABLE)[jnp.clip(halves, 0, _TABLE_HALVES)]
  less, decided = _less(_random_words(key, halves.shape), tuple(table[..., i] for i in range(_WORDS)))
  return inside & less, decided | ~inside


def _series(key: Array, bernoulli_over_k, shape: tuple[int, ...]) -> tuple[Array, Array]:
  """Algorithm 1 for `gamma <= 1`: `K = 1, 2, ...` while `Bernoulli(gamma / K)`; `K` odd.

  `bernoulli_over_k(key, K)` draws `Bernoulli(gamma / K)` (with `ok`); the `K`'s are
  scanned up to 20, and reaching 20 (probability <= 1/20!) is not ok.
  """

  def cond(carry):
    k, _, going, _, _ = carry
    return (k <= _SERIES) & jnp.any(going)

  def one_k(carry):  # stops once no entry is still going
    k, key, going, count, ok = carry
    key, sub = jax.random.split(key)
    a, ok_k = bernoulli_over_k(sub, k)
    ok = ok & (ok_k | ~going)
    going = going & a
    return k + 1, key, going, count + going.astype(_I32), ok

  init = (jnp.asarray(1, _I32), key, jnp.ones(shape, bool), jnp.zeros(shape, _I32),
          jnp.ones(shape, bool))
  _, _, going, count, ok = jax.lax.while_loop(cond, one_k, init)
  return count % 2 == 0, ok & ~going


def bernoulli_exp(key: Array, num: Array, den: Array) -> tuple[Array, Array]:
  """`(Bernoulli(exp(-num / den)), ok)`, int32 `num >= 0`, `1 <= den`, `20 den < 2^21`.

  CKS Algorithm 1: the integer part `n = floor(num / den)` by one comparison with the exact
  expansion of `exp(-n)` (`n > 64` gives 0: exact probability `< e^-64`), AND the
  fractional part `f = (num mod den) / den` by the series, `Bernoulli(f / K)` being
  `Bernoulli((num mod den) / (den K))`. `ok` is False with probability `< 5e-19`.
  """
  num, den = jnp.broadcast_arrays(jnp.asarray(num, _I32), jnp.asarray(den, _I32))
  k_whole, k_frac = jax.random.split(key)
  whole, ok_w = _bernoulli_exp_halves(k_whole, 2 * jnp.minimum(num // den, _TABLE_HALVES))
  rest = num % den
  frac, ok_f = _series(k_frac, lambda k, K: bernoulli_rational(k, rest, den * K), num.shape)
  return whole & frac, ok_w & ok_f


def _geometric(key: Array, shape: tuple[int, ...]) -> tuple[Array, Array]:
  """`V` with `P(V >= v) = e^-v`: `#{v in 1..64 : U < e^-v}` for one uniform `U`."""
  table = _EXP_TABLE[2::2]  # exp(-v), v = 1..64.
  words = tuple(w[..., None] for w in _random_words(key, shape))
  less, decided = _less(words, tuple(jnp.asarray(table[:, i]).reshape((1,) * len(shape) + (-1,))
                                    for i in range(_WORDS)))
  v = jnp.sum(less, axis=-1, dtype=_I32)
  return v, jnp.all(decided, axis=-1) & (v < _TABLE_HALVES // 2)


# ----------------------------------------------------------------------------------------
# Discrete Laplace and discrete Gaussian: rejection rounds, vectorized.
# ----------------------------------------------------------------------------------------


def _laplace_round(key: Array, t: Array) -> tuple[Array, Array, Array]:
  """One round of CKS Algorithm 2 (`s = 1`): `(z, accepted, ok)`, elementwise in `t`."""
  k_u, k_keep, k_v, k_sign = jax.random.split(key, 4)
  mask = _smear(jnp.maximum(t - 1, 0).astype(jnp.uint32))
  u = (jax.random.bits(k_u, t.shape, jnp.uint32) & mask).astype(_I32)  # uniform in [0, mask]
  u_ok = u < t                                                        # -> uniform in [0, t)
  u = jnp.where(u_ok, u, 0)
  keep, ok_keep = _series(k_keep, lambda k, K: bernoulli_rational(k, u, t * K), t.shape)
  v, ok_v = _geometric(k_v, t.shape)
  x = u + t * v
  negative = (jax.random.bits(k_sign, t.shape, jnp.uint32) & 1) == 1
  accepted = u_ok & keep & ~(negative & (x == 0))
  return jnp.where(negative, -x, x), accepted, ok_keep & ok_v


def _gaussian_round(key: Array, t: Array) -> tuple[Array, Array, Array]:
  """One round of CKS Algorithm 3 with `sigma = t`: `(z, accepted, ok)`."""
  k_y, k_a, k_b, k_c1, k_c2 = jax.random.split(key, 5)
  y, accepted, ok = _laplace_round(k_y, t)
  x = jnp.abs(jnp.abs(y) - t)  # | |Y| - sigma^2 / t |, t = sigma
  q, r = x // t, x % t
  q = jnp.minimum(q, 12)       # q >= 12: exp(-q^2 / 2) < e^-72, and 144 > 128 gives 0 anyway.
  # exp(-x^2 / (2 t^2)) = exp(-q^2 / 2) exp(-q r / t) exp(-r^2 / (2 t^2)).
  a, ok_a = _bernoulli_exp_halves(k_a, q * q)
  b, ok_b = bernoulli_exp(k_b, q * r, t)
  # r^2 / (2 t^2 K) = (r / t) (r / (2 t K)): a product of two Bernoulli draws per K.
  c, ok_c = _series(k_c1, lambda k, K: _and(bernoulli_rational(jax.random.fold_in(k, 0), r, t),
                                            bernoulli_rational(jax.random.fold_in(k, 1), r, 2 * t * K)),
                    t.shape)
  return y, accepted & a & b & c, ok & ok_a & ok_b & ok_c


def _and(x, y):
  return x[0] & y[0], x[1] & y[1]


def _smear(m: Array) -> Array:
  """All bits below the highest set bit of the uint32 `m` set (a mask >= m)."""
  for shift in (1, 2, 4, 8, 16):
    m = m | (m >> shift)
  return m


def _valid_scale(t: Array) -> Array:
  return (t >= 1) & (t <= MAX_SCALE)


def _rejection(round_fn, key: Array, scale: Array) -> Array:
  """The first accepted of up to 32 rounds of 8 candidates per entry of `scale`; FAILED otherwise.

  Each loop iteration runs one round for the first `M = N / 8 + 32` entries still pending (a
  static-size compaction, `jnp.nonzero(..., size=M)`), so the first round of all `N` entries
  takes about 8 iterations and the rare later rounds about one each: the work is about one
  round per entry, not the batch's slowest entry's count of rounds for every entry. Every
  round draws fresh bits (a new key per iteration, independent slots within it), so which
  slot an entry gets, a function of the other entries' draws, does not change its law.
  """
  valid = _valid_scale(scale)
  scales = jnp.where(valid, scale, 1).ravel()
  size = scales.size
  width = min(size, size // 8 + 32)

  def cond(carry):
    _, _, done, failed, _ = carry
    return jnp.any(~done & ~failed)

  def body(carry):
    key, z, done, failed, rounds = carry
    key, sub = jax.random.split(key)
    index = jnp.nonzero(~done & ~failed, size=width, fill_value=size)[0]  # size: a dropped slot
    t = jnp.broadcast_to(scales.at[index].get(mode="fill", fill_value=1)[:, None], (width, _CANDIDATES))
    cand, accepted, ok = round_fn(sub, t)
    first = jnp.argmax(accepted, axis=-1)
    any_accepted = jnp.any(accepted, axis=-1)
    # A candidate not ok (a cap hit) before the first accepted one, or the one picked, fails.
    last = jnp.where(any_accepted, first, _CANDIDATES - 1)[:, None]
    round_ok = jnp.all(ok | (jnp.arange(_CANDIDATES)[None, :] > last), axis=-1)
    count = rounds.at[index].get(mode="fill", fill_value=0) + 1
    picked = jnp.take_along_axis(cand, first[:, None], axis=-1)[:, 0]
    z = z.at[index].set(picked, mode="drop")  # read only where done
    done = done.at[index].set(any_accepted & round_ok, mode="drop")
    failed = failed.at[index].set(~round_ok | (~any_accepted & (count >= _ROUNDS)), mode="drop")
    return key, z, done, failed, rounds.at[index].set(count, mode="drop")

  init = (key, jnp.zeros(size, _I32), jnp.zeros(size, bool), jnp.zeros(size, bool), jnp.zeros(size, _I32))
  _, z, done, failed, _ = jax.lax.while_loop(cond, body, init)
  return jnp.where(done & ~failed & valid.ravel(), z, FAILED).reshape(scale.shape)


def _sampler(round_fn, key: Array, scale: Array, shape: tuple[int, ...]) -> Array:
  # The range is checked in the scale's own dtype (a host int64 too, before JAX's int32 cast):
  # a cast first would wrap 2^32 + 2 to the scale 2. Out of range becomes 0, then FAILED.
  xp = jnp if isinstance(scale, jax.Array) else np
  scale = xp.asarray(scale)
  if not jnp.issubdtype(scale.dtype, jnp.integer):
    raise ValueError(f"Expected scale to be an integer array, got dtype {scale.dtype}: round a "
                     "real scale UP to an integer (more noise, still private).")
  scale = jnp.asarray(xp.where((scale >= 1) & (scale <= MAX_SCALE), scale, 0).astype(np.int32))
  return _rejection(round_fn, key, jnp.broadcast_to(scale, tuple(shape)))


def discrete_laplace(key: Array, scale: Array, shape: tuple[int, ...] = ()) -> Array:
  """Exact discrete Laplace draws: `P(Z = z) = tanh(1 / (2 t)) exp(-|z| / t)`, `z` in Z.

  Args:
    key: a JAX PRNG key.
    scale: integer `t` in `[1, MAX_SCALE]` (broadcast to `shape`); any other value
      gives `FAILED`.
    shape: the output shape.

  Returns:
    int32 draws (CKS Algorithm 2), `FAILED` where a cap was hit (prob. < 3.5e-18).

  Privacy: for integers `|x - x'| <= D`, `x + Z` is `D / t`-DP; report-noisy-max
  `argmax_j m_j + Z_j` over integer scores of sensitivity `D` is `2 D / t`-DP (ties go
  to the lowest index: `j` wins iff `Z_j` reaches an integer threshold that moves by at
  most `2 D`, and `P(Z >= a) <= e^{c / t} P(Z >= a + c)`).

  Examples:
    >>> import jax
    >>> z = discrete_laplace(jax.random.key(0), 3, (4,))
    >>> z.dtype, z.shape
    (dtype('int32'), (4,))
  """
  return _sampler(_laplace_round, key, scale, shape)


def discrete_gaussian(key: Array, sigma: Array, shape: tuple[int, ...] = ()) -> Array:
  """Exact discrete Gaussian draws: `P(Z = z) ∝ exp(-z^2 / (2 sigma^2))`, `z` in Z.

  Args:
    key: a JAX PRNG key.
    sigma: integer `sigma` in `[1, MAX_SCALE]` (broadcast to `shape`); any other value
      gives `FAILED`.
    shape: the output shape.

  Returns:
    int32 draws (CKS Algorithm 3), `FAILED` where a cap was hit (prob. < 3.5e-18).

  Privacy (CKS Theorem 4): for integers `|x - x'| <= D`, `x + Z` is
  `rho = D^2 / (2 sigma^2)`-zCDP: Renyi divergence at most `alpha D^2 / (2 sigma^2)` at
  every order `alpha > 1`.
  """
  return _sampler(_gaussian_round, key, sigma, shape)
