"""`dpgcd_jax.privacy.ledger`, `dpgcd_jax.privacy.events`: tests of the privacy events, the ledger, its report and the
generic calibrate()."""

import dataclasses
import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from dpgcd_jax import privacy
from dpgcd_jax.privacy import BoundedRange
from dpgcd_jax.privacy import DeltaSlack
from dpgcd_jax.privacy import Gaussian
from dpgcd_jax.privacy import Laplace
from dpgcd_jax.privacy import Ledger
from dpgcd_jax.privacy import PoissonSampledGaussian
from dpgcd_jax.privacy import PureDp
from dpgcd_jax.privacy import ZCdp
from dpgcd_jax.privacy import _routes
from dpgcd_jax.privacy import calibrate

DELTA = 1e-6


def _example(k, steps=100):
  return Ledger.of(("smoothness", PureDp(0.05), 1), ("selection", BoundedRange(2.0 / k), steps),
                   ("update", Gaussian(k), steps))


# ------------------------------------------------------------------------------------------
# Events.
# ------------------------------------------------------------------------------------------


def test_events_are_frozen_hashable_and_typed():
  assert PureDp(0.1) == PureDp(0.1) and hash(PureDp(0.1)) == hash(PureDp(1e-1))
  assert PureDp(0.1) != BoundedRange(0.1) != Laplace(0.1)
  assert PureDp(1) == PureDp(1.0) and isinstance(PureDp(1).epsilon, float)
  with pytest.raises(dataclasses.FrozenInstanceError):
    PureDp(0.1).epsilon = 0.2
  assert {PureDp(0.1), PureDp(0.1), Gaussian(3.0)} == {PureDp(0.1), Gaussian(3.0)}
  assert Gaussian(4.0).mu == 0.25 and Gaussian(0.0).mu == math.inf


@pytest.mark.parametrize("make,name", [
    (lambda: PureDp(-0.1), "epsilon"), (lambda: PureDp(float("nan")), "epsilon"),
    (lambda: BoundedRange(-1.0), "epsilon"), (lambda: Laplace(-1.0), "epsilon"),
    (lambda: Gaussian(-1.0), "noise"), (lambda: ZCdp(-0.1), "rho"),
    (lambda: PoissonSampledGaussian(1.0, 0.0), "sampling_rate"),
    (lambda: PoissonSampledGaussian(1.0, 1.5), "sampling_rate"),
    (lambda: PoissonSampledGaussian(-1.0, 0.5), "noise"),
    (lambda: DeltaSlack(1.0), "delta"), (lambda: DeltaSlack(-1e-9), "delta"),
])
def test_events_validate(make, name):
  with pytest.raises(ValueError, match=rf"\b{name}="):
    make()


def test_event_rdp_curves():
  a = np.array([1.5, 2.0, 10.0, 100.0])
  np.testing.assert_allclose(Gaussian(2.0).rdp(a), a / 8.0)
  np.testing.assert_allclose(ZCdp(0.3).rdp(a), 0.3 * a)
  # Bounded range: min(a eps^2 / 8, randomized response); never above pure DP's RR curve.
  assert np.all(BoundedRange(0.2).rdp(a) <= PureDp(0.2).rdp(a))
  assert np.all(BoundedRange(0.2).rdp(a) <= a * 0.2 ** 2 / 8 + 1e-15)
  # Laplace is eps-DP: its RDP is below RR's.
  assert np.all(Laplace(0.2).rdp(a) <= PureDp(0.2).rdp(a) + 1e-15)
  assert np.all(DeltaSlack(1e-9).rdp(a) == 0.0) and DeltaSlack(1e-9).slack == 1e-9


# ------------------------------------------------------------------------------------------
# Ledger.
# ------------------------------------------------------------------------------------------


def test_ledger_is_an_immutable_hashable_sequence():
  led = Ledger().add("a", PureDp(0.1), 3).add("b", Gaussian(5.0))
  assert len(led) == 2 and [e.label for e in led] == ["a", "b"]
  label, event, count = led.entries[1]
  assert (label, event, count) == ("b", Gaussian(5.0), 1)
  assert hash(led) == hash(Ledger.of(("a", PureDp(0.1), 3), ("b", Gaussian(5.0), 1)))
  both = led + Ledger.of(("c", PureDp(0.1), 2))
  assert len(both) == 3 and len(led) == 2
  # Identical events are merged (counts summed) before accounting.
  assert dict(both.aggregated())[PureDp(0.1)] == 5
  with pytest.raises(dataclasses.FrozenInstanceError):
    led.entries = ()


