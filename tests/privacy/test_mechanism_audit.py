"""Every mechanism of the registries (`dpgcd_jax.mechanisms.SELECTIONS`, `UPDATES`) against a
DP-Sniper-style distinguisher (`dpgcd_jax.privacy.distinguisher`) at its worst-case neighbours.

Each mechanism runs at the multiplier whose charged epsilon of one use (its event in the ledger,
at the audit's delta) is `EPSILON`, on neighbouring inputs that the library's sensitivity
convention allows: an update at `v` and `v + Delta`; a selection (GS-s scores `|g_j|`, `M = 1`:
every score moves by at most `Delta` between neighbours, `dpgcd_jax.solvers.greedy`) whose
coordinate 0 sits `GAP Delta` below `CANDIDATES - 1` others and moves up by `Delta` while they
move down by `Delta` (the threshold of report-noisy-max, and the exponential mechanism's
normalizer, move by `2 Delta`: the pair that reaches the charged `2 / b`). The distinguisher's
lower bound must stay below the charged epsilon (the noise is correct) and must exceed it when
the mechanism is given `Delta / 4` while the inputs move by `Delta` (the test can fail). A
mechanism added to a registry is audited here without a new test. The figures: docs/audit.md,
"Per-mechanism audit" (`python tests/privacy/test_mechanism_audit.py` prints them).

The updates are drawn as one release of a vector of `runs` equal values (iid noise per entry, the
law of each scalar release); the selections one per key (`jax.vmap`).

AboveThreshold (`dpgcd_jax.privacy.bounds`, the private feature bound, drawn through the layer's
`DiscreteLaplaceNoise`) is audited the same way on the worst-case pair of its proof.
"""

import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import host_release
from dpgcd_jax import mechanisms
from dpgcd_jax import release_mechanisms
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import calibration
from dpgcd_jax.privacy import distinguisher
from dpgcd_jax.privacy.ledger import Ledger
from dpgcd_jax.solvers import greedy

REGISTRIES = {"selection": mechanisms.SELECTIONS, "update": mechanisms.UPDATES}


def _params(kinds):
  """(kind, name) of every mechanism of those registries; the discrete ones are slow (their exact
  samplers take 8-30 s here on CPU, compilation included: about 50 s for the three)."""
  return [pytest.param(kind, name, marks=pytest.mark.slow) if mechanisms.is_discrete(mechanism) else (kind, name)
          for kind in kinds for name, mechanism in REGISTRIES[kind].items()]


MECHANISMS = _params(REGISTRIES)
UPDATES = _params(["update"])
EPSILON = 1.5  # the charged epsilon of one use, at the audit's delta
PURE_DELTA, DELTA = 1e-6, 1e-2  # the audit's delta: pure-DP events / the others (Gaussian)
SENSITIVITY = 0.01
VALUE = 0.0  # an update's value on D (D': VALUE + SENSITIVITY): a coordinate at its optimum, or an empty feature
CANDIDATES, GAP, OFFSET = 5, 2.0, 1.0  # selection: 5 scores near 1.0, coordinate 0 GAP Delta below
RUNS = {("update", False): 1_000_000, ("update", True): 200_000,
        ("selection", False): 400_000, ("selection", True): 50_000}  # per data set, by (kind, discrete)
POWER_RUNS = {"update": 100_000, "selection": 20_000}
CHUNK = {"update": 100_000, "selection": 10_000}  # one compiled shape per mechanism


@functools.cache
def _claim(kind, name):
  """(multiplier, delta, charged epsilon): the multiplier whose event of one use costs `EPSILON`."""
  mechanism = REGISTRIES[kind][name]
  delta = PURE_DELTA if math.isfinite(mechanism.event(1.0).pure_epsilon) else DELTA
  multiplier, report = calibration.calibrate(lambda b: Ledger.of(("one use", mechanism.event(b), 1)),
                                             EPSILON, delta, key=("mechanism audit", kind, name))
  return multiplier, delta, report.epsilon


