"""`dpgcd_jax.mechanisms`, `dpgcd_jax.discrete_noise`: the exact law of the float samplers, and what their finite range
costs.

How JAX draws (`jax/_src/random`): 32 uniform bits, of which the top 23 become the mantissa of a
float in [1, 2), minus 1: a float32 uniform with 2^23 equally likely values (float64: 52 of 64
bits, 2^52 values); then the transform: normal `sqrt(2) erf_inv(u)` and Laplace
`sign(u) log1p(-|u|)` with `u` in [-1 + 2^-24, 1), Gumbel `-log(-log(u))` with `u` in
[tiny, 1) (JAX's default "low" mode). The library's own mechanisms, run on a key whose bits count
through every mantissa, give the exact law of each float draw: 2^23 distinct atoms of mass
2^-23, monotone in the input (about a second per sampler on CPU; float64: the 2^16 inputs at
each end, which hold every tail below).

A released value beyond the extreme atom has probability 0 on one data set and a positive one on
a neighbour whose value is `Delta` away: the zero-versus-positive mass, a function of
`r = Delta / scale`. The secure samplers' supports are capped too (`|z| <= 62 t - 1`, discrete
Laplace; `|z| <= 13 t - 1`, discrete Gaussian): the same mass in closed form. The tables of
docs/secure_noise.md ("Range truncation") are recomputed here, so the page cannot drift.
"""

import functools
import itertools
import math
import pathlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import random as jax_random
from scipy import special
from scipy import stats

from dpgcd_jax import discrete_noise as dn
from dpgcd_jax import mechanisms
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import events

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "secure_noise.md"
PRIVACY_DOC = DOC.parent / "privacy.md"
MANTISSA = {32: 23, 64: 52}
TAIL64 = 2**16
SAMPLERS = ("laplace", "normal", "gumbel")


# ---------------------------------------------------------------------------------------
# The exact law: every mantissa through the library's mechanisms.
# ---------------------------------------------------------------------------------------


def _counter_bits(key, bit_width, shape):
  """Entry `i` gets `((start + stride i) << (width - mantissa)) | low`: its uniform's mantissa is
  `start + stride i`; `low` fills the bits the samplers drop. Key data: start (two words),
  stride, low."""
  dtype = {32: jnp.uint32, 64: jnp.uint64}[bit_width]
  start = key[1].astype(dtype)
  if bit_width == 64:
    start = start | (key[0].astype(dtype) << dtype(32))
  index = jax.lax.iota(dtype, math.prod(shape)).reshape(shape)
  return ((start + key[2].astype(dtype) * index) << dtype(bit_width - MANTISSA[bit_width])) | key[3].astype(dtype)


COUNTER = jax_random.define_prng_impl(
    key_shape=(4,), seed=lambda seed: jnp.zeros(4, jnp.uint32), split=lambda k, shape: jnp.broadcast_to(k, (*shape, 4)),
    random_bits=_counter_bits, fold_in=lambda k, data: k, name="counter")


def counter_key(start=0, stride=1, low=0):
  return jax.random.wrap_key_data(jnp.asarray([start >> 32, start & 0xFFFFFFFF, stride, low], jnp.uint32),
                                  impl=COUNTER)


def _draws(name, key, n, dtype):
  """`n` draws of the library's float mechanism at scale 1: the sampler's own values."""
  one = jnp.ones((), dtype)
  if name == "laplace":
    return mechanisms.LaplaceNoise().noise(key, (n,), dtype, one)
  if name == "normal":
    return mechanisms.GaussianNoise().noise(key, (n,), dtype, one)
  return mechanisms.GumbelMax().noisy(key, jnp.zeros((n,), dtype), one)


@functools.cache
def by_input32(name):
  """The float32 draw for each of the 2^23 mantissas, in input order (float64 holds them exactly)."""
  return np.asarray(jax.jit(functools.partial(_draws, name, n=2**23, dtype=jnp.float32))(counter_key()), np.float64)


@functools.cache
def law(name, bits=32):
  """`(low, high, atom)`: the smallest and the largest atoms, ascending, each of mass `atom`."""
  if bits == 32:
    z = np.sort(by_input32(name))
    return z, z, 2.0**-23
  with jax.enable_x64(True):
    draw = jax.jit(functools.partial(_draws, name, n=TAIL64, dtype=jnp.float64))
    ends = [np.asarray(draw(counter_key(start))) for start in (0, 2**52 - TAIL64)]
  for end in ends:
    assert np.all(np.diff(end) > 0) or np.all(np.diff(end) < 0)  # monotone: the tails are the ends
  z = np.sort(np.concatenate(ends))
  return z[:TAIL64], z[TAIL64:], 2.0**-52


