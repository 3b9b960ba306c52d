"""Scale (issue 10): DP-GCD per-iteration time against the cost of reading the data once.

For each data shape, in one run and in float32:

- ``ours``: one DP-GCD iteration (clipped gradient pass, private selection, update), from a
  jitted run of ``--steps`` iterations;
- ``floor``: a NumPy row sum of the same ``XT`` (dense) or a sum over the stored entries
  (sparse): the irreducible cost of reading the features once;
- their ratio, and for the dorothea-shaped set the dense path on the same data.

Also the peak resident memory of ``make_problem`` (a fresh subprocess per size) relative to
the size of ``X``.

Clipping rows (issues 16.5 and 20.1), CPU time of this process (``time.process_time``, robust
to other load on a shared machine), A and B interleaved, best of ``--repeats``:

- exact sums: one DP-GCD iteration with the exact fixed-point clipped sums (clip = 1, noise)
  against the same iteration with plain float32 sums (clip = inf, no noise: the kernel before
  issue 16.5);
- derivative clipping: one DP-GCD iteration with ``clipping_mode="derivative"`` against an
  XLA matrix-vector product ``X^T v`` over the same X.

Run: python benchmarks/bench_scale.py [--steps 50] [--memory-size 8000] [--only-clipping]
"""

import argparse
import json
import subprocess
import sys
import time

import jax
import numpy as np
import scipy.sparse

import dpgcd_jax as dg


def best_of(fn, repeats=3):
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return min(times)


PARAMS = dg.dp_gcd.Params(step_size=1.0, clip=1.0, selection_noise=5.0, update_noise=5.0)


def per_iteration(problem, steps):
  run = lambda k: dg.dp_gcd.run(problem, k, PARAMS, passes=steps).w
  jax.block_until_ready(run(jax.random.key(0)))  # compile
  return best_of(lambda: run(jax.random.key(1))) / steps


def gpu_column(problem, steps):
  """(ms per iteration on the first GPU, same selected coordinates as on CPU) or None."""
  try:
    gpu = jax.devices("gpu")[0]
  except RuntimeError:
    return None
  cpu_coords = dg.dp_gcd.run(problem, jax.random.key(1), PARAMS, passes=steps).trace.coordinates
  on_gpu = jax.device_put(problem, gpu)
  seconds = per_iteration(on_gpu, steps)
  gpu_coords = dg.dp_gcd.run(on_gpu, jax.random.key(1), PARAMS, passes=steps).trace.coordinates
  return 1e3 * seconds, bool(np.array_equal(cpu_coords, gpu_coords))


def dense_row(name, n, p, steps, rng):
  X = rng.normal(size=(n, p)).astype(np.float32)
  y = (X[:, :10].sum(axis=1) + rng.normal(size=n)).astype(np.float32)
  problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
  XT = np.ascontiguousarray(X.T)
  floor = best_of(lambda: XT.sum(axis=1), repeats=5)
  ours = per_iteration(problem, steps)
  return dict(data=name, shape=f"{n} x {p}", ours_ms=1e3 * ours, floor_ms=1e3 * floor,
              ratio=ours / floor, gpu=gpu_column(problem, steps))


