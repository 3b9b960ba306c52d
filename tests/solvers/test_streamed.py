"""`dpgcd_jax.solvers.streamed`: DP-GCD over row chunks, against the in-memory fit.

Bit for bit whatever the chunking and the chunk order (exact integer totals), from lists or
from `.npy` files read chunk by chunk. Against the in-memory `dp_gcd.fit` (chunks of uneven
sizes, float32 and float64, every loss, clipping mode, penalty and mechanism pair the streamed
fit takes): the same selected coordinates and privacy report, and `w` equal up to the rounding
of the updates (XLA may fuse a multiply-add into an FMA in one compiled program and not in
another: a few ulps at most). Also a prior ledger, and bad input, rejected by name.
"""

import warnings

import jax
import numpy as np
import pytest
from scipy import sparse as scipy_sparse

import dpgcd_jax as dg
from dpgcd_jax import row_chunks
from dpgcd_jax.solvers import streamed

N, P = 1100, 30
FIT = dict(epsilon=1.0, delta=1e-5, passes=12)


def _data(loss, dtype, seed=0):
  rng = np.random.default_rng(seed)
  X = (rng.normal(size=(N, P)) * rng.uniform(0.3, 2.0, size=P)).astype(dtype)
  margin = X[:, :4] @ np.array([1.0, -1.0, 0.5, 2.0])
  if loss == "logistic":
    return X, np.where(margin + 0.3 * rng.normal(size=N) > 0, 1.0, -1.0).astype(dtype)
  return X, (margin + 0.2 * rng.normal(size=N)).astype(dtype)


def _chunks(X, y, rows):
  return [(X[i:i + rows], y[i:i + rows]) for i in range(0, X.shape[0], rows)]


def _assert_same(streamed_result, result, exact=True):
  """The same coordinates and report; `w` bit for bit (`exact`), else up to the updates' rounding."""
  np.testing.assert_array_equal(np.asarray(streamed_result.trace.coordinates), np.asarray(result.trace.coordinates))
  if exact:
    np.testing.assert_array_equal(np.asarray(streamed_result.w), np.asarray(result.w))
  else:
    w = np.asarray(result.w)
    ulp = np.finfo(w.dtype).eps
    np.testing.assert_allclose(np.asarray(streamed_result.w), w, rtol=64 * ulp, atol=64 * ulp * np.abs(w).max())
  assert streamed_result.privacy.entries == result.privacy.entries
  assert streamed_result.privacy.epsilon == result.privacy.epsilon
  assert streamed_result.privacy.delta == result.privacy.delta


CASES = [
    ("squared", {}, None),
    ("logistic", {}, 0.02),
    ("logistic", dict(clipping_mode="derivative", clip=0.3), None),
    ("huber", dict(update="gaussian", selection="gumbel"), 0.01),
    ("squared", dict(secure_noise=True, step_size=0.5), 0.05),
    ("logistic", dict(rule="gs-r", selection_share=0.3), 0.02),
    ("logistic", dict(curvature="released"), None),
    ("squared", dict(curvature="released", secure_noise=True, step_size=0.5), 0.05),
]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.float64)])
@pytest.mark.parametrize("loss, options, l1", CASES)
def test_streamed_fit_matches_in_memory_fit(loss, options, l1, dtype):
  X, y = _data(loss, dtype)
  penalty = None if l1 is None else dg.penalties.L1(l1)
  key = jax.random.key(7)
  result = dg.dp_gcd.fit(dg.make_problem(X, y, loss, feature_bound=2.5, penalty=penalty), key, **FIT, **options)
  assert result.w.dtype == dtype
  chunked = streamed.fit(_chunks(X, y, 400), key, num_examples=N, loss=loss, feature_bound=2.5, penalty=penalty,
                         **FIT, **options)
  _assert_same(chunked, result, exact=False)
  assert np.count_nonzero(np.asarray(result.w)) > 0  # a run that moved: the equality is not of zeros