@pytest.mark.parametrize("entries,name", [
    ([("a", 0.1, 1)], "event"), ([(3, PureDp(0.1), 1)], "label"),
    ([("a", PureDp(0.1), -1)], "count"), ([("a", PureDp(0.1), 1.5)], "count"),
])
def test_ledger_validates_entries(entries, name):
  with pytest.raises(ValueError, match=rf"\b{name}="):
    Ledger.of(*entries)


def test_best_is_the_min_over_the_valid_routes_and_route_for_names_it():
  led = _example(60.0)
  routes = [r for r in led.routes() if r != "dp_accounting_pld"]
  assert set(routes) == {"pld", "bounded_range", "rdp"}
  values = {r: led.epsilon(DELTA, route=r) for r in routes}
  assert led.epsilon(DELTA) == min(values.values())
  assert led.route_for(DELTA) == min(values, key=values.get) == "bounded_range"
  # Each route is a valid upper bound; dp_accounting (by name) agrees within 1% with the
  # exact lattice route on the events both treat the same way (RR and Gaussian).
  assert values["pld"] == pytest.approx(led.epsilon(DELTA, route="dp_accounting_pld"), rel=0.01)
  with pytest.raises(ValueError, match="route="):
    led.epsilon(DELTA, route="fft_pld")


def test_epsilon_and_delta_are_inverse_profiles():
  led = _example(60.0)
  for route in ("best", "pld", "rdp", "bounded_range"):
    eps = led.epsilon(DELTA, route=route)
    assert led.delta(eps, route=route) <= DELTA * (1 + 1e-6)
    assert led.delta(eps * 0.98, route=route) > DELTA


def test_delta_slack_adds_to_delta_and_is_spent_first():
  base = Ledger.of(("update", Gaussian(10.0), 20))
  slack = base.add("tv", DeltaSlack(4e-7))
  assert slack.slack == pytest.approx(4e-7)
  assert slack.delta(1.0) == pytest.approx(base.delta(1.0) + 4e-7)
  assert slack.epsilon(1e-6) == pytest.approx(base.epsilon(6e-7))
  assert Ledger.of(("tv", DeltaSlack(2e-6), 1)).epsilon(1e-6) == math.inf
  assert Ledger.of(("tv", DeltaSlack(2e-7), 1)).epsilon(1e-6) == 0.0


def test_non_private_and_free_events():
  assert Ledger.of(("x", Gaussian(0.0), 1)).epsilon(DELTA) == math.inf
  assert Ledger.of(("x", PureDp(math.inf), 1), ("y", Gaussian(5.0), 3)).epsilon(DELTA) == math.inf
  assert Ledger.of(("x", Gaussian(math.inf), 10)).epsilon(DELTA) == 0.0
  assert Ledger().epsilon(DELTA) == 0.0


def test_pure_dp_and_gaussian_ledger_is_exact_against_dp_accounting():
  led = Ledger.of(("q", PureDp(0.3), 5), ("g", Gaussian(4.0), 20))
  assert led.route_for(DELTA) == "pld"  # exact: the others are skipped
  rr = pld_lib.from_randomized_response(2.0 / (1.0 + math.exp(0.3)), 2,
                                        value_discretization_interval=1e-4).self_compose(5)
  gauss = pld_lib.from_gaussian_mechanism(4.0 / math.sqrt(20),
                                          value_discretization_interval=1e-4)
  theirs = rr.compose(gauss).get_epsilon_for_delta(DELTA)
  assert led.epsilon(DELTA) <= theirs * (1 + 1e-9)
  assert led.epsilon(DELTA) == pytest.approx(theirs, rel=0.01)


def test_zcdp_event_matches_dp_accounting_rdp():
  led = Ledger.of(("z", ZCdp(0.01), 10))
  acc = dp_accounting.rdp.RdpAccountant()
  acc.compose(dp_accounting.ZCDpEvent(0.01), 10)
  assert led.routes() == ("rdp",)
  assert led.epsilon(DELTA) <= acc.get_epsilon(DELTA) * (1 + 1e-9)
  assert led.epsilon(DELTA) == pytest.approx(acc.get_epsilon(DELTA), rel=0.01)


# ------------------------------------------------------------------------------------------
# Report.
# ------------------------------------------------------------------------------------------


def test_report_prints_every_entry_and_the_total():
  report = _example(61.64).report(DELTA, notes=("smoothness: public by declaration",))
  text = str(report)
  lines = text.splitlines()
  assert lines[0].split() == ["label", "event", "count"]
  assert "smoothness" in lines[1] and "PureDp(epsilon=0.05)" in lines[1]
  assert lines[2].startswith("selection") and lines[2].rstrip().endswith("100")
  assert "Gaussian(noise=61.64)" in lines[3]
  assert "total:" in lines[4] and "1e-06" in lines[4] and "bounded_range" in lines[4]
  assert lines[5] == "note: smoothness: public by declaration"
  assert report.epsilon <= 1.0 and report.route == "bounded_range"
  assert report.with_notes("x").notes == ("smoothness: public by declaration", "x")
  assert report.ledger == _example(61.64)
  hash(report)


