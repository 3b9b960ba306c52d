"""What the coordinate solvers (DP-GCD, DP-CD, the reference) share: state and prox step."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpgcd_jax import kernels
from dpgcd_jax import penalties
from dpgcd_jax import problem as problem_lib

Array = jax.Array


class State(NamedTuple):
  """The state of a coordinate solver (DP-GCD, DP-CD).

  Attributes:
    w: (p,) the iterate.
    margins: (n,) `X w`, kept up to date in O(n) per step for GLM losses (None otherwise).
    bounds: None, or DP-GCD's sticky released bounds (`scale="per-step"`, [`dpgcd_jax.solvers.scale_free`][]).
  """

  w: Array
  margins: Array | None
  bounds: Array | None = None


def init(problem: problem_lib.Problem) -> State:
  """`w^0 = prox(0)` (the origin for the built-in penalties) and its margins."""
  w0 = problem.penalty.prox(jnp.zeros(problem.num_features, problem.XT.dtype), 1.0)
  return State(w0, kernels.init_margins(problem, w0))


def prox_step(problem: problem_lib.Problem, state: State, j: Array, g_j: Array, step_size: Array,
              M: Array) -> State:
  """`w_j <- prox_{gamma_j psi_j}(w_j - gamma_j g_j)`, `gamma_j = step_size / M_j`; O(n)."""
  gamma = jnp.where(step_size > 0, step_size / M[j], jnp.nan)  # fail closed under tracing
  new_wj = penalties.coordinate(problem.penalty, j).prox(state.w[j] - gamma * g_j, gamma)
  return set_coordinate(problem, state, j, new_wj)


def set_coordinate(problem: problem_lib.Problem, state: State, j: Array, new_wj: Array) -> State:
  """`w_j <- new_wj` and the margins after it: O(n)."""
  margins = kernels.update_margins(problem, state.margins, j, new_wj - state.w[j])
  w = jnp.where(jnp.arange(state.w.shape[0]) == j, new_wj, state.w)  # no scatter: vmaps well
  return state._replace(w=w, margins=margins)

