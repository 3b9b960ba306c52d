"""The non-private optimum `F*`: cyclic proximal coordinate descent with a certificate.

Epochs of cyclic coordinate steps `w_j <- prox_{psi_j / M_j}(w_j - grad_j f(w) / M_j)`
(exact coordinate minimization for least squares, where `M_j` is the exact curvature),
with the GLM margins kept in O(n) per step, until the optimality certificate

$$
\\max_j \\operatorname{dist}(-\\nabla_j f(w), \\partial \\psi_j(w_j)) \\le \\text{tol}
$$

holds (zero iff `w` is a minimizer of `F = f + psi`). NOT private: it reads the raw data;
use it to measure the relative error `(F(w) - F*) / (F(w^0) - F*)` of private solvers.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpgcd_jax import _validate
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.solvers import _coordinate

Array = jax.Array


class Solution(NamedTuple):
  """The reference optimum and its certificate.

  Attributes:
    w: the minimizer found.
    objective: `F(w)`.
    subdiff_distance: `max_j dist(-grad_j f(w), d psi_j(w_j))`, the optimality certificate.
    epochs: number of epochs run.
    converged: whether `subdiff_distance <= tol` (else `max_epochs` was reached).
  """

  w: Array
  objective: Array
  subdiff_distance: Array
  epochs: Array
  converged: Array


def optimality_gap(problem: problem_lib.Problem, w: Array) -> Array:
  """`max_j dist(-grad_j f(w), d psi_j(w_j))`."""
  return jnp.max(problem.penalty.subdiff_distance(w, kernels.gradient(problem, w)))


def solve(problem: problem_lib.Problem, *, tol: float = 1e-10, max_epochs: int = 100_000) -> Solution:
  """Minimizes `F` to `subdiff_distance <= tol` (see the module docstring)."""
  _validate.check_positive("tol", tol)
  max_epochs = _validate.check_int("max_epochs", max_epochs, low=1)
  problem_lib.check_smoothness(problem)  # non-private: a data-derived M may be checked here
  return _solve(problem, jnp.asarray(tol, problem.XT.dtype), max_epochs=max_epochs)


@functools.partial(jax.jit, static_argnames=("max_epochs",))
def _solve(problem, tol, *, max_epochs):
  M = problem_lib.coordinate_smoothness(problem)
  no_clipping = jnp.full_like(M, jnp.inf)

  def coordinate_step(j, state):
    g_j = kernels.clipped_coordinate_gradient(problem, state.w, state.margins, no_clipping, j)
    return _coordinate.prox_step(problem, state, j, g_j, 1.0, M)

  def epoch(carry):
    state, _, epochs = carry
    state = jax.lax.fori_loop(0, problem.num_features, coordinate_step, state)
    return state, optimality_gap(problem, state.w), epochs + 1

  def not_done(carry):
    _, gap, epochs = carry
    return (gap > tol) & (epochs < max_epochs)

  state = _coordinate.init(problem)
  state, gap, epochs = jax.lax.while_loop(
      not_done, epoch, (state, optimality_gap(problem, state.w), jnp.zeros((), jnp.int32)))
  return Solution(state.w, kernels.objective(problem, state.w), gap, epochs, gap <= tol)
