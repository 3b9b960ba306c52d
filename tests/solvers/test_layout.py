"""`dpgcd_jax.dense`, `dpgcd_jax.layout`: the estimators' feature layout: X read once, the releases on the padded
layout.

`dense.columns` builds the (P, N) transposed, clipped, padded array with the intercept row in
one pass; `layout.from_columns` makes the problem on it. Their results are checked against
NumPy and against `pad(make_problem(...))`; the releases on a padded layout against the same
releases on the unpadded data, for the same key.
"""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import numpy_reference
import pytest
import scipy.sparse

import dpgcd_jax as dg
from dpgcd_jax import dense
from dpgcd_jax import layout as layout_lib
from dpgcd_jax import sparse
from dpgcd_jax.estimators import _linear
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import scales


def _reference(X, bound, N, P, intercept):
  """NumPy: [clip(X), 1].T in float32, zero padded to (P, N)."""
  n, p = X.shape
  out = np.zeros((P, N), np.float32)
  out[:p, :n] = np.clip(X.astype(np.float32), -bound.astype(np.float32), bound.astype(np.float32)).T
  if intercept:
    out[p, :n] = 1.0
  return out


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("intercept, N, P", [(False, 1001, 37), (True, 1024, 40), (True, 1001, 38)])
def test_columns_equal_the_numpy_layout(chunked, intercept, N, P, monkeypatch):
  rng = np.random.default_rng(0)
  X = rng.normal(size=(1001, 37)) * 3  # float64: converted once to float32
  bound = rng.uniform(0.5, 4.0, 37)
  if chunked:
    monkeypatch.setattr(dense, "_DIRECT_BYTES", 0)
    monkeypatch.setattr(dense, "_CHUNK_BYTES", P * 4 * 64)  # 64 records a chunk, the last one ends at N
  XT = dense.columns(X, np.float32, bound=bound, num_examples=N, num_features=P, intercept=intercept)
  np.testing.assert_array_equal(np.asarray(XT), _reference(X, bound, N, P, intercept))
  on_device = dense.columns(jnp.asarray(X, jnp.float32), np.float32, bound=bound, num_examples=N,
                                  num_features=P, intercept=intercept)
  np.testing.assert_array_equal(np.asarray(on_device), _reference(X, bound, N, P, intercept))


def test_columns_rejects_sizes_below_the_data():
  X = np.ones((10, 3))
  with pytest.raises(ValueError, match="num_examples >= 10 and num_features >= 4"):
    dense.columns(X, np.float32, num_examples=9, intercept=True)
  with pytest.raises(ValueError, match="num_features=3"):
    dense.columns(X, np.float32, num_features=3, intercept=True)


@pytest.mark.parametrize("loss, penalty", [("logistic", None), ("squared", "l1"), ("huber", "elasticnet")])
def test_from_columns_is_pad_of_make_problem(loss, penalty):
  rng = np.random.default_rng(1)
  X = rng.normal(size=(300, 29)) * 2
  y = np.sign(X[:, 0] + 0.1) if loss == "logistic" else X[:, 0] - X[:, 1]
  bound = np.append(rng.uniform(0.5, 3.0, 29), 1.0)
  strength = np.append(np.full(29, 0.01), 0.0)
  pen = {None: None, "l1": dg.penalties.L1(strength), "elasticnet": dg.penalties.ElasticNet(strength, 0.5)}[penalty]
  expected = layout_lib.pad(dg.make_problem(np.hstack([X, np.ones((300, 1))]), y, loss, penalty=pen,
                                             feature_bound=bound), 512, 32)
  layout = dense.columns(X, np.float32, num_examples=512, num_features=32, intercept=True)
  got = layout_lib.from_columns(layout, y, loss, feature_bound=bound, num_examples=300, num_features=30,
                                 penalty=pen)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  assert (got.smoothness_source, int(got.rows), int(got.columns)) == ("feature_bound", 300, 30)


def test_from_columns_bad_input_names_the_argument():
  layout = dense.columns(np.ones((8, 3)), np.float32, num_examples=16, num_features=4)
  with pytest.raises(ValueError, match="num_examples=20"):
    layout_lib.from_columns(layout, np.ones(8), "squared", feature_bound=1.0, num_examples=20, num_features=3)
  with pytest.raises(ValueError, match="y.shape=.7,."):
    layout_lib.from_columns(layout, np.ones(7), "squared", feature_bound=1.0, num_examples=8, num_features=3)
  with pytest.raises(ValueError, match="feature_bound"):
    layout_lib.from_columns(layout, np.ones(8), "squared", feature_bound=-1.0, num_examples=8, num_features=3)


