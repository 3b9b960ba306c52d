"""`dpgcd_jax.solvers` (each solver's `fit`): the default path of ``fit`` is private, tried as an adversary would.

Each test reproduces one measured leak (it failed on the code before the fix).
"""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax.privacy import auditing

RUNS = 20_000
# The feature-magnitude pair's audits run half as many: every default fit reads 0.000 there (at
# 20,000 runs and on each disjoint half of 10,000 or quarter of 5,000), and the same audit at
# 10,000 runs still refutes the non-private opt-in with a margin: 1.43 and 1.40 on the two
# halves of 20,000 runs (1.47 on all of them), against the claim of 1. Each run's feature-bound
# release costs ~1 ms (its discrete Laplace draws), the run itself ~1 us: the count is the cost.
FEATURE_PAIR_RUNS = 10_000
CHUNK = 500  # keys per call (one compiled program): 20,000 at once peaked at 13 GB; 500 draws ~15% faster than 2,000


def _runs(fit, problem, key, runs):
  """`fit(problem, keys).w` over `runs` keys split from `key`, CHUNK keys at a time."""
  keys = jax.random.split(key, runs).reshape(runs // CHUNK, CHUNK)
  return np.concatenate([np.asarray(fit(problem, chunk).w) for chunk in keys])
DELTA = 1e-6


def _log_max_abs(w):
  return np.log(np.max(np.abs(np.asarray(w)), axis=-1) + 1e-30)


def _feature_pair(n=100):
  """D: n rows x = (1, 1), y = 0; D': row 0 replaced by x = (100, 1). Gradients at 0 vanish."""
  X = np.ones((n, 2))
  X2 = X.copy()
  X2[0] = (100.0, 1.0)
  return X, X2, np.zeros(n)


def _signed_vertex(w):
  """`sigma (j + 1)` for the largest `|w_j|`, `sigma` its sign: which vertex one DP-FW step from 0 chose."""
  w = np.asarray(w)
  j = np.argmax(np.abs(w), axis=-1)
  return np.sign(np.take_along_axis(w, j[..., None], axis=-1)[..., 0]) * (j + 1)


def _vertex_flip_pair(n=100, background=5):
  """D: `background` rows (x, y) = (1, 1e5), one row (-1, 1e5), the rest (1, 0); D': that row x = +1.

  Every |x_ij| = 1 in both, so the released bound B has the same law; |y| = 1e5 saturates the
  clip C = B (whatever B in the grid 2^-16..2^16): each active record's clipped gradient at 0 is
  -sign(x_i0) B, the flipped one moves g_0 by 2B/n = Delta (the whole sensitivity), and the log-odds
  of +r e_0 against -r e_0 go from 4 to 6 times eps0 / 2: the two-vertex worst case of the
  eps0-bounded-range selection, with the rare vertex -r e_0 at rates 0.14 (D) / 0.063 (D').
  """
  X = np.ones((n, 1))
  y = np.zeros(n)
  y[:background + 1] = 1e5
  X[background, 0] = -1.0
  X2 = np.ones((n, 1))
  return X, X2, y


def _audit_fit(fit, X, X2, y, statistic=_log_max_abs, runs=RUNS, **make_kwargs):
  keys_d, keys_n = jax.random.split(jax.random.key(11))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PrivacyLeakWarning)
    w_d = _runs(fit, dg.make_problem(X, y, "squared", **make_kwargs), keys_d, runs)
    w_n = _runs(fit, dg.make_problem(X2, y, "squared", **make_kwargs), keys_n, runs)
  return auditing.audit_statistics(statistic(w_d), statistic(w_n), delta=DELTA)