# ------------------------------------------------------------------------------------------
# calibrate().
# ------------------------------------------------------------------------------------------


def test_calibrate_api_example_and_minimality():
  k, report = calibrate(_example, 1.0, DELTA, key=("test-example", 100))
  assert report.epsilon <= 1.0 and report.delta == DELTA
  assert k == pytest.approx(61.64, rel=2e-3)
  assert _example(k).epsilon(DELTA) <= 1.0
  # 0.1% less noise is infeasible on every route.
  led = _example(k / 1.001)
  assert all(led.epsilon(DELTA, route=r) > 1.0 for r in ("pld", "bounded_range", "rdp"))
  # Cached: the same key answers with one call of the factory, at the cached scale (the hit is
  # re-verified), instead of a search.
  calls = []
  again = calibrate(lambda s: calls.append(s) or _example(s), 1.0, DELTA,
                    key=("test-example", 100))
  assert again == (k, report) and calls == [k]


def test_a_cache_key_that_does_not_describe_its_factory_recalibrates():
  """A hand-written key reused for a costlier ledger (twice the steps) must not return the first
  ledger's scale: the hit is re-verified and the calibration meets the new ledger's target."""
  first = lambda s: Ledger.of(("g", Gaussian(s), 10))
  costlier = lambda s: Ledger.of(("g", Gaussian(s), 20))
  k1, _ = calibrate(first, 1.0, DELTA, key=("shared-key",))
  k2, report = calibrate(costlier, 1.0, DELTA, key=("shared-key",))
  assert costlier(k1).epsilon(DELTA) > 1.0  # the first scale would break the target
  assert k2 > k1 and report.epsilon <= 1.0 and costlier(k2).epsilon(DELTA) <= 1.0


def test_calibrate_each_route_and_tolerance():
  factory = lambda s: Ledger.of(("g", Gaussian(s), 50))
  for route in ("pld", "rdp"):
    s, report = calibrate(factory, 0.8, 1e-5, route=route)
    assert report.route == route and report.epsilon <= 0.8
    assert factory(s / (1 + 2e-4)).epsilon(1e-5, route=route) > 0.8
  # The exact GDP answer (closed form): sqrt(T) / mu with delta_G(0.8; mu) = 1e-5.
  s = calibrate(factory, 0.8, 1e-5)[0]
  mu = math.sqrt(50) / s
  assert dp_accounting.get_epsilon_gaussian(1.0 / mu, 1e-5) == pytest.approx(0.8, rel=1e-3)


def test_calibrate_wrappers_carry_reports():
  cal = privacy.calibrate_gcd(1.0, DELTA, steps=100, selection="gumbel", update="gaussian")
  assert cal.report is not None and cal.report.route == cal.method == "bounded_range"
  assert [e.label for e in cal.report.entries] == ["selection", "update"]
  assert cal.report.entries[0].event == BoundedRange(2.0 / cal.selection_noise)
  cd = privacy.calibrate_cd(1.0, DELTA, steps=100)
  assert cd.report.entries[0].event == Gaussian(cd.update_noise)


@pytest.mark.parametrize("call,name", [
    (lambda: calibrate(_example, 0.0, DELTA), "epsilon"),
    (lambda: calibrate(_example, 1.0, 1.0), "delta"),
    (lambda: calibrate(_example, 1.0, DELTA, guess=-1.0), "guess"),
    (lambda: calibrate(lambda k: 3.0, 1.0, DELTA), "factory"),
    (lambda: calibrate(lambda k: Ledger.of(("t", DeltaSlack(2e-6), 1)), 1.0, DELTA), "delta"),
    (lambda: _example(50.0).epsilon(0.0), "delta"),
    (lambda: _example(50.0).delta(-1.0), "epsilon"),
])
def test_bad_input_names_the_argument(call, name):
  with pytest.raises(ValueError, match=rf"\b{name}"):
    call()


def test_calibrate_unreachable_target_raises():
  # A fixed 5-DP release can never fit in epsilon = 1, whatever the Gaussian noise.
  with pytest.raises(ValueError, match="finite noise"):
    calibrate(lambda k: Ledger.of(("p", PureDp(5.0), 1), ("g", Gaussian(k), 3)), 1.0, DELTA)


def test_routes_registry_is_consistent():
  for name, route in _routes.ROUTES.items():
    assert route.name == name and route.cost in (0, 1, 2)
    assert route.margin in ("epsilon", "delta")
