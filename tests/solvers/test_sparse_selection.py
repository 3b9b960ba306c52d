"""Sparse features, most of them empty (2 touched_slots(nnz) <= p): the touched-only gradient and the
closed-form draw of the empty features' selection noise (dpgcd_jax.solvers.greedy, "Sparse features")
have the law of the full mechanism."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
import scipy.stats

import dpgcd_jax as dg
from dpgcd_jax import mechanisms
from dpgcd_jax import penalties
from dpgcd_jax import sparse
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import greedy

CASES = [("laplace", "gs-s"), ("laplace", "gs-r"), ("gumbel", "gs-s")]


def _data(n=40, p=300, touched=10, seed=0):
  """Features `0..touched-1` have entries, the other `p - touched` none (`2 S <= p`)."""
  rng = np.random.default_rng(seed)
  X = np.zeros((n, p))
  X[:, :touched] = rng.normal(size=(n, touched)) * (rng.uniform(size=(n, touched)) < 0.05)
  X[0, :touched] = 1.0  # every touched feature has an entry
  y = X[:, :3].sum(axis=1) + 0.3 * rng.normal(size=n)
  return scipy.sparse.csr_matrix(X), y


def test_stored_columns_list_the_touched_and_the_empty_features():
  X, _ = _data()
  stored = sparse.from_matrix(X).stored
  assert stored.touched.shape == (sparse.touched_slots(X.nnz),) == (128,)
  np.testing.assert_array_equal(stored.touched[:10], np.arange(10))
  np.testing.assert_array_equal(stored.empty[:290], np.arange(10, 300))
  assert int(stored.num_empty) == 290
  np.testing.assert_array_equal(np.diff(stored.slot) >= 0, True)  # sorted segments
  for p in (255, 256):  # the public rule: listed when 2 S <= p
    assert (sparse.from_matrix(scipy.sparse.csr_matrix(np.eye(3, p))).stored is None) == (p == 255)


@pytest.mark.parametrize("clip", [0.3, np.inf])
def test_touched_means_are_the_full_means_of_the_touched_features(clip):
  X, y = _data()
  problem = dg.make_problem(X, y, "squared", feature_bound=2.0)
  XT = problem.XT
  dphi = jnp.asarray(np.random.default_rng(1).normal(size=X.shape[0]), XT.dtype)
  thresholds = jnp.full(X.shape[1], clip, XT.dtype)
  full = np.asarray(XT.clipped_mean(dphi, thresholds))
  touched = np.asarray(XT.clipped_mean(dphi, thresholds, touched=True))
  np.testing.assert_array_equal(touched[:10], full[:10])  # bit for bit: the same exact sums
  assert not touched[10:].any() and not full[10:].any() and np.count_nonzero(full[:10]) >= 8


@pytest.mark.parametrize("selection, rule", CASES)
def test_the_closed_form_maximum_has_the_law_of_the_maximum_of_the_draws(selection, rule):
  mechanism, m, scale = mechanisms.selection(selection), 50, 0.7
  keys = jax.random.split(jax.random.key(3), 20_000)
  zeros, M = jnp.zeros(m), jnp.full(m, 2.0)
  drawn = jax.vmap(lambda k: jnp.max(mechanism.noisy_scores(k, greedy.RULES[rule], zeros, zeros, M,
                                                            penalties.Zero(), scale, rule)))(keys)
  closed = jax.vmap(lambda k, c: mechanism.max_of_zero_scores(k, c, scale, rule, penalties.Zero(), jnp.float32),
                    in_axes=(0, None))
  other_keys = jax.random.split(jax.random.key(4), 20_000)
  assert scipy.stats.ks_2samp(drawn, closed(other_keys, m)).pvalue > 1e-4
  assert scipy.stats.ks_2samp(drawn, closed(other_keys, 2 * m)).pvalue < 1e-6  # the test can tell m from 2m
  assert np.all(np.isneginf(closed(other_keys[:10], 0)))


def _first_coordinates(problem, params, keys, selection, rule):
  state = dg.dp_gcd.init(problem)
  cast = base.cast_params(dg.dp_gcd.SOLVER, problem, params)
  step = lambda k: dg.dp_gcd.step(k, state, problem, cast, selection=selection, rule=rule)[1].coordinate  # noqa: E731
  return np.asarray(jax.jit(jax.vmap(step))(keys))


@pytest.mark.parametrize("selection, rule", CASES)
def test_the_selection_on_sparse_features_has_the_law_of_the_dense_selection(monkeypatch, selection, rule):
  X, y = _data()
  params = dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=0.15, update_noise=1.0)
  sparse_pb = dg.make_problem(X, y, "squared", feature_bound=2.0)
  dense_pb = dg.make_problem(X.toarray(), y, "squared", feature_bound=2.0)
  keys = jax.random.split(jax.random.key(0), 30_000)
  ours = _first_coordinates(sparse_pb, params, keys, selection, rule)
  full = _first_coordinates(dense_pb, params, jax.random.split(jax.random.key(1), 30_000), selection, rule)
  p = X.shape[1]
  table = np.stack([np.bincount(ours, minlength=p), np.bincount(full, minlength=p)])
  assert 0.2 < np.mean(full >= 10) < 0.8  # the empty features compete: the test has power
  assert scipy.stats.chi2_contingency(table).pvalue > 1e-4
  # The same test rejects a closed form drawn for twice as many empty features.
  mechanism = type(mechanisms.selection(selection))
  original = mechanism.max_of_zero_scores
  monkeypatch.setattr(mechanism, "max_of_zero_scores", lambda self, key, count, *rest: original(
      self, key, 2 * count, *rest))
  wrong = _first_coordinates(sparse_pb, params, keys, selection, rule)
  table = np.stack([np.bincount(wrong, minlength=p), np.bincount(full, minlength=p)])
  assert scipy.stats.chi2_contingency(table).pvalue < 1e-6


def test_with_l2_or_a_penalty_the_sparse_run_is_the_dense_run_for_the_same_key():
  """The closed form needs `g_j = 0` on the empty features: with `l2 > 0` (a runtime value) or a
  penalty the full path runs, and its draws are the dense path's."""
  X, y = _data()
  params = dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=1.0, update_noise=1.0)
  for kwargs in (dict(l2=0.05), dict(penalty=dg.penalties.L1(0.01))):
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
  assert problem.XT.stored is not None and int(problem.XT.stored.num_empty) > 10_000
  keys = jax.random.split(jax.random.key(6), 4)
  result = dg.dp_gcd.fit(problem, keys, epsilon=5.0, delta=1e-6, passes=20)
  one = dg.dp_gcd.fit(problem, keys[1], epsilon=5.0, delta=1e-6, passes=20)
  np.testing.assert_array_equal(result.trace.coordinates[1], one.trace.coordinates)
  objective = lambda w: float(dg.problem.objective(problem, jnp.asarray(w, problem.XT.dtype)))  # noqa: E731
  w0 = np.zeros(p + 3)
  assert all(objective(w) < 0.5 * objective(w0) for w in np.asarray(result.w))