GCD = lambda pb, keys: dg.dp_gcd.fit(pb, keys, epsilon=1.0, delta=DELTA, passes=1)
CD = lambda pb, keys: dg.dp_cd.fit(pb, keys, epsilon=1.0, delta=DELTA, passes=1)
# The released bound B sets their noise scales (IHT: eta_j Delta_j ~ 1 / B; two-stage: DP-GCD's
# update noise), so |w| tells B's on the two data sets apart. (DP-FW's single step from 0 returns
# a vertex of norm r whatever B: this statistic cannot see it; its audit reads the vertex, below.)
IHT = lambda pb, keys: dg.dp_iht.fit(pb, keys, epsilon=1.0, delta=DELTA, passes=1, sparsity=1)
TWO_STAGE = lambda pb, keys: dg.two_stage.fit(pb, keys, epsilon=1.0, delta=DELTA, passes=1, sparsity=1)


@pytest.mark.slow
@pytest.mark.parametrize("fit", [GCD, CD, IHT, TWO_STAGE], ids=["dp_gcd", "dp_cd", "dp_iht", "two_stage"])
def test_default_fit_on_the_feature_magnitude_pair_stays_below_its_claim(fit):
  X, X2, y = _feature_pair()
  assert _audit_fit(fit, X, X2, y, runs=FEATURE_PAIR_RUNS).epsilon_lower_bound <= 1.0


def _nonprivate_gcd():
  """DP-GCD's fit at epsilon = 1 with the data-derived M as it is (what the opt-in's fit ran before
  `fit` refused it): the non-private runner `run` with the multipliers `fit` calibrates for this
  pair's shapes (they depend on n, p and passes only, not on M) and no bound release."""
  X, _, y = _feature_pair()
  declared = dg.make_problem(X, y, "squared", smoothness=np.ones(2))
  params = dg.dp_gcd.fit(declared, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=1).params
  return lambda pb, keys: jax.vmap(lambda key: dg.dp_gcd.run(pb, key, params, passes=1))(keys)


def test_the_same_audit_refutes_the_nonprivate_smoothness_opt_in():
  """Power: the data-derived M (the old default, then the opt-in `fit` now refuses) run with the noise
  fit calibrates for epsilon = 1 is caught by this very audit."""
  X, X2, y = _feature_pair()
  res = _audit_fit(_nonprivate_gcd(), X, X2, y, runs=FEATURE_PAIR_RUNS, smoothness="from_data_nonprivate")
  assert res.epsilon_lower_bound > 1.0


def _fw(epsilon):
  return lambda pb, keys: dg.dp_fw.fit(pb, keys, epsilon=epsilon, delta=DELTA, passes=1, radius=1.0)


@pytest.mark.slow
def test_default_fw_fit_on_the_vertex_flip_pair_stays_below_its_claim():
  """DP-FW releases which signed vertex it selects: audited on the pair that moves it most.

  epsilon = 1 spends 0.1 on B and leaves the selection BoundedRange(0.9): this pair's best test
  reaches 0.81, the audit about 0.7 (20,000 runs); the floor keeps the pair from going blind.
  """
  res = _audit_fit(_fw(1.0), *_vertex_flip_pair(), statistic=_signed_vertex)
  assert 0.5 < res.epsilon_lower_bound <= 1.0


@pytest.mark.slow
def test_the_same_fw_audit_refutes_a_selection_twice_as_leaky():
  """Power: a selection of twice the claimed leak (fit at epsilon = 2, e.g. a sensitivity off by
  a factor 2) is caught against the claim 1 by this very audit (and stays below its own claim)."""
  res = _audit_fit(_fw(2.0), *_vertex_flip_pair(), statistic=_signed_vertex)
  assert 1.0 < res.epsilon_lower_bound <= 2.0


def _derivative_pair(n=100):
  """D: every record (x, y) = (1, 1e5); D': its first record has x = -1. A declared bound B = 1
  (both share M = beta B^2); |y| saturates the clipped phi' at -c for every record, so the
  replaced record moves g by 2 c / n: the whole sensitivity of derivative clipping."""
  X = np.ones((n, 1))
  X2 = X.copy()
  X2[0, 0] = -1.0
  return X, X2, np.full(n, 1e5)


