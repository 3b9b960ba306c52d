"""The solver protocol: pure `init` / `step` kernels, one scan driver and one `run`.

Every solver is one module (`dp_gcd`, `dp_cd`, `dp_sgd`, `dp_fw`, `dp_iht`, `two_stage`) with the blackjax
layout:

- `Params(NamedTuple)`: the hyperparameters, every field an array leaf (vmappable, a new
  value never recompiles), fields `step_size` and `clip` plus noise multipliers; the
  defaults are the NON-PRIVATE limit;
- `State(NamedTuple)`: what a step carries, the iterate `w` first;
- `Info(NamedTuple)`: what a step reports besides the state (a field `coordinate` becomes
  `trace.coordinates`; the rest is dropped by [`run`][dpgcd_jax.solvers.base.run]);
- `init(problem) -> State` and a pure
  `step(key, state, problem, params, **options) -> (State, Info)`: the options are static
  (mechanism names, sizes), everything numeric is an argument, so `jax.jit` and
  `jax.vmap` work on the step;
- `private_plan(problem, *, passes, runs, epsilon, **hyper)`: the solver's privacy side (the multipliers
  its steps draw at a noise scale and the ledger they charge, a
  [`Plan`][dpgcd_jax.solvers.budget.Plan]);
- `SOLVER = base.Solver(...)`, which tells [`run`][dpgcd_jax.solvers.base.run] how many steps make a pass and
  carries `private_plan`, and `run` / `fit` wrappers: `run(problem, key, params, *, passes, ...)` calls
  [`run`][dpgcd_jax.solvers.base.run], `fit(problem, key, *, epsilon, delta, passes, ...)` calls the
  generic [`dpgcd_jax.solvers.budget.fit`][] with `SOLVER`.

This module holds what they share: [`Result`][dpgcd_jax.solvers.base.Result] and
[`Trace`][dpgcd_jax.solvers.base.Trace], the protocol records ([`Solver`][dpgcd_jax.solvers.base.Solver],
[`Prelude`][dpgcd_jax.solvers.base.Prelude]) and the jitted run. The scan driver it runs (step `t`
draws from `fold_in(key, t)`; the number of passes is a runtime value of the compiled program, so
a new `passes` or a new budget never recompiles) is [`dpgcd_jax.solvers.driver`][]; the
validation of `run`'s arguments and the fail-closed guard are [`dpgcd_jax.solvers.guards`][].
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from typing import Any
from typing import NamedTuple
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import progress as progress_lib
from dpgcd_jax.solvers import driver
from dpgcd_jax.solvers import guards

Array = jax.Array


class Trace(NamedTuple):
  """What a run records besides the final iterate.

  Attributes:
    coordinates: (steps,) coordinate updated at each step (for DP-GCD a private output:
      every selection is a DP mechanism), or None for solvers whose `Info` has no
      `coordinate` (DP-SGD updates all coordinates).
    nonprivate_objective: (passes + 1,) objective `F` at `w^0` and after every pass over
      the data. NOT PRIVATE: computed from the raw data, for plots and diagnostics only;
      None when `store_objective=False`.
    bounds: None, or DP-GCD's released per-feature bounds at the end of a `scale="per-step"` run
      (released values: the model is `sum_j w_j clip(x_j, bounds_j)`; [`dpgcd_jax.solvers.scale_free`][]).
  """

  coordinates: Array | None
  nonprivate_objective: Array | None
  bounds: Array | None = None


class Result(NamedTuple):
  """Final iterate and trace of a run.

  Attributes:
    w: the final iterate.
    trace: the [`Trace`][dpgcd_jax.solvers.base.Trace].
    privacy: what a `fit` spent (its privacy report), or None.
    released: the public values a `fit` released before its runs, in the same program (the
      feature bound `B` when the problem had no public smoothness; an estimator's bounds), or
      None.
    params: the hyperparameters the run used, as cast to its dtype (a `fit`'s calibrated noise
      multipliers, rounded up, and its step size), or None for `run`, which took them.
  """

  w: Array
  trace: Trace
  privacy: Any = None
  released: Any = None
  params: Any = None


def _one_step_per_pass(problem: problem_lib.Problem, **options: Any) -> int:
  del problem, options
  return 1


def _same_options(problem: problem_lib.Problem, **options: Any) -> dict[str, Any]:
  del problem
  return options


class Solver(NamedTuple):
  """What [`run`][dpgcd_jax.solvers.base.run] needs to know about a solver (each solver module defines `SOLVER`).

  Attributes:
    params: the solver's `Params` NamedTuple.
    init: `init(problem) -> State`.
    step: `step(key, state, problem, params, **step_options) -> (State, Info)`.
    noises: names of the noise-multiplier fields of `params` (>= 0; `step_size` and
      `clip` are > 0 for every solver).
    steps_per_pass: `(problem, **options) -> int`, the steps of one pass over the data.
    step_options: `(problem, **options) -> dict`, the step's keyword arguments for the
      run's options, evaluated once per run under `jit` (outside the loop).
    vector_clip: whether `clip` may be a (p,) vector of per-coordinate thresholds.
    uses_smoothness: whether the step reads the coordinate smoothness `M` (then a noisy
      run on a problem whose `M` comes from the raw data warns).
    dense_only: whether the step needs dense features.
    padded: whether the step reads a problem padded to public buckets
      ([`dpgcd_jax.layout.pad`][]: means over `problem.mean_count`, selections masked by
      `problem.column_mask`); the others refuse one.
    info: the solver's `Info` NamedTuple (its fields tell [`run`][dpgcd_jax.solvers.base.run] whether there are
      per-step coordinates to record); None: assume there are.
    sequential_runs: the K runs of `targets` and a batch of keys run one after the other
      (`lax.map`) instead of vmapped: a step that branches on its data (DP-SGD's sampler) would
      run every branch under `vmap`.
    start: None, or `(problem, **options) -> State`: the initial state when it depends on the run's
      options (DP-GCD's sticky bounds); None: `init(problem)`.
    private_plan: the solver's privacy side, `(problem, *, passes, runs, epsilon, **hyper) ->`
      [`Plan`][dpgcd_jax.solvers.budget.Plan]: the multipliers its steps draw at a noise scale, the
      ledger they charge, the run's options; its keyword defaults are the solver's
      hyperparameters. [`dpgcd_jax.solvers.budget.fit`][] (every `fit`) reads it; None: no private fit.
  """

  params: type
  init: Callable[[problem_lib.Problem], Any]
  step: Callable[..., tuple[Any, Any]]
  noises: tuple[str, ...]
  steps_per_pass: Callable[..., int] = _one_step_per_pass
  step_options: Callable[..., dict[str, Any]] = _same_options
  vector_clip: bool = True
  uses_smoothness: bool = True
  dense_only: bool = False
  info: type[NamedTuple] | None = None
  padded: bool = False
  sequential_runs: bool = False
  private_plan: Callable[..., Any] | None = None
  start: Callable[..., Any] | None = None


# ----------------------------------------------------------------------------------------
# One run for every solver: validation, casting, the privacy warning, jit, fail-closed.
# ----------------------------------------------------------------------------------------


def run(solver: Solver, problem: problem_lib.Problem, key: Array, params: Any, *, passes: int,
        store_objective: bool = False, **options: Any) -> Result:
  """Runs `passes` passes of `solver` under jit; what every solver's `run` calls.

  Validates the problem, the key and `passes`, casts `params` to the solver's `Params`
  in the problem's dtype (invalid values raise by name), warns when noise is added on a
  problem whose smoothness is not public, then calls [`compiled_run`][dpgcd_jax.solvers.base.compiled_run]. The solver's
  own `run` validates its `options` first. `passes` is a runtime value of the compiled
  program: a new number of passes (or new hyperparameter values) does not recompile.
  """
  passes = guards.check_run_inputs(problem, key, passes, dense_only=solver.dense_only)
  params = cast_params(solver, problem, params)
  if solver.uses_smoothness:
    guards.warn_if_not_public(problem, tuple(v for name in solver.noises if (v := getattr(params, name)) is not None))
    if problem.smoothness_source is problem_lib.DataSmoothness.DATA:  # run is not private here (it warned when noisy)
      problem_lib.check_smoothness(problem)
  return compiled_run(solver, problem, key, params, passes=passes, store_objective=store_objective,
                      options=tuple(sorted(options.items())))


def compiled_run(solver: Solver, problem: problem_lib.Problem, key: Array, params: Any, *,
                 passes: int, store_objective: bool = False,
                 options: tuple[tuple[str, Any], ...] = (), trim: bool = True,
                 targets: Array | None = None, prelude: Prelude | None = None) -> Result:
  """The jitted run on validated, cast `params`; `options`: sorted `(name, value)` pairs.

  With `targets` (K, n): one run per row (`problem.y` replaced by the row, run `k` keyed by
  `fold_in(key, k)`), in the same program (the keys and the K runs); the result's leaves get a
  leading axis K.

  With a [`Prelude`][dpgcd_jax.solvers.base.Prelude]: the releases it makes come first, in the
  same program (one compilation for the whole fit); what it released is `result.released`.

  Scans `solver.step` from `solver.init(problem)` for `passes * steps_per_pass` steps,
  keeps `info.coordinate` (when the `Info` has one) and, with `store_objective`, the
  NOT private objective after every pass. The final iterate goes through
  [`fail_closed`][dpgcd_jax.solvers.guards.fail_closed].

  `passes` (a Python int) is an argument of the compiled program, not a constant of it; the
  static structure is the solver, the options, the problem's shapes and, when something is
  recorded per step or per pass, the public bucket
  [`pass_capacity`][dpgcd_jax.solvers.driver.pass_capacity]. The records come back padded to
  that bucket and are cut by [`trim_trace`][dpgcd_jax.solvers.base.trim_trace]: with `trim` here; a caller
  that maps this function (`jax.vmap` / `jax.jit` around it, where a cut of a new length
  would be a new program) passes `trim=False` and calls [`trim_trace`][dpgcd_jax.solvers.base.trim_trace] on the result.
  """
  if not solver.padded and (problem.rows is not None or problem.columns is not None):
    raise ValueError(f"Expected an unpadded problem for a solver without padding support "
                     f"({solver.params.__module__}), got one padded by dpgcd_jax.layout.pad.")
  passes = operator.index(passes)
  per_pass = int(solver.steps_per_pass(problem, **dict(options)))
  records = store_objective or solver.info is None or "coordinate" in solver.info._fields
  capacity = driver.pass_capacity(passes, per_pass) if records else None
  without_features = dataclasses.replace(problem, XT=None)  # type: ignore[arg-type]  # XT goes apart (donated)
  arguments = (solver, problem.XT, without_features, key, params, np.int32(passes), targets, prelude)
  static = dict(capacity=capacity, store_objective=store_objective, options=options,
                progress=progress_lib.active())
  if prelude is not None and prelude.in_place:
    result, _ = _compiled_passes_in_place(*arguments, **static)
  else:
    result = _compiled_passes(*arguments, **static)
  return trim_trace(result, steps=passes * per_pass, passes=passes) if trim else result


class Prelude(Protocol):
  """Releases a fit makes before its runs, in the runs' program (a pytree: its static fields
  in the tree structure, its numbers traced, so that a new budget compiles nothing).

  `prelude(problem, key, targets) -> (problem, key, targets, released)`: the problem the runs
  see (e.g. its features clipped to a released bound and `M_j = beta B_j^2`), the runs' key,
  the targets (or None) and the released public values (`Result.released`). `ledger`: its
  releases' privacy ledger (host), which `fit` composes with the runs in the one ledger it
  calibrates. For a solver that reads the smoothness, the problem it returns must have a public
  one (a [`PublicSmoothness`][dpgcd_jax.problem.PublicSmoothness]: "declared" or "feature_bound", checked
  when the program is traced).
  A prelude is trusted code: the check reads that label, not the values, so a prelude must
  compute the runs' smoothness from public values and its own accounted releases only (the
  package's two, `budget.FeatureBoundRelease` and the estimators' `Releases`, do).
  `in_place`: the caller gives up the features' buffer, which then holds the prelude's features
  (no second copy of X).
  """

  @property
  def in_place(self) -> bool: ...

  @property
  def ledger(self) -> Any: ...

  def __call__(self, problem: problem_lib.Problem, key: Array, targets: Array | None
               ) -> tuple[problem_lib.Problem, Array, Array | None, Any]: ...


def trim_trace(result: Result, *, steps: int, passes: int) -> Result:
  """`result` with its padded trace cut to `steps` coordinates and `passes + 1` objectives.

  Cuts the last axis (batched results keep their leading axes). On concrete arrays the cut is
  done on the host (a device slice of a new length would compile a new program); on traced
  ones it is part of the traced program.
  """
  coordinates, objectives, bounds = result.trace
  return result._replace(trace=Trace(_leading(coordinates, steps), _leading(objectives, passes + 1), bounds))


def _leading(x: Array | None, n: int) -> Array | None:
  if x is None or x.shape[-1] == n:
    return x
  if isinstance(x, jax.core.Tracer):
    return x[..., :n]
  return jax.device_put(np.asarray(x)[..., :n])


def _compiled_passes_program(solver: Solver, XT: Any, problem: problem_lib.Problem, key: Array, params: Any,
                             passes: Array, targets: Array | None, prelude: Prelude | None, *,
                             capacity: int | None, store_objective: bool, options: tuple[tuple[str, Any], ...],
                             progress: bool = False, in_place: bool = False) -> Any:
  """The compiled program of `compiled_run` (`problem` without its features `XT`): the
  prelude's releases, then the runs; with `in_place`, also the prelude's features (an output
  that takes over the donated buffer of `XT`); with `progress`, the runs report their passes
  to the active bar (`dpgcd_jax.progress`)."""
  problem = dataclasses.replace(problem, XT=XT)
  released = None
  if prelude is not None:
    problem, key, targets, released = prelude(problem, key, targets)
    if solver.uses_smoothness and not isinstance(problem.smoothness_source, problem_lib.PublicSmoothness):
      raise ValueError(f"Expected the prelude to give the runs a public smoothness (smoothness_source 'declared' "
                       f"or 'feature_bound'), got smoothness_source={problem.smoothness_source!r}.")
  result = _passes(solver, problem, key, params, passes, targets, capacity=capacity,
                   store_objective=store_objective, options=options, progress=progress)._replace(released=released)
  return (result, problem.XT) if in_place else result


_STATIC = ("solver", "capacity", "store_objective", "options", "progress")
_compiled_passes = jax.jit(_compiled_passes_program, static_argnames=_STATIC)
_compiled_passes_in_place = jax.jit(functools.partial(_compiled_passes_program, in_place=True),
                                    static_argnames=_STATIC, donate_argnames="XT")


def _passes(solver: Solver, problem: problem_lib.Problem, key: Array, params: Any,
            passes: Array, targets: Array | None, *, capacity: int | None, store_objective: bool,
            options: tuple[tuple[str, Any], ...], progress: bool = False) -> Result:
  """The runs (traced in `_compiled_passes_program`): records padded to `capacity` passes.
  Derivative clipping's steps read the features' integer limbs, made once here
  ([`dpgcd_jax.kernels.prepared`][])."""
  problem = kernels.prepared(problem, dict(options).get("clipping_mode", "coordinate"))
  if targets is not None:
    keys = jax.vmap(lambda k: jax.random.fold_in(key, k))(jnp.arange(targets.shape[0]))
    one_target = lambda y, k: _passes(  # noqa: E731
        solver, dataclasses.replace(problem, y=y), k, params, passes, None, capacity=capacity,
        store_objective=store_objective, options=options, progress=progress)
    if targets.shape[0] == 1:  # one target (a binary classifier, a regressor): no batching to trace
      return jax.tree.map(lambda leaf: leaf[None], one_target(targets[0], keys[0]))
    if solver.sequential_runs:
      return jax.lax.map(lambda a: one_target(*a), (targets, keys))
    return jax.vmap(one_target)(targets, keys)
  kwargs = dict(options)
  per_pass = solver.steps_per_pass(problem, **kwargs)
  step_options = solver.step_options(problem, **kwargs)

  def one_step(key, state):
    state, info = solver.step(key, state, problem, params, **step_options)
    return state, getattr(info, "coordinate", None)  # the rest of Info is not computed

  def record(state):
    return kernels.objective(problem, state.w, getattr(state, "margins", None))

  initial = solver.start(problem, **kwargs) if solver.start else solver.init(problem)
  state, coordinates, objectives = driver.run_steps(
      one_step, initial, key, passes=passes, steps_per_pass=per_pass, capacity=capacity,
      record=record if store_objective else None, on_pass=progress_lib.tick if progress else None)
  return Result(guards.fail_closed(params, state.w), Trace(coordinates, objectives, getattr(state, "bounds", None)))


def total_steps(solver: Solver, problem: problem_lib.Problem, passes: int, **options: Any) -> int:
  """The number of steps a run of `passes` passes makes: what its `fit` must account for."""
  return int(passes) * int(solver.steps_per_pass(problem, **options))


def cast_params(solver: Solver, problem: problem_lib.Problem, params: Any) -> Any:
  """`solver.params(*params)` validated and cast to the problem's dtype (see `as_params`).

  A plain tuple or list is read positionally; another solver's `Params` is an error (its
  fields mean something else: DP-CD's `noise` is not DP-GCD's `selection_noise`).
  """
  if hasattr(params, "_fields") and type(params) is not solver.params:
    raise ValueError(f"Expected params of type {solver.params.__module__}.{solver.params.__qualname__} "
                     f"(or a plain tuple of its fields), got params={params!r}.")
  return guards.as_params(solver.params(*params), problem.XT.dtype, positive=("step_size", "clip"),
                          non_negative=solver.noises, num_features=problem.num_features,
                          clip_may_be_vector=solver.vector_clip)
