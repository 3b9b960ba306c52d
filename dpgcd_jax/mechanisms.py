"""The noise mechanisms of the coordinate solvers: each one a device-side sampler and its cost.

A mechanism is a small frozen (hashable, static under ``jax.jit``) object with

- a device-side sampler: ``select(key, scores_fn, g, w, M, penalty, scale, rule)`` for a
  selection, ``perturb(key, g_j, scale)`` for an update (``scale`` = multiplier x sensitivity);
- ``event(multiplier)``: the host-side privacy event of one use with that multiplier
  (:mod:`dpgcd_jax.privacy.events`), which the ledger composes;
- ``zcdp_per_unit``: ``rho`` of one use times ``multiplier^2`` (splits a budget between a
  selection and an update, ``selection_share`` of :func:`dpgcd_jax.privacy.calibrate_gcd`).

Solvers and the accounting look mechanisms up by object or by name (``"laplace"``,
``"gumbel"``, ``"gaussian"`` are sugar for the objects below). Adding a mechanism is one
class in this file, registered in :data:`SELECTIONS` or :data:`UPDATES`, with a statistical
test of its sampler (``tests/test_noise.py``) and of its event against dp_accounting.

Privacy arguments (sensitivities in :mod:`dpgcd_jax.solvers.greedy`): report-noisy-max with
Laplace noise ``b Delta_bar`` is ``2 / b``-DP; the Gumbel-max (exponential mechanism) with
scale ``b Delta_bar`` is ``2 / b``-DP and ``2 / b``-bounded-range; a Laplace update of scale
``b' Delta_j`` is ``1 / b'``-DP (the Laplace mechanism); a Gaussian update of standard deviation
``s Delta_j`` is the Gaussian mechanism with multiplier ``s``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp

from dpgcd_jax import penalties
from dpgcd_jax.privacy import events

Array = jax.Array


def _pure_epsilon(numerator: float, multiplier: float) -> float:
  return math.inf if multiplier == 0.0 else numerator / multiplier


@dataclasses.dataclass(frozen=True)
class LaplaceNoisyMax:
  """Paper-faithful selection: Laplace noise, inside ``|.|`` where the score allows it."""

  name: str = "laplace"
  zcdp_per_unit: float = 2.0  # (2 / b)^2 / 2: the zCDP of a pure 2 / b step

  def select(self, key: Array, score: Callable[..., Array], g: Array, w: Array, M: Array,
             penalty: Any, scale: Array, rule: str) -> Array:
    z = scale * jax.random.laplace(key, g.shape, g.dtype)
    if rule == "gs-s" and isinstance(penalty, (penalties.Zero, penalties.L2)):
      # Score |u_j + c_j| with c_j public, V-shaped without plateau (solvers.greedy).
      return jnp.argmax(score(g + jnp.sqrt(M) * z, w, M, penalty))
    return jnp.argmax(score(g, w, M, penalty) + z)  # report-noisy-max

  def event(self, multiplier: float) -> events.PrivacyEvent:
    return events.PureDp(_pure_epsilon(2.0, multiplier))


@dataclasses.dataclass(frozen=True)
class GumbelMax:
  """Exponential mechanism: ``argmax score_j + b Delta_bar G_j``, ``G_j ~ Gumbel(0, 1)``."""

  name: str = "gumbel"
  zcdp_per_unit: float = 0.5  # (2 / b)^2 / 8: bounded range

  def select(self, key: Array, score: Callable[..., Array], g: Array, w: Array, M: Array,
             penalty: Any, scale: Array, rule: str) -> Array:
    del rule
    return jnp.argmax(score(g, w, M, penalty) + scale * jax.random.gumbel(key, g.shape, g.dtype))

  def event(self, multiplier: float) -> events.PrivacyEvent:
    return events.BoundedRange(_pure_epsilon(2.0, multiplier))


@dataclasses.dataclass(frozen=True)
class LaplaceNoise:
  """Update noise ``Lap(b' Delta_j)``: the Laplace mechanism, ``1 / b'``-DP."""

  name: str = "laplace"
  zcdp_per_unit: float = 0.5  # (1 / b')^2 / 2

  def perturb(self, key: Array, value: Array, scale: Array) -> Array:
    return value + scale * jax.random.laplace(key, (), value.dtype)

  def event(self, multiplier: float) -> events.PrivacyEvent:
    return events.Laplace(_pure_epsilon(1.0, multiplier))


@dataclasses.dataclass(frozen=True)
class GaussianNoise:
  """Update noise ``N(0, (s Delta_j)^2)``: the Gaussian mechanism, ``1 / (2 s^2)``-zCDP."""

  name: str = "gaussian"
  zcdp_per_unit: float = 0.5

  def perturb(self, key: Array, value: Array, scale: Array) -> Array:
    return value + scale * jax.random.normal(key, (), value.dtype)

  def event(self, multiplier: float) -> events.PrivacyEvent:
    return events.Gaussian(multiplier)


SELECTIONS = {m.name: m for m in (LaplaceNoisyMax(), GumbelMax())}
UPDATES = {m.name: m for m in (LaplaceNoise(), GaussianNoise())}


def selection(mechanism: Any) -> Any:
  """The selection mechanism object for a name or an object (ValueError naming it otherwise)."""
  return _lookup("selection", mechanism, SELECTIONS, "select")


def update(mechanism: Any) -> Any:
  """The update mechanism object for a name or an object (ValueError naming it otherwise)."""
  return _lookup("update", mechanism, UPDATES, "perturb")


def _lookup(kind: str, mechanism: Any, registry: dict[str, Any], method: str) -> Any:
  if isinstance(mechanism, str) and mechanism in registry:
    return registry[mechanism]
  if not isinstance(mechanism, str) and hasattr(mechanism, method) and hasattr(mechanism, "event"):
    return mechanism
  raise ValueError(f"Expected {kind} to be one of {tuple(registry)} or a {kind} mechanism object "
                   f"(with {method} and event), got {kind}={mechanism!r}.")