def _derivative(epsilon):
  return lambda pb, keys: dg.dp_gcd.fit(pb, keys, epsilon=epsilon, delta=DELTA, passes=1,
                                        clipping_mode="derivative")


def _weight(w):
  return np.asarray(w)[..., 0]


def test_derivative_clipping_on_its_worst_case_pair_stays_below_its_claim():
  """Derivative clipping's audit. One feature: the Gaussian update carries the whole
  signal (the selection's share is spent on a single candidate), so the bound is a fraction of
  the claim (0.28 measured, 20,000 fits); the floor keeps the pair from going blind."""
  res = _audit_fit(_derivative(1.0), *_derivative_pair(), statistic=_weight, feature_bound=1.0)
  assert 0.15 < res.epsilon_lower_bound <= 1.0


def test_the_same_derivative_audit_refutes_a_fourfold_leak():
  """Power: a run four times as leaky as claimed (fit at epsilon = 4, e.g. a sensitivity off by
  a factor 4) is caught against the claim 1 (1.23 measured)."""
  res = _audit_fit(_derivative(4.0), *_derivative_pair(), statistic=_weight, feature_bound=1.0)
  assert 4.0 >= res.epsilon_lower_bound > 1.0  # above the claim of 1: the audit sees the leak


SOLVER_FITS = {
    "dp_gcd": lambda pb, **kw: dg.dp_gcd.fit(pb, **kw),
    "dp_cd": lambda pb, **kw: dg.dp_cd.fit(pb, **kw),
    "dp_sgd": lambda pb, **kw: dg.dp_sgd.fit(pb, **kw),
    "dp_fw": lambda pb, **kw: dg.dp_fw.fit(pb, radius=1.0, **kw),
    "dp_iht": lambda pb, **kw: dg.dp_iht.fit(pb, sparsity=1, **kw),
    "two_stage": lambda pb, **kw: dg.two_stage.fit(pb, sparsity=1, **kw),
    "dg.fit": lambda pb, **kw: dg.fit(dg.dp_gcd, pb, **kw),
}


@pytest.mark.parametrize("fit", SOLVER_FITS.values(), ids=SOLVER_FITS.keys())
def test_every_private_fit_refuses_the_nonprivate_smoothness_opt_in_by_type(fit):
  """The opt-in is a `DataSmoothness.NONPRIVATE`: every `fit` raises TypeError on its type, before it reads
  the data (the second problem has none: its features and targets are gone, so no program can be traced)
  and without a warning (before, it warned `PrivacyLeakWarning` and ran)."""
  X, _, y = _feature_pair()
  with pytest.warns(dg.PrivacyLeakWarning):
    problem = dg.make_problem(X, y, "squared", smoothness="from_data_nonprivate")
  without_data = dataclasses.replace(problem, XT=None, y=None)
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    for pb in (problem, without_data):
      with pytest.raises(TypeError, match=r"smoothness='from_data_nonprivate'.*guarantee would not hold.*"
                                          r"feature_bound=.*release.*run with explicit params"):
        fit(pb, key=jax.random.key(0), epsilon=1.0, delta=DELTA, passes=1)


def test_the_nonprivate_runner_still_takes_the_opt_in():
  """`run` (explicit params, no privacy claim) accepts the opt-in: the non-private study it is for."""
  X, _, y = _feature_pair()
  with pytest.warns(dg.PrivacyLeakWarning):
    problem = dg.make_problem(X, y, "squared", smoothness="from_data_nonprivate")
  result = dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(1.0, 1.0, 1.0, 1.0), passes=2)
  assert np.all(np.isfinite(result.w))


def _log_cosh(w, x, y):
  return jnp.log(jnp.cosh(x @ w - y))


