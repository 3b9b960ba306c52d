"""The solver protocol: pure ``init`` / ``step`` kernels, one scan driver and one ``run``.

Every solver is one module (``dp_gcd``, ``dp_cd``, ``dp_sgd``) with the blackjax layout:

- ``Params(NamedTuple)``: the hyperparameters, every field an array leaf (vmappable, a new
  value never recompiles), fields ``step_size`` and ``clip`` plus noise multipliers; the
  defaults are the NON-PRIVATE limit;
- ``State(NamedTuple)``: what a step carries, the iterate ``w`` first;
- ``Info(NamedTuple)``: what a step reports besides the state (a field ``coordinate`` becomes
  ``trace.coordinates``; the rest is dropped by :func:`run`);
- ``init(problem) -> State`` and a pure
  ``step(key, state, problem, params, **options) -> (State, Info)``: the options are static
  (mechanism names, sizes), everything numeric is an argument, so ``jax.jit`` and
  ``jax.vmap`` work on the step;
- ``SOLVER = base.Solver(...)``, which tells :func:`run` how many steps make a pass, and
  ``run`` / ``fit`` wrappers: ``run(problem, key, params, *, passes, ...)`` calls :func:`run`,
  ``fit(problem, key, *, epsilon, delta, passes, ...)`` calls
  ``dpgcd_jax.solvers._driver.private_fit`` with the solver's privacy ledger.

This module holds what they share: :class:`Result` and :class:`Trace`, the scan driver
(step ``t`` draws from ``fold_in(key, t)``), the validation of ``run``'s arguments, the
jitted run, the fail-closed guard, and the shims that keep the argument orders of version 0.1
working (with a ``DeprecationWarning``) for one release.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import problem as problem_lib

Array = jax.Array
_SOLVERS_DIR = os.path.dirname(os.path.abspath(__file__))
_JAX_DIR = os.path.dirname(os.path.abspath(jax.__file__)) + os.sep


class Trace(NamedTuple):
  """What a run records besides the final iterate.

  Attributes:
    coordinates: (steps,) coordinate updated at each step (for DP-GCD a private output:
      every selection is a DP mechanism), or None for solvers whose ``Info`` has no
      ``coordinate`` (DP-SGD updates all coordinates).
    nonprivate_objective: (passes + 1,) objective ``F`` at ``w^0`` and after every pass over
      the data. NOT PRIVATE: computed from the raw data, for plots and diagnostics only;
      None when ``store_objective=False``.
  """

  coordinates: Optional[Array]
  nonprivate_objective: Optional[Array]


class Result(NamedTuple):
  """Final iterate and trace of a run; ``privacy`` is what a ``fit`` spent (its privacy report)."""

  w: Array
  trace: Trace
  privacy: Any = None


def _one_step_per_pass(problem: problem_lib.Problem, **options: Any) -> int:
  del problem, options
  return 1


def _same_options(problem: problem_lib.Problem, **options: Any) -> dict[str, Any]:
  del problem
  return options


class Solver(NamedTuple):
  """What :func:`run` needs to know about a solver (each solver module defines ``SOLVER``).

  Attributes:
    params: the solver's ``Params`` NamedTuple.
    init: ``init(problem) -> State``.
    step: ``step(key, state, problem, params, **step_options) -> (State, Info)``.
    noises: names of the noise-multiplier fields of ``params`` (>= 0; ``step_size`` and
      ``clip`` are > 0 for every solver).
    steps_per_pass: ``(problem, **options) -> int``, the steps of one pass over the data.
    step_options: ``(problem, **options) -> dict``, the step's keyword arguments for the
      run's options, evaluated once per run under ``jit`` (outside the loop).
    vector_clip: whether ``clip`` may be a (p,) vector of per-coordinate thresholds.
    uses_smoothness: whether the step reads the coordinate smoothness ``M`` (then a noisy
      run on a problem whose ``M`` comes from the raw data warns).
    dense_only: whether the step needs dense features.
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


# ----------------------------------------------------------------------------------------
# The scan driver.
# ----------------------------------------------------------------------------------------


def step_key(key: Array, t: Array) -> Array:
  """The key of step ``t``: ``fold_in(key, t)`` (the optax transforms use the same rule)."""
  return jax.random.fold_in(key, t)


