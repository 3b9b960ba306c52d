"""`dpgcd_jax.estimators`: the intercept clipped apart from the features (`_defaults.intercept_bound`) when DP-GCD steps
by the released curvature."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.estimators import _defaults
from dpgcd_jax.estimators import _released
from dpgcd_jax.solvers import greedy


def quiet(model, X, y):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return model.fit(X, y)


def intercept_notes(model):
  return [note for note in model.privacy_.notes if note.startswith("intercept clipped apart")]


@pytest.mark.parametrize("clip, expected", [(0.1, 5.0), (0.25, 2.0), (0.5, 1.0), (2.0, 1.0)])
def test_the_intercept_bound_is_the_intercept_clip_over_the_clip_never_below_one(clip, expected):
  assert _defaults.intercept_bound(clip) == pytest.approx(expected)


def test_the_release_puts_the_intercept_bound_at_feature_p_and_ones_on_the_padding():
  release = _released.declared_release(np.array([3.0, 2.0, 1.0, 1.0, 1.0]), num_examples=4, num_features=2)
  release = _released.FeatureRelease(**{**release.__dict__, "intercept_bound": 4.0})
  bounds = np.asarray(release.bounds(None, jnp.zeros((5, 4))))
  np.testing.assert_allclose(bounds, [3.0, 2.0, 4.0, 1.0, 1.0])


def test_the_selection_sensitivity_is_unchanged_and_the_intercept_terms_clip_at_the_intercept_clip():
  """With bounds `[B, K]` the thresholds are `[clip B, clip K]` and every normalized score's
  sensitivity stays `2 clip / (n sqrt(beta))`: the intercept's larger clip costs no selection noise."""
  rng = np.random.default_rng(0)
  n, clip = 50, 0.1
  K = _defaults.intercept_bound(clip)
  X = np.hstack([rng.normal(size=(n, 3)), np.ones((n, 1))])
  problem = problem_lib.make_problem(X, rng.choice([-1.0, 1.0], n), dg.losses.logistic,
                                     feature_bound=np.array([3.0, 2.0, 3.0, K]))
  M = problem_lib.coordinate_smoothness(problem)
  thresholds = clipping.coordinate_thresholds(clip, M, problem.curvature)
  np.testing.assert_allclose(np.asarray(thresholds)[-1], _defaults.AUTO_INTERCEPT_CLIP, rtol=1e-6)
  beta = problem.curvature
  np.testing.assert_allclose(float(greedy.selection_sensitivity(thresholds, M, n)), 2 * clip / (n * np.sqrt(beta)),
                             rtol=1e-5)


def test_released_curvature_runs_clip_the_intercept_apart_and_say_so():
  rng = np.random.default_rng(1)
  X = rng.normal(size=(500, 4))
  y = X[:, 0] + 0.1 * rng.normal(size=500)
  model = quiet(dg.DPGCDRegressor(feature_bound=3.0, target_bound=4.0, random_state=0), X, y)
  [note] = intercept_notes(model)
  assert f"its terms at {_defaults.AUTO_INTERCEPT_CLIP:g}" in note
  public = dg.DPGCDRegressor(feature_bound=3.0, target_bound=4.0, random_state=0,
                             solver_params={"curvature": "public"})
  assert intercept_notes(quiet(public, X, y)) == []
  assert intercept_notes(quiet(dg.DPGCDRegressor(feature_bound=3.0, target_bound=4.0, random_state=0,
                                                 fit_intercept=False), X, y)) == []


@pytest.mark.slow
def test_a_rare_class_is_learned_with_the_intercept_apart():
  """90/10 labels from one Gaussian feature under a declared bound 3 (the classifier's floor
  clip 0.25): balanced accuracy 0.51 when the intercept was clipped alike (it holds the prior,
  and its steps shrank), 0.70 apart (`benchmarks/bench_small_defaults.py` `imb4000_b3`)."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(4000, 1))
  y = (x[:, 0] + 0.5 * rng.normal(size=4000) > 1.28).astype(int)
  scores = []
  for seed in range(3):
    model = quiet(dg.DPGCDClassifier(classes=[0, 1], feature_bound=3.0, random_state=seed), x[:2800], y[:2800])
    scores.append(balanced_accuracy_score(y[2800:], model.predict(x[2800:])))
  assert np.mean(scores) > 0.6, scores


def test_the_regressor_default_clip_learns_a_small_gaussian_regression():
  """600 x 5, declared bounds (R^2 0.73 at the former clip 0.3 with the intercept alike, 0.85 now)."""
  rng = np.random.default_rng(0)
  X = rng.normal(size=(600, 5))
  y = X @ np.array([1.0, -1.0, 0.0, 0.0, 0.5]) + 0.3 * rng.normal(size=600)
  scores = [quiet(dg.DPGCDRegressor(feature_bound=3.0, target_bound=4.0, random_state=seed), X[:420], y[:420])
            .score(X[420:], y[420:]) for seed in range(3)]
  assert np.mean(scores) > 0.8, scores
