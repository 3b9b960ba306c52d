"""DP-GCD on data larger than memory: the records streamed in row chunks, one model whatever the chunking.

[`fit`][dpgcd_jax.solvers.streamed.fit] runs [`dpgcd_jax.solvers.dp_gcd.fit`][]'s iterations with
the data read from row chunks (`.npy` files read chunk by chunk, [`npy_chunks`][dpgcd_jax.row_chunks.npy_chunks],
or any function that yields `(X, y)` chunks) instead of one device array. Iteration `t`:

1. For every chunk: its margins `X_c w^t`, replayed from `w^0` through the `t` coordinate
   changes so far (`m <- m + (w_j^{s+1} - w_j^s) X_c[:, j_s]`, the same float operations, in the same
   order, as the in-memory run's cached margins), then the exact integer totals
   `Q_j = sum_i q_ij` of its clipped, quantized terms on the grid of the TOTAL `n`
   ([`dpgcd_jax.kernels.clipped_total`][]).
2. The chunks' totals are added on the host: integers (int64 for float64 data, float64 below
   `2^53` for float32 data), exact in any order, so `Q_j`, and the gradient `g_j = Q_j h_j / n`
   rounded once, are the in-memory run's.
3. The selection and the update draw from `fold_in(key, t)` through the kernel every DP-GCD
   step uses ([`dpgcd_jax.solvers.greedy.private_coordinate_step`][]).

So the model is the same bit for bit whatever the chunk sizes, their order and the number of
processes. Against the in-memory fit: the same selected coordinates and privacy report (the
ledger and its calibration are [`dpgcd_jax.solvers.dp_gcd.iterations_plan`][]'s, the one DP-GCD
plan), and `w` up to the rounding of the updates (XLA compiles the selection and the update
into another program, where it may fuse a multiply-add into an FMA and not in the other: an ulp
per update at most, measured). Peak memory: two chunks (the one laid out and the one whose
totals are computing meanwhile: their layouts, margins and the read chunk) plus O(p + T),
whatever `n`. Time: each iteration reads the data once (`T` passes for `T` iterations, the
estimators' 10-20 in high dimension), plus `O(t)` per record for the margins' replay.

The chunk layout: every dense NumPy chunk after the first is laid out by
[`dpgcd_jax.row_chunks.dense_chunk`][]: `make_problem`'s checks of the values, then the cast,
the transpose and the clip to the declared bound in cache-sized tiles on the host
([`dpgcd_jax.dense.host_columns`][]), which the device uses in place (no copy on CPU), with the
first chunk's loss, penalty and smoothness. That is `make_problem`'s problem, values and shapes:
the same compiled kernel runs on the same values, so the model is the same bit for bit (at
about 40% of `make_problem`'s time; benchmarks/results/out_of_core.md). The previous chunk's
totals are computed on the device meanwhile. A kernel reading the row-major chunk directly
would save the transpose, but it is another program (XLA may fuse the margins' multiply-adds
otherwise: the equality would rest on its choices) and its replay gathers a strided column
per step (a quarter of the chunk's cache lines each, against `1/p` of them in columns). Which
path runs follows the chunk's type, dtype and shape (public); a chunk `make_problem` refuses
goes to `make_problem`, which raises.

Privacy: each iteration releases what an in-memory iteration releases, from the same exact
clipped gradient, by the same mechanisms at the same multipliers and sensitivities: the
argument of [`dpgcd_jax.solvers.dp_gcd`][] holds as it is (the chunking changes the order of
exact integer additions only). Public inputs: `num_examples` (declared, checked against the rows read), the chunks'
shapes, `feature_bound` (declared: the features are clipped to it in every chunk); the code that
runs is a function of them only, with one exception: scipy.sparse chunks without a declared
`sparse_capacity` are stored in shapes bucketed from each chunk's own stored entries, so which
programs compile (and their time) follows the chunks' nnz, not the outputs (declare
`sparse_capacity` to make the shapes public; a chunk beyond the declared capacity is refused,
an error outside the guarantee: [`dpgcd_jax.sparse.from_matrix`][]).

Several hosts: under `jax.distributed`, each process passes the chunks of ITS rows and
`num_examples` = the rows of all processes; the processes' totals (and row counts) are added
with one all-gather per iteration ([`dpgcd_jax.row_chunks.across_processes`][], exact, as above)
and every process holds the one-process streamed model, bit for bit
(tests/solvers/test_two_process.py). The key, the number of features and the dtype must be the
same everywhere (checked by one all-gather before the first pass). A ValueError on one process
(a bad chunk, a wrong row count) stops that process only: the others wait in the next
all-gather until the launcher's failure handling ends the job.

Scope: dense or scipy.sparse chunks (a sparse chunk's totals run over its stored entries, O(nnz):
`dpgcd_jax.sparse.SparseColumns.clipped_total`, the same grid, so the selections and the
report equal the in-memory sparse fit's), a GLM loss (the margins' fast path), `curvature`
"public" or "released" (the second moments summed exactly in the first pass) and one key, with
one target per record or `K` (`runs=K`: the K runs of the in-memory fit's (K, n) `targets`,
e.g. one-vs-rest, one after the other, accounted together as there).
Sources ([`dpgcd_jax.row_chunks`][]): a list of `(X, y)` pairs, a function yielding them, `.npy` files
([`npy_chunks`][dpgcd_jax.row_chunks.npy_chunks]) or a Parquet dataset
([`parquet_chunks`][dpgcd_jax.row_chunks.parquet_chunks]). A sparse chunk's capacity is
its own nnz: chunks of different nnz compile their totals' program once each. The estimators
run on it through their `fit_chunks` (module `dpgcd_jax.estimators._streamed`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any
from typing import cast

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import curvature as curvature_lib
from dpgcd_jax import exact_sums
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax import progress as progress_lib
from dpgcd_jax import row_chunks
from dpgcd_jax import sparse
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.solvers import base
from dpgcd_jax.solvers import budget
from dpgcd_jax.solvers import dp_gcd
from dpgcd_jax.solvers import driver
from dpgcd_jax.solvers import greedy
from dpgcd_jax.solvers import guards

Array = jax.Array


def fit(
    chunks: row_chunks.Chunks | Iterable[tuple[Any, Any]],
    key: Array,
    *,
    num_examples: int,
    loss: Any,
    feature_bound: Any,
    epsilon: float,
    delta: float,
    passes: int,
    penalty: Any = None,
    step_size: Any = 1.0,
    clip: Any = 1.0,
    selection: str = "laplace",
    update: str = "laplace",
    rule: str = "gs-s",
    selection_share: float | None = None,
    clipping_mode: str = "coordinate",
    secure_noise: bool = False,
    prior: ledger_lib.Ledger | None = None,
    curvature: str = "public",
    curvature_ratio: float = dp_gcd.CURVATURE_RATIO,
    sparse_capacity: tuple[int, int] | None = None,
    runs: int | None = None,
) -> base.Result:
  """(epsilon, delta)-DP DP-GCD over row chunks: the model of [`dpgcd_jax.solvers.dp_gcd.fit`][] on
  `make_problem(X, y, loss, feature_bound=feature_bound, penalty=penalty)` (module docstring).

  One iteration:
  `g_j = (1/n) sum_i clip(grad_j l(w; d_i), -C_j, C_j)` summed exactly over the chunks, then
  `j_t` = the private greedy choice, `w_{j_t} <- prox(w_{j_t} - (gamma / M_j)(g_{j_t} + eta_t))`
  with `M_j = beta B_j^2` (module docstring).

  Args:
    chunks: a function returning the `(X_c, y_c)` row chunks of one pass each time it is
      called (e.g. [`npy_chunks`][dpgcd_jax.row_chunks.npy_chunks]), or a sequence of them
      (held in memory: for tests and small data). Every pass must yield the same rows in the
      same order.
    key: a JAX PRNG key (the same key gives the same model; the same on every process).
    num_examples: `n`, the number of records (public: declared; the rows read must match).
    loss: a GLM loss (a [`dpgcd_jax.Loss`][] with `phi`, or "squared", "logistic", "huber").
    feature_bound: public bound `B` on `|x_ij|` (scalar or (p,)): the chunks are clipped to it.
    epsilon, delta, passes, penalty, step_size, clip: as in [`dpgcd_jax.solvers.dp_gcd.fit`][].
    selection, update, rule, selection_share: as in [`dpgcd_jax.solvers.dp_gcd.fit`][].
    clipping_mode, secure_noise, prior: as in [`dpgcd_jax.solvers.dp_gcd.fit`][].
    sparse_capacity: scipy.sparse chunks only: `(capacity, window)`, public upper bounds on a
      chunk's stored entries and on a feature's stored entries in a chunk
      ([`dpgcd_jax.make_problem`][]). Declared, every chunk's shapes are public (one compiled
      program); None buckets each chunk's own counts, so the shapes (and compilations) follow
      the chunks' nnz, as the in-memory sparse path without a declared capacity.
    curvature, curvature_ratio: as in [`dpgcd_jax.solvers.dp_gcd.fit`][]: with "released", the
      first pass also sums every feature's clipped second moment exactly (the moments do not
      depend on `w`), and each step releases the selected feature's, as the in-memory fit does.
    runs: None (one run: every chunk's `y_c` is its `(rows,)` targets), or `K >= 1` runs on the
      same features, as [`dpgcd_jax.solvers.dp_gcd.fit`][]'s (K, n) `targets` (e.g. one-vs-rest
      labels): every chunk's `y_c` is `(K, rows)`, run `k` reads row `k` and is keyed
      `fold_in(key, k)`; the runs go one after the other (each reads the chunks `passes` times),
      and the result's leaves get a leading axis K.

  Returns:
    A [`dpgcd_jax.Result`][]: `w`, `trace.coordinates` and `privacy` (the report of
    everything spent, `prior` included).

  Privacy with `runs=K`: the K runs read the same records, each run is the one-target run
  above (its own key, its targets a per-record map of the record), and their composition is
  accounted as the in-memory fit's: one plan of `K * passes` iterations
  ([`dpgcd_jax.solvers.dp_gcd.private_plan`][] with `runs=K`), calibrated once, so the ledger
  and `privacy` are the in-memory fit's. With `curvature="released"` the exact second moments
  (a function of the features only, not released) are summed once, in the first pass of run 0,
  and every step of every run releases its selected feature's, as each in-memory run does
  (`K * passes` curvature releases in the ledger).
  """
  n = _validate.check_int("num_examples", num_examples, low=1)
  passes = _validate.check_int("passes", passes, low=1)
  _validate.check_key("key", key)
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
  if feature_bound is None:  # a bound from the data would set the steps and thresholds, unaccounted
    raise ValueError("Expected a declared public feature_bound for a streamed fit (the chunks are clipped to "
                     "it), got feature_bound=None.")
  if clipping_mode not in kernels.CLIPPING_MODES:
    raise ValueError(f"Expected clipping_mode in {kernels.CLIPPING_MODES}, got clipping_mode={clipping_mode!r}.")
  if prior is not None and not isinstance(prior, ledger_lib.Ledger):
    raise ValueError(f"Expected prior to be None or a dpgcd_jax.privacy.Ledger, got prior={prior!r}.")
  if runs is not None:
    runs = _validate.check_int("runs", runs, low=1)
  read = row_chunks.reader(chunks)
  selection, update = greedy.mechanisms_run(selection, update, secure_noise)
  greedy.check_options(selection, update, rule)
  greedy.check_private_rule(rule, np.inf)  # a fit is private

  X0, y0 = row_chunks.first_chunk(read)
  first = row_chunks.chunk_problem(X0, run_targets(y0, runs, 0, np.shape(X0)[0]), loss=loss, penalty=penalty,
                                   feature_bound=feature_bound, sparse_capacity=sparse_capacity)
  plan = dp_gcd.iterations_plan(passes * (runs or 1), coordinates=first.num_features, step_size=step_size, clip=clip,
                                selection=selection, update=update, selection_share=selection_share,
                                curvature=curvature, curvature_ratio=curvature_ratio)  # dp_gcd.private_plan(runs=K)'s
  if not first.loss.is_glm:
    raise ValueError(f"Expected a GLM loss (with phi) for a streamed fit, got loss={first.loss.name!r}.")
  kernels.check_clipping_mode(first, clipping_mode)
  curvature_lib.check(first, curvature)
  budget.check_fit_inputs(first, key, epsilon, delta, budget.DEFAULT_BOUND_SHARE)
  _check_processes(first, key, num_examples=n, passes=passes, runs=runs or 0)

  def problem_of(X: Any, y: Any) -> problem_lib.Problem:
    return row_chunks.chunk_problem(X, y, loss=loss, penalty=penalty, feature_bound=feature_bound, like=first,
                                    sparse_capacity=sparse_capacity)

  spent = ledger_lib.Ledger() if prior is None else prior
  scale, report = budget.calibrated(lambda s: spent + plan.ledger(s), epsilon, delta,
                                    key=plan.cache_key + (() if prior is None else (prior,)) + (None,))
  params = base.cast_params(dp_gcd.SOLVER, first, plan.run_params(scale))
  M = problem_lib.coordinate_smoothness(first)
  thresholds = clipping.coordinate_thresholds(params.clip, M, first.curvature)
  bits = exact_sums.grid_bits(first.XT.dtype, n)
  scale_of_totals = kernels.total_scale(first, thresholds, clipping_mode, bits)
  beta = jnp.asarray(first.curvature, M.dtype)
  half = first.smoothness / beta / 2  # B_j^2 / 2: the shifted moments' clip (dpgcd_jax.curvature)
  moment_total: Any = 0
  moments = None  # curvature="released": the exact second moments, summed in run 0's first pass

  w0 = dp_gcd.init(first).w
  weights, traces = [], []
  for k in range(runs or 1):
    run_key = key if runs is None else jax.random.fold_in(key, k)  # the in-memory run k's (base.compiled_run)
    w = w0
    coordinates = np.zeros(passes, np.int32)
    changes = jnp.zeros(passes, w.dtype)
    for t in range(passes):
      total: Any = 0  # exact: int64 totals (float64 data, derivative clipping) or float64 integers below 2^53
      rows = 0
      history = jnp.asarray(coordinates)  # once per pass, not per chunk
      moments_now = curvature == "released" and moments is None  # the second moments do not depend on w: one pass
      pending: tuple[Any, ...] = ()  # the previous chunk's totals, computed on the device while this one is laid out
      for X, y in read():
        chunk = problem_of(X, run_targets(y, runs, k, np.shape(X)[0]))
        rows += chunk.num_examples
        total, moment_total = _added(total, moment_total, pending)
        pending = (_chunk_total(chunk, w0, history, changes, np.int32(t), thresholds, mode=clipping_mode, bits=bits),
                   _chunk_moment_total(chunk, half, bits=bits) if moments_now else None)
      total, moment_total = _added(total, moment_total, pending)
      if moments_now:
        moment_total, _ = row_chunks.across_processes(moment_total, rows)
        with jax.enable_x64(True):
          moments = exact_sums.exact_mean(jnp.asarray(moment_total), exact_sums.grid_scale(half, bits), n, M.dtype)
      total, rows = row_chunks.across_processes(total, rows)
      if rows != n:
        raise ValueError(f"Expected the chunks to hold num_examples={n} records, got {rows} in pass {t}.")
      with jax.enable_x64(True):  # the exact totals stay float64 on the device
        g = _gradient(jnp.asarray(total), w, first.l2, scale_of_totals, num_examples=n)
      released = None if moments is None else (moments, 2.0 * half, beta, jnp.asarray(first.l2, M.dtype))
      j, new_wj = _step(driver.step_key(run_key, t), g, w, first.l2 * w, first.penalty, params, M, thresholds,
                        released, num_examples=n, selection=selection, update=update, rule=rule)
      coordinates[t] = int(j)
      changes = changes.at[t].set(new_wj - w[j])
      w = jnp.where(jnp.arange(w.shape[0]) == j, new_wj, w)
      if progress_lib.active():  # this context's bar (dpgcd_jax.progress) advances by one pass; `t` is public
        progress_lib.tick(t)
    weights.append(w)
    traces.append(coordinates)
  w, coordinates = (weights[0], traces[0]) if runs is None else (jnp.stack(weights), np.stack(traces))
  note = ("smoothness: M_j = beta B_j^2 from a public feature bound (declared); records streamed in "
          "row chunks (dpgcd_jax.solvers.streamed)")
  return base.Result(guards.fail_closed(params, w), base.Trace(jnp.asarray(coordinates), None),
                     privacy=report.with_notes(note), params=params)


def _added(total: Any, moment_total: Any, pending: tuple[Any, ...]) -> tuple[Any, Any]:
  """The totals plus a chunk's `pending` device totals `(Q, moments or None)`, if any: exact integers."""
  if not pending:
    return total, moment_total
  chunk_total, chunk_moments = pending
  return (total + np.asarray(chunk_total),
          moment_total if chunk_moments is None else moment_total + np.asarray(chunk_moments))


