"""`dpgcd_jax.estimators._cv`, `dpgcd_jax.privacy.tuning`: private hyperparameter selection: accounting against
dp_accounting, sampling, grids, CV estimators."""

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import dp_event
from sklearn.base import clone

from dpgcd_jax.estimators import DPGCDClassifierCV
from dpgcd_jax.estimators import DPGCDRegressorCV
from dpgcd_jax.estimators._cv import check_param_grid
from dpgcd_jax.privacy import Gaussian
from dpgcd_jax.privacy import Laplace
from dpgcd_jax.privacy import Ledger
from dpgcd_jax.privacy import _rdp
from dpgcd_jax.privacy import tuning

ORDERS = np.array([1.1, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0,
                   24.0, 32.0, 48.0, 64.0, 128.0, 256.0])
BASES = {  # the same mechanism as a ledger and as a dp_accounting event
    "gaussian": (Ledger.of(("update", Gaussian(8.0), 10)),
                 dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(8.0), 10)),
    "gaussian+laplace": (Ledger.of(("update", Gaussian(5.0), 4), ("score", Laplace(0.3), 1)),
                         dp_event.ComposedDpEvent([
                             dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(5.0), 4),
                             dp_event.LaplaceDpEvent(1.0 / 0.3)])),
}


def _dp_accounting(event, mean, shape, delta):
  accountant = dp_accounting.rdp.RdpAccountant(list(ORDERS))
  accountant.compose(dp_event.RepeatAndSelectDpEvent(event, mean, shape))
  return accountant.get_epsilon(delta)


@pytest.mark.parametrize("base", sorted(BASES))
@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("mean", [1.0, 4.0, 20.0])
def test_accounting_matches_dp_accounting(base, shape, mean):
  """Same orders: the same RDP curve, hence the same epsilon; dense orders: slightly tighter."""
  ledger, event = BASES[base]
  base_rdp = sum(count * e.rdp(ORDERS) for e, count in ledger.aggregated())
  ours = tuning.repeat_and_select_rdp(ORDERS, base_rdp, mean, shape)
  conversion = np.min(_rdp.rdp_conversion(ORDERS, ours, 1e-6))
  theirs = _dp_accounting(event, mean, shape, 1e-6)
  np.testing.assert_allclose(conversion, theirs, rtol=1e-6)  # their gamma has tolerance 1e-9
  dense = Ledger.of(("select", tuning.RepeatAndSelect((ledger,), mean, shape), 1)).epsilon(1e-6)
  assert 0.95 * theirs <= dense <= theirs * (1 + 1e-6)


def test_parts_take_the_worst_curve():
  strong, weak = Ledger.of(("u", Gaussian(4.0), 10)), Ledger.of(("u", Gaussian(40.0), 10))
  both = tuning.RepeatAndSelect((weak, strong), 5.0, 1.0)
  alone = tuning.RepeatAndSelect((strong,), 5.0, 1.0)
  np.testing.assert_allclose(both.rdp(ORDERS), alone.rdp(ORDERS))
  assert both.describe().startswith("RepeatAndSelect(mean=5, geometric, parts=2; per run:")


@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0])
def test_repetitions_have_the_requested_mean(shape):
  assert math.isclose(tuning.tnb_mean(tuning.tnb_gamma(7.0, shape), shape), 7.0, rel_tol=1e-9)
  rng = np.random.default_rng(0)
  draws = np.array([tuning.sample_repetitions(rng, 7.0, shape) for _ in range(4000)])
  assert draws.min() >= 1
  assert abs(draws.mean() - 7.0) < 5 * draws.std() / math.sqrt(draws.size)
  assert tuning.sample_repetitions(rng, 1.0, shape) == 1


@pytest.mark.parametrize("grid", [
    {}, [], "clip", {"clip": []}, {"clip": 0.1}, {"clip": "0.1"}, {"stepsize": [1.0]}, [{}],
    [{"clip": [0.1]}, {"bogus": [1]}]])
def test_bad_grids_are_rejected_by_name(grid):
  with pytest.raises(ValueError, match="param_grid"):
    check_param_grid(grid, ("clip", "step_size"))


def test_grid_lists_every_candidate():
  grid = [{"clip": [0.1, 0.3], "step_size": [1.0]}, {"clip": [1.0]}]
  assert check_param_grid(grid, ("clip", "step_size")) == [
      {"clip": 0.1, "step_size": 1.0}, {"clip": 0.3, "step_size": 1.0}, {"clip": 1.0}]


def _data(n=400, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, 4))
  return X, X @ np.ones(4)  # every feature matters: one step is not enough


