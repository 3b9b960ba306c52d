"""`dpgcd_jax.estimators._diagnostics`: the estimators' post-fit warnings fire on models that failed (w = 0, one class
or one value for every input) and stay silent on fits that learned, from released values only. The rates are measured in
`benchmarks/bench_warnings.py` (`benchmarks/results/warnings.md`)."""

import math
import warnings

import jax
import numpy as np
import pytest

from dpgcd_jax.estimators import DPGCDClassifier
from dpgcd_jax.estimators import DPGCDClassifierCV
from dpgcd_jax.estimators import DPGCDRegressor
from dpgcd_jax.estimators import DPGCDRegressorCV
from dpgcd_jax.estimators import _cv
from dpgcd_jax.estimators import _diagnostics
from dpgcd_jax.estimators import _released
from dpgcd_jax.privacy import bounds


def _fit_warnings(model, X, y):
  """The fitted model and the messages of the UserWarnings its fit raised (not PrivacyLeakWarning)."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit(X, y)
  return model, [str(w.message) for w in caught if w.category is UserWarning]


def _blobs(seed, n=400, p=10, weights=None):
  """Gaussian features, labels from a logistic model on the first 3 (class prior `weights`)."""
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  logit = X[:, :3] @ np.array([1.0, -1.0, 0.8]) + (0.0 if weights is None else math.log(weights[1] / weights[0]))
  return X, (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)


def _linear_target(seed, n, p=10):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  w = np.zeros(p)
  w[:3] = [1.0, -1.0, 0.5]
  return X, X @ w + 0.3 * rng.normal(size=n)


# ---------------------------------------------------------------------------------------------
# w = 0
# ---------------------------------------------------------------------------------------------
def test_a_zero_classifier_warns_naming_the_class_the_penalty_and_the_fix():
  X, y = _blobs(0)
  model, messages = _fit_warnings(DPGCDClassifier(classes=[0, 1], penalty="l1", alpha=10.0, epsilon=5.0,
                                                  max_iter=50, feature_bound=4.0, random_state=0), X, y)
  assert not np.any(model.coef_)
  (message,) = [m for m in messages if "every coefficient is 0" in m]
  majority = int(model.intercept_[0] > 0)
  assert f"predicts the same class, {majority}, for every input" in message
  assert "l1 penalty" in message and "Fix: a smaller alpha" in message


def test_a_zero_regressor_warns_naming_its_constant_prediction():
  X, y = _linear_target(1, 300)
  model, messages = _fit_warnings(DPGCDRegressor(penalty="l1", alpha=10.0, epsilon=5.0, max_iter=50,
                                                 feature_bound=4.0, target_bound=4.0, random_state=0), X, y)
  assert not np.any(model.coef_)
  (message,) = [m for m in messages if "every coefficient is 0" in m]
  assert f"predicts {model.intercept_:.4g} for every input" in message and "Fix:" in message


# ---------------------------------------------------------------------------------------------
# One class for every input, from the released model and the public bounds
# ---------------------------------------------------------------------------------------------
def test_one_vs_rest_constant_class_is_found_on_the_differences_of_the_scores():
  """Three classes whose coefficients are equal: each score ranges over [b_k - 2, b_k + 2] (the
  per-class intervals overlap), but every difference is the intercepts' one: class 'a' wins
  for every input."""
  coef = np.tile([[1.0, -1.0]], (3, 1))
  (message,) = _diagnostics.diagnose(coef, np.array([0.5, 0.0, 0.0]), np.ones(2), "declared", n=500, epsilon=1.0,
                                classes=np.array(["a", "b", "c"]))
  assert "same class, 'a', for every input within the feature bounds" in message
  # Class 'b' leaning on feature 0: |(w_a - w_b) B| = 1 > 0.5 = b_a - b_b, both norms: no class wins everywhere.
  assert _diagnostics.diagnose(coef + np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]), np.array([0.5, 0.0, 0.0]),
                            np.ones(2), "declared", n=500, epsilon=1.0) == []


def test_constant_class_within_the_bounds_and_within_their_ellipsoid():
  bound = np.ones(4)
  box = _diagnostics.diagnose(np.array([[0.2, 0.2, -0.2, 0.1]]), np.array([-0.8]), bound, "declared", n=500,
                           epsilon=1.0, classes=np.array(["ham", "spam"]))
  assert len(box) == 1 and "same class, 'ham', for every input within the feature bounds" in box[0]
  assert "0.7" in box[0]  # sum_j |w_j| B_j, the features' reach, is named
  # ||w B||_1 = 1.2 > 0.7 = b: some corner of the box is class 1, but every x with
  # sum_j (x_j / B_j)^2 <= 1 scores at most ||w B||_2 = 0.6 < 0.7.
  ellipsoid = _diagnostics.diagnose(np.array([[0.3, 0.3, 0.3, 0.3]]), np.array([0.7]), bound, "declared", n=500,
                                 epsilon=1.0, classes=np.array(["ham", "spam"]))
  assert len(ellipsoid) == 1 and "same class, 'spam'" in ellipsoid[0] and "sum_j (x_j / B_j)^2 <= 1" in ellipsoid[0]
  # A boundary that crosses the ellipsoid: nothing to say.
  assert _diagnostics.diagnose(np.array([[0.3, 0.3, 0.3, 0.3]]), np.array([0.5]), bound, "declared", n=500,
                            epsilon=1.0) == []


def test_an_imbalanced_fit_that_answers_the_majority_warns():
  """85 / 15 classes with a weak signal: the fits answer the majority class on held-out rows; the
  ones whose released model says so warn, naming the class."""
  warned = constant = 0
  for seed in range(4):
    X, y = _blobs(seed, n=1400, weights=(0.85, 0.15))
    X[:, :3] *= 0.3
    model, messages = _fit_warnings(DPGCDClassifier(classes=[0, 1], epsilon=0.5, feature_bound=3.0,
                                                    random_state=seed), X[:400], y[:400])
    if np.unique(model.predict(X[400:])).size == 1:
      constant += 1
      warned += any("same class, 0, for every input" in m for m in messages)
  assert constant >= 2 and warned == constant, (constant, warned)


# ---------------------------------------------------------------------------------------------
# Fits that learned: no warning (the old "R^2 near or below 0" and one-bound fallback warnings
# fired on every such fit)
# ---------------------------------------------------------------------------------------------
def test_a_regressor_that_learned_does_not_warn():
  learned = 0
  for seed in range(6):
    X, y = _linear_target(seed, 1300)
    model, messages = _fit_warnings(DPGCDRegressor(epsilon=0.3, feature_bound=3.0, target_bound=4.0,
                                                   random_state=seed), X[:300], y[:300])
    if model.score(X[300:], y[300:]) >= 0.1:
      learned += 1
      assert messages == [], messages
  assert learned >= 2


def test_a_classifier_that_learned_with_one_released_bound_does_not_warn():
  learned = 0
  for seed in range(3):
    X, y = _blobs(seed, n=1300)
    model, messages = _fit_warnings(DPGCDClassifier(classes=[0, 1], epsilon=1.0, random_state=seed),
                                    X[:300], y[:300])
    assert model.scaling_ == "bound"  # n = 300 is far below what per-feature scales need
    if model.score(X[300:], y[300:]) >= np.mean(y[300:] == np.argmax(np.bincount(y[300:]))) + 0.05:
      learned += 1
      assert messages == [], messages
  assert learned >= 2


# ---------------------------------------------------------------------------------------------
# Released bounds that are the noise's
# ---------------------------------------------------------------------------------------------
def test_noise_probability_matches_the_release_it_describes():
  """`noise_probability` against a Monte Carlo of AboveThreshold (`dpgcd_jax.privacy.bounds`) with
  no record below any grid point: every query is `-rank`; threshold and query noises are discrete
  Laplace of the scales that run (`above_threshold_scales`), drawn here in NumPy as differences of
  two geometric variables; the share of releases at or below 1.0 (grid index 64)."""
  n, epsilon = 280, np.float32(0.05)
  rank = math.ceil(0.9 * n)
  t_threshold, t_query, _ = (float(t) for t in bounds.above_threshold_scales(epsilon))
  rng = np.random.default_rng(0)

  def laplace(scale, size):
    q = 1.0 - math.exp(-1.0 / scale)
    return rng.geometric(q, size) - rng.geometric(q, size)

  draws = 20_000
  rho = laplace(t_threshold, (draws, 1))
  stops = np.any(-rank + laplace(t_query, (draws, 65)) >= rho, axis=1)  # grid points 0 .. 64 (1.0)
  released = _released.Released(np.array([1.0]), "bound", None, "", epsilon=epsilon, rank=rank)
  expected = _diagnostics.noise_probability(released)
  assert 0.2 < expected < 0.9 and abs(np.mean(stops) - expected) < 0.015, (np.mean(stops), expected)
  # Below the reference 1.0 a release is judged at 1.0; above it, at its own value (larger).
  assert _diagnostics.noise_probability(released._replace(bound=np.array([2.0 ** -16]))) == expected
  assert _diagnostics.noise_probability(released._replace(bound=np.array([64.0]))) > expected
  assert _diagnostics.noise_probability(released._replace(rank=10 * rank)) < 1e-3  # more rows: informative
  assert _diagnostics.noise_probability(released._replace(rank=None)) is None  # declared: nothing to judge


def test_a_target_bound_that_is_the_noise_warns_and_names_the_fix():
  X, y = _linear_target(2, 300)
  y = 50.0 * y
  model, messages = _fit_warnings(DPGCDRegressor(epsilon=0.2, feature_bound=3.0, random_state=0), X, y)
  (message,) = [m for m in messages if "released target bound" in m]
  assert f"T = {model.target_bound_:.3g}" in message and "declare target_bound=" in message


# ---------------------------------------------------------------------------------------------
# CV: the fallback to the defaults is an attribute and a warning
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("estimator, kwargs", [
    (DPGCDClassifierCV, dict(classes=[0, 1])), (DPGCDRegressorCV, dict(target_bound=4.0))])
def test_cv_says_when_it_fell_back_to_the_defaults_and_why(estimator, kwargs):
  X, y = _blobs(3, n=300)
  model, messages = _fit_warnings(estimator(epsilon=1.0, feature_bound=4.0, random_state=0, **kwargs), X, y)
  reason = f"n epsilon = 300 < {_cv.SELECTION_MIN_N_EPSILON}"
  assert model.fell_back_ is True and reason in model.fallback_reason_
  (message,) = [m for m in messages if "search was skipped" in m]
  assert reason in message and "param_grid=" in message
  searched, messages = _fit_warnings(estimator(epsilon=1.0, feature_bound=4.0, random_state=0,
                                               param_grid={"clip": [0.1, 0.2]}, **kwargs), X, y)
  assert searched.fell_back_ is False and searched.fallback_reason_ is None
  assert not any("search was skipped" in m for m in messages)


# ---------------------------------------------------------------------------------------------
# predict: one answer for every row it returns
# ---------------------------------------------------------------------------------------------
def _predict_warnings(model, X):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    predictions = model.predict(X)
  return predictions, [str(w.message) for w in caught if w.category is UserWarning]


def test_a_classifier_answering_one_class_on_the_rows_warns_at_predict_only_there():
  """Non-negative features with symmetric bounds: no released value proves one class over the
  bounds, but the rows all get the majority; `predict` says so, `private_score` (whose
  predictions are not released) and a model that separates the rows do not."""
  rng = np.random.default_rng(0)
  X, y = np.abs(rng.normal(size=(400, 10))), (rng.uniform(size=400) < 0.2).astype(int)
  model = DPGCDClassifier(classes=[0, 1], feature_bound=3.0, random_state=0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model.fit(X, y)
  predictions, messages = _predict_warnings(model, X)
  assert np.unique(predictions).size == 1
  (message,) = messages
  assert message.startswith("DPGCDClassifier.predict: every one of the 400 predictions is the same class, 0")
  assert "Cause:" in message and "feature_bound=(lower, upper)" in message
  _, few = _predict_warnings(model, X[:29])  # under MIN_ROWS: a model that learned may answer one class
  assert few == []
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.private_score(X, y, epsilon=1.0, key=jax.random.key(0))
  assert not [w for w in caught if "predictions" in str(w.message)]
  X, y = _blobs(0)
  model = DPGCDClassifier(classes=[0, 1], epsilon=5.0, feature_bound=4.0, random_state=0).fit(X, y)
  predictions, messages = _predict_warnings(model, X)
  assert np.unique(predictions).size == 2 and messages == []


def test_a_regressor_with_flat_predictions_warns_at_predict():
  X, y = _linear_target(0, 400)
  model = DPGCDRegressor(epsilon=5.0, feature_bound=3.0, target_bound=4.0, random_state=0).fit(X, y)
  _, messages = _predict_warnings(model, X)
  assert messages == []
  model.coef_ = 0.001 * model.coef_  # a model that barely moves its predictions (std << 1% of T)
  _, messages = _predict_warnings(model, X)
  (message,) = messages
  assert "standard deviation" in message and "target bound T = 4" in message and "target_bound=" in message


# ---------------------------------------------------------------------------------------------
# A budget below the planning rule (docs/high_dim.md), from public n, epsilon and p only.
def test_a_budget_below_the_planning_rule_warns_whatever_the_model():
  coef, intercept, bound = np.full((1, 1000), 0.01), np.zeros(1), np.ones(1000)
  below = _diagnostics.diagnose(coef, intercept, bound, "declared", n=150, epsilon=1.0, target_bound=3.0)
  assert len(below) == 1 and "25 ln p = 172.7" in below[0] and "p = 1000" in below[0] and "w = 0" in below[0]
  # Just above the floor, or below the dimension where the rule was measured (p = 13, as wine at
  # epsilon = 0.3, whose fits learned below it): no warning.
  assert _diagnostics.diagnose(coef, intercept, bound, "declared", n=173, epsilon=1.0, target_bound=3.0) == []
  assert _diagnostics.diagnose(np.full((1, 13), 0.5), intercept, np.ones(13), "declared", n=124, epsilon=0.3,
                               target_bound=3.0) == []


def test_a_fit_at_the_paper_permeability_budget_says_it_cannot_pay():
  # n = 165, p = 1107 at epsilon = 1 (the paper's permeability set, whose defaults land above the
  # loss at w = 0): the fit names the rule.
  rng = np.random.default_rng(0)
  X = (rng.uniform(size=(165, 1107)) < 0.1).astype(float)
  y = X[:, :5] @ np.ones(5) + rng.normal(size=165)
  _, messages = _fit_warnings(DPGCDRegressor(epsilon=1.0, feature_bound=1.0, target_bound=3.0, random_state=0),
                              X, y - y.mean())
  assert any("25 ln p" in m and "p = 1107" in m for m in messages), messages
