"""The scan driver shared by every solver: keys, steps, records, result format."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate

Array = jax.Array


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
  """Final iterate and trace of a run; ``privacy`` holds the calibration when one was used."""

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


def check_run_inputs(problem: Any, key: Array, steps: int, *, name: str = "steps") -> int:
  """Validates what every solver's ``run`` takes besides its hyperparameters."""
  if not hasattr(problem, "XT") or not hasattr(problem, "loss"):
    raise ValueError(f"Expected problem to come from dpgcd_jax.make_problem, got problem={problem!r}.")
  _validate.check_key("key", key)
  return _validate.check_int(name, steps, low=1)


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
