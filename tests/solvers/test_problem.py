"""`dpgcd_jax.problem`: losses, smoothness constants and problem validation."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

import dpgcd_jax as dg
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.problem import DataSmoothness
from dpgcd_jax.problem import PublicSmoothness
from dpgcd_jax.problem import SmoothnessSource

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)


def _data(n=40, p=6, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p)) * rng.uniform(0.5, 2.0, size=p)
  y = np.sign(rng.normal(size=n))
  return X, y


def _hessian_diag(problem, w):
  return jnp.diag(jax.hessian(kernels.smooth_objective, argnums=1)(problem, w))


@pytest.mark.parametrize("loss", ["squared", "logistic", "huber"])
def test_builtin_smoothness_is_the_hessian_diagonal_where_curvature_peaks(loss):
  X, y = _data()
  problem = dg.make_problem(X, y, loss, l2=0.1)
  # At w = 0: logistic has phi'' = 1/4 at z = 0; Huber with |y| = 1 <= delta is quadratic.
  np.testing.assert_allclose(problem_lib.coordinate_smoothness(problem),
                             _hessian_diag(problem, jnp.zeros(6)), rtol=1e-12)


@pytest.mark.parametrize("loss", ["squared", "logistic", "huber"])
def test_builtin_smoothness_bounds_the_hessian_diagonal_everywhere(loss):
  X, y = _data()
  problem = dg.make_problem(X, y, loss)
  M = problem_lib.coordinate_smoothness(problem)
  for seed in range(5):
    w = 3.0 * jax.random.normal(jax.random.key(seed), (6,))
    assert np.all(_hessian_diag(problem, w) <= M * (1 + 1e-12))


def test_glm_loss_without_curvature_gets_its_numerical_estimate():
  X, y = _data()
  logistic_unknown = dg.glm_loss(lambda z, y: jnp.logaddexp(0.0, -y * z))
  estimated = dg.make_problem(X, y, logistic_unknown).smoothness
  np.testing.assert_allclose(estimated, dg.make_problem(X, y, "logistic").smoothness, rtol=1e-6)


def test_custom_loss_smoothness_is_the_hessian_diagonal_at_zero_and_runs_end_to_end():
  X, _ = _data()
  y = X @ np.linspace(-1.0, 1.0, 6)
  log_cosh = dg.custom_loss(lambda w, x, y: jnp.log(jnp.cosh(x @ w - y)), name="log_cosh")
  problem = dg.make_problem(X, y, log_cosh, l2=0.01)
  np.testing.assert_allclose(problem_lib.coordinate_smoothness(problem),
                             _hessian_diag(problem, jnp.zeros(6)), rtol=1e-10)
  # The estimate at w = 0 is local (log cosh'' peaks at residual 0, near the optimum): run with
  # the public bound M_j = mean_i x_ij^2 (log cosh'' <= 1), as the docs recommend.
  problem = dg.make_problem(X, y, log_cosh, l2=0.01, smoothness=np.mean(X**2, axis=0))
  params = dg.dp_gcd.Params(step_size=1.0, clip=np.inf, selection_noise=0.0, update_noise=0.0)
  result = dg.dp_gcd.run(problem, jax.random.key(0), params, passes=200, store_objective=True)
  f = result.trace.nonprivate_objective
  assert f[-1] < 0.1 * f[0]
  assert np.all(np.diff(np.asarray(f)) <= 1e-12)  # noise-free steps 1/M_j decrease f


def test_smoothed_hinge_custom_glm_loss_runs_privately():
  X, y = _data(n=200)

  def smoothed_hinge(z, y):
    m = y * z
    return jnp.where(m >= 1, 0.0, jnp.where(m <= 0, 0.5 - m, 0.5 * (1 - m) ** 2))

  problem = dg.make_problem(X, y, dg.glm_loss(smoothed_hinge, curvature=1.0))
  params = dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=2.0, update_noise=2.0)
  result = dg.dp_gcd.run(problem, jax.random.key(3), params, passes=20)
  assert np.all(np.isfinite(result.w))


@pytest.mark.parametrize("bad, match", [
    (dict(X=np.full((3, 2), np.nan)), "X"),
    (dict(y=np.array([0.0, np.inf, 1.0])), "y"),
    (dict(y=np.zeros(4)), "y.shape"),
    (dict(X=np.zeros(3)), "X to have 2"),
    (dict(l2=-1.0), "l2"),
    (dict(smoothness=np.ones(3)), "smoothness.shape"),
    (dict(smoothness=-np.ones(2)), "smoothness"),
    (dict(X=np.array([[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]), smoothness="from_data_nonprivate"),
     "all-zero columns"),
    (dict(loss="hinge"), "loss"),
    (dict(loss=dg.custom_loss(lambda w, x, y: x * w)), "scalar"),
])
def test_bad_input_raises_a_value_error_naming_it(bad, match):
  args = dict(X=np.ones((3, 2)), y=np.ones(3), loss="squared")
  args.update(bad)
  X, y, loss = args.pop("X"), args.pop("y"), args.pop("loss")
  with pytest.raises(ValueError, match=match):
    dg.make_problem(X, y, loss, **args)


@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_features_beyond_the_compute_dtype_raise_naming_x(layout):
  """`dpgcd_jax.problem.make_problem` (and `dpgcd_jax.sparse.from_matrix` under it): x = 1e300 is
  finite in float64 but infinite in the float32 the fit computes in: the same error naming X for a
  dense and a scipy.sparse X (before, the cast overflowed silently, the sparse one storing inf:
  review finding M3); with x64 on, the same X is accepted."""
  X, y = _data()
  X[3, 2] = 1e300
  X = scipy.sparse.csr_matrix(X) if layout == "sparse" else X
  with jax.enable_x64(False), pytest.raises(ValueError, match=r"Expected X to be finite in float32.*1 entries"):
    dg.make_problem(X, y, "logistic")
  assert dg.make_problem(X, y, "logistic").num_features == 6  # x64 (this module): in range
  if layout == "sparse":  # a declared bound clips the entry instead (no error that depends on the data)
    with jax.enable_x64(False):
      stored = dg.make_problem(X, y, "logistic", feature_bound=2.0).XT.vals
    assert np.isfinite(np.asarray(stored)).all() and float(np.max(np.asarray(stored))) == 2.0


def test_the_smoothness_source_is_a_type_that_says_whether_it_is_public():
  X, y = np.ones((4, 2)), np.array([1.0, -1.0, 1.0, -1.0])
  with pytest.warns(dg.PrivacyLeakWarning):
    opt_in = dg.make_problem(X, y, "logistic", smoothness="from_data_nonprivate")
  sources = {name: dg.make_problem(X, y, "logistic", **kw).smoothness_source for name, kw in (
      ("declared", dict(smoothness=np.ones(2))), ("feature_bound", dict(feature_bound=2.0)), ("data", {}))}
  sources["data_nonprivate"] = opt_in.smoothness_source
  for name, source in sources.items():
    assert source == name and repr(source) == repr(name) and str(source) == name
    assert isinstance(source, PublicSmoothness) is (name in ("declared", "feature_bound"))
    assert isinstance(source, DataSmoothness) is name.startswith("data")
  assert opt_in.smoothness_source is DataSmoothness.NONPRIVATE
  problem = dg.make_problem(X, y, "logistic", feature_bound=2.0)
  assert dataclasses.replace(problem, smoothness_source="data").smoothness_source is DataSmoothness.DATA
  with pytest.raises(ValueError, match="'public'"):
    dataclasses.replace(problem, smoothness_source="public")


@pytest.mark.parametrize("value, expected", [
    ("declared", PublicSmoothness.DECLARED), ("feature_bound", PublicSmoothness.FEATURE_BOUND),
    ("data", DataSmoothness.DATA), ("data_nonprivate", DataSmoothness.NONPRIVATE),
    (PublicSmoothness.DECLARED, PublicSmoothness.DECLARED), (DataSmoothness.NONPRIVATE, DataSmoothness.NONPRIVATE),
])
def test_a_source_built_from_its_string_has_the_type_of_its_publicness(value, expected):
  source = problem_lib.smoothness_source(value)
  assert source is expected and type(source) is type(expected)
  assert isinstance(source, SmoothnessSource)  # the alias of the two types