def upper(name, r, bits=32):
  """`P(Z > top - r)`: a value released beyond the top on D, at a neighbour `r` scales above."""
  _, high, atom = law(name, bits)
  assert high[-1] - r > high[0], "the threshold is beyond the enumerated tail"
  return (high.size - np.searchsorted(high, high[-1] - r, "right")) * atom


def lower(name, r, bits=32):
  low, _, atom = law(name, bits)
  assert low[0] + r < low[-1], "the threshold is beyond the enumerated tail"
  return np.searchsorted(low, low[0] + r, "left") * atom


def value_mass(name, r, bits=32):
  """Zero-versus-positive mass of one released value at `Delta / scale = r` (the worse side)."""
  return max(upper(name, r, bits), lower(name, r, bits))


def max_mass(name, r, bits=32):
  """Report-noisy-max (`score + scale Z`, each score moving by `r` scales): the largest
  `P_D'(j wins)` with `P_D(j wins) = 0`, i.e. `P(Z_1 - Z_2 > top - bottom - 2 r)` (two scores
  suffice: only the one best blocker matters)."""
  low, high, atom = law(name, bits)
  gap = high[-1] - low[0] - 2 * r
  blockers = low[low < low[0] + 2 * r]
  return np.sum(high.size - np.searchsorted(high, blockers + gap, "right")) * atom**2


def index_mass(name, r, bits=32):
  """A bound covering both forms of the Laplace noisy max, `score + scale Z` and GS-s's
  `|u + c + scale Z|`: j can win on D' only if the blocker's noise is within `2 r` of one end and
  j's within `2 r` of either end."""
  u, l = upper(name, 2 * r, bits), lower(name, 2 * r, bits)
  return max(u, l) * (u + l)


def test_the_enumeration_is_the_sampler_and_each_of_its_atoms_has_mass_2_to_minus_23():
  key = jax.random.key(7)
  bits = np.asarray(jax.random.bits(key, (2**16,), jnp.uint32))
  for name in SAMPLERS:
    z = by_input32(name)
    step = np.diff(z)
    assert np.all(np.isfinite(z)) and (np.all(step > 0) or np.all(step < 0))  # 2^23 distinct atoms, monotone
    # Threefry's draws ARE the enumeration at their top 23 bits; the low 9 bits are dropped.
    np.testing.assert_array_equal(np.asarray(_draws(name, key, 2**16, jnp.float32), np.float64), z[bits >> 9])
    low = jax.jit(functools.partial(_draws, name, n=2**12, dtype=jnp.float32))(counter_key(12345, low=511))
    np.testing.assert_array_equal(np.asarray(low, np.float64), z[12345:12345 + 2**12])
  # Both forms of the Laplace noisy max draw the same law.
  zero_score = lambda g, w, M, penalty: jnp.zeros_like(g)
  noisy = mechanisms.LaplaceNoisyMax().noisy_scores(key, zero_score, jnp.zeros(2**16), None, None, None,
                                                   jnp.float32(1), "gs-r")
  np.testing.assert_array_equal(np.asarray(noisy, np.float64), by_input32("laplace")[bits >> 9])


def test_the_extreme_atoms_are_the_transforms_of_the_extreme_uniforms():
  # u = fl(2 k 2^-23 + (-1 + 2^-24)) for the normal and the Laplace: -1 + 2^-24 at k = 0,
  # 1 - 3 2^-24 at k = 2^23 - 1; the Gumbel's u: tiny, then k 2^-23, up to 1 - 2^-23.
  lo, hi = -1 + 2.0**-24, 1 - 3 * 2.0**-24
  want = {"normal": (np.sqrt(2) * special.erfinv(lo), np.sqrt(2) * special.erfinv(hi)),
          "laplace": (np.log(3 * 2.0**-24), 24 * np.log(2)),
          "gumbel": (-np.log(-np.log(np.finfo(np.float32).tiny)), -np.log(-np.log1p(-2.0**-23)))}
  for name, (bottom, top) in want.items():
    low, high, _ = law(name)
    np.testing.assert_allclose([low[0], high[-1]], [bottom, top], rtol=2e-6)
  with jax.enable_x64(True):
    assert law("laplace", 64)[1][-1] == pytest.approx(53 * np.log(2), rel=1e-12)


