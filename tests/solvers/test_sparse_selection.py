"""`dpgcd_jax.sparse`, `dpgcd_jax.solvers.greedy`: sparse features: one selection path and public shapes.

Which code runs, and every shape, is a function of public inputs (n, p, the declared or bucketed
capacity and window, the options), never of `nnz` or of which features are empty; the released
index is drawn by one formula (the noise of all `p` coordinates) on every data set."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import mechanisms
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import sparse
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import greedy

CASES = [("laplace", "gs-s"), ("laplace", "gs-r"), ("gumbel", "gs-s")]
PARAMS = dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=0.15, update_noise=1.0)


def _data(n=40, p=300, touched=10, seed=0):
  """Features `0..touched-1` have entries, the other `p - touched` none."""
  rng = np.random.default_rng(seed)
  X = np.zeros((n, p))
  X[:, :touched] = rng.normal(size=(n, touched)) * (rng.uniform(size=(n, touched)) < 0.05)
  X[0, :touched] = 1.0  # every touched feature has an entry
  y = X[:, :3].sum(axis=1) + 0.3 * rng.normal(size=n)
  return scipy.sparse.csr_matrix(X), y


def _neighbours(nnz=384, n=40, p=768):
  """Two data sets that differ in record 1: on `b` it also has an entry in feature `p - 1`,
  empty on `a`. `nnz` 384 against 385 crosses the old rule (the features were listed, and the
  closed-form sampler ran, when `2 * 128 ceil(nnz / 128) <= p`), within one bucket (512)."""
  rng = np.random.default_rng(1)
  X = np.zeros((n, p))
  X[0, :nnz - 8] = 1.0  # features 0..375: one entry each
  X[2:10, 0] = rng.normal(size=8)  # feature 0: nine entries (the largest column, on both)
  a = scipy.sparse.csr_matrix(X)
  X[1, p - 1] = 1.0
  b = scipy.sparse.csr_matrix(X)
  assert (a.nnz, b.nnz) == (nnz, nnz + 1) and np.diff(a.tocsc().indptr)[-1] == 0
  y = np.where(rng.uniform(size=n) < 0.5, 1.0, -1.0)
  return a, b, y


def _step_jaxpr(problem, selection="laplace", rule="gs-s"):
  state = dg.dp_gcd.init(problem)
  cast = base.cast_params(dg.dp_gcd.SOLVER, problem, PARAMS)
  step = lambda pb, k: dg.dp_gcd.step(k, state, pb, cast, selection=selection, rule=rule)  # noqa: E731
  return str(jax.make_jaxpr(step)(problem, jax.random.key(0)))


def _shapes(tree):
  return jax.tree.structure(tree), [(np.shape(x), np.asarray(x).dtype) for x in jax.tree.leaves(tree)]


def test_neighbours_that_differ_in_an_empty_feature_run_one_program():
  """Failed before: the features of `a` were listed (`XT.stored`), and its step ran the closed-form
  sampler under a `cond`; `b`'s ran the full path: two programs, two float laws."""
  a, b, y = _neighbours()
  pa, pb = (dg.make_problem(X, y, "logistic", feature_bound=1.0) for X in (a, b))
  assert _shapes(pa.XT) == _shapes(pb.XT)
  # bucket(384) = 512 slots and a window of bucket(9) = 16, 640 in all (a multiple of 128)
  assert (pa.XT.capacity, pa.XT.window, pa.XT.vals.shape) == (624, 16, (640,))
  for selection, rule in CASES:
    assert _step_jaxpr(pa, selection, rule) == _step_jaxpr(pb, selection, rule)


def test_declared_capacity_and_window_fix_the_shapes_across_buckets():
  """`nnz` 512 against 513 crosses a bucket: with a declared capacity and window the stored arrays
  (and so the program) are the same."""
  a, b, y = _neighbours(nnz=512, p=1024)
  declared = dict(sparse_capacity=(4096, 40))
  pa, pb = (dg.make_problem(X, y, "logistic", feature_bound=1.0, **declared) for X in (a, b))
  assert _shapes(pa.XT) == _shapes(pb.XT)
  assert (pa.XT.window, pa.XT.vals.shape, int(pa.XT.nnz)) == (40, (4224,), 512)  # 4096 + 40, aligned
  assert _step_jaxpr(pa) == _step_jaxpr(pb)
  # The default buckets do tell 512 from 513 (documented: shapes reveal the bucket of nnz).
  da, db = (sparse.from_matrix(X) for X in (a, b))
  assert da.capacity < db.capacity


