"""`dpgcd_jax.estimators._released`: the releases a fit makes before its runs are the prelude of the runs' program.

The fused program must release exactly what the mechanisms release on their own, from the
unpadded data, with the documented keys: checked here against `dpgcd_jax.privacy.bounds` and
`dpgcd_jax.privacy.scales` called directly on the raw (unpadded, untransposed) data, with the key
split the docstrings name (`split(key, 3)`: features, target, runs; `fit`: `split(key)`: bound,
run).
"""

import dataclasses
import math
import warnings

import jax
import numpy as np
import numpy_reference
import pytest
import scipy.sparse
from sklearn.datasets import load_diabetes

import dpgcd_jax as dg
from dpgcd_jax import _pytree
from dpgcd_jax import dense
from dpgcd_jax import layout as layout_lib
from dpgcd_jax.estimators import _released
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import scales
from dpgcd_jax.privacy import scales_budget


def _data(n=300, p=13, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p)) * np.logspace(-1, 1, p)
  return X, (X[:, 0] / 0.1 - X[:, -1] / 10 > 0).astype(int)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")  # the raw-data diagnostics of small n
@pytest.mark.parametrize("solver", ["dp_gcd", "dp_fw"])
def test_a_released_bound_is_the_mechanism_on_the_raw_data_with_the_first_key(solver):
  X, y = _data()
  statistic = numpy_reference.record_statistic(X)
  release = lambda key: float(bounds.bound_at_rank(key, statistic, np.float32(0.1 * 0.5),
                                                   math.ceil(bounds.DEFAULT_QUANTILE * 300)))
  got, wrong_key = [], []
  for seed in range(4):
    key = jax.random.key(seed)
    model = dg.estimators.DPGCDClassifier(classes=[0, 1], epsilon=0.5, scaling="bound", solver=solver,
                                          random_state=key).fit(X, y)
    np.testing.assert_array_equal(model.feature_bound_, np.full(13, release(jax.random.split(key, 3)[0])))
    got.append(model.feature_bound_[0])
    wrong_key.append(release(jax.random.split(key, 3)[1]))
  assert got != wrong_key  # the check tells the keys apart


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_per_feature_scales_are_the_mechanism_on_the_raw_data_with_the_first_key():
  X, y = _data(n=700, p=29, seed=1)  # buckets (1024, 32): padded records, features and the intercept row
  key, epsilon, delta = jax.random.key(8), 3.0, 1e-6
  model = dg.estimators.DPGCDClassifier(classes=[0, 1], epsilon=epsilon, delta=delta, scaling="private",
                                        random_state=key).fit(X, y)
  share = _released.scale_share(700, 29, epsilon, delta) or _released.SCALE_SHARES[-1]
  noise = np.float32(scales_budget.calibrate_scales(share * epsilon, share * delta, features=29))
  want = scales.private_feature_scales(jax.random.split(key, 3)[0], X.astype(np.float32).T, noise)
  np.testing.assert_array_equal(model.feature_bound_, np.asarray(want, float))
  assert np.unique(model.feature_bound_).size > 3  # per feature: the features' scales span 100x


def test_a_released_target_bound_is_the_mechanism_on_raw_y_with_the_second_key():
  X, y = load_diabetes(return_X_y=True)
  release = lambda key: float(bounds.bound_at_rank(key, np.abs(y.astype(np.float32)), np.float32(0.1 * 0.5),
                                                   math.ceil(_released.TARGET_QUANTILE * y.size)))
  got, wrong_key = [], []
  for seed in range(4):
    key = jax.random.key(seed)
    model = dg.estimators.DPGCDRegressor(epsilon=0.5, feature_bound=0.2, random_state=key).fit(X, y)
    assert model.target_bound_ == release(jax.random.split(key, 3)[1])
    assert f"T = {model.target_bound_:.4g}" in str(model.privacy_)
    got.append(model.target_bound_)
    wrong_key.append(release(jax.random.split(key, 3)[0]))
  assert got != wrong_key  # the check tells the keys apart
  declared = dg.estimators.DPGCDRegressor(epsilon=2.0, feature_bound=0.2, target_bound=300.0,
                                          random_state=0).fit(X, y)
  assert declared.target_bound_ == 300.0  # exact: a declared bound is not rounded to float32


