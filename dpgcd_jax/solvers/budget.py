"""The one path from a budget `(epsilon, delta)` to private runs: ledger, calibration, run.

Every solver module carries its privacy side in its record: `SOLVER.private_plan(problem, passes=,
runs=, **hyper)` returns a [`Plan`][dpgcd_jax.solvers.budget.Plan] (the multipliers each step draws at a
noise scale, the ledger those multipliers charge, the run's static options, a cache key), and its
keyword defaults are the solver's hyperparameters. Two entry points, one calibration
([`calibrated`][dpgcd_jax.solvers.budget.calibrated]):

* [`fit`][dpgcd_jax.solvers.budget.fit] (`dg.fit`, and every solver's `fit`, which forwards to it; so the
  estimators): the solver's plan, public smoothness (a released feature bound when needed, in the run's
  program), the plan's ledger composed with the releases already made (`prior`), the smallest noise
  meeting the budget, the run ([`private_fit`][dpgcd_jax.solvers.budget.private_fit]);
* [`search_scale`][dpgcd_jax.solvers.budget.search_scale]: a private hyperparameter search (repeat-and-select,
  [`dpgcd_jax.privacy.tuning`][]): the scale of one repetition such that the releases already
  made and the whole search are `(epsilon, delta)`-DP (the CV estimators and the experiments'
  end-to-end private column).

The solver protocol (`Result`, `Trace`, the scan driver, `run`) is in
[`dpgcd_jax.solvers.base`][].
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _pytree
from dpgcd_jax import _validate
from dpgcd_jax import layout as layout_lib
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import release_mechanisms
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import calibration
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import tuning
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import guards
from dpgcd_jax.solvers.base import Result

Array = jax.Array
DEFAULT_BOUND_SHARE = 0.1


# ----------------------------------------------------------------------------------------
# What every solver's ``fit`` shares: the private path to a public smoothness, key batches.
# ----------------------------------------------------------------------------------------


def release_ledger(label: str, epsilon: float) -> ledger_lib.Ledger:
  """The ledger of one AboveThreshold release at `epsilon` ([`dpgcd_jax.privacy.bounds`][]: the
  "feature bound", a regressor's "target bound"): `(label, PureDp(epsilon), 1)` and its
  `GRID.size + 1` discrete Laplace draws, one per grid point and one for the threshold, charged
  at the release's own epsilon ([`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws])."""
  epsilon, mechanism = float(epsilon), release_mechanisms.AboveThreshold()
  return ledger_lib.Ledger.of((label, mechanism.event(epsilon), 1)).with_draws(mechanism.draws(bounds.GRID.size), 1,
                                                                            epsilon)


def check_fit_inputs(problem: Any, key: Array, epsilon: float, delta: float, bound_share: float,
                     *, uses_smoothness: bool = True, released: bool = False) -> tuple[bool, int | None]:
  """Validates a `fit` call; returns (needs a private feature bound, key batch size or None).

  Keys: one key, or a batch (a leading axis) of keys; a batch returns a batch of results
  (one independent private run per key, each with the whole budget). `released`: the
  caller's prelude releases the bounds (no feature bound of `fit`'s own). A problem built with
  `smoothness="from_data_nonprivate"` is refused by its type
  ([`check_private_problem`][dpgcd_jax.solvers.guards.check_private_problem]: `TypeError`).
  """
  guards.check_problem(problem)
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
  _validate.check_number("bound_share", bound_share, low=0.0, high=1.0, low_open=True, high_open=True)
  batch = _validate.check_key_or_batch("key", key)
  guards.check_private_problem(problem)
  if not uses_smoothness or released:
    return False, batch
  needs_bound = problem.smoothness_source is problem_lib.DataSmoothness.DATA
  if needs_bound and (problem.rows is not None or problem.columns is not None):
    raise ValueError("Expected a public smoothness (feature_bound= or smoothness=) for a fit on a padded "
                     "problem: the private feature bound's statistic would count the padded records.")
  if needs_bound and problem.loss.curvature is None:
    raise ValueError(
        f"Expected a public smoothness for a private fit with loss {problem.loss.name!r}, which "
        f"has no known curvature bound: pass make_problem(..., smoothness=<public constants>), "
        f"or build the loss with dg.glm_loss(phi, curvature=beta) (then a feature bound is "
        f"declared or privately estimated).")
  return needs_bound, batch


@_pytree.dataclass_pytree(data_fields=["epsilon"])
@dataclasses.dataclass(frozen=True)
class FeatureBoundRelease:
  """`fit`'s release of a feature bound, a [`Prelude`][dpgcd_jax.solvers.base.Prelude] of its run.

  `split(key)`: the first half releases an `epsilon`-DP bound `B` on the features
  ([`dpgcd_jax.privacy.bounds`][], on each record's 0.9-quantile of its nonzero `|x_ij|`), the
  second is the run's key; the run
  sees the features clipped to `[-B, B]` and `M_j = beta B^2`; `released` is `B`. `epsilon`
  is traced: a new budget compiles nothing.
  """

  epsilon: Any
  in_place = False

  @property
  def ledger(self) -> ledger_lib.Ledger:
    return release_ledger("feature bound", self.epsilon)

  def __call__(self, problem: problem_lib.Problem, key: Array, targets: Array | None
               ) -> tuple[problem_lib.Problem, Array, Array | None, Array]:
    key_bound, key_run = jax.random.split(key)
    statistic = layout_lib.record_statistic(problem.XT, problem.XT.shape[0])  # fit refuses padded problems here
    bound = bounds.private_feature_bound(key_bound, statistic, self.epsilon)
    bounded = layout_lib.with_feature_bound(problem, jnp.full(problem.num_features, bound))
    return bounded, key_run, targets, bound


class Plan(NamedTuple):
  """A solver's privacy side for one fit: which noise its steps draw and which events the ledger charges.

  Attributes:
    params_at: `s -> Params`, the multipliers the run draws at noise scale `s` (and the other
      hyperparameters).
    ledger_of: `Params -> Ledger`, the events charged for the whole fit (every step, every run of
      `targets`) at the multipliers of `params` (monotone: more noise, more privacy). The ledger is
      read from the very multipliers the run uses, so the pairing is made once, here.
    options: the run's static keyword options (mechanisms, sparsity, batch size, ...).
    finish: None, or `Params -> Params` applied once to the calibrated `Params`: the
      hyperparameters that are functions of the calibrated multipliers (DP-GCD's callable
      `step_size`). The ledger never reads them, so the calibration's probes never call them.
  """

  params_at: Callable[[float], Any]
  ledger_of: Callable[[Any], ledger_lib.Ledger]
  options: dict[str, Any]
  finish: Callable[[Any], Any] | None = None

  @property
  def cache_key(self) -> tuple[Any, ...]:
    """The calibration cache's key, derived from the plan itself: its ledgers at two reference
    scales (hashable values: every event with its parameters and count). A plan's noise fields are
    `scale` times fixed ratios and each event's parameters are fixed functions of its multiplier,
    so the ledger at one scale names every event, ratio and count, hence the whole map from the
    scale to the ledger; the second scale tells apart a plan not of that form. Nothing is written
    by hand, so nothing can be left out; a hit is re-verified against the ledger anyway
    ([`dpgcd_jax.privacy.calibration`][])."""
    return ("plan", self.ledger(1.0), self.ledger(2.0))

  def ledger(self, scale: float) -> ledger_lib.Ledger:
    """The ledger at noise scale `scale`: `ledger_of(params_at(scale))`."""
    return self.ledger_of(self.params_at(scale))

  def run_params(self, scale: float) -> Any:
    """The `Params` a run uses at the calibrated `scale`: `finish(params_at(scale))`."""
    params = self.params_at(scale)
    return params if self.finish is None else self.finish(params)


def fit(solver: Any, problem: problem_lib.Problem, key: Array, *, epsilon: float, delta: float, passes: int,
        bound_share: float = DEFAULT_BOUND_SHARE, store_objective: bool = False, prior: Any = None,
        targets: Any = None, prelude: Any = None, **hyper: Any) -> Result:
  """The generic `(epsilon, delta)`-DP fit of any solver (`dg.fit`): every solver's `fit` is this one.

  `plan = solver.private_plan(problem, passes=passes, runs=K, epsilon=epsilon, **hyper)` names the
  noise the steps draw and the events the ledger charges for them (`epsilon`: DP-SGD's sampler
  slack depends on it); then [`private_fit`][dpgcd_jax.solvers.budget.private_fit]
  releases a feature bound when the problem has no public smoothness, composes `prior`, the
  prelude's releases and the plan's ledger into one ledger, calibrates the smallest noise scale
  meeting the budget and runs the solver with `plan.params_at(scale)` in one compiled program.

  Args:
    solver: a solver module (`dg.dp_gcd`, `dg.dp_cd`, `dg.dp_sgd`, `dg.dp_fw`, `dg.dp_iht`,
      `dg.two_stage`) or its `SOLVER` record.
    problem: from [`dpgcd_jax.make_problem`][].
    key: a JAX PRNG key, or a batch of keys (leading axis): one independent private run per key,
      each spending the whole budget.
    epsilon: total budget, > 0.
    delta: in (0, 1).
    passes: passes over the data (the solver's iterations, see its `run`).
    bound_share: the share of `epsilon` spent on a feature bound when one is needed, in (0, 1).
    store_objective: also return `trace.nonprivate_objective` (NOT private).
    prior: a [`dpgcd_jax.privacy.Ledger`][] of releases already made from the same data toward this
      budget: the fit is calibrated so that `prior` and the fit together are `(epsilon, delta)`-DP.
    targets: None, or (K, n) targets on the same features: one run per row (keyed
      `fold_in(key, k)`), the K runs composed in the ledger.
    prelude: None, or releases to make before the runs, in their program (a
      [`Prelude`][dpgcd_jax.solvers.base.Prelude]), whose `ledger` joins the one ledger.
    **hyper: the solver's hyperparameters (the keyword arguments of its `private_plan`, with
      their defaults; e.g. `step_size`, `clip`, `selection`, `sparsity`, `radius`).

  Returns:
    A [`dpgcd_jax.Result`][]: `privacy` is the report of everything spent, `params` the
    hyperparameters the run used (calibrated multipliers rounded up).

  Raises:
    TypeError: for a problem built with `make_problem(..., smoothness="from_data_nonprivate")`, before
      any data is read: the `(epsilon, delta)` guarantee would not hold
      ([`check_private_problem`][dpgcd_jax.solvers.guards.check_private_problem]).

  Example:

    >>> import jax, numpy as np
    >>> import dpgcd_jax as dg
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 5)); y = np.sign(X[:, 0] + 0.1)
    >>> problem = dg.make_problem(X, y, loss="logistic", feature_bound=3.0)
    >>> res = dg.fit(dg.dp_cd, problem, jax.random.key(0), epsilon=1.0, delta=1e-5, passes=2)
    >>> float(res.privacy.epsilon) <= 1.0
    True
  """
  solver = getattr(solver, "SOLVER", solver)
  if not isinstance(solver, base.Solver) or solver.private_plan is None:
    raise ValueError(f"Expected a solver module or its SOLVER record with a private plan (e.g. dg.dp_gcd), "
                     f"got solver={solver!r}.")
  passes = _validate.check_int("passes", passes, low=1)
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  guards.check_problem(problem)
  guards.check_private_problem(problem)
  if prior is not None and not isinstance(prior, ledger_lib.Ledger):
    raise ValueError(f"Expected prior to be None or a dpgcd_jax.privacy.Ledger, got prior={prior!r}.")
  if prelude is not None and not solver.uses_smoothness:
    raise ValueError("Expected prelude=None for a solver that reads no smoothness constant (its releases "
                     f"would be charged and never used), got prelude={prelude!r}.")
  if targets is not None and (np.ndim(targets) != 2 or np.shape(targets)[0] < 1):
    raise ValueError(f"Expected targets of shape (K, n) with K >= 1, got targets of shape {np.shape(targets)}.")
  runs = 1 if targets is None else int(np.shape(targets)[0])
  _, runs_on = problem_lib.as_fit_runs(problem)  # fit releases a feature bound first when needed
  plan = solver.private_plan(runs_on, passes=passes, runs=runs, epsilon=float(epsilon), **hyper)
  return private_fit(
      solver, problem, key, epsilon=epsilon, delta=delta, bound_share=bound_share, passes=passes,
      params_at=plan.run_params, solver_ledger=plan.ledger, cache_key=plan.cache_key,
      store_objective=store_objective, prior=prior, prior_key=() if prior is None else (prior,),
      targets=targets, prelude=prelude, **plan.options)


def private_fit(
    solver: base.Solver,
    problem: problem_lib.Problem,
    key: Array,
    *,
    epsilon: float,
    delta: float,
    bound_share: float,
    passes: int,
    params_at: Callable[[float], Any],
    solver_ledger: Callable[[float], Any],
    cache_key: tuple[Any, ...],
    store_objective: bool = False,
    prior: ledger_lib.Ledger | None = None,
    prior_key: tuple[Any, ...] = (),
    targets: Any = None,
    prelude: base.Prelude | None = None,
    **options: Any,
) -> Result:
  """The `fit` of every solver: public smoothness, one ledger, one calibration, the run.

  Args:
    solver: the solver's [`dpgcd_jax.solvers.base.Solver`][]; one that reads no
      smoothness constant (DP-SGD) releases no feature bound.
    problem, key, epsilon, delta, bound_share, passes, store_objective: as in the solvers'
      `fit` (`passes` validated).
    params_at: `scale -> Params` at noise scale `scale`.
    solver_ledger: `scale -> Ledger` of the solver's releases at noise scale `scale`
      (monotone: more scale, more privacy).
    cache_key: a hashable description of `solver_ledger` (calibrations are cached on it).
    prior: releases already made from the same data toward the same budget (e.g. the
      estimators' private feature scales): composed with the run in the one ledger that is
      calibrated, so that everything together is `(epsilon, delta)`-DP.
    prior_key: a hashable description of `prior` (for the calibration cache).
    targets: None, or (K, n) targets on the same features: the solver runs once per row
      (e.g. one-vs-rest), and `solver_ledger` must count the K runs.
    prelude: None, or the releases to make before the runs in the runs' program (a
      [`Prelude`][dpgcd_jax.solvers.base.Prelude], e.g. the estimators' feature and target bounds), whose
      `ledger` joins the one ledger (after `prior`); it sets the problem's public smoothness (a
      problem whose smoothness source is "data" then gets no release of its own). Without it, a problem
      with no public smoothness gets a feature bound released by
      [`FeatureBoundRelease`][dpgcd_jax.solvers.budget.FeatureBoundRelease], a share `bound_share` of `epsilon`.
    **options: the run's static options (validated), as in the solvers' `run`.

  Returns:
    The result with `privacy` = the [`dpgcd_jax.privacy.PrivacyReport`][] of everything
    spent (the feature bound, when one is released, composed with the solver in one ledger)
    and `released` = what the prelude released (the feature bound `B`), or None. One
    compiled program for the release and the runs.
  """
  needs_bound, batch = check_fit_inputs(problem, key, epsilon, delta, bound_share,
                                        uses_smoothness=solver.uses_smoothness, released=prelude is not None)
  if needs_bound:  # its epsilon as the mechanism runs it (in the features' dtype), and so as it is accounted
    prelude = FeatureBoundRelease(problem.XT.dtype.type(bounds.release_epsilon(float(epsilon) * float(bound_share))))
  spent = ledger_lib.Ledger() if prior is None else prior
  if prelude is not None:
    spent = spent + prelude.ledger
  if targets is not None:
    targets = _validate.on_device(targets, problem.y.dtype)
    if targets.ndim != 2 or targets.shape[1] != problem.num_examples:
      raise ValueError(f"Expected targets of shape (K, {problem.num_examples}), got "
                       f"targets.shape={targets.shape}.")

  scale, report = calibrated(lambda scale: spent + solver_ledger(scale), epsilon, delta,
                             key=cache_key + prior_key + (None if prelude is None else prelude.ledger,))
  params = base.cast_params(solver, problem, params_at(scale))

  def run(key: Array) -> Result:
    return base.compiled_run(solver, problem, key, params, passes=passes, store_objective=store_objective,
                             options=tuple(sorted(options.items())), trim=False, targets=targets, prelude=prelude)

  # A batch of keys: a plain vmap of the jitted run (a closure jitted anew would compile at
  # every call, e.g. at every new epsilon; the jitted run is batched once per shape and cached),
  # or, for a solver whose step branches on its data (`Solver.sequential_runs`), the one compiled
  # run called per key and stacked (a lax.map of this closure would compile anew at every fit).
  if batch is None:
    result = run(key)
  elif solver.sequential_runs:
    result = jax.tree.map(lambda *leaves: jnp.stack(leaves), *[run(k) for k in key])
  else:
    result = jax.vmap(run)(key)
  result = base.trim_trace(result, steps=base.total_steps(solver, problem, passes, **options),
                           passes=passes)
  if not solver.uses_smoothness:
    note = "smoothness: not used"
  elif prelude is not None and not needs_bound:
    note = "smoothness: M_j = beta B_j^2 from public feature bounds B_j (declared, or released: entries above)"
  else:
    note = _smoothness_note(problem, needs_bound)
  return result._replace(privacy=report.with_notes(note), params=params)


def calibrated(ledger_at: Callable[[float], ledger_lib.Ledger], epsilon: float, delta: float, *,
               key: tuple[Any, ...]) -> tuple[float, ledger_lib.PrivacyReport]:
  """The smallest scale `s` with `ledger_at(s)` `(epsilon, delta)`-DP, and its report.

  The one calibration of the package's private runs ([`private_fit`][dpgcd_jax.solvers.budget.private_fit],
  [`search_scale`][dpgcd_jax.solvers.budget.search_scale]);
  `ledger_at` holds EVERYTHING released from the data toward this budget, and is monotone
  (more scale, more privacy). `key`: a hashable description of `ledger_at` (cache).
  """
  return calibration.calibrate(ledger_at, float(epsilon), float(delta), key=key)


def search_scale(repetition_at: Callable[[float], Any], *, epsilon: float, delta: float, mean: float,
                 shape: float, prior: ledger_lib.Ledger | None = None) -> tuple[float, ledger_lib.PrivacyReport]:
  """The scale of ONE repetition of a private search such that everything is `(epsilon, delta)`-DP.

  Args:
    repetition_at: `scale -> Ledger` (or a tuple of ledgers, see
      [`RepeatAndSelect`][dpgcd_jax.privacy.tuning.RepeatAndSelect]) of one repetition: a candidate's
      private training run(s) and its private score, monotone in the scale.
    epsilon, delta: the total budget (`prior` and the search together).
    mean, shape: of the number of repetitions `K ~ TNB(shape)` with `E[K] = mean`.
    prior: releases already made from the same data toward the same budget (feature scales, a
      target bound): composed with the search in the one ledger that is calibrated.

  The calibration cache's key is derived, as a [`Plan`][dpgcd_jax.solvers.budget.Plan]'s is, from one
  repetition's ledgers at two reference scales (and `prior`, `mean`, `shape`): nothing written by
  hand, and a hit is re-verified against the ledger anyway.

  Returns:
    `(scale, report)`: the report is the whole ledger's (prior, then the search as one
    [`RepeatAndSelect`][dpgcd_jax.privacy.tuning.RepeatAndSelect] entry).
  """
  spent = ledger_lib.Ledger() if prior is None else prior
  return calibrated(
      lambda scale: spent + tuning.repeat_and_select_ledger(repetition_at(scale), mean=mean, shape=shape),
      epsilon, delta, key=("search", repetition_at(1.0), repetition_at(2.0), prior, float(mean), float(shape)))


def _smoothness_note(problem: problem_lib.Problem, released: bool) -> str:
  if released:
    return ("smoothness: M_j = beta B^2 from a feature bound B released privately "
            "(privacy.bounds), features clipped to [-B, B]")
  source = problem_lib.PublicSmoothness
  return {
      source.DECLARED: "smoothness: public constants (declared)",
      source.FEATURE_BOUND: ("smoothness: M_j = beta B_j^2 from a public feature bound (declared, or "
                             "released by an entry of this ledger)"),
  }[problem_lib.PublicSmoothness(problem.smoothness_source)]  # "data" was released above, the opt-in refused
