"""A data set prepared for the experiments: float32 problem, float64 problem, reference optimum."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import data as data_lib
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import reference


@dataclasses.dataclass
class Prepared:
  """A data set as a float32 problem (private runs) and a float64 one (objectives, `F*`).

  Attributes:
    dataset: the registry's [`dpgcd_jax.data.Dataset`][].
    private: float32 problem of the private runs.
    exact: float64 problem of the objectives and the reference optimum.
    f_star, f_zero: `F*` and `F(w^0)`.
    solution: the reference optimum `w*` (float64 NumPy).
    reference_seconds: time of the reference solve.
    reference_method: how `w*` was found (`reference_solution`).
    reference_gap: its optimality certificate, `max_j dist(-grad_j f(w*), d psi_j(w*_j))`.
  """

  dataset: data_lib.Dataset
  private: problem_lib.Problem
  exact: problem_lib.Problem
  f_star: float
  f_zero: float
  solution: np.ndarray
  reference_seconds: float
  reference_method: str = ""
  reference_gap: float = float("nan")

  @property
  def solution_nnz(self) -> int:
    return int(np.count_nonzero(self.solution))

  def relative_error(self, w: Any) -> np.ndarray:
    """`(F(w) - F*) / (F(w^0) - F*)` in float64, for one iterate or a batch (leading axes)."""
    return relative_error(self, w)


def build(dataset: data_lib.Dataset) -> Prepared:
  """The float64 problem and reference optimum, and the float32 problem of the private runs.

  Both come from [`dpgcd_jax.data.Dataset.to_problem`][], which declares the smoothness
  from the standardized data (the paper's protocol, NOT private: see its docstring). The
  float64 problem needs JAX's x64 mode (`with jax.enable_x64(True):`).
  """
  exact = dataset.to_problem(np.float64)
  return prepare(dataset, dataset.to_problem(np.float32), exact)


LARGE_P = 20_000


def reference_solution(dataset: Any, exact: problem_lib.Problem) -> tuple[np.ndarray, str]:
  """The optimum `w*` (float64) and how it was found.

  [`dpgcd_jax.reference.solve`][] (coordinate descent to a subdifferential distance of
  1e-9), except for sparse l1-logistic problems with more than `LARGE_P` features, where
  its O(p) work per coordinate makes an epoch O(p^2): scikit-learn's liblinear solves the
  same objective (`C = 1 / (n lambda)`, no intercept, no ridge) to tolerance 1e-8.
  """
  import warnings  # pylint: disable=g-import-not-at-top
  if (exact.num_features > LARGE_P and dataset.loss.name == "logistic" and float(dataset.l2) == 0.0
      and type(dataset.penalty).__name__ == "L1"):
    from sklearn.linear_model import LogisticRegression  # pylint: disable=g-import-not-at-top
    strength = float(np.max(dataset.penalty.strength))
    with warnings.catch_warnings():
      warnings.simplefilter("ignore")
      model = LogisticRegression(penalty="l1", solver="liblinear", C=1.0 / (dataset.n * strength),
                                 fit_intercept=False, tol=1e-8, max_iter=100_000).fit(dataset.X, dataset.y)
    return np.asarray(model.coef_.ravel(), np.float64), "scikit-learn liblinear (tol 1e-8)"
  solution = reference.solve(exact, tol=1e-9)
  return np.asarray(solution.w, np.float64), "dpgcd_jax.reference.solve (tol 1e-9)"


def prepare(dataset: Any, private: problem_lib.Problem, exact: problem_lib.Problem) -> Prepared:
  start = time.perf_counter()
  w, method = reference_solution(dataset, exact)
  seconds = time.perf_counter() - start
  f_star = float(kernels.objective(exact, jnp.asarray(w)))
  w0 = dp_gcd.init(exact).w
  f_zero = float(kernels.objective(exact, w0))
  gap = float(reference.optimality_gap(exact, jnp.asarray(w)))
  return Prepared(dataset, private, exact, f_star, f_zero, w, seconds, method, gap)


@jax.jit
def _objectives(problem: problem_lib.Problem, w: jax.Array) -> jax.Array:
  return jax.vmap(lambda v: kernels.objective(problem, v))(w)


def relative_error(problem: Prepared, w: Any) -> np.ndarray:
  """`(F(w) - F*) / (F(w^0) - F*)` in float64, for one iterate or a batch (leading axes)."""
  w = jnp.asarray(w, jnp.float64)
  flat = w.reshape(-1, w.shape[-1])
  f = np.asarray(_objectives(problem.exact, flat))
  return ((f - problem.f_star) / (problem.f_zero - problem.f_star)).reshape(w.shape[:-1])
