"""The scan driver every solver's run shares: a loop over passes whose trip count is a runtime value.

[`run_steps`][dpgcd_jax.solvers.driver.run_steps] runs the passes of a step function, step `t`
drawing from `fold_in(key, t)` ([`step_key`][dpgcd_jax.solvers.driver.step_key]); the number of
passes is a runtime value of the compiled program, so a new `passes` (or a new budget) never
recompiles. The per-step and per-pass records go into buffers of a public size,
[`pass_capacity`][dpgcd_jax.solvers.driver.pass_capacity]. [`dpgcd_jax.solvers.base.run`][] (every
solver's `run`) drives its solver's step with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

Array = jax.Array

MIN_RECORDED_STEPS = 1024


def step_key(key: Array, t: Array | int) -> Array:
  """The key of step `t`: `fold_in(key, t)` (the optax transforms use the same rule)."""
  return jax.random.fold_in(key, t)


def pass_capacity(passes: int, steps_per_pass: int) -> int:
  """The public bucket of a run's per-step records: how many passes its buffers hold.

  The smallest power of two >= `passes` whose buffers hold at least
  `MIN_RECORDED_STEPS` steps, so that every run of up to 1024 DP-GCD iterations (and
  nearby numbers of passes of the other solvers) shares one compiled program. A function of
  public sizes only (`passes` and the steps of a pass).
  """
  floor = -(-MIN_RECORDED_STEPS // max(1, int(steps_per_pass)))
  return 1 << (max(int(passes), floor) - 1).bit_length()


def run_steps(
    step: Callable[[Array, Any], tuple[Any, Any]],
    state: Any,
    key: Array,
    *,
    passes: Any,
    steps_per_pass: int,
    capacity: int | None = None,
    record: Callable[[Any], Array] | None = None,
    on_pass: Callable[[Array], None] | None = None,
) -> tuple[Any, Any, Array | None]:
  """Runs `passes` passes of `steps_per_pass` steps of `step(key_t, state) -> (state, output)`.

  Step `t` draws from `fold_in(key, t)`. `passes` may be a traced integer: the passes are a
  `lax.fori_loop` with a runtime trip count (a `while_loop`), each pass a `lax.scan` of
  `steps_per_pass` steps, so a new number of passes reuses the compiled program. The
  per-step outputs (when `output` is not None) go into a buffer of `capacity *
  steps_per_pass` entries, and `record(state)` (when given) is evaluated at the initial state
  and after every pass into a buffer of `capacity + 1` entries; `capacity` (static, >=
  `passes`) is required for either. Entries past `passes * steps_per_pass` (resp.
  `passes + 1`) are zeros: the caller keeps the leading ones. `on_pass` (when given) is a host
  callback called with the pass index after every pass (`dpgcd_jax.progress.tick`).

  Returns:
    The final state, the (padded) per-step outputs or None, the (padded) records or None.
  """
  ts_in_pass = jnp.arange(steps_per_pass)
  output_shape = jax.eval_shape(lambda s: step(step_key(key, 0), s)[1], state)
  has_outputs = bool(jax.tree.leaves(output_shape))
  outputs, records = None, None
  if has_outputs or record is not None:
    if capacity is None:
      raise ValueError("Expected a capacity (a static bound on passes) for the per-step outputs and records.")
    if has_outputs:
      size = capacity * steps_per_pass
      outputs = jax.tree.map(lambda s: jnp.zeros((size,) + s.shape, s.dtype), output_shape)
    if record is not None:
      first = record(state)
      records = jnp.zeros((capacity + 1,) + first.shape, first.dtype).at[0].set(first)

  def one_step(state, t):
    return step(step_key(key, t), state)

  def one_pass(pass_index, carry):
    state, outputs, records = carry
    state, out = jax.lax.scan(one_step, state, pass_index * steps_per_pass + ts_in_pass)
    if outputs is not None:
      start = pass_index * steps_per_pass
      outputs = jax.tree.map(lambda buf, o: jax.lax.dynamic_update_slice_in_dim(buf, o, start, 0), outputs, out)
    if records is not None:
      records = records.at[pass_index + 1].set(record(state))
    if on_pass is not None:
      jax.debug.callback(on_pass, pass_index)
    return state, outputs, records

  return jax.lax.fori_loop(0, passes, one_pass, (state, outputs, records))
