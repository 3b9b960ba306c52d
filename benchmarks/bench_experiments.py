"""The vmapped (step size x clip x seeds) grid vs the same grid as a Python loop (issue 5).

Run: python benchmarks/bench_experiments.py
For the presets' wall times: `time python -m dpgcd_jax.experiments reproduce --quick` (and
without --quick for the full preset).
"""

import time

import jax

jax.config.update("jax_enable_x64", True)

from dpgcd_jax import datasets  # pylint: disable=g-import-not-at-top
from dpgcd_jax.experiments import runner  # pylint: disable=g-import-not-at-top


def compare(name, algorithm_name, passes):
  prepared = runner.build(datasets.get(name))
  algorithm, problem = runner.ALGORITHMS[algorithm_name], prepared.private
  noise = algorithm.calibrate(problem, 1.0 / problem.num_examples**2, passes)
  params, points = runner.grid_params(algorithm, problem, runner.QUICK, noise)
  keys = runner.seed_keys(runner.QUICK.seeds)

  start = time.perf_counter()
  jax.block_until_ready(runner.sweep(algorithm, problem, params, keys, passes))
  vmapped = time.perf_counter() - start  # one compilation + the whole grid

  start = time.perf_counter()
  for i in range(len(points)):
    for key in keys:
      jax.block_until_ready(algorithm.run(problem, jax.tree.map(lambda x, i=i: x[i], params), key, passes).w)
  looped = time.perf_counter() - start  # one compilation (cached afterwards) + the grid, run by run
  runs = len(points) * len(keys)
  print(f"| {name} | {algorithm.label} | {passes} | {runs} | {vmapped:.2f} s | {looped:.2f} s | "
        f"{looped / vmapped:.1f}x |")


def main():
  print(f"jax {jax.__version__} on {jax.default_backend()}, quick-preset grid, both timings include "
        "the compilation\n")
  print("| data set | algorithm | passes | runs | one vmapped call | Python loop | loop / vmapped |")
  print("|---|---|---|---|---|---|---|")
  compare("log1", "dp_gcd", 10)
  compare("square", "dp_gcd_gumbel", 10)
  compare("log1", "dp_cd", 3)
  compare("diabetes", "dp_sgd", 3)


if __name__ == "__main__":
  main()
