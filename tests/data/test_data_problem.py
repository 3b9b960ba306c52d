"""`dpgcd_jax.data._dataset` (`Dataset.to_problem`): the declared smoothness, the objective carried over, dtypes, sparse
input."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import sparse

import dpgcd_jax
from dpgcd_jax import data
from dpgcd_jax import losses
from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib


@pytest.fixture(scope="module")
def diabetes():
  return data.get("diabetes")


def _numpy_objective(ds: data.Dataset, w: np.ndarray) -> float:
  """F(w) in float64 NumPy, written from the module docstring's conventions."""
  z = ds.X @ w
  if ds.loss is losses.squared:  # noqa: SIM108
    data_term = np.mean(0.5 * (z - ds.y) ** 2)
  else:
    data_term = np.mean(np.logaddexp(0.0, -ds.y * z))
  return float(data_term + 0.5 * ds.l2 * w @ w + ds.penalty_strength * np.sum(np.abs(w)))


@pytest.mark.parametrize("name, beta", [("diabetes", 1.0), ("breast_cancer", 0.25), ("log1", 0.25)])
def test_smoothness_is_curvature_times_mean_square(name, beta):
  ds = data.get(name)
  s = ds.smoothness()
  assert s.dtype == np.float64 and s.shape == (ds.p,)
  np.testing.assert_allclose(s, beta * np.mean(ds.X**2, axis=0), rtol=1e-13)
  np.testing.assert_allclose(s, beta, rtol=1e-12)  # standardized columns: M_j = beta.


def test_to_problem_declares_the_smoothness_explicitly(diabetes, monkeypatch):
  calls = []
  real = problem_lib.make_problem

  def spy(*args, **kwargs):
    calls.append(kwargs)
    return real(*args, **kwargs)

  monkeypatch.setattr(problem_lib, "make_problem", spy)
  problem = diabetes.to_problem(np.float32)
  (kwargs,) = calls
  assert kwargs["smoothness"].dtype == np.float64  # computed in float64, cast by make_problem.
  np.testing.assert_array_equal(kwargs["smoothness"], diabetes.smoothness())
  assert kwargs["penalty"] is diabetes.penalty and kwargs["l2"] == diabetes.l2
  assert isinstance(problem, dpgcd_jax.Problem)
  assert problem.XT.dtype == problem.y.dtype == problem.smoothness.dtype == jnp.float32
  np.testing.assert_allclose(problem.smoothness, diabetes.smoothness(), rtol=1e-6)
  assert problem.loss is losses.squared and problem.penalty is diabetes.penalty


@pytest.mark.parametrize("name", ["diabetes", "breast_cancer", "log2"])
def test_to_problem_float64_objective_matches_numpy(name):
  ds = data.get(name)
  w = np.random.default_rng(0).normal(size=ds.p) / np.sqrt(ds.p)
  with jax.enable_x64(True):
    problem = ds.to_problem(np.float64)
    assert problem.XT.dtype == jnp.float64
    np.testing.assert_allclose(problem.smoothness, ds.smoothness(), rtol=0)
    value = float(dpgcd_jax.objective(problem, jnp.asarray(w)))
  np.testing.assert_allclose(value, _numpy_objective(ds, w), rtol=1e-12)


def test_to_problem_float32_objective_matches_numpy(diabetes):
  w = np.random.default_rng(1).normal(size=diabetes.p)
  problem = diabetes.to_problem(np.float32)
  value = float(dpgcd_jax.objective(problem, jnp.asarray(w, jnp.float32)))
  np.testing.assert_allclose(value, _numpy_objective(diabetes, w), rtol=1e-5)


def test_float64_without_x64_is_a_clear_error(diabetes):
  with jax.enable_x64(False):
    with pytest.raises(ValueError, match=r"dtype=float64 .*enable_x64"):
      diabetes.to_problem(np.float64)
    assert diabetes.to_problem(np.float32).XT.dtype == jnp.float32


@pytest.mark.parametrize("dtype, words", [(np.int32, "dtype=int32"), ("nope", "dtype='nope'")])
def test_bad_dtype_is_named(diabetes, dtype, words):
  with pytest.raises(ValueError, match=words):
    diabetes.to_problem(dtype)


def test_kwargs_are_forwarded_and_can_replace_the_smoothness(diabetes):
  public = np.full(diabetes.p, 2.0)
  problem = diabetes.to_problem(np.float32, smoothness=public)
  np.testing.assert_array_equal(problem.smoothness, 2.0)


def test_custom_loss_without_curvature_needs_explicit_smoothness():
  x = np.random.default_rng(0).normal(size=(10, 3))
  ds = data.Dataset("custom", x, x[:, 0], losses.custom_loss(lambda w, xi, yi: (xi @ w - yi) ** 2))
  with pytest.raises(ValueError, match="curvature"):
    ds.to_problem(np.float32)
  assert ds.to_problem(np.float32, smoothness=np.ones(3)).num_features == 3


def test_with_lambda_fraction_takes_a_penalty_factory(diabetes):
  l2 = diabetes.with_lambda_fraction(0.5, penalties.L2)
  assert isinstance(l2.penalty, penalties.L2)
  np.testing.assert_allclose(l2.penalty_strength, 0.5 * diabetes.lambda_max)
  net = diabetes.with_lambda_fraction(0.1, functools.partial(penalties.ElasticNet, l1_ratio=0.5))
  assert isinstance(net.penalty, penalties.ElasticNet) and net.penalty.l1_ratio == 0.5
  assert net.with_lambda_fraction(0.2).penalty.l1_ratio == 0.5  # keeps the penalty's other fields.
  ridge = data.get("log1")
  with pytest.raises(ValueError, match="penalty="):
    ridge.with_lambda_fraction(0.1)
  assert isinstance(ridge.with_lambda_fraction(0.1, penalties.L1).penalty, penalties.L1)


def test_sparse_dataset_to_problem_keeps_sparse_features():
  ds = data.dorothea_synth(0, n=60, p=500, density=0.05)
  assert ds.is_sparse
  problem = ds.to_problem(np.float32)
  assert problem_lib.is_sparse(problem)
  np.testing.assert_allclose(problem.smoothness, ds.smoothness(), rtol=1e-6)
  dense = data.Dataset(ds.name, ds.X.toarray(), ds.y, ds.loss, ds.penalty)
  np.testing.assert_allclose(dense.to_problem(np.float32).smoothness, ds.smoothness(), rtol=1e-6)
  np.testing.assert_allclose(ds.smoothness(), 0.25 * np.asarray(ds.X.power(2).mean(axis=0)).ravel(), rtol=1e-13)
  assert sparse.issparse(ds.X)
