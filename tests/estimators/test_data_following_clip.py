"""`dpgcd_jax.estimators._defaults` (the "auto" clip), `dpgcd_jax.privacy.typical_size`: the clip follows the data,
released privately in the fit's ledger: the classifier's `max(0.25, 0.5 s)`, `s` the typical feature size in units of
the declared bounds (which it shrinks to `4 s` below `s = 1/4`: `bound_scale`); the regressor's `min(0.15, s)`, `s` the
typical `|y - c| / T` under a declared target bound."""

import warnings

import numpy as np
import pytest
from scipy import sparse

import dpgcd_jax as dg
from dpgcd_jax.privacy import typical_size


def labels_of(X, rng, support=5):
  w = np.zeros(X.shape[1])
  w[:support] = rng.choice([-1.0, 1.0], support)
  z = np.asarray(X @ w).ravel()
  return (rng.random(X.shape[0]) < 1.0 / (1.0 + np.exp(-(z - z.mean())))).astype(int)


def fit(X, y, **params):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return dg.DPGCDClassifier(epsilon=1.0, classes=[0, 1], **params).fit(X, y)


def labels(model):
  return [entry[0] for entry in model.privacy_.ledger.entries]


def test_binary_features_under_their_bound_clip_at_half_with_the_release_in_the_ledger():
  rng = np.random.default_rng(0)
  X = sparse.csr_array((rng.random((3000, 400)) < 0.05).astype(np.float32))
  model = fit(X, labels_of(X, rng, 5) , feature_bound=1.0, random_state=0)
  assert model.clip_ == 0.5 and model.step_size_ == 1.0
  assert typical_size.LABEL in labels(model)
  assert model.privacy_.epsilon <= 1.0 + 1e-9
  assert any("typical feature size" in note and "clip 0.5" in note for note in model.privacy_.notes)


def binary_words(n=8000, p=2000):
  """The docs page "High dimension"'s example: words of frequency 0.03, 10 informative at 0.15."""
  rng = np.random.default_rng(0)
  X = sparse.random(n, p, density=0.03, random_state=0, format="csr", dtype=np.float32)
  X.data[:] = 1.0
  w = np.zeros(p)
  w[:10] = 3.0 * rng.choice([-1.0, 1.0], 10)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # scipy's SparseEfficiencyWarning
    X[:, :10] = sparse.csr_matrix((rng.random((n, 10)) < 0.15).astype(np.float32))
  z = X @ w
  return X, (rng.random(n) < 1 / (1 + np.exp(-(z - z.mean())))).astype(int)


def test_binary_words_learn_more_at_the_released_clip_than_at_the_fixed_one():
  """Measured (4 keys): 0.77 at the released clip 0.5, 0.69 at 0.25 (a lower clip makes the
  gradient a count of signs)."""
  X, y = binary_words()
  auto, fixed = [], []
  for seed in range(4):
    auto.append(fit(X[:6000], y[:6000], feature_bound=1.0, random_state=seed).score(X[6000:], y[6000:]))
    fixed.append(fit(X[:6000], y[:6000], feature_bound=1.0, random_state=seed, clip=0.25).score(X[6000:], y[6000:]))
  assert np.mean(auto) > np.mean(fixed) + 0.04, (auto, fixed)


def released_size(model):
  """The typical size the fit released: the grid point its `privacy_` note prints (4 digits)."""
  note = next(note for note in model.privacy_.notes if "typical_size" in note)
  printed = float(note.split(": size ")[1].split(",")[0])
  size = typical_size.GRID[np.argmin(np.abs(typical_size.GRID - printed))]
  assert abs(size - printed) <= 1e-3 * size, (printed, size)  # 4 digits; the grid points are 19% apart
  return size


def test_a_loose_declared_bound_keeps_the_floor_and_is_shrunk_to_four_times_the_typical_size():
  """Gaussian features under a declared bound 10: the released size `s` is about 0.08 (a grid point);
  the features are clipped at `10 x 4 s` (`bound_scale`), where they are about 1/4 in size, and the
  clip stays at the floor 0.25, which keeps the intercept's steps (`_follow_data`); `predict` clips
  at the shrunk bounds too."""
  rng = np.random.default_rng(0)
  X = rng.standard_normal((2000, 20))
  model = fit(X, labels_of(X, rng), feature_bound=10.0, random_state=0)
  assert model.clip_ == 0.25 and typical_size.LABEL in labels(model)
  size = released_size(model)
  assert 0.05 < size < 0.15, size
  np.testing.assert_allclose(model.feature_bound_, np.full(20, 40.0 * size))
  assert any("clipped at" in note for note in model.privacy_.notes)
  far = np.where(np.arange(20) < 10, 50.0, -50.0)[None, :]  # beyond the shrunk bounds: predicted as at them
  np.testing.assert_allclose(model.decision_function(far), model.decision_function(far / 50.0 * 40.0 * size))


@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_a_shrunk_bound_stays_in_the_range_a_problem_takes(layout):
  """A declared bound of 2^-58 over entries near 2^-66: the released size is the grid's floor 1/64,
  and `4 s B = 2^-62` would leave `BOUND_RANGE` (`B^2` subnormal; sparse, a refusal after the release
  that named the released size and left the accountant uncharged); the shrunk bounds stop at `2^-60`."""
  rng = np.random.default_rng(5)
  X = rng.standard_normal((2000, 8)) * 2.0**-66
  y = labels_of(X, rng, 2)
  model = fit(sparse.csr_array(X) if layout == "sparse" else X, y, feature_bound=2.0**-58, random_state=0)
  assert released_size(model) == typical_size.GRID[0]
  np.testing.assert_array_equal(model.feature_bound_, np.full(8, 2.0**-60))


