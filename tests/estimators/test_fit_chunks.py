"""`dpgcd_jax.estimators._streamed`: the estimators on data larger than memory (`fit_chunks`).

The chunked fit must be the in-memory fit: the same selections and privacy report, and the same
weights up to the updates' rounding, whatever the chunking, with the estimator's defaults (the
data-following clip included).
"""

import warnings

import jax
import numpy as np
import pytest
import scipy.sparse
from sklearn.exceptions import DataConversionWarning

import dpgcd_jax as dg
from dpgcd_jax.privacy import typical_size
from dpgcd_jax.solvers import streamed

N, P = 3000, 40


def _data(seed=0):
  rng = np.random.default_rng(seed)
  X = rng.choice([-1.0, 1.0], size=(N, P)).astype(np.float32)
  y = np.where(X[:, :4].sum(axis=1) + rng.normal(size=N) > 0, "yes", "no")
  return X, y


def _pair(make, X, y, chunks):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    return make().fit(X, y), make().fit_chunks(chunks, num_examples=X.shape[0])


def _same(a, b):
  """The same selections, privacy report and hyperparameters; the weights up to the updates' rounding
  (XLA may fuse a multiply-add into an FMA in one program and not in the other: an ulp per update)."""
  np.testing.assert_array_equal(np.flatnonzero(a.coef_), np.flatnonzero(b.coef_))
  np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(b.intercept_, a.intercept_, rtol=1e-5, atol=1e-7)
  assert (a.privacy_.epsilon, a.privacy_.delta) == (b.privacy_.epsilon, b.privacy_.delta)
  assert [(e.label, e.event, e.count) for e in a.privacy_.entries] == \
      [(e.label, e.event, e.count) for e in b.privacy_.entries]
  assert np.array_equal(getattr(a, "classes_", None), getattr(b, "classes_", None))
  assert a.n_features_in_ == b.n_features_in_
  assert (a.n_iter_, a.step_size_, a.clip_) == (b.n_iter_, b.step_size_, b.clip_)


@pytest.mark.slow
@pytest.mark.parametrize("rows", [700, 1024])
def test_chunked_fit_is_the_in_memory_fit_with_the_defaults(rows):
  """Defaults: the typical feature size is released from the chunks' counts (one more pass)."""
  X, y = _data()
  make = lambda: dg.DPGCDClassifier(classes=["no", "yes"], feature_bound=1.0, random_state=3)
  memory, chunked = _pair(make, X, y, [(X[i:i + rows], y[i:i + rows]) for i in range(0, N, rows)])
  _same(memory, chunked)
  assert any(e.label == typical_size.LABEL for e in chunked.privacy_.entries)  # the clip followed the data
  assert chunked.score(X, y) > 0.75  # majority class: about 0.5
  assert np.array_equal(chunked.predict(X), memory.predict(X))


@pytest.mark.slow
@pytest.mark.slow
def test_a_loose_bound_is_shrunk_over_chunks_as_in_memory():
  """Gaussian features under a declared bound 10: both fits release the same typical size from the
  same counts and clip the features at the same shrunk bounds (`_defaults.bound_scale`)."""
  rng = np.random.default_rng(4)
  X = rng.standard_normal((N, P)).astype(np.float32)
  y = np.where(X[:, :4].sum(axis=1) + rng.normal(size=N) > 0, "yes", "no")
  make = lambda: dg.DPGCDClassifier(classes=["no", "yes"], feature_bound=10.0, random_state=2)
  memory, chunked = _pair(make, X, y, [(X[i:i + 1000], y[i:i + 1000]) for i in range(0, N, 1000)])
  _same(memory, chunked)
  np.testing.assert_array_equal(chunked.feature_bound_, memory.feature_bound_)
  assert np.all(memory.feature_bound_ < 5.0)  # shrunk from 10 (entries about 0.8 in size)
  assert np.array_equal(chunked.predict(X), memory.predict(X))


