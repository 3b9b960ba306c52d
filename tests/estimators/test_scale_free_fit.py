"""`scaling="per-step"` and its "auto" choice (`dpgcd_jax.estimators._training.choose_scaling`,
`dpgcd_jax.privacy.scale_spread`, `dpgcd_jax.solvers.scale_free`): dense features on unequal scales learn."""

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics import r2_score

import dpgcd_jax as dg
from dpgcd_jax.privacy import bounds as bounds_lib
from dpgcd_jax.privacy import scale_spread

CAP = float(bounds_lib.GRID[-1])


def _spread_set(seed, *, n=2500, p=600, spread=True, regression=False):
  """Gaussian features on scales `10^U[-1, 1]` (or all 1), 6 informative in units of their scale."""
  rng = np.random.default_rng(seed)
  scales = 10.0 ** rng.uniform(-1, 1, p) if spread else np.ones(p)
  Z = rng.standard_normal((n + 2000, p))
  w = np.zeros(p)
  w[:6] = rng.choice([-1.0, 1.0], 6)
  z = Z @ w
  y = z + 0.5 * rng.standard_normal(z.shape) if regression else (rng.random(z.shape) < 1 / (1 + np.exp(-2 * z)))
  X = (Z * scales).astype(np.float32)
  return X[:n], y[:n].astype(float if regression else int), X[n:], y[n:].astype(float if regression else int)


def _fit(estimator, X, y):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return estimator.fit(X, y)


def _labels(model):
  return [entry.label for entry in model.privacy_.ledger]


def test_auto_selects_scale_free_on_spread_scales_and_learns_what_one_bound_cannot():
  per_step, bound = [], []
  for seed in range(2):
    X, y, Xt, yt = _spread_set(seed)
    model = _fit(dg.DPGCDClassifier(epsilon=1.0, classes=[0, 1], random_state=seed), X, y)
    assert model.scaling_ == "per-step" and model.privacy_.epsilon <= 1.0 + 1e-9
    assert {scale_spread.LABEL, "column bound"} <= set(_labels(model))
    per_step.append(np.mean(model.predict(Xt) == yt))
    one = _fit(dg.DPGCDClassifier(epsilon=1.0, classes=[0, 1], random_state=seed, scaling="bound"), X, y)
    bound.append(np.mean(one.predict(Xt) == yt))
  # measured: 0.86 / 0.86 against 0.73 / 0.72
  assert np.mean(per_step) > 0.8 and np.mean(per_step) > np.mean(bound) + 0.08, (per_step, bound)


def test_auto_keeps_one_bound_on_equal_scales_after_the_vote():
  X, y, Xt, yt = _spread_set(0, spread=False)
  model = _fit(dg.DPGCDClassifier(epsilon=1.0, classes=[0, 1], random_state=0), X, y)
  assert model.scaling_ == "bound" and scale_spread.LABEL in _labels(model)
  assert "column bound" not in _labels(model) and np.mean(model.predict(Xt) == yt) > 0.8


def test_the_model_predicts_with_the_bounds_it_released():
  X, y, Xt, _ = _spread_set(1)
  model = _fit(dg.DPGCDClassifier(epsilon=1.0, classes=[0, 1], random_state=3, scaling="per-step"), X, y)
  coef, bound = model.coef_.ravel(), model.feature_bound_
  used = coef != 0
  assert used.sum() >= 3 and np.all(np.isin(bound[used], bounds_lib.GRID.astype(np.float32)))
  assert np.all(bound[used] < CAP) and np.all(bound[~used] == CAP)
  # the scale-free bounds follow each feature's own scale (its 0.9-quantile within a few grid steps)
  quantile = np.quantile(np.abs(X[:, used]), 0.9, axis=0)
  assert np.all((bound[used] > quantile / 4) & (bound[used] < quantile * 4)), (bound[used], quantile)
  expected = np.clip(Xt, -bound, bound) @ coef + model.intercept_
  np.testing.assert_allclose(model.decision_function(Xt), expected, rtol=1e-5, atol=1e-6)


def test_the_regressor_learns_on_spread_scales():
  X, y, Xt, yt = _spread_set(0, n=2500, p=400, regression=True)
  model = _fit(dg.DPGCDRegressor(epsilon=1.0, random_state=0), X, y)
  one = _fit(dg.DPGCDRegressor(epsilon=1.0, random_state=0, scaling="bound"), X, y)
  # measured: 0.91 against 0.33
  assert model.scaling_ == "per-step" and r2_score(yt, model.predict(Xt)) > 0.8 > r2_score(yt, one.predict(Xt))


def test_below_the_public_threshold_or_with_declared_bounds_nothing_is_spent_on_the_vote():
  X, y, _, _ = _spread_set(0, n=1500)
  for model in (dg.DPGCDClassifier(epsilon=0.5, classes=[0, 1], random_state=0),  # n epsilon < 1000
                dg.DPGCDClassifier(epsilon=1.0, classes=[0, 1], random_state=0, solver="dp_fw"),
                dg.DPGCDClassifier(epsilon=2.0, classes=[0, 1], random_state=0, feature_bound=30.0),
                dg.DPGCDClassifier(epsilon=2.0, classes=[0, 1], random_state=0, penalty="l1", alpha=1e-3)):
    assert scale_spread.LABEL not in _labels(_fit(model, X, y))


def test_the_vote_counts_each_record_once():
  rng = np.random.default_rng(0)
  equal = rng.standard_normal((50, 400))
  spread = equal * 10.0 ** rng.uniform(-1, 1, 400)
  rows = [equal, spread, np.zeros((3, 400)), (equal > 0)[:5], np.abs(spread)[:5]]  # binary; one sign only
  votes = scale_spread.record_votes(np.concatenate(rows))
  np.testing.assert_array_equal(votes, [False] * 50 + [True] * 50 + [False] * 13)


@pytest.mark.parametrize(("params", "data"), [
    (dict(classes=[0, 1, 2]), "three classes"),
    (dict(classes=[0, 1]), "sparse"),
    (dict(classes=[0, 1], penalty="l1"), "dense"),
    (dict(classes=[0, 1], solver="dp_fw"), "dense"),
    (dict(classes=[0, 1], clipping="derivative"), "dense"),
])
def test_per_step_refuses_what_it_cannot_fit_before_any_work(params, data):
  X, y, _, _ = _spread_set(0, n=200, p=20)
  if data == "three classes":
    y = np.arange(200) % 3
  if data == "sparse":
    X = sparse.csr_array(X)
  with pytest.raises(ValueError, match="scaling='per-step'"):
    dg.DPGCDClassifier(epsilon=1.0, scaling="per-step", **params).fit(X, y)


def test_the_search_falls_back_to_the_defaults_when_the_scales_spread():
  """Its candidates run on bounds released before them: on spread scales the defaults (per step) run instead."""
  X, y, Xt, yt = _spread_set(0, n=2500, p=300)
  with pytest.warns(UserWarning, match="their scales spread"):
    model = dg.DPGCDClassifierCV(epsilon=1.0, classes=[0, 1], random_state=0, param_grid={"clip": [0.25, 0.5]}
                                 ).fit(X, y)
  assert model.fell_back_ and model.scaling_ == "per-step" and "their scales spread" in model.fallback_reason_
  assert model.privacy_.epsilon <= 1.0 + 1e-9 and scale_spread.LABEL in _labels(model)
  assert np.mean(model.predict(Xt) == yt) > 0.8
