"""`dpgcd_jax.privacy.events`: the secure samplers' deviation from the exact laws, charged to delta: the per-draw bound
`DRAW_TOTAL_VARIATION` (recomputed in exact arithmetic, the acceptance from closed forms and from the sampler itself),
the ledger's charge `(1 + e^eps) N eta`, the draw counts `N` of the plans (counted from the shapes), calibration under
the charge, and float ledgers without it."""

import fractions
import math

import jax
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

import dpgcd_jax as dg
from dpgcd_jax import discrete_noise
from dpgcd_jax.privacy import Ledger
from dpgcd_jax.privacy import calibrate
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import scales
from dpgcd_jax.privacy import scales_budget
from dpgcd_jax.privacy import tuning
from dpgcd_jax.privacy import typical_size
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import dp_cd
from dpgcd_jax.solvers import dp_fw
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import dp_iht
from dpgcd_jax.solvers import dp_sgd
from dpgcd_jax.solvers import two_stage

ETA = 3.5e-18
MIN_ACCEPTANCE = 0.24


def _laplace_acceptance(t):
  """P(one CKS Algorithm 2 candidate is accepted): U uniform on [0, 2^ceil(log2 t)) kept when
  U < t and Bernoulli(e^{-U/t}); -0 (negative sign, U = 0, V = 0) rejected."""
  u = np.arange(t)
  return (np.exp(-u / t).sum() - (1 - math.exp(-1)) / 2) / (1 << (t - 1).bit_length())


def _gaussian_acceptance(t):
  """`_laplace_acceptance(t) E[exp(-(|Y| - t)^2 / (2 t^2))]`, `Y` exact discrete Laplace of scale t."""
  y = np.arange(0, 80 * t)
  pmf = np.where(y == 0, 1.0, 2.0) * math.tanh(1 / (2 * t)) * np.exp(-y / t)
  return _laplace_acceptance(t) * np.sum(pmf * np.exp(-((y - t) ** 2) / (2.0 * t * t)))


SCALES = sorted(set(range(1, 300)) | {2**k + 1 for k in range(15)} | {discrete_noise.MAX_SCALE})


def test_candidate_acceptance_is_at_least_the_bound_used():
  # The minimum sits just above a power of two (the uniform's rejection), largest at 2^14 + 1.
  gaussian = [_gaussian_acceptance(t) for t in SCALES]
  assert min(gaussian) >= MIN_ACCEPTANCE and min(gaussian) < 0.2405  # measured 0.24028
  assert min(_laplace_acceptance(t) for t in SCALES) >= 0.31


@pytest.mark.parametrize("t", [1, 3, 16385])
def test_closed_form_acceptance_matches_the_sampler(t):
  n = 200_000
  _, accepted, ok = jax.jit(discrete_noise._gaussian_round)(jax.random.key(t), np.full((n,), t, np.int32))
  rate, p = float(np.mean(accepted)), _gaussian_acceptance(t)
  assert bool(np.all(ok))
  assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n), (rate, p)


def test_per_draw_bound_in_exact_arithmetic():
  F = fractions.Fraction
  series = discrete_noise._SERIES
  tie = F(1, 2 ** (30 * discrete_noise._WORDS))
  comparisons = 2 + 64 + 4 * series  # exp(-q^2/2), exp(-n), the geometric's 64 thresholds, the series
  e72 = F(1, 10**31)  # > e^-72 = 5.4e-32
  per_candidate = (2 + F(1, 2**series)) / math.factorial(series) + comparisons * tie + e72
  a = F(MIN_ACCEPTANCE).limit_denominator(100)
  rounds = discrete_noise._ROUNDS * discrete_noise._CANDIDATES
  bound = per_candidate / a + (1 - a) ** rounds
  assert events.DRAW_TOTAL_VARIATION == ETA
  assert bound < F(ETA) and bound > F(34, 10**19)  # 3.43e-18: the constant is not loose by much


