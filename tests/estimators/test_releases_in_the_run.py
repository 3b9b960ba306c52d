"""The releases a fit makes before its runs are the prelude of the runs' program (issue 19, item 1).

The fused program must release exactly what the mechanisms release on their own, from the
unpadded data, with the documented keys: checked here against `dpgcd_jax.privacy.bounds` and
`dpgcd_jax.privacy.scales` called directly on the raw (unpadded, untransposed) data, with the key
split the docstrings name (`split(key, 3)`: features, target, runs; `fit`: `split(key)`: bound,
run).
"""

import math

import jax
import numpy as np
import pytest
from sklearn.datasets import load_diabetes

import dpgcd_jax as dg
from dpgcd_jax.estimators import _released
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import scales


def _data(n=300, p=13, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p)) * np.logspace(-1, 1, p)
  return X, (X[:, 0] / 0.1 - X[:, -1] / 10 > 0).astype(int)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the raw-data diagnostics of small n
@pytest.mark.parametrize("solver", ["dp_gcd", "dp_fw"])
def test_a_released_bound_is_the_mechanism_on_the_raw_data_with_the_first_key(solver):
  X, y = _data()
  statistic = np.abs(X.astype(np.float32)).max(axis=1)
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


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_per_feature_scales_are_the_mechanism_on_the_raw_data_with_the_first_key():
  X, y = _data(n=700, p=29, seed=1)  # buckets (1024, 32): padded records, features and the intercept row
  key, epsilon, delta = jax.random.key(8), 3.0, 1e-6
  model = dg.estimators.DPGCDClassifier(classes=[0, 1], epsilon=epsilon, delta=delta, scaling="private",
                                        random_state=key).fit(X, y)
  share = _released.scale_share(700, 29, epsilon, delta) or _released.SCALE_SHARES[-1]
  noise = np.float32(scales.calibrate_scales(share * epsilon, share * delta))
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


def test_fit_releases_its_feature_bound_with_the_first_half_of_its_key():
  X, y = _data(n=200, p=6, seed=2)
  problem = dg.make_problem(X, y - 0.5, "squared")  # no public smoothness: fit releases a bound
  key = jax.random.key(10)
  result = dg.dp_gcd.fit(problem, key, epsilon=1.0, delta=1e-5, passes=10)
  want = bounds.private_feature_bound(jax.random.split(key)[0], np.abs(X.astype(np.float32)).max(axis=1),
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
