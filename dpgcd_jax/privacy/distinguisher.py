"""A DP-Sniper-style distinguisher: an estimated likelihood-ratio test and its epsilon lower bound.

Where [`audit`][dpgcd_jax.privacy.auditing.audit] thresholds one scalar statistic, this test
orders the outputs themselves by how much more likely they are on `D'` than on `D`, as
DP-Sniper does (Bichsel, Steffen, Bogunovic & Vechev 2021) with a histogram in place of its
classifier:

1. The first half of the runs on each data set estimates the likelihood ratio of each bin,
   `(c'_i + 1/2) / (c_i + 1/2)` from the counts `c_i`, `c'_i` of the runs on `D`, `D'` in
   bin `i`. A bin is a quantile interval of the pooled first half (`bins` of them, dense in the
   tails), or, with `bins=None`, one exact output value (its bit pattern: a float's exact
   value, a selection's index, a discrete release's integer).
2. For each target false-positive rate `c` in `targets`, the test "the output lies in the
   top set" says `D'`, the top set holding the bins of highest ratio whose first-half
   false-positive rate stays within `c` (the first bin at least). An output of the held-out
   half that fell in no bin of the first half (possible with exact values) is never in the
   top set.
3. On the held-out second half, each test's rates get one-sided Clopper-Pearson upper bounds
   `a`, `b` at the Bonferroni level `(1 - confidence) / (2 K)` for the `K` tests, and

$$
\\hat\\varepsilon_{lb} = \\max_{\\text{tests}} \\max\\Big(0,\\; \\log\\frac{1 - \\delta - b}{a},\\;
\\log\\frac{1 - \\delta - a}{b}\\Big)
$$

is a lower bound on the epsilon of any (epsilon, delta)-DP claim for the pair, with probability
at least `confidence` (the test is fixed before the held-out half is seen; the second
expression is the complement set read in the other direction, so targets near 1 test that
direction). The statement and the bound are those of
[`dpgcd_jax.privacy.auditing`][], whose `clopper_pearson_upper` and `epsilon_from_rates`
this module uses.

Reading it: a bound above a mechanism's claimed epsilon refutes the claim; a bound below it
proves nothing. With exact values the test sees what rounding does: a float release
`value + scale * Z` takes, on `D`, values that it cannot take on `D'` (Mironov 2012), and a
value seen on `D'` only in the first half is, held out, far likelier from `D'`.
`tests/privacy/test_mechanism_audit.py` runs it on every mechanism of
`dpgcd_jax.mechanisms`; the figures are in docs/audit.md ("Per-mechanism audit").

References:
  * Bichsel, Steffen, Bogunovic, Vechev. DP-Sniper: Black-Box Discovery of Differential
    Privacy Violations using Classifiers. IEEE S&P 2021.
  * Mironov. On Significance of the Least Significant Bits for Differential Privacy. CCS 2012.
"""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import numpy as np
from scipy import special

from dpgcd_jax import _validate
from dpgcd_jax.privacy import auditing

TARGETS = (1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 0.5, 0.7, 0.9, 0.97, 0.99)
"""The default target false-positive rates (first half), one test each."""


class DistinguisherResult(NamedTuple):
  """Outcome of [`likelihood_ratio_audit`][dpgcd_jax.privacy.distinguisher.likelihood_ratio_audit].

  Attributes:
    epsilon_lower_bound: the largest bound over the tests (module docstring).
    false_positive_rate: the best test's held-out `P(says D' | D)`.
    false_negative_rate: the best test's held-out `P(says D | D')`.
    false_positive_upper: its Clopper-Pearson upper bound `a`.
    false_negative_upper: its bound `b`.
    target: the best test's target false-positive rate.
    tests: the number `K` of distinct tests (the Bonferroni factor).
    bins: the number of bins of the first half.
    runs: runs per data set; held_out_runs: those that give the rates.
    confidence, delta: as given.
  """

  epsilon_lower_bound: float
  false_positive_rate: float
  false_negative_rate: float
  false_positive_upper: float
  false_negative_upper: float
  target: float
  tests: int
  bins: int
  runs: int
  held_out_runs: int
  confidence: float
  delta: float


