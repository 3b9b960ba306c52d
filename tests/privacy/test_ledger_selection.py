"""`dpgcd_jax.privacy.tuning`: tests of private hyperparameter selection (Papernot & Steinke 2022) against
dp_accounting."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import dp_event

from dpgcd_jax import privacy
from dpgcd_jax.privacy import DeltaSlack
from dpgcd_jax.privacy import Gaussian
from dpgcd_jax.privacy import Ledger
from dpgcd_jax.privacy import PureDp
from dpgcd_jax.privacy import RepeatAndSelect
from dpgcd_jax.privacy import tuning
from dpgcd_jax.solvers import budget

DELTA = 1e-6


@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 2.0, math.inf])
@pytest.mark.parametrize("mean", [3.0, 10.0])
def test_repeat_and_select_matches_dp_accounting(shape, mean):
  s, runs = 5.0, 10
  acc = dp_accounting.rdp.RdpAccountant()
  acc.compose(dp_event.RepeatAndSelectDpEvent(
      dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(s), runs), mean, shape))
  theirs = acc.get_epsilon(DELTA)
  led = privacy.repeat_and_select_ledger(Ledger.of(("fit", Gaussian(s), runs)), mean=mean,
                                         shape=shape)
  ours = led.epsilon(DELTA)
  assert led.route_for(DELTA) == "rdp"
  assert ours <= theirs * (1 + 1e-9)  # More orders: never worse.
  assert ours == pytest.approx(theirs, rel=0.01)
  # Selection costs more than one run and less than mean-many runs composed (for mean >= 3).
  one = Ledger.of(("fit", Gaussian(s), runs)).epsilon(DELTA)
  assert one < ours


def test_tnb_gamma_inverts_the_mean():
  for shape in (0.0, 0.3, 1.0, 4.0):
    for mean in (1.5, 10.0, 200.0):
      gamma = tuning.tnb_gamma(mean, shape)
      assert tuning.tnb_mean(gamma, shape) >= mean  # conservative side
      assert tuning.tnb_mean(gamma, shape) == pytest.approx(mean, rel=1e-8)
  assert tuning.tnb_gamma(4.0, 1.0) == 0.25


def test_inner_slack_counts_mean_times_and_selection_is_hashable():
  inner = Ledger.of(("fit", Gaussian(5.0), 10), ("tv", DeltaSlack(1e-8), 1))
  event = RepeatAndSelect(inner, 5.0, 1.0)
  led = Ledger.of(("search", event, 1))
  assert led.slack == pytest.approx(5e-8)
  assert hash(event) == hash(RepeatAndSelect(inner, 5, 1))
  assert "RepeatAndSelect(mean=5, geometric" in event.describe()
  # Composes with other events (e.g. a final private release) through RDP.
  both = led.add("release", PureDp(0.1))
  assert both.epsilon(DELTA) > led.epsilon(DELTA)


def test_search_scale_round_trip_with_a_prior_release():
  factory = lambda s: Ledger.of(("fit", Gaussian(s), 20))
  prior = Ledger.of(("feature bound", PureDp(0.2), 1))
  s, report = budget.search_scale(factory, epsilon=2.0, delta=DELTA, mean=8.0, shape=1.0, prior=prior)
  assert report.epsilon <= 2.0
  assert [e.label for e in report.entries] == ["feature bound", "hyperparameter search"]
  led = lambda s: prior + privacy.repeat_and_select_ledger(factory(s), mean=8.0, shape=1.0)
  assert led(s).epsilon(DELTA) == pytest.approx(report.epsilon, rel=1e-12)
  assert led(s / 1.001).epsilon(DELTA) > 2.0
  # More noise per run than a single run needs for the same budget.
  assert s > privacy.calibrate_cd(2.0, DELTA, steps=20).update_noise
  # The cache key is derived from the repetition's ledgers: another repetition (more steps) is another
  # entry, never a hit on this one's scale.
  more = lambda s: Ledger.of(("fit", Gaussian(s), 40))
  s_more, _ = budget.search_scale(more, epsilon=2.0, delta=DELTA, mean=8.0, shape=1.0, prior=prior)
  assert s_more > s * 1.2


@pytest.mark.parametrize("make,name", [
    (lambda: RepeatAndSelect(Ledger(), 0.5, 1.0), "mean"),
    (lambda: RepeatAndSelect(Ledger(), 3.0, -1.0), "shape"),
    (lambda: RepeatAndSelect(Gaussian(1.0), 3.0, 1.0), "inner"),
])
def test_bad_selection_input(make, name):
  with pytest.raises(ValueError, match=rf"\b{name}="):
    make()


def test_selection_curve_is_monotone_in_order():
  event = RepeatAndSelect(Ledger.of(("fit", Gaussian(3.0), 5)), 10.0, 0.0)
  a = np.linspace(1.1, 50.0, 200)
  assert np.all(np.diff(event.rdp(a)) >= -1e-12)