def test_a_record_whose_loss_overflows_is_like_a_zero_gradient_record():
  """float32 cosh(100) overflows: the gradient is NaN. It must be zeroed, not propagated."""
  rng = np.random.default_rng(0)
  X = rng.normal(size=(50, 5)).astype(np.float32)
  y = (X @ np.linspace(-1, 1, 5)).astype(np.float32)
  y2 = y.copy()
  y2[0] = 100.0
  smoothness = np.mean(X**2, axis=0)  # public by declaration in this test
  keys = jax.random.split(jax.random.key(3), 300)
  fit = lambda yy: dg.dp_gcd.fit(dg.make_problem(X, yy, _log_cosh, smoothness=smoothness), keys,
                                 epsilon=1.0, delta=DELTA, passes=5)
  res_d, res_n = fit(y), fit(y2)
  assert np.all(np.isfinite(res_n.w))
  zeros_d = np.sum(np.all(np.asarray(res_d.trace.coordinates) == 0, axis=1))
  zeros_n = np.sum(np.all(np.asarray(res_n.trace.coordinates) == 0, axis=1))
  assert zeros_n < 30 and abs(int(zeros_n) - int(zeros_d)) < 30  # was 300 of 300 on D'


def test_audit_of_the_overflow_pair_stays_below_its_claim():
  rng = np.random.default_rng(1)
  X = rng.normal(size=(50, 3)).astype(np.float32)
  y = np.zeros(50, np.float32)
  y2 = y.copy()
  y2[0] = 100.0
  smoothness = np.ones(3)
  keys_d, keys_n = jax.random.split(jax.random.key(5))
  fit = lambda yy, k: dg.dp_gcd.fit(dg.make_problem(X, yy, _log_cosh, smoothness=smoothness),
                                    jax.random.split(k, RUNS), epsilon=1.0, delta=DELTA, passes=1).w
  w_d, w_n = fit(y, keys_d), fit(y2, keys_n)
  assert np.all(np.isfinite(w_n))
  stat = lambda w: np.asarray(w) @ np.ones(3)
  assert auditing.audit_statistics(stat(w_d), stat(w_n), delta=DELTA).epsilon_lower_bound <= 1.0


def test_dp_sgd_zeroes_an_overflowing_record():
  rng = np.random.default_rng(2)
  X = rng.normal(size=(40, 3)).astype(np.float32)
  y = np.zeros(40, np.float32)
  y[0] = 100.0
  problem = dg.make_problem(X, y, _log_cosh, smoothness=np.ones(3))
  result = dg.dp_sgd.fit(problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=1,
                         batch_size=8)
  assert np.all(np.isfinite(result.w))


@pytest.mark.parametrize("bad", [-20.0, np.nan])
def test_invalid_traced_multipliers_fail_closed(bad):
  X = np.random.default_rng(0).normal(size=(30, 4))
  problem = dg.make_problem(X, X[:, 0], "squared", smoothness=np.ones(4))
  keys = jax.random.split(jax.random.key(0), 4)
  multipliers = jnp.full(4, bad)  # traced under vmap: host validation cannot see the values
  run = jax.vmap(lambda s, k: dg.dp_gcd.run(problem, k, dg.dp_gcd.Params(1.0, 1.0, s, s),
                                            passes=3).w)
  assert np.all(np.isnan(run(multipliers, keys)))
  run_cd = jax.vmap(lambda s, k: dg.dp_cd.run(problem, k, dg.dp_cd.Params(1.0, 1.0, s),
                                              passes=1).w)
  assert np.all(np.isnan(run_cd(multipliers, keys)))
  with pytest.raises(ValueError, match="selection_noise"):  # concrete values: a clear error
    dg.dp_gcd.run(problem, keys[0], dg.dp_gcd.Params(1.0, 1.0, bad, 1.0), passes=3)