def _update_pair():
  """(v, v', Delta): float32 values and their exact difference (the sensitivity the pair meets)."""
  v, v2 = np.float32(VALUE), np.float32(VALUE + SENSITIVITY)
  return v, v2, float(v2) - float(v)


def _selection_pair():
  """(scores, scores', Delta): coordinate 0 up by Delta, the others down; Delta exact."""
  above = np.arange(CANDIDATES) > 0
  s = (OFFSET + GAP * SENSITIVITY * above).astype(np.float32)
  s2 = (s + np.where(above, -SENSITIVITY, SENSITIVITY)).astype(np.float32)
  return s, s2, float(np.max(np.abs(s2.astype(np.float64) - s.astype(np.float64))))


@functools.partial(jax.jit, static_argnums=0)
def _select(name, keys, scores, multiplier, sensitivity):
  p = scores.shape[0]
  one = lambda key: greedy.select_checked(key, scores, jnp.zeros(p), jnp.ones(p), dg.penalties.Zero(),
                                          multiplier, sensitivity, selection=name, rule="gs-s")
  return jax.vmap(one)(keys)


def _draws(kind, name, runs, shrink=1.0, seed=0):
  """Outputs on D and on D' (`runs` each) of the mechanism at its claim's multiplier, given the
  pair's sensitivity divided by `shrink` (1: correct; 4: a quarter of the noise it needs)."""
  multiplier = _claim(kind, name)[0]
  mechanism = REGISTRIES[kind][name]
  chunk = CHUNK[kind]
  pair = _update_pair() if kind == "update" else _selection_pair()
  out = []
  for key, inputs in zip(jax.random.split(jax.random.key(seed)), pair[:2], strict=True):
    parts = []
    for k in jax.random.split(key, -(-runs // chunk)):
      if kind == "update":  # a vector of `chunk` equal values: iid noise per entry
        parts.append(np.asarray(host_release.release(mechanism, k, jnp.full((chunk,), inputs, jnp.float32),
                                                     multiplier, pair[2] / shrink)))
        assert np.all(np.isfinite(parts[-1]))  # no failed (NaN) release
      else:
        j, ok = _select(name, jax.random.split(k, chunk), jnp.asarray(inputs), multiplier, pair[2] / shrink)
        assert bool(jnp.all(ok))
        parts.append(np.asarray(j))
    out.append(np.concatenate(parts)[:runs])
  return out


@functools.cache
def _audit_draws(kind, name):
  return _draws(kind, name, RUNS[kind, mechanisms.is_discrete(REGISTRIES[kind][name])])


def _bound(kind, name, draws, exact=False):
  """The distinguisher's bound: exact values for an index (and with `exact`), 200 quantile bins
  otherwise (a discrete release's integer has scale >= 8192: its exact values are too thin to
  estimate a ratio from; `exact` measures that too)."""
  bins = None if kind == "selection" or exact else 200
  return distinguisher.likelihood_ratio_audit(*draws, delta=_claim(kind, name)[1], bins=bins)


@pytest.mark.parametrize(("kind", "name"), MECHANISMS)
def test_a_correct_mechanism_stays_below_its_charged_epsilon(kind, name):
  charged = _claim(kind, name)[2]
  res = _bound(kind, name, _audit_draws(kind, name))
  assert res.epsilon_lower_bound <= charged, (kind, name, res)
  assert res.epsilon_lower_bound >= 0.6 * charged, (kind, name, res)  # and the audit gets close


@pytest.mark.parametrize(("kind", "name"), MECHANISMS)
def test_a_quarter_of_the_noise_is_refuted(kind, name):
  """The mechanism given `Delta / 4` while its inputs move by `Delta`: four times too little noise."""
  res = _bound(kind, name, _draws(kind, name, POWER_RUNS[kind], shrink=4.0, seed=1))
  assert res.epsilon_lower_bound > _claim(kind, name)[2], (kind, name, res)


@pytest.mark.parametrize(("kind", "name"), UPDATES)
def test_exact_values_refute_the_float_updates_not_the_discrete_ones(kind, name):
  """One bin per exact float32 output (bit pattern). A float update `v + scale Z` takes 2^23
  values per data set, most of which the neighbour cannot take (Mironov 2012;
  docs/secure_noise.md, "Range truncation, with the figure"): a value seen only on `D'` in the
  first half comes, held out, far more often from `D'`. The discrete updates release an integer
  on a public grid, the same set of values on both sides: no such test exists."""
  res = _bound(kind, name, _audit_draws(kind, name), exact=True)
  charged = _claim(kind, name)[2]
  if mechanisms.is_discrete(REGISTRIES[kind][name]):
    assert res.epsilon_lower_bound <= charged, (name, res)
  else:
    assert res.epsilon_lower_bound > charged, (name, res)


def test_the_distinguisher_on_known_laws():
  """Laplace of scale 1 shifted by 1 (epsilon = 1 exactly): close below 1; one law twice: about
  0; exact values with disjoint supports (even / odd integers): far above any claim."""
  rng = np.random.default_rng(0)
  x, y = rng.laplace(size=200_000), rng.laplace(size=200_000) + 1.0
  assert 0.9 < distinguisher.likelihood_ratio_audit(x, y, delta=1e-6).epsilon_lower_bound <= 1.0
  assert distinguisher.likelihood_ratio_audit(x, rng.laplace(size=200_000), delta=1e-6).epsilon_lower_bound < 0.05
  even = 2 * rng.integers(0, 1000, size=20_000)
  res = distinguisher.likelihood_ratio_audit(even, even + 1, delta=1e-6, bins=None)
  assert res.epsilon_lower_bound > 5.0, res


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"neighbour_outputs": np.zeros(9)}, "same size"),
    ({"delta": 1.0}, "delta"),
    ({"bins": 1}, "bins"),
    ({"targets": (0.0, 0.5)}, "targets"),
    ({"outputs": np.r_[np.zeros(9), np.nan]}, "finite"),
])
def test_the_distinguisher_names_a_bad_argument(kwargs, match):
  args = {"outputs": np.zeros(10), "neighbour_outputs": np.ones(10), "delta": 1e-6} | kwargs
  with pytest.raises(ValueError, match=match):
    distinguisher.likelihood_ratio_audit(args.pop("outputs"), args.pop("neighbour_outputs"), **args)


