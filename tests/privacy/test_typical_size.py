"""The typical feature size (`dpgcd_jax.privacy.typical_size`): its statistic, its sensitivity, its search and its
ledger, against NumPy references."""

import jax
import numpy as np
import pytest
from scipy import sparse

from dpgcd_jax.privacy import scales
from dpgcd_jax.privacy import scales_budget
from dpgcd_jax.privacy import typical_size


def reference_sizes(X, bound):
  """`s_i` by its definition, row by row."""
  X = np.asarray(X, float)
  out = []
  for row in X:
    nonzero = row != 0
    out.append(np.mean(np.minimum(np.abs(row[nonzero]) / np.broadcast_to(bound, row.shape)[nonzero], 1.0))
               if nonzero.any() else 1.0)
  return np.array(out)


def test_the_statistic_is_the_mean_size_of_a_records_nonzero_features():
  rng = np.random.default_rng(0)
  X = rng.standard_normal((300, 7)) * (rng.random((300, 7)) < 0.4)
  X[5] = 0.0  # a record with no nonzero feature: 1
  bound = rng.uniform(0.5, 3.0, 7)
  expected = reference_sizes(X, bound)
  assert expected[5] == 1.0
  np.testing.assert_allclose(typical_size.record_sizes(X, bound), expected, rtol=1e-12)
  for matrix in (sparse.csr_array, sparse.csc_matrix):
    np.testing.assert_allclose(typical_size.record_sizes(matrix(X), bound), expected, rtol=1e-12)


def test_binary_features_under_their_bound_have_size_one_and_loose_bounds_shrink_it():
  rng = np.random.default_rng(1)
  binary = (rng.random((200, 50)) < 0.1).astype(np.float32)
  assert np.all(typical_size.record_sizes(sparse.csr_array(binary), 1.0) == 1.0)
  gaussian = rng.standard_normal((4000, 20))
  median = np.median(typical_size.record_sizes(gaussian, 10.0))
  assert abs(median - np.sqrt(2 / np.pi) / 10) < 0.01  # E|x| / B


@pytest.mark.parametrize("seed", range(5))
def test_replacing_one_record_moves_every_count_by_at_most_one(seed):
  """The search's sensitivity: `N_k = #{i : s_i <= g_k}` on neighbours differ by <= 1."""
  rng = np.random.default_rng(seed)
  X = rng.standard_normal((100, 6)) * (rng.random((100, 6)) < 0.5) * rng.uniform(0.1, 5.0, 6)
  Y = X.copy()
  Y[rng.integers(100)] = rng.standard_normal(6) * 100.0 * (rng.random(6) < 0.5)

  def counts(data):
    return np.searchsorted(np.sort(typical_size.record_sizes(data, 2.0)), typical_size.GRID, side="right")

  assert np.max(np.abs(counts(X) - counts(Y))) <= 1
  assert counts(X)[-1] == 100  # every size is at most the grid's last point, 1


def test_the_exact_search_releases_the_smallest_grid_point_holding_half_the_records():
  rng = np.random.default_rng(2)
  for scale in (0.03, 0.2, 1.0, 5.0):
    X = rng.standard_normal((501, 10)) * scale
    sizes = typical_size.record_sizes(X, 1.0)
    holding = np.searchsorted(np.sort(sizes), typical_size.GRID, side="right") >= 0.5 * sizes.size
    expected = typical_size.GRID[np.argmax(holding)]
    assert typical_size.release(jax.random.key(0), X, 1.0, 0.0) == expected


def test_the_private_release_is_near_the_median_and_fails_closed():
  rng = np.random.default_rng(3)
  X = rng.standard_normal((20000, 10))
  noise = typical_size.noise_at(0.05, 1e-9)
  median = np.median(typical_size.record_sizes(X, 4.0))
  released = [typical_size.release(jax.random.key(k), X, 4.0, noise) for k in range(5)]
  assert all(median / 2 ** 0.5 <= r <= median * 2 ** 0.5 for r in released), (median, released)
  assert typical_size.release(jax.random.key(0), X, 4.0, float("nan")) is None


def test_the_ledger_is_the_scales_search_on_five_rounds_calibrated_to_its_budget():
  noise = typical_size.noise_at(0.05, 1e-8)
  entry = typical_size.ledger(noise)
  assert entry == scales_budget.scales_ledger(noise, grid=typical_size.GRID, label=typical_size.LABEL, features=1)
  assert scales.num_rounds(typical_size.GRID) == 5
  assert entry.epsilon(1e-8) == pytest.approx(0.05, rel=1e-3)
  assert entry.epsilon(1e-8) <= 0.05 * (1 + 1e-9)


def test_the_statistic_raises_and_warns_on_nothing_the_data_holds():
  """A subnormal entry under a user's `np.seterr(all="raise")`: no data-dependent error."""
  with np.errstate(all="raise"):
    sizes = typical_size.record_sizes(np.array([[5e-324, 1.0], [0.0, 0.0]]), np.array([2.0, 1e-300]))
  np.testing.assert_array_equal(sizes, [0.5, 1.0])


def test_duplicate_sparse_entries_are_summed_as_the_runs_see_them():
  duplicated = sparse.csr_array((np.array([0.5, 0.5]), np.array([0, 0]), np.array([0, 2])), shape=(1, 3))
  assert typical_size.record_sizes(duplicated, 1.0)[0] == 1.0
  assert duplicated.data.size == 2  # the caller's matrix is left alone


def test_the_release_is_informative_only_where_its_count_noise_allows():
  noise = typical_size.noise_at(0.05, 1e-8)
  sigma = float(scales.count_sigma(noise, 1)[0])
  assert typical_size.informative(int(4 * sigma) + 1, noise)
  assert not typical_size.informative(int(4 * sigma) - 1, noise)
  assert not typical_size.informative(10**9, 1e9)  # beyond the sampler's range
