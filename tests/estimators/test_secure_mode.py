"""`dpgcd_jax.estimators`, `dpgcd_jax.solvers`: `secure_noise=True` means every draw: the estimators' whole ledger
(scales, bounds, target, selection, updates, curvatures, the CV search's scores) and their private scores hold only
discrete mechanisms, as does every registered solver's `fit` ledger (its feature bound included); with the default float
noise the same walk finds float events."""

import inspect
import warnings

import jax
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import mechanisms
from dpgcd_jax import solvers
from dpgcd_jax.estimators import DPGCDClassifier
from dpgcd_jax.estimators import DPGCDClassifierCV
from dpgcd_jax.estimators import DPGCDRegressor
from dpgcd_jax.estimators import DPGCDRegressorCV
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import tuning

FLOAT_EVENTS = (events.Gaussian, events.Laplace, events.BoundedRange, events.PoissonSampledGaussian)
N = 1500


def _events(entries):
  for entry in entries:
    if isinstance(entry.event, tuning.RepeatAndSelect):
      for part in entry.event.parts:
        yield from _events(part.entries)
    else:
      yield entry.label, entry.event


def _data():
  rng = np.random.default_rng(0)
  X = rng.normal(size=(N, 5))
  return X, (X[:, 0] > 0).astype(int), X[:, 0] + 0.1 * rng.normal(size=N)


# The DP-GCD classifier (scales, selection, updates, curvatures), the CV regressor (target
# bound, the search's scores) and DP-CD: every kind of release an estimator makes.
ESTIMATORS = {
    "classifier": lambda secure: DPGCDClassifier(classes=[0, 1], secure_noise=secure, random_state=0),
    "regressor": lambda secure: DPGCDRegressor(secure_noise=secure, random_state=0),
    "classifier_cv": lambda secure: DPGCDClassifierCV(classes=[0, 1], secure_noise=secure,
                                                      param_grid={"max_iter": [5, 10]}, random_state=0),
    "regressor_cv": lambda secure: DPGCDRegressorCV(secure_noise=secure, param_grid={"max_iter": [5, 10]},
                                                    random_state=0),
    "dp_cd": lambda secure: DPGCDClassifier(classes=[0, 1], secure_noise=secure, solver="dp_cd", random_state=0),
    "dp_fw": lambda secure: DPGCDClassifier(classes=[0, 1], secure_noise=secure, solver="dp_fw", random_state=0),
    "dp_iht": lambda secure: DPGCDClassifier(classes=[0, 1], secure_noise=secure, solver="dp_iht",
                                             solver_params={"sparsity": 2}, random_state=0),
    "two_stage": lambda secure: DPGCDClassifier(classes=[0, 1], secure_noise=secure, solver="two_stage",
                                                solver_params={"sparsity": 2}, random_state=0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", ESTIMATORS)
def test_secure_noise_leaves_no_float_mechanism_in_the_ledger(name):
  X, labels, target = _data()
  found = {}
  for secure in (True, False):
    model = ESTIMATORS[name](secure)
    classifier = isinstance(model, (DPGCDClassifier, DPGCDClassifierCV))
    y = labels if classifier else target
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      model.fit(X, y)
    score = model.private_score(X, y, epsilon=0.5, key=jax.random.key(1),
                                **({} if classifier else {"target_bound": 4.0}))
    entries = model.privacy_.entries + score.report.entries
    found[secure] = [(label, type(event).__name__) for label, event in _events(entries)
                     if isinstance(event, FLOAT_EVENTS)]
  assert found[True] == []
  assert found[False]  # the walk sees float events when there are some


# Each registered solver's own hyperparameters, on a tiny problem (the rest: their defaults).
SOLVER_ARGS = {"dp_sgd": {"batch_size": 50}, "dp_fw": {"radius": 2.0}, "dp_iht": {"sparsity": 2},
               "two_stage": {"sparsity": 2}}


@pytest.mark.slow
@pytest.mark.parametrize("name", solvers.REGISTRY)
def test_every_solvers_secure_fit_lists_no_float_mechanism(name):
  """Each solver of `dpgcd_jax.solvers.REGISTRY`, through its `fit` with `secure_noise=True` (two-stage,
  which takes no such flag, with the discrete names `mechanisms.secure` gives, as the estimators pass),
  on data without a declared bound (so `fit` releases one): its ledger holds no float event; the float
  mode's does."""
  solver = getattr(dg, name)
  X, _, target = _data()
  problem = dg.make_problem(X[:200, :4], target[:200], "squared")
  secure_args = {"secure_noise": True}
  if "secure_noise" not in inspect.signature(solver.fit).parameters:
    secure_args = dict(zip(("selection", "update"), mechanisms.secure("laplace", "laplace"), strict=True))
  found = {}
  for secure in (True, False):
    result = solver.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-6, passes=2,
                        **SOLVER_ARGS.get(name, {}), **(secure_args if secure else {}))
    found[secure] = [(label, type(event).__name__) for label, event in _events(result.privacy.entries)
                     if isinstance(event, FLOAT_EVENTS)]
  assert found[True] == [], name
  assert found[False], name  # the walk sees float events when there are some
