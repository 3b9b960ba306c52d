"""The exact discrete samplers against the float floor, side by side in one run.

Draws per second of `dpgcd_jax.discrete_noise.discrete_laplace` / `discrete_gaussian` (flat,
one key, `size` draws) against `jax.random.laplace` / `jax.random.normal` of the same size (the
float samplers they replace in secure mode), and AboveThreshold (`bounds.bound_at_rank`, 130
draws) vmapped over keys as the default-path audits run it. Compile excluded (one warm-up
call). Run: ``python benchmarks/bench_samplers.py [--out FILE]``.
"""

import argparse
import time

import jax
import jax.numpy as jnp

from dpgcd_jax import discrete_noise
from dpgcd_jax.privacy import bounds


def _seconds(fn, arg, repeats=3):
  jax.block_until_ready(fn(arg))
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn(arg))
    best = min(best, time.perf_counter() - start)
  return best


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  key = jax.random.key(0)
  rows = ["| sampler | draws | exact (s) | float floor (s) | ratio |", "|---|---|---|---|---|"]
  for size in (1_000, 100_000, 1_000_000):
    for name, exact, floor, scale in (
        ("discrete Laplace, t = 81", discrete_noise.discrete_laplace, jax.random.laplace, 81),
        ("discrete Gaussian, sigma = 81", discrete_noise.discrete_gaussian, jax.random.normal, 81)):
      t_exact = _seconds(jax.jit(lambda k, f=exact, s=scale, n=size: f(k, s, (n,))), key)
      t_floor = _seconds(jax.jit(lambda k, f=floor, n=size: f(k, (n,))), key)
      rows.append(f"| {name} | {size:,} | {t_exact:.4f} | {t_floor:.5f} | {t_exact / t_floor:.0f}x |")
  statistic = jnp.ones(100)
  for runs in (2_000, 20_000):
    keys = jax.random.split(key, runs)
    release = jax.jit(jax.vmap(lambda k: bounds.bound_at_rank(k, statistic, jnp.float32(0.1), 95)))
    floor = jax.jit(jax.vmap(lambda k: jax.random.laplace(k, (bounds.GRID.size + 1,))))
    t_exact, t_floor = _seconds(release, keys, 1), _seconds(floor, keys, 1)
    rows.append(f"| AboveThreshold, vmap over keys ({bounds.GRID.size + 1} draws each) | {runs:,} keys | "
                f"{t_exact:.3f} | {t_floor:.4f} | {t_exact / t_floor:.0f}x |")
  text = "\n".join([f"jax {jax.__version__}, backend {jax.default_backend()}", "", *rows])
  print(text)
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      f.write(text + "\n")


if __name__ == "__main__":
  main()