GRID = {"max_iter": [1, 50]}  # T = 50: the same compiled program as most estimator tests


def test_noise_free_limit_picks_the_best_classifier():
  X, t = _data()
  y = np.where(t > 0, "pos", "neg")
  model = DPGCDClassifierCV(param_grid=GRID, mean_repetitions=20, epsilon=1e4, feature_bound=4.0,
                            random_state=0).fit(X, y)
  assert model.best_params_ == {"max_iter": 50}
  assert model.score(X, y) > 0.85 and model.n_iter_ == 50
  assert 0.99e4 <= model.privacy_.epsilon <= 1e4


@pytest.mark.slow
def test_noise_free_limit_picks_the_best_regressor():
  X, y = _data()
  model = DPGCDRegressorCV(param_grid=GRID, mean_repetitions=20, epsilon=1e4, feature_bound=4.0,
                           score_clip=3.0, random_state=0).fit(X, y)
  assert model.best_params_ == {"max_iter": 50}
  assert model.score(X, y) > 0.5


def test_selection_is_accounted_in_privacy_():
  X, t = _data()
  model = DPGCDClassifierCV(param_grid={"clip": [0.1, 0.3], "max_iter": [1, 50]}, epsilon=1.0,
                            random_state=0).fit(X, t > 0)
  labels = [e.label for e in model.privacy_.entries]
  assert labels == ["feature bound", "sampler draws", "hyperparameter search"]  # the bound's 130 draws
  event = model.privacy_.entries[2].event
  assert isinstance(event, tuning.RepeatAndSelect) and event.mean == 4.0 and event.shape == 1.0
  assert len(event.parts) == 3  # T = 1, T = 50, the score
  assert 0.99 <= model.privacy_.epsilon <= 1.0
  assert model.privacy_.delta == 1.0 / 400**2
  assert model.best_params_ in [{"clip": c, "max_iter": m} for c in (0.1, 0.3) for m in (1, 50)]
  assert "only the best is released" in str(model.privacy_)


@pytest.mark.parametrize("kwargs, name", [
    (dict(param_grid={}), "param_grid"), (dict(param_grid={"clip": []}), "param_grid"),
    (dict(param_grid={"epsilon": [1.0]}), "param_grid"), (dict(param_grid={"clip": [-1.0]}), "clip"),
    (dict(param_grid={"max_iter": [0]}), "max_iter"), (dict(param_grid={"alpha": [-1.0]}), "alpha"),
    (dict(param_grid={"l1_ratio": [0.5, 2.0]}), "l1_ratio"), (dict(mean_repetitions=0.5), "mean_repetitions"),
    (dict(repetition_shape=-1.0), "repetition_shape"),
    (dict(repetition_shape=math.inf), "repetition_shape"),
    (dict(validation_fraction=0.0), "validation_fraction"),
    (dict(validation_fraction=1.0), "validation_fraction"), (dict(epsilon=0.0), "epsilon"),
])
def test_bad_search_arguments_raise_by_name(kwargs, name):
  X, t = _data(n=50)
  with pytest.raises(ValueError, match=name):
    DPGCDClassifierCV(**kwargs).fit(X, t > 0)
  with pytest.raises(ValueError, match=name):
    DPGCDRegressorCV(**kwargs).fit(X, t)


def test_bad_score_clip_raises_by_name():
  X, t = _data(n=50)
  with pytest.raises(ValueError, match="score_clip"):
    DPGCDRegressorCV(score_clip=0.0).fit(X, t)


def test_cv_estimators_clone_with_their_search_parameters():
  model = DPGCDClassifierCV(param_grid={"clip": [0.1, 0.2]}, mean_repetitions=3.0, epsilon=2.0)
  params = clone(model).get_params()
  assert params["param_grid"] == {"clip": [0.1, 0.2]} and params["mean_repetitions"] == 3.0
  assert params["epsilon"] == 2.0 and params["repetition_shape"] == 1.0
  assert clone(DPGCDRegressorCV(score_clip=2.0, loss="huber")).get_params()["score_clip"] == 2.0


def test_regression_validation_terms_count_a_nan_error_as_the_clip():
  """A NaN prediction (0 x inf) made one neighbour's validation mean NaN (review): it counts as the clip."""
  terms = DPGCDRegressorCV(score_clip=2.0)._validation_terms(  # pylint: disable=protected-access
      np.array([[np.nan], [0.5], [9.0]]), [np.zeros(3)])
  np.testing.assert_array_equal(terms, [-2.0, -0.5, -2.0])