def test_the_tails_agree_with_the_continuous_laws_where_they_hold_many_atoms():
  top, bottom = ({name: law(name)[end][index] for name in SAMPLERS} for end, index in ((1, -1), (0, 0)))
  for r in (1.0, 2.0):
    assert upper("normal", r) == pytest.approx(stats.norm.sf(top["normal"] - r), rel=0.02)
    assert lower("normal", r) == pytest.approx(stats.norm.cdf(bottom["normal"] + r), rel=0.02)
  assert upper("laplace", 6.0) == pytest.approx(0.5 * np.exp(6.0 - top["laplace"]), rel=0.05)
  assert lower("laplace", 6.0) == pytest.approx(0.5 * np.exp(6.0 + bottom["laplace"]), rel=0.05)
  assert upper("gumbel", 6.0) == pytest.approx(-np.expm1(-np.exp(6.0 - top["gumbel"])), rel=0.05)
  assert lower("gumbel", 2.5) == pytest.approx(np.exp(-np.exp(-(bottom["gumbel"] + 2.5))), rel=0.05)
  with jax.enable_x64(True):
    assert upper("normal", 1.0, 64) == pytest.approx(stats.norm.sf(law("normal", 64)[1][-1] - 1.0), rel=0.05)
  for name in SAMPLERS:  # any shift carries the extreme atom, and the mass grows with the shift
    masses = [value_mass(name, r) for r in (1e-9, 0.1, 0.5, 1.0, 2.0)]
    assert masses[0] == 2.0**-23 and np.all(np.diff(masses) >= 0)
  assert value_mass("normal", 1.0) > 100 * 2.0**-23  # "up to about 2^-23" (the README) was the least


@pytest.mark.parametrize("name, r", [("normal", 1.0), ("laplace", 2.0), ("gumbel", 1.0), ("gumbel", 2.0)])
def test_the_noisy_max_mass_is_the_brute_force_count_of_pairs(name, r):
  low, high, atom = law(name)
  tops, bottoms = high[high > high[-1] - 2 * r], low[low < low[0] + 2 * r]
  pairs = np.sum(np.subtract.outer(tops, bottoms) > high[-1] - low[0] - 2 * r)
  assert pairs > 0 and max_mass(name, r) == pairs * atom**2
  assert max_mass(name, r) <= upper(name, 2 * r) * lower(name, 2 * r) <= index_mass(name, r)


# ---------------------------------------------------------------------------------------
# The secure samplers: capped supports, closed forms.
# ---------------------------------------------------------------------------------------

# floor(2^90 exp(-k / 2)), k = 0..128: the samplers compare 90 uniform bits with these integers.
EXP = [(int(a) << 60) | (int(b) << 30) | int(c) for a, b, c in dn._EXP_TABLE]
EXPF = np.asarray(EXP, np.float64) / 2.0**90  # P(Bernoulli(exp(-k / 2)) = 1): U < EXP[k]; a tie is FAILED
# P(V = v, decided): V = #{w <= 64 : U < EXP[2 w]}; U equal to an entry is FAILED, and so is V = 64.
GEOMETRIC = np.asarray([max(EXP[2 * v] - EXP[2 * v + 2] - 1, 0) for v in range(64)], np.float64) / 2.0**90
LAPLACE_CAP = int(np.flatnonzero(GEOMETRIC)[-1]) + 1  # 62: |z| = U + t V <= 62 t - 1 (EXP[124] = 1)
GAUSSIAN_CAP = 13  # |z| <= 13 t - 1: q = ||Y| - t| // t is capped at 12, and exp(-144 / 2) is 0
SCALES = np.arange(1, dn.MAX_SCALE + 1, dtype=np.float64)
GAUSSIAN_SCALES = np.unique(np.concatenate([np.arange(1, 513), np.geomspace(513, dn.MAX_SCALE, 48).astype(int)]))


def test_the_caps_are_the_samplers():
  assert LAPLACE_CAP == 62 and EXP[124:] == [1, 0, 0, 0, 0] and GEOMETRIC[LAPLACE_CAP - 1] == 2.0**-90
  zero = counter_key(stride=0)  # every uniform word 0: U = 0 ties with exp(-63) and exp(-64)
  v, ok = jax.jit(dn._geometric, static_argnums=1)(zero, (1,))
  assert int(v[0]) == LAPLACE_CAP and not bool(ok[0])  # FAILED: no V >= 62 is released
  halves = jnp.asarray([(GAUSSIAN_CAP - 2) ** 2, 128, (GAUSSIAN_CAP - 1) ** 2])
  kept, ok = jax.jit(dn._bernoulli_exp_halves)(zero, halves)
  np.testing.assert_array_equal(kept, [True, False, False])  # q = 11 is kept (U < 6), q = 12 never
  assert bool(ok[0]) and not bool(ok[1]) and bool(ok[2])


