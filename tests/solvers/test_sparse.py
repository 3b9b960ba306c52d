"""`dpgcd_jax.sparse`: sparse features: same iterates as the dense path, O(nnz) storage, clear errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from jax.experimental import sparse as jsparse

import dpgcd_jax as dg
from dpgcd_jax import sparse

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)


def _data(n=60, p=40, density=0.1, seed=0, logistic=False):
  rng = np.random.default_rng(seed)
  X = scipy.sparse.random(n, p, density=density, random_state=seed, format="csr",
                          data_rvs=lambda k: rng.normal(size=k))
  y = X @ np.where(np.arange(p) < 5, 1.0, 0.0) + 0.1 * rng.normal(size=n)
  return X, (np.where(y > 0, 1.0, -1.0) if logistic else y)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bcoo"])
def test_every_sparse_format_stores_the_same_columns(fmt):
  X, _ = _data()
  Xs = jsparse.BCOO.fromdense(X.toarray()) if fmt == "bcoo" else X.asformat(fmt)
  cols = sparse.from_matrix(Xs)
  np.testing.assert_array_equal(cols.todense(), X.toarray().T)
  assert cols.nnz == X.nnz


@pytest.mark.parametrize("loss, logistic", [("squared", False), ("logistic", True)])
def test_sparse_and_dense_give_the_same_iterates_for_the_same_key(loss, logistic):
  X, y = _data(logistic=logistic)
  dense = dg.make_problem(X.toarray(), y, loss, l2=0.01, penalty=dg.penalties.L1(0.01),
                          feature_bound=2.0)
  sparse_pb = dg.make_problem(X, y, loss, l2=0.01, penalty=dg.penalties.L1(0.01), feature_bound=2.0)
  np.testing.assert_allclose(sparse_pb.smoothness, dense.smoothness)
  params = dg.dp_gcd.Params(step_size=1.0, clip=0.5, selection_noise=2.0, update_noise=2.0)
  a = dg.dp_gcd.run(dense, jax.random.key(0), params, passes=30)
  b = dg.dp_gcd.run(sparse_pb, jax.random.key(0), params, passes=30)
  np.testing.assert_array_equal(a.trace.coordinates, b.trace.coordinates)
  np.testing.assert_allclose(a.w, b.w, rtol=1e-9, atol=1e-12)
  cd_a = dg.dp_cd.run(dense, jax.random.key(1), dg.dp_cd.Params(1.0, 0.5, 2.0), passes=1)
  cd_b = dg.dp_cd.run(sparse_pb, jax.random.key(1), dg.dp_cd.Params(1.0, 0.5, 2.0), passes=1)
  np.testing.assert_allclose(cd_a.w, cd_b.w, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
def test_sparse_default_fit_and_reference_match_dense():
  X, y = _data(seed=1)
  dense = dg.make_problem(X.toarray(), y, "squared", penalty=dg.penalties.L1(0.01))
  sparse_pb = dg.make_problem(X, y, "squared", penalty=dg.penalties.L1(0.01))
  keys = jax.random.split(jax.random.key(2), 3)
  a = dg.dp_gcd.fit(dense, keys, epsilon=1.0, delta=1e-5, passes=5)
  b = dg.dp_gcd.fit(sparse_pb, keys, epsilon=1.0, delta=1e-5, passes=5)
  np.testing.assert_allclose(a.w, b.w, rtol=1e-9, atol=1e-12)
  ref_a, ref_b = dg.reference.solve(dense, tol=1e-9), dg.reference.solve(sparse_pb, tol=1e-9)
  np.testing.assert_allclose(ref_a.w, ref_b.w, atol=1e-7)


def test_sparse_problem_rejects_a_custom_loss_and_dp_sgd():
  X, y = _data()
  with pytest.raises(ValueError, match="GLM loss"):
    dg.make_problem(X, y, lambda w, x, yy: jnp.sum((x @ w - yy) ** 2))
  problem = dg.make_problem(X, y, "squared", feature_bound=1.0)
  with pytest.raises(ValueError, match="dense"):
    dg.dp_sgd.run(problem, jax.random.key(0), dg.dp_sgd.Params(), passes=1)


def test_unsupported_types_and_non_finite_entries_are_rejected_at_once():
  X, y = _data()
  bad = X.copy()
  bad.data[0] = np.nan
  with pytest.raises(ValueError, match="finite"):
    dg.make_problem(bad, y)
  bcsr = jsparse.BCSR.fromdense(X.toarray())
  with pytest.raises(ValueError, match="BCSR"):
    dg.make_problem(bcsr, y)
  with pytest.raises(ValueError, match="str"):
    dg.make_problem("X", y)


@pytest.mark.slow
def test_dorothea_shaped_storage_is_linear_in_nnz():
  rng = np.random.default_rng(0)
  X = scipy.sparse.random(800, 100_000, density=0.009, random_state=0, format="csr",
                          data_rvs=lambda k: np.ones(k))
  problem = dg.make_problem(X, rng.normal(size=800), "squared", feature_bound=1.0)
  stored = sum(np.asarray(a).nbytes for a in jax.tree.leaves(problem.XT))
  assert stored < 20 * X.nnz + 8 * 100_001 + 1_000_000  # O(nnz), far below 320 MB dense
  result = dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-6, passes=3)
  assert np.isfinite(result.w).all()
