"""`dpgcd_jax.penalties`: prox against brute force, subdifferential distance, validation."""

import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

PENALTIES = {
    "l1": dg.penalties.L1(0.7),
    "l2": dg.penalties.L2(1.3),
    "elastic_net": dg.penalties.ElasticNet(0.9, 0.4),
    "box": dg.penalties.Box(-0.5, 1.2),
    "non_negative": dg.penalties.non_negative(),
    "zero": dg.penalties.Zero(),
}
GRID = np.linspace(-6.0, 6.0, 240_001)


@pytest.mark.parametrize("name", PENALTIES)
@pytest.mark.parametrize("step", [0.3, 2.0])
def test_prox_is_the_brute_force_grid_minimizer(name, step):
  pen = PENALTIES[name]
  for v in [-3.1, -0.6, -0.2, 0.0, 0.25, 0.9, 2.7]:
    values = np.asarray(pen.coordinate_values(jnp.asarray(GRID))) + (GRID - v) ** 2 / (2 * step)
    brute = GRID[np.argmin(values)]
    assert abs(float(pen.prox(jnp.asarray(v), step)) - brute) < 1e-4, (name, v)


@pytest.mark.parametrize("name", PENALTIES)
def test_subdiff_distance_is_zero_exactly_at_one_dimensional_minimizers(name):
  # 1-D problem a/2 (w - c)^2 + psi(w): its minimizer is prox_{psi/a}(c); elsewhere the
  # distance must be positive.
  pen, a = PENALTIES[name], 1.7
  for c in [-2.0, -0.3, 0.1, 1.5]:
    w_star = pen.prox(jnp.asarray(c), 1.0 / a)
    assert float(pen.subdiff_distance(w_star, a * (w_star - c))) < 1e-12
    w_off = w_star + 0.05 if float(w_star) < 1.0 else w_star - 0.05
    if np.isfinite(float(pen.coordinate_values(w_off))):
      assert float(pen.subdiff_distance(w_off, a * (w_off - c))) > 1e-3


def test_per_coordinate_strengths_apply_coordinate_wise():
  pen = dg.penalties.L1(jnp.array([0.0, 1.0]))
  np.testing.assert_allclose(pen.prox(jnp.array([0.5, 0.5]), 1.0), [0.5, 0.0])
  np.testing.assert_allclose(dg.penalties.coordinate(pen, 1).prox(jnp.asarray(1.5), 1.0), 0.5)


@pytest.mark.parametrize("make, match", [
    (lambda: dg.penalties.L1(-0.1), "strength"),
    (lambda: dg.penalties.L2(np.nan), "strength"),
    (lambda: dg.penalties.ElasticNet(1.0, 1.5), "l1_ratio"),
    (lambda: dg.penalties.Box(1.0, 0.0), "lower <= upper"),
])
def test_bad_penalty_parameters_raise(make, match):
  with pytest.raises(ValueError, match=match):
    make()
