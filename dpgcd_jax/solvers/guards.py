"""What a run refuses: its inputs checked on the host, and the fail-closed guard in its program.

The checks every solver's `run` and `fit` make before any work
([`check_run_inputs`][dpgcd_jax.solvers.guards.check_run_inputs],
[`as_params`][dpgcd_jax.solvers.guards.as_params]: a ValueError naming the argument), the
warning for a noisy run on a problem whose smoothness is not public
([`warn_if_not_public`][dpgcd_jax.solvers.guards.warn_if_not_public]), and
[`fail_closed`][dpgcd_jax.solvers.guards.fail_closed]: under `jax.jit` / `jax.vmap` the
hyperparameters are tracers the host cannot check, so an invalid one turns the run's output into
NaN, never into a noiseless release.
"""

from __future__ import annotations

import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import problem as problem_lib

Array = jax.Array


def check_run_inputs(problem: Any, key: Array, passes: int, *, dense_only: bool = False) -> int:
  """Validates what every solver's `run` takes besides its hyperparameters."""
  check_problem(problem)
  if dense_only:
    check_dense(problem)
  _validate.check_key("key", key)
  return _validate.check_int("passes", passes, low=1)


def check_problem(problem: Any) -> None:
  if not hasattr(problem, "XT") or not hasattr(problem, "loss"):
    raise ValueError(f"Expected problem to come from dpgcd_jax.make_problem, got problem={problem!r}.")


def check_private_problem(problem: Any) -> None:
  """What every private entry point calls first: refuses the opt-in `smoothness="from_data_nonprivate"` by type.

  A [`DataSmoothness.NONPRIVATE`][dpgcd_jax.problem.DataSmoothness] smoothness is computed from the raw data
  and would set the run's steps and clipping thresholds without noise: no `(epsilon, delta)` guarantee
  holds for it. It is refused on its type alone, before any data is read.

  Raises:
    TypeError: for a problem built with `smoothness="from_data_nonprivate"`.
  """
  if getattr(problem, "smoothness_source", None) is problem_lib.DataSmoothness.NONPRIVATE:
    raise TypeError(
        "Expected a problem without smoothness='from_data_nonprivate' for a private fit, got "
        "smoothness_source='data_nonprivate': that smoothness is computed from the raw data and used "
        "without noise, so the (epsilon, delta) guarantee would not hold. Declare public smoothness= "
        "constants or feature_bound= in make_problem, or pass neither and let fit release a feature "
        "bound privately; for a non-private study, call the solver's run with explicit params.")


def check_dense(problem: Any) -> None:
  """Rejects sparse features for solvers that gather whole rows (DP-SGD)."""
  if problem_lib.is_sparse(problem):
    raise ValueError("Expected a problem with dense features for this solver (it gathers whole "
                     "rows), got sparse features: pass X.toarray() to make_problem, or use DP-GCD / "
                     "DP-CD, which read sparse features in O(nnz).")


def as_params(params: Any, dtype: Any, *, positive: tuple[str, ...], non_negative: tuple[str, ...],
              num_features: int, clip_may_be_vector: bool = True) -> Any:
  """Validates a hyperparameter NamedTuple and casts its leaves to `dtype` arrays.

  `positive` fields must be > 0 (`clip` may be inf), `non_negative` ones (the noise
  multipliers) >= 0 and finite, or `None` for a multiplier the run's options do not use (no
  leaf: it stays `None`). `clip` must have shape () or (p,) and be finite when any noise is
  added (an infinite clip means an infinite sensitivity).
  """
  non_negative = tuple(name for name in non_negative if getattr(params, name) is not None)
  for name in positive + non_negative:
    _validate.check_positive(name, getattr(params, name), allow_zero=name in non_negative,
                             allow_inf=name == "clip")
  clip_shape = jnp.shape(params.clip)
  allowed = ((), (num_features,)) if clip_may_be_vector else ((),)
  if clip_shape not in allowed:
    raise ValueError(f"Expected clip of shape {' or '.join(map(str, allowed))}, got clip.shape={clip_shape}.")
  check_finite_clip_with_noise(params.clip, [getattr(params, name) for name in non_negative])
  params = params._replace(**{name: clipping.rounded_up(getattr(params, name), dtype) for name in non_negative})
  return jax.tree.map(lambda x: _validate.on_device(x, dtype), params)


def check_finite_clip_with_noise(clip: Any, noises: list[Any]) -> None:
  """Rejects `clip = inf` together with a positive noise multiplier (values known only)."""
  values = [clip] + noises
  if not all(_validate.is_concrete(v) for v in values):
    return
  if not np.all(np.isfinite(np.asarray(clip, float))) and any(np.any(np.asarray(v, float) > 0) for v in noises):
    raise ValueError(
        f"Expected a finite clip when noise is added (clip=inf means infinite sensitivity), got "
        f"clip={clip!r}.")


def warn_if_not_public(problem: problem_lib.Problem, noises: tuple[Any, ...]) -> None:
  """`run` with noise on a problem whose smoothness was computed from the raw data warns."""
  if problem.smoothness_source is not problem_lib.DataSmoothness.DATA:
    return
  noisy = any(not _validate.is_concrete(v) or np.any(np.asarray(v) > 0) for v in noises)
  if noisy:
    warnings.warn(
        "run with noise on a problem whose smoothness M was computed from the raw data: M is not "
        "public, so the run is not differentially private. Declare smoothness= or feature_bound= "
        "in make_problem, or use fit (which releases a feature bound privately).",
        _validate.PrivacyLeakWarning, stacklevel=4)  # the caller of a solver's run


def fail_closed(params: Any, w: Array) -> Array:
  """`w`, or NaN everywhere when a hyperparameter is invalid (negative, NaN, zero step or clip).

  Host validation rejects such values, but under `jax.jit` / `jax.vmap` they are tracers:
  an invalid noise multiplier must never turn into a noiseless release.
  """
  ok = jnp.all(jnp.asarray([jnp.all(jnp.asarray(leaf) >= 0) for leaf in jax.tree.leaves(params)]))
  ok &= jnp.all(jnp.asarray(params.step_size) > 0) & jnp.all(jnp.asarray(params.clip) > 0)
  return jnp.where(ok, w, jnp.nan)
