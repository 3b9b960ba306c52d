"""`dpgcd_jax.estimators`, `dpgcd_jax.seeding`: releases around the mechanisms that used to escape the ledger.

Each test is built on a neighbouring pair (replace one record) chosen to trigger a
data-dependent branch; on 37bd750 each of them failed:

1. the label set (``classes_`` read from ``y``): a relabelled record changed ``coef_.shape``;
2. a data-dependent exception on the default path (``make_problem`` raised "all-zero
   columns" when one record held a column's only non-zero value);
3. seeding (``random_state=None`` drew 31 bits from NumPy's global state);
4. the optax one-init guard (silently bypassed under ``jax.jit``).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import seeding
from dpgcd_jax.estimators import DPGCDClassifier
from dpgcd_jax.estimators import DPGCDClassifierCV
from dpgcd_jax.estimators import DPGCDRegressor
from dpgcd_jax.estimators import DPGCDRegressorCV
from dpgcd_jax.estimators._inputs import key_from


def _neighbours_lone_nonzero(value):
  """D: column 1 is zero except one record (``value``); D': that record's entry is 0."""
  rng = np.random.default_rng(0)
  X = rng.normal(size=(60, 3))
  X[:, 1] = 0.0
  X_prime = X.copy()
  X[0, 1] = value
  y = np.sign(X[:, 0] + 0.1)
  return (X, y), (X_prime, y)


def _outcome(call):
  """(exception type or None, the sorted warning categories and messages, output shapes)."""
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
      out = call()
      error = None
    except Exception as exc:  # pylint: disable=broad-except
      out, error = None, type(exc)
  shapes = jax.tree.map(np.shape, out) if out is not None else None
  return error, sorted((w.category.__name__, str(w.message)) for w in caught), shapes


def _functional_entry_points():
  key = jax.random.key(0)
  common = dict(epsilon=1.0, delta=1e-5, passes=3)
  return {
      "dp_gcd.fit": lambda X, y: dg.dp_gcd.fit(dg.make_problem(X, y, "squared"), key, **common).w,
      "dp_cd.fit": lambda X, y: dg.dp_cd.fit(dg.make_problem(X, y, "squared"), key, **common).w,
      "dp_sgd.fit": lambda X, y: dg.dp_sgd.fit(dg.make_problem(X, y, "squared"), key, **common).w,
      "dp_gcd.fit logistic": lambda X, y: dg.dp_gcd.fit(
          dg.make_problem(X, y, "logistic"), key, **common).w,
  }


def _estimator_entry_points():
  fitted = lambda est: (lambda X, y: (est.fit(X, y).coef_, est.n_iter_))
  common = dict(epsilon=1.0, random_state=0)
  return {
      "DPGCDClassifier": fitted(DPGCDClassifier(classes=[-1.0, 1.0], **common)),
      "DPGCDRegressor": fitted(DPGCDRegressor(**common)),
      "DPGCDClassifierCV": fitted(DPGCDClassifierCV(classes=[-1.0, 1.0], **common)),
      "DPGCDRegressorCV": fitted(DPGCDRegressorCV(**common)),
  }


@pytest.mark.slow
@pytest.mark.parametrize("value", [0.7, 1e-23])
@pytest.mark.parametrize("name", sorted(_functional_entry_points()) + sorted(_estimator_entry_points()))
def test_no_exception_warning_or_shape_depends_on_a_lone_nonzero_entry(name, value):
  entry = {**_functional_entry_points(), **_estimator_entry_points()}[name]
  (X, y), (X_prime, y_prime) = _neighbours_lone_nonzero(value)
  first, second = _outcome(lambda: entry(X, y)), _outcome(lambda: entry(X_prime, y_prime))
  assert first[0] is None and second[0] is None, (first[0], second[0])
  assert first == second


def test_make_problem_on_the_default_path_does_not_check_data_derived_smoothness():
  (X, y), _ = _neighbours_lone_nonzero(0.0)  # column 1 all zero
  problem = dg.make_problem(X, y, "squared")  # no exception: M is never public here
  with pytest.raises(ValueError, match="all-zero columns"):
    dg.reference.solve(problem)  # a non-private consumer of the data-derived M checks it
  with pytest.raises(ValueError, match="all-zero columns"):
    dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(), passes=1)  # so does run


@pytest.mark.slow
@pytest.mark.parametrize("estimator", [DPGCDClassifier, DPGCDClassifierCV])
def test_declared_classes_make_the_label_set_public(estimator):
  rng = np.random.default_rng(1)
  X = rng.normal(size=(80, 4))
  y = np.where(X[:, 0] > 0, 1, 0)
  y_prime = y.copy()
  y_prime[0] = 7  # the only member of class 7
  classes = [0, 1, 7]
  outcomes = []
  for labels in (y, y_prime):
    with warnings.catch_warnings():
      warnings.simplefilter("error", dg.PrivacyLeakWarning)
      model = estimator(classes=classes, epsilon=1.0, random_state=0).fit(X, labels)
    outcomes.append((model.classes_.tolist(), model.coef_.shape, model.n_iter_,
                     model.privacy_.end_to_end))
  assert outcomes[0] == outcomes[1]
  assert outcomes[0][:2] == ([0, 1, 7], (3, 4)) and outcomes[0][3]
  # Removing a class's only member is not an error either.
  model = estimator(classes=[0, 1], epsilon=1.0, random_state=0).fit(X, np.zeros(80, int))
  assert model.coef_.shape == (1, 4)


def test_undeclared_classes_warn_and_are_recorded_as_not_private():
  X = np.random.default_rng(2).normal(size=(50, 3))
  y = np.where(X[:, 0] > 0, "yes", "no")
  with pytest.warns(dg.PrivacyLeakWarning, match="classes"):
    model = DPGCDClassifier(epsilon=1.0, random_state=0).fit(X, y)
  assert not model.privacy_.end_to_end
  assert any("label set" in s for s in model.privacy_.not_private)
  assert "NOT PRIVATE: label set" in str(model.privacy_)


def test_a_label_outside_the_declared_classes_is_a_value_error_naming_y():
  X = np.ones((10, 2))
  y = np.array([0, 1] * 4 + [2, 3])
  with pytest.raises(ValueError, match=r"y containing \[2, 3\]"):
    DPGCDClassifier(classes=[0, 1]).fit(X, y)


@pytest.mark.parametrize("classes", [[1], [[0, 1]], [0, 0, 1], "ab"])
def test_bad_classes_raise_before_any_work(classes):
  with pytest.raises(ValueError, match="classes"):
    DPGCDClassifier(classes=classes).fit(np.ones((4, 2)), np.array([0, 1, 0, 1]))


@pytest.mark.slow
def test_random_state_none_draws_from_the_os_not_numpys_global_state():
  keys = []
  for _ in range(2):
    np.random.seed(2024)
    keys.append(np.asarray(jax.random.key_data(key_from(None))))
  assert not np.array_equal(keys[0], keys[1])
  # Two fits with random_state=None after the same global seed differ (fresh noise).
  X = np.random.default_rng(3).normal(size=(100, 3))
  y = np.sign(X[:, 0])
  coefs = []
  for _ in range(2):
    np.random.seed(2024)
    coefs.append(DPGCDClassifier(classes=[-1.0, 1.0], epsilon=1.0).fit(X, y).coef_)
  assert not np.array_equal(coefs[0], coefs[1])


def test_fresh_keys_use_the_whole_key_state():
  words = np.stack([np.asarray(jax.random.key_data(seeding.fresh_key())) for _ in range(64)])
  # 64 keys: both 32-bit words vary, and the high bits are used (a 31-bit seed left word 0 at 0).
  assert len({tuple(w) for w in words.tolist()}) == 64
  assert np.any(words[:, 0] > 2**31) and np.any(words[:, 1] > 2**31)


@pytest.mark.parametrize("random_state", [0, 2**40 + 3, np.random.RandomState(0),
                                          np.random.default_rng(0)])
def test_explicit_random_states_are_reproducible(random_state):
  import copy  # pylint: disable=import-outside-toplevel
  a = key_from(copy.deepcopy(random_state))
  b = key_from(copy.deepcopy(random_state))
  assert np.array_equal(jax.random.key_data(a), jax.random.key_data(b))


@pytest.mark.parametrize("random_state", [-1, 2**64, 1.5, "seed", True])
def test_bad_random_state_is_a_value_error(random_state):
  with pytest.raises(ValueError, match="random_state"):
    DPGCDRegressor(random_state=random_state).fit(np.ones((4, 2)), np.ones(4))


@pytest.mark.slow
def test_the_optax_transformation_has_no_false_guard_and_documents_the_key():
  """The docstring's claim: the state is a function of the key only, under jit or not."""
  tx = dg.dp_greedy_coordinate(jnp.ones(3), key=jax.random.key(0), clip=1.0,
                               selection_noise=1.0, update_noise=1.0)
  w = jnp.zeros(3)
  eager = [tx.init(w), tx.init(w)]
  jitted = [jax.jit(tx.init)(w), jax.jit(tx.init)(w)]
  for state in eager[1:] + jitted:
    assert np.array_equal(jax.random.key_data(state.key), jax.random.key_data(eager[0].key))
  doc = dg.transforms.__doc__
  assert "fresh_key" in doc and "replays the same noise" in doc
  # Fresh keys give independent noise on the same gradients.
  grads = jnp.ones((5, 3))
  draws = set()
  for _ in range(4):
    fresh = dg.dp_greedy_coordinate(jnp.ones(3), key=seeding.fresh_key(), clip=1.0,
                                    selection_noise=1.0, update_noise=1.0)
    draws.add(float(jnp.sum(fresh.update(grads, fresh.init(w), w)[0])))
  assert len(draws) == 4
