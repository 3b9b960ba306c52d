"""The kernels of a [`Problem`][dpgcd_jax.problem.Problem]: margins, clipped gradients and the objective.

Every solver step reads the data through these functions:

- margins `X w` (the GLM fast path's cache): [`init_margins`][dpgcd_jax.kernels.init_margins],
  [`update_margins`][dpgcd_jax.kernels.update_margins] (O(n) dense, O(nnz of a column) sparse);
- clipped gradients: per coordinate (`|d l_i / d w_j| <= C_j`) or, for GLM losses, on the scalar
  derivative (`|phi'| <= min_j C_j / B_j`, [`derivative_clip`][dpgcd_jax.kernels.derivative_clip]);
  the mean over the records is an exact fixed-point sum ([`clipped_total`][dpgcd_jax.kernels.clipped_total]:
  each clipped term quantized on a public power-of-two grid, the integers summed exactly), so
  one record moves it by its sensitivity whatever the order of the float operations
  ([`dpgcd_jax.clipping`][]);
- the objective `F(w)` ([`objective`][dpgcd_jax.kernels.objective], NOT private: for traces and
  tests) and the plain gradient of its smooth part.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp

from dpgcd_jax import clipping
from dpgcd_jax import exact_sums
from dpgcd_jax import sparse
from dpgcd_jax.problem import Problem
from dpgcd_jax.problem import PublicSmoothness

Array = jax.Array


def init_margins(problem: Problem, w: Array) -> Array | None:
  """The cache of the GLM fast path: margins `Xw` (None for other losses)."""
  if not problem.loss.is_glm:
    return None
  return _margins(problem.XT, w)


def _margins(XT: Array | sparse.SparseColumns, w: Array) -> Array:
  return XT.margins(w) if isinstance(XT, sparse.SparseColumns) else w @ XT


def update_margins(problem: Problem, margins: Array | None, j: Array, change: Array) -> Array | None:
  """Margins after `w_j += change`: O(n) dense, O(nnz of column j) sparse."""
  if margins is None:
    return None
  XT = problem.XT
  if isinstance(XT, sparse.SparseColumns):
    return XT.update_margins(margins, j, change)
  return margins + change * XT[j]


def _dphi(problem: Problem, margins: Array | None) -> Array:
  """`phi'` at the margins, (n,): GLM losses only, whose margins `init_margins` keeps."""
  phi = problem.loss.phi
  if phi is None or margins is None:
    raise ValueError(f"Expected a GLM loss and its margins (init_margins), got loss {problem.loss.name!r} "
                     f"with margins={'None' if margins is None else 'an array'}.")
  return jax.vmap(jax.grad(phi))(margins, problem.y)


def _dense(problem: Problem) -> Array:
  """`problem.XT` of a dense problem (the GLM paths that have no sparse variant)."""
  if isinstance(problem.XT, sparse.SparseColumns):
    raise ValueError("Expected a dense problem, got sparse features (problem.XT.todense() gives the dense "
                     "(p, n) array).")
  return problem.XT


def per_example_gradients_t(problem: Problem, w: Array, margins: Array | None) -> Array:
  """(p, n) gradients of the per-example losses (data term only), one column per example."""
  if problem.loss.is_glm:
    return _dense(problem) * _dphi(problem, margins)[None, :]
  return jax.vmap(jax.grad(problem.loss.fn), in_axes=(None, 0, 0), out_axes=1)(w, problem.X, problem.y)


CLIPPING_MODES = ("coordinate", "derivative")


def check_clipping_mode(problem: Problem, mode: str) -> None:
  """Host-side check that `mode` (static) is known and usable on `problem`."""
  if mode not in CLIPPING_MODES:
    raise ValueError(f"Expected clipping_mode in {CLIPPING_MODES}, got clipping_mode={mode!r}.")
  if mode == "derivative" and not (problem.loss.is_glm
                                   and problem.smoothness_source is PublicSmoothness.FEATURE_BOUND):
    raise ValueError(
        f"Expected a GLM loss with bounded features for clipping_mode='derivative' (make_problem with "
        f"feature_bound=, or fit, which releases a bound), got loss {problem.loss.name!r} with "
        f"smoothness_source={problem.smoothness_source!r}; use clipping_mode='coordinate'.")


def derivative_bounds(problem: Problem, thresholds: Array) -> tuple[Array, Array]:
  """`(B, c)`: the feature bounds `B_j = sqrt(M_j / beta)` and the derivative's clip
  `c = (1 - 2^-20) min_j C_j / B_j` over the true features.

  The factor `1 - 2^-20` absorbs the roundings of the quotients, so that `B_j c < C_j` holds
  for the float values themselves: the terms of [`derivative_total`][dpgcd_jax.kernels.derivative_total],
  each at most `B_j c`, then stay within every `C_j`.
  """
  B = jnp.sqrt(problem.smoothness / problem.curvature)
  ratios = thresholds / B
  mask = problem.column_mask
  c = jnp.min(ratios if mask is None else jnp.where(mask, ratios, jnp.inf))
  return B, c * (1.0 - 2.0**-20)


def derivative_clip(problem: Problem, dphi: Array, thresholds: Array) -> Array:
  """`clip(phi'_i, -c, c)` with `c` of [`derivative_bounds`][dpgcd_jax.kernels.derivative_bounds]
  (`c < min_j C_j / B_j`, `B_j = sqrt(M_j / beta)`, the feature bound).

  Derivative clipping (GLM, `|x_ij| <= B_j`): every coordinate of a per-example gradient
  `clip(phi'_i) x_ij` is at most `c B_j < C_j` in magnitude, so replacing one record moves
  `g_j` by at most `2 c B_j / n < 2 C_j / n`: the ledger's `Delta_j` holds unchanged
  (`C_j = clip sqrt(M_j / beta) = clip B_j` with the scalar clip rule and `l2 = 0`). Unlike
  coordinate clipping it scales a whole per-example gradient by one factor (its direction is
  kept). The features are clipped to `B` when the problem is built and again on the grid of
  [`quantized_features`][dpgcd_jax.kernels.quantized_features], so the bound holds for the
  float values the sum reads. Resolution: the sum reads each derivative on a grid of at most
  `2^13` steps up to `c` (each within `c 2^-14`; smaller ones count as 0), so a clip far above
  the derivatives' range loses them.
  """
  _, c = derivative_bounds(problem, thresholds)
  return jnp.clip(clipping.finite_or_zero(dphi), -c, c)


def clipped_derivatives(problem: Problem, margins: Array | None, thresholds: Array, mode: str) -> Array:
  """`phi'` at the margins, clipped first with `mode="derivative"`
  ([`derivative_clip`][dpgcd_jax.kernels.derivative_clip]): the per-record factors of a GLM
  loss's gradient terms `phi'_i x_ij`."""
  dphi = _dphi(problem, margins)
  return derivative_clip(problem, dphi, thresholds) if mode == "derivative" else dphi


def clipped_gradient(problem: Problem, w: Array, margins: Array | None, thresholds: Array,
                     mode: str = "coordinate") -> Array:
  """Gradient of `f` with coordinate-wise per-example clipping of the data term.

  `mode="derivative"` (GLM losses with bounded features, [`check_clipping_mode`][dpgcd_jax.kernels.check_clipping_mode])
  clips
  the scalar `phi'` first ([`derivative_clip`][dpgcd_jax.kernels.derivative_clip]); `"coordinate"` is the paper's rule.

  `(1/n) sum_i clip(grad l(w; d_i), -C, C) + l2 w`; the `l2 w` part is data-independent.
  The mean is exact up to one final rounding ([`dpgcd_jax.clipping.clipped_mean`][]: a
  fixed-point sum on a public grid), so the replace-one sensitivity of coordinate j is
  `clipping.mean_sensitivity(C_j, n)`, i.e. `2 C_j / n` plus that rounding, in every dtype
  and at every `n`. Sparse features: the same value from the stored entries only, O(nnz).
  """
  XT = problem.XT
  if not problem.loss.is_glm:  # sparse problems have a GLM loss (make_problem)
    grads_t = per_example_gradients_t(problem, w, margins)
    return clipping.clipped_mean(grads_t, thresholds[:, None], axis=1, count=problem.mean_count) + problem.l2 * w
  dphi = clipped_derivatives(problem, margins, thresholds, mode)
  if mode == "derivative":
    return _derivative_mean(problem, dphi, thresholds) + problem.l2 * w
  if isinstance(XT, sparse.SparseColumns):
    return XT.clipped_mean(dphi, thresholds) + problem.l2 * w
  return _blocked_clipped_mean(XT, dphi, thresholds, problem.mean_count) + problem.l2 * w


BLOCK_ROWS = 8


def _blocked_clipped_mean(XT: Array, dphi: Array, thresholds: Array, count: int | Array | None = None) -> Array:
  """`mean_i clip(XT_ji dphi_i, -C_j, C_j)` for every j: the exact fixed-point mean of
  [`dpgcd_jax.clipping.clipped_mean`][] from [`clipped_total`][dpgcd_jax.kernels.clipped_total], divided by `count`
  (the true `n`; padded zero records add exact zeros). Infinite thresholds (clipping off,
  non-private): a plain float mean.

  Fail closed on `dphi` (length n), not on the products: with `X` finite, the products of
  a finite `dphi` are never NaN, so every clipped term is in `[-C_j, C_j]`
  ([`dpgcd_jax.clipping`][], "GLM losses"). Under `jax.vmap` over configurations the branch
  stays a branch ([`dpgcd_jax.clipping.when_finite`][]) and each block of X is read once for
  all of them.
  """
  n = XT.shape[1]
  count = n if count is None else count
  bits = exact_sums.grid_bits(XT.dtype, n)

  def exact(thresholds, XT, dphi, count):
    total = clipped_total(XT, dphi, thresholds, bits)
    return exact_sums.exact_mean(total, exact_sums.grid_scale(thresholds, bits), count, XT.dtype)

  def plain(thresholds, XT, dphi, count):
    one = lambda x, c: jnp.sum(clipping.clip_coordinates(x * dphi[None, :], c[:, None]), axis=1)
    return (_feature_blocks(one, XT, thresholds) / count).astype(XT.dtype)  # the exact branch's dtype

  return clipping.when_finite(thresholds, exact, plain, XT, clipping.finite_or_zero(dphi), jnp.asarray(count))


def clipped_total(XT: Array, dphi: Array, thresholds: Array, bits: int) -> Array:
  """`Q_j`, the exact integer sum over records of `clip(XT_ji dphi_i, -C_j, C_j)` on the public grid
  of `bits` ([`dpgcd_jax.exact_sums.grid_bits`][] of the dtype and the TOTAL number of records), as
  [`dpgcd_jax.exact_sums.exact_total`][] returns it (float64 integers below `2^53` for float32
  features, int64 for float64): one pass over blocks of `BLOCK_ROWS` features.

  The terms are quantized one by one, so the totals of any partition of the records (row
  chunks streamed from disk, row shards on several hosts) add up to the same `Q` exactly, in
  any order. XLA's CPU code for the fused clip-and-reduce over a whole large (p, n) array runs
  at about a tenth of the memory bandwidth; over blocks of a few features it streams
  (benchmarks/bench_scale.py). `dphi` must be finite and `thresholds` finite.
  """
  scale = exact_sums.grid_scale(thresholds, bits)
  sums = lambda x, c, s: exact_sums.block_sums(clipping.quantize(x * dphi[None, :], c[:, None], s[:, None]),
                                             bits=bits)
  return exact_sums.exact_total(_feature_blocks(sums, XT, thresholds, scale))


# ----------------------------------------------------------------------------------------
# Derivative clipping's exact sum: the features and the derivative on integer grids, multiplied
# as int8 matrices (one read of a quarter of X's bytes per limb: at the memory floor, and a
# GEMM for K configurations under jax.vmap).
# ----------------------------------------------------------------------------------------

def quantized_features(XT: Array, bounds: Array) -> Array:
  """The features on derivative clipping's grid, as a (2, p, n) int8 array of limbs.

  `v_ij = round(x_ij / h_j)` clipped to `±floor(B_j / h_j)` (`h_j = 1 / factor_scale(B_j)`,
  [`dpgcd_jax.exact_sums.on_factor_grid`][]): `|v_ij h_j| <= B_j`, `|v_ij| < 2^13`, a rounding error
  of at most `h_j / 2 < 2^-12 B_j`; stored as `v = 128 hi + lo` ([`dpgcd_jax.exact_sums.limbs`][]).
  A per-record map of the data (each entry from its own value and the public bounds).
  """
  return jnp.stack(exact_sums.limbs(exact_sums.on_factor_grid(XT, bounds[:, None])))


def derivative_total(factors: Array, dphi: Array, c: Array) -> Array:
  """`Q_j = sum_i v_ij u_i`, exactly (int64): `v` the [`quantized_features`][dpgcd_jax.kernels.quantized_features],
  `u_i = round(dphi_i / h_c)` clipped to `±floor(c / h_c)` (`h_c = 1 / factor_scale(c)`).

  Sensitivity: `Q_j h_j h_c / n` is the mean of the terms `(v_ij h_j)(u_i h_c)`, each at most
  `B_j c < C_j` in magnitude ([`derivative_bounds`][dpgcd_jax.kernels.derivative_bounds]), exactly;
  replacing one record moves that mean by at most `2 C_j / n`, the coordinate-clipped mean's
  sensitivity before its final rounding, as for [`clipped_total`][dpgcd_jax.kernels.clipped_total].

  Arithmetic: both factors are two int8 limbs; the four products of limbs are int8 matrix
  products with int32 sums over at most `2^18` records (`exact_sums.FACTOR_ROWS`; each product at
  most `64 * 64` in magnitude, so every sum stays below `2^31`), combined in int64 (`|Q| < n 2^26`).
  Integers: any order of the additions and any partition of the records (row chunks, hosts)
  give the same `Q`. One read of a quarter of X's float32 bytes per limb, and under `jax.vmap`
  over configurations one GEMM for all of them.
  """
  # (n, 2): an int8 GEMM of two columns (an int8 GEMV runs about 30x slower on CPU)
  D = jnp.stack(exact_sums.limbs(exact_sums.on_factor_grid(dphi, c)), axis=1)
  _, p, n = factors.shape
  X = factors.reshape(2 * p, n)
  rows = exact_sums.FACTOR_ROWS
  parts = [jnp.dot(X[:, s:s + rows], D[s:s + rows], preferred_element_type=jnp.int32) for s in range(0, n, rows)]
  with jax.enable_x64(True):
    A = functools.reduce(jnp.add, [part.astype(jnp.int64) for part in parts])
    return (A[:p, 0] << 14) + ((A[:p, 1] + A[p:, 0]) << 7) + A[p:, 1]


def _derivative_totals(XT: Array | sparse.SparseColumns, factors: Array | None, dphi: Array, bounds: Array,
                       c: Array) -> Array:
  """[`derivative_total`][dpgcd_jax.kernels.derivative_total] of dense features (their `factors`
  when a run made them, else made here), or its sparse form."""
  if isinstance(XT, sparse.SparseColumns):
    return XT.derivative_total(dphi, bounds, c)
  if factors is None:
    return derivative_total(quantized_features(XT, bounds), dphi, c)
  if factors.shape != (2,) + XT.shape:
    raise ValueError(f"Expected factors of shape {(2,) + XT.shape} (the features' limbs), got {factors.shape}: "
                     f"a problem whose features changed must not carry the limbs (dpgcd_jax.kernels.prepared).")
  return derivative_total(factors, dphi, c)


def derivative_scale(bounds: Array, c: Array) -> Array:
  """`1 / (h_j h_c)`, the grid of [`derivative_total`][dpgcd_jax.kernels.derivative_total]'s totals, in
  float64 (a power of two: exact)."""
  with jax.enable_x64(True):
    return exact_sums.factor_scale(bounds).astype(jnp.float64) * exact_sums.factor_scale(c).astype(jnp.float64)


def total_scale(problem: Problem, thresholds: Array, mode: str, bits: int) -> Array:
  """`1 / h`, the grid of the exact totals of the clipped gradient's data term
  ([`chunk_total`][dpgcd_jax.kernels.chunk_total]): the mean is `Q h / n`."""
  if mode == "derivative":
    return derivative_scale(*derivative_bounds(problem, thresholds))
  return exact_sums.grid_scale(thresholds, bits)


def chunk_total(problem: Problem, dphi: Array, thresholds: Array, mode: str, bits: int) -> Array:
  """The exact totals `Q_j` of the clipped gradient's data term over `problem`'s records (a chunk
  of rows: the totals of a partition add up to the whole's), dense or sparse; `dphi` finite and
  clipped as `mode` clips it ([`clipped_derivatives`][dpgcd_jax.kernels.clipped_derivatives])."""
  XT = problem.XT
  if mode == "derivative":
    return _derivative_totals(XT, problem.factors, dphi, *derivative_bounds(problem, thresholds))
  if isinstance(XT, sparse.SparseColumns):
    return XT.clipped_total(dphi, thresholds, bits)
  return clipped_total(XT, dphi, thresholds, bits)


def prepared(problem: Problem, mode: str) -> Problem:
  """`problem` with its [`quantized_features`][dpgcd_jax.kernels.quantized_features] as `factors` when
  its steps read them (dense GLM features, `mode="derivative"`): one pass over X per run, not one
  per step. Otherwise `problem` itself."""
  if (mode != "derivative" or problem.factors is not None or isinstance(problem.XT, sparse.SparseColumns)
      or not problem.loss.is_glm):
    return problem
  bounds, _ = derivative_bounds(problem, problem.smoothness)  # B_j only: the thresholds play no part
  return dataclasses.replace(problem, factors=quantized_features(problem.XT, bounds))


def _derivative_mean(problem: Problem, dphi: Array, thresholds: Array) -> Array:
  """`mean_i (v_ij h_j)(u_i h_c)` for every j ([`derivative_total`][dpgcd_jax.kernels.derivative_total]),
  rounded once; infinite thresholds (clipping off, non-private): the plain float mean of
  `x_ij dphi_i`."""
  bounds, c = derivative_bounds(problem, thresholds)

  def exact(thresholds, XT, factors, bounds, c, dphi, count):
    total = _derivative_totals(XT, factors, dphi, bounds, c)
    return exact_sums.exact_mean(total, derivative_scale(bounds, c), count, XT.dtype)

  def plain(thresholds, XT, factors, bounds, c, dphi, count):
    if isinstance(XT, sparse.SparseColumns):
      return (jax.ops.segment_sum(dphi[XT.rows] * XT.vals, XT.cols, num_segments=XT.shape[0]) / count).astype(XT.dtype)
    one = lambda x: jnp.sum(x * dphi[None, :], axis=1)  # a sum per feature: the same under jax.vmap
    return (_feature_blocks(one, XT) / count).astype(XT.dtype)

  return clipping.when_finite(thresholds, exact, plain, problem.XT, problem.factors, bounds, c,
                              clipping.finite_or_zero(dphi), jnp.asarray(problem.mean_count))


def _feature_blocks(one: Callable[..., Array], XT: Array, *per_row: Array) -> Array:
  """`one(x, *per_row)` over blocks of rows of `XT` (features), concatenated: at least 64K
  entries a block."""
  p, n = XT.shape
  rows = max(BLOCK_ROWS, min(p, (1 << 16) // n) // BLOCK_ROWS * BLOCK_ROWS)
  num_blocks = -(-p // rows)
  if p <= rows:
    return one(XT, *per_row)

  def block(b):  # the last block starts at p - rows: its first rows repeat the previous block's
    start = jnp.minimum(b * rows, p - rows)
    return one(*(jax.lax.dynamic_slice_in_dim(a, start, rows) for a in (XT, *per_row)))

  # Slices of XT by index, not XT[:head].reshape(...): when p is not a multiple of `rows`
  # (an intercept row), that slice is a copy of X (1.1x X more at the estimators' peak).
  blocks = jax.lax.map(block, jnp.arange(num_blocks))
  new = p - (num_blocks - 1) * rows  # rows of the last block not in the previous ones
  return jnp.concatenate([blocks[:-1].reshape((p - new,) + blocks.shape[2:]), blocks[-1][rows - new:]])


def clipped_coordinate_gradient(problem: Problem, w: Array, margins: Array | None, thresholds: Array,
                                j: Array, mode: str = "coordinate") -> Array:
  """Coordinate `j` of `clipped_gradient`; O(n) for GLM losses (O(nnz_j) sparse)."""
  XT = problem.XT
  if not problem.loss.is_glm:  # sparse problems have a GLM loss (make_problem)
    return clipped_gradient(problem, w, margins, thresholds)[j]
  dphi = clipped_derivatives(problem, margins, thresholds, mode)
  if isinstance(XT, sparse.SparseColumns):
    return XT.clipped_coordinate_mean(dphi, thresholds, j) + problem.l2 * w[j]
  return clipping.clipped_mean(dphi * XT[j], thresholds[j], count=problem.mean_count) + problem.l2 * w[j]


def smooth_objective(problem: Problem, w: Array, margins: Array | None = None) -> Array:
  """`f(w)`: data term plus the l2 term."""
  phi = problem.loss.phi
  if phi is not None:
    margins = _margins(problem.XT, w) if margins is None else margins
    losses = jax.vmap(phi)(margins, problem.y)
  else:
    losses = jax.vmap(problem.loss.fn, in_axes=(None, 0, 0))(w, problem.X, problem.y)
  if problem.rows is not None:  # padded records are not data
    losses = jnp.where(jnp.arange(losses.shape[0]) < problem.rows, losses, 0.0)
  return jnp.sum(losses) / problem.mean_count + 0.5 * problem.l2 * jnp.sum(w**2)


def objective(problem: Problem, w: Array, margins: Array | None = None) -> Array:
  """`F(w) = f(w) + psi(w)`. NOT private: a diagnostic computed from the raw data."""
  return smooth_objective(problem, w, margins) + problem.penalty.value(w)


def gradient(problem: Problem, w: Array) -> Array:
  """Unclipped gradient of `f` (for non-private reference solvers)."""
  return jax.grad(smooth_objective, argnums=1)(problem, w)