def test_pure_release_reports_exactly_the_charge():
  # AboveThreshold over the grid 2^{k/4}, k = -64..64: 129 query noises and one threshold noise.
  ledger = budget.FeatureBoundRelease(0.1).ledger
  charge = (1 + math.exp(0.1)) * 130 * ETA
  assert ledger.delta(0.1) == pytest.approx(charge, rel=1e-12) and ledger.delta(0.1) > 0
  assert Ledger(tuple(e for e in ledger if e.label != "sampler draws")).delta(0.1) == 0.0
  assert ledger.epsilon(0.9 * charge) == math.inf  # below the charge nothing is certified
  assert ledger.epsilon(2 * charge) == pytest.approx(0.1, rel=1e-9)  # the route's own rounding aside
  # a bare ledger composed with a report brings its (pure epsilon, charge) certificate
  report = Ledger.of(("other", events.PureDp(0.2), 1)).report(1e-9)
  assert (ledger + report).delta == pytest.approx(1e-9 + charge, rel=1e-12)


def _without_draws(ledger):
  return Ledger(tuple(e for e in ledger if not isinstance(e.event, events.DiscreteDraws)))


def _problem(n=200, p=5):
  rng = np.random.default_rng(0)
  X = rng.normal(size=(n, p))
  return dg.make_problem(X, np.sign(X[:, 0] + 0.1), loss="logistic", feature_bound=4.0)