def test_a_declaration_the_data_exceed_is_refused():
  X, y = _data()
  with pytest.raises(ValueError, match="capacity=10"):
    sparse.from_matrix(X, capacity=10)
  with pytest.raises(ValueError, match="window=2"):
    sparse.from_matrix(X, window=2)
  with pytest.raises(ValueError, match="sparse_capacity"):
    dg.make_problem(X.toarray(), y, sparse_capacity=(100, 10))


def _first_coordinates(problem, keys, selection, rule, params=PARAMS):
  state = dg.dp_gcd.init(problem)
  cast = base.cast_params(dg.dp_gcd.SOLVER, problem, params)
  step = lambda k: dg.dp_gcd.step(k, state, problem, cast, selection=selection, rule=rule)[1].coordinate  # noqa: E731
  return np.asarray(jax.jit(jax.vmap(step))(keys))


def _formula(problem, keys, selection, rule, params=PARAMS):
  """The released index by its definition: the selection key of `step` (first half of
  `split(key)`), the noise of all `p` coordinates drawn from it at the public shape (p,), the
  argmax of the noisy criteria."""
  M = problem_lib.coordinate_smoothness(problem)
  thresholds = clipping.coordinate_thresholds(jnp.asarray(params.clip, M.dtype), M, problem.curvature)
  state = dg.dp_gcd.init(problem)
  g = kernels.clipped_gradient(problem, state.w, state.margins, thresholds)
  scale = clipping.noise_scale(jnp.asarray(params.selection_noise, M.dtype),
                               greedy.selection_sensitivity(thresholds, M, problem.mean_count))
  score = greedy.RULES[rule]
  p = M.shape[0]

  def one(key):
    key_select = jax.random.split(key)[0]
    if selection == "gumbel":
      criteria = score(g, state.w, M, problem.penalty) + scale * jax.random.gumbel(key_select, (p,), M.dtype)
    elif rule == "gs-s":  # Laplace noise inside |.| (no penalty)
      criteria = score(g + jnp.sqrt(M) * scale * jax.random.laplace(key_select, (p,), M.dtype), state.w, M,
                       problem.penalty)
    else:
      criteria = score(g, state.w, M, problem.penalty) + scale * jax.random.laplace(key_select, (p,), M.dtype)
    return jnp.argmax(criteria)

  return np.asarray(jax.jit(jax.vmap(one))(keys))


@pytest.mark.slow
@pytest.mark.parametrize("selection, rule", CASES)
def test_the_selection_is_one_formula_on_both_neighbours(selection, rule):
  """Failed before on `a` (closed form: the empty features' maximum by one inverse-CDF draw, uncapped)
  while `b` ran the full path: with the same key, the released index is now the argmax of the noisy
  criteria of all `p` coordinates on both, the dense path's too."""
  a, b, y = _neighbours()
  keys = jax.random.split(jax.random.key(0), 2000)
  for X in (a, b):
    problem = dg.make_problem(X, y, "logistic", feature_bound=1.0)
    ours = _first_coordinates(problem, keys, selection, rule)
    np.testing.assert_array_equal(ours, _formula(problem, keys, selection, rule))
    dense = dg.make_problem(X.toarray(), y, "logistic", feature_bound=1.0)
    np.testing.assert_array_equal(ours, _first_coordinates(dense, keys, selection, rule))
    assert 0.05 < np.mean(ours >= 376) < 0.95  # the empty features compete: the test has power


def test_the_release_does_not_depend_on_the_padding():
  """Capacity and window are shapes only: the same key gives the same run, bit for bit."""
  X, y = _data()
  runs = [dg.dp_gcd.run(dg.make_problem(X, y, "squared", feature_bound=2.0, sparse_capacity=cap),
                        jax.random.key(2), PARAMS, passes=15) for cap in (None, (1000, 40), (X.nnz, 5))]
  for other in runs[1:]:
    np.testing.assert_array_equal(runs[0].trace.coordinates, other.trace.coordinates)
    np.testing.assert_array_equal(runs[0].w, other.w)


@pytest.mark.parametrize("kwargs", [dict(), dict(l2=0.05), dict(penalty=dg.penalties.L1(0.01))])
def test_the_sparse_run_is_the_dense_run_for_the_same_key(kwargs):
  X, y = _data()
  params = dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=1.0, update_noise=1.0)
  a = dg.dp_gcd.run(dg.make_problem(X, y, "squared", feature_bound=2.0, **kwargs), jax.random.key(2), params,
                    passes=30)
  b = dg.dp_gcd.run(dg.make_problem(X.toarray(), y, "squared", feature_bound=2.0, **kwargs), jax.random.key(2),
                    params, passes=30)
  np.testing.assert_array_equal(a.trace.coordinates, b.trace.coordinates)
  np.testing.assert_allclose(a.w, b.w, rtol=1e-5, atol=1e-6)


