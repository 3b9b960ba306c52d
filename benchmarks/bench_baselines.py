"""Time per pass of DP-GCD, DP-CD, DP-SGD, and the reference solver vs scikit-learn (issue 4).

Square problem: 1000 x 1000 least squares + l1 (10-sparse truth, lambda = 0.1 lambda_max).
Run: python benchmarks/bench_baselines.py
"""

import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402  # pylint: disable=g-import-not-at-top
import numpy as np  # noqa: E402  # pylint: disable=g-import-not-at-top
from sklearn import linear_model  # noqa: E402  # pylint: disable=g-import-not-at-top

import dpgcd_jax as dg  # noqa: E402  # pylint: disable=g-import-not-at-top
from dpgcd_jax import datasets  # noqa: E402  # pylint: disable=g-import-not-at-top


def timed(fn, repeats=3):
  jax.block_until_ready(fn())  # compile
  best = np.inf
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    best = min(best, time.perf_counter() - start)
  return best


def main():
  data = datasets.get("square")
  X32, y32 = data.X.astype(np.float32), data.y.astype(np.float32)
  pen = dg.penalties.L1(data.penalty_strength)
  problem = dg.make_problem(X32, y32, "squared", penalty=pen)
  passes, key = 10, jax.random.key(0)
  print(f"square: n={data.n}, p={data.p}, lambda={data.penalty_strength:.4g}; float32, {passes} passes\n")
  print("| solver | time per pass | vs DP-GCD |")
  print("|---|---|---|")
  gcd = timed(lambda: dg.dp_gcd.run(problem, key, dg.dp_gcd.Params(0.5, 30.0, 50.0, 50.0), passes=passes,
                                    store_objective=False).w) / passes
  cd = timed(lambda: dg.dp_cd.run(problem, key, dg.dp_cd.Params(0.5, 30.0, 50.0), passes=passes,
                                  store_objective=False).w) / passes
  sgd1 = timed(lambda: dg.dp_sgd.run(problem, key, dg.dp_sgd.Params(0.01, 30.0, 5.0), passes=passes,
                                     batch_size=1, store_objective=False).w) / passes
  sgd10 = timed(lambda: dg.dp_sgd.run(problem, key, dg.dp_sgd.Params(0.01, 30.0, 5.0), passes=passes,
                                      batch_size=10, store_objective=False).w) / passes
  for name, t in [("DP-GCD (1 iteration)", gcd), ("DP-CD (p = 1000 steps)", cd),
                  ("DP-SGD (n = 1000 steps of batch 1)", sgd1), ("DP-SGD (100 steps of batch 10)", sgd10)]:
    print(f"| {name} | {t * 1e3:.2f} ms | {t / gcd:.2f}x |")

  exact = dg.make_problem(data.X, data.y, "squared", penalty=pen)
  f_star = float(dg.reference.solve(exact, tol=1e-13).objective)
  print("\nReference solver vs scikit-learn Lasso (float64), each at the loosest tolerance reaching "
        "a relative objective gap <= 1e-9:\n")
  print("| solver | tolerance | time | relative gap |")
  print("|---|---|---|---|")
  results = {}
  for tol in (1e-6, 1e-7, 1e-8, 1e-9, 1e-10):
    solution = dg.reference.solve(exact, tol=tol)
    gap = (float(solution.objective) - f_star) / f_star
    if gap <= 1e-9:
      results["ours"] = (tol, timed(lambda: dg.reference.solve(exact, tol=tol).w), gap)  # noqa: B023
      break
  for tol in (1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10):
    lasso = lambda: linear_model.Lasso(alpha=data.penalty_strength, fit_intercept=False, tol=tol,  # noqa: B023
                                       max_iter=100_000).fit(data.X, data.y)
    w = lasso().coef_
    gap = (float(dg.objective(exact, jnp.asarray(w))) - f_star) / f_star
    if gap <= 1e-9:
      start = time.perf_counter()
      for _ in range(3):
        lasso()
      results["scikit-learn Lasso"] = (tol, (time.perf_counter() - start) / 3, gap)
      break
  for name, (tol, t, gap) in results.items():
    print(f"| {name} | {tol:g} | {t * 1e3:.1f} ms | {gap:.1e} |")
  if len(results) == 2:
    print(f"\nscikit-learn / ours: {results['scikit-learn Lasso'][1] / results['ours'][1]:.2f}x")


if __name__ == "__main__":
  main()