@pytest.mark.parametrize("field", ["step_size", "clip"])
def test_invalid_traced_step_size_or_clip_fail_closed(field):
  X = np.random.default_rng(0).normal(size=(30, 4))
  problem = dg.make_problem(X, X[:, 0], "squared", smoothness=np.ones(4))

  def w(value):
    params = dg.dp_gcd.Params(1.0, 1.0, 5.0, 5.0)._replace(**{field: value})
    return dg.dp_gcd.run(problem, jax.random.key(0), params, passes=3).w

  assert np.all(np.isnan(jax.jit(w)(jnp.asarray(-1.0))))
  assert np.all(np.isnan(jax.jit(w)(jnp.asarray(np.nan))))


@pytest.mark.slow
def test_fit_returns_no_nonprivate_value_unless_asked():
  X = np.random.default_rng(0).normal(size=(30, 4))
  problem = dg.make_problem(X, X[:, 0], "squared")
  for result in (dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=2),
                 dg.dp_cd.fit(problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=1),
                 dg.dp_sgd.fit(problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=1)):
    assert result.trace.nonprivate_objective is None
  asked = dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=2,
                        store_objective=True)
  assert asked.trace.nonprivate_objective.shape == (3,)


@pytest.mark.parametrize("labels", [(0.0, 1.0), (1.0, 2.0)])
def test_logistic_labels_other_than_plus_minus_one_are_rejected(labels):
  X = np.random.default_rng(0).normal(size=(10, 2))
  y = np.where(np.arange(10) % 2 == 0, *labels)
  with pytest.raises(ValueError, match=r"y in \{-1, \+1\}"):
    dg.make_problem(X, y, "logistic")


@pytest.mark.slow
def test_private_feature_bound_is_released_and_clips_the_features():
  X = np.ones((200, 3))
  X[0] = 1e4  # one extreme record
  problem = dg.make_problem(X, np.zeros(200), "squared")
  result = dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=1)
  entries = {entry.label: entry for entry in result.privacy.entries}
  assert entries["feature bound"].event == dg.privacy.PureDp(float(np.float32(0.1)))  # as the mechanism runs it
  assert result.privacy.epsilon <= 1.0
  assert any("released privately" in note for note in result.privacy.notes)


@pytest.mark.parametrize("kwargs, match", [
    (dict(bound_share=0.0), "bound_share"),
    (dict(bound_share=1.0), "bound_share"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(delta=1.0), "delta"),
])
def test_fit_bad_budget_arguments(kwargs, match):
  X = np.random.default_rng(0).normal(size=(10, 2))
  args = dict(epsilon=1.0, delta=DELTA, passes=1)
  args.update(kwargs)
  with pytest.raises(ValueError, match=match):
    dg.dp_gcd.fit(dg.make_problem(X, X[:, 0]), jax.random.key(0), **args)


@pytest.mark.parametrize("bad, match", [
    (dict(feature_bound=0.0), "feature_bound"),
    (dict(feature_bound=np.inf), "feature_bound"),
    (dict(feature_bound=np.ones(3)), "feature_bound"),
    (dict(smoothness=np.array([1.0, np.nan])), "smoothness"),
    (dict(smoothness="data"), "smoothness"),
    (dict(penalty=0.1), "penalties.L1"),
    (dict(penalty="l1"), "penalties.L1"),
    (dict(penalty=dg.penalties.L1(np.ones(3))), "shape"),
])
def test_bad_privacy_inputs_are_rejected_by_name(bad, match):
  X = np.random.default_rng(0).normal(size=(10, 2))
  with pytest.raises(ValueError, match=match):
    dg.make_problem(X, X[:, 0], "squared", **bad)


def test_a_custom_loss_without_public_smoothness_cannot_be_fit_privately():
  X = np.random.default_rng(0).normal(size=(10, 2))
  problem = dg.make_problem(X, X[:, 0], _log_cosh)
  with pytest.raises(ValueError, match="public smoothness"):
    dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=DELTA, passes=1)