def test_a_noise_free_sparse_run_with_empty_features_is_the_dense_run():
  X, y = _data()
  params = dg.dp_gcd.Params(step_size=0.5, clip=1.0)
  a = dg.dp_gcd.run(dg.make_problem(X, y, "squared", feature_bound=2.0), jax.random.key(0), params, passes=25)
  b = dg.dp_gcd.run(dg.make_problem(X.toarray(), y, "squared", feature_bound=2.0), jax.random.key(0), params,
                    passes=25)
  np.testing.assert_array_equal(a.trace.coordinates, b.trace.coordinates)
  np.testing.assert_allclose(a.w, b.w, rtol=1e-5, atol=1e-6)
  assert np.all(np.asarray(a.trace.coordinates) < 10)  # the empty features never win without noise


def test_a_private_fit_on_mostly_empty_features_learns_and_vmaps_over_keys():
  rng = np.random.default_rng(5)
  n, p = 1000, 20_000  # nnz about 7000 < p
  X = scipy.sparse.random(n, p, density=0.0002, random_state=5, format="csr", data_rvs=lambda k: np.ones(k))
  X = scipy.sparse.hstack([scipy.sparse.csr_matrix(rng.choice([-1.0, 1.0], size=(n, 3))), X], format="csr")
  y = X[:, :3] @ np.ones(3) + 0.1 * rng.normal(size=n)
  problem = dg.make_problem(X, y, "squared", feature_bound=1.0)
  keys = jax.random.split(jax.random.key(6), 4)
  result = dg.dp_gcd.fit(problem, keys, epsilon=5.0, delta=1e-6, passes=20)
  one = dg.dp_gcd.fit(problem, keys[1], epsilon=5.0, delta=1e-6, passes=20)
  np.testing.assert_array_equal(result.trace.coordinates[1], one.trace.coordinates)
  objective = lambda w: float(dg.kernels.objective(problem, jnp.asarray(w, problem.XT.dtype)))  # noqa: E731
  w0 = np.zeros(p + 3)
  assert all(objective(w) < 0.5 * objective(w0) for w in np.asarray(result.w))


def test_an_infinite_selection_scale_releases_coordinate_0_as_the_dense_path():
  X, y = _data()
  X = scipy.sparse.hstack([scipy.sparse.csr_matrix((X.shape[0], 5)), X], format="csr")  # touched: 5..14
  params = lambda c: dg.dp_gcd.Params(step_size=1.0, clip=c, selection_noise=1.0, update_noise=1.0)  # noqa: E731
  for Xin in (X, X.toarray()):
    problem = dg.make_problem(Xin, y, "squared", feature_bound=2.0)
    run = lambda c, pb=problem: dg.dp_gcd.run(pb, jax.random.key(0), params(c), passes=4).trace.coordinates  # noqa: E731
    coordinates = jax.vmap(run)(jnp.asarray([1.0, jnp.inf]))
    np.testing.assert_array_equal(coordinates[1], 0)


def test_other_selection_objects_give_the_dense_run():
  class WiderGumbel(mechanisms.GumbelMax):
    def noisy_scores(self, key, score, g, w, M, penalty, scale, rule):
      return super().noisy_scores(key, score, g, w, M, penalty, 2 * scale, rule)

    def select(self, key, score, g, w, M, penalty, scale, rule):
      return mechanisms.argmax(self.noisy_scores(key, score, g, w, M, penalty, scale, rule))

  X, y = _data()
  runs = [dg.dp_gcd.run(dg.make_problem(Xin, y, "squared", feature_bound=2.0), jax.random.key(3), PARAMS, passes=20,
                        selection=WiderGumbel()) for Xin in (X, X.toarray())]
  np.testing.assert_array_equal(runs[0].trace.coordinates, runs[1].trace.coordinates)


def test_noise_free_ties_go_to_the_smallest_index():
  X, _ = _data()
  params = dg.dp_gcd.Params(step_size=1.0, clip=1.0)
  for Xin, y in ((X, np.zeros(X.shape[0])), (scipy.sparse.csr_matrix(X.shape), np.ones(X.shape[0]))):
    problem = dg.make_problem(Xin, y, "squared", feature_bound=2.0)  # every score 0: all tie
    np.testing.assert_array_equal(dg.dp_gcd.run(problem, jax.random.key(0), params, passes=3).trace.coordinates, 0)
