"""One compiled sweep per (algorithm, data set) vs a Python loop of solver calls (issues 5 and 12).

Run: python benchmarks/bench_experiments.py
For the presets' wall times: `time python -m dpgcd_jax.experiments reproduce --quick` (and
without --quick for the full preset).

The runner compiles ONE program per (algorithm, data set): the number of steps is a traced
argument, so every budget of passes, grid chunk and grid extension reuses it. A loop of
``algorithm.run`` calls compiles once per budget (``steps`` is static there) and then runs the
grid point by point.
"""

import time

import jax

jax.config.update("jax_enable_x64", True)

from dpgcd_jax import data  # noqa: E402  # pylint: disable=g-import-not-at-top
from dpgcd_jax.experiments import runner  # noqa: E402  # pylint: disable=g-import-not-at-top
from dpgcd_jax.experiments import sweeps  # noqa: E402  # pylint: disable=g-import-not-at-top

SEEDS = 5
CHUNK = runner.QUICK.chunk


def compare(name, algorithm_name, budgets):
  prepared = runner.build(data.get(name))
  algorithm, problem = runner.ALGORITHMS[algorithm_name], prepared.private
  delta = 1.0 / problem.num_examples**2
  points = runner.grids.points([algorithm.step_sizes, algorithm.clips])[:CHUNK]
  keys = runner.seed_keys(SEEDS)
  noises = {t: algorithm.calibrate(problem, delta, t) for t in budgets}

  start = time.perf_counter()
  for t in budgets:
    runner.sweep(algorithm, problem, points, noises[t], keys, t, CHUNK)
  swept = time.perf_counter() - start  # one compilation for every budget + the runs

  def loop():
    for t in budgets:
      params = sweeps.grid_params(algorithm, problem, points, noises[t])
      for i in range(len(points)):
        one = jax.tree.map(lambda x, i=i: x[i], params)
        for key in keys:
          jax.block_until_ready(algorithm.run(problem, key, one, t).w)

  start = time.perf_counter()
  loop()
  looped = time.perf_counter() - start  # one compilation per budget + run by run
  start = time.perf_counter()
  for t in budgets:
    runner.sweep(algorithm, problem, points, noises[t], keys, t, CHUNK)
  swept_again = time.perf_counter() - start
  runs = len(points) * SEEDS * len(budgets)
  print(f"| {name} | {algorithm.label} | {', '.join(map(str, budgets))} | {runs} | {swept:.1f} s | "
        f"{looped:.1f} s | {looped / swept:.1f}x | {swept_again:.2f} s |")


def main():
  print(f"jax {jax.__version__} on {jax.default_backend()}: {CHUNK} grid points x {SEEDS} seeds per budget; "
        "the first two timings include compilation\n")
  print("| data set | algorithm | passes | runs | compiled sweep, with compile | loop of run calls, with "
        "compile | ratio | compiled sweep, again |")
  print("|---|---|---|---|---|---|---|---|")
  compare("log1", "dp_gcd", (1, 3, 10))
  compare("log1", "dp_cd", (1, 3, 10))
  compare("square", "dp_sgd", (1, 3))


if __name__ == "__main__":
  main()
