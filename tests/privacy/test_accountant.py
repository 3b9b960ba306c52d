"""`dpgcd_jax.privacy.accountant`: tests of report composition (`PrivacyReport.__add__`) and of the budget
`Accountant`."""

import copy
import math
import threading

import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax.privacy import Accountant
from dpgcd_jax.privacy import BudgetError
from dpgcd_jax.privacy import Gaussian
from dpgcd_jax.privacy import Laplace
from dpgcd_jax.privacy import Ledger
from dpgcd_jax.privacy import PrivacyReport
from dpgcd_jax.privacy import PureDp
from dpgcd_jax.privacy import accountant as accountant_lib
from dpgcd_jax.privacy import current_accountant


def _gaussian_fit(noise=20.0, steps=10, delta=1e-6, label="update"):
  return Ledger.of((label, Gaussian(noise), steps)).report(delta)


def _pure(epsilon, label="score"):
  return PrivacyReport(Ledger.of((label, Laplace(epsilon), 1)).entries, epsilon, 0.0, "basic")


R1 = _gaussian_fit(20.0, 10, 1e-6, "fit 1")
R2 = _gaussian_fit(15.0, 20, 1e-7, "fit 2")
R3 = Ledger.of(("selection", PureDp(0.05), 4), ("update", Laplace(0.1), 4)).report(1e-8)


# ------------------------------------------------------------------------------------------
# Reports compose by `+`.
# ------------------------------------------------------------------------------------------


def test_report_plus_report_is_the_ledgers_exact_composition_and_beats_basic():
  total = R1 + R2
  delta = R1.delta + R2.delta
  assert total.entries == R1.entries + R2.entries and total.delta == pytest.approx(delta, rel=1e-12)
  eps, route = Ledger(R1.entries + R2.entries).epsilon_and_route(delta)
  assert (total.epsilon, total.route) == (eps, route)  # the ledger's epsilon of the concatenated entries
  assert total.epsilon < R1.epsilon + R2.epsilon - 0.1  # strictly tighter than basic composition here


@pytest.mark.parametrize("a,b", [(R1, R3), (R3, R1), (R2, _pure(0.3)), (_pure(0.3), R2), (R3, R3)])
def test_report_sum_is_never_above_basic_composition(a, b):
  total = a + b
  assert total.epsilon <= a.epsilon + b.epsilon
  assert total.delta == pytest.approx(a.delta + b.delta, rel=1e-12)
  exact = Ledger(a.entries + b.entries).epsilon(a.delta + b.delta)
  assert total.epsilon == min(exact, a.epsilon + b.epsilon)


def test_pure_reports_compose_to_the_sum_at_delta_zero():
  total = _pure(0.2) + _pure(0.3, "other")
  assert (total.epsilon, total.delta, total.route) == (0.5, 0.0, "basic")


def test_sum_of_a_list_of_reports():
  total = sum([R1, R2, R3])
  assert total == (R1 + R2) + R3
  assert total.entries == R1.entries + R2.entries + R3.entries
  assert total.epsilon <= R1.epsilon + R2.epsilon + R3.epsilon
  assert sum([R1]) is R1


def test_report_sum_merges_notes_and_steps_outside_the_guarantee():
  a = R1.with_notes("n1").with_not_private("label set read from y")
  b = R3.with_notes("n1", "n2")
  total = a + b
  assert total.notes == ("n1", "n2") and total.not_private == ("label set read from y",)
  assert not total.end_to_end and (R1 + R3).end_to_end


def test_report_plus_a_number_or_a_ledger():
  with pytest.raises(TypeError):
    _ = R1 + 1
  with pytest.raises(TypeError):
    _ = 1 + R1
  ledger = Ledger.of(("score", Laplace(0.2), 1))
  assert (R1 + ledger).entries == R1.entries + ledger.entries
  assert (ledger + R1).entries == ledger.entries + R1.entries
  assert (R1 + ledger).epsilon <= R1.epsilon + 0.2


# ------------------------------------------------------------------------------------------
# The accountant.
# ------------------------------------------------------------------------------------------


def test_refusal_names_the_remaining_budget_and_the_request():
  acct = Accountant(1.0, 1e-6)
  acct.check(0.65, 1e-6, "fit")
  acct.spend(R1)
  eps_left, delta_left = acct.remaining()
  assert eps_left == pytest.approx(1.0 - R1.epsilon) and delta_left == 0.0
  with pytest.raises(BudgetError) as info:
    acct.check(0.5, 0.0, "the second fit")
  message = str(info.value)
  assert "the second fit refused, before reading the data" in message
  assert f"remaining budget is (epsilon={eps_left:.6g}, delta=0)" in message
  assert "plans (epsilon=0.5, delta=0)" in message and "total (epsilon=1, delta=1e-06)" in message
  assert isinstance(info.value, ValueError)
  with pytest.raises(BudgetError, match=r"remaining budget is \(epsilon=.*, delta=0\)"):
    acct.check(0.01, 1e-9, "a Gaussian step")  # no delta left
  acct.check(eps_left, 0.0, "the rest")  # exactly what remains fits
  assert acct.spent is R1 and acct.reports == (R1,)  # check never spends


def test_spent_is_the_exact_composition_of_the_steps():
  acct = Accountant(3.0, 1e-5)
  for report in (R1, R2, R3):
    acct.check(report.epsilon, report.delta)
    acct.spend(report)
  assert acct.spent == R1 + R2 + R3 and acct.reports == (R1, R2, R3)
  assert acct.spent.epsilon < R1.epsilon + R2.epsilon + R3.epsilon
  assert acct.remaining() == pytest.approx((3.0 - acct.spent.epsilon, 1e-5 - acct.spent.delta))


