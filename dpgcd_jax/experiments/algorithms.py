"""The algorithms of the experiments: how to calibrate, step, account and grid each solver.

Passes are counted as in the paper: one DP-GCD iteration = ``p`` DP-CD steps = one DP-SGD
epoch (``n / batch_size`` steps). Step sizes of the coordinate methods are in units of
``1 / M_j`` (above 1 is legitimate: ``M_j`` bounds the curvature, it is not the curvature);
clips are per coordinate (:func:`clip_scale`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any
from typing import TypedDict

import jax
import numpy as np

from dpgcd_jax import problem as problem_lib
from dpgcd_jax.experiments import grids
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import dp_cd
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import dp_sgd

EPSILON = 1.0


@dataclasses.dataclass(frozen=True)
class Algorithm:
  """How to run one algorithm on a grid.

  Attributes:
    name: registry name.
    label: legend / table label.
    make_params: ``(step sizes, clips, noise) -> Params`` with array leaves (one per run).
    make_step: ``problem -> (key, state, params) -> state``, one step of the solver (its ``step``).
    init: ``problem -> state``, the solver's initial state.
    steps_per_pass: ``problem -> int``.
    calibrate: ``(problem, delta, passes) -> noise`` (the solver's multipliers at epsilon = 1).
    ledger: ``(problem, noise, passes) -> Ledger`` of one run with multipliers ``noise``.
    step_sizes: the initial step-size axis (units of ``1 / M_j`` for coordinate methods).
    clips: the initial clip axis, per coordinate (see :func:`clip_scale`).
    run: ``(problem, key, params, passes) -> Result``, the solver's own entry point.
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
  """Solver clip per unit of grid clip: 1 for coordinate methods, ``sqrt(p)`` for DP-SGD.

  Grid clips are per coordinate. A scalar clip of DP-GCD / DP-CD is ``C_j = c sqrt(M_j /
  beta)`` (``= c`` for standardized columns); DP-SGD clips the l2 norm of the whole gradient,
  ``c sqrt(p)`` for ``p`` coordinates of size ``c``.
  """
  return float(np.sqrt(problem.num_features)) if algorithm.name == "dp_sgd" else 1.0


class _Hooks(TypedDict):
  """The fields of :class:`Algorithm` that depend on DP-GCD's mechanisms (see :func:`_gcd`)."""

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


GCD_STEPS = grids.log_axis("step_size", 10**-0.5, 100.0)
COORDINATE_CLIPS = grids.log_axis("clip", 0.01, 10**0.5)
CD_STEPS = grids.log_axis("step_size", 0.01, 10**0.5)
SGD_STEPS = grids.log_axis("step_size", 1e-4, 10**-1.5)

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
}
