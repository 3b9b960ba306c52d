"""One value released from the host through an update mechanism of `dpgcd_jax.mechanisms`.

For callers outside a compiled run: the private scores (`dpgcd_jax.scoring`), the CV scores and
the class counts of the estimators, the experiments' released means. The noise is the
mechanism's own (its `perturb`, in the mechanism layer); what this module adds is one compiled
program per mechanism, shape and dtype, and a float mechanism's scale formed on the host and
rounded up (`dpgcd_jax.clipping.scale_above`).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import mechanisms

Array = jax.Array


def release(update: Any, key: Array, value: Any, multiplier: Any, sensitivity: Any) -> Array:
  """`value` plus the noise of the update mechanism `update` (float or discrete) of
  `multiplier` x `sensitivity`: for callers on the host (the private scores, the CV scores).
  One compiled program per mechanism, shape and dtype (eager, the discrete samplers' loops
  would compile at every call). A float mechanism with a known multiplier and sensitivity
  draws at their product formed on the host and rounded UP to the value's dtype
  ([`dpgcd_jax.clipping.scale_above`][]): never below the scale the ledger charges."""
  value = jnp.asarray(value)
  if not mechanisms.is_discrete(update) and _validate.is_concrete(multiplier) and (
      _validate.is_concrete(sensitivity) and np.ndim(multiplier) == 0 and np.ndim(sensitivity) == 0):
    return _perturb(update, key, value, jnp.asarray(clipping.scale_above(multiplier, sensitivity, value.dtype)))
  return _release(update, key, value, multiplier, sensitivity)


@functools.partial(jax.jit, static_argnums=0)
def _perturb(update: Any, key: Array, value: Array, scale: Array) -> Array:
  return update.perturb(key, value, scale)  # `scale`: already rounded up on the host


@functools.partial(jax.jit, static_argnums=0)
def _release(update: Any, key: Array, value: Array, multiplier: Any, sensitivity: Any) -> Array:
  if mechanisms.is_discrete(update):
    return update.perturb(key, value, multiplier, sensitivity)
  # a negative or NaN multiplier or sensitivity: a NaN scale, never a noiseless release
  return update.perturb(key, value, clipping.noise_scale(jnp.asarray(multiplier, value.dtype),
                                                         jnp.asarray(sensitivity, value.dtype)))