def test_a_step_that_passes_check_and_spends_its_plan_is_never_refused():
  rng = np.random.default_rng(0)
  acct = Accountant(2.0, 1e-5)
  while True:
    eps_left, delta_left = acct.remaining()
    report = _gaussian_fit(float(rng.uniform(5, 60)), int(rng.integers(1, 20)), float(rng.uniform(1e-7, 2e-6)))
    try:
      acct.check(report.epsilon, report.delta)
    except BudgetError:
      assert report.epsilon > eps_left or report.delta > delta_left
      break
    acct.spend(report)
  assert acct.spent.epsilon <= 2.0 and acct.spent.delta <= 1e-5


def test_float_rounding_of_the_total_is_tolerated():
  acct = Accountant(1.0)
  for eps in (0.1, 0.2, 0.7):  # 0.1 + 0.2 + 0.7 = 1.0000000000000002
    acct.check(eps)
    acct.spend(_pure(eps))
  assert acct.remaining() == (0.0, 0.0)
  with pytest.raises(BudgetError):
    acct.check(1e-6)


def test_spend_over_the_total_raises_and_records_nothing():
  acct = Accountant(1.0, 1e-6)
  acct.spend(_pure(0.5))
  with pytest.raises(BudgetError, match=r"after it ran .*it spent \(epsilon=0\.6"):
    acct.spend(_pure(0.6, "late"))
  with pytest.raises(BudgetError, match="delta"):
    acct.spend(_gaussian_fit(100.0, 1, 2e-6))
  assert acct.reports == (acct.spent,) and acct.spent.epsilon == 0.5
  assert acct.spent.end_to_end


def test_steps_outside_the_guarantee_stay_listed():
  acct = Accountant(5.0, 1e-5)
  acct.spend(R1.with_not_private("label set read from y"))
  acct.spend(R3)
  assert acct.spent.not_private == ("label set read from y",) and not acct.spent.end_to_end


def test_context_makes_the_accountant_active_and_nests():
  outer, inner = Accountant(1.0), Accountant(2.0)
  assert current_accountant() is None and Accountant.current() is None
  with outer as active:
    assert active is outer and current_accountant() is outer
    with inner:
      assert current_accountant() is inner and accountant_lib.resolve(None) is inner
      assert accountant_lib.resolve(outer) is outer  # explicit wins
    assert current_accountant() is outer
    with pytest.raises(RuntimeError), outer:  # re-entering the same one, then an error
      assert current_accountant() is outer
      raise RuntimeError
    assert current_accountant() is outer
    seen = []
    thread = threading.Thread(target=lambda: seen.append(current_accountant()))
    thread.start()
    thread.join()
    assert seen == [None]  # another thread has its own context
  assert current_accountant() is None and accountant_lib.resolve(None) is None


def test_copies_are_the_same_budget():
  acct = Accountant(1.0)
  assert copy.copy(acct) is acct and copy.deepcopy({"accountant": acct})["accountant"] is acct
  from sklearn.base import clone  # pylint: disable=import-outside-toplevel
  assert clone(acct, safe=False) is acct  # what sklearn's clone does to an estimator's accountant=


def test_top_level_export():
  assert dg.Accountant is Accountant and "Accountant" in dir(dg)


@pytest.mark.parametrize("kwargs,name", [
    (dict(epsilon="1"), "epsilon"), (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"),
    (dict(epsilon=math.nan), "epsilon"), (dict(epsilon=math.inf), "epsilon"), (dict(epsilon=True), "epsilon"),
    (dict(epsilon=1j), "epsilon"), (dict(epsilon=[1.0]), "epsilon"),
    (dict(epsilon=1.0, delta=1.0), "delta"), (dict(epsilon=1.0, delta=-1e-9), "delta"),
    (dict(epsilon=1.0, delta="1e-6"), "delta"), (dict(epsilon=1.0, delta=None), "delta"),
])
def test_bad_totals_raise_naming_the_argument(kwargs, name):
  with pytest.raises(ValueError, match=rf"\b{name}="):
    Accountant(**kwargs)


def test_a_string_is_a_type_error_and_a_value_error():
  with pytest.raises(TypeError, match="epsilon='1'"):
    Accountant("1")
  with pytest.raises(ValueError, match="epsilon='1'"):
    Accountant("1")


def test_numbers_of_numpy_and_jax_are_accepted():
  for eps in (1, np.float32(0.5), np.int64(2), np.array(0.5), jnp.asarray(0.5)):
    assert isinstance(Accountant(eps).epsilon, float)
  assert Accountant(1.0, np.float64(1e-6)).delta == 1e-6


def test_bad_step_arguments_raise_naming_the_argument():
  acct = Accountant(1.0, 1e-6)
  for call, name in [(lambda: acct.check("0.1"), "epsilon"), (lambda: acct.check(-0.1), "epsilon"),
                     (lambda: acct.check(0.1, 1.5), "delta"), (lambda: acct.check(0.1, 0.0, 3), "what"),
                     (lambda: acct.spend(Ledger.of(("x", Laplace(0.1), 1))), "report"),
                     (lambda: acct.spend((0.1, 0.0)), "report"),
                     (lambda: accountant_lib.resolve("acct"), "accountant")]:
    with pytest.raises(ValueError, match=rf"\b{name}="):
      call()
  assert acct.spent is None and acct.remaining() == (1.0, 1e-6)
  assert "remaining (1, 1e-06)" in repr(acct)
