"""`dpgcd_jax.estimators`, `dpgcd_jax.privacy.accountant`: the estimators under one budget: `accountant=` (or an active
`with accountant:`), and `private_score`."""

import jax
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax.privacy import accountant as accountant_lib


def _data(n=400, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, 5))
  y = (X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
  return X, y


def test_fits_are_charged_and_the_one_past_the_total_is_refused_before_reading_the_data():
  X, y = _data()
  acct = dg.Accountant(epsilon=2.0, delta=1e-4)
  first = dg.DPGCDClassifier(epsilon=1.0, delta=1e-5, feature_bound=3.0, random_state=0, accountant=acct).fit(X, y)
  second = dg.DPGCDClassifier(epsilon=1.0, delta=1e-5, feature_bound=3.0, random_state=1, accountant=acct).fit(X, y)
  assert acct.spent.epsilon <= first.privacy_.epsilon + second.privacy_.epsilon + 1e-12
  assert acct.spent.entries == first.privacy_.entries + second.privacy_.entries
  third = dg.DPGCDClassifier(epsilon=1.0, delta=1e-5, feature_bound=3.0, random_state=2, accountant=acct)
  with pytest.raises(accountant_lib.BudgetError, match="remain"):
    third.fit(X, y)
  assert not hasattr(third, "privacy_") and len(acct.reports) == 2


def test_the_active_accountant_is_used_and_private_score_is_charged():
  X, y = _data()
  acct = dg.Accountant(epsilon=3.0, delta=1e-4)
  with acct:
    model = dg.DPGCDClassifier(epsilon=1.0, delta=1e-5, feature_bound=3.0, random_state=0).fit(X[:300], y[:300])
    score = model.private_score(X[300:], y[300:], epsilon=0.5, key=jax.random.key(0))
  assert len(acct.reports) == 2 and acct.reports[1] == score.report
  assert abs(score.value - model.score(X[300:], y[300:])) < 10 * score.noise_scale + 1e-9


def test_regressor_private_score_needs_a_public_target_bound():
  X, y = _data()
  t = X[:, 0] + 0.1 * X[:, 1]
  model = dg.DPGCDRegressor(epsilon=2.0, feature_bound=3.0, random_state=0).fit(X, t)
  with pytest.raises(ValueError, match="target_bound"):
    model.private_score(X, t, epsilon=1.0, key=jax.random.key(0))
  r2 = model.private_score(X, t, epsilon=1.0, key=jax.random.key(0), target_bound=4.0)
  assert np.isfinite(r2.value)


@pytest.mark.parametrize("kwargs, name", [(dict(epsilon="1"), "epsilon"), (dict(accountant=1.0), "accountant"),
                                          (dict(delta="0.1"), "delta")])
def test_bad_budget_arguments_raise_by_name(kwargs, name):
  X, y = _data(50)
  with pytest.raises((TypeError, ValueError), match=name):
    dg.DPGCDClassifier(**kwargs).fit(X, y)