@pytest.mark.slow
def test_fit_releases_its_feature_bound_with_the_first_half_of_its_key():
  X, y = _data(n=200, p=6, seed=2)
  problem = dg.make_problem(X, y - 0.5, "squared")  # no public smoothness: fit releases a bound
  key = jax.random.key(10)
  result = dg.dp_gcd.fit(problem, key, epsilon=1.0, delta=1e-5, passes=10)
  want = bounds.private_feature_bound(jax.random.split(key)[0], numpy_reference.record_statistic(X),
                                      np.float32(0.1))
  assert float(result.released) == float(want)
  batch = dg.dp_gcd.fit(problem, jax.random.split(key, 3), epsilon=1.0, delta=1e-5, passes=10)
  assert batch.released.shape == (3,)
  assert float(batch.released[0]) == float(dg.dp_gcd.fit(problem, jax.random.split(key, 3)[0], epsilon=1.0,
                                                         delta=1e-5, passes=10).released)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_layout_buffer_is_taken_over_and_the_caller_cannot_reuse_it(monkeypatch):
  """In place: the fused program's clipped features are an output aliased to the donated
  layout (no second copy of X); the layout the estimator built is deleted after the fit."""
  from dpgcd_jax.estimators import _linear  # pylint: disable=import-outside-toplevel
  layouts = []
  original = _linear.DPGCDBase._layout  # pylint: disable=protected-access
  monkeypatch.setattr(_linear.DPGCDBase, "_layout", lambda self, X: layouts.append(original(self, X)) or layouts[-1])
  X, y = _data()
  dg.estimators.DPGCDClassifier(classes=[0, 1], random_state=0).fit(X, y)
  assert len(layouts) == 1 and layouts[0].is_deleted()


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("as_sparse", [False, True])
def test_a_target_beyond_the_float32_range_warns_nothing(as_sparse):
  """No warning that depends on the data: |y_i| > 3.4e38 becomes inf in the run's float32 (then
  clipped to [-T, T]); before the releases moved into the run, y was clipped on the host first."""
  X, y = load_diabetes(return_X_y=True)
  y = y.copy()
  y[0] = 1e39
  X = scipy.sparse.csr_matrix(np.where(np.abs(X) > 0.03, X, 0.0)) if as_sparse else X
  with warnings.catch_warnings():
    warnings.simplefilter("error", RuntimeWarning)
    model = dg.estimators.DPGCDRegressor(epsilon=2.0, feature_bound=0.2, random_state=0).fit(X, y)
  assert np.isfinite(model.target_bound_) and np.all(np.isfinite(model.coef_))


def test_the_ledger_holds_the_epsilons_the_mechanisms_run_with_in_x64_with_float32_features():
  """x64 on, float32 X: the bounds are released in float32 (the statistic's dtype), so 0.1 epsilon
  runs as float32(0.1 epsilon) and the ledger says so; the CV's host release of T agrees."""
  X, y = load_diabetes(return_X_y=True)
  X = X.astype(np.float32)
  key = jax.random.key(3)
  with jax.enable_x64(True):
    model = dg.estimators.DPGCDRegressor(epsilon=0.5, scaling="bound", random_state=key).fit(X, y)
    host = _released.release_target_bound(jax.random.split(key, 3)[1], y, target_bound=None, epsilon=0.5,
                                          dtype=np.float32)
  entries = {e.label: e.event for e in model.privacy_.entries}
  assert entries["feature bound"] == dg.privacy.PureDp(float(np.float32(0.05)))
  assert entries["target bound"] == dg.privacy.PureDp(float(np.float32(0.05)))
  assert float(np.float32(0.05)) != 0.05  # the check can fail
  assert model.target_bound_ == host.bound


def test_dp_fw_in_x64_with_float64_features_fits():
  X, y = _data(n=200, p=5, seed=3)
  with jax.enable_x64(True):
    model = dg.estimators.DPGCDClassifier(classes=[0, 1], solver="dp_fw", epsilon=5.0, feature_bound=30.0,
                                          random_state=0).fit(X, y)
  assert np.all(np.isfinite(model.coef_)) and np.any(model.coef_)


@_pytree.dataclass_pytree(data_fields=[])
@dataclasses.dataclass(frozen=True)
class _ReleasesNothing:
  in_place = False
  ledger = dg.privacy.Ledger()

  def __call__(self, problem, key, targets):
    return problem, key, targets, None


