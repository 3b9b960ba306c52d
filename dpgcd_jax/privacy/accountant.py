"""One privacy budget across a workflow on ONE data set: scales, tuning, fitting, scoring.

An [`Accountant`][dpgcd_jax.privacy.accountant.Accountant] holds a total `(epsilon, delta)`
and the running [`PrivacyReport`][dpgcd_jax.privacy.PrivacyReport] of every private step
charged to it. Each step makes two calls:

1. `accountant.check(epsilon, delta, what)` BEFORE it reads any data: it raises a
   [`BudgetError`][dpgcd_jax.privacy.accountant.BudgetError] (a ValueError) naming the
   remaining budget and the request when the planned `(epsilon, delta)`, composed by basic
   composition onto what is spent, would exceed the total. Nothing has been read, so the
   refusal reveals nothing about the data.
2. `accountant.spend(report)` after it ran, with the step's report: the accountant composes
   it onto the spent report (`spent + report`, the ledger's exact routes, see below) and
   raises if the total is exceeded. `spend` alone comes too late to protect the data (the
   step has read them; its output must then be discarded); it exists because some costs are
   only known after the run. `check` first, always.

Composition (the guarantee). Let the steps `M_1, ..., M_k` run in sequence on the same data,
each chosen adaptively from the previous outputs, `M_i` with report `(eps_i, delta_i)` and
ledger entries `L_i`. The spent report is `r_1 + ... + r_k`
([`PrivacyReport.__add__`][dpgcd_jax.privacy.PrivacyReport]): its entries are
`L_1 + ... + L_k` and its epsilon, at `delta_1 + ... + delta_k`, is the smaller of two valid
certificates of the whole adaptive sequence: the ledger's best route over the concatenated
entries (each route composes adaptively chosen mechanisms) and, at each `+`, basic
composition `eps_a + eps_b` at `delta_a + delta_b` (Dwork & Roth 2014, Thm 3.16). Hence the
whole sequence is `(spent.epsilon, spent.delta)`-DP for replace-one neighbours, and `spend`
keeps `spent.epsilon <= epsilon` and `spent.delta <= delta` (the totals).

`check` is conservative: a step whose report is `(eps', delta')` with `eps' <= eps` and
`delta' <= delta` (the planned values) composes to at most `spent.epsilon + eps` at
`spent.delta + delta` (basic composition), so a step that passes `check` and spends what it
planned never makes `spend` raise. `remaining()` is `(epsilon - spent.epsilon,
delta - spent.delta)` in the same sense: any step within it fits.

Three fine points:

* The refusal must not depend on the data: every report of this library has an
  `(epsilon, delta)` computed from public inputs (calibrated, or stated), so neither does a
  refusal by `spend`.
* Float sums round (0.1 + 0.2 + 0.7 > 1 by one ulp): a total is enforced up to a relative
  `RTOL = 1e-9`, i.e. the stated guarantee is for `(epsilon (1 + 1e-9), delta (1 + 1e-9))`.
* Steps outside the guarantee (`report.not_private`) stay listed in `spent.not_private`:
  the accountant's total covers them only when `spent.end_to_end` is True.

A step may take the accountant as an argument, or use the active one: `with accountant:`
makes it active in the current context (thread- and asyncio-safe; blocks nest), and
[`current_accountant`][dpgcd_jax.privacy.accountant.current_accountant] returns it (`None`
outside). Functions that take `accountant=None` charge the active one when there is one
([`resolve`][dpgcd_jax.privacy.accountant.resolve]). This follows diffprivlib's
`BudgetAccountant` (`check`, `spend`, `remaining`, a default accountant) and Tumult
Analytics' `Session` (one budget per data set, queries refused when they would exceed it).

Examples:
  >>> from dpgcd_jax.privacy import Accountant, Gaussian, Laplace, Ledger, PrivacyReport
  >>> acct = Accountant(1.0, 1e-6)
  >>> acct.check(0.65, 1e-6, "a fit")                     # before reading the data
  >>> fit = Ledger.of(("update", Gaussian(20.0), 10)).report(1e-6)
  >>> spent = acct.spend(fit)
  >>> acct.check(0.7, 0.0, "a score")  # doctest: +ELLIPSIS
  Traceback (most recent call last):
  ...
  dpgcd_jax.privacy.accountant.BudgetError: a score refused, ... remaining budget is (epsilon=0.3518..., delta=0) ...
  >>> score = Ledger.of(("accuracy", Laplace(0.3), 1))
  >>> spent = acct.spend(PrivacyReport(score.entries, 0.3, 0.0, "basic"))
  >>> round(acct.spent.epsilon, 3), acct.spent.delta   # basic composition: 0.648 + 0.3
  (0.924, 1e-06)
"""

