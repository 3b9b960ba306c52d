"""`dpgcd_jax.estimators._inputs`: the estimators in a practitioner's workflow: delta against 1/n, scikit-learn's
non-private model selection (warned once per call, naming the private alternative), DataFrame names."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import GridSearchCV
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from dpgcd_jax import PrivacyLeakWarning
from dpgcd_jax.estimators import DPGCDClassifier
from dpgcd_jax.estimators import DPGCDRegressor

N = 300


def _data(seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(N, 4))
  return X, (X[:, 0] + 0.3 * rng.normal(size=N) > 0).astype(int)


def _caught(call):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    call()
  return [w for w in caught]


def _messages(caught, category, text):
  return [str(w.message) for w in caught if issubclass(w.category, category) and text in str(w.message)]


@pytest.mark.parametrize("delta, warned", [(1.0 / N, True), (0.5, True), (0.99 / N, False), (None, False)])
def test_delta_at_or_above_one_over_n_warns_naming_the_usual_choice(delta, warned):
  X, y = _data()
  caught = _caught(lambda: DPGCDClassifier(classes=[0, 1], feature_bound=3.0, delta=delta, random_state=0).fit(X, y))
  found = _messages(caught, UserWarning, ">= 1/n")
  assert len(found) == int(warned)
  if warned:
    assert "delta=None (1/n^2" in found[0] and f"n = {N} rows" in found[0]


def test_grid_search_warns_once_per_search_naming_the_private_alternative():
  X, y = _data()
  search = GridSearchCV(DPGCDClassifier(classes=[0, 1], feature_bound=3.0), {"epsilon": [1.0, 2.0]}, cv=3)
  first = _messages(_caught(lambda: search.fit(X, y)), PrivacyLeakWarning, "scikit-learn's GridSearchCV")
  assert len(first) == 1  # 7 fits (3 folds x 2 candidates, and the refit), one warning
  assert "DPGCDClassifierCV" in first[0] and "private_score" in first[0]
  other = GridSearchCV(make_pipeline(FunctionTransformer(), DPGCDRegressor(feature_bound=3.0, target_bound=1.0)),
                       {"dpgcdregressor__epsilon": [1.0]}, cv=2)
  found = _messages(_caught(lambda: other.fit(X, y.astype(float))), PrivacyLeakWarning, "GridSearchCV")
  assert len(found) == 1 and "DPGCDRegressorCV" in found[0]  # inside a Pipeline too


def test_cross_val_score_warns_once_and_a_plain_fit_does_not():
  X, y = _data()
  model = DPGCDClassifier(classes=[0, 1], feature_bound=3.0)
  found = _messages(_caught(lambda: cross_val_score(model, X, y, cv=3)), PrivacyLeakWarning, "scikit-learn's")
  assert len(found) == 1 and "cross_val_score" in found[0]
  assert not _messages(_caught(lambda: model.fit(X, y)), PrivacyLeakWarning, "scikit-learn's")


def test_feature_names_follow_a_dataframe():
  X, y = _data()
  frame = pd.DataFrame(X, columns=["age", "income", "visits", "score"])
  model = DPGCDClassifier(classes=[0, 1], feature_bound=3.0, random_state=0).fit(frame, y)
  assert model.feature_names_in_.tolist() == ["age", "income", "visits", "score"]
  assert model.get_feature_names_out().tolist() == ["age", "income", "visits", "score"]
  assert model.coef_.shape == (1, 4)
  plain = DPGCDClassifier(classes=[0, 1], feature_bound=3.0, random_state=0).fit(X, y)
  assert plain.get_feature_names_out().tolist() == ["x0", "x1", "x2", "x3"]
  with pytest.raises(ValueError, match="input_features"):
    model.get_feature_names_out(["a", "b", "c", "d"])