def test_the_bound_on_a_padded_statistic_is_the_unpadded_release_for_the_same_key():
  rng = np.random.default_rng(2)
  statistic = jnp.asarray(np.abs(rng.standard_cauchy(300)), jnp.float32)
  padded = jnp.pad(statistic, (0, 212))  # padded records: statistic 0
  for epsilon in (0.1, 1.0, 50.0):
    for seed in range(20):
      key = jax.random.key(seed)
      unpadded = bounds.private_feature_bound(key, statistic, epsilon)
      got = bounds.bound_at_rank(key, padded, epsilon, int(np.ceil(bounds.DEFAULT_QUANTILE * 300)), padding=212)
      assert float(got) == float(unpadded), (epsilon, seed)


def test_the_noise_free_bound_is_the_grid_quantile():
  # Independent reference: with epsilon huge the release is the smallest grid value b with
  # #{s_i <= b} >= ceil(q n) (NumPy counts on the grid). The integer noise scales stay >= 1 at
  # any epsilon (discrete Laplace of scale 1: |noise| of a few units), so the counts cross the
  # rank 450 by a wide margin: 470 records at one grid value, 30 far above it.
  rng = np.random.default_rng(3)
  statistic = np.concatenate([np.full(470, bounds.GRID[70]), bounds.GRID[100] * (1 + rng.uniform(size=30))])
  statistic = rng.permutation(statistic).astype(np.float32)
  counts = (statistic[None, :] <= bounds.GRID[:, None].astype(np.float32)).sum(axis=1)
  expected = bounds.GRID[np.argmax(counts >= np.ceil(0.9 * 500))]
  got = bounds.bound_at_rank(jax.random.key(0), jnp.pad(jnp.asarray(statistic), (0, 12)), 1e7, 450, padding=12)
  assert float(got) == pytest.approx(expected)


@pytest.mark.slow
def test_private_scales_on_a_padded_layout_are_the_unpadded_release_for_the_same_key():
  rng = np.random.default_rng(4)
  X = rng.normal(size=(700, 20)) * np.logspace(-2, 2, 20)
  unpadded = jnp.asarray(X.T, jnp.float32)
  layout = dense.columns(X, np.float32, num_examples=1024, num_features=32, intercept=True)
  padded = jax.jit(lambda key: scales.private_feature_scales(key, layout, 0.3, num_examples=700, num_features=20))
  plain = jax.jit(lambda key: scales.private_feature_scales(key, unpadded, 0.3))
  for seed in range(5):
    np.testing.assert_array_equal(np.asarray(padded(jax.random.key(seed))), np.asarray(plain(jax.random.key(seed))))


def test_padded_release_arguments_are_checked():
  layout = dense.columns(np.ones((8, 3)), np.float32, num_examples=16, num_features=4)
  with pytest.raises(ValueError, match="num_examples=17"):
    scales.private_feature_scales(jax.random.key(0), layout, 0.3, num_examples=17, num_features=3)
  with pytest.raises(ValueError, match="num_features=5"):
    scales.private_feature_scales(jax.random.key(0), layout, 0.3, num_examples=8, num_features=5)
  with pytest.raises(ValueError, match="padding=16"):
    bounds.bound_at_rank(jax.random.key(0), jnp.ones(16), 1.0, 8, padding=16)


def test_declared_bounds_whose_square_is_not_a_normal_float32_are_rejected_before_any_work():
  # Review finding: a declared bound below ~3e-39 made DP-FW's 1 / B overflow and 0 * inf wrote
  # NaN into the layout; B^2 (the smoothness) underflows from about 1e-19.
  X, y = np.ones((20, 2)), np.arange(20) % 2
  for bound in ([1e-39, 3.0], [1e-20, 3.0], [2.0**61, 1.0]):
    with pytest.raises(ValueError, match="feature_bound in .2\\^-60, 2\\^60."):
      dg.estimators.DPGCDClassifier(classes=[0, 1], feature_bound=bound, solver="dp_fw").fit(X, y)
    with pytest.raises(ValueError, match="feature_bound in .2\\^-60, 2\\^60."):
      dg.make_problem(X, y - 0.5, "squared", feature_bound=bound)