KEYS_AND_BITS = {"bits", "split", "fold_in", "key", "PRNGKey", "key_data", "wrap_key_data", "key_impl", "clone"}


def test_the_secure_mechanisms_draw_no_float_sampler(monkeypatch):
  """Every `jax.random` function but bits and keys raises while the secure mechanisms trace: their
  noise is integers from uniform bits only (the ledgers hold no float event either,
  tests/estimators/test_secure_mode.py), while each float mechanism trips it."""
  def refuse(*args, **kwargs):
    raise AssertionError("a float sampler")
  for name in dir(jax.random):
    if not name.startswith("_") and name not in KEYS_AND_BITS and callable(getattr(jax.random, name)):
      monkeypatch.setattr(jax.random, name, refuse)
  key, value, m, s = jax.random.key(0), jnp.zeros(8, jnp.float32), jnp.float32(2.0), jnp.float32(0.1)
  ints, t = jnp.zeros(8, jnp.int32), jnp.int32(5)
  secure = [lambda: mechanisms.DiscreteLaplaceNoisyMax().noisy_max(key, value, m, s),
            lambda: mechanisms.DiscreteLaplaceNoise().perturb(key, value, m, s),
            lambda: mechanisms.DiscreteGaussianNoise().perturb(key, value, m, s),
            lambda: mechanisms.DiscreteLaplaceNoise().perturb_integers(key, ints, t),
            lambda: mechanisms.DiscreteGaussianNoise().perturb_integers(key, ints, t)]
  for draw in secure:
    jax.make_jaxpr(draw)()
  for draw in (lambda: mechanisms.LaplaceNoise().perturb(key, value, s),
               lambda: mechanisms.GaussianNoise().perturb(key, value, s),
               lambda: mechanisms.GumbelMax().noisy(key, value, s)):
    with pytest.raises(AssertionError, match="a float sampler"):
      jax.make_jaxpr(draw)()


def laplace_cap_mass(r, scales=SCALES):
  """max over `t` of `P(Z > L - D)`, `D = floor(r t)`, `L = 62 t - 1`: the discrete Laplace
  sampler's exact law, `P(Z = z) ∝ exp(-u / t) P(V = v)` for `|z| = u + t v`, `u < t`."""
  t = scales
  q = np.exp(-1 / t)
  block = (1 - np.exp(-1.0)) / (1 - q)  # sum_{u < t} exp(-u / t)
  norm = 2 * block * GEOMETRIC.sum() - GEOMETRIC[0]
  k, d = np.divmod(np.floor(r * t + 1e-9), t)
  k = k.astype(int)
  top = GEOMETRIC[:LAPLACE_CAP][::-1]  # v = 61, 60, ...
  whole = np.concatenate([[0.0], np.cumsum(top)])[k] * block
  part = top[k] * (np.exp(-(t - d) / t) - np.exp(-1.0)) / (1 - q)  # u = t - d .. t - 1
  return float(np.max((whole + part) / norm))