# AboveThreshold: at epsilon = 1.005 its scales are t_1 = 2 > 2 / epsilon and t_2 = 4 > 4 / epsilon, so the
# proof's bound 1 / t_1 + 2 / t_2 = 1 is just below the charged PureDp(epsilon). The pair (any query may
# move by 1): the first four queries up by 1 on D', the fifth down by 1 (output 4: the proof's worst case,
# the threshold's shift and the stopping query's 2 / t_2 at once); the sixth never fires.
AT_EPSILON = 1.005
AT_QUERIES = np.array([-2, -2, -2, -2, -2, -30], np.int32), np.array([-1, -1, -1, -1, -3, -30], np.int32)
AT_RUNS, AT_POWER_RUNS = 80_000, 20_000


def _above_threshold_law(queries, t_threshold, t_query):
  """P(output = k) of AboveThreshold on integer `queries` with discrete Laplace noises of integer scales
  (`P(z) ~ exp(-|z| / t)`), summed over the noisy threshold `rho` (tails beyond 64 t dropped: < e^-64)."""
  z = np.arange(-64 * t_query, 64 * t_query + 1)
  law = lambda t: np.exp(-np.abs(z) / t) / np.sum(np.exp(-np.abs(z) / t))
  threshold, below = law(t_threshold), np.cumsum(law(t_query))  # below[i] = P(nu <= z[i])
  out, survive = [], np.ones(z.size)
  for k, query in enumerate(queries):
    i = z - query - 1 - z[0]  # P(query + nu < rho) = P(nu <= rho - query - 1)
    fails = np.where(i < 0, 0.0, below[np.clip(i, 0, z.size - 1)])
    out.append(np.sum(threshold * survive * (1.0 - fails if k < len(queries) - 1 else 1.0)))  # last: or none
    survive = survive * fails
  return np.array(out)


