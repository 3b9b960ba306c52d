"""`dpgcd_jax.estimators._categorical` (`categories=`): publicly declared categorical columns, one-hot inside the
estimators."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
from sklearn.base import clone
from sklearn.preprocessing import OneHotEncoder

from dpgcd_jax.estimators import DPGCDClassifier
from dpgcd_jax.estimators import DPGCDClassifierCV
from dpgcd_jax.estimators import DPGCDRegressor
from dpgcd_jax.estimators import _categorical

COLORS = ["red", "green", "blue"]


def _frame(n=4000, seed=0):
  rng = np.random.default_rng(seed)
  color = rng.choice(COLORS, size=n)
  age = rng.uniform(0.0, 1.0, n)
  logit = np.select([color == "red", color == "green"], [2.0, -2.0], 0.0) + (age - 0.5)
  y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
  return pd.DataFrame({"age": age, "color": color}), y


@pytest.mark.parametrize("feature_bound", [1.0, None])
def test_a_declared_categorical_column_is_learned(feature_bound):
  frame, y = _frame()
  clf = DPGCDClassifier(classes=[0, 1], categories={"color": COLORS}, feature_bound=feature_bound,
                        random_state=0).fit(frame, y)
  majority = max(y.mean(), 1.0 - y.mean())
  assert clf.score(frame, y) > majority + 0.15  # the colour carries the label (non-private L2-logistic: 0.78)
  assert clf.get_feature_names_out().tolist() == ["age", "color_red", "color_green", "color_blue"]
  assert clf.coef_.shape == (1, 4) and clf.n_features_in_ == 2
  assert clf.feature_names_in_.tolist() == ["age", "color"]
  assert clf.coef_[0, 1] > 0 > clf.coef_[0, 2]  # red raises the odds, green lowers them
  if feature_bound is not None:  # one-hot columns bounded by 1, public: no budget on them
    np.testing.assert_array_equal(clf.feature_bound_, [1.0, 1.0, 1.0, 1.0])
    assert "feature bounds" not in [entry.label for entry in clf.privacy_.ledger.entries]


def test_the_encoding_is_scikit_learns_one_hot_with_unknown_categories_ignored():
  rng = np.random.default_rng(1)
  values = rng.choice(["a", "b", "c", "zz", None], size=200).astype(object)  # zz, None: not declared
  numeric = rng.normal(size=200)
  frame = pd.DataFrame({"v": values, "z": numeric})
  encoding = _categorical.declared({"v": ["c", "a", "b"]}, frame)
  reference = OneHotEncoder(categories=[["c", "a", "b"]], handle_unknown="ignore").fit_transform(
      values[:, None]).toarray()
  np.testing.assert_array_equal(encoding.encode(frame), np.c_[reference, numeric])
  assert encoding.names_out().tolist() == ["v_c", "v_a", "v_b", "z"]


def test_values_compare_as_in_scikit_learn_true_is_one():
  """Python's `==`, as `OneHotEncoder`: `True` and `1.0` are the category `1`, `"1"` is not."""
  values = np.array([True, 1, 1.0, "1", 2, False, None, np.nan], dtype=object)
  frame = pd.DataFrame({"v": values})
  encoding = _categorical.declared({"v": [1, 2]}, frame)
  reference = OneHotEncoder(categories=[[1, 2]], handle_unknown="ignore").fit_transform(values[:, None]).toarray()
  np.testing.assert_array_equal(encoding.encode(frame), reference)
  np.testing.assert_array_equal(reference[:, 0], [1, 1, 1, 0, 0, 0, 0, 0])
  with pytest.raises(ValueError, match="distinct"):  # True == 1: one category declared twice
    _categorical.check({"v": [True, 1]})


def test_positions_on_an_array_and_a_regressor():
  rng = np.random.default_rng(2)
  n = 3000
  group = rng.integers(0, 3, n)
  x = rng.uniform(-1.0, 1.0, n)
  y = np.array([1.5, -1.5, 0.0])[group] + 0.5 * x + 0.1 * rng.normal(size=n)
  X = np.c_[x, group].astype(object)
  reg = DPGCDRegressor(categories={1: [0, 1, 2]}, feature_bound=1.0, target_bound=3.0, epsilon=2.0,
                       random_state=0).fit(X, y)
  assert reg.score(X, y) > 0.5
  assert reg.get_feature_names_out().tolist() == ["x0", "x1_0", "x1_1", "x1_2"]
  assert not hasattr(reg, "feature_names_in_")  # an array has no names


@pytest.mark.parametrize(("categories", "match"), [
    ({"colour": COLORS}, "columns of categories"),
    ({"color": []}, "non-empty list of distinct"),
    ({"color": ["red", "red"]}, "non-empty list of distinct"),
    ({"color": "red"}, "list of categories"),
    ({5: COLORS}, "column position"),
    ({"color": COLORS, 1: COLORS}, "each column once"),
    (["color"], "non-empty dict"),
])
def test_bad_declarations_are_refused_by_name(categories, match):
  frame, y = _frame(100)
  with pytest.raises(ValueError, match=match):
    DPGCDClassifier(classes=[0, 1], categories=categories, feature_bound=1.0).fit(frame, y)


def test_sparse_input_and_other_columns_at_predict_are_refused():
  frame, y = _frame(200)
  with pytest.raises(ValueError, match="dense X"):
    DPGCDClassifier(classes=[0, 1], categories={0: [0.0, 1.0]}, feature_bound=1.0).fit(
        scipy.sparse.csr_matrix(np.ones((200, 2))), y)
  clf = DPGCDClassifier(classes=[0, 1], categories={"color": COLORS}, feature_bound=1.0, random_state=0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    clf.fit(frame, y)
  with pytest.raises(ValueError, match="columns of fit"):
    clf.predict(frame.rename(columns={"age": "years"}))
  with pytest.raises(ValueError, match="2 columns"):
    clf.predict(frame.to_numpy()[:, :1])
  unseen = frame.assign(color="purple")  # a category not declared: encoded as all zeros
  np.testing.assert_allclose(clf.decision_function(unseen), frame["age"].to_numpy() * clf.coef_[0, 0]
                             + clf.intercept_[0])


def test_the_search_estimators_take_categories():
  frame, y = _frame(600)
  model = clone(DPGCDClassifierCV(classes=[0, 1], categories={"color": COLORS}, feature_bound=1.0, random_state=0))
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the search falls back at this n epsilon, and says so
    model.fit(frame, y)
  assert model.coef_.shape == (1, 4)
  assert model.get_feature_names_out().tolist() == ["age", "color_red", "color_green", "color_blue"]


def test_tuple_categories_and_integer_column_names():
  """A tuple category matches whole values (no broadcast at n = len(tuple)); an integer key
  names a DataFrame's integer column before it is read as a position (review findings)."""
  values = np.empty(2, dtype=object)
  values[0], values[1] = (1, 2), (3, 4)
  frame = pd.DataFrame({0: [5.0, 6.0], 1: values})
  encoding = _categorical.declared({1: [(1, 2), (3, 4)]}, frame)
  np.testing.assert_array_equal(encoding.encode(frame), [[5.0, 1.0, 0.0], [6.0, 0.0, 1.0]])
  swapped = pd.DataFrame({1: values, 0: [5.0, 6.0]})  # column named 1 at position 0
  assert _categorical.declared({1: [(1, 2), (3, 4)]}, swapped).categories[0] is not None
