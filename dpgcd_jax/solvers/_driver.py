"""The scan driver shared by every solver: keys, steps, records, result format."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import bounds
from dpgcd_jax.privacy import events
from dpgcd_jax.privacy import ledger as ledger_lib

Array = jax.Array
DEFAULT_BOUND_SHARE = 0.1


class Trace(NamedTuple):
  """What a run records besides the final iterate.

  Attributes:
    coordinates: (steps,) coordinate updated at each step (a private output: every
      selection is a DP mechanism), or None for solvers that update all coordinates.
    nonprivate_objective: (records + 1,) objective ``F`` at ``w^0`` and after every record
      (one record = one pass over the data). NOT PRIVATE: computed from the raw data, for
      plots and diagnostics only; None when ``store_objective=False``.
  """

  coordinates: Optional[Array]
  nonprivate_objective: Optional[Array]


class Result(NamedTuple):
  """Final iterate and trace of a run; ``privacy`` is what a ``fit`` spent (its privacy report)."""

  w: Array
  trace: Trace
  privacy: Any = None


def step_key(key: Array, t: Array) -> Array:
  """The key of step ``t``: ``fold_in(key, t)`` (the optax transforms use the same rule)."""
  return jax.random.fold_in(key, t)


def run_steps(
    step: Callable[[Array, Any], tuple[Any, Optional[Array]]],
    state: Any,
    key: Array,
    *,
    steps: int,
    record_every: int,
    record: Optional[Callable[[Any], Array]],
) -> tuple[Any, Optional[Array], Optional[Array]]:
  """Runs ``step(key_t, state) -> (state, coordinate)`` for ``steps`` steps under ``lax.scan``.

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


def check_run_inputs(problem: Any, key: Array, steps: int, *, name: str = "steps",
                     dense_only: bool = False) -> int:
  """Validates what every solver's ``run`` takes besides its hyperparameters."""
  if not hasattr(problem, "XT") or not hasattr(problem, "loss"):
    raise ValueError(f"Expected problem to come from dpgcd_jax.make_problem, got problem={problem!r}.")
  if dense_only:
    check_dense(problem)
  _validate.check_key("key", key)
  return _validate.check_int(name, steps, low=1)


def check_dense(problem: Any) -> None:
  """Rejects sparse features for solvers that gather whole rows (DP-SGD)."""
  if problem_lib.is_sparse(problem):
    raise ValueError("Expected a problem with dense features for this solver (it gathers whole "
                     "rows), got sparse features: pass X.toarray() to make_problem, or use DP-GCD / "
                     "DP-CD, which read sparse features in O(nnz).")


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


# ----------------------------------------------------------------------------------------
# What every solver's ``fit`` shares: the private path to a public smoothness, key batches.
# ----------------------------------------------------------------------------------------


def check_fit_inputs(problem: Any, key: Array, epsilon: float, delta: float, bound_share: float,
                     *, uses_smoothness: bool = True) -> tuple[bool, int | None]:
  """Validates a ``fit`` call; returns (needs a private feature bound, key batch size or None).

  Keys: one key, or a batch (a leading axis) of keys; a batch returns a batch of results
  (one independent private run per key, each with the whole budget).
  """
  if not hasattr(problem, "XT") or not hasattr(problem, "loss"):
    raise ValueError(f"Expected problem to come from dpgcd_jax.make_problem, got problem={problem!r}.")
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
  _validate.check_number("bound_share", bound_share, low=0.0, high=1.0, low_open=True, high_open=True)
  batch = _validate.check_key_or_batch("key", key)
  source = problem.smoothness_source
  if not uses_smoothness:
    return False, batch
  if source == "data_nonprivate":
    warnings.warn(
        "fit uses a smoothness computed from the raw data (smoothness='from_data_nonprivate'): "
        "the (epsilon, delta) guarantee does NOT hold.", _validate.PrivacyLeakWarning, stacklevel=3)
  needs_bound = source == "data"
  if needs_bound and problem.loss.curvature is None:
    raise ValueError(
        f"Expected a public smoothness for a private fit with loss {problem.loss.name!r}, which "
        f"has no known curvature bound: pass make_problem(..., smoothness=<public constants>), "
        f"or build the loss with dg.glm_loss(phi, curvature=beta) (then a feature bound is "
        f"declared or privately estimated).")
  return needs_bound, batch