def test_an_infinite_selection_scale_releases_coordinate_0_as_the_full_path():
  """Found by review: under vmap a clip of inf (or an overflowing scale) makes every criterion inf;
  inf ties then released the first touched feature, a function of the data. Now coordinate 0."""
  X, y = _data()
  X = scipy.sparse.hstack([scipy.sparse.csr_matrix((X.shape[0], 5)), X], format="csr")  # touched: 5..14
  params = lambda c: dg.dp_gcd.Params(step_size=1.0, clip=c, selection_noise=1.0, update_noise=1.0)  # noqa: E731
  for Xin in (X, X.toarray()):
    problem = dg.make_problem(Xin, y, "squared", feature_bound=2.0)
    run = lambda c, pb=problem: dg.dp_gcd.run(pb, jax.random.key(0), params(c), passes=4).trace.coordinates  # noqa: E731
    coordinates = jax.vmap(run)(jnp.asarray([1.0, jnp.inf]))
    np.testing.assert_array_equal(coordinates[1], 0)


def test_other_selection_objects_run_the_full_path():
  """Found by review: a subclass that changes the draws must not be replaced by the closed form."""

  class WiderGumbel(mechanisms.GumbelMax):
    def noisy_scores(self, key, score, g, w, M, penalty, scale, rule):
      return super().noisy_scores(key, score, g, w, M, penalty, 2 * scale, rule)

    def select(self, key, score, g, w, M, penalty, scale, rule):
      return mechanisms.argmax(self.noisy_scores(key, score, g, w, M, penalty, scale, rule))

  X, y = _data()
  params = dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=0.15, update_noise=1.0)
  runs = [dg.dp_gcd.run(dg.make_problem(Xin, y, "squared", feature_bound=2.0), jax.random.key(3), params, passes=20,
                        selection=WiderGumbel()) for Xin in (X, X.toarray())]
  np.testing.assert_array_equal(runs[0].trace.coordinates, runs[1].trace.coordinates)


def test_noise_free_ties_go_to_the_smallest_index_as_in_the_full_path():
  X, _ = _data()
  params = dg.dp_gcd.Params(step_size=1.0, clip=1.0)
  for Xin, y in ((X, np.zeros(X.shape[0])), (scipy.sparse.csr_matrix(X.shape), np.ones(X.shape[0]))):
    problem = dg.make_problem(Xin, y, "squared", feature_bound=2.0)  # every score 0: all tie
    assert problem.XT.stored is not None
    np.testing.assert_array_equal(dg.dp_gcd.run(problem, jax.random.key(0), params, passes=3).trace.coordinates, 0)