@pytest.mark.parametrize("make_kwargs, error, match", [
    ({}, ValueError, "public smoothness.*smoothness_source='data'"),
    (dict(smoothness="from_data_nonprivate"), TypeError, "smoothness='from_data_nonprivate'"),
])
def test_a_prelude_that_leaves_the_smoothness_private_is_refused(make_kwargs, error, match):
  """A prelude replaces fit's own bound release: it must give the runs a public smoothness (the
  review's fail-open: a prelude that released nothing ran on the data's smoothness, reported
  end to end). The non-private opt-in is refused by its type before the prelude runs."""
  X, y = _data(n=100, p=4, seed=4)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PrivacyLeakWarning)
    problem = dg.make_problem(X, y - 0.5, "squared", **make_kwargs)
  with pytest.raises(error, match=match):
    dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=3, prelude=_ReleasesNothing())


def test_fit_accounts_the_ledger_of_a_prelude_it_is_given():
  """A prelude's releases join the one ledger by its `ledger` (the second review: passed
  without `prior`, a prelude's release went unaccounted and the report said epsilon 1)."""
  from dpgcd_jax.solvers import budget  # pylint: disable=import-outside-toplevel
  X, y = _data(n=200, p=6, seed=5)
  problem = dg.make_problem(X, y - 0.5, "squared")
  result = dg.dp_gcd.fit(problem, jax.random.key(1), epsilon=1.0, delta=1e-5, passes=10,
                         prelude=budget.FeatureBoundRelease(np.float32(0.5)))
  entries = {e.label: e.event for e in result.privacy.entries}
  assert entries["feature bound"] == dg.privacy.PureDp(0.5)
  assert result.privacy.epsilon <= 1.0 + 1e-9


def test_half_precision_features_compute_in_float32():
  """float16 counts are inexact past 2048 (neighbouring counts could land 2 apart, sensitivity 1
  accounted): a problem computes in float32 at least (the second review)."""
  X, y = _data(n=100, p=3, seed=6)
  problem = dg.make_problem(X.astype(np.float16), y - 0.5, "squared")
  assert problem.XT.dtype == np.float32 and problem.y.dtype == np.float32


@pytest.mark.parametrize("estimator", [dg.estimators.DPGCDClassifierCV, dg.estimators.DPGCDRegressorCV])
def test_a_sparse_entry_beyond_the_float32_range_warns_nothing_in_the_cv_estimators(estimator):
  X, y = _data(n=300, p=5, seed=7)
  X = np.where(np.abs(X) > 1.0, X, 0.0)
  X[5, 2] = 1e39
  y = y if estimator is dg.estimators.DPGCDClassifierCV else X[:, 0] - X[:, 4]
  with warnings.catch_warnings():
    warnings.simplefilter("error", RuntimeWarning)
    estimator(feature_bound=3.0, epsilon=1.0, random_state=0, param_grid={"clip": [0.5, 1.0]}).fit(
        scipy.sparse.csr_matrix(X), y)


def test_run_on_a_layout_without_its_bounds_raises_naming_the_cause():
  X, _ = _data(n=50, p=3, seed=8)
  layout = dense.columns(X, np.float32)
  problem = layout_lib.from_columns(layout, np.zeros(50), "squared", feature_bound=None, num_examples=50,
                                    num_features=3)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.PrivacyLeakWarning)
    with pytest.raises(ValueError, match="smoothness is NaN.*from_columns"):
      dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(0.5, 1.0, 1.0, 1.0), passes=2)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the raw-data diagnostics of small n
def test_auto_scaling_releases_one_bound_where_the_scales_draws_would_cost_delta():
  # At epsilon 100 the scales' L p draws would be charged (1 + e^100) L p eta: far above any
  # delta, so the fit would have to aim far below its budget (it reported 24.8 for 100).
  assert _released.resolve_scaling("auto", 300, 4, 10.0, 1.0 / 300**2) == "private"
  assert _released.resolve_scaling("auto", 300, 4, 100.0, 1.0 / 300**2) == "bound"
  rng = np.random.default_rng(3)
  X = rng.normal(size=(300, 4))
  y = X[:, 0] + 0.1 * rng.normal(size=300)
  model = dg.DPGCDRegressor(epsilon=100.0, random_state=0).fit(X, y)
  assert 99.0 <= model.privacy_.epsilon <= 100.0 and model.privacy_.delta <= 1.0 / 300**2
  model = dg.DPGCDRegressor(epsilon=1000.0, random_state=0).fit(X, y)  # raised before: no finite noise met it
  assert model.privacy_.epsilon <= 1000.0 and model.privacy_.delta <= 1.0 / 300**2
