"""The high-dimensional benchmark's generated sets (`dpgcd_jax.experiments.high_dim`)."""

import numpy as np
import pytest
from scipy import sparse

from dpgcd_jax.experiments import high_dim


def test_sets_are_deterministic_and_of_their_kind():
  for name in high_dim.SETS:
    X, y = high_dim.make_set(name, 3, 300, 40)
    X2, y2 = high_dim.make_set(name, 3, 300, 40)
    assert X.shape == (300, 40) and set(np.unique(y)) <= {0, 1}
    dense = lambda a: a.toarray() if sparse.issparse(a) else a
    np.testing.assert_array_equal(dense(X), dense(X2))
    np.testing.assert_array_equal(y, y2)
    if name in ("binary", "text"):
      assert sparse.issparse(X) and set(np.unique(X.data)) == {1.0}


def test_feature_scales_are_the_generator_truth():
  X, _ = high_dim.make_set("dense", 5, 4000, 60)
  scales = high_dim.feature_scales("dense", 5, 60)
  assert scales.min() >= 0.1 and scales.max() <= 10.0 and scales.max() / scales.min() > 5
  np.testing.assert_allclose(X.std(axis=0), scales, rtol=0.08)  # 4000 rows: sd within 8%
  np.testing.assert_array_equal(high_dim.feature_scales("dense_std", 5, 60), np.ones(60))
  with pytest.raises(ValueError, match="name"):
    high_dim.feature_scales("binary", 5, 60)
  with pytest.raises(ValueError, match="name"):
    high_dim.make_set("images", 5, 10, 6)


def test_run_support_column_is_the_true_support_reference():
  """`high_dim.run`'s NOT-private "support" column: logistic regression on the generator's true support
  learns the labels (far above the majority) and only the requested columns are computed."""
  row = high_dim.run("binary", n=3000, p=200, seed=1, columns=("majority", "support"), test_size=2000)
  assert set(row) == {"set", "n", "p", "seed", "epsilon", "majority", "support"}
  assert row["support"] > row["majority"] + 0.15