def test_any_chunking_and_order_gives_the_same_model():
  """Exact integer totals: the chunks' sizes and their order change nothing (a shuffled pass
  order is still the same records)."""
  X, y = _data("logistic", np.float32, seed=1)
  key = jax.random.key(2)
  kwargs = dict(num_examples=N, loss="logistic", feature_bound=2.5, **FIT)
  one = streamed.fit([(X, y)], key, **kwargs)
  for rows in (97, 550):
    chunks = _chunks(X, y, rows)
    _assert_same(streamed.fit(chunks, key, **kwargs), one)
    _assert_same(streamed.fit(chunks[::-1], key, **kwargs), one)


def test_npy_chunks_read_the_files_chunk_by_chunk(tmp_path):
  X, y = _data("squared", np.float32, seed=2)
  np.save(tmp_path / "X.npy", X)
  np.save(tmp_path / "y.npy", y)
  chunks = row_chunks.npy_chunks(tmp_path / "X.npy", tmp_path / "y.npy", rows=300)
  sizes = [x.shape[0] for x, _ in chunks()]
  assert sizes == [300, 300, 300, 200]
  assert [x.shape[0] for x, _ in chunks()] == sizes  # every call is a new pass
  key = jax.random.key(5)
  kwargs = dict(num_examples=N, loss="squared", feature_bound=3.0, **FIT)
  _assert_same(streamed.fit(chunks, key, **kwargs), streamed.fit(_chunks(X, y, 128), key, **kwargs))


def test_prior_is_composed_in_the_one_ledger():
  X, y = _data("squared", np.float32, seed=3)
  prior = dg.privacy.Ledger().add("feature scales", dg.mechanisms.update("gaussian").event(8.0), 1)
  key = jax.random.key(4)
  result = dg.dp_gcd.fit(dg.make_problem(X, y, "squared", feature_bound=3.0), key, prior=prior, **FIT)
  chunked = streamed.fit(_chunks(X, y, 500), key, num_examples=N, loss="squared", feature_bound=3.0, prior=prior,
                         **FIT)
  _assert_same(chunked, result, exact=False)
  assert chunked.privacy.entries[0][0] == "feature scales"
  assert chunked.privacy.epsilon <= FIT["epsilon"]


