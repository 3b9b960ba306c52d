"""The estimators on data larger than memory: `fit_chunks`, the private runs over row chunks.

[`fit_chunks`][dpgcd_jax.estimators._streamed.fit_chunks] (`DPGCDClassifier.fit_chunks`,
`DPGCDRegressor.fit_chunks`) fits the model of the estimator's `fit` with the records read in
row chunks by [`dpgcd_jax.solvers.streamed.fit`][] (a function yielding `(X, y)` chunks, `.npy`
files or a Parquet dataset), so the peak memory is one chunk plus `O(p)`, whatever `n`. What
runs is the estimator's own run, step for step: its hyperparameters (`max_iter`, `step_size`
and `clip`, "auto" by the same rules, the regressor's step cap included), the intercept as one
more coordinate of public bound `intercept_bound(clip)`, its penalty (a regressor's in units of
its target bound), mechanisms and released curvature, the targets as `fit` encodes them (one
run, or one per class for K >= 3 classes: one-vs-rest), and the keys of its runs
(`fold_in(split(key, 3)[2], k)` for run `k`). Tests check that the selections,
`privacy_` and the hyperparameters equal the in-memory fit's on the same data, and the weights
up to the updates' rounding (as for [`dpgcd_jax.solvers.streamed.fit`][]: XLA may fuse a
multiply-add into an FMA in one program and not in the other, an ulp per update; equal in most
of the tests' runs).

Privacy: the runs are [`dpgcd_jax.solvers.streamed.fit`][]'s, whose argument is DP-GCD's (each
iteration releases what an in-memory iteration releases, from the same exact clipped
gradient); with K classes, the K one-vs-rest runs read the same records and are accounted
together as `fit`'s K runs (`runs=K`: one plan of `K * max_iter` iterations, calibrated once, the
same ledger); everything else is public by declaration: the feature bounds (`feature_bound=`,
centred on 0: the chunks are clipped to them), a classifier's label set (`classes=`, two
labels or more), a regressor's target range (`target_bound=`), `n` (`num_examples`, checked against
the rows read) and the chunks' shapes. So the releases an in-memory fit makes from the data
before its run when these are not declared are not needed, and not made: no feature scales, no
target bound. The classifier's `class_weight="balanced"` releases the class counts as `fit`
does (the same key, mechanism and ledger), from their exact totals over one more pass of the
chunks. The classifier's
"auto" clip follows the data as in `fit`: the typical feature size
([`dpgcd_jax.privacy.typical_size`][]) is released from the exact sum of the chunks' grid
counts, read in one more pass, with the in-memory release's key and ledger.

Several hosts: under `jax.distributed` each process passes the chunks of its own rows and
`num_examples` = all the rows; the run's totals and the typical size's counts are added across
the processes exactly, and every process holds the one-process model (a two-process test).

Scope: DP-GCD, one run (two classes, or one target) or one run per class (K >= 3 declared
classes, one-vs-rest: the runs one after the other, each reading the chunks `max_iter` times),
dense or scipy.sparse chunks, no declared categories, not the CV estimators' search. A search
over chunks is not built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.utils import column_or_1d

from dpgcd_jax import _validate
from dpgcd_jax import penalties
from dpgcd_jax import progress
from dpgcd_jax import row_chunks
from dpgcd_jax import sparse
from dpgcd_jax.estimators import _defaults
from dpgcd_jax.estimators import _inputs
from dpgcd_jax.estimators import _ranges
from dpgcd_jax.estimators import _released
from dpgcd_jax.estimators import _solvers
from dpgcd_jax.estimators import _training
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy import typical_size
from dpgcd_jax.solvers import streamed


class ChunkTargets(NamedTuple):
  """How an estimator turns the chunks' `y` into the runs' targets (its `_chunk_targets`).

  Attributes:
    encode: `(y_c, dtype) -> targets`, `(runs, rows)`: a per-record map with public parameters
      only (row `k`: run `k`'s targets).
    unit: the regressor's declared target bound `T` (the targets are in units of it, and so
      is the penalty, both computed in the run's dtype), or None.
    target: the regressor's `Released` target bound (for `_set_model`), or None.
    runs: the number of runs (public: one, or a classifier's K >= 3 declared classes).
    prior, notes: the ledger and `privacy_` notes of releases the targets needed (the class
      counts of `class_weight="balanced"`).
    weigh: None, or `(counts, key) -> ChunkTargets`: the targets once the exact counts of the
      declared classes are read (`class_weight="balanced"`: `fit_chunks` counts the labels in
      one more pass and calls it with the estimator's key).
  """

  encode: Callable[[Any, Any], np.ndarray]
  unit: Any = None
  target: Any = None
  runs: int = 1
  prior: ledger_lib.Ledger = ledger_lib.Ledger()
  notes: tuple[str, ...] = ()
  weigh: Callable[[np.ndarray, Any], ChunkTargets] | None = None


def fit_chunks(self: Any, chunks: Any, *, num_examples: int) -> Any:
  """Fits the model privately over row chunks: data larger than memory, read once per iteration.

  The model and `privacy_` of `fit` on the same records (the same selections and report, the
  weights up to the updates' rounding; module `dpgcd_jax.estimators._streamed`: what runs, the
  privacy statement and the scope), with the records read by
  [`dpgcd_jax.solvers.streamed.fit`][]. A classifier with K >= 3 declared `classes` runs
  one-vs-rest as `fit` does: K runs, one after the other (each reads the chunks `max_iter`
  times), calibrated together in one ledger; `coef_` is (K, p).

  Args:
    chunks: a function returning one pass of `(X_c, y_c)` chunks each time it is called (e.g.
      `dg.row_chunks.npy_chunks`, `dg.row_chunks.parquet_chunks`), or a list of them.
    num_examples: `n`, the number of records (public: declared; checked against the rows read).

  Returns:
    self, fitted as after `fit` (`privacy_` charged to the accountant).

  Raises:
    ValueError: naming the argument, before any data is read, for what must be declared
      (`feature_bound` centred on 0; a classifier's `classes`; a regressor's `target_bound`)
      or an option not built over chunks (another `solver`, `categories`, a CV estimator's
      search); while reading, for a label outside
      `classes` or a chunk whose shape or row count differs from the declared ones.
  """
  self._check_params()
  name = type(self).__name__
  n = _validate.check_int("num_examples", num_examples, low=2)
  feature = _check_declarations(self, name)
  read = row_chunks.reader(chunks)
  targets = self._chunk_targets(name)
  delta = self._delta(n, "fit_chunks")  # the accountant's check, before any chunk is read
  X0, _ = row_chunks.first_chunk(read)  # its shape and dtype only: public
  p = int(np.shape(X0)[1])
  stored = X0.dtype if hasattr(X0, "dtype") else np.asarray(X0).dtype  # the run's dtype, as fit's validation gives
  dtype = jax.dtypes.canonicalize_dtype(np.float32 if stored == np.float32 else np.float64)
  bound = np.broadcast_to(_released.check_positive_bound("feature_bound", feature.half_width, (p,)), (p,))
  epsilon = float(self.epsilon)
  hyper = self._hyper(n, p, epsilon)
  key = _inputs.key_from(self.random_state)
  if targets.weigh is not None:  # class_weight="balanced": the class counts of one more pass, released
    targets = targets.weigh(_class_counts(read, self.classes_, n), key)
  prior, notes = targets.prior, ()
  if self._follows_data():  # the data-following clip, from the counts of one more pass
    def size_records(X: Any, y: Any, bound: Any = bound) -> Any:  # fit's `_size_records` (the declared bounds)
      units = None if targets.unit is None else targets.encode(column_or_1d(y), np.float64)[0]
      return self._size_records(X, bound, units)

    hyper, prior, notes, scale = self._follow_data(
        jax.random.fold_in(key, _training.TYPICAL_SIZE_STREAM),
        lambda k, noise: typical_size.release_counts(k, _grid_counts(read, size_records, n), n, noise), p, hyper, n=n,
        epsilon=epsilon, delta=delta, prior=prior)
    bound = _defaults.shrunk_bounds(bound, scale) if scale < 1.0 else bound  # fit's shrink (`bound_scale`)
  width = p + bool(self.fit_intercept)
  bounds = np.append(bound, self._intercept_bound(hyper)) if self.fit_intercept else bound
  penalty = self._penalty(width, self.alpha, self.l1_ratio)
  if targets.unit is not None and penalty is not None:  # the penalty in units of T, as the in-memory prelude's
    penalty = penalties.in_target_units(jax.tree.map(lambda a: jnp.asarray(a, dtype), penalty),
                                        jnp.asarray(targets.unit, dtype))

  def records() -> Any:
    for X, y in read():  # a (rows, 1) label column is flattened with scikit-learn's warning, as in fit
      yield _features(X, bound, self.fit_intercept), targets.encode(column_or_1d(y, warn=True), dtype)

  selection, update = self._mechanisms()
  step_size = _solvers.dp_gcd_step_size(self, hyper, n)
  runs = targets.runs
  runs_key = _training.split_keys(key, 3)[2]  # the in-memory fit's: run k is keyed fold_in(runs_key, k)
  with progress.bar(total=runs * hyper.max_iter, enabled=bool(self.verbose),
                    desc=f"{name}.fit_chunks (dp_gcd, {runs} run{'s' if runs > 1 else ''})"):
    result = streamed.fit(records, runs_key, num_examples=n, loss=self._loss(), feature_bound=bounds,
                          epsilon=epsilon, delta=delta, passes=hyper.max_iter, penalty=penalty,
                          step_size=step_size, clip=hyper.clip, selection=selection,
                          update=update, clipping_mode=self.clipping, curvature=self._curvature_option(),
                          selection_share=self._selection_share(), prior=prior, runs=runs)
  if callable(step_size):  # the step the run used (an "auto" cap applied), reported as fit reports it
    hyper = hyper._replace(step_size=float(result.params.step_size))
  released = _released.declared_release(bound, num_examples=n, num_features=p).finish(None)
  self.n_features_in_ = p
  self.encoding_ = None
  self.solver_params_ = self._solver_params(width)
  target_notes = () if targets.target is None else (targets.target.note,)
  self._record(result.privacy.with_notes(released.note, *target_notes, *targets.notes, *notes,
                                         *self._notes(runs, hyper, delta)))
  self._set_model(np.asarray(result.w, float)[:, :width], released, hyper, n, targets.target)
  return self


def _check_declarations(estimator: Any, name: str) -> _ranges.Range:
  """The declared feature range, and what else every fit over chunks needs, or a ValueError
  naming it (public checks only)."""
  if estimator._searches:
    raise ValueError(f"Expected a DPGCDClassifier or DPGCDRegressor for fit_chunks (one private fit), got {name}: a "
                     f"private search over chunks is not built.")
  feature = _ranges.declared("feature_bound", estimator.feature_bound)
  if feature is None or not feature.centred:
    raise ValueError(f"Expected a declared feature_bound centred on 0 for {name}.fit_chunks (the chunks are clipped to "
                     f"it; the in-memory fit's private feature scales need the whole X), got "
                     f"feature_bound={estimator.feature_bound!r}.")
  if not estimator._adapter().streams:
    raise ValueError(f"Expected a solver that runs over row chunks for {name}.fit_chunks (the streamed run is "
                     f"DP-GCD's: solver='dp_gcd'), got solver={estimator.solver!r}.")
  if estimator.categories is not None:
    raise ValueError(f"Expected categories=None for {name}.fit_chunks (encode the chunks' categorical columns "
                     f"before), got categories={estimator.categories!r}.")
  return feature


def declared_classes(estimator: Any, name: str) -> np.ndarray:
  """A classifier's declared labels (two, or K >= 3 for one-vs-rest), sorted, or a ValueError
  naming what `fit_chunks` needs."""
  if estimator.classes is None:
    raise ValueError(f"Expected classes= declared for {name}.fit_chunks (the label set is public by declaration: "
                     f"two labels, or K >= 3 for one-vs-rest runs), got classes=None.")
  return np.sort(np.asarray(estimator.classes))  # checked by _check_params


def labels(classes: np.ndarray, weight: np.ndarray, positives: np.ndarray) -> Callable[[Any, Any], np.ndarray]:
  """A classifier's chunk targets `+-w_i`, `(runs, rows)`: row `k` positive on `positives[k]`
  (run `k`'s class), `w_i` the record's class's public weight, as `fit` encodes them; a label
  outside `classes` is refused as in `fit`."""
  def encode(y: Any, dtype: Any) -> np.ndarray:
    y = np.asarray(y)
    unknown = ~np.isin(y, classes)
    if np.any(unknown):
      raise ValueError(f"Expected every label of y in the declared classes={classes.tolist()}, got y containing "
                       f"{np.unique(y[unknown])[:5].tolist()} in chunks.")
    w = weight[np.searchsorted(classes, y)]
    return np.stack([np.where(y == c, w, -w) for c in positives]).astype(dtype)
  return encode


def scaled(centre: float, bound: float) -> Callable[[Any, Any], np.ndarray]:
  """A regressor's chunk targets `clip(y - c, -T, T) / T`, `(1, rows)`, `T = bound`: `y - c` in float64 then
  cast to the run's dtype, and `T` in it, the operations of `fit` (its centring on the host, its
  prelude's clip and division, `_released.Releases`)."""
  def encode(y: Any, dtype: Any) -> np.ndarray:
    unit = np.dtype(dtype).type(bound)
    with np.errstate(over="ignore"):  # no warning from a value: beyond the dtype's range is inf, then clipped
      t = (np.asarray(y, np.float64) - centre).astype(dtype)
    return (np.clip(t, -unit, unit) / unit)[None]
  return encode


def _grid_counts(read: row_chunks.Chunks, records: Callable[[Any, Any], Any], n: int) -> np.ndarray:
  """The typical size's exact counts over one pass of the chunks (`typical_size.grid_counts` of
  `records(X, y)`, the records and bounds of each chunk), of every process's chunks under
  `jax.distributed` (int64, added across the processes)."""
  counts: Any = 0
  rows = 0
  for X, y in read():
    counts, rows = counts + typical_size.grid_counts(*records(X, y)), rows + np.shape(X)[0]
  counts, rows = row_chunks.across_processes(counts, rows)  # several hosts: every process's rows, exactly
  if rows != n:
    raise ValueError(f"Expected the chunks to hold num_examples={n} records, got {rows}.")
  return np.asarray(counts)


def _class_counts(read: row_chunks.Chunks, classes: np.ndarray, n: int) -> np.ndarray:
  """The exact count of each declared class over one pass of the chunks' labels, of every
  process's chunks under `jax.distributed` (int64, added across the processes); a label outside
  `classes` is refused as `fit` refuses it."""
  check = labels(classes, np.ones(classes.size), classes[:1])  # the label check of the targets' encoder
  counts: Any = np.zeros(classes.size, np.int64)
  rows = 0
  for _, y in read():
    y = column_or_1d(y, warn=True)
    check(y, np.float64)
    counts, rows = counts + np.array([np.sum(y == c) for c in classes], np.int64), rows + y.shape[0]
  counts, rows = row_chunks.across_processes(counts, rows)  # several hosts: every process's rows, exactly
  if rows != n:
    raise ValueError(f"Expected the chunks to hold num_examples={n} records, got {rows}.")
  return np.asarray(counts)


def _features(X: Any, bound: np.ndarray, intercept: bool) -> Any:
  """The chunk's features with the intercept's constant column; dense ones clipped to the declared
  bounds first, in their own precision, as `fit`'s layout clips them (a float64 value beyond
  float32's range becomes the bound, not an error that depends on the data). Per-record maps."""
  if sparse.is_sparse(X):  # the sparse layout maps such a value to inf, then clips it
    return _training.scipy_sparse().hstack([X, np.ones((X.shape[0], 1), X.dtype)], format="csr") if intercept else X
  X = np.asarray(X)
  out = np.ones((X.shape[0], X.shape[1] + bool(intercept)), X.dtype if X.dtype.kind == "f" else np.float64)
  np.clip(X, -bound, bound, out=out[:, :X.shape[1]])
  return out
