"""`dpgcd_jax.data._synthetic`: the sparse dorothea-shaped generator, sparse Datasets, and the least-squares readings of
log1 / log2."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.linear_model import LogisticRegression

from dpgcd_jax import data
from dpgcd_jax import losses
from dpgcd_jax import penalties


@pytest.fixture(scope="module")
def doro():
  return data.dorothea_synth(0)


@pytest.fixture
def no_densify(monkeypatch: pytest.MonkeyPatch) -> None:
  """Fails the test if a sparse matrix is converted to a dense one."""

  def refuse(self, *args, **kwargs):
    raise AssertionError(f"densified a sparse {self.shape} matrix")

  for cls in (sparse.csr_array, sparse.csc_array, sparse.coo_array, sparse.csr_matrix):
    monkeypatch.setattr(cls, "toarray", refuse)
    monkeypatch.setattr(cls, "todense", refuse)
    monkeypatch.setattr(cls, "__array__", refuse, raising=False)


# ----------------------------------------------------------------------- dorothea_synth


def test_dorothea_synth_shape_density_and_binary_csr(doro):
  assert isinstance(doro.X, sparse.csr_array) and doro.X.dtype == np.float64
  assert (doro.n, doro.p) == (800, 100_000)
  density = doro.X.nnz / (doro.n * doro.p)
  assert abs(density - 0.009) < 0.0005, density
  np.testing.assert_array_equal(doro.X.data, 1.0)
  assert doro.X.has_canonical_format
  column_counts = np.bincount(doro.X.indices, minlength=doro.p)
  assert column_counts.min() >= 1  # no all-zero column: every M_j > 0.
  assert 800 <= np.diff(doro.X.indptr).mean() <= 1000


def test_dorothea_synth_model_and_objective(doro):
  assert doro.true_nnz == 20
  support = np.flatnonzero(doro.w_true)
  assert np.sum(doro.w_true > 0) == np.sum(doro.w_true < 0) == 10
  assert np.all((np.abs(doro.w_true[support]) >= 1) & (np.abs(doro.w_true[support]) <= 2))
  frequency = np.bincount(doro.X.indices, minlength=doro.p)[support] / doro.n
  np.testing.assert_allclose(frequency, 0.1, atol=0.04)
  assert set(np.unique(doro.y)) == {-1.0, 1.0} and 0.4 < np.mean(doro.y == 1) < 0.6
  assert np.mean(np.sign(doro.X @ doro.w_true) == doro.y) > 0.65
  assert doro.loss is losses.logistic and isinstance(doro.penalty, penalties.L1)
  assert doro.lambda_fraction == 0.3
  np.testing.assert_allclose(doro.penalty_strength, 0.3 * np.max(np.abs(doro.X.T @ doro.y)) / (2 * doro.n),
                             rtol=1e-12)


def test_dorothea_synth_solution_sparsity_as_documented(doro):
  # sklearn: C * sum_i log(1 + exp(-y_i x_i w)) + ||w||_1, i.e. ours with C = 1 / (n lambda).
  model = LogisticRegression(l1_ratio=1.0, C=1.0 / (doro.n * doro.penalty_strength), solver="liblinear",
                             fit_intercept=False, tol=1e-8, max_iter=1000)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    coef = model.fit(doro.X, doro.y).coef_.ravel()
  nonzero = set(np.flatnonzero(coef))
  assert 20 <= len(nonzero) <= 30, len(nonzero)
  assert set(np.flatnonzero(doro.w_true)) <= nonzero


def test_dorothea_synth_is_deterministic_by_seed(doro):
  again = data.get("dorothea_synth", seed=0)
  for attr in ("indptr", "indices", "data"):
    np.testing.assert_array_equal(getattr(again.X, attr), getattr(doro.X, attr))
  np.testing.assert_array_equal(again.y, doro.y)
  np.testing.assert_array_equal(again.w_true, doro.w_true)
  other = data.dorothea_synth(1)
  assert other.X.nnz != doro.X.nnz or not np.array_equal(other.X.indices, doro.X.indices)
  assert not np.array_equal(other.w_true, doro.w_true)


def test_dorothea_synth_options_and_validation():
  small = data.dorothea_synth(2, n=50, p=300, density=0.05, nnz=4)
  assert small.X.shape == (50, 300) and small.true_nnz == 4
  for kwargs, words in [(dict(density=0.0), "density"), (dict(density=1.5), "density"),
                        (dict(p=10, nnz=20), "nnz=20"), (dict(noise=-1.0), "noise=-1.0"),
                        (dict(n=1), "n >= 2")]:
    with pytest.raises(ValueError, match=words):
      data.dorothea_synth(0, **kwargs)


# ------------------------------------------------------------------------ sparse Dataset


def test_sparse_dataset_works_without_densifying(doro, no_densify):
  ds = data.Dataset("s", doro.X, doro.y, losses.logistic, doro.penalty, w_true=doro.w_true)
  assert (ds.n, ds.p, ds.true_nnz) == (800, 100_000, 20)
  assert ds.X is doro.X  # a float64 csr_array is kept as is.
  lam = ds.lambda_max
  smooth = ds.smoothness()
  assert smooth.shape == (100_000,) and np.all(smooth > 0)
  half = ds.with_lambda_fraction(0.15)
  np.testing.assert_allclose(half.penalty_strength, 0.15 * lam)
  rebuilt = data.dorothea_synth(0, p=2000)
  assert rebuilt.is_sparse


def test_sparse_lambda_max_and_smoothness_equal_the_dense_ones():
  ds = data.dorothea_synth(0, n=100, p=2000, density=0.02)
  dense = ds.X.toarray()
  np.testing.assert_allclose(ds.lambda_max, data.lambda_max(dense, ds.y, "logistic"), rtol=1e-13)
  np.testing.assert_allclose(ds.smoothness(), 0.25 * np.mean(dense**2, axis=0), rtol=1e-13)


@pytest.mark.parametrize("fmt", ["csr_matrix", "csc_array", "coo_array"])
def test_sparse_inputs_become_float64_csr(fmt):
  x = getattr(sparse, fmt)(np.array([[0, 2], [3, 0], [0, 0]], dtype=np.int64))
  ds = data.Dataset("s", x, np.ones(3), losses.squared)
  assert isinstance(ds.X, sparse.csr_array) and ds.X.dtype == np.float64
  np.testing.assert_array_equal(ds.X.toarray(), [[0, 2], [3, 0], [0, 0]])


def test_sparse_input_validation():
  bad = sparse.csr_array(np.array([[0.0, np.nan], [1.0, 0.0]]))
  with pytest.raises(ValueError, match="X to be finite"):
    data.Dataset("s", bad, np.ones(2), losses.squared)
  jsparse = pytest.importorskip("jax.experimental.sparse")
  with pytest.raises(ValueError, match="got BCOO"):
    data.Dataset("s", jsparse.BCOO.fromdense(np.eye(2)), np.ones(2), losses.squared)
  with pytest.raises(ValueError, match="dense X"):
    data.standardize(sparse.csr_array(np.eye(2)))


def test_sparse_cache_round_trip_drops_empty_columns(tmp_path):
  x = sparse.csr_array(np.array([[1, 0, 0, 1], [0, 0, 1, 1], [1, 0, 0, 0]], dtype=np.uint8))
  data.write_cache("dorothea", x, np.array([1, -1, 1]), cache_dir=tmp_path)
  assert json.loads((tmp_path / "dorothea.json").read_text())["X_format"] == "csr"
  ds = data.load_cached("dorothea", tmp_path)
  assert ds.is_sparse and ds.p == 3  # column 1 is all zero.
  np.testing.assert_array_equal(ds.X.toarray(), [[1, 0, 1], [0, 1, 1], [1, 0, 0]])


def test_read_sparse_binary():
  x = data.read_sparse_binary("1 3\n\n2 2\n4\n", p=4)
  np.testing.assert_array_equal(x.toarray(), [[1, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])
  with pytest.raises(ValueError, match="out of \\[1, 4\\] on line 2"):
    data.read_sparse_binary("1\n5\n", p=4)


# -------------------------------------------------------------- log1 / log2 readings


@pytest.mark.parametrize("name, sigma", [("log1", 1.0), ("log2", 2.0)])
def test_least_squares_readings_share_the_draws(name, sigma):
  logistic, ls = data.get(name, seed=3), data.get(f"{name}_ls", seed=3)
  np.testing.assert_array_equal(ls.X, logistic.X)
  np.testing.assert_array_equal(ls.w_true, logistic.w_true)
  np.testing.assert_array_equal(np.where(ls.y >= 0, 1.0, -1.0), logistic.y)  # same noise draws.
  residual = ls.y - ls.X @ ls.w_true
  assert abs(residual.std() - 1.0) < 0.1  # noise N(0, 1)
  assert ls.loss is losses.squared and isinstance(ls.penalty, penalties.Zero) and ls.l2 == 1e-3
  assert logistic.loss is losses.logistic and f"LogNormal(0, {sigma})" in ls.description


@pytest.mark.parametrize("name, snr", [("log1_ls", 362.0), ("log2_ls", 6.7e3)])
def test_least_squares_readings_document_their_snr(name, snr):
  ds = data.get(name, seed=0)
  signal = ds.X @ ds.w_true
  realized = np.sum(signal**2) / np.sum((ds.y - signal) ** 2)
  np.testing.assert_allclose(realized, snr, rtol=0.01)  # the figures in the docstrings.
  assert f"SNR ||X w_true||^2 / ||noise||^2 = {realized:.3g}" in ds.description
  assert "SNR" in data.spec(name).build.__doc__
  with pytest.raises(ValueError, match="noise=-1.0"):
    data.get(name, noise=-1.0)