def _check_processes(first: problem_lib.Problem, key: Array, *, num_examples: int, passes: int, runs: int) -> None:
  """Under `jax.distributed`: the same width, dtype, `num_examples`, `passes`, `runs` (0: None)
  and key on every process (a ValueError naming them before any total is computed: one key, one
  release, and collectives in step)."""
  if jax.process_count() == 1:
    return
  from jax.experimental import multihost_utils  # only under jax.distributed
  mine = np.concatenate([[first.num_features, np.dtype(first.XT.dtype).num, num_examples, passes, runs],
                         np.asarray(jax.random.key_data(key), np.int64).ravel()])
  with jax.enable_x64(True):
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(jax.process_count(), -1)
  if not np.all(every == every[0]):
    raise ValueError("Expected the same key, number of features, dtype, num_examples, passes and runs on every "
                     f"process, got (features, dtype number, num_examples, passes, runs, key data) = "
                     f"{every.tolist()}.")


def run_targets(y: Any, runs: int | None, k: int, rows: int) -> Any:
  """Run `k`'s targets in a chunk of `rows` records: `y` itself (`runs=None`), or its row `k`
  (`(runs, rows)` targets; a ValueError naming `chunks` for another shape, public)."""
  if runs is None:
    return y
  if np.shape(y) != (runs, rows):
    raise ValueError(f"Expected every chunk's y to hold (runs, rows) = ({runs}, {rows}) targets with runs={runs}, "
                     f"got shape {np.shape(y)} in chunks.")
  return y[k]