def _bin(first: np.ndarray, held: np.ndarray, bins: int | None) -> tuple[np.ndarray, np.ndarray, int]:
  """Bin numbers of the first half and of the held-out half (-1: in no bin), and the count."""
  if bins is None:  # exact values: a float by its bit pattern (so -0.0 and 0.0 differ)
    exact = lambda x: x.view(f"u{x.itemsize}") if x.dtype.kind == "f" else x
    first, held = exact(first), exact(held)
    values, codes = np.unique(first, return_inverse=True)
    at = np.minimum(np.searchsorted(values, held), values.size - 1)
    return codes.ravel(), np.where(values[at] == held, at, -1), values.size
  levels = special.expit(np.linspace(-1.0, 1.0, bins - 1) * special.logit(1.0 - 0.5 / first.size))
  edges = np.unique(np.quantile(first.astype(float), levels))
  place = lambda x: np.searchsorted(edges, x.astype(float), side="right")
  return place(first), place(held), edges.size + 1


def likelihood_ratio_audit(outputs: Any, neighbour_outputs: Any, *, delta: float,
                           bins: int | None = 200, targets: Any = TARGETS,
                           confidence: float = 0.95) -> DistinguisherResult:
  """Lower-bounds epsilon from scalar outputs of runs on `D` and on `D'` (module docstring).

  Args:
    outputs: one scalar output per run on `D` (any real or integer dtype; kept as given for
      `bins=None`, so a float32 release is binned by its float32 bits).
    neighbour_outputs: as many on `D'`. The first half of each chooses the tests, the
      second half gives the rates.
    delta: the delta of the claim (enters the bound).
    bins: the number of quantile bins, >= 2; `None`: one bin per exact value.
    targets: target false-positive rates in (0, 1), one test each.
    confidence: in (0, 1); the bound holds with at least this probability.

  Returns:
    A [`DistinguisherResult`][dpgcd_jax.privacy.distinguisher.DistinguisherResult].

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  out_d, out_n = np.ravel(np.asarray(outputs)), np.ravel(np.asarray(neighbour_outputs))
  if out_d.shape != out_n.shape or out_d.dtype != out_n.dtype or out_d.size < 4:
    raise ValueError(f"Expected two arrays of the same size >= 4 and dtype, got {out_d.size} "
                     f"{out_d.dtype} and {out_n.size} {out_n.dtype}.")
  _validate.check_number("delta", delta, low=0.0, high=1.0, high_open=True)
  _validate.check_number("confidence", confidence, low=0.0, high=1.0, low_open=True, high_open=True)
  if bins is not None:
    bins = _validate.check_int("bins", bins, low=2)
    if not (np.all(np.isfinite(out_d)) and np.all(np.isfinite(out_n))):
      raise ValueError("Expected finite outputs with bins (bins=None takes any value).")
  targets = np.asarray(targets, dtype=float).ravel()
  if targets.size == 0 or not np.all((targets > 0.0) & (targets < 1.0)):
    raise ValueError(f"Expected targets in (0, 1), got targets={targets.tolist()}.")
  runs = out_d.size
  half = runs // 2
  held = runs - half
  codes, held_codes, size = _bin(np.concatenate([out_d[:half], out_n[:half]]),
                                 np.concatenate([out_d[half:], out_n[half:]]), bins)
  c0 = np.bincount(codes[:half], minlength=size)
  c1 = np.bincount(codes[half:], minlength=size)
  order = np.argsort(-(c1 + 0.5) / (c0 + 0.5), kind="stable")
  rank = np.empty(size + 1, dtype=np.int64)
  rank[order] = np.arange(size)
  rank[size] = size  # the held-out outputs in no bin (code -1) rank last, never in a top set
  first_fpr = np.cumsum(c0[order]) / half
  tops, given_by = np.unique(np.maximum(np.searchsorted(first_fpr, targets, side="right"), 1),
                          return_index=True)  # top-set sizes, each once; the target that gave it
  held_rank = rank[np.where(held_codes < 0, size, held_codes)]
  r0, r1 = np.sort(held_rank[:held]), np.sort(held_rank[held:])
  fp = np.searchsorted(r0, tops)  # held-out runs on D in the top set (rank < top)
  fn = held - np.searchsorted(r1, tops)
  level = (1.0 - float(confidence)) / (2 * tops.size)
  a = auditing.clopper_pearson_upper(fp, held, level)
  b = auditing.clopper_pearson_upper(fn, held, level)
  eps = auditing.epsilon_from_rates(a, b, float(delta))
  i = int(np.argmax(eps))
  return DistinguisherResult(
      epsilon_lower_bound=float(eps[i]), false_positive_rate=float(fp[i]) / held,
      false_negative_rate=float(fn[i]) / held, false_positive_upper=float(a[i]),
      false_negative_upper=float(b[i]), target=float(targets[given_by[i]]), tests=int(tops.size), bins=int(size),
      runs=runs, held_out_runs=held, confidence=float(confidence), delta=float(delta))