def run_steps(
    step: Callable[[Array, Any], tuple[Any, Any]],
    state: Any,
    key: Array,
    *,
    steps: int,
    record_every: int,
    record: Optional[Callable[[Any], Array]],
) -> tuple[Any, Any, Optional[Array]]:
  """Runs ``step(key_t, state) -> (state, output)`` for ``steps`` steps under ``lax.scan``.

  Every ``record_every`` steps (one pass over the data) it evaluates ``record(state)`` when
  given. Returns the final state, the stacked per-step outputs and the records, the value
  at the initial state first.
  """
  if steps % record_every:
    raise ValueError(f"Expected steps to be a multiple of {record_every} (one pass), got steps={steps}.")

  def one_step(state, t):
    return step(step_key(key, t), state)

  def one_pass(state, pass_index):
    ts = pass_index * record_every + jnp.arange(record_every)
    state, outputs = jax.lax.scan(one_step, state, ts)
    return state, (outputs, None if record is None else record(state))

  first = None if record is None else record(state)
  state, (outputs, records) = jax.lax.scan(one_pass, state, jnp.arange(steps // record_every))
  outputs = jax.tree.map(lambda x: x.reshape((steps,) + x.shape[2:]), outputs)
  if record is not None:
    records = jnp.concatenate([first[None], records])
  return state, outputs, records


# ----------------------------------------------------------------------------------------
# One run for every solver: validation, casting, the privacy warning, jit, fail-closed.
# ----------------------------------------------------------------------------------------


def run(solver: Solver, problem: problem_lib.Problem, key: Array, params: Any, *, passes: int,
        store_objective: bool = False, **options: Any) -> Result:
  """Runs ``passes`` passes of ``solver`` under jit; what every solver's ``run`` calls.

  Validates the problem, the key and ``passes``, casts ``params`` to the solver's ``Params``
  in the problem's dtype (invalid values raise by name), warns when noise is added on a
  problem whose smoothness is not public, then calls :func:`compiled_run`. The solver's
  own ``run`` validates its ``options`` first.
  """
  passes = check_run_inputs(problem, key, passes, dense_only=solver.dense_only)
  params = cast_params(solver, problem, params)
  if solver.uses_smoothness:
    warn_if_not_public(problem, tuple(getattr(params, name) for name in solver.noises))
  return compiled_run(solver, problem, key, params, passes=passes, store_objective=store_objective,
                      options=tuple(sorted(options.items())))


@functools.partial(jax.jit, static_argnames=("solver", "passes", "store_objective", "options"))
def compiled_run(solver: Solver, problem: problem_lib.Problem, key: Array, params: Any, *,
                 passes: int, store_objective: bool = False,
                 options: tuple[tuple[str, Any], ...] = ()) -> Result:
  """The jitted run on validated, cast ``params``; ``options``: sorted ``(name, value)`` pairs.

  Scans ``solver.step`` from ``solver.init(problem)`` for ``passes * steps_per_pass`` steps,
  keeps ``info.coordinate`` (when the ``Info`` has one) and, with ``store_objective``, the
  NOT private objective after every pass. The final iterate goes through :func:`fail_closed`.
  """
  options = dict(options)
  per_pass = solver.steps_per_pass(problem, **options)
  step_options = solver.step_options(problem, **options)

  def one_step(key, state):
    state, info = solver.step(key, state, problem, params, **step_options)
    return state, getattr(info, "coordinate", None)  # the rest of Info is not computed

  def record(state):
    return problem_lib.objective(problem, state.w, getattr(state, "margins", None))

  state, coordinates, objectives = run_steps(
      one_step, solver.init(problem), key, steps=passes * per_pass, record_every=per_pass,
      record=record if store_objective else None)
  return Result(fail_closed(params, state.w), Trace(coordinates, objectives))


def total_steps(solver: Solver, problem: problem_lib.Problem, passes: int, **options: Any) -> int:
  """The number of steps a run of ``passes`` passes makes: what its ``fit`` must account for."""
  return int(passes) * int(solver.steps_per_pass(problem, **options))


def check_run_inputs(problem: Any, key: Array, passes: int, *, dense_only: bool = False) -> int:
  """Validates what every solver's ``run`` takes besides its hyperparameters."""
  check_problem(problem)
  if dense_only:
    check_dense(problem)
  _validate.check_key("key", key)
  return _validate.check_int("passes", passes, low=1)


def check_problem(problem: Any) -> None:
  if not hasattr(problem, "XT") or not hasattr(problem, "loss"):
    raise ValueError(f"Expected problem to come from dpgcd_jax.make_problem, got problem={problem!r}.")


def check_dense(problem: Any) -> None:
  """Rejects sparse features for solvers that gather whole rows (DP-SGD)."""
  if problem_lib.is_sparse(problem):
    raise ValueError("Expected a problem with dense features for this solver (it gathers whole "
                     "rows), got sparse features: pass X.toarray() to make_problem, or use DP-GCD / "
                     "DP-CD, which read sparse features in O(nnz).")


def cast_params(solver: Solver, problem: problem_lib.Problem, params: Any) -> Any:
  """``solver.params(*params)`` validated and cast to the problem's dtype (see :func:`as_params`).

  A plain tuple or list is read positionally; another solver's ``Params`` is an error (its
  fields mean something else: DP-CD's ``noise`` is not DP-GCD's ``selection_noise``).
  """
  if hasattr(params, "_fields") and type(params) is not solver.params:
    raise ValueError(f"Expected params of type {solver.params.__module__}.{solver.params.__qualname__} "
                     f"(or a plain tuple of its fields), got params={params!r}.")
  return as_params(solver.params(*params), problem.XT.dtype, positive=("step_size", "clip"),
                   non_negative=solver.noises, num_features=problem.num_features,
                   clip_may_be_vector=solver.vector_clip)


def as_params(params: Any, dtype: Any, *, positive: tuple[str, ...], non_negative: tuple[str, ...],
              num_features: int, clip_may_be_vector: bool = True) -> Any:
  """Validates a hyperparameter NamedTuple and casts its leaves to ``dtype`` arrays.

  ``positive`` fields must be > 0 (``clip`` may be inf), ``non_negative`` ones (the noise
  multipliers) >= 0 and finite. ``clip`` must have shape () or (p,) and be finite when any
  noise is added (an infinite clip means an infinite sensitivity).
  """
  for name in positive + non_negative:
    _validate.check_positive(name, getattr(params, name), allow_zero=name in non_negative,
                             allow_inf=name == "clip")
  clip_shape = jnp.shape(params.clip)
  allowed = ((), (num_features,)) if clip_may_be_vector else ((),)
  if clip_shape not in allowed:
    raise ValueError(f"Expected clip of shape {' or '.join(map(str, allowed))}, got clip.shape={clip_shape}.")
  check_finite_clip_with_noise(params.clip, [getattr(params, name) for name in non_negative])
  return jax.tree.map(lambda x: jnp.asarray(x, dtype), params)


def check_finite_clip_with_noise(clip: Any, noises: list[Any]) -> None:
  """Rejects ``clip = inf`` together with a positive noise multiplier (values known only)."""
  values = [clip] + noises
  if not all(_validate.is_concrete(v) for v in values):
    return
  if not np.all(np.isfinite(np.asarray(clip, float))) and any(np.any(np.asarray(v, float) > 0) for v in noises):
    raise ValueError(
        f"Expected a finite clip when noise is added (clip=inf means infinite sensitivity), got "
        f"clip={clip!r}.")


def warn_if_not_public(problem: problem_lib.Problem, noises: tuple[Any, ...]) -> None:
  """``run`` with noise on a problem whose smoothness was computed from the raw data warns."""
  if problem.smoothness_source != "data":
    return
  noisy = any(not _validate.is_concrete(v) or np.any(np.asarray(v) > 0) for v in noises)
  if noisy:
    warnings.warn(
        "run with noise on a problem whose smoothness M was computed from the raw data: M is not "
        "public, so the run is not differentially private. Declare smoothness= or feature_bound= "
        "in make_problem, or use fit (which releases a feature bound privately).",
        _validate.PrivacyLeakWarning, stacklevel=caller_stacklevel())


def fail_closed(params: Any, w: Array) -> Array:
  """``w``, or NaN everywhere when a hyperparameter is invalid (negative, NaN, zero step or clip).

  Host validation rejects such values, but under ``jax.jit`` / ``jax.vmap`` they are tracers:
  an invalid noise multiplier must never turn into a noiseless release.
  """
  ok = jnp.all(jnp.asarray([jnp.all(jnp.asarray(leaf) >= 0) for leaf in jax.tree.leaves(params)]))
  ok &= jnp.all(jnp.asarray(params.step_size) > 0) & jnp.all(jnp.asarray(params.clip) > 0)
  return jnp.where(ok, w, jnp.nan)


# ----------------------------------------------------------------------------------------
# The conventions of version 0.1, kept for one release with a DeprecationWarning.
# ----------------------------------------------------------------------------------------


def caller_stacklevel() -> int:
  """The ``stacklevel`` of the first frame outside ``dpgcd_jax/solvers`` (the caller to blame).

  For ``warnings.warn`` called by the function that calls this one.
  """
  frame, level = sys._getframe(1), 1  # pylint: disable=protected-access
  while frame is not None and _is_internal(frame.f_code.co_filename):
    frame, level = frame.f_back, level + 1
  return level


def _is_internal(filename: str) -> bool:
  """Frames of this package's solvers and of JAX's tracing machinery (jit / vmap of a solver)."""
  path = os.path.abspath(filename)
  return os.path.dirname(path) == _SOLVERS_DIR or path.startswith(_JAX_DIR)


def _deprecated(message: str) -> None:
  warnings.warn(message, DeprecationWarning, stacklevel=caller_stacklevel())


def accepts_old_step_order(step: Callable[..., Any]) -> Callable[..., Any]:
  """Lets a solver's ``step`` also take the old order ``step(problem, params, key, state)``.

  The old order is recognized by its first argument, a :class:`dpgcd_jax.Problem` (the new
  one starts with a key); it warns with a ``DeprecationWarning`` and gives the same result.
  """
  solver = step.__module__.rsplit(".", 1)[-1]

  @functools.wraps(step)
  def wrapped(*args, **kwargs):
    if not args or not isinstance(args[0], problem_lib.Problem):
      return step(*args, **kwargs)
    _deprecated(f"{solver}.step(problem, params, key, state) is deprecated and will be removed in "
                f"the next release: use {solver}.step(key, state, problem, params).")
    named = dict(zip(("problem", "params", "key", "state"), args))
    named.update({name: kwargs.pop(name) for name in ("problem", "params", "key", "state") if name in kwargs})
    return step(named["key"], named["state"], named["problem"], named["params"], *args[4:], **kwargs)

  return wrapped


def accepts_old_run_conventions(
    *, steps_are_passes: bool = False,
    old_order: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
  """Lets a solver's ``run`` / ``fit`` also take the old conventions (deprecated).

  - ``run(problem, params, key, ...)``, recognized by a tuple (the ``Params`` NamedTuple) in
    second position (the new order has the key there), becomes ``run(problem, key, params, ...)``;
    (only with ``old_order``: ``fit`` never had that order);
  - with ``steps_are_passes`` (DP-GCD, where one iteration is one pass over the data),
    ``steps=T`` becomes ``passes=T``.

  Each warns with a ``DeprecationWarning`` and gives the same result as the new convention.
  """

  def decorate(fn):
    solver = fn.__module__.rsplit(".", 1)[-1]

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
      if (old_order and len(args) >= 2 and isinstance(args[1], (tuple, list))
          and (len(args) == 2 or not isinstance(args[2], (tuple, list)))):
        _deprecated(f"{solver}.{fn.__name__}(problem, params, key) is deprecated and will be removed in "
                    f"the next release: use {solver}.{fn.__name__}(problem, key, params).")
        problem, params, *rest = args
        if rest:
          args = (problem, rest[0], params, *rest[1:])
        else:
          args, kwargs = (problem,), dict(kwargs, params=params)
      if steps_are_passes and "steps" in kwargs:
        if "passes" in kwargs:
          raise TypeError(f"{solver}.{fn.__name__} got both passes= and its deprecated alias steps=.")
        _deprecated(f"{solver}.{fn.__name__}(..., steps=T) is deprecated and will be removed in the "
                    f"next release: use passes=T (one {solver} iteration is one pass over the data).")
        kwargs["passes"] = kwargs.pop("steps")
      return fn(*args, **kwargs)

    return wrapped

  return decorate
