"""Float32 scores and released gradients meet the widened sensitivities of `dpgcd_jax.solvers.greedy`.

With a large public `l2 w_j`, `g_j = mean + l2 w_j` rounds in steps of `ulp(l2 w_j)`, far above
`Delta_bar = 2 C / (n sqrt(M))`: two neighbours' scores then differ by several `Delta_bar`
(the exact sensitivity is exceeded), and only the widened `score_sensitivity` /
`update_sensitivity` covers them. Covered here: GS-s (the default) and GS-r on every built-in
penalty, the released coordinate gradient, and DP-IHT / two-stage through their steps.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.solvers import greedy

PENALTIES = {
    "zero": dg.penalties.Zero(),
    "l1": dg.penalties.L1(0.05),
    "l2": dg.penalties.L2(0.3),
    "elastic_net": dg.penalties.ElasticNet(0.05, 0.5),
    "box": dg.penalties.Box(-2e5, 2e5),
}


@pytest.fixture(autouse=True)
def float32_mode():
  with jax.enable_x64(False):
    yield


def _neighbours(seed, penalty, n=1000, p=6, l2=1.0):
  """Worst-case replace-one neighbours (record 0's clipped gradient from -C to +C in every
  coordinate: a target of -+1e9), features in [-1, 1] (`M_j = 1` declared), a ridge `l2` that
  makes `l2 w_j` large at the iterates below."""
  rng = np.random.default_rng(seed)
  X = rng.uniform(-1.0, 1.0, size=(n, p)).astype(np.float32)
  y = rng.uniform(-1.0, 1.0, size=n).astype(np.float32)
  X2, y2 = X.copy(), y.copy()
  X2[0], y2[0] = 1.0, -1e9
  X[0], y[0] = 1.0, 1e9
  return [dg.make_problem(a, b, "squared", l2=l2, penalty=penalty, smoothness=np.ones(p, np.float32))
          for a, b in ((X, y), (X2, y2))]


@jax.jit
def _gradient(problem, w, thresholds):
  return kernels.clipped_gradient(problem, w, kernels.init_margins(problem, w), thresholds)


def _gradients(problems, w, thresholds):
  return [_gradient(pb, w, thresholds) for pb in problems]


@pytest.mark.parametrize("penalty", PENALTIES)
@pytest.mark.parametrize("rule", ["gs-s", "gs-r"])
def test_float32_scores_exceed_delta_bar_and_meet_the_widened_sensitivity(rule, penalty):
  exact_ratio, widened_ratio = 0.0, 0.0
  for seed in range(3):
    problems = _neighbours(seed, PENALTIES[penalty])
    M = problem_lib.coordinate_smoothness(problems[0])
    thresholds = clipping.coordinate_thresholds(1.0, M)
    rng = np.random.default_rng(seed)
    for _ in range(20):
      # w_j up to 1e5 (l2 w_j too: ulp(1e5) = 2^-7, 3.9 x Delta_bar = 2 / 1000), at random offsets
      w = jnp.asarray(rng.uniform(-1e5, 1e5, size=M.shape) * (rng.uniform(size=M.shape) < 0.8), jnp.float32)
      g = _gradients(problems, w, thresholds)
      scores = [np.asarray(greedy.RULES[rule](gi, w, M, pb.penalty)) for gi, pb in zip(g, problems, strict=True)]
      gap = float(np.max(np.abs(scores[0] - scores[1])))
      exact = greedy.selection_sensitivity(thresholds, M, problems[0].num_examples)
      widened = greedy.score_sensitivity(rule, thresholds, M, problems[0].num_examples, w,
                                         problems[0].l2 * w, problems[0].penalty)
      exact_ratio = max(exact_ratio, gap / float(exact))
      widened_ratio = max(widened_ratio, gap / float(widened))
  assert exact_ratio > 1.5  # the rounding does exceed the exact-arithmetic bound: the test can fail
  assert widened_ratio <= 1.0


def test_the_released_coordinate_gradient_meets_the_update_sensitivity():
  problems = _neighbours(0, PENALTIES["zero"])
  M = problem_lib.coordinate_smoothness(problems[0])
  thresholds = clipping.coordinate_thresholds(1.0, M)
  rng = np.random.default_rng(1)
  exact_ratio, widened_ratio = 0.0, 0.0
  for _ in range(20):
    w = jnp.asarray(rng.uniform(-1e5, 1e5, size=M.shape), jnp.float32)
    g = _gradients(problems, w, thresholds)
    gap = np.abs(np.asarray(g[0]) - np.asarray(g[1]))
    exact = np.asarray(clipping.mean_sensitivity(thresholds, problems[0].num_examples))
    widened = np.asarray(greedy.update_sensitivity(thresholds, problems[0].num_examples, problems[0].l2 * w))
    exact_ratio = max(exact_ratio, float(np.max(gap / exact)))
    widened_ratio = max(widened_ratio, float(np.max(gap / widened)))
  assert exact_ratio > 1.5 and widened_ratio <= 1.0


@pytest.mark.parametrize("solver", ["dp_iht", "two_stage"])
def test_peeling_sensitivities_are_widened_in_the_float_path(solver, monkeypatch):
  """The float (Gumbel) peeling of DP-IHT and two-stage receives a sensitivity above the exact
  `Delta_u` by the roundings' public size: spy on the sensitivity passed to `peeling.peel`."""
  from dpgcd_jax import peeling
  from dpgcd_jax.solvers import base
  from dpgcd_jax.solvers import dp_iht
  from dpgcd_jax.solvers import two_stage

  problem = _neighbours(0, PENALTIES["zero"])[0]
  seen = []
  real_peel = peeling.peel
  monkeypatch.setattr(peeling, "peel", lambda key, scores, s, b, sens: seen.append(sens) or real_peel(
      key, scores, s, b, sens))
  w = jnp.full(problem.num_features, 1e5, jnp.float32)
  root_M = float(jnp.sqrt(problem_lib.coordinate_smoothness(problem)[0]))  # M_j = 1 + l2 = 2
  exact = 2.0 / (problem.num_examples * root_M)  # Delta_bar, C_j = 1 (DP-IHT: step size 1)
  if solver == "dp_iht":
    params = base.cast_params(dp_iht.SOLVER, problem, dp_iht.Params(1.0, 1.0, 1.0, 1.0))
    dp_iht.step(jax.random.key(0), dp_iht.State(w, kernels.init_margins(problem, w)), problem, params,
                sparsity=2)
  else:
    params = base.cast_params(two_stage.SOLVER, problem, two_stage.Params(1.0, 1.0, 1.0, 1.0, 1.0))
    state = two_stage.State(w, kernels.init_margins(problem, w), jnp.zeros(problem.num_features, bool))
    two_stage.select_support(jax.random.key(0), problem, state, params, sparsity=2)
  (sensitivity,) = seen
  # l2 w = 1e5: every widening adds k eps 1e5 / sqrt(M_j) at least (k >= 2), 8x the exact Delta_bar
  assert float(sensitivity) > exact + 2 * float(jnp.finfo(jnp.float32).eps) * 1e5 / root_M * 0.99


