"""The algorithms of the experiments: each solver's own record, its grid and its fixed options.

Passes are counted as in the paper: one DP-GCD iteration = `p` DP-CD steps = one DP-SGD
epoch (`n / batch_size` steps). Step sizes of the coordinate methods are in units of
`1 / M_j` (above 1 is legitimate: `M_j` bounds the curvature, it is not the curvature);
clips are per coordinate (`clip_scale`).

One path from a budget to a run, the library's: an algorithm is a solver module and the
hyperparameters its grid does not search (mechanisms, sparsity, batch size). Its noise is
calibrated at epsilon = 1 on the solver's own [`Plan`][dpgcd_jax.solvers.budget.Plan]
(`private_plan`, the one every `fit` uses) by the library's one calibration,
[`dpgcd_jax.solvers.budget.calibrated`][]; its ledger at given multipliers is the plan's
`ledger_of` of the very `Params` the grid runs; its step and its run are the solver's `step`
and [`dpgcd_jax.solvers.base.run`][] with the plan's options. Nothing about noise or accounting
is written here.

The high-dimensional toolbox (DP-FW, DP-IHT, two-stage) is here too, in the full preset's paper-protocol
columns (`runner.FULL`; not in the quick preset nor the end-to-end private column): `dp_fw` (DP Frank-Wolfe: its
*step* axis is the l1 radius `r`, public, absolute), `dp_iht` (private hard thresholding:
step in units of `1 / M_j`, sparsity fixed a priori at `TOOLBOX_SPARSITY`, the peeling share of
its `fit`'s default) and `two_stage` (peeling of `TOOLBOX_SPARSITY` columns, then DP-GCD Gumbel +
Gaussian on them, the support share of its `fit`'s default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.experiments import grids
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import dp_cd
from dpgcd_jax.solvers import dp_fw
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import dp_iht
from dpgcd_jax.solvers import dp_sgd
from dpgcd_jax.solvers import two_stage

EPSILON = 1.0


def _same_problem(problem: problem_lib.Problem) -> problem_lib.Problem:
  return problem


def _no_options(problem: problem_lib.Problem) -> dict[str, Any]:
  del problem
  return {}


@dataclasses.dataclass(frozen=True)
class Algorithm:
  """How to run one algorithm on a grid: a solver module and what its grid does not search.

  Attributes:
    name: registry name.
    label: legend / table label.
    solver: the solver module (`Params`, `init`, `step`, `SOLVER` with its `private_plan`).
    noises: the `Params` fields of the noise multipliers a run draws, in the order of the
      calibrated `noise` (a scalar when there is one).
    step_sizes: the initial step-size axis (units of `1 / M_j` for coordinate methods; DP-FW:
      the l1 radius).
    clips: the initial clip axis, per coordinate (see `clip_scale`).
    options: `problem -> dict`, the solver's fixed hyperparameters (its `private_plan`'s keyword
      arguments: mechanisms, sparsity, batch size).
    problem_of: `problem -> problem` the solver runs on (DP-FW: the l1 penalty as constraint).
    shared_keys: the grid points of one seed share the key (DP-SGD; see the module docstring).
    l2_clip: the solver clips the l2 norm of the whole gradient (DP-SGD), not each coordinate: a grid
      clip `c` per coordinate is `c sqrt(p)` for it ([`clip_scale`][dpgcd_jax.experiments.algorithms.clip_scale]).
  """

  name: str
  label: str
  solver: Any
  noises: tuple[str, ...]
  step_sizes: grids.Axis
  clips: grids.Axis
  options: Callable[[problem_lib.Problem], dict[str, Any]] = _no_options
  problem_of: Callable[[problem_lib.Problem], problem_lib.Problem] = _same_problem
  shared_keys: bool = False
  l2_clip: bool = False

  @property
  def dense_only(self) -> bool:
    """The solver rejects sparse features."""
    return bool(self.solver.SOLVER.dense_only)

  def plan(self, problem: problem_lib.Problem, passes: int) -> budget.Plan:
    """The solver's [`Plan`][dpgcd_jax.solvers.budget.Plan] for one run of `passes` at epsilon = 1."""
    return self.solver.private_plan(self.problem_of(problem), passes=passes, epsilon=EPSILON, **self.options(problem))

  def make_params(self, steps: Any, clips: Any, noise: Any) -> Any:
    """`Params` with step size (DP-FW: radius) `steps`, clip `clips` and the multipliers `noise`."""
    values = noise if len(self.noises) > 1 else (noise,)
    return self.solver.Params(steps, clips, **dict(zip(self.noises, values, strict=True)))

  def calibrate(self, problem: problem_lib.Problem, delta: float, passes: int) -> Any:
    """The multipliers of one run at `(EPSILON, delta)`: the plan's ledger, the one calibration."""
    plan = self.plan(problem, passes)
    scale = budget.calibrated(plan.ledger, EPSILON, delta, key=("experiments",) + plan.cache_key)[0]
    params = plan.params_at(scale)
    noise = tuple(float(getattr(params, f)) for f in self.noises)
    return noise if len(noise) > 1 else noise[0]

  def ledger(self, problem: problem_lib.Problem, noise: Any, passes: int) -> ledger_lib.Ledger:
    """The ledger of one run of `passes` at the multipliers `noise` (the plan's `ledger_of`)."""
    return self.plan(problem, passes).ledger_of(self.make_params(1.0, 1.0, noise))

  def init(self, problem: problem_lib.Problem) -> Any:
    """The solver's initial state."""
    return self.solver.init(self.problem_of(problem))

  def steps_per_pass(self, problem: problem_lib.Problem) -> int:
    """The solver's steps in one pass over `problem`."""
    return self.solver.SOLVER.steps_per_pass(self.problem_of(problem), **self.plan(problem, 1).options)

  def make_step(self, problem: problem_lib.Problem) -> Callable[[jax.Array, Any, Any], Any]:
    """`(key, state, params) -> state`: one step of the solver with the plan's options."""
    run_on = self.problem_of(problem)
    record = self.solver.SOLVER
    options = record.step_options(run_on, **self.plan(problem, 1).options)
    return lambda key, state, params: record.step(key, state, run_on, params, **options)[0]

  def run(self, problem: problem_lib.Problem, key: jax.Array, params: Any, passes: int) -> base.Result:
    """The solver's run ([`dpgcd_jax.solvers.base.run`][]) with the plan's options."""
    return base.run(self.solver.SOLVER, self.problem_of(problem), key, params, passes=passes,
                    **self.plan(problem, passes).options)


