"""DP-GCD on a table read from disk in row chunks (`dpgcd_jax.solvers.streamed`): time and memory.

Writes an (n, p) float32 table of +-1 features (and its labels) to `.npy` files chunk by chunk
(the table is never in memory), then, in the same run:

* the disk floor: one pass of `npy_chunks` reading every chunk and summing it (the page cache
  holds what the machine's memory allows: a table larger than memory is read from disk);
* the streamed fit: `passes` DP-GCD iterations (one pass each), its time per pass against
  the floor;
* memory: the peak resident set (`ru_maxrss`) of the process over the fit, minus its value
  before, against the table's size;
* the estimator: `DPGCDClassifier.fit_chunks` with its defaults over the same chunks (time per
  pass, its counting pass included, and the peak resident set after it).

Usage:
  python benchmarks/bench_out_of_core.py [n] [p] [rows] [passes] [folder]
  python benchmarks/bench_out_of_core.py 4000000 64 65536 10 /tmp/ooc   # a 1 GiB table
"""

from __future__ import annotations

import pathlib
import resource
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

import dpgcd_jax as dg


def _write(folder: pathlib.Path, n: int, p: int, rows: int) -> None:
  """The table and its labels written chunk by chunk with plain writes (no memory map: the
  process's resident set stays that of one chunk)."""
  w = np.zeros(p, np.float32)
  w[:10] = 0.3
  rng = np.random.default_rng(0)
  with open(folder / "X.npy", "wb") as fx, open(folder / "y.npy", "wb") as fy:
    for f, shape in ((fx, (n, p)), (fy, (n,))):
      np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
    for start in range(0, n, rows):
      x = rng.choice(np.array([-1.0, 1.0], np.float32), size=(min(rows, n - start), p))
      x.tofile(fx)
      np.where(x @ w + rng.normal(size=len(x)) > 0, 1.0, -1.0).astype(np.float32).tofile(fy)


def _peak_rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(n: int = 1_000_000, p: int = 64, rows: int = 65536, passes: int = 10, folder: str | None = None) -> None:
  path = pathlib.Path(folder or tempfile.mkdtemp())
  path.mkdir(parents=True, exist_ok=True)
  _write(path, n, p, rows)
  table_mib = n * p * 4 / 2**20
  chunks = dg.row_chunks.npy_chunks(path / "X.npy", path / "y.npy", rows=rows)
  options = dict(num_examples=n, loss="logistic", feature_bound=1.0, epsilon=1.0, delta=1.0 / n**2, clip=0.5)
  # Compile on the same shapes first (a fit of as many passes: the programs take the (passes,)
  # history of the selections), so the figures below are steady-state passes.
  dg.streamed.fit(chunks, jax.random.key(0), passes=passes, **options)
  start = time.perf_counter()
  total = 0.0
  for x, _ in chunks():
    total += float(x.sum())
  floor = time.perf_counter() - start
  before = _peak_rss_mib()
  start = time.perf_counter()
  result = dg.streamed.fit(chunks, jax.random.key(1), passes=passes, **options)
  result.w.block_until_ready()
  per_pass = (time.perf_counter() - start) / passes
  peak = _peak_rss_mib()
  X0, y0 = next(iter(chunks()))
  accuracy = float(np.mean(np.where(X0 @ np.asarray(result.w) > 0, 1.0, -1.0) == y0))
  # The estimator with its defaults over the same chunks: "auto" iterations, the released
  # curvature and the data-following clip (one more pass: the typical size's counts).
  start = time.perf_counter()
  clf = dg.DPGCDClassifier(classes=[-1.0, 1.0], feature_bound=1.0, random_state=0).fit_chunks(chunks, num_examples=n)
  estimator_seconds = time.perf_counter() - start
  estimator_passes = clf.n_iter_ + any(e.label == "typical feature size" for e in clf.privacy_.entries)
  estimator_peak = _peak_rss_mib()
  layout, lean, kernel, gemv = _per_chunk(X0, y0, n=n, passes=passes)
  print(f"table {n} x {p} float32 = {table_mib:.0f} MiB, chunks of {rows} rows, {passes} passes (eps = 1)")
  print("| measure | value |\n|---|---|")
  print(f"| disk floor: one pass of npy_chunks (read + sum) | {floor:.2f} s |")
  print(f"| streamed DP-GCD, time per pass | {per_pass:.2f} s ({per_pass / floor:.1f}x the floor) |")
  print(f"| peak resident set before the fit / over the fit | {before:.0f} MiB / {peak:.0f} MiB |")
  print(f"| growth over the fit vs the table | {peak - before:.0f} MiB vs {table_mib:.0f} MiB |")
  print(f"| per chunk: make_problem (validation, clip, device layout; the first chunk's) | {layout * 1e3:.1f} ms |")
  print(f"| per chunk: the fit's layout of the others (row_chunks.dense_chunk: checks, clip, transpose, one copy) | "
        f"{lean * 1e3:.1f} ms |")
  print(f"| per chunk: margins' replay + exact clipped totals (t = {passes - 1}) | {kernel * 1e3:.1f} ms "
        f"({kernel / gemv:.2f}x an XLA gemv over the same chunk, {gemv * 1e3:.1f} ms) |")
  print(f"| training accuracy on the first chunk | {accuracy:.3f} |")
  print(f"| DPGCDClassifier.fit_chunks (defaults): passes, time per pass | {estimator_passes} ({clf.n_iter_} "
        f"iterations + the typical size's counts), {estimator_seconds / estimator_passes:.2f} s "
        f"({estimator_seconds / estimator_passes / floor:.1f}x the floor, compilation included) |")
  print(f"| DPGCDClassifier.fit_chunks: peak resident set, accuracy on the first chunk | {estimator_peak:.0f} MiB, "
        f"{clf.score(X0, y0):.3f} |")


