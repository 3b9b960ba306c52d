"""The paper's experiment (Figure 1): relative error against passes over the data.

For every data set, algorithm and budget of passes, the grid of (step size, clip) x seeds
runs as ONE jitted, vmapped call at epsilon = 1, delta = 1 / n^2. The best grid point (mean
relative error over seeds) is reported with its spread. Relative error:
``(F(w) - F*) / (F(w^0) - F*)`` with ``F*`` from :func:`dpgcd_jax.reference.solve`.

Passes are counted as in the paper: one DP-GCD iteration = ``p`` DP-CD steps = one DP-SGD
epoch (``n / batch_size`` steps). The coordinate smoothness constants are derived from the
(standardized) data and treated as public, as in the paper (see :mod:`dpgcd_jax.problem`).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any, Callable, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import tqdm

from dpgcd_jax import data as data_lib
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import accounting
from dpgcd_jax.solvers import dp_cd
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import dp_sgd
from dpgcd_jax.solvers import reference

EPSILON = 1.0


@dataclasses.dataclass(frozen=True)
class Algorithm:
  """How to run one algorithm on a grid: its label, budget calibration and vmapped run."""

  name: str
  label: str
  make_params: Callable[[Any, Any, float], Any]  # (step sizes, clips, noise) -> Params
  run: Callable[..., Any]  # (problem, params, key, passes) -> Result
  calibrate: Callable[[problem_lib.Problem, float, int], float]  # (problem, delta, passes) -> noise
  step_sizes: tuple[float, ...]


def _sgd_batch_size(problem: problem_lib.Problem) -> int:
  """Expected batch size of DP-SGD: about 100 steps per pass (at least 1 example)."""
  return max(1, problem.num_examples // 100)


def _gcd(selection: str, update: str) -> tuple[Callable, Callable]:
  def calibrate(problem, delta, passes):
    cal = accounting.calibrate_gcd(EPSILON, delta, steps=passes, selection=selection, update=update)
    return (cal.selection_noise, cal.update_noise)

  def run(problem, params, key, passes):
    return dp_gcd.run(problem, params, key, steps=passes, selection=selection, update=update,
                      store_objective=False)

  return calibrate, run


_gcd_calibrate, _gcd_run = _gcd("laplace", "laplace")
_gumbel_calibrate, _gumbel_run = _gcd("gumbel", "gaussian")


def _sgd_calibrate(problem, delta, passes):
  batch = _sgd_batch_size(problem)
  steps = passes * (problem.num_examples // batch)
  slack = (1.0 + np.exp(EPSILON)) * steps * dp_sgd.TRUNCATION_PROBABILITY
  return accounting.calibrate_sgd(EPSILON, delta - slack, steps=steps,
                                  sampling_rate=batch / problem.num_examples).update_noise


GCD_STEPS = (0.3, 1.0)
CD_STEPS = (0.03, 0.1, 0.3, 1.0)
SGD_STEPS = (1e-4, 1e-3, 1e-2, 1e-1)
ALGORITHMS = {
    "dp_gcd": Algorithm(
        "dp_gcd", "DP-GCD (paper: Laplace + Laplace)",
        lambda g, c, noise: dp_gcd.Params(g, c, noise[0], noise[1]), _gcd_run, _gcd_calibrate, GCD_STEPS),
    "dp_gcd_gumbel": Algorithm(
        "dp_gcd_gumbel", "DP-GCD (ours: Gumbel + Gaussian)",
        lambda g, c, noise: dp_gcd.Params(g, c, noise[0], noise[1]), _gumbel_run, _gumbel_calibrate,
        GCD_STEPS),
    "dp_cd": Algorithm(
        "dp_cd", "DP-CD",
        lambda g, c, noise: dp_cd.Params(g, c, noise),
        lambda pb, prm, k, passes: dp_cd.run(pb, prm, k, passes=passes, store_objective=False),
        lambda pb, delta, passes: accounting.calibrate_cd(EPSILON, delta, steps=passes * pb.num_features
                                                         ).update_noise, CD_STEPS),
    "dp_sgd": Algorithm(
        "dp_sgd", "DP-SGD",
        lambda g, c, noise: dp_sgd.Params(g, c, noise),
        lambda pb, prm, k, passes: dp_sgd.run(pb, prm, k, passes=passes, batch_size=_sgd_batch_size(pb),
                                              store_objective=False),
        _sgd_calibrate, SGD_STEPS),
}


@dataclasses.dataclass(frozen=True)
class Preset:
  """Sizes of a sweep. ``clips`` are per-coordinate clips: the solvers get ``c sqrt(p)``."""

  passes: tuple[int, ...]
  clips: tuple[float, ...]
  seeds: int
  datasets: tuple[str, ...]


QUICK = Preset(passes=(1, 3, 10), clips=(0.1, 0.3, 1.0, 3.0), seeds=5,
               datasets=("log1", "log2", "square", "diabetes", "breast_cancer", "permeability_qsar"))
FULL = Preset(passes=(1, 2, 5, 10, 20, 50), clips=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0), seeds=5,
              datasets=("log1", "log2", "square", "madelon_synth", "diabetes", "breast_cancer",
                        "permeability_qsar"))
PRESETS = {"quick": QUICK, "full": FULL}


@dataclasses.dataclass
class Prepared:
  """A data set as a float32 problem (private runs) and float64 one (objectives, F*)."""

  dataset: data_lib.Dataset
  private: problem_lib.Problem
  exact: problem_lib.Problem
  f_star: float
  f_zero: float
  solution_nnz: int
  reference_seconds: float


def build(dataset: data_lib.Dataset) -> Prepared:
  """The float64 problem and reference optimum, and the float32 problem of the private runs.

  Both come from :meth:`dpgcd_jax.data.Dataset.to_problem`, which declares the smoothness
  from the standardized data (the paper's protocol, NOT private: see its docstring). The
  float64 problem needs JAX's x64 mode (``with jax.enable_x64(True):``).
  """
  exact = dataset.to_problem(np.float64)
  start = time.perf_counter()
  solution = reference.solve(exact, tol=1e-9)
  seconds = time.perf_counter() - start
  f_zero = float(problem_lib.objective(exact, jnp.zeros(exact.num_features, exact.XT.dtype)))
  return Prepared(dataset, dataset.to_problem(np.float32), exact, float(solution.objective), f_zero,
                  int(jnp.sum(solution.w != 0)), seconds)


def relative_error(problem: Prepared, w: Any) -> np.ndarray:
  """``(F(w) - F*) / (F(w^0) - F*)`` in float64, for one iterate or a batch (leading axes)."""
  w = jnp.asarray(w, jnp.float64)
  flat = w.reshape(-1, w.shape[-1])
  f = jax.vmap(lambda v: problem_lib.objective(problem.exact, v))(flat)
  return np.asarray((f - problem.f_star) / (problem.f_zero - problem.f_star)).reshape(w.shape[:-1])


def grid_params(algorithm: Algorithm, problem: problem_lib.Problem, preset: Preset, noise: Any):
  """The (step size x clip) grid as one Params of stacked leaves, and its list of points."""
  # Preset clips are per coordinate. Coordinate methods take them as they are (a scalar clip is
  # C_j = c sqrt(M_j / beta) = c for standardized columns); DP-SGD clips the l2 norm of the
  # whole gradient, c sqrt(p) for p coordinates of size c.
  scale = float(np.sqrt(problem.num_features)) if algorithm.name == "dp_sgd" else 1.0
  points = [(g, c * scale) for g, c in itertools.product(algorithm.step_sizes, preset.clips)]
  steps = np.array([p[0] for p in points], np.float32)
  clips = np.array([p[1] for p in points], np.float32)
  noise = jax.tree.map(lambda x: np.full(len(points), x, np.float32), noise)
  return algorithm.make_params(steps, clips, noise), points


def seed_keys(seeds: int) -> jax.Array:
  return jax.random.split(jax.random.key(20230425), seeds)


def sweep(algorithm: Algorithm, problem: problem_lib.Problem, params: Any, keys: jax.Array,
          passes: int) -> jax.Array:
  """Final iterates of every (grid point, seed): ONE jitted call, vmapped over both."""
  per_seed = jax.vmap(lambda prm, k: algorithm.run(problem, prm, k, passes).w, in_axes=(None, 0))
  return jax.jit(jax.vmap(per_seed, in_axes=(0, None)))(params, keys)


def run_experiment(preset: Preset, *, algorithms: Sequence[str] = tuple(ALGORITHMS),
                   datasets: Iterable[str] | None = None, progress: bool = True) -> dict:
  """Runs a preset; returns every run's result, the best points and metadata."""
  names = tuple(datasets or preset.datasets)
  for name in names:
    if name not in data_lib.DATASETS:
      raise ValueError(f"Expected datasets among {tuple(data_lib.DATASETS)}, got {name!r}.")
  started = time.perf_counter()
  runs, best, info = [], [], {}
  keys = seed_keys(preset.seeds)
  jobs = [(d, a, t) for d in names for a in algorithms for t in preset.passes]
  bar = tqdm.tqdm(total=len(jobs), disable=not progress, desc="sweep", unit="job")
  for name in names:
    problem = build(data_lib.get(name))
    delta = 1.0 / problem.private.num_examples**2
    info[name] = dict(n=problem.private.num_examples, p=problem.private.num_features,
                      loss=problem.dataset.loss.name, penalty=type(problem.dataset.penalty).__name__.lower(),
                      penalty_strength=problem.dataset.penalty_strength, l2=problem.dataset.l2,
                      solution_nnz=problem.solution_nnz, f_star=problem.f_star, delta=delta,
                      reference_seconds=problem.reference_seconds)
    for algo_name in algorithms:
      algorithm = ALGORITHMS[algo_name]
      for passes in preset.passes:
        bar.set_postfix_str(f"{name} {algo_name} {passes} passes")
        noise = algorithm.calibrate(problem.private, delta, passes)
        params, points = grid_params(algorithm, problem.private, preset, noise)
        t0 = time.perf_counter()
        w = sweep(algorithm, problem.private, params, keys, passes)
        errors = relative_error(problem, w)  # (grid, seeds)
        seconds = time.perf_counter() - t0
        nnz = np.asarray(jnp.sum(w != 0, axis=-1))
        for (step_size, clip), err_row, nnz_row in zip(points, errors, nnz):
          for seed, (err, k) in enumerate(zip(err_row, nnz_row)):
            runs.append(dict(dataset=name, algorithm=algo_name, passes=passes, step_size=step_size,
                             clip=clip, seed=seed, relative_error=float(err), nnz=int(k),
                             noise=json_noise(noise)))
        i = int(np.argmin(errors.mean(axis=1)))
        best.append(dict(dataset=name, algorithm=algo_name, passes=passes, step_size=points[i][0],
                         clip=points[i][1], mean=float(errors[i].mean()), std=float(errors[i].std()),
                         min=float(errors[i].min()), max=float(errors[i].max()),
                         nnz=float(nnz[i].mean()), noise=json_noise(noise), grid_seconds=seconds))
        bar.update()
  bar.close()
  return dict(runs=runs, best=best, datasets=info, epsilon=EPSILON,
              preset=dataclasses.asdict(preset), seconds=time.perf_counter() - started,
              versions=versions())


def json_noise(noise: Any) -> Any:
  return [float(x) for x in noise] if isinstance(noise, tuple) else float(noise)


def versions() -> dict:
  import importlib.metadata as md  # pylint: disable=g-import-not-at-top
  out = {}
  for package in ("dpgcd_jax", "jax", "jaxlib", "numpy", "dp-accounting", "scikit-learn"):
    try:
      out[package] = md.version(package)
    except md.PackageNotFoundError:
      out[package] = None
  out["backend"] = jax.default_backend()
  return out