@functools.cache
def _gaussian_tails(t):
  """`P(Z > L - D)` for `D = 0, 1, ...`, `L = 13 t - 1`: the discrete Gaussian sampler's exact law
  (a discrete Laplace `Y` kept with `exp(-q^2 / 2) exp(-q r / t) exp(-r^2 / (2 t^2))`,
  `||Y| - t| = q t + r`, each exponential's integer part compared with `EXP`)."""
  z = np.arange(GAUSSIAN_CAP * t)
  x = np.abs(z - t)
  q, r = x // t, x % t
  n = q * r // t
  weight = (np.exp(-(z % t) / t) * GEOMETRIC[z // t] * EXPF[q * q] * EXPF[2 * n]
            * np.exp(-(q * r % t) / t) * np.exp(-(r / t) ** 2 / 2))
  assert weight[-1] > 0 and (x[-1] + 1) // t == GAUSSIAN_CAP - 1  # the cap, and no further
  return np.cumsum(weight[::-1]) / (2 * weight.sum() - weight[0])


@functools.cache
def gaussian_cap_mass(r):
  """The same for the discrete Gaussian: every `t` up to 512, then 48 more up to `2^15 - 1`."""
  masses = [_gaussian_tails(t)[math.floor(r * t + 1e-9) - 1] for t in GAUSSIAN_SCALES.tolist() if r * t >= 1]
  return float(max(masses))


def test_the_secure_cap_masses_are_astronomically_small():
  for r in (0.01, 0.1, 1.0, 2.0, 5.0, 20.0):
    assert laplace_cap_mass(r) <= np.exp(r - 62)  # e^eps times the mass beyond the cap, about e^-62
  assert laplace_cap_mass(2.0) < 1e-26 and gaussian_cap_mass(2.0) < 1e-26  # eps or 1 / s up to 2 per release
  # Large t: the continuous limits (below them: the table rounds exp(-61) and exp(-60.5) down).
  limit = np.exp(-62) * np.expm1(1.0) / 2
  assert 0.3 * limit < laplace_cap_mass(1.0, SCALES[-1:]) < limit
  limit = stats.norm.sf(13 - 1) - stats.norm.sf(13)
  assert 0.5 * limit < _gaussian_tails(dn.MAX_SCALE)[dn.MAX_SCALE - 1] < limit


# ---------------------------------------------------------------------------------------
# The documentation's tables.
# ---------------------------------------------------------------------------------------

FLOAT_ROWS = {f"float{bits} `{name}`": (name, bits) for bits in (32, 64) for name in SAMPLERS}
SELECTS = {"laplace", "gumbel"}
SECURE_INDEX = lambda r: laplace_cap_mass(2 * r)  # one tail at 2 r bounds report-noisy-max
FITS = {  # first cell -> (selection, update, the update's mass, the selection's per index)
    "default": ("laplace", "laplace", lambda r: value_mass("laplace", r), lambda r: index_mass("laplace", r)),
    "`gumbel`, `gaussian`": ("gumbel", "gaussian", lambda r: value_mass("normal", r), lambda r: max_mass("gumbel", r)),
    "`secure_noise=True`": ("discrete_laplace", "discrete_laplace", laplace_cap_mass, SECURE_INDEX),
    "`secure_noise=True`, `gaussian`": ("discrete_laplace", "discrete_gaussian", gaussian_cap_mass, SECURE_INDEX),
}


def _table(header, doc=DOC):
  """The rows (lists of cells) of the table of `doc` whose header row starts with `header`."""
  lines = doc.read_text(encoding="utf-8").splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith(f"| {header} |"))
  body = itertools.takewhile(lambda line: line.startswith("|"), lines[start + 2:])
  return [[cell.strip() for cell in line.strip("|").split("|")] for line in body]


def _figure(x):
  """`1.19e-7`: three significant digits, the exponent without padding."""
  return "—" if x is None else re.sub(r"e([-+])0*(\d)", r"e\1\2", f"{x:.2e}").replace("e+", "e")


def sampler_row(first):
  if first in FLOAT_ROWS:
    name, bits = FLOAT_ROWS[first]
    low, high, _ = law(name, bits)
    values = [None if name == "gumbel" else value_mass(name, r, bits) for r in (0.1, 1.0)]
    index = [None if name not in SELECTS else (index_mass if name == "laplace" else max_mass)(name, r, bits)
             for r in (0.1, 1.0)]
    return [f"{low[0]:.3f}", f"{high[-1]:.3f}", *map(_figure, values + index)]
  cap, value, index = {"discrete Laplace": (LAPLACE_CAP, laplace_cap_mass, SECURE_INDEX),
                       "discrete Gaussian": (GAUSSIAN_CAP, gaussian_cap_mass, lambda r: None)}[first]
  return [f"`-({cap}t - 1)`", f"`{cap}t - 1`", *map(_figure, [value(0.1), value(1.0), index(0.1), index(1.0)])]


P_FIT = 1000  # the secure rows' p: their draws' charge (docs/secure_noise.md), negligible at delta = 1e-6


def fit_row(first, passes):
  selection, update, value, index = FITS[first]
  cal = accounting.calibrate_gcd(1.0, 1e-6, steps=passes, selection=selection, update=update, features=P_FIT)
  assert cal.selection_noise == cal.update_noise  # equal multipliers, the default split
  per_pass = [index(1 / cal.selection_noise), value(1 / cal.update_noise)]
  return [f"{cal.update_noise:.1f}", *map(_figure, per_pass + [passes * sum(per_pass)])]