def _above_threshold_draws(epsilon, runs, seed):
  run = jax.jit(jax.vmap(release_mechanisms.AboveThreshold().run, in_axes=(0, None, None)))
  keys = jax.random.split(jax.random.key(seed))
  out = [np.asarray(run(jax.random.split(k, runs), jnp.asarray(q), epsilon)) for k, q in zip(keys, AT_QUERIES,
                                                                                           strict=True)]
  assert all(np.all(o >= 0) for o in out)  # no failed draw
  return out


@pytest.mark.slow
def test_above_threshold_stays_below_its_charge_on_its_worst_case_pair_and_a_quarter_noise_is_refuted():
  """`dpgcd_jax.privacy.bounds` (AboveThreshold, the same exact integer mechanism in float mode and with
  `secure_noise=True`): the pair's exact epsilon (the law over the noisy threshold) is within the
  proof's `1 / t_1 + 2 / t_2 <= epsilon`, and the distinguisher's bound on the drawn indices stays below
  the charge and reaches most of the pair's epsilon; at 4 epsilon's scales (a quarter of the noise) it
  is refuted."""
  t_threshold, t_query, valid = (int(v) for v in bounds.above_threshold_scales(AT_EPSILON, np))
  assert valid and (t_threshold, t_query) == (2, 4)
  laws = [_above_threshold_law(q, t_threshold, t_query) for q in AT_QUERIES]
  exact = float(np.max(np.abs(np.log(laws[0] / laws[1]))))
  assert exact <= 1 / t_threshold + 2 / t_query <= AT_EPSILON
  draws = _above_threshold_draws(AT_EPSILON, AT_RUNS, seed=0)
  np.testing.assert_allclose(np.bincount(draws[0], minlength=6) / AT_RUNS, laws[0], atol=0.01)  # the law drawn
  res = distinguisher.likelihood_ratio_audit(*draws, delta=PURE_DELTA, bins=None)
  assert 0.6 * exact <= res.epsilon_lower_bound <= AT_EPSILON, res
  power = distinguisher.likelihood_ratio_audit(*_above_threshold_draws(4 * AT_EPSILON, AT_POWER_RUNS, seed=1),
                                               delta=PURE_DELTA, bins=None)
  assert power.epsilon_lower_bound > AT_EPSILON, power


if __name__ == "__main__":  # the table of docs/audit.md, "Per-mechanism audit"
  print("| mechanism | multiplier | delta | charged epsilon | runs | likelihood ratio | exact values | 1/4 noise |")
  print("|---|---|---|---|---|---|---|---|")
  for kind, name in [(k, n) for k, registry in REGISTRIES.items() for n in registry]:
    start = time.perf_counter()
    multiplier, delta, charged = _claim(kind, name)
    draws = _audit_draws(kind, name)
    ratio = _bound(kind, name, draws).epsilon_lower_bound
    exact = _bound(kind, name, draws, exact=True).epsilon_lower_bound if kind == "update" else ratio
    power = _bound(kind, name, _draws(kind, name, POWER_RUNS[kind], shrink=4.0, seed=1)).epsilon_lower_bound
    print(f"| {kind} `{name}` | {multiplier:.4g} | {delta:g} | {charged:.3f} | {draws[0].size:,} | {ratio:.3f} | "
          f"{exact:.3f} | {power:.2f} | {time.perf_counter() - start:.0f} s")
