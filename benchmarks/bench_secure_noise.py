"""Secure (discrete, floating-point-safe) noise vs the default float noise in DP-GCD.

Per-iteration cost (one jitted DP-GCD run, compile excluded, divided by the passes) and the
learning quality (objective relative to w = 0, mean over seeds) on a synthetic sparse
least-squares problem. Run: ``python benchmarks/bench_secure_noise.py [--out FILE]``.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import dpgcd_jax as dg
from dpgcd_jax import problem as problem_lib


def _problem(n, p, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p)).astype(np.float32)
  w = np.zeros(p, np.float32)
  w[:5] = (2.0, -1.5, 1.0, 0.8, -0.5)
  y = X @ w + 0.1 * rng.normal(size=n).astype(np.float32)
  return dg.make_problem(X, y, "squared", feature_bound=4.0)


def _time_fit(problem, keys, passes, **kw):
  res = dg.dp_gcd.fit(problem, keys[:1], passes=passes, **kw)  # compile
  jax.block_until_ready(res.w)
  t0 = time.perf_counter()
  res = dg.dp_gcd.fit(problem, keys, passes=passes, **kw)
  jax.block_until_ready(res.w)
  return (time.perf_counter() - t0) / (passes * keys.shape[0]), res


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  rows = []
  for n, p, passes in ((1000, 50, 20), (5000, 200, 20)):
    problem = _problem(n, p)
    f0 = float(problem_lib.objective(problem, jnp.zeros(p)))
    keys = jax.random.split(jax.random.key(0), 4)
    for update in ("laplace", "gaussian"):
      for secure in (False, True):
        per_iter, res = _time_fit(problem, keys, passes, epsilon=2.0, delta=1e-5, clip=2.0,
                                  update=update, secure_noise=secure)
        rel = np.asarray(jax.vmap(lambda w: problem_lib.objective(problem, w))(res.w)) / f0  # noqa: B023
        rows.append((n, p, passes, update, secure, per_iter * 1e3, float(rel.mean()),
                     float(rel.std()), res.privacy.epsilon))
  lines = ["| n | p | passes | update | secure_noise | ms / iteration "
           "| rel. objective (mean ± sd, 4 seeds) | epsilon |",
           "|---|---|---|---|---|---|---|---|"]
  for n, p, passes, update, secure, ms, m, sd, eps in rows:
    lines.append(f"| {n} | {p} | {passes} | {update} | {secure} | {ms:.3f} | {m:.3f} ± {sd:.3f} | {eps:.4f} |")
  text = "\n".join(lines)
  print(text)
  if args.out:
    with open(args.out, "w") as f:
      f.write("# Secure noise vs float noise (DP-GCD, float32, CPU)\n\n"
              f"jax {jax.__version__}, backend {jax.default_backend()}; epsilon = 2, delta = 1e-5, "
              "clip = 2, selection report-noisy-max (Laplace / discrete Laplace).\n\n" + text + "\n")


if __name__ == "__main__":
  main()