@functools.partial(jax.jit, static_argnames=("mode", "bits"))
def _chunk_total(chunk: problem_lib.Problem, w0: Array, coordinates: Array, changes: Array, t: Array,
                 thresholds: Array, *, mode: str, bits: int) -> Array:
  """The chunk's exact totals `Q_j` at iteration `t` (float64 integers below `2^53` for float32
  features, int64 for float64: [`dpgcd_jax.exact_sums.exact_total`][]): margins replayed from `w0`
  through the first `t` changes, as the in-memory run updates its cached margins."""
  margins = kernels.init_margins(chunk, w0)
  margins = jax.lax.fori_loop(
      0, t, lambda s, m: kernels.update_margins(chunk, m, coordinates[s], changes[s]), margins)
  dphi = clipping.finite_or_zero(kernels.clipped_derivatives(chunk, margins, thresholds, mode))
  return kernels.chunk_total(chunk, dphi, thresholds, mode, bits)  # a scipy.sparse chunk: its stored entries


@functools.partial(jax.jit, static_argnames=("bits",))
def _chunk_moment_total(chunk: problem_lib.Problem, half: Array, *, bits: int) -> Array:
  """The chunk's exact totals of `quantize(x_ij^2 - B_j^2 / 2)` on the grid of `half = B_j^2 / 2`
  and all `n` records ([`dpgcd_jax.curvature.shifted_moment`][]'s terms): a sparse chunk's
  unstored entries each count `quantize(-B_j^2 / 2)`. XLA may fuse `x^2 - B^2 / 2` into one FMA
  here and not in memory (the review measured totals a few grid steps apart): each term is
  clipped to `[-B^2 / 2, B^2 / 2]` after it, so the sensitivity holds either way, and the
  released moments agree up to that rounding, not bit for bit."""
  XT = chunk.XT
  if isinstance(XT, sparse.SparseColumns):
    scale = exact_sums.grid_scale(half, bits)
    at_zero = clipping.quantize(-half, half, scale)  # an unstored entry's term
    q = clipping.quantize(XT.vals * XT.vals - half[XT.cols], half[XT.cols], scale[XT.cols])
    with jax.enable_x64(True):
      # every partial sum is at most `rows` terms below 2^(k+1): exact (float64 below 2^53, int64);
      # a padded entry (a zero value) counts as stored with the unstored term, which is the same
      exact = jnp.float64 if XT.dtype == jnp.float32 else jnp.int64
      stored = jax.ops.segment_sum(q.astype(exact), XT.cols, num_segments=XT.shape[0], indices_are_sorted=True)
      count = jax.ops.segment_sum(jnp.ones_like(XT.cols, exact), XT.cols, num_segments=XT.shape[0],
                                  indices_are_sorted=True)
      return stored + at_zero.astype(exact) * (XT.shape[1] - count)
  squares = cast(Array, XT) * cast(Array, XT)
  return kernels.clipped_total(squares - half[:, None], jnp.ones(squares.shape[1], squares.dtype), half, bits)