def privately_bounded(problem: problem_lib.Problem, key: Array, epsilon: Array) -> problem_lib.Problem:
  """The problem with features clipped to an ``epsilon``-DP bound ``B`` and ``M_j = beta B^2``.

  Jittable; see :mod:`dpgcd_jax.privacy.bounds` for the mechanism and its guarantee.
  """
  bound = bounds.private_feature_bound(key, problem_lib.record_max_abs(problem), epsilon)
  smoothness = jnp.full_like(problem.smoothness, problem.curvature) * bound**2
  return dataclasses.replace(problem_lib.clip_features(problem, bound), smoothness=smoothness,
                             smoothness_source="feature_bound")


def fit_run(run: Callable[[Any, Array], Result], problem: problem_lib.Problem, key: Array, *,
            needs_bound: bool, bound_epsilon: float, batch: int | None) -> Result:
  """Runs ``run(problem, key)`` (a jitted solver run) on the private path, for one key or a batch.

  With ``needs_bound`` the key is split: the first half releases the feature bound, the second
  runs the solver on the bounded problem; otherwise the key goes to the solver unchanged.
  """

  def one(key):
    if not needs_bound:
      return run(problem, key)
    key_bound, key_run = jax.random.split(key)
    return run(privately_bounded(problem, key_bound, bound_epsilon), key_run)

  return one(key) if batch is None else jax.jit(jax.vmap(one))(key)


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
        _validate.PrivacyLeakWarning, stacklevel=3)


def private_fit(
    problem: problem_lib.Problem,
    key: Array,
    *,
    epsilon: float,
    delta: float,
    bound_share: float,
    solver_ledger: Callable[[float], Any],
    make_run: Callable[[float], Callable[[problem_lib.Problem, Array], Result]],
    cache_key: tuple[Any, ...],
    uses_smoothness: bool = True,
) -> Result:
  """The ``fit`` of every solver: public smoothness, one ledger, one calibration, the run.

  Args:
    problem, key, epsilon, delta, bound_share: as in the solvers' ``fit``.
    solver_ledger: ``scale -> Ledger`` of the solver's releases at noise scale ``scale``
      (monotone: more scale, more privacy).
    make_run: ``scale -> run(problem, key) -> Result`` (jittable) at that noise scale.
    cache_key: a hashable description of ``solver_ledger`` (calibrations are cached on it).
    uses_smoothness: False for solvers that read no smoothness constant (DP-SGD): no feature
      bound is released for them.

  Returns:
    The result with ``privacy`` = the :class:`dpgcd_jax.privacy.PrivacyReport` of everything
    spent (the feature bound, when one is released, composed with the solver in one ledger).
  """
  needs_bound, batch = check_fit_inputs(problem, key, epsilon, delta, bound_share,
                                        uses_smoothness=uses_smoothness)
  bound_epsilon = float(epsilon) * float(bound_share) if needs_bound else 0.0
  bound_entry = ledger_lib.Ledger.of(("feature bound", events.PureDp(bound_epsilon), 1))

  def factory(scale):
    solver = solver_ledger(scale)
    return solver + bound_entry if needs_bound else solver

  scale, report = ledger_lib.calibrate(factory, float(epsilon), float(delta),
                                       key=cache_key + (bound_epsilon,))
  result = fit_run(make_run(scale), problem, key, needs_bound=needs_bound,
                   bound_epsilon=bound_epsilon, batch=batch)
  note = _smoothness_note(problem, needs_bound) if uses_smoothness else "smoothness: not used"
  return result._replace(privacy=report.with_notes(note))


def _smoothness_note(problem: problem_lib.Problem, released: bool) -> str:
  if released:
    return ("smoothness: M_j = beta B^2 from a feature bound B released privately "
            "(privacy.bounds), features clipped to [-B, B]")
  return {
      "declared": "smoothness: public constants (declared)",
      "feature_bound": "smoothness: M_j = beta B_j^2 from a declared public feature bound",
      "data_nonprivate": ("smoothness: computed from the raw data (NOT private: explicit opt-in); "
                          "the guarantee above does NOT hold"),
  }[problem.smoothness_source]


def fail_closed(params: Any, w: Array) -> Array:
  """``w``, or NaN everywhere when a hyperparameter is invalid (negative, NaN, zero step or clip).

  Host validation rejects such values, but under ``jax.jit`` / ``jax.vmap`` they are tracers:
  an invalid noise multiplier must never turn into a noiseless release.
  """
  ok = jnp.all(jnp.asarray([jnp.all(jnp.asarray(leaf) >= 0) for leaf in jax.tree.leaves(params)]))
  ok &= jnp.all(jnp.asarray(params.step_size) > 0) & jnp.all(jnp.asarray(params.clip) > 0)
  return jnp.where(ok, w, jnp.nan)