def sparse_rows(n, p, density, steps, rng, with_dense):
  X = scipy.sparse.random(n, p, density=density, random_state=0, format="csr",
                          data_rvs=lambda k: np.ones(k), dtype=np.float32)
  y = (np.asarray(X[:, :10].sum(axis=1)).ravel() + rng.normal(size=n)).astype(np.float32)
  problem = dg.make_problem(X, y, "squared", feature_bound=1.0)
  csc = X.tocsc()
  floor = best_of(lambda: np.add.reduceat(csc.data, csc.indptr[:-1]), repeats=5)
  ours = per_iteration(problem, steps)
  rows = [dict(data="dorothea-shaped (sparse path)", shape=f"{n} x {p}, nnz {X.nnz}",
               ours_ms=1e3 * ours, floor_ms=1e3 * floor, ratio=ours / floor,
               gpu=gpu_column(problem, steps))]
  if with_dense:
    dense = dg.make_problem(X.toarray(), y, "squared", feature_bound=1.0)
    ours_dense = per_iteration(dense, max(steps // 10, 2))
    rows.append(dict(data="same data, dense path", shape=f"{n} x {p}", ours_ms=1e3 * ours_dense,
                     floor_ms=1e3 * floor, ratio=ours_dense / floor, gpu=None))
  return rows


def _cpu_best(fns, repeats):
  """Best CPU time of each function, interleaved (``fns``: name -> thunk)."""
  for f in fns.values():
    jax.block_until_ready(f())
  times = {k: [] for k in fns}
  for _ in range(repeats):
    for k, f in fns.items():
      start = time.process_time()
      jax.block_until_ready(f())
      times[k].append(time.process_time() - start)
  return {k: min(v) for k, v in times.items()}


def clipping_rows(n, p, steps, repeats, rng):
  X = rng.normal(size=(n, p)).astype(np.float32)
  y = (X[:, :10].sum(axis=1) + rng.normal(size=n)).astype(np.float32)
  problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
  plain = dg.dp_gcd.Params(step_size=1.0, clip=np.inf, selection_noise=0.0, update_noise=0.0)
  run = lambda params, mode: jax.jit(
      lambda k: dg.dp_gcd.run(problem, k, params, passes=steps, clipping_mode=mode).w)
  v = jax.numpy.asarray(rng.normal(size=n).astype(np.float32))
  XT = problem.XT
  gemv = jax.jit(lambda: XT @ v)
  twice = lambda params, mode: jax.jit(
      lambda k: dg.dp_gcd.run(problem, k, params, passes=2 * steps, clipping_mode=mode).w)
  fns = dict(exact=lambda f=run(PARAMS, "coordinate"): f(jax.random.key(1)),  # noqa: B008
             plain=lambda f=run(plain, "coordinate"): f(jax.random.key(1)),  # noqa: B008
             derivative=lambda f=run(PARAMS, "derivative"): f(jax.random.key(1)),  # noqa: B008
             derivative_twice=lambda f=twice(PARAMS, "derivative"): f(jax.random.key(1)),  # noqa: B008
             gemv=gemv)
  t = _cpu_best(fns, repeats)
  per = {k: t[k] / (1 if k == "gemv" else steps) for k in t}
  # derivative clipping makes the features' int8 limbs once a run: its cost per iteration is the
  # difference between runs of 2T and T iterations; the one-time pass is the rest
  marginal = (t["derivative_twice"] - t["derivative"]) / steps
  setup = t["derivative"] - steps * marginal
  shape = f"{n} x {p}"
  return [dict(what="exact sums vs plain float32 sums", shape=shape, a_ms=1e3 * per["exact"],
               b_ms=1e3 * per["plain"], ratio=per["exact"] / per["plain"]),
          dict(what="derivative clipping vs XLA gemv", shape=shape, a_ms=1e3 * marginal,
               b_ms=1e3 * per["gemv"], ratio=marginal / per["gemv"]),
          dict(what=f"derivative clipping, whole run of {steps} iterations / {steps}, vs XLA gemv", shape=shape,
               a_ms=1e3 * per["derivative"], b_ms=1e3 * per["gemv"], ratio=per["derivative"] / per["gemv"]),
          dict(what="derivative clipping's one pass per run (int8 limbs of X) vs XLA gemv", shape=shape,
               a_ms=1e3 * setup, b_ms=1e3 * per["gemv"], ratio=setup / per["gemv"]),
          dict(what="coordinate clipping vs XLA gemv", shape=shape, a_ms=1e3 * per["exact"],
               b_ms=1e3 * per["gemv"], ratio=per["exact"] / per["gemv"])]


def print_clipping(rows):
  print("\n| clipping (per DP-GCD iteration, CPU time) | shape | A | B | A / B |")
  print("|---|---|---|---|---|")
  for r in rows:
    print(f"| {r['what']} | {r['shape']} | {r['a_ms']:.3f} ms | {r['b_ms']:.3f} ms | {r['ratio']:.2f}x |")


MEMORY_PROBE = """
import json, sys, numpy as np
import jax.numpy as jnp
import dpgcd_jax as dg

def status_bytes(field):  # /proc/self/status reports kB
  line = next(l for l in open("/proc/self/status") if l.startswith(field + ":"))
  return int(line.split()[1]) * 1024

n = int(sys.argv[1])
small = np.ones((64, 64), np.float32)
dg.make_problem(small, small[:, 0], "squared", feature_bound=4.0)  # load and compile the code paths
with open("/proc/self/clear_refs", "w") as f:  # reset the high-water mark: the import's peak is not the fit's
  f.write("5")
base = status_bytes("VmRSS")
X = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
y = X[:, 0].copy()
problem = dg.make_problem(X, y, "squared", feature_bound=4.0)
problem.XT.block_until_ready()
print(json.dumps(dict(x_bytes=X.nbytes, base=base, peak=status_bytes("VmHWM"))))
"""


def memory_row(n):
  out = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(n)], capture_output=True, text=True,
                       check=True)
  m = json.loads(out.stdout.strip().splitlines()[-1])
  return dict(size=f"{n} x {n}", x_gib=m["x_bytes"] / 2**30,
              peak_over_x=(m["peak"] - m["base"]) / m["x_bytes"])


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=50)
  parser.add_argument("--memory-size", type=int, default=8000)
  parser.add_argument("--no-dense-dorothea", action="store_true")
  parser.add_argument("--only-clipping", action="store_true")
  parser.add_argument("--repeats", type=int, default=8)
  args = parser.parse_args()
  rng = np.random.default_rng(0)
  clip_rows = [r for n, p in ((64000, 1000), (1000, 64000))
               for r in clipping_rows(n, p, max(args.steps // 5, 2), args.repeats, rng)]
  if args.only_clipping:
    print(f"backend: {jax.default_backend()}, {jax.devices()[0].device_kind}")
    print_clipping(clip_rows)
    return
  rows = [dense_row("dense", 1000, 1000, args.steps, rng),
          dense_row("dense", 16000, 1000, args.steps, rng),
          dense_row("dense", 64000, 1000, args.steps, rng),
          dense_row("dense", 1000, 64000, args.steps, rng)]
  rows += sparse_rows(800, 100_000, 0.009, args.steps, rng, not args.no_dense_dorothea)
  print(f"backend: {jax.default_backend()}, {jax.devices()[0].device_kind}")
  has_gpu = any(r["gpu"] is not None for r in rows)
  gpu_head = " GPU / iteration (same coordinates) |" if has_gpu else ""
  print("| data | shape | ours / iteration | read floor | ratio |" + gpu_head)
  print("|---|---|---|---|---|" + ("---|" if has_gpu else ""))
  for r in rows:
    gpu = ""
    if has_gpu:
      gpu = " - |" if r["gpu"] is None else f" {r['gpu'][0]:.3f} ms ({r['gpu'][1]}) |"
    print(f"| {r['data']} | {r['shape']} | {r['ours_ms']:.3f} ms | {r['floor_ms']:.3f} ms | "
          f"{r['ratio']:.1f}x |" + gpu)
  print_clipping(clip_rows)
  m = memory_row(args.memory_size)
  print(f"\nmake_problem peak memory at {m['size']} float32 ({m['x_gib']:.2f} GiB): "
        f"{m['peak_over_x']:.2f}x X (X itself included)")


if __name__ == "__main__":
  main()