def test_a_bound_near_the_typical_size_is_not_shrunk():
  """Binary features under their bound 1 (size 1) and Gaussian ones under 3 (size about 0.27, 4 s > 1)."""
  rng = np.random.default_rng(3)
  for X, bound in ((sparse.csr_array((rng.random((2000, 30)) < 0.2).astype(np.float32)), 1.0),
                   (rng.standard_normal((2000, 30)), 3.0)):
    model = fit(X, labels_of(X, rng), feature_bound=bound, random_state=0)
    assert typical_size.LABEL in labels(model)
    np.testing.assert_array_equal(model.feature_bound_, np.full(30, bound))
    assert not any("clipped at" in note for note in model.privacy_.notes)


@pytest.mark.slow
def test_rows_of_unit_norm_under_bound_one_learn_once_the_bound_is_shrunk():
  """Binary words scaled to unit l2 norm (TfidfVectorizer's default rows) under `feature_bound=1`:
  entries about 0.14, 7x below the bound. The declared bound as it is (a fixed clip 0.25: no
  release, no shrink) drowns the scores; shrunk to 4 s it learns (measured, 3 keys: 0.69 / 0.64)."""
  X, y = binary_words(n=6000, p=1000)
  X = sparse.csr_array(X / np.sqrt(np.asarray(X.sum(axis=1)).reshape(-1, 1) + 1e-12))
  auto, fixed = [], []
  for seed in range(3):
    auto.append(fit(X[:4500], y[:4500], feature_bound=1.0, random_state=seed).score(X[4500:], y[4500:]))
    fixed.append(fit(X[:4500], y[:4500], feature_bound=1.0, random_state=seed, clip=0.25).score(X[4500:], y[4500:]))
  assert np.mean(auto) > np.mean(fixed) + 0.03, (auto, fixed)


@pytest.mark.slow
@pytest.mark.parametrize("params", [dict(feature_bound=3.0, clip=0.2), dict(),
                                    dict(feature_bound=3.0, solver_params={"curvature": "public"})])
def test_no_release_when_the_clip_is_given_or_the_bounds_are_released_in_the_run(params):
  rng = np.random.default_rng(1)
  X = rng.standard_normal((400, 5))
  model = fit(X, labels_of(X, rng, 2), random_state=0, **params)
  assert typical_size.LABEL not in labels(model)
  assert model.clip_ == params.get("clip", 0.25 if "solver_params" not in params else 0.1)


def test_too_few_records_for_an_informative_release_spend_nothing_on_it():
  rng = np.random.default_rng(2)
  X = sparse.csr_array((rng.random((600, 50)) < 0.1).astype(np.float32))
  model = fit(X, labels_of(X, rng, 2), feature_bound=1.0, random_state=0)
  assert model.clip_ == 0.25 and typical_size.LABEL not in labels(model)
  assert any("would not be informative at n = 600" in note for note in model.privacy_.notes)


def regression(n=4000, p=20, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(2 * n, p))
  w = np.zeros(p)
  w[:3] = [1.0, -1.0, 0.5]
  y = X @ w + 0.3 * rng.normal(size=2 * n)  # sd(y) about 1.5
  return X[:n], y[:n], X[n:], y[n:]


def fit_regressor(X, y, **params):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return dg.DPGCDRegressor(epsilon=1.0, feature_bound=3.0, **params).fit(X, y)


def test_a_loose_declared_target_bound_no_longer_drowns_the_regressor():
  """`T = 40` (26 sd): the fixed clip 0.15 T puts the noise far above every residual and the
  steps overshoot (R^2 0.49-0.77 over 3 keys, measured); the clip at the released typical
  `|y| / T` (0.031) learns as with a tight bound (0.93-0.96)."""
  X, y, X_test, y_test = regression()
  for seed in range(3):
    model = fit_regressor(X, y, target_bound=40.0, random_state=seed)
    fixed = fit_regressor(X, y, target_bound=40.0, random_state=seed, clip=0.15)
    assert model.clip_ < 0.05 and typical_size.TARGET_LABEL in labels(model)
    assert typical_size.TARGET_LABEL not in labels(fixed)  # a declared clip: nothing released
    assert model.privacy_.epsilon <= 1.0 + 1e-9
    assert model.score(X_test, y_test) > 0.9 > fixed.score(X_test, y_test)
  assert any("typical |y - c| / T" in note and "clip 0.03" in note for note in model.privacy_.notes)


def test_a_tight_target_bound_keeps_the_fixed_clip_and_a_released_one_releases_no_size():
  X, y, _, _ = regression()
  tight = fit_regressor(X, y, target_bound=4.0, random_state=0)  # s about 0.3: the cap 0.15 binds
  assert tight.clip_ == 0.15 and typical_size.TARGET_LABEL in labels(tight)
  released = fit_regressor(X, y, random_state=0)  # T released: y's scale is T's, the fixed clip
  assert released.clip_ == 0.15 and typical_size.TARGET_LABEL not in labels(released)
  assert typical_size.LABEL not in labels(released)  # nor the features' (the classifier's rule)