def test_secure_dp_sgd_fit_reports_the_charge_of_its_draws():
  problem = _problem()
  res = dg.fit(dg.dp_sgd, problem, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2, batch_size=20,
               secure_noise=True)
  ledger, eps = res.privacy.ledger, res.privacy.epsilon
  draws = 2 * (200 // 20) * 5  # T steps, one discrete Gaussian per coordinate of the sum
  charge = (1 + math.exp(eps)) * draws * ETA
  assert res.privacy.delta == 1e-5 and eps <= 1.0
  assert ledger.delta(eps) - _without_draws(ledger).delta(eps) == pytest.approx(charge, rel=1e-6)
  assert ledger.delta(eps) <= 1e-5


def _draws(ledger):
  return sum(e.event.draws * e.count for e in ledger if isinstance(e.event, events.DiscreteDraws))


def _count(ledger, label):
  (entry,) = [e for e in ledger if e.label == label]
  return entry.count


@pytest.mark.parametrize("secure", [True, False])
def test_plans_count_the_draws_of_the_shapes(secure):
  problem, p, s = _problem(), 5, 2
  cases = [  # (plan, draws per step as counted from the step's shapes, label of a per-step entry)
      (dp_sgd.private_plan(problem, passes=2, batch_size=20, secure_noise=secure), p, "step"),
      (dp_cd.private_plan(problem, passes=2, secure_noise=secure), 1, "update"),
      (dp_gcd.private_plan(problem, passes=7, secure_noise=secure), p + 1, "update"),
      (dp_gcd.private_plan(problem, passes=7, secure_noise=secure, curvature="released"), p + 2, "update"),
      (dp_fw.private_plan(problem, passes=7, radius=1.0, secure_noise=secure), 2 * p, "vertex selection"),
      (dp_iht.private_plan(problem, passes=7, sparsity=s, secure_noise=secure), (s + 1) * p, "update"),
  ]
  for plan, per_step, label in cases:
    ledger = plan.ledger(0.7)
    draws = per_step * _count(ledger, label) if secure else 0
    assert _draws(ledger) == draws, label
    sampling = sum(e.event.total_variation * e.count for e in ledger if isinstance(e.event, events.TotalVariation))
    assert sampling == (_count(ledger, label) * 2.0**-64 if label == "step" else 0.0)  # DP-SGD's Poisson sampler
    charge = (1 + math.e) * (draws * ETA + sampling)
    assert ledger.sampler_charge(1.0) == pytest.approx(charge, rel=1e-12, abs=0.0), label
  selection, update = ("discrete_laplace", "discrete_laplace") if secure else ("laplace", "laplace")
  ledger = two_stage.private_plan(problem, passes=7, sparsity=s, runs=3, selection=selection,
                                  update=update).ledger(0.7)
  # one peeling of s rounds over p per run; each step a selection over the s columns and one update
  assert _draws(ledger) == (3 * s * p + 7 * 3 * (s + 1) if secure else 0)


def test_noisy_searches_count_one_draw_per_feature_and_round():
  rounds = math.ceil(math.log2(scales.GRID.size))  # the binary search over the grid
  assert _draws(scales_budget.scales_ledger(2.0, features=7)) == 7 * rounds
  assert _draws(typical_size.ledger(2.0)) == 5  # one median over 25 grid points: 5 rounds, 1 query


def test_a_private_selection_charges_the_draws_of_its_expected_runs():
  inner = Ledger.of(("u", events.DiscreteGaussian(30.0), 50), ("d", events.DiscreteDraws(4), 50))
  bare = Ledger.of(("u", events.DiscreteGaussian(30.0), 50))
  # Poisson(10) repetitions: E[K] = 10 runs of 200 draws each
  charged, uncharged = (tuning.repeat_and_select_ledger(x, mean=10.0, shape=math.inf) for x in (inner, bare))
  eps = charged.epsilon(1e-6)
  assert charged.delta(eps) - uncharged.delta(eps) == pytest.approx((1 + math.exp(eps)) * 10 * 200 * ETA, rel=1e-6)


def test_calibration_aims_at_the_target_delta_minus_the_charge():
  draws = 10**11  # a charge of (1 + e) 3.5e-7 = 1.3e-6: visible against delta = 1e-5
  charged = lambda k: Ledger.of(("u", events.DiscreteGaussian(k), 100), ("d", events.DiscreteDraws(draws), 1))
  bare = lambda k: Ledger.of(("u", events.DiscreteGaussian(k), 100))
  charge = (1 + math.e) * draws * ETA
  k, report = calibrate(charged, 1.0, 1e-5)
  k_bare, _ = calibrate(bare, 1.0, 1e-5 - charge)
  assert report.epsilon <= 1.0 and report.delta == 1e-5
  assert bare(k).delta(1.0) + charge <= 1e-5
  assert k == pytest.approx(k_bare, rel=1e-3)
  assert k > calibrate(bare, 1.0, 1e-5)[0] * (1 + 1e-3)  # the charge costs noise
  with pytest.raises(ValueError, match="slack"):
    calibrate(charged, 1.0, 0.5 * charge)


def test_float_ledgers_are_unchanged():
  # A float DP-CD fit's ledger: no draws, no charge, dp_accounting's Gaussian composition exactly.
  ledger = dp_cd.private_plan(_problem(), passes=2).ledger(3.0)
  steps = _count(ledger, "update")
  assert _draws(ledger) == 0 and ledger.sampler_charge(5.0) == 0.0
  reference = pld.from_gaussian_mechanism(3.0, value_discretization_interval=1e-4).self_compose(steps)
  assert ledger.epsilon(1e-6) == pytest.approx(reference.get_epsilon_for_delta(1e-6), rel=1e-3)


def test_a_pure_release_charges_its_draws_at_its_own_epsilon():
  bare = Ledger.of(("update", events.Gaussian(0.7), 10))  # a large budget: about epsilon 20 at 1e-5
  with_bound = budget.release_ledger("feature bound", 0.5) + bare
  eps = with_bound.epsilon(1e-5)
  assert 15.0 < eps < math.inf
  own = (1 + math.exp(0.5)) * 130 * ETA  # at the whole ledger's epsilon it would be e^15 = 3e6 times more
  assert with_bound.delta(eps) == pytest.approx(_without_draws(with_bound).delta(eps) + own, rel=1e-9)
  # without its release epsilon the same draws would cost (1 + e^eps) 130 eta
  global_draws = bare + Ledger.of(("feature bound", events.PureDp(0.5), 1), ("d", events.DiscreteDraws(130), 1))
  assert global_draws.delta(eps) - _without_draws(global_draws).delta(eps) == pytest.approx(
      (1 + math.exp(eps)) * 130 * ETA, rel=1e-9)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the raw-data diagnostics of small n
def test_a_fit_at_a_huge_budget_with_released_bounds_is_certified():
  rng = np.random.default_rng(3)
  X = rng.normal(size=(300, 4))
  model = dg.DPGCDRegressor(epsilon=1e4, feature_bound=4.0, random_state=0).fit(X, X[:, 0] + 0.1 * rng.normal(size=300))
  report = model.privacy_  # the target bound's release, at 0.1 of 1e4, spends 10: its draws' charge stays 2e-11
  assert report.epsilon <= 1e4 and report.delta <= 1.0 / 300**2
  released = {e.label: e.event for e in report.entries if isinstance(e.event, events.PureDp)}
  assert released["target bound"].epsilon == pytest.approx(10.0)
  assert model.score(X, X[:, 0]) > 0.9


def _drawing(k, draws=10**6):
  return Ledger.of(("u", events.DiscreteGaussian(k), 100), ("s", events.PureDp(0.01 / k), 50),
                   ("d", events.DiscreteDraws(draws), 1))


def test_the_certificate_is_found_when_the_charge_is_a_real_share_of_delta():
  # At epsilon 14 the charge (1 + e^14) 1e6 eta = 4.2e-6 is 42% of delta: the fixed-point steps
  # alone returned inf (found by an independent review).
  ledger = _drawing(4.097456175191863)
  assert ledger.delta(14.0) <= 1e-5
  assert 13.99 < ledger.epsilon(1e-5) <= 14.0 + 1e-9
  assert ledger.delta(ledger.epsilon(1e-5)) <= 1e-5 * (1 + 1e-9)


def test_calibration_aims_below_a_budget_whose_charge_does_not_fit():
  assert (1 + math.exp(16.0)) * 10**6 * ETA > 1e-5  # the charge at the target alone exceeds delta
  k, report = calibrate(_drawing, 16.0, 1e-5)
  assert report.epsilon < 16.0 and report.delta <= 1e-5
  assert _drawing(k).delta(report.epsilon) <= 1e-5
  assert _drawing(k).sampler_charge(report.epsilon) <= 0.5 * 1e-5 * (1 + 1e-9)  # the aim: half of delta at most


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_secure_search_charges_the_draws_of_its_runs_and_scores():
  rng = np.random.default_rng(0)
  X = rng.normal(size=(400, 3))
  model = dg.DPGCDClassifierCV(param_grid={"max_iter": [2, 4]}, secure_noise=True, feature_bound=4.0, epsilon=2.0,
                               classes=[0, 1], random_state=0).fit(X, X[:, 0] > 0)
  search = next(e.event for e in model.privacy_.entries if isinstance(e.event, tuning.RepeatAndSelect))
  per_step = (3 + 1) + 2  # a selection over 3 features and the intercept, an update, a released curvature
  draws = search.expected_runs * (2 * per_step + 4 * per_step + 1)  # two run lengths and a score
  assert search.total_variation == pytest.approx(draws * ETA, rel=1e-12)
  assert model.privacy_.delta <= 1.0 / 400**2


def test_dp_sgd_sampling_deviation_is_charged_at_the_total_it_ends_in():
  # The Poisson sampler is within 2^-64 of exact per step: a TotalVariation event, charged at the
  # epsilon of whatever ledger the fit's ends in (a DeltaSlack fixed at the fit's epsilon was not).
  plan = dp_sgd.private_plan(_problem(), passes=2, batch_size=20)
  ledger = plan.ledger(1.0)
  sampling = [e.event for e in ledger if e.label == "sampling (total variation)"]
  steps = 2 * (200 // 20)
  assert sampling == [events.TotalVariation(steps * 2.0**-64)]
  total = ledger + Ledger.of(("a later release", events.PureDp(20.0), 1))
  eps = total.epsilon(1e-5)
  without = Ledger(tuple(e for e in total if e.label != "sampling (total variation)"))
  assert total.delta(eps) - without.delta(eps) == pytest.approx((1 + math.exp(eps)) * steps * 2.0**-64, rel=1e-6)


def test_hand_called_gcd_calibration_charges_the_draws_of_discrete_noise():
  # calibrate_gcd / gcd_epsilon with discrete mechanisms charge p + 1 draws per iteration (they
  # charged none): more features, more draws, larger multipliers; a discrete selection needs p.
  names = dict(selection="discrete_laplace", update="discrete_laplace")
  with pytest.raises(ValueError, match="features"):
    dg.privacy.calibrate_gcd(1.0, 1e-9, steps=100, **names)
  with pytest.raises(ValueError, match="features"):
    dg.privacy.gcd_epsilon(50.0, 50.0, steps=100, delta=1e-9, **names)
  with pytest.raises(ValueError, match="method"):
    dg.privacy.calibrate_gcd(1.0, 1e-9, steps=100, features=10, method="closed_form", **names)
  few = dg.privacy.calibrate_gcd(1.0, 1e-9, steps=100, features=1, **names)
  many = dg.privacy.calibrate_gcd(1.0, 1e-9, steps=100, features=100_000, **names)
  assert _draws(many.report.ledger) == 100 * 100_001 and _count(many.report.ledger, "sampler draws") == 100
  assert many.update_noise > few.update_noise * (1 + 1e-3)
  at = lambda cal, p: dg.privacy.gcd_epsilon(cal.selection_noise, cal.update_noise, steps=100, delta=1e-9,
                                             features=p, **names)
  assert at(many, 100_000) <= 1.0 < at(few, 100_000)
  # A discrete update alone draws one noise per iteration, with no `features` needed.
  upd = dg.privacy.calibrate_gcd(1.0, 1e-9, steps=100, update="discrete_gaussian")
  assert _draws(upd.report.ledger) == 100
  # Float mechanisms: no entry, the multipliers as before.
  assert _draws(dg.privacy.calibrate_gcd(1.0, 1e-9, steps=100).report.ledger) == 0


def test_hand_called_sgd_calibration_charges_the_draws_and_the_sampler():
  with pytest.raises(ValueError, match="features"):
    dg.privacy.calibrate_sgd(1.0, 1e-9, steps=1000, sampling_rate=0.01, secure_noise=True)
  few = dg.privacy.calibrate_sgd(1.0, 1e-9, steps=1000, sampling_rate=0.01, secure_noise=True, features=1)
  many = dg.privacy.calibrate_sgd(1.0, 1e-9, steps=1000, sampling_rate=0.01, secure_noise=True, features=10**4)
  assert _draws(many.report.ledger) == 1000 * 10**4 and many.update_noise > few.update_noise * (1 + 1e-3)
  # The float calibration charges the Poisson sampler's deviation as dp_sgd's fit does.
  plain = dg.privacy.calibrate_sgd(1.0, 1e-9, steps=1000, sampling_rate=0.01)
  assert [e.event for e in plain.report.ledger if e.label == "sampling (total variation)"] == [
      events.TotalVariation(1000 * 2.0**-64)]
  # One path: the fit's plan charges the same ledger at the same multiplier.
  plan = dp_sgd.private_plan(_problem(), passes=2, batch_size=20, secure_noise=True)
  expected = dg.privacy.sgd_ledger(1.5, steps=20, sampling_rate=0.1, secure_noise=True, features=5)
  assert plan.ledger(1.5) == expected


def test_the_charge_does_not_vanish_where_its_exponential_overflows():
  # exp(epsilon) was capped at exp(700): a tiny total variation at epsilon > 700 was undercharged.
  assert events.tv_charge(701.0, 1e-300) == math.inf and events.tv_charge(701.0, 0.0) == 0.0
  assert events.tv_charge(2.0, 1e-9) == pytest.approx((1 + math.exp(2.0)) * 1e-9, rel=1e-15)
  ledger = Ledger.of(("x", events.PureDp(1.0), 1)).with_draws(5, 1)
  assert ledger.sampler_charge(800.0) == math.inf
  assert Ledger.of(("x", events.PureDp(1.0), 1)).with_draws(5, 1, 1.0).sampler_charge(800.0) < 1e-15


def test_hand_called_cd_calibration_has_the_secure_mode_its_run_draws():
  # dp_cd.run(secure_noise=True) draws discrete Gaussians: calibrate_cd had no secure mode, and
  # its float multiplier reads epsilon 1.09 > 1 on the secure ledger (review helper-37).
  secure = dg.privacy.calibrate_cd(1.0, 1e-5, steps=1000, secure_noise=True)
  plain = dg.privacy.calibrate_cd(1.0, 1e-5, steps=1000)
  assert secure.method == "rdp" and _draws(secure.report.ledger) == 1000
  assert dg.privacy.cd_ledger(plain.update_noise, steps=1000, secure_noise=True).epsilon(1e-5) > 1.05
  assert dg.privacy.cd_ledger(secure.update_noise, steps=1000, secure_noise=True).epsilon(1e-5) <= 1.0
  with pytest.raises(ValueError, match="method"):
    dg.privacy.calibrate_cd(1.0, 1e-5, steps=10, method="pld", secure_noise=True)
  plan = dp_cd.private_plan(_problem(), passes=2, secure_noise=True)  # one path with the fit
  assert plan.ledger(7.0) == dg.privacy.cd_ledger(7.0, steps=2 * 5, secure_noise=True)
