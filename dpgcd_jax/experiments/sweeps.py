"""Compiled sweeps: one program per (algorithm, data set) for every budget, grid chunk and seed.

The number of steps is a traced argument of a `lax.fori_loop` over the solver's own
`step` function (the same keys as the solver's `run`: `fold_in(key, t)`), and the grid is
cut into chunks of `chunk` points, so one executable serves a whole data set. DP-SGD maps
over the seeds and vmaps over the grid points (its Poisson sampler branches on the sampled
batch size, which must not be batched); the coordinate methods vmap over every
(point, seed) run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import clipping
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.experiments.algorithms import Algorithm
from dpgcd_jax.experiments.algorithms import clip_scale
from dpgcd_jax.solvers import driver
from dpgcd_jax.solvers import guards

ROOT_SEED = 20230425


def _one_run(algorithm: Algorithm) -> Callable:
  def one(problem, params, key, steps):
    step = algorithm.make_step(problem)
    state = jax.lax.fori_loop(0, steps, lambda t, s: step(driver.step_key(key, t), s, params),
                              algorithm.init(problem))
    return guards.fail_closed(params, state.w)
  return one


@functools.cache
def _compiled(algorithm: Algorithm) -> Callable:
  """The jitted sweep of `algorithm` (JAX caches one executable per data-set shape), cached on
  the algorithm itself, never on its name (a replaced registry entry, or a copy with other
  mechanisms, gets its own program, the one its calibration and ledger describe).

  Coordinate methods: `(problem, params[R], keys[R], steps) -> w[R, p]`, R independent
  runs. DP-SGD: `(problem, params[P], keys[S], steps) -> w[P, S, p]`, the points of one seed
  sharing its key.
  """
  one = _one_run(algorithm)
  if not algorithm.shared_keys:
    return jax.jit(jax.vmap(one, in_axes=(None, 0, 0, None)))

  def shared(problem, params, keys, steps):
    per_seed = lambda k: jax.vmap(one, in_axes=(None, 0, None, None))(problem, params, k, steps)
    return jnp.swapaxes(jax.lax.map(per_seed, keys), 0, 1)

  return jax.jit(shared)


@functools.cache
def _compiled_sequential(algorithm: Algorithm) -> Callable:
  """`(problem, params[R], keys[R], steps) -> w[R, p]` by `lax.map`: independent DP-SGD runs.

  Vmapping DP-SGD over keys would batch its sampler's branch on the batch size (every branch
  then runs); mapping keeps one branch per run.
  """
  one = _one_run(algorithm)
  return jax.jit(lambda problem, params, keys, steps: jax.lax.map(
      lambda a: one(problem, a[0], a[1], steps), (params, keys)))


def grid_params(algorithm: Algorithm, problem: problem_lib.Problem, pts: Sequence[tuple[float, float]],
            noise: Any) -> Any:
  scale = clip_scale(algorithm, problem)
  dtype = problem.XT.dtype
  steps = np.array([p[0] for p in pts], dtype)
  clips = np.array([p[1] * scale for p in pts], dtype)
  noise = jax.tree.map(lambda x: np.full(len(pts), clipping.rounded_up(x, dtype), dtype), noise)  # rounded up
  return algorithm.make_params(steps, clips, noise)


def _pad(pts: list, size: int) -> list:
  return pts + [pts[-1]] * (-len(pts) % size)


def sweep(algorithm: Algorithm, problem: problem_lib.Problem, pts: Sequence[tuple[float, float]], noise: Any,
          keys: jax.Array, passes: int, chunk: int) -> np.ndarray:
  """Final iterates of every (grid point, seed): `(len(pts), seeds, p)`; seeds shared by the points.

  The points are cut into chunks of `chunk` (the last one padded), so that one compiled
  program serves every grid and budget of the data set.
  """
  pts = list(pts)
  seeds = keys.shape[0]
  steps = jnp.int32(passes * algorithm.steps_per_pass(problem))
  fn = _compiled(algorithm)
  out = []
  padded = _pad(pts, chunk)
  for i in range(0, len(padded), chunk):
    block = padded[i:i + chunk]
    params = grid_params(algorithm, problem, block, noise)
    if algorithm.shared_keys:
      w = fn(problem, params, keys, steps)
    else:
      flat = jax.tree.map(lambda x: jnp.repeat(x, seeds), params)
      w = fn(problem, flat, jnp.tile(keys, chunk), steps).reshape(chunk, seeds, -1)
    out.append(np.asarray(w))
  return np.concatenate(out)[:len(pts)]


def independent(algorithm: Algorithm, problem: problem_lib.Problem, pts: Sequence[tuple[float, float]],
                noise: Any, keys: jax.Array, passes: int, chunk: int, seeds: int) -> np.ndarray:
  """Final iterates of independent runs `(pts[i], keys[i])`: `(len(pts), p)`.

  `chunk * seeds` runs per compiled call (the last call padded): vmapped for the coordinate
  methods, mapped one after the other for DP-SGD (`_compiled_sequential`).
  """
  pts = list(pts)
  if len(pts) != keys.shape[0]:
    raise ValueError(f"Expected one key per point, got {len(pts)} points and keys.shape={keys.shape}.")
  steps = jnp.int32(passes * algorithm.steps_per_pass(problem))
  fn = (_compiled_sequential if algorithm.shared_keys else _compiled)(algorithm)
  per_call = chunk * seeds
  key_list = list(keys)
  out = []
  for i in range(0, len(pts), per_call):
    block = _pad(pts[i:i + per_call], per_call)
    block_keys = jnp.stack(_pad(key_list[i:i + per_call], per_call))
    out.append(np.asarray(fn(problem, grid_params(algorithm, problem, block, noise), block_keys, steps)))
  return np.concatenate(out)[:len(pts)]


def seed_keys(seeds: int, stream: int = 0) -> jax.Array:
  """`seeds` keys of one stream (0: the grid seeds; 1: confirmation; 2: the private column)."""
  root = jax.random.key(ROOT_SEED)
  return jax.random.split(root if stream == 0 else jax.random.fold_in(root, stream), seeds)


def json_noise(noise: Any) -> Any:
  """A noise multiplier (or a pair of them) as JSON numbers."""
  return [float(x) for x in noise] if isinstance(noise, tuple) else float(noise)