def test_bad_input_is_rejected_by_name():
  X, y = _data("squared", np.float32)
  key = jax.random.key(0)
  kwargs = dict(loss="squared", feature_bound=3.0, **FIT)
  with pytest.raises(ValueError, match="num_examples=1000"):
    streamed.fit(_chunks(X, y, 400), key, num_examples=1000, **kwargs)
  with pytest.raises(ValueError, match="num_examples"):
    streamed.fit(_chunks(X, y, 400), key, num_examples=0, **kwargs)
  with pytest.raises(ValueError, match="chunks"):
    streamed.fit(X, key, num_examples=N, **kwargs)
  with pytest.raises(ValueError, match="chunks"):
    streamed.fit(lambda: iter(()), key, num_examples=N, **kwargs)
  with pytest.raises(ValueError, match="loss"):
    streamed.fit(_chunks(X, y, 400), key, num_examples=N,
                 **dict(kwargs, loss=dg.custom_loss(lambda w, x, y: 0.5 * (x @ w - y) ** 2)))
  with pytest.raises(ValueError, match="rows"):
    row_chunks.npy_chunks("X.npy", "y.npy", rows=0)
  chunks = _chunks(X, y, 400)
  with pytest.raises(ValueError, match="chunks"):  # an empty chunk (a host with no rows)
    streamed.fit(chunks + [(X[:0], y[:0])], key, num_examples=N, **kwargs)
  with pytest.raises(ValueError, match="chunks"):  # a chunk with another number of features
    streamed.fit(chunks + [(X[:5, :-1], y[:5])], key, num_examples=N + 5, **kwargs)
  with pytest.raises(ValueError, match="chunks"):  # a BCOO (JAX sparse) chunk: scipy.sparse or dense only
    from jax.experimental import sparse as jax_sparse
    streamed.fit([(jax_sparse.BCOO.fromdense(X[:5]), y[:5])], key, num_examples=5, **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("loss, l1, options", [("logistic", 0.02, {}), ("squared", None, {}),
                                               ("logistic", None, dict(curvature="released"))])
def test_sparse_chunks_match_the_in_memory_sparse_fit(loss, l1, options):
  """scipy.sparse chunks: exact totals over the stored entries on the grid of all `n` records,
  so the selected coordinates and the report are the in-memory sparse fit's, and `w` up to the
  updates' rounding (as for dense chunks)."""
  X, y = _data(loss, np.float32)
  X = np.where(np.random.default_rng(3).uniform(size=X.shape) < 0.2, X, 0.0).astype(np.float32)  # 80% zeros
  penalty = None if l1 is None else dg.penalties.L1(l1)
  key = jax.random.key(5)
  whole = scipy_sparse.csr_matrix(X)
  result = dg.dp_gcd.fit(dg.make_problem(whole, y, loss, feature_bound=2.5, penalty=penalty), key, **FIT, **options)
  chunks = [(whole[i:i + 300], y[i:i + 300]) for i in range(0, N, 300)]
  chunked = streamed.fit(chunks, key, num_examples=N, loss=loss, feature_bound=2.5, penalty=penalty, **FIT,
                         **options)
  _assert_same(chunked, result, exact=False)
  assert np.count_nonzero(np.asarray(result.w)) > 0


def test_a_parquet_dataset_streams_the_same_model(tmp_path):
  """A directory of Parquet files read batch by batch gives the model of the same rows in memory
  chunks, bit for bit (exact totals: the batches' order and sizes do not matter)."""
  import pyarrow as pa
  import pyarrow.parquet as pq

  X, y = _data("logistic", np.float32)
  names = [f"f{j}" for j in range(P)]
  for part, start in enumerate(range(0, N, 400)):
    table = pa.table({**{c: X[start:start + 400, j] for j, c in enumerate(names)}, "label": y[start:start + 400]})
    pq.write_table(table, tmp_path / f"part-{part}.parquet", row_group_size=150)
  key, kwargs = jax.random.key(2), dict(num_examples=N, loss="logistic", feature_bound=2.5, **FIT)
  from_disk = streamed.fit(row_chunks.parquet_chunks(tmp_path, features=names, target="label", rows=128), key, **kwargs)
  in_memory = streamed.fit(_chunks(X, y, 500), key, **kwargs)
  _assert_same(from_disk, in_memory)
  with pytest.raises(ValueError, match="columns"):
    row_chunks.parquet_chunks(tmp_path, features=names, target="y")
  with pytest.raises(ValueError, match="features"):
    row_chunks.parquet_chunks(tmp_path, features="f0", target="label")
  odd = tmp_path / "odd"
  odd.mkdir()
  pq.write_table(pa.table({"f0": ["alice", "1.5"], "f1": [1.0, None], "label": [1.0, -1.0]}), odd / "a.parquet")
  with pytest.raises(ValueError, match="f0: string") as error:  # the schema, before any value is read
    row_chunks.parquet_chunks(odd, features=["f0", "f1"], target="label")
  assert "alice" not in str(error.value)
  with pytest.raises(ValueError, match=r"missing values .*'f1'"):
    streamed.fit(row_chunks.parquet_chunks(odd, features=["f1"], target="label"), key, **dict(kwargs, num_examples=2))


def test_a_parquet_value_beyond_the_dtype_raises_no_warning_and_an_error_without_it(tmp_path):
  """Review (helper-17, F4): a float64 value above float32's maximum made the reader's cast warn
  (a warning that depends on one record); the fit refuses it as make_problem refuses an overflow."""
  pa = pytest.importorskip("pyarrow")
  import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
  pq.write_table(pa.table({"f0": [1.0, 1e39, -1.0], "label": [1.0, -1.0, 1.0]}), tmp_path / "a.parquet")
  with warnings.catch_warnings():
    warnings.simplefilter("error")  # any warning fails the test
    chunks = list(row_chunks.parquet_chunks(tmp_path, features=["f0"], target="label")())
  assert np.isinf(chunks[0][0][1, 0])
  with pytest.raises(ValueError, match="infinite"):
    streamed.fit(chunks, jax.random.key(0), num_examples=3, loss="logistic", feature_bound=1.0, **FIT)


def test_a_declared_sparse_capacity_exceeded_is_refused_naming_the_bound_not_the_count():
  """Review (helper-17, F1): the error printed nnz, a private count; it names the bound only."""
  X = scipy_sparse.csr_matrix(np.eye(6, 4, dtype=np.float32))
  with pytest.raises(ValueError, match=r"capacity=3 stored entries in X \(declared\), got more\.$"):
    dg.make_problem(X, np.ones(6), "logistic", feature_bound=1.0, sparse_capacity=(3, 6))
  with pytest.raises(ValueError, match=r"window=1 stored entries in every column of X \(declared\), got a column with "
                                       r"more\.$"):
    dg.make_problem(scipy_sparse.csr_matrix(np.ones((6, 4), np.float32)), np.ones(6), "logistic", feature_bound=1.0,
                    sparse_capacity=(24, 1))


def test_a_declared_sparse_capacity_makes_every_chunk_one_shape():
  """Sparse chunks with `sparse_capacity` declared: one compiled totals program whatever a
  chunk's nnz (review: without it, the shapes follow each chunk's own counts)."""
  X, y = _data("logistic", np.float32)
  X = np.where(np.random.default_rng(4).uniform(size=X.shape) < 0.2, X, 0.0).astype(np.float32)
  X[:100] = np.where(X[:100] == 0.0, 0.5, X[:100])  # a dense first chunk: its nnz far above the others'
  whole = scipy_sparse.csr_matrix(X)
  chunks = [(whole[i:i + 100], y[i:i + 100]) for i in range(0, N, 100)]
  kwargs = dict(num_examples=N, loss="logistic", feature_bound=2.5, **FIT)
  streamed._chunk_total.clear_cache()
  declared = streamed.fit(chunks, jax.random.key(1), sparse_capacity=(100 * P, 100), **kwargs)
  assert streamed._chunk_total._cache_size() == 1
  streamed._chunk_total.clear_cache()
  bucketed = streamed.fit(chunks, jax.random.key(1), **kwargs)
  assert streamed._chunk_total._cache_size() > 1
  _assert_same(declared, bucketed, exact=False)


@pytest.mark.float64  # float64 chunks stay float64
def test_a_chunk_in_another_dtype_is_rejected_by_name():
  X, y = _data("squared", np.float32)
  with pytest.raises(ValueError, match="chunks"):
    streamed.fit(_chunks(X, y, 400) + [(X[:5].astype(np.float64), y[:5])], jax.random.key(0), num_examples=N + 5,
                 loss="squared", feature_bound=3.0, **FIT)


def _never_read():
  raise AssertionError("the chunks were read before the error")


@pytest.mark.parametrize("bad, match", [
    (dict(feature_bound=None), "feature_bound"),  # a bound from the data would set the steps, unaccounted
    (dict(epsilon=-1.0), "epsilon"),
    (dict(delta=1.5), "delta"),
    (dict(clipping_mode="both"), "clipping_mode"),
    (dict(prior="x"), "prior"),
    (dict(rule="gs-x"), "rule"),
])
def test_bad_arguments_are_rejected_before_any_chunk_is_read(bad, match):
  kwargs = dict(num_examples=N, loss="squared", feature_bound=3.0, **FIT)
  with pytest.raises(ValueError, match=match):
    streamed.fit(_never_read, jax.random.key(0), **{**kwargs, **bad})


def test_npy_chunks_reject_mismatched_files_by_name(tmp_path):
  np.save(tmp_path / "X.npy", np.zeros((10, 3), np.float32))
  np.save(tmp_path / "y.npy", np.zeros(9, np.float32))
  np.save(tmp_path / "F.npy", np.asfortranarray(np.zeros((10, 3), np.float32)))
  with pytest.raises(ValueError, match="y_path"):
    row_chunks.npy_chunks(tmp_path / "X.npy", tmp_path / "y.npy", rows=4)
  with pytest.raises(ValueError, match="X_path"):
    row_chunks.npy_chunks(tmp_path / "y.npy", tmp_path / "y.npy", rows=4)
  with pytest.raises(ValueError, match="X_path"):
    row_chunks.npy_chunks(tmp_path / "F.npy", tmp_path / "y.npy", rows=4)


@pytest.mark.float64
def test_float64_totals_beyond_2_to_53_are_added_as_integers():
  """float64 features: the grid is fine enough that a chunk's total exceeds 2^53 (int64 totals);
  adding them as float64 would round (measured: 3 of 30 weights off by an ulp with 4 chunks)."""
  rng = np.random.default_rng(0)
  X = rng.normal(size=(400, 30))
  y = np.where(X[:, :3] @ np.array([1.0, -1.0, 0.5]) + rng.logistic(size=400) > 0, 1.0, -1.0)
  key = jax.random.key(0)
  kwargs = dict(num_examples=400, loss="logistic", feature_bound=1.0, epsilon=1.0, delta=1e-5, passes=25)
  one = streamed.fit([(X, y)], key, **kwargs)
  assert one.w.dtype == np.float64
  _assert_same(streamed.fit(_chunks(X, y, 100), key, **kwargs), one)


@pytest.mark.float64  # float64 chunks stay float64; float64 chunks in float32 are cast (jax.enable_x64(False))
@pytest.mark.parametrize("x64", [True, False])
def test_a_dense_chunk_after_the_first_is_make_problems_problem_and_a_bad_one_its_error(x64):
  """row_chunks.dense_chunk (the fit's layout of every dense chunk after the first): the problem of
  make_problem bit for bit (float32, float64, integer and float16 chunks, a remainder of rows past
  the tiles); a chunk make_problem refuses gets no layout and make_problem's error."""
  rng = np.random.default_rng(0)
  with jax.enable_x64(x64):
    for dtype in (np.float32, np.float64, np.int32, np.float16):
      X = (rng.normal(size=(300, 7)) * 3).astype(dtype)
      y = np.where(rng.normal(size=300) > 0, 1.0, -1.0)
      bound = np.linspace(0.5, 4.0, 7)
      first = row_chunks.chunk_problem(X[:50], y[:50], loss="logistic", penalty=None, feature_bound=bound)
      lean = row_chunks.dense_chunk(X, y, first, bound)
      full = dg.make_problem(X, y, "logistic", feature_bound=bound)
      assert lean is not None and jax.tree.structure(lean) == jax.tree.structure(full)
      for a, b in zip(jax.tree.leaves(lean), jax.tree.leaves(full), strict=True):
        a, b = np.atleast_1d(a), np.atleast_1d(b)
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    X = rng.normal(size=(300, 7)).astype(np.float32)
    y = np.where(rng.normal(size=300) > 0, 1.0, -1.0)
    first = row_chunks.chunk_problem(X, y, loss="logistic", penalty=None, feature_bound=1.0)
    kwargs = dict(loss="logistic", penalty=None, feature_bound=1.0, like=first)
    for bad_X, bad_y, match in [(np.where(X == X[3, 4], np.nan, X), y, "X to be finite"),
                                (np.where(X == X[3, 4], -np.inf, X), y, "X to be finite"),
                                (X, np.where(y == y[5], 2.0, y), "y in"),
                                (X, np.where(y == y[5], np.nan, y), "y to be finite")]:
      assert row_chunks.dense_chunk(bad_X, bad_y, first, 1.0) is None
      with pytest.raises(ValueError, match=match):
        row_chunks.chunk_problem(bad_X, bad_y, **kwargs)
    if not x64:  # beyond float32's range from float64: make_problem's error, not an infinite layout
      wide = X.astype(np.float64)
      wide[7, 1] = 3.5e38
      assert row_chunks.dense_chunk(wide, y, first, 1.0) is None
      with pytest.raises(ValueError, match="beyond its range"):
        row_chunks.chunk_problem(wide, y, **kwargs)
