"""`dpgcd_jax.layout` (`pad`), `dpgcd_jax.problem` (`bucket`): shape buckets: a problem padded to public sizes runs like
the unpadded one.

`layout.pad` adds zero records (the means divide by the true `n`) and zero features (masked
out of every selection); `problem.bucket` gives the public sizes. The padded DP-GCD run selects
the same coordinates as the unpadded run for the same key, with the same weights up to the
float rounding of the margins' matrix-vector products (whose kernels depend on the shape).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

import dpgcd_jax as dg
from dpgcd_jax import kernels
from dpgcd_jax import layout as layout_lib
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.estimators import _linear


def _problem(n=300, p=29, loss="logistic", penalty=None, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p)).astype(np.float32)
  t = X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n)
  y = np.sign(t) if loss == "logistic" else t
  return dg.make_problem(X, y.astype(np.float32), loss, feature_bound=3.0, penalty=penalty)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 8, 9, 300, 455, 569, 16383, 16385, 20000, 100_000, 1_000_001])
def test_a_bucket_never_crosses_a_power_of_two_and_wastes_at_most_a_quarter_above_2_14(size):
  b = problem_lib.bucket(size)
  assert b >= size
  assert (b - 1).bit_length() == (size - 1).bit_length()  # the exact sums' public grid is the same
  assert b <= (2 * size if size <= 1 << 14 else 1.25 * size)
  assert problem_lib.bucket(b) == b


@pytest.mark.parametrize("selection,update,penalty", [
    ("gumbel", "gaussian", None), ("laplace", "laplace", dg.penalties.L1(0.01)),
    ("laplace", "laplace", dg.penalties.L2(0.1))])
def test_the_padded_run_selects_the_same_coordinates_with_the_same_weights(selection, update, penalty):
  problem = _problem(penalty=penalty)
  padded = layout_lib.pad(problem, 512, 32)
  assert padded.XT.shape == (32, 512) and int(padded.rows) == 300 and int(padded.columns) == 29
  params = dg.dp_gcd.Params(1.0, 0.5, 3.0, 3.0)
  one = dg.dp_gcd.run(problem, jax.random.key(1), params, passes=40, selection=selection, update=update,
                      store_objective=True)
  two = dg.dp_gcd.run(padded, jax.random.key(1), params, passes=40, selection=selection, update=update,
                      store_objective=True)
  np.testing.assert_array_equal(np.asarray(one.trace.coordinates), np.asarray(two.trace.coordinates))
  np.testing.assert_allclose(np.asarray(two.w)[:29], np.asarray(one.w), rtol=1e-6, atol=1e-8)
  assert np.all(np.asarray(two.w)[29:] == 0.0)
  np.testing.assert_allclose(np.asarray(two.trace.nonprivate_objective),
                             np.asarray(one.trace.nonprivate_objective), rtol=1e-5)


def test_padded_records_add_nothing_and_the_mean_divides_by_the_true_n():
  problem = _problem(n=442, p=11, loss="squared")
  padded = layout_lib.pad(problem, 512, 16)
  w = jnp.asarray(np.random.default_rng(1).normal(size=11).astype(np.float32))
  margins = kernels.init_margins(problem, w)
  for thresholds in (jnp.full(11, 0.5, jnp.float32), jnp.full(11, jnp.inf, jnp.float32)):
    one = kernels.clipped_gradient(problem, w, margins, thresholds)
    two = kernels.clipped_gradient(padded, jnp.pad(w, (0, 5)), jnp.pad(margins, (0, 70)),
                                       jnp.pad(thresholds, (0, 5), constant_values=0.5))
    np.testing.assert_allclose(np.asarray(two)[:11], np.asarray(one), rtol=0 if jnp.isfinite(thresholds[0]) else 1e-6)
    assert np.all(np.asarray(two)[11:] == 0.0)


def test_padded_features_are_never_selected_even_when_the_noise_dominates():
  padded = layout_lib.pad(_problem(n=64, p=5), 64, 64)  # 59 padded features of 64
  for selection, update in (("gumbel", "gaussian"), ("laplace", "laplace")):
    result = dg.dp_gcd.run(padded, jax.random.key(0), dg.dp_gcd.Params(1.0, 0.5, 1e4, 1e4), passes=300,
                           selection=selection, update=update)
    coordinates = np.asarray(result.trace.coordinates)
    assert coordinates.max() < 5 and len(set(coordinates.tolist())) == 5  # all true ones, no padded one
    assert np.all(np.asarray(result.w)[5:] == 0.0)


@pytest.mark.slow
def test_secure_noise_pads_records_only_and_refuses_padded_features():
  problem = _problem(n=100, p=13)
  params = dg.dp_gcd.Params(1.0, 0.5, 3.0, 3.0)
  options = dict(selection="discrete_laplace", update="discrete_gaussian")
  one = dg.dp_gcd.run(problem, jax.random.key(2), params, passes=6, **options)
  two = dg.dp_gcd.run(layout_lib.pad(problem, 128, 13), jax.random.key(2), params, passes=6, **options)
  np.testing.assert_array_equal(np.asarray(one.trace.coordinates), np.asarray(two.trace.coordinates))
  with pytest.raises(ValueError, match="unpadded problem"):
    dg.dp_gcd.run(layout_lib.pad(problem, 100, 16), jax.random.key(2), params, passes=2, **options)


def test_solvers_without_padding_support_and_bad_padding_raise():
  padded = layout_lib.pad(_problem(), 512, 32)
  with pytest.raises(ValueError, match="unpadded problem"):
    dg.dp_cd.run(padded, jax.random.key(0), dg.dp_cd.Params(0.5, 1.0, 1.0), passes=1)
  with pytest.raises(ValueError, match="padded sizes"):
    layout_lib.pad(_problem(), 200, 32)
  with pytest.raises(ValueError, match="unpadded problem to pad"):
    layout_lib.pad(padded, 1024, 32)
  with pytest.raises(ValueError, match="dense problem with a GLM loss"):
    layout_lib.pad(dg.make_problem(scipy.sparse.random(20, 5, density=0.5, format="csr", random_state=0),
                                    np.ones(20), "squared", feature_bound=1.0), 32, 8)
  assert layout_lib.pad(_problem(), 300, 29).rows is None  # nothing to pad: the problem itself


def test_the_estimator_pads_and_gives_the_unpadded_coefficients(monkeypatch):
  rng = np.random.default_rng(3)
  X = rng.normal(size=(300, 29))
  y = (X[:, 0] - X[:, 2] + 0.3 * rng.normal(size=300) > 0).astype(int)
  fit = lambda: dg.estimators.DPGCDClassifier(classes=[0, 1], feature_bound=3.0, epsilon=2.0,
                                              random_state=0).fit(X, y).coef_
  padded = fit()
  monkeypatch.setattr(_linear.DPGCDBase, "_layout_shape", lambda self, n, width: (n, width))
  np.testing.assert_allclose(padded, fit(), rtol=1e-6, atol=1e-9)


def test_an_infinite_noise_scale_never_releases_a_padded_feature():
  # Review finding: -inf + inf noise is NaN, which argmax takes as the maximum; a padded
  # index is then replaced by coordinate 0 (the choice is noise alone).
  padded = layout_lib.pad(_problem(n=4, p=3), 4, 8)
  for selection, update, rule in (("gumbel", "gaussian", "gs-s"), ("laplace", "laplace", "gs-r")):
    result = dg.dp_gcd.run(padded, jax.random.key(0), dg.dp_gcd.Params(1.0, 100.0, 3e38, 1.0), passes=20,
                           selection=selection, update=update, rule=rule)
    assert np.asarray(result.trace.coordinates).max() < 3


def test_fit_refuses_to_release_a_feature_bound_on_a_padded_problem():
  rng = np.random.default_rng(0)
  X = rng.normal(size=(40, 3)).astype(np.float32)
  problem = dg.make_problem(X, np.sign(X[:, 0]), "logistic")  # no public smoothness
  padded = dataclasses.replace(problem, rows=jnp.asarray(40, jnp.int32))
  with pytest.raises(ValueError, match="public smoothness"):
    dg.dp_gcd.fit(padded, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2)