def _best(f, repeats: int = 7) -> float:
  f()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    f()
    times.append(time.perf_counter() - start)
  return min(times)


def _per_chunk(X: np.ndarray, y: np.ndarray, *, n: int, passes: int) -> tuple[float, float, float, float]:
  """Where a pass's time goes, per chunk (best of 7): the chunk's problem (the first chunk's, by
  `make_problem`, and the others', as the fit lays them out), the streamed kernel at the last
  iteration (the longest replay), and the floor: an XLA gemv `X_c^T v` on the device."""
  from dpgcd_jax import exact_sums  # the benchmark reads the streamed kernel directly
  from dpgcd_jax.solvers import streamed
  make = lambda like=None: dg.row_chunks.chunk_problem(X, y, loss="logistic", penalty=None,  # noqa: E731
                                                       feature_bound=1.0, like=like)
  layout = _best(lambda: make().XT.block_until_ready())
  first = make()
  lean = _best(lambda: make(first).XT.block_until_ready())
  chunk = make(first)
  p = X.shape[1]
  thresholds = jnp.full(p, 0.5, chunk.XT.dtype)
  coordinates, changes = jnp.arange(passes, dtype=jnp.int32) % p, jnp.full(passes, 0.01, chunk.XT.dtype)
  bits = exact_sums.grid_bits(chunk.XT.dtype, n)
  kernel = _best(lambda: np.asarray(streamed._chunk_total(chunk, jnp.zeros(p, chunk.XT.dtype), coordinates, changes,
                                                          np.int32(passes - 1), thresholds, mode="coordinate",
                                                          bits=bits)))
  X_device, v = jax.device_put(X), jnp.ones(X.shape[0], X.dtype)
  gemv = jax.jit(lambda X, v: X.T @ v)
  return layout, lean, kernel, _best(lambda: gemv(X_device, v).block_until_ready())


if __name__ == "__main__":
  args = sys.argv[1:]
  main(*(int(a) for a in args[:4]), *(args[4:5]))
