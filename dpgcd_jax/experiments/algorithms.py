"""The algorithms of the experiments: how to calibrate, step, account and grid each solver.

Passes are counted as in the paper: one DP-GCD iteration = `p` DP-CD steps = one DP-SGD
epoch (`n / batch_size` steps). Step sizes of the coordinate methods are in units of
`1 / M_j` (above 1 is legitimate: `M_j` bounds the curvature, it is not the curvature);
clips are per coordinate (`clip_scale`).

The high-dimensional toolbox (DP-FW, DP-IHT, two-stage) is here too, in the full preset's paper-protocol
columns (`runner.FULL`; not in the quick preset nor the end-to-end private column): `dp_fw` (DP Frank-Wolfe: its
*step* axis is the l1 radius `r`, public, absolute), `dp_iht` (private hard thresholding:
step in units of `1 / M_j`, sparsity fixed a priori at `TOOLBOX_SPARSITY`) and
`two_stage` (peeling of `TOOLBOX_SPARSITY` columns, then DP-GCD Gumbel + Gaussian on
them). Their noise is calibrated at epsilon = 1 on each solver module's own ledger
(`fw_ledger`, `iht_ledger`, `two_stage_ledger`) by the library's one calibration,
[`dpgcd_jax.solvers.budget.calibrated`][], with the solvers' own multiplier splits (the
defaults of their `fit`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any
from typing import TypedDict

import jax
import numpy as np

from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.experiments import grids
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import dp_cd
from dpgcd_jax.solvers import dp_fw
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import dp_iht
from dpgcd_jax.solvers import dp_sgd
from dpgcd_jax.solvers import two_stage

EPSILON = 1.0


@dataclasses.dataclass(frozen=True)
class Algorithm:
  """How to run one algorithm on a grid.

  Attributes:
    name: registry name.
    label: legend / table label.
    make_params: `(step sizes, clips, noise) -> Params` with array leaves (one per run).
    make_step: `problem -> (key, state, params) -> state`, one step of the solver (its `step`).
    init: `problem -> state`, the solver's initial state.
    steps_per_pass: `problem -> int`.
    calibrate: `(problem, delta, passes) -> noise` (the solver's multipliers at epsilon = 1).
    ledger: `(problem, noise, passes) -> Ledger` of one run with multipliers `noise`.
    step_sizes: the initial step-size axis (units of `1 / M_j` for coordinate methods).
    clips: the initial clip axis, per coordinate (see `clip_scale`).
    run: `(problem, key, params, passes) -> Result`, the solver's own entry point.
    shared_keys: the grid points of one seed share the key (DP-SGD; see the module docstring).
    dense_only: the solver rejects sparse features.
  """

  name: str
  label: str
  make_params: Callable[[Any, Any, Any], Any]
  make_step: Callable[[problem_lib.Problem], Callable[[jax.Array, Any, Any], Any]]
  init: Callable[[problem_lib.Problem], Any]
  steps_per_pass: Callable[[problem_lib.Problem], int]
  calibrate: Callable[[problem_lib.Problem, float, int], Any]
  ledger: Callable[[problem_lib.Problem, Any, int], ledger_lib.Ledger]
  step_sizes: grids.Axis
  clips: grids.Axis
  run: Callable[..., Any]
  shared_keys: bool = False
  dense_only: bool = False


def sgd_batch_size(problem: problem_lib.Problem) -> int:
  """Expected batch size of DP-SGD: about 100 steps per pass (at least 1 example)."""
  return max(1, problem.num_examples // 100)


def clip_scale(algorithm: Algorithm, problem: problem_lib.Problem) -> float:
  """Solver clip per unit of grid clip: 1 for coordinate methods, `sqrt(p)` for DP-SGD.

  Grid clips are per coordinate. A scalar clip of DP-GCD / DP-CD is `C_j = c sqrt(M_j /
  beta)` (`= c` for standardized columns); DP-SGD clips the l2 norm of the whole gradient,
  `c sqrt(p)` for `p` coordinates of size `c`.
  """
  return float(np.sqrt(problem.num_features)) if algorithm.name == "dp_sgd" else 1.0


class _Hooks(TypedDict):
  """The fields of `Algorithm` that depend on DP-GCD's mechanisms (see `_gcd`)."""

  calibrate: Callable[[problem_lib.Problem, float, int], Any]
  make_step: Callable[[problem_lib.Problem], Callable[[jax.Array, Any, Any], Any]]
  ledger: Callable[[problem_lib.Problem, Any, int], ledger_lib.Ledger]
  run: Callable[..., Any]


def _gcd(selection: str, update: str) -> _Hooks:
  def calibrate(problem, delta, passes):
    del problem
    cal = accounting.calibrate_gcd(EPSILON, delta, steps=passes, selection=selection, update=update)
    return (cal.selection_noise, cal.update_noise)

  def make_step(problem):
    return lambda key, state, params: dp_gcd.step(key, state, problem, params, selection=selection,
                                                  update=update)[0]

  def ledger(problem, noise, passes):
    del problem
    return accounting.gcd_ledger(noise[0], noise[1], steps=passes, selection=selection, update=update)

  def run(problem, key, params, passes):
    return dp_gcd.run(problem, key, params, passes=passes, selection=selection, update=update)

  return _Hooks(calibrate=calibrate, make_step=make_step, ledger=ledger, run=run)


def _sgd_steps(problem: problem_lib.Problem, passes: int) -> int:
  return passes * (problem.num_examples // sgd_batch_size(problem))


def _sgd_calibrate(problem, delta, passes):
  steps = _sgd_steps(problem, passes)
  slack = (1.0 + np.exp(EPSILON)) * steps * dp_sgd.TRUNCATION_PROBABILITY
  return baseline_accounting.calibrate_sgd(EPSILON, delta - slack, steps=steps,
                                  sampling_rate=sgd_batch_size(problem) / problem.num_examples).update_noise


def _sgd_make_step(problem):
  n = problem.num_examples
  q = sgd_batch_size(problem) / n
  X = problem.X
  return lambda key, state, params: dp_sgd.step(key, state, problem, params, sampling_rate=q,
                                                max_batch=dp_sgd.max_batch_size(n, q), X=X)[0]


def _sgd_ledger(problem, noise, passes):
  steps = _sgd_steps(problem, passes)
  q = sgd_batch_size(problem) / problem.num_examples
  slack = (1.0 + np.exp(EPSILON)) * steps * dp_sgd.TRUNCATION_PROBABILITY
  return baseline_accounting.sgd_ledger(noise, steps=steps, sampling_rate=q) + ledger_lib.Ledger.of(
      ("sampler total variation", events.DeltaSlack(slack), 1))


# ------------------------------------------------------------------------- the high-dimensional toolbox

TOOLBOX_SPARSITY = 10
"""A priori sparsity `s` of DP-IHT and of the two-stage support (capped at `p`).

Fixed before seeing the data, not searched (the grids are two-dimensional): 10 is the size of
the quasi-sparsity measure (top-10 share of `||w*||^2`) and of `square`'s true support."""
IHT_SELECTION_SHARE = 0.5  # dp_iht.fit's default zCDP share of the peeling
TWO_STAGE_SUPPORT_SHARE = 0.25  # two_stage.fit's default zCDP share of stage 1
TWO_STAGE_MECHANISMS = ("gumbel", "gaussian")  # stage 2 = the "ours" DP-GCD column


def toolbox_sparsity(problem: problem_lib.Problem) -> int:
  """`min(TOOLBOX_SPARSITY, p)`: the sparsity of DP-IHT and two-stage on `problem`."""
  return min(TOOLBOX_SPARSITY, problem.num_features)


def fw_problem(problem: problem_lib.Problem) -> problem_lib.Problem:
  """DP-FW's problem: an l1 penalty becomes the constraint (dropped from the smooth objective).

  DP-FW minimizes the smooth part `f` over `||w||_1 <= r`; for `F = f + lambda ||w||_1`
  the constrained minimizer at `r = ||w*||_1` is `w*` (Lagrangian duality), so the radius
  axis contains the penalized optimum and the relative error is measured, as for every
  column, on the penalized `F`. Other problems are unchanged (DP-FW itself rejects
  non-differentiable penalties).
  """
  if isinstance(problem.penalty, penalties.L1):
    return dataclasses.replace(problem, penalty=penalties.Zero())
  return problem


def _fw_calibrate(problem, delta, passes):
  del problem
  return budget.calibrated(lambda b: dp_fw.fw_ledger(b, passes), EPSILON, delta,
                           key=("experiments", "dp_fw", int(passes)))[0]


def _iht_noise(scale: float, sparsity: int) -> tuple[float, float]:
  return dp_iht.multipliers(scale, sparsity, IHT_SELECTION_SHARE)


def _iht_calibrate(problem, delta, passes):
  s = toolbox_sparsity(problem)
  scale = budget.calibrated(lambda k: dp_iht.iht_ledger(*_iht_noise(k, s), passes, s), EPSILON, delta,
                            key=("experiments", "dp_iht", int(passes), s, IHT_SELECTION_SHARE))[0]
  return _iht_noise(scale, s)


def _two_stage_noise(scale: float, sparsity: int, passes: int) -> tuple[float, float, float]:
  selection, update = TWO_STAGE_MECHANISMS
  return two_stage.multipliers(scale, sparsity=sparsity, passes=passes, selection=selection, update=update,
                               support_share=TWO_STAGE_SUPPORT_SHARE)


def _two_stage_ledger(problem, noise, passes):
  selection, update = TWO_STAGE_MECHANISMS
  return two_stage.two_stage_ledger(*noise, steps=passes, sparsity=toolbox_sparsity(problem), selection=selection,
                                    update=update)


def _two_stage_calibrate(problem, delta, passes):
  s = toolbox_sparsity(problem)
  scale = budget.calibrated(lambda k: _two_stage_ledger(problem, _two_stage_noise(k, s, passes), passes), EPSILON,
                            delta, key=("experiments", "two_stage", int(passes), s, TWO_STAGE_SUPPORT_SHARE))[0]
  return _two_stage_noise(scale, s, passes)


def _two_stage_make_step(problem):
  selection, update = TWO_STAGE_MECHANISMS
  s = toolbox_sparsity(problem)
  return lambda key, state, params: two_stage.step(key, state, problem, params, sparsity=s, selection=selection,
                                                   update=update)[0]


def _two_stage_run(problem, key, params, passes):
  selection, update = TWO_STAGE_MECHANISMS
  return two_stage.run(problem, key, params, passes=passes, sparsity=toolbox_sparsity(problem),
                       selection=selection, update=update)


GCD_STEPS = grids.log_axis("step_size", 10**-0.5, 100.0)
COORDINATE_CLIPS = grids.log_axis("clip", 0.01, 10**0.5)
CD_STEPS = grids.log_axis("step_size", 0.01, 10**0.5)
SGD_STEPS = grids.log_axis("step_size", 1e-4, 10**-1.5)
# Absolute l1 radii (public), 4 per decade: a DP-FW iterate is a convex combination of the few
# vertices it drew, so its scale is the radius' and a 2-per-decade axis (ratio 3.16) would cost
# it up to (1.78 - 1)^2 in relative error on a 1-sparse w*; extended like any axis.
FW_RADII = grids.log_axis("radius", 0.1, 100.0, per_decade=4)
IHT_STEPS = grids.log_axis("step_size", 0.01, 1.0)

ALGORITHMS = {
    "dp_gcd": Algorithm(
        "dp_gcd", "DP-GCD (paper: Laplace + Laplace)",
        lambda g, c, noise: dp_gcd.Params(g, c, noise[0], noise[1]), init=dp_gcd.init,
        steps_per_pass=lambda pb: 1, step_sizes=GCD_STEPS, clips=COORDINATE_CLIPS,
        **_gcd("laplace", "laplace")),
    "dp_gcd_gumbel": Algorithm(
        "dp_gcd_gumbel", "DP-GCD (ours: Gumbel + Gaussian)",
        lambda g, c, noise: dp_gcd.Params(g, c, noise[0], noise[1]), init=dp_gcd.init,
        steps_per_pass=lambda pb: 1, step_sizes=GCD_STEPS, clips=COORDINATE_CLIPS,
        **_gcd("gumbel", "gaussian")),
    "dp_cd": Algorithm(
        "dp_cd", "DP-CD",
        lambda g, c, noise: dp_cd.Params(g, c, noise),
        make_step=lambda pb: (lambda key, state, params: dp_cd.step(key, state, pb, params)[0]),
        init=dp_cd.init, steps_per_pass=lambda pb: pb.num_features,
        calibrate=lambda pb, delta, passes: baseline_accounting.calibrate_cd(
            EPSILON, delta, steps=passes * pb.num_features).update_noise,
        ledger=lambda pb, noise, passes: baseline_accounting.cd_ledger(noise, steps=passes * pb.num_features),
        step_sizes=CD_STEPS, clips=COORDINATE_CLIPS,
        run=lambda pb, k, prm, passes: dp_cd.run(pb, k, prm, passes=passes)),
    "dp_sgd": Algorithm(
        "dp_sgd", "DP-SGD",
        lambda g, c, noise: dp_sgd.Params(g, c, noise),
        make_step=_sgd_make_step,
        init=dp_sgd.init,
        steps_per_pass=lambda pb: pb.num_examples // sgd_batch_size(pb),
        calibrate=_sgd_calibrate, ledger=_sgd_ledger, step_sizes=SGD_STEPS, clips=COORDINATE_CLIPS,
        run=lambda pb, k, prm, passes: dp_sgd.run(pb, k, prm, passes=passes, batch_size=sgd_batch_size(pb)),
        shared_keys=True, dense_only=True),
    "dp_fw": Algorithm(
        "dp_fw", "DP-FW (l1 ball)",
        lambda r, c, noise: dp_fw.Params(r, c, noise),
        make_step=lambda pb: (lambda key, state, params: dp_fw.step(key, state, fw_problem(pb), params)[0]),
        init=dp_fw.init, steps_per_pass=lambda pb: 1, calibrate=_fw_calibrate,
        ledger=lambda pb, noise, passes: dp_fw.fw_ledger(noise, passes), step_sizes=FW_RADII,
        clips=COORDINATE_CLIPS, run=lambda pb, k, prm, passes: dp_fw.run(fw_problem(pb), k, prm, passes=passes)),
    "dp_iht": Algorithm(
        "dp_iht", f"DP-IHT (s = {TOOLBOX_SPARSITY})",
        lambda g, c, noise: dp_iht.Params(g, c, noise[0], noise[1]),
        make_step=lambda pb: (lambda key, state, params: dp_iht.step(
            key, state, pb, params, sparsity=toolbox_sparsity(pb))[0]),
        init=dp_iht.init, steps_per_pass=lambda pb: 1, calibrate=_iht_calibrate,
        ledger=lambda pb, noise, passes: dp_iht.iht_ledger(noise[0], noise[1], passes, toolbox_sparsity(pb)),
        step_sizes=IHT_STEPS, clips=COORDINATE_CLIPS,
        run=lambda pb, k, prm, passes: dp_iht.run(pb, k, prm, passes=passes, sparsity=toolbox_sparsity(pb))),
    "two_stage": Algorithm(
        "two_stage", f"two-stage (s = {TOOLBOX_SPARSITY}, then DP-GCD Gumbel + Gaussian)",
        lambda g, c, noise: two_stage.Params(g, c, noise[0], noise[1], noise[2]),
        make_step=_two_stage_make_step, init=two_stage.init, steps_per_pass=lambda pb: 1,
        calibrate=_two_stage_calibrate, ledger=_two_stage_ledger, step_sizes=GCD_STEPS, clips=COORDINATE_CLIPS,
        run=_two_stage_run),
}