@functools.partial(jax.jit, static_argnames=("num_examples",))
def _gradient(total: Array, w: Array, l2: Array, scale: Array, *, num_examples: int) -> Array:
  """`g = Q h / n + l2 w` (`scale = 1 / h`, [`dpgcd_jax.kernels.total_scale`][]), rounded as the
  in-memory clipped gradient ([`dpgcd_jax.kernels.clipped_gradient`][])."""
  return exact_sums.exact_mean(total, scale, num_examples, w.dtype) + l2 * w


@functools.partial(jax.jit, static_argnames=("num_examples", "selection", "update", "rule"))
def _step(key: Array, g: Array, w: Array, public_gradient: Array, penalty: Any, params: dp_gcd.Params, M: Array,
          thresholds: Array, released: tuple[Array, Array, Array, Array] | None, *,
          num_examples: int, selection: str, update: str, rule: str) -> tuple[Array, Array]:
  """The selected `j` and its new `w_j`: DP-GCD's private kernel on the gradient `g`; with
  `released = (moments, B^2, beta, l2)` (the exact shifted second moments, `curvature="released"`),
  the step by the selected feature's released curvature, with the draws of
  [`dpgcd_jax.solvers.dp_gcd.step`][]."""
  if released is None:
    return greedy.private_coordinate_step(key, g, w, M, thresholds, num_examples, penalty, params.step_size,
                                          params.selection_noise, params.update_noise,
                                          public_gradient=public_gradient, selection=selection,
                                          update=update, rule=rule)
  key_select, key_update = jax.random.split(key)
  j, ok = greedy.select_checked(key_select, g, w, M, penalty, params.selection_noise,
                                greedy.score_sensitivity(rule, thresholds, M, num_examples, w, public_gradient,
                                                         penalty),
                                selection=selection, rule=rule)
  moments, bound_sq, beta, l2 = released
  privatize = lambda k, value, multiplier, sens: greedy.privatize(k, value, multiplier, sens, update=update)
  M_j = curvature_lib.smoothness_of_moment(privatize, jax.random.fold_in(key, 2), moments[j], bound_sq[j], beta, l2,
                                           num_examples, params.curvature_noise)
  return j, greedy.private_update(key_update, j, g[j], w, M.at[j].set(M_j), thresholds, num_examples, penalty,
                                  params.step_size, params.update_noise, ok, public_gradient=public_gradient,
                                  update=update)
