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

  sweep = lambda: runner.sweep(algorithm, problem, params, keys, passes)
  start = time.perf_counter()
  jax.block_until_ready(sweep())
  vmapped_first = time.perf_counter() - start  # one compilation + the whole grid

  def loop():
    for i in range(len(points)):
      for key in keys:
        jax.block_until_ready(algorithm.run(problem, jax.tree.map(lambda x, i=i: x[i], params), key, passes).w)

  start = time.perf_counter()
  loop()
  looped_first = time.perf_counter() - start  # one compilation (cached afterwards) + run by run
  start = time.perf_counter()
  loop()
  looped_again = time.perf_counter() - start
  compiled = jax.jit(jax.vmap(jax.vmap(lambda prm, k: algorithm.run(problem, prm, k, passes).w,
                                       in_axes=(None, 0)), in_axes=(0, None)))
  jax.block_until_ready(compiled(params, keys))
  start = time.perf_counter()
  jax.block_until_ready(compiled(params, keys))
  vmapped_run = time.perf_counter() - start  # the vmapped grid alone, compiled
  runs = len(points) * len(keys)
  print(f"| {name} | {algorithm.label} | {passes} | {runs} | {vmapped_first:.2f} s | {looped_first:.2f} s "
        f"| {looped_first / vmapped_first:.1f}x | {vmapped_run * 1e3:.0f} ms | {looped_again * 1e3:.0f} ms "
        f"| {looped_again / vmapped_run:.1f}x |")


def main():
  print(f"jax {jax.__version__} on {jax.default_backend()}, quick-preset grid x 5 seeds; the first "
        "timings include compilation, the last ones do not\n")
  print("| data set | algorithm | passes | runs | vmapped, with compile | loop, with compile | ratio "
        "| vmapped, compiled | loop, compiled | ratio |")
  print("|---|---|---|---|---|---|---|---|---|---|")
  compare("log1", "dp_gcd", 10)
  compare("square", "dp_gcd_gumbel", 50)
  compare("log1", "dp_cd", 10)
  compare("square", "dp_sgd", 3)


if __name__ == "__main__":
  main()