def test_gs_q_is_refused_with_noise_and_fails_closed_when_traced():
  """GS-q's float score is not covered (greedy's module docstring): a private run, fit or
  transformation refuses it by name; a traced nonzero multiplier releases NaN; without noise
  it runs."""

  problem = _neighbours(0, dg.penalties.L1(0.05), n=200)[0]
  params = dg.dp_gcd.Params(0.5, 1.0, 2.0, 2.0)
  with pytest.raises(ValueError, match="rule"):
    dg.dp_gcd.run(problem, jax.random.key(0), params, passes=3, rule="gs-q")
  with pytest.raises(ValueError, match="rule"):
    dg.dp_gcd.fit(problem, jax.random.key(0), epsilon=1.0, delta=1e-6, passes=3, rule="gs-q")
  with pytest.raises(ValueError, match="rule"):
    dg.dp_greedy_coordinate(np.ones(6), key=jax.random.key(0), clip=1.0, selection_noise=2.0, update_noise=2.0,
                            rule="gs-q")
  noise_free = dg.dp_greedy_coordinate(np.ones(6), key=jax.random.key(0), clip=1.0, selection_noise=0.0,
                                       update_noise=0.0, rule="gs-q")
  grads = jnp.asarray(np.random.default_rng(0).normal(size=(20, 6)) * 0.1, jnp.float32)
  w = jnp.zeros(6, jnp.float32)
  updates, _ = noise_free.update(grads, noise_free.init(w), w)
  assert np.count_nonzero(np.asarray(updates)) == 1 and np.all(np.isfinite(np.asarray(updates)))  # it steps
  traced = jax.vmap(lambda b: dg.dp_gcd.run(problem, jax.random.key(0), dg.dp_gcd.Params(0.5, 1.0, b, b),
                                            passes=3, rule="gs-q").w)(jnp.asarray([0.0, 2.0]))
  assert np.all(np.isfinite(np.asarray(traced[0]))) and np.any(np.isnan(np.asarray(traced[1])))  # a NaN model