from __future__ import annotations

import contextvars
import math
import numbers
from typing import Any

from dpgcd_jax.privacy import ledger as ledger_lib

RTOL = 1e-9  # relative tolerance of the totals (float rounding of sums; module docstring)


class BudgetError(ValueError):
  """A step refused by an [`Accountant`][dpgcd_jax.privacy.accountant.Accountant]: it would
  exceed the total. The message names the remaining budget and the request."""


class ArgumentTypeError(TypeError, ValueError):
  """An argument of the wrong type (a string where a number is expected): both a TypeError
  and a ValueError, so code catching either sees it."""


def check_real(name: str, x: Any, *, low: float = -math.inf, high: float = math.inf,
               low_open: bool = False, high_open: bool = False) -> float:
  """`x` as a finite float in the interval `[low, high]` (ends open if asked).

  Accepts Python and NumPy real numbers and 0-d arrays of a real dtype; a string (`"1"`), a
  bool, a complex number or anything else raises
  [`ArgumentTypeError`][dpgcd_jax.privacy.accountant.ArgumentTypeError], a value out of range
  or not finite a ValueError; both messages name the argument.
  """
  value = x
  if not isinstance(x, numbers.Real) and getattr(x, "shape", None) == () and hasattr(x, "dtype"):
    kind = getattr(x.dtype, "kind", "")  # a 0-d NumPy / JAX array: its dtype decides
    value = x.item() if kind in "iuf" and kind else x
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise ArgumentTypeError(f"Expected {name} to be a real number, got {name}={x!r} "
                            f"({type(x).__name__}).")
  value = float(value)
  lo = "(" if low_open else "["
  hi = ")" if high_open else "]"
  bad = (not math.isfinite(value) or (value <= low if low_open else value < low)
         or (value >= high if high_open else value > high))
  if bad:
    raise ValueError(f"Expected {name} in {lo}{low:g}, {high:g}{hi}, got {name}={value!r}.")
  return value


def _pair(epsilon: float, delta: float) -> str:
  return f"(epsilon={epsilon:.6g}, delta={delta:.3g})"


