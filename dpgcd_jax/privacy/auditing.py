"""Empirical privacy audit: a statistical lower bound on the epsilon of a mechanism.

An (epsilon, delta)-DP mechanism `A` limits every test that guesses, from one output, whether
it was computed on `D` or on a neighbour `D'`: a test that says "D'" with false-positive
rate `FPR = P(test says D' | D)` and false-negative rate `FNR = P(test says D | D')` must
satisfy (Kairouz, Oh & Viswanath 2015; Jagielski, Ullman & Oprea 2020; Nasr et al. 2021)

$$
\\mathrm{FPR} + e^{\\varepsilon} \\mathrm{FNR} \\ge 1 - \\delta, \\qquad
\\mathrm{FNR} + e^{\\varepsilon} \\mathrm{FPR} \\ge 1 - \\delta,
$$

hence `epsilon >= max(log((1 - delta - FNR) / FPR), log((1 - delta - FPR) / FNR))`.
[`audit`][dpgcd_jax.privacy.auditing.audit] runs the mechanism many times on `D` and on `D'` (`jax.vmap` over keys, in
chunks, one compilation), maps each output to a scalar statistic and uses a threshold test
`direction * (statistic - threshold) > 0  =>  "D'"`. The rates are replaced by one-sided
Clopper-Pearson upper bounds `a` (on FPR) and `b` (on FNR), each at level
`(1 - confidence) / 2` (Bonferroni), which gives

$$
\\hat\\varepsilon_{lb} = \\max\\Big(0,\\; \\log\\frac{1 - \\delta - b}{a},\\;
\\log\\frac{1 - \\delta - a}{b}\\Big),
$$

a lower bound on the true epsilon with probability at least `confidence`. The statistic's
direction (by default), the threshold and the test direction are chosen on the first half of
the runs and the rates are estimated on the held-out second half, so the choice does not
bias the bound.

Reading the result: the audit proves nothing about a correct mechanism (the bound is only a
lower bound; how close it gets to the claim depends on the neighbours, the statistic and the
number of runs). A lower bound ABOVE the claimed epsilon means, with probability at least
`confidence`, that the claim is FALSE: a bug in clipping, noise scale or accounting, or
a data-dependent quantity (e.g. a data-derived smoothness `M` that differs between `D`
and `D'`) that the analysis treats as public.
[`dpgcd_jax.privacy.audit_neighbours`][] builds `D'` with the same public `M`, so only the
mechanism itself is audited.

Example (DP-GCD, one step, calibrated for epsilon = 1):

```python
import jax, jax.numpy as jnp, numpy as np
import dpgcd_jax as dg
from dpgcd_jax.privacy import accounting, audit_neighbours, auditing

X = np.random.default_rng(0).normal(size=(10, 3))
base = dg.make_problem(X, np.zeros(10), "squared", smoothness=np.ones(3))
D, D2 = audit_neighbours.adversarial_pair(base, index=0, feature_scale=1.0, target=1e6)
cal = accounting.calibrate_gcd(1.0, 1e-6, steps=1)
params = dg.dp_gcd.Params(1.0, 1.0, cal.selection_noise, cal.update_noise)
mechanism = lambda key, pb: dg.dp_gcd.run(pb, key, params, passes=1,
                                          store_objective=False).w
res = auditing.audit(mechanism, D, D2, key=jax.random.key(0), runs=100_000, delta=1e-6)
res.epsilon_lower_bound  # about 0.3 here; > 1 would refute the claim
```

References:
  * Jagielski, Ullman, Oprea. Auditing Differentially Private Machine Learning: How Private
    is Private SGD? NeurIPS 2020.
  * Nasr, Song, Thakurta, Papernot, Carlini. Adversary Instantiation: Lower Bounds for
    Differentially Private Machine Learning. IEEE S&P 2021.
  * Kairouz, Oh, Viswanath. The Composition Theorem for Differential Privacy. ICML 2015.
  * Clopper, Pearson. The use of confidence or fiducial limits illustrated in the case of
    the binomial. Biometrika 1934.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from dpgcd_jax import _validate
from dpgcd_jax import problem as problem_lib

Array = jax.Array
Mechanism = Callable[[Array, problem_lib.Problem], Any]

# Number of candidate thresholds scanned on the selection half.
_NUM_THRESHOLDS = 1001


class AuditResult(NamedTuple):
  """Outcome of [`audit`][dpgcd_jax.privacy.auditing.audit] (host floats).

  The test says "D'" iff `direction * (statistic - threshold) > 0`.

  Attributes:
    epsilon_lower_bound: `max(0, log((1 - delta - b) / a), log((1 - delta - a) / b))` with the
      Clopper-Pearson upper bounds `a`, `b`; a lower bound on the true epsilon with
      probability >= `confidence`.
    false_positive_rate: empirical `P(test says D' | D)` on the held-out runs.
    false_negative_rate: empirical `P(test says D | D')` on the held-out runs.
    false_positive_upper: `a`, one-sided Clopper-Pearson upper bound on the FPR.
    false_negative_upper: `b`, the same for the FNR.
    threshold: the threshold of the test (chosen on the selection half).
    direction: +1 or -1, the side of the threshold that says "D'".
    runs: runs per data set (half select the test, half are held out).
    held_out_runs: runs per data set used for the rates.
    confidence: the confidence of the bound.
    delta: the delta of the claim the bound refers to.
  """

  epsilon_lower_bound: float
  false_positive_rate: float
  false_negative_rate: float
  false_positive_upper: float
  false_negative_upper: float
  threshold: float
  direction: int
  runs: int
  held_out_runs: int
  confidence: float
  delta: float


# ----------------------------------------------------------------------------------------
# Clopper-Pearson bounds and the epsilon of a test.
# ----------------------------------------------------------------------------------------


def clopper_pearson_upper(successes: Any, trials: Any, alpha: float) -> np.ndarray:
  """One-sided `1 - alpha` Clopper-Pearson upper bound on a binomial proportion.

  `Beta^{-1}(1 - alpha; k + 1, n - k)`, and 1 for `k = n`: `P(p <= bound) >= 1 - alpha`
  for every true `p`. Vectorized over `successes` / `trials`.
  """
  k = np.asarray(successes, dtype=float)
  n = np.asarray(trials, dtype=float)
  with np.errstate(invalid="ignore", divide="ignore"):
    bound = special.betaincinv(k + 1.0, n - k, 1.0 - alpha)
  return np.where(k >= n, 1.0, bound)


def clopper_pearson_lower(successes: Any, trials: Any, alpha: float) -> np.ndarray:
  """One-sided `1 - alpha` Clopper-Pearson lower bound: `Beta^{-1}(alpha; k, n - k + 1)`."""
  k = np.asarray(successes, dtype=float)
  n = np.asarray(trials, dtype=float)
  with np.errstate(invalid="ignore", divide="ignore"):
    bound = special.betaincinv(k, n - k + 1.0, alpha)
  return np.where(k <= 0, 0.0, bound)


def epsilon_from_rates(fpr: Any, fnr: Any, delta: float) -> np.ndarray:
  """`max(0, log((1 - delta - fnr) / fpr), log((1 - delta - fpr) / fnr))` (vectorized).

  With upper confidence bounds for `fpr` and `fnr` this is a lower bound on epsilon.
  """
  fpr, fnr = np.asarray(fpr, dtype=float), np.asarray(fnr, dtype=float)
  with np.errstate(divide="ignore", invalid="ignore"):
    first = np.log(np.maximum(1.0 - delta - fnr, 0.0)) - np.log(fpr)
    second = np.log(np.maximum(1.0 - delta - fpr, 0.0)) - np.log(fnr)
  out = np.fmax(first, second)
  return np.maximum(np.where(np.isnan(out), 0.0, out), 0.0)


def _rates(null: np.ndarray, alt: np.ndarray, thresholds: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
  """Counts of `null > t` (false positives) and `alt <= t` (false negatives); sorted inputs."""
  fp = null.size - np.searchsorted(null, thresholds, side="right")
  fn = np.searchsorted(alt, thresholds, side="right")
  return fp, fn


def _choose_test(null: np.ndarray, alt: np.ndarray, delta: float, alpha: float
                 ) -> tuple[float, int]:
  """Threshold and direction of the test, chosen on the selection half.

  Candidates: `_NUM_THRESHOLDS` quantiles of the pooled statistics at logit-spaced levels
  (dense in the tails, where the strongest tests live). Each candidate is scored by the
  Clopper-Pearson bound at the Bonferroni level `alpha / (4 K)` (two rates, two directions,
  `K` candidates): a bound that holds for all candidates at once, which favours thresholds with enough counts
  on both sides instead of the luckiest tail (the winner's curse). This only steers the
  choice; the validity of the audit rests on the held-out half.
  """
  pooled = np.concatenate([null, alt])
  m = pooled.size
  levels = special.expit(np.linspace(-1.0, 1.0, _NUM_THRESHOLDS) * special.logit(1.0 - 0.5 / m))
  candidates = np.unique(np.concatenate([np.quantile(pooled, levels), [pooled.min() - 1.0]]))
  level = alpha / (2.0 * 2 * candidates.size)
  best = (-1.0, 0.0, 1)
  for direction in (1, -1):
    s0, s1 = np.sort(direction * null), np.sort(direction * alt)
    ts = direction * candidates
    fp, fn = _rates(s0, s1, ts)
    eps = epsilon_from_rates(clopper_pearson_upper(fp, s0.size, level),
                             clopper_pearson_upper(fn, s1.size, level), delta)
    i = int(np.argmax(eps))
    if eps[i] > best[0]:
      best = (float(eps[i]), float(candidates[i]), direction)
  return best[1], best[2]


# ----------------------------------------------------------------------------------------
# The audit.
# ----------------------------------------------------------------------------------------


def _batched(mechanism: Mechanism, statistic: Callable[[Array], Array] | None):
  def one(key, problem):
    out = mechanism(key, problem)
    if statistic is None:
      return jnp.ravel(jnp.asarray(out))
    return jnp.asarray(statistic(out)).reshape(())

  return jax.jit(jax.vmap(one, in_axes=(0, None)))


def _collect(fn, problem: problem_lib.Problem, keys: Array, runs: int, chunk: int) -> np.ndarray:
  outs = [np.asarray(fn(keys[i:i + chunk], problem)) for i in range(0, keys.shape[0], chunk)]
  return np.concatenate(outs)[:runs]


def audit(
    mechanism: Mechanism,
    problem: problem_lib.Problem,
    neighbour: problem_lib.Problem,
    *,
    key: Array,
    runs: int,
    delta: float,
    statistic: Callable[[Array], Array] | None = None,
    confidence: float = 0.95,
    chunk: int = 10_000,
) -> AuditResult:
  """Lower-bounds the epsilon of `mechanism` from `runs` runs on each of two neighbours.

  Procedure (see the module docstring for the bound):

  1. `runs` independent keys per data set; `mechanism(key, problem)` is mapped over them
     with `jax.jit(jax.vmap(...))` in chunks of `chunk` keys (the last chunk is padded), so
     the audit compiles ONCE for both data sets (they have the same shapes). Do not close over
     the data set: take it as the argument.
  2. Each output becomes a scalar: `statistic(output)` when given (computed inside the
     jitted map); by default the projection of the flattened output onto the difference of
     the mean outputs `mean(A(D')) - mean(A(D))` estimated on the selection half (for
     DP-GCD: a weighted sum of the noisy steps, large when the neighbour pushes the model
     in its direction). The default keeps the outputs: `2 * runs * output size` floats.
  3. On the first half of the runs (`runs // 2`), the threshold and direction of the test
     maximizing a Clopper-Pearson bound (made conservative over the ~1000 candidate
     thresholds, to avoid picking a lucky tail) are chosen; on the held-out rest the rates
     are counted and bounded at level `(1 - confidence) / 2` each.

  Args:
    mechanism: `mechanism(key, problem) -> output` (any array), e.g.
      `lambda k, pb: dg.dp_gcd.run(pb, k, params, passes=1, store_objective=False).w`.
    problem: the data set `D` (a [`dpgcd_jax.Problem`][], or any pytree the mechanism
      takes).
    neighbour: `D'`, same structure and shapes (see
      [`adversarial_neighbour`][dpgcd_jax.privacy.audit_neighbours.adversarial_neighbour]).
    key: a JAX PRNG key (required).
    runs: runs per data set, >= 4 (e.g. 20_000 to 200_000).
    delta: the delta of the claim (enters the bound).
    statistic: maps one output to a scalar; default described above.
    confidence: in (0, 1); the bound holds with at least this probability.
    chunk: keys per vmapped call (bounds memory: one chunk holds `chunk` copies of the
      mechanism's working set).

  Returns:
    An [`AuditResult`][dpgcd_jax.privacy.auditing.AuditResult].

  Raises:
    ValueError: for a bad argument (the message names it) or data sets of different shapes.
  """
  _validate.check_key("key", key)
  runs = _validate.check_int("runs", runs, low=4)
  chunk = _validate.check_int("chunk", chunk, low=1)
  _validate.check_number("delta", delta, low=0.0, high=1.0, high_open=True)
  _validate.check_number("confidence", confidence, low=0.0, high=1.0, low_open=True,
                         high_open=True)
  shapes = lambda t: jax.tree.map(lambda x: (jnp.shape(x), jnp.result_type(x)), t)
  # The ignore: jaxlib ships no stub for PyTreeDef (mypy sees an unresolved type, with no `!=`).
  other_structure = jax.tree.structure(problem) != jax.tree.structure(neighbour)  # type: ignore[operator]
  if other_structure or shapes(problem) != shapes(neighbour):
    raise ValueError("Expected neighbour to have the structure and shapes of problem.")
  chunk = min(chunk, runs)
  padded = -(-runs // chunk) * chunk
  key_d, key_n = jax.random.split(key)
  fn = _batched(mechanism, statistic)
  out_d = _collect(fn, problem, jax.random.split(key_d, padded), runs, chunk)
  out_n = _collect(fn, neighbour, jax.random.split(key_n, padded), runs, chunk)
  if statistic is None:
    half = runs // 2
    out_d, out_n = out_d.reshape(runs, -1), out_n.reshape(runs, -1)
    projection = out_n[:half].mean(axis=0) - out_d[:half].mean(axis=0)
    out_d, out_n = out_d @ projection, out_n @ projection
  return audit_statistics(out_d, out_n, delta=delta, confidence=confidence)


def audit_statistics(statistics: Any, neighbour_statistics: Any, *, delta: float,
                     confidence: float = 0.95) -> AuditResult:
  """The audit's bound from scalar statistics of runs on `D` and on `D'` (same count).

  For mechanisms that are not a jittable function of `(key, problem)`, e.g. `fit` called
  exactly as a user does (with a batch of keys): compute one scalar per run, then call this.
  The first half of each array chooses the test, the second half gives the rates (see
  [`audit`][dpgcd_jax.privacy.auditing.audit]).
  """
  out_d = np.asarray(statistics, dtype=float).ravel()
  out_n = np.asarray(neighbour_statistics, dtype=float).ravel()
  if out_d.shape != out_n.shape or out_d.size < 4:
    raise ValueError(f"Expected two arrays of the same size >= 4, got sizes {out_d.size} and "
                     f"{out_n.size}.")
  _validate.check_number("delta", delta, low=0.0, high=1.0, high_open=True)
  _validate.check_number("confidence", confidence, low=0.0, high=1.0, low_open=True,
                         high_open=True)
  if not (np.all(np.isfinite(out_d)) and np.all(np.isfinite(out_n))):
    raise ValueError("Expected the mechanism's statistic to be finite on every run.")
  alpha = 1.0 - float(confidence)
  delta = float(delta)
  runs = out_d.size
  half = runs // 2
  threshold, direction = _choose_test(out_d[:half], out_n[:half], delta, alpha)
  null, alt = np.sort(direction * out_d[half:]), np.sort(direction * out_n[half:])
  fp, fn_count = _rates(null, alt, np.array([direction * threshold]))
  held = runs - half
  a = float(clopper_pearson_upper(fp[0], held, alpha / 2))
  b = float(clopper_pearson_upper(fn_count[0], held, alpha / 2))
  return AuditResult(
      epsilon_lower_bound=float(epsilon_from_rates(a, b, delta)),
      false_positive_rate=float(fp[0]) / held,
      false_negative_rate=float(fn_count[0]) / held,
      false_positive_upper=a,
      false_negative_upper=b,
      threshold=threshold,
      direction=direction,
      runs=runs,
      held_out_runs=held,
      confidence=float(confidence),
      delta=delta,
  )
