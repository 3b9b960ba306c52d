"""Adversarial neighbouring data sets for the audit: `D'` differs from `D` in one extreme record.

An audit ([`dpgcd_jax.privacy.auditing`][]) is as strong as its pair `(D, D')`: the further
apart the mechanism's outputs on the two, the closer its lower bound can get to the true
epsilon. [`adversarial_neighbour`][dpgcd_jax.privacy.audit_neighbours.adversarial_neighbour]
replaces one record by an extreme one whose gradient at the solvers' start opposes the
original's; [`adversarial_pair`][dpgcd_jax.privacy.audit_neighbours.adversarial_pair] gives two
such data sets, whose differing records' clipped gradients move every coordinate by the full
sensitivity `2 C_j / n`. Both data sets carry the problem's public smoothness: a data-derived
`M` would differ between them and be audited too, so only the mechanism itself is audited.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import problem as problem_lib


def adversarial_neighbour(
    problem: problem_lib.Problem,
    *,
    index: int = 0,
    feature_scale: float = 1e3,
    target: float | None = None,
) -> problem_lib.Problem:
  """`D'`: record `index` replaced by an extreme record whose gradient opposes the original.

  The new record is `x' = feature_scale * v` with a sign vector `v` in {-1, +1}^p and label
  `y' = target` (default: the original label `y_index`, e.g. for the logistic loss). `v`
  is chosen so that the new record's gradient at the solvers' start `w^0 = prox(0)` has, in
  every coordinate, the sign opposite to the original record's gradient (`+` where that is
  0). For a GLM loss at `w^0 = 0` the new gradient is `phi'(0, y') feature_scale v`, so
  when `feature_scale |phi'(0, y')| >= C_j` it is clipped to `-+C_j`; when the original
  record is itself clipped (e.g. it came from this function: see
    [`adversarial_pair`][dpgcd_jax.privacy.audit_neighbours.adversarial_pair])
  the clipped coordinate gradient moves by exactly the sensitivity `2 C_j / n`. For other
  losses `v` is a heuristic (signs of the gradient at `feature_scale * 1`).

  Multi-step runs move `w` and hence the margin `x' . w`. For regression losses take
  `feature_scale` moderate and `target` huge (e.g. 1 and 1e6): `phi'(z, y') = z - y'`
  stays close to `-y'` and the record stays clipped along the whole run. For the logistic
  loss a large margin saturates `phi'` and the gradient change can drop below `2 C_j`
  after the first steps (the audit stays valid, only weaker).

  The public smoothness is kept: both data sets carry `problem.smoothness` (a data-derived
  `M` would otherwise differ between them and be audited too).

  Args:
    problem: `D`, from [`dpgcd_jax.make_problem`][].
    index: the record to replace, in [0, n).
    feature_scale: `|x'_j| > 0`.
    target: label of the new record (default: `y_index`).

  Returns:
    The neighbouring problem `D'` (same shapes, loss, `l2`, penalty and smoothness).

  Raises:
    ValueError: for a bad argument, or when the new record's gradient at `w^0` vanishes in
      some coordinate (e.g. squared loss with `y' = 0`: pass a nonzero `target`).
  """
  n = problem.num_examples
  index = _validate.check_int("index", index, low=0)
  if index >= n:
    raise ValueError(f"Expected index in [0, {n}), got index={index}.")
  _validate.check_positive("feature_scale", feature_scale)
  X, y = np.asarray(problem.X), np.asarray(problem.y)
  label = float(y[index]) if target is None else target
  _validate.check_number("target", label)
  w0 = problem.penalty.prox(jnp.zeros(problem.num_features, problem.XT.dtype), 1.0)
  grad = jax.grad(problem.loss.fn)
  g_old = np.asarray(grad(w0, problem.X[index], problem.y[index]))
  ones = jnp.ones(problem.num_features, problem.XT.dtype)
  g_probe = np.asarray(grad(w0, feature_scale * ones, jnp.asarray(label, problem.XT.dtype)))
  if np.any(g_probe == 0.0):
    raise ValueError(
        f"Expected the new record's gradient at w^0 to be nonzero, got zero in coordinates "
        f"{np.flatnonzero(g_probe == 0.0)[:5].tolist()} with target={label!r}: pass a target "
        f"with phi'(0, target) != 0.")
  wanted = np.where(g_old > 0.0, -1.0, 1.0)
  v = wanted * np.sign(g_probe)
  X = X.copy()
  y = y.copy()
  X[index] = feature_scale * v
  y[index] = label
  return problem_lib.make_problem(X, y, problem.loss, l2=float(problem.l2), penalty=problem.penalty,
                                  smoothness=problem.smoothness)


def adversarial_pair(
    problem: problem_lib.Problem,
    *,
    index: int = 0,
    feature_scale: float = 1e3,
    target: float | None = None,
) -> tuple[problem_lib.Problem, problem_lib.Problem]:
  """`(D, D')`, both with an extreme record `index`, of opposite gradients.

  `D = adversarial_neighbour(problem)` and `D' = adversarial_neighbour(D)`: the differing
  records are `(x', y')` and `(-x', y')` for GLM losses, whose clipped gradients at
  `w^0` are `+-C_j` (when `feature_scale |phi'(0, y')| >= C_j`): every coordinate
  gradient moves by the full sensitivity `2 C_j / n`. Arguments as in
  [`adversarial_neighbour`][dpgcd_jax.privacy.audit_neighbours.adversarial_neighbour].
  """
  first = adversarial_neighbour(problem, index=index, feature_scale=feature_scale, target=target)
  return first, adversarial_neighbour(first, index=index, feature_scale=feature_scale,
                                      target=target)