class Accountant:
  """A total privacy budget `(epsilon, delta)` for every private step on ONE data set.

  Args:
    epsilon: the total epsilon, a real number > 0.
    delta: the total delta, in `[0, 1)` (0: only pure-DP steps fit).

  Attributes:
    epsilon, delta: the totals.
    spent: the composed [`PrivacyReport`][dpgcd_jax.privacy.PrivacyReport] of every step
      charged so far (`None` before the first).
    reports: the steps' own reports, in order.

  The composition statement and the call sequence (`check` before reading the data, `spend`
  after) are in the module docstring. An accountant is for one data set: charge steps on
  disjoint data to separate accountants (or to one, conservatively).
  """

  def __init__(self, epsilon: float, delta: float = 0.0):
    self._epsilon = check_real("epsilon", epsilon, low=0.0, low_open=True)
    self._delta = check_real("delta", delta, low=0.0, high=1.0, high_open=True)
    self._spent: ledger_lib.PrivacyReport | None = None
    self._reports: tuple[ledger_lib.PrivacyReport, ...] = ()
    self._tokens: list[contextvars.Token] = []

  @property
  def epsilon(self) -> float:
    return self._epsilon

  @property
  def delta(self) -> float:
    return self._delta

  @property
  def spent(self) -> ledger_lib.PrivacyReport | None:
    return self._spent

  @property
  def reports(self) -> tuple[ledger_lib.PrivacyReport, ...]:
    return self._reports

  def _spent_pair(self) -> tuple[float, float]:
    return (0.0, 0.0) if self._spent is None else (self._spent.epsilon, self._spent.delta)

  def remaining(self) -> tuple[float, float]:
    """`(epsilon, delta)` left: any step within it fits (`total - spent`, each at least 0)."""
    eps, delta = self._spent_pair()
    return max(self._epsilon - eps, 0.0), max(self._delta - delta, 0.0)

  def _exceeds(self, epsilon: float, delta: float) -> bool:
    return epsilon > self._epsilon * (1.0 + RTOL) or delta > self._delta * (1.0 + RTOL)

  def _refusal(self, what: str, when: str, epsilon: float, delta: float, verb: str = "plans") -> BudgetError:
    eps_left, delta_left = self.remaining()
    eps, dlt = self._spent_pair()
    return BudgetError(
        f"{what} refused, {when}: it {verb} {_pair(epsilon, delta)} but the remaining budget "
        f"is {_pair(eps_left, delta_left)} of the total {_pair(self._epsilon, self._delta)} "
        f"(spent: epsilon={eps:.6g}, delta={dlt:.3g}, over {len(self._reports)} step(s)).")

  def check(self, epsilon: float, delta: float = 0.0, what: str = "a private step") -> None:
    """Raises [`BudgetError`][dpgcd_jax.privacy.accountant.BudgetError] (naming the remaining
    budget and the request) if a step of `(epsilon, delta)` would exceed the total.

    Call it BEFORE the step reads any data. Basic composition onto the spent report:
    refused when `spent.epsilon + epsilon > total epsilon` or `spent.delta + delta > total
    delta` (module docstring). `what` names the step in the message.
    """
    epsilon = check_real("epsilon", epsilon, low=0.0)
    delta = check_real("delta", delta, low=0.0, high=1.0, high_open=True)
    if not isinstance(what, str):
      raise ArgumentTypeError(f"Expected what to be a str, got what={what!r}.")
    eps, dlt = self._spent_pair()
    if self._exceeds(eps + epsilon, dlt + delta):
      raise self._refusal(what, "before reading the data", epsilon, delta)

  def spend(self, report: ledger_lib.PrivacyReport, what: str | None = None) -> ledger_lib.PrivacyReport:
    """Records a step's report; returns the new spent report (`spent + report`).

    Raises [`BudgetError`][dpgcd_jax.privacy.accountant.BudgetError] (and records nothing)
    when the composed report exceeds the total. The step has run by then: discard its
    output. Call [`check`][dpgcd_jax.privacy.accountant.Accountant.check] before the step
    reads the data; `spend` after it. `what` names the step in the message (default: the
    report's first entry label).
    """
    if not isinstance(report, ledger_lib.PrivacyReport):
      raise ArgumentTypeError(f"Expected report to be a PrivacyReport (e.g. an estimator's privacy_ "
                              f"or a fit's result.privacy), got report={report!r}.")
    if what is None:
      what = report.entries[0].label if report.entries else "a private step"
    spent = report if self._spent is None else self._spent + report
    if self._exceeds(spent.epsilon, spent.delta):
      raise self._refusal(what, "after it ran (discard its output; call check first)",
                          report.epsilon, report.delta, "spent")
    self._spent = spent
    self._reports = self._reports + (report,)
    return spent

  def __enter__(self) -> Accountant:
    self._tokens.append(_ACTIVE.set(_ACTIVE.get() + (self,)))
    return self

  def __exit__(self, *exc: Any) -> None:
    _ACTIVE.reset(self._tokens.pop())

  def __copy__(self) -> Accountant:
    """The accountant itself: a copy would hold a second budget for the same data."""
    return self

  def __deepcopy__(self, memo: dict) -> Accountant:
    """The accountant itself (scikit-learn's `clone` deep-copies parameters: an estimator's
    `accountant=` must stay the one budget). Another process (joblib `n_jobs > 1`) still gets
    a pickled copy, whose charges this one never sees: charge from one process."""
    del memo
    return self

  @staticmethod
  def current() -> Accountant | None:
    """The active accountant (the innermost `with accountant:` block), or None."""
    return current_accountant()

  def __repr__(self) -> str:
    eps, delta = self._spent_pair()
    eps_left, delta_left = self.remaining()
    return (f"Accountant(epsilon={self._epsilon:.6g}, delta={self._delta:.3g}; spent "
            f"({eps:.6g}, {delta:.3g}) over {len(self._reports)} step(s), remaining "
            f"({eps_left:.6g}, {delta_left:.3g}))")


_ACTIVE: contextvars.ContextVar[tuple[Accountant, ...]] = contextvars.ContextVar(
    "dpgcd_jax_active_accountants", default=())


def current_accountant() -> Accountant | None:
  """The active accountant (the innermost `with accountant:` block), or None."""
  active = _ACTIVE.get()
  return active[-1] if active else None


def resolve(accountant: Accountant | None) -> Accountant | None:
  """`accountant` itself, or the active one when it is None (None when none is active).

  What a function's `accountant=None` argument means; ValueError naming `accountant` for
  anything else.
  """
  if accountant is None:
    return current_accountant()
  if not isinstance(accountant, Accountant):
    raise ArgumentTypeError(f"Expected accountant to be a dpgcd_jax.privacy.Accountant or None, "
                            f"got accountant={accountant!r}.")
  return accountant
