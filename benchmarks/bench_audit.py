"""Empirical privacy audit of DP-GCD: lower bounds vs the claimed epsilon, and wall time.

Run: python benchmarks/bench_audit.py [--runs 100000] [--epsilon 1.0]

For each configuration the noise is calibrated with ``calibrate_gcd`` for the claim
``(epsilon, 1e-6)``; the audit runs DP-GCD ``runs`` times on each of two neighbouring data
sets (a tiny least-squares problem, n = 10, p = 3, whose differing record is extreme, see
``dpgcd_jax.privacy.audit_neighbours.adversarial_pair``) and reports the 95% lower bound on epsilon.
"correct" rows must stay below the claim; "broken" rows (update noise / 4, clipping skipped)
should exceed it. Wall time includes compilation (one per row).
"""

import argparse
import contextlib
import time

import jax
import numpy as np

import dpgcd_jax as dg
from dpgcd_jax import clipping
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import audit_neighbours
from dpgcd_jax.privacy import auditing

DELTA = 1e-6


@contextlib.contextmanager
def clipping_skipped():
  """Replaces coordinate clipping by the identity (noise still scaled to the threshold)."""
  original = clipping.clip_coordinates
  clipping.clip_coordinates = lambda grads, thresholds: grads
  jax.clear_caches()
  try:
    yield
  finally:
    clipping.clip_coordinates = original
    jax.clear_caches()


def row(name, selection, update, steps, claim, runs, *, update_factor=1.0, n=10, p=3, seed=0):
  X = np.random.default_rng(seed).normal(size=(n, p)).astype(np.float32)
  base = dg.make_problem(X, np.zeros(n, np.float32), "squared", smoothness=np.ones(p, np.float32))
  D, D2 = audit_neighbours.adversarial_pair(base, index=0, feature_scale=1.0, target=1e6)
  cal = accounting.calibrate_gcd(claim, DELTA, steps=steps, selection=selection, update=update)
  params = dg.dp_gcd.Params(1.0, 1.0, cal.selection_noise, cal.update_noise * update_factor)

  def mechanism(key, problem):
    return dg.dp_gcd.run(problem, key, params, passes=steps, selection=selection, update=update,
                         store_objective=False).w

  start = time.perf_counter()
  res = auditing.audit(mechanism, D, D2, key=jax.random.key(steps), runs=runs, delta=DELTA)
  wall = time.perf_counter() - start
  verdict = "VIOLATION" if res.epsilon_lower_bound > claim else "ok"
  print(f"{name:<22} {selection + '+' + update:<17} {steps:>5} {claim:>5.2f} "
        f"{res.epsilon_lower_bound:>8.3f} {res.false_positive_rate:>7.4f} "
        f"{res.false_negative_rate:>7.4f} {wall:>7.1f}s  {verdict}", flush=True)
  return res


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", type=int, default=100_000, help="runs per data set")
  parser.add_argument("--epsilon", type=float, default=1.0, help="claimed epsilon")
  args = parser.parse_args()
  print(f"jax {jax.__version__}, backend {jax.default_backend()}, {jax.device_count()} device(s); "
        f"runs per data set = {args.runs} (half held out), delta = {DELTA}, confidence 95%")
  print(f"{'variant':<22} {'mechanism':<17} {'steps':>5} {'claim':>5} {'eps_lb':>8} "
        f"{'FPR':>7} {'FNR':>7} {'wall':>8}")
  eps = args.epsilon
  for selection, update in (("laplace", "laplace"), ("gumbel", "gaussian")):
    for steps in (1, 5):
      row("correct", selection, update, steps, eps, args.runs)
  for selection, update in (("laplace", "laplace"), ("gumbel", "gaussian")):
    for steps in (1, 5):
      row("broken: update / 4", selection, update, steps, eps, args.runs, update_factor=0.25)
  with clipping_skipped():
    for selection, update in (("laplace", "laplace"), ("gumbel", "gaussian")):
      row("broken: no clipping", selection, update, 1, eps, args.runs, n=11)


if __name__ == "__main__":
  main()
