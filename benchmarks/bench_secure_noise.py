"""Secure (discrete, floating-point-safe) noise vs the default float noise, solver by solver.

Per-iteration cost (one jitted run, compile excluded, divided by the passes) and the learning
quality (objective relative to w = 0, mean over seeds) on a synthetic sparse least-squares
problem: DP-GCD with each update mechanism, then DP-FW, DP-IHT and two-stage (their secure
modes: discrete report-noisy-max vertices, secure peeling, discrete Gaussian values). Run:
``python benchmarks/bench_secure_noise.py [--out FILE]``.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import dpgcd_jax as dg
from dpgcd_jax import kernels


def _problem(n, p, seed=0):
  rng = np.random.default_rng(seed)
  X = rng.normal(size=(n, p)).astype(np.float32)
  w = np.zeros(p, np.float32)
  w[:5] = (2.0, -1.5, 1.0, 0.8, -0.5)
  y = X @ w + 0.1 * rng.normal(size=n).astype(np.float32)
  return dg.make_problem(X, y, "squared", feature_bound=4.0)


def _time_fit(problem, keys, passes, fit=None, **kw):
  fit = dg.dp_gcd.fit if fit is None else fit
  res = fit(problem, keys[:1], passes=passes, **kw)  # compile
  jax.block_until_ready(res.w)
  t0 = time.perf_counter()
  res = fit(problem, keys, passes=passes, **kw)
  jax.block_until_ready(res.w)
  return (time.perf_counter() - t0) / (passes * keys.shape[0]), res


# The other solvers' secure modes, on the same problem (radius: the true ||w||_1 = 5.8).
SOLVERS = (
    ("dp_fw", dg.solvers.dp_fw.fit, lambda secure: dict(radius=6.0, clip=2.0, secure_noise=secure)),
    ("dp_iht", dg.solvers.dp_iht.fit, lambda secure: dict(sparsity=5, clip=2.0, secure_noise=secure)),
    ("two_stage", dg.solvers.two_stage.fit, lambda secure: dict(
        sparsity=10, clip=2.0, **(dict(selection="discrete_laplace", update="discrete_gaussian") if secure
                                  else dict(selection="laplace", update="gaussian")))),
)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--out", default=None)
  args = parser.parse_args()
  rows = []
  for n, p, passes in ((1000, 50, 20), (5000, 200, 20)):
    problem = _problem(n, p)
    f0 = float(kernels.objective(problem, jnp.zeros(p)))
    keys = jax.random.split(jax.random.key(0), 4)
    for update in ("laplace", "gaussian"):
      for secure in (False, True):
        per_iter, res = _time_fit(problem, keys, passes, epsilon=2.0, delta=1e-5, clip=2.0,
                                  update=update, secure_noise=secure)
        rel = np.asarray(jax.vmap(lambda w: kernels.objective(problem, w))(res.w)) / f0  # noqa: B023
        rows.append((n, p, passes, update, secure, per_iter * 1e3, float(rel.mean()),
                     float(rel.std()), res.privacy.epsilon))
  lines = ["| n | p | passes | update | secure_noise | ms / iteration "
           "| rel. objective (mean ± sd, 4 seeds) | epsilon |",
           "|---|---|---|---|---|---|---|---|"]
  for n, p, passes, update, secure, ms, m, sd, eps in rows:
    lines.append(f"| {n} | {p} | {passes} | {update} | {secure} | {ms:.3f} | {m:.3f} ± {sd:.3f} | {eps:.4f} |")
  n, p, passes = 5000, 200, 20
  problem = _problem(n, p)
  f0 = float(kernels.objective(problem, jnp.zeros(p)))
  keys = jax.random.split(jax.random.key(0), 4)
  lines += ["", "The other solvers (n = 5000, p = 200, 20 passes):", "",
            "| solver | secure_noise | ms / iteration | rel. objective (mean ± sd, 4 seeds) | epsilon | events |",
            "|---|---|---|---|---|---|"]
  for name, fit, kwargs in SOLVERS:
    for secure in (False, True):
      per_iter, res = _time_fit(problem, keys, passes, fit=fit, epsilon=2.0, delta=1e-5, **kwargs(secure))
      rel = np.asarray(jax.vmap(lambda w: kernels.objective(problem, w))(res.w)) / f0  # noqa: B023
      events = ", ".join(sorted({type(e.event).__name__ for e in res.privacy.entries}))
      lines.append(f"| {name} | {secure} | {per_iter * 1e3:.3f} | {rel.mean():.3f} ± {rel.std():.3f} | "
                   f"{res.privacy.epsilon:.4f} | {events} |")
  text = "\n".join(lines)
  print(text)
  if args.out:
    with open(args.out, "w") as f:
      f.write("# Secure noise vs float noise (float32, CPU)\n\n"
              f"jax {jax.__version__}, backend {jax.default_backend()}; epsilon = 2, delta = 1e-5, "
              "clip = 2, selection report-noisy-max (Laplace / discrete Laplace).\n\n" + text + "\n")


if __name__ == "__main__":
  main()