def sgd_batch_size(problem: problem_lib.Problem) -> int:
  """Expected batch size of DP-SGD: about 100 steps per pass (at least 1 example)."""
  return max(1, problem.num_examples // 100)


def clip_scale(algorithm: Algorithm, problem: problem_lib.Problem) -> float:
  """Solver clip per unit of grid clip: 1 for coordinate methods, `sqrt(p)` for DP-SGD.

  Grid clips are per coordinate. A scalar clip of DP-GCD / DP-CD is `C_j = c sqrt(M_j /
  beta)` (`= c` for standardized columns); DP-SGD clips the l2 norm of the whole gradient,
  `c sqrt(p)` for `p` coordinates of size `c`.
  """
  return float(np.sqrt(problem.num_features)) if algorithm.l2_clip else 1.0


# ------------------------------------------------------------------------- the high-dimensional toolbox

TOOLBOX_SPARSITY = 10
"""A priori sparsity `s` of DP-IHT and of the two-stage support (capped at `p`).

Fixed before seeing the data, not searched (the grids are two-dimensional): 10 is the size of
the quasi-sparsity measure (top-10 share of `||w*||^2`) and of `square`'s true support."""
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


def _mechanisms(selection: str, update: str) -> Callable[[problem_lib.Problem], dict[str, Any]]:
  return lambda problem: dict(selection=selection, update=update)


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
        "dp_gcd", "DP-GCD (paper: Laplace + Laplace)", dp_gcd, ("selection_noise", "update_noise"),
        GCD_STEPS, COORDINATE_CLIPS, options=_mechanisms("laplace", "laplace")),
    "dp_gcd_gumbel": Algorithm(
        "dp_gcd_gumbel", "DP-GCD (ours: Gumbel + Gaussian)", dp_gcd, ("selection_noise", "update_noise"),
        GCD_STEPS, COORDINATE_CLIPS, options=_mechanisms("gumbel", "gaussian")),
    "dp_cd": Algorithm("dp_cd", "DP-CD", dp_cd, ("noise",), CD_STEPS, COORDINATE_CLIPS),
    "dp_sgd": Algorithm(
        "dp_sgd", "DP-SGD", dp_sgd, ("noise",), SGD_STEPS, COORDINATE_CLIPS,
        options=lambda problem: dict(batch_size=sgd_batch_size(problem)), shared_keys=True, l2_clip=True),
    "dp_fw": Algorithm(
        "dp_fw", "DP-FW (l1 ball)", dp_fw, ("selection_noise",), FW_RADII, COORDINATE_CLIPS,
        options=lambda problem: dict(radius=1.0), problem_of=fw_problem),  # the radius: the grid's step axis
    "dp_iht": Algorithm(
        "dp_iht", f"DP-IHT (s = {TOOLBOX_SPARSITY})", dp_iht, ("selection_noise", "update_noise"), IHT_STEPS,
        COORDINATE_CLIPS, options=lambda problem: dict(sparsity=toolbox_sparsity(problem))),
    "two_stage": Algorithm(
        "two_stage", f"two-stage (s = {TOOLBOX_SPARSITY}, then DP-GCD Gumbel + Gaussian)", two_stage,
        ("support_noise", "selection_noise", "update_noise"), GCD_STEPS, COORDINATE_CLIPS,
        options=lambda problem: dict(sparsity=toolbox_sparsity(problem), selection=TWO_STAGE_MECHANISMS[0],
                                     update=TWO_STAGE_MECHANISMS[1])),
}