def test_the_samplers_table_is_the_exact_law():
  rows = _table("sampler")
  assert [row[0] for row in rows] == [*FLOAT_ROWS, "discrete Laplace", "discrete Gaussian"]
  with jax.enable_x64(True):  # the float64 rows
    for row in rows:
      assert row[1:] == sampler_row(row[0]), row[0]


def test_the_fits_table_is_the_exact_law_and_says_what_charging_would_cost():
  rows = _table("fit (epsilon = 1, delta = 1e-6)")
  assert [row[0] for row in rows] == ["default", "default", "`gumbel`, `gaussian`", "`secure_noise=True`",
                                      "`secure_noise=True`, `gaussian`"]
  totals = {}
  for row in rows:
    assert row[2:] == fit_row(row[0], int(row[1])), row[:2]
    totals[row[0], int(row[1])] = float(row[-1])
  # Float noise: the uncharged mass exceeds the delta the fit certifies; secure noise: far below it.
  assert totals["default", 10] > 1e-6 and totals["`gumbel`, `gaussian`", 10] > 1e-6
  assert max(totals["`secure_noise=True`", 10], totals["`secure_noise=True`, `gaussian`", 10]) < 1e-20 * 1e-6


def test_the_figures_in_the_text_are_the_exact_law():
  text = " ".join(DOC.read_text(encoding="utf-8").split())
  normal = [_figure(value_mass("normal", r)) for r in (0.5, 1.0, 2.0)]
  assert f"({normal[0]} at `r = 0.5`, {normal[1]} at 1, {normal[2]} at 2)" in text
  gaps = [min(high[-1] - high[-2], low[1] - low[0]) for low, high, _ in (law("normal"), law("laplace"))]
  assert f"({gaps[0]:.2f} for the float32 normal, {gaps[1]:.2f} for the Laplace)" in text
  rows = _table("fit (epsilon = 1, delta = 1e-6)")
  ratios = [1 / float(row[2]) for row in rows[:3]]
  assert f"`r` is {min(ratios):.3f} to {max(ratios):.3f}" in text
  small_s = [_figure(gaussian_cap_mass(1 / s)) for s in (0.2, 0.15)]
  assert f"({small_s[0]} at `s = 0.2`, {small_s[1]} at `s = 0.15`" in text
  # The README's summary, and the privacy page's "What each mode guarantees": the same figures.
  ranges = {name: f"[{law(name)[0][0]:.3f}, {law(name)[1][-1]:.3f}]" for name in SAMPLERS}
  per_fit = float(rows[0][-1])
  assert per_fit > 1e-6
  for page in (DOC.parents[1] / "README.md", PRIVACY_DOC):
    summary = " ".join(page.read_text(encoding="utf-8").split())
    assert (f"normal lies in {ranges['normal']}, its Laplace in {ranges['laplace']} and its Gumbel in "
            f"{ranges['gumbel']}") in summary, page.name
    assert f"2^-23 = {_figure(2.0**-23)} per value" in summary, page.name
    assert f"{normal[1]} for a Gaussian value at Delta / scale = 1; a default 10-pass fit" in summary, page.name
    assert f"at delta = 1e-6 carries {_figure(per_fit)} of it" in summary, page.name
  privacy_page = " ".join(PRIVACY_DOC.read_text(encoding="utf-8").split())
  assert f"within total variation {events.DRAW_TOTAL_VARIATION:.1e} of the exact law" in privacy_page
  assert f"{rows[3][-1]} for the default 10-pass fit above" in privacy_page and rows[3][:2] == ["`secure_noise=True`",
                                                                                                "10"]
  scales_page = " ".join((DOC.parent / "scales.md").read_text(encoding="utf-8").split())
  assert f"never exceeds {law('normal')[1][-1]:.3f}" in scales_page
  assert f"2^-23 = {_figure(2.0**-23)} per draw" in scales_page


def test_the_privacy_page_maps_each_review_finding_to_tests_that_exist():
  """docs/privacy.md ("The review findings and the tests that catch them"): one row for each of the review's
  findings F1-F4 and M1-M3, in order, each naming tests by `path::name`; every named test is defined
  in the named file (a rename or a removal fails here)."""
  rows = _table("finding", PRIVACY_DOC)
  assert [row[0] for row in rows] == ["F1", "F2", "F3", "F4", "M1", "M2", "M3"]
  root = DOC.parents[1]
  for finding, _, tests in rows:
    ids = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", tests)
    assert ids and len(ids) == tests.count("::"), finding
    for path, name in ids:
      assert re.search(rf"^def {name}\(", (root / path).read_text(encoding="utf-8"), re.M), (finding, path, name)