def test_dp_fw_unit_rows_stay_in_the_unit_box_for_extreme_finite_inputs():
  XT = jnp.asarray([[3e38, -3e38, 0.0, -0.0, 1e-45], [1.0, -1.0, 0.5, 2.0**-60, 7.0]], jnp.float32)
  bound = jnp.asarray([2.0**-60, 3.0], jnp.float32)
  problem = layout_lib.from_columns(XT, np.zeros(5), "squared", feature_bound=None, num_examples=5, num_features=2)
  unit = jax.jit(lambda pb: layout_lib.with_feature_bound(pb, bound, unit=True))(problem)
  np.testing.assert_array_equal(unit.smoothness, [1.0, 1.0])  # beta, bound 1
  out = np.asarray(unit.XT)
  assert np.all(np.isfinite(out)) and np.abs(out).max() <= 1.0
  np.testing.assert_array_equal(out[0, :4], [1.0, -1.0, 0.0, 0.0])
  np.testing.assert_allclose(out[1], [1 / 3, -1 / 3, 1 / 6, 2.0**-60 / 3, 1.0], rtol=1e-6)


def test_record_statistic_of_a_layout_ignores_the_intercept_and_padding():
  rng = np.random.default_rng(5)
  X = rng.normal(size=(300, 70)) * 0.1  # every |x| far below the intercept's 1: the row would dominate
  X[rng.random(X.shape) < 0.3] = 0.0  # zeros do not count
  X[7] = 0.0  # an empty record: 0
  X[8, :3] = [1e6, -3e5, 2e5]  # a few entries above the grid do not move the record's statistic
  X[9, :] = 1e6  # all of them do: inf
  layout = dense.columns(X, np.float32, num_examples=512, num_features=128, intercept=True)
  got = np.asarray(layout_lib.record_statistic(layout, jnp.asarray(70, jnp.int32)))
  np.testing.assert_array_equal(got[:300], numpy_reference.record_statistic(X))
  assert got[7] == 0 and got[9] == np.inf and 0 < got[8] < 1
  assert not got[300:].any()
  sparse_layout = sparse.from_matrix(scipy.sparse.csr_array(X))
  np.testing.assert_array_equal(np.asarray(layout_lib.record_statistic(sparse_layout, 70)), got[:300])


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")  # the raw-data diagnostics of small n
@pytest.mark.parametrize("estimator, kwargs", [
    (dg.estimators.DPGCDClassifier, dict(classes=[0, 1])),  # one released bound
    (dg.estimators.DPGCDClassifier, dict(classes=[0, 1], scaling="private")),  # per-feature scales
    (dg.estimators.DPGCDRegressor, {}),  # released bound and released target bound
])
def test_estimators_release_the_same_on_the_padded_layout(estimator, kwargs, monkeypatch):
  rng = np.random.default_rng(6)
  X = rng.normal(size=(300, 29)) * np.logspace(-1, 1, 29)
  t = X[:, 0] / 0.1 - X[:, 28] / 10 + 0.3 * rng.normal(size=300)
  y = (t > 0).astype(int) if estimator is dg.estimators.DPGCDClassifier else 5 + 3 * t
  fit = lambda: estimator(epsilon=3.0, random_state=0, **kwargs).fit(X, y)
  padded = fit()
  monkeypatch.setattr(_linear.DPGCDBase, "_layout_shape", lambda self, n, width: (n, width))
  unpadded = fit()
  np.testing.assert_array_equal(padded.feature_bound_, unpadded.feature_bound_)
  np.testing.assert_allclose(padded.coef_, unpadded.coef_, rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(padded.intercept_, unpadded.intercept_, rtol=1e-5, atol=1e-7)


PROBE = """
import gc, json, sys, numpy as np
from dpgcd_jax.estimators import DPGCDClassifier
def status(field):
  return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(field))
X = np.random.default_rng(0).standard_normal((4000, 2000), dtype=np.float32)
y = X[:, 0] > 0
fit = lambda: DPGCDClassifier(classes=[0, 1], random_state=0, max_iter=20).fit(X, y)
fit(); gc.collect()  # compiles every program of this shape: compilation memory is not counted
peaks = []
for _ in range(2):  # the smaller of two fits' peaks: the allocator's timing under load varies by ~0.3 copies
  gc.collect()
  open("/proc/self/clear_refs", "w").write("5")  # resets the peak (VmHWM) to the current RSS
  base = status("VmRSS:")
  fit()
  peaks.append((X.nbytes + status("VmHWM:") - base) / X.nbytes)
print(json.dumps(min(peaks)))
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's resettable peak RSS")
def test_an_estimator_fit_peaks_below_two_and_a_half_copies_of_x():
  # 4000 x 2000 float32 (32 MB): X, its layout (1x) and the run. Measured 2.16x; before the
  # layout (float64 copies, an hstack for the intercept, a transposed device copy, a copy in the
  # release's reductions and in the clipped gradient's blocks) 4.0x.
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300,
                       check=True)
  assert json.loads(out.stdout.strip().splitlines()[-1]) <= 2.5