def test_chunked_fit_reads_npy_files_and_takes_a_penalty_and_a_declared_clip(tmp_path):
  X, y = _data(1)
  labels = (y == "yes").astype(np.int64)
  np.save(tmp_path / "X.npy", X)
  np.save(tmp_path / "y.npy", labels)
  chunks = dg.row_chunks.npy_chunks(tmp_path / "X.npy", tmp_path / "y.npy", rows=1000)
  make = lambda: dg.DPGCDClassifier(classes=[0, 1], feature_bound=np.full(P, 2.0), penalty="l1", alpha=1e-3,
                                    clip=0.4, epsilon=2.0, random_state=5)
  memory, chunked = _pair(make, X, labels, chunks)
  _same(memory, chunked)
  assert not any(e.label == typical_size.LABEL for e in chunked.privacy_.entries)  # a declared clip: no release


def test_sparse_chunks_give_the_in_memory_sparse_fit():
  X, y = _data(2)
  sparse_X = scipy.sparse.csr_matrix(np.where(X > 0, X, 0.0))
  make = lambda: dg.DPGCDClassifier(classes=["no", "yes"], feature_bound=1.0, random_state=7)
  memory, chunked = _pair(make, sparse_X, y, [(sparse_X[i:i + 1000], y[i:i + 1000]) for i in range(0, N, 1000)])
  assert (memory.privacy_.epsilon, memory.privacy_.delta) == (chunked.privacy_.epsilon, chunked.privacy_.delta)
  np.testing.assert_array_equal(np.flatnonzero(memory.coef_), np.flatnonzero(chunked.coef_))
  np.testing.assert_allclose(chunked.coef_, memory.coef_, rtol=1e-5, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("kwargs", [dict(), dict(target_bound=(-3.0, 5.0), penalty="l1", alpha=0.01)],
                         ids=["defaults", "range-l1"])
def test_the_regressor_over_chunks_is_the_in_memory_regressor(kwargs):
  """A declared target bound: the targets in its units, the penalty too, the step's noise cap."""
  rng = np.random.default_rng(4)
  X = rng.normal(size=(N, P))
  y = X[:, :3] @ np.array([1.0, -2.0, 1.5]) + 1.0 + 0.3 * rng.normal(size=N)
  make = lambda: dg.DPGCDRegressor(**{**dict(feature_bound=3.0, target_bound=6.0, epsilon=2.0, random_state=1),
                                      **kwargs})
  memory, chunked = _pair(make, X, y, [(X[i:i + 800], y[i:i + 800]) for i in range(0, N, 800)])
  _same(memory, chunked)
  assert (memory.target_bound_, memory.target_centre_) == (chunked.target_bound_, chunked.target_centre_)
  assert chunked.score(X, y) > 0.5
  assert any(e.label == typical_size.TARGET_LABEL for e in chunked.privacy_.entries)  # the clip followed y


def _unread():
  raise AssertionError("the data were read")


@pytest.mark.parametrize("kwargs, name", [
    (dict(classes=None), "classes"),
    (dict(classes=["a"]), "classes"),
    (dict(feature_bound=None), "feature_bound"),
    (dict(feature_bound=(0.0, 2.0)), "feature_bound"),
    (dict(solver="dp_cd"), "solver"),
    (dict(epsilon=-1.0), "epsilon"),
])
def test_missing_declarations_are_refused_by_name_before_any_data_is_read(kwargs, name):
  model = dg.DPGCDClassifier(**{**dict(classes=["no", "yes"], feature_bound=1.0), **kwargs})
  with pytest.raises(ValueError, match=name):
    model.fit_chunks(_unread, num_examples=N)


@pytest.mark.parametrize("model, name", [
    (dg.DPGCDRegressor(feature_bound=1.0), "target_bound"),
    (dg.DPGCDRegressorCV(feature_bound=1.0, target_bound=1.0), "search"),
    (dg.DPGCDClassifierCV(classes=[0, 1], feature_bound=1.0), "search"),
], ids=["regressor", "regressor_cv", "classifier_cv"])
def test_the_regressor_and_the_searches_are_refused_by_name_before_any_data_is_read(model, name):
  with pytest.raises(ValueError, match=name):
    model.fit_chunks(_unread, num_examples=N)


def test_the_accountant_refuses_before_reading_and_is_charged_after():
  X, y = _data()
  chunks = [(X[i:i + 1000], y[i:i + 1000]) for i in range(0, N, 1000)]
  with dg.Accountant(epsilon=1.5, delta=1e-6) as acct:
    dg.DPGCDClassifier(classes=["no", "yes"], feature_bound=1.0, random_state=0).fit_chunks(chunks, num_examples=N)
    assert acct.spent.epsilon == pytest.approx(1.0, abs=1e-3)
    calls = []
    with pytest.raises(ValueError, match="remain"):
      dg.DPGCDClassifier(classes=["no", "yes"], feature_bound=1.0).fit_chunks(
          lambda: calls.append(1) or iter(chunks), num_examples=N)
    assert calls == []


def test_a_label_outside_the_declared_classes_and_a_wrong_row_count_are_named():
  X, y = _data()
  bad = y.copy()
  bad[5] = "maybe"
  model = dg.DPGCDClassifier(classes=["no", "yes"], feature_bound=1.0, clip=0.5)
  with pytest.raises(ValueError, match="declared classes"):
    model.fit_chunks([(X, bad)], num_examples=N)
  with pytest.raises(ValueError, match="num_examples"):
    model.fit_chunks([(X[:2000], y[:2000])], num_examples=N)


def test_a_verbose_fit_over_chunks_shows_its_passes_and_is_the_same_fit(capsys):
  X, y = _data()
  chunks = [(X[i:i + 1000], y[i:i + 1000]) for i in range(0, N, 1000)]
  make = lambda **kw: dg.DPGCDClassifier(classes=["no", "yes"], feature_bound=1.0, clip=0.5, max_iter=7,
                                         random_state=0, **kw).fit_chunks(chunks, num_examples=N)
  quiet = make()
  assert capsys.readouterr().err == ""
  loud = make(verbose=1)
  err = capsys.readouterr().err
  assert "DPGCDClassifier.fit_chunks (dp_gcd, 1 run)" in err and "7/7" in err, err
  np.testing.assert_array_equal(quiet.coef_, loud.coef_)


def test_a_float64_value_beyond_float32_is_clipped_as_fit_clips_it():
  """fit's layout clips a float64 1e39 to the bound; over chunks it is clipped too (make_problem alone refuses it:
  an error that would depend on one record)."""
  X, y = _data(5)
  X = X.astype(np.float64)
  X[7, 3] = 1e39
  make = lambda: dg.DPGCDClassifier(classes=["no", "yes"], feature_bound=1.0, clip=0.5, random_state=2)
  memory, chunked = _pair(make, X, y, [(X[i:i + 1000], y[i:i + 1000]) for i in range(0, N, 1000)])
  _same(memory, chunked)


LABELS = np.array(["a", "b", "c", "d"])


def _classes_data(K, seed=0, n=1500, p=12):
  """K well separated classes: class k where feature k (a random sign, times 2) plus noise is largest."""
  rng = np.random.default_rng(seed)
  X = rng.choice([-1.0, 1.0], size=(n, p)).astype(np.float32)
  y = LABELS[np.argmax(2.0 * X[:, :K] + 0.5 * rng.normal(size=(n, K)), axis=1)]
  return X, y


@pytest.mark.slow
@pytest.mark.parametrize("K, rows, kwargs", [(3, 400, dict()), (4, 700, dict(class_weight={"b": 2.0}, clip=0.4))],
                         ids=["3-classes", "4-classes-weighted"])
def test_one_vs_rest_over_chunks_is_the_in_memory_one_vs_rest_fit(K, rows, kwargs):
  """K runs over the chunks, keyed and calibrated together as fit's K runs: the same selections and ledger."""
  X, y = _classes_data(K)
  n = X.shape[0]
  make = lambda: dg.DPGCDClassifier(classes=LABELS[:K].tolist(), feature_bound=1.0, random_state=3, **kwargs)
  memory, chunked = _pair(make, X, y, [(X[i:i + rows], y[i:i + rows]) for i in range(0, n, rows)])
  _same(memory, chunked)
  assert chunked.coef_.shape == (K, X.shape[1]) and chunked.intercept_.shape == (K,)
  assert [e.count for e in chunked.privacy_.entries if e.label == "selection"] == [K * chunked.n_iter_]
  assert np.array_equal(chunked.predict(X), memory.predict(X))
  assert chunked.score(X, y) > max(np.mean(y == c) for c in LABELS[:K])  # beats the majority class


@pytest.mark.slow
@pytest.mark.parametrize("K, kwargs", [(2, dict()), (3, dict(secure_noise=True, clip=0.3))],
                         ids=["binary", "3-classes-secure"])
def test_balanced_weights_over_chunks_release_the_in_memory_fits_class_counts(K, kwargs):
  """class_weight="balanced" over chunks: the class counts' exact totals from one more pass, released
  with fit's key, noise and ledger entry, so the weights, runs and privacy report are fit's (and a
  declared step that float32 does not hold, 0.5 / 0.3, is reported as fit reports it)."""
  X, y = _classes_data(K, seed=2)
  y = np.where(np.arange(y.size) % 3 == 0, LABELS[0], y)  # unequal classes: the weights differ from 1
  n = X.shape[0]
  make = lambda: dg.DPGCDClassifier(classes=LABELS[:K].tolist(), feature_bound=1.0, random_state=5,
                                    class_weight="balanced", **kwargs)
  memory, chunked = _pair(make, X, y, [(X[i:i + 500], y[i:i + 500]) for i in range(0, n, 500)])
  _same(memory, chunked)
  np.testing.assert_array_equal(chunked.class_counts_, memory.class_counts_)
  assert not np.allclose(chunked.class_counts_, n / K, atol=n / (10 * K))  # the counts are unequal
  assert [e.label for e in chunked.privacy_.entries].count("class counts") == 1
  counted = lambda model: [note for note in model.privacy_.notes if note.startswith("class counts")]
  assert counted(chunked) == counted(memory) and len(counted(chunked)) == 1


def test_a_label_column_is_flattened_as_fit_flattens_it():
  """A (rows, 1) y in the chunks: fit's model, with scikit-learn's DataConversionWarning (review F2)."""
  X, y = _classes_data(3, n=1200)
  make = lambda: dg.DPGCDClassifier(classes=LABELS[:3].tolist(), feature_bound=1.0, random_state=0, max_iter=5)
  flat = make().fit_chunks([(X[:600], y[:600]), (X[600:], y[600:])], num_examples=1200)
  with pytest.warns(DataConversionWarning):
    column = make().fit_chunks([(X[:600], y[:600, None]), (X[600:], y[600:, None])], num_examples=1200)
  np.testing.assert_array_equal(column.coef_, flat.coef_)
  with pytest.raises(ValueError, match="1d array"):
    make().fit_chunks([(X, np.stack([y, y], axis=1))], num_examples=1200)


def test_a_label_outside_three_declared_classes_is_refused_while_reading():
  X, y = _classes_data(3)
  bad = y.copy()
  bad[1200] = "z"  # in the second chunk
  model = dg.DPGCDClassifier(classes=["a", "b", "c"], feature_bound=1.0, clip=0.5)
  with pytest.raises(ValueError, match=r"declared classes.*'z'"):
    model.fit_chunks([(X[:1000], bad[:1000]), (X[1000:], bad[1000:])], num_examples=X.shape[0])


@pytest.mark.slow
def test_the_streamed_solver_runs_k_targets_as_the_in_memory_solver_and_names_a_wrong_shape():
  """`streamed.fit(runs=K)` on (K, rows) targets per chunk: `dp_gcd.fit(targets=...)`'s K runs (keys, ledger)."""
  X, y = _classes_data(3, seed=1, n=1200)
  Y = np.stack([np.where(y == c, 1.0, -1.0) for c in LABELS[:3]]).astype(np.float32)
  key = jax.random.key(4)
  fit = dict(epsilon=1.0, delta=1e-6, passes=6, clip=0.5, curvature="released")
  memory = dg.dp_gcd.fit(dg.make_problem(X, Y[0], "logistic", feature_bound=1.0), key, targets=Y, **fit)
  chunked = streamed.fit([(X[i:i + 500], Y[:, i:i + 500]) for i in range(0, 1200, 500)], key, num_examples=1200,
                         loss="logistic", feature_bound=1.0, runs=3, **fit)
  np.testing.assert_array_equal(chunked.trace.coordinates, memory.trace.coordinates)
  np.testing.assert_allclose(chunked.w, memory.w, rtol=1e-5, atol=1e-7)
  assert [(e.label, e.event, e.count) for e in chunked.privacy.entries] == \
      [(e.label, e.event, e.count) for e in memory.privacy.entries]
  assert (chunked.privacy.epsilon, chunked.privacy.delta) == (memory.privacy.epsilon, memory.privacy.delta)
  with pytest.raises(ValueError, match="runs"):
    streamed.fit([(X, Y[:2])], key, num_examples=1200, loss="logistic", feature_bound=1.0, runs=3, **fit)
