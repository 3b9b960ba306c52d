"""`dpgcd_jax.solvers.greedy`: every greedy score moves by at most Delta_bar when one record is replaced (DESIGN section
6)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.solvers import greedy

pytestmark = pytest.mark.float64  # tight comparisons with float64 references (closed forms, NumPy, sklearn)

PENALTIES = {
    "zero": dg.penalties.Zero(),
    "l1": dg.penalties.L1(0.05),
    "l2": dg.penalties.L2(0.3),
    "elastic_net": dg.penalties.ElasticNet(0.05, 0.5),
    "box": dg.penalties.Box(-0.2, 0.3),
}


@jax.jit
def _clipped_gradient(problem, w, thresholds):
  return kernels.clipped_gradient(problem, w, kernels.init_margins(problem, w), thresholds)


def _neighbours(loss, seed=0, n=30, p=8):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p))
  y = X @ rng.normal(size=p) + rng.normal(size=n)
  if loss == "logistic":
    y = np.where(y > 0, 1.0, -1.0)
  X2, y2 = X.copy(), y.copy()
  X2[0] = 25.0 * np.sign(rng.normal(size=p))  # an adversarial replacement of record 0
  y2[0] = -y[0] if loss == "logistic" else -40.0
  M = np.mean(X**2, axis=0)  # public smoothness, shared by both neighbours
  return [dg.make_problem(a, b, loss, smoothness=M) for a, b in ((X, y), (X2, y2))]


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("rule", list(greedy.RULES))
def test_score_sensitivity_is_at_most_delta_bar(loss, penalty, rule):
  largest_ratio = 0.0
  for seed in range(3):
    problems = [dg.make_problem(pb.X, pb.y, pb.loss, smoothness=pb.smoothness, penalty=PENALTIES[penalty])
                for pb in _neighbours(loss, seed)]
    M = problem_lib.coordinate_smoothness(problems[0])
    thresholds = clipping.coordinate_thresholds(0.5, M)
    delta_bar = greedy.selection_sensitivity(thresholds, M, problems[0].num_examples)
    rng = np.random.default_rng(seed)
    for _ in range(20):
      w = rng.normal(size=M.shape) * 0.3 * (rng.uniform(size=M.shape) < 0.6)
      w = np.asarray(problems[0].penalty.prox(jnp.asarray(w), 1.0))  # a feasible iterate
      scores = []
      for pb in problems:
        g = _clipped_gradient(pb, jnp.asarray(w), thresholds)
        scores.append(np.asarray(greedy.RULES[rule](g, jnp.asarray(w), M, pb.penalty)))
      largest_ratio = max(largest_ratio, np.max(np.abs(scores[0] - scores[1])) / float(delta_bar))
  assert largest_ratio <= 1.0 + 1e-9
  assert largest_ratio > 0.2  # the adversarial record does move the scores: the bound is not vacuous


@pytest.mark.slow
@pytest.mark.parametrize("penalty", [dg.penalties.Zero(), dg.penalties.L1(21.2),
                                     dg.penalties.ElasticNet(42.4, 0.5), dg.penalties.non_negative()])
def test_laplace_selection_probabilities_change_by_at_most_exp_2_over_b(penalty):
  # All p normalized gradients move by Delta_bar = 1 between neighbours. With l1 / elastic net
  # at w = 0 (or a box at a bound) every GS-s score can be 0 at once; adding the noise inside
  # the score would then make argmax return 0 with probabilities whose ratio grows like
  # exp(log(p) / b) (about exp(3.8) here). The mechanism must stay within exp(2 / b).
  p, b, draws = 1000, 1.0, 100_000
  w, M = jnp.zeros(p), jnp.ones(p)
  select = jax.jit(jax.vmap(
      lambda k, g: greedy.select(k, g, w, M, penalty, b, 1.0, selection="laplace", rule="gs-s"),
      in_axes=(0, None)))
  keys = jax.random.split(jax.random.key(0), draws)
  counts = [int(jnp.sum(select(keys, jnp.full(p, -u)) == 0)) for u in (16.0, 17.0)]
  # log-ratio of the two frequencies, with a 4-sigma allowance for sampling error.
  slack = 4 * np.sqrt(1 / max(counts[0], 1) + 1 / max(counts[1], 1))
  assert abs(np.log(max(counts[0], 1) / max(counts[1], 1))) <= 2 / b + slack, counts


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["squared", "logistic", "huber"])
@pytest.mark.parametrize("clip", [0.05, 5.0])  # every term clipped / none clipped
def test_derivative_clipping_moves_each_coordinate_by_at_most_2_c_b_over_n(loss, clip):
  # Derivative clipping (GLM, |x_ij| <= B_j): |clip(phi'_i) x_ij| <= c B_j, so g_j moves by at most
  # 2 c B_j / n = 2 C_j / n (scalar clip rule, l2 = 0) when one record is replaced.
  B = np.linspace(0.5, 3.0, 8)
  rng = np.random.default_rng(1)
  largest = 0.0
  for seed in range(3):
    X, y = _neighbours("logistic" if loss == "logistic" else "squared", seed)[0].X, None
    X = np.asarray(X)
    y = np.sign(X[:, 0]) if loss == "logistic" else 3.0 * X[:, 0] + np.random.default_rng(seed).normal(size=30)
    X2, y2 = X.copy(), y.copy()
    X2[0] = 1e3 * np.sign(rng.normal(size=8))  # clipped to +-B_j by make_problem
    y2[0] = -y[0] if loss == "logistic" else -1e3
    problems = [dg.make_problem(a, b, loss, feature_bound=B) for a, b in ((X, y), (X2, y2))]
    M = problem_lib.coordinate_smoothness(problems[0])
    thresholds = clipping.coordinate_thresholds(clip, M, problems[0].curvature)
    np.testing.assert_allclose(thresholds, clip * B, rtol=1e-6)  # C_j = c B_j
    gradient = jax.jit(lambda pb, w, c: kernels.clipped_gradient(pb, w, kernels.init_margins(pb, w), c,
                                                                     "derivative"))
    for _ in range(10):
      w = jnp.asarray(rng.normal(size=8) * 0.5)
      g = [gradient(pb, w, thresholds) for pb in problems]
      gap = np.abs(np.asarray(g[0]) - np.asarray(g[1]))
      largest = max(largest, float(np.max(gap / (2 * clip * B / 30))))
      assert np.all(gap <= np.asarray(clipping.mean_sensitivity(thresholds, 30)))
  # The replaced record does move the gradient (|phi'| <= 1 for logistic and Huber(1): c = 5 is inactive).
  assert largest > (0.15 if clip == 5.0 and loss != "squared" else 0.3)


def test_derivative_clipping_is_x_transpose_clipped_derivative_and_refused_without_a_bound():
  rng = np.random.default_rng(0)
  X, y = rng.normal(size=(50, 6)), rng.choice([-1.0, 1.0], size=50)
  problem = dg.make_problem(X, y, "logistic", feature_bound=1.5)
  w = jnp.asarray(rng.normal(size=6))
  thresholds = clipping.coordinate_thresholds(0.2, problem_lib.coordinate_smoothness(problem), problem.curvature)
  g = kernels.clipped_gradient(problem, w, kernels.init_margins(problem, w), thresholds, "derivative")
  Xc = np.clip(X, -1.5, 1.5)
  dphi = -y / (1 + np.exp(y * (Xc @ np.asarray(w))))
  # A NumPy reference of the factor grids: x on 2^-12 (1.5 < 2^1: 2^(1 - 13)), the derivative on
  # 2^-15 (its clip c = 0.2 (1 - 2^-20) < 2^-2), each rounded and clipped to the bound's floor.
  c = 0.2 * (1 - 2.0**-20)
  v = np.clip(np.round(Xc * 2.0**12), -np.floor(1.5 * 2.0**12), np.floor(1.5 * 2.0**12))
  u = np.clip(np.round(dphi * 2.0**15), -np.floor(c * 2.0**15), np.floor(c * 2.0**15))
  np.testing.assert_array_equal(g, (v.T @ u) * 2.0**-27 / 50)
  # ... which is X^T clip(phi') / n up to the grids' rounding (half a step of each factor)
  np.testing.assert_allclose(g, Xc.T @ np.clip(dphi, -0.2, 0.2) / 50, rtol=0, atol=2.0**-13 * 0.2 + 2.0**-16 * 1.5)
  with pytest.raises(ValueError, match="clipping_mode='derivative'"):
    kernels.check_clipping_mode(dg.make_problem(X, y, "logistic", smoothness=np.ones(6)), "derivative")
  with pytest.raises(ValueError, match="clipping_mode='per-example'"):
    kernels.check_clipping_mode(problem, "per-example")
  with pytest.raises(ValueError, match="clipping_mode='derivative'"):
    dg.dp_gcd.run(dg.make_problem(X, y, "logistic", smoothness=np.ones(6)), jax.random.key(0),
                  dg.dp_gcd.Params(clip=1.0), passes=2, clipping_mode="derivative")
