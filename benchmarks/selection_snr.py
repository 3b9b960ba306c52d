"""Why DP-GCD helps on some data sets and not on others: the signal-to-noise of its first selection.

Run: python benchmarks/selection_snr.py [data set ...]

At ``w^0 = 0`` DP-GCD's GS-s score of coordinate j is ``|soft(g_j, lambda_j)| / sqrt(M_j)`` on
clipped gradients; the paper-faithful Laplace noisy max adds ``Lap(b Delta_bar)`` to every
score, ``b`` calibrated for epsilon = 1, delta = 1/n^2 and T iterations. The largest of p such
noises is about ``b Delta_bar ln p``. A ratio (top score / that) well above 1 means the first
selection finds a useful coordinate; below 1 it is mostly noise. Small clips shrink the
gradients under the l1 threshold (score 0); large clips grow the noise.
"""

import sys

import jax.numpy as jnp
import numpy as np

from dpgcd_jax import clipping
from dpgcd_jax import data
from dpgcd_jax import kernels
from dpgcd_jax import problem as problem_lib
from dpgcd_jax.privacy import accounting

CLIPS = (0.1, 0.3, 1.0, 3.0)
BUDGETS = (1, 10)


def ratios(name):
  """``{(clip, T): top score / (b Delta_bar ln p)}`` for one data set (paper-protocol problem)."""
  problem = data.get(name).to_problem(np.float32)
  n, p = problem.num_examples, problem.num_features
  M = problem_lib.coordinate_smoothness(problem)
  w0 = jnp.zeros(p, jnp.float32)
  strength = np.broadcast_to(np.asarray(getattr(problem.penalty, "strength", 0.0)), (p,))
  out = {}
  for clip in CLIPS:
    thresholds = clipping.coordinate_thresholds(jnp.float32(clip), M, problem.curvature)
    g = np.asarray(kernels.clipped_gradient(problem, w0, kernels.init_margins(problem, w0), thresholds))
    top = float(np.max(np.maximum(np.abs(g) - strength, 0.0) / np.sqrt(np.asarray(M))))
    delta_bar = float(np.max(2.0 * np.asarray(thresholds) / n / np.sqrt(np.asarray(M))))
    for T in BUDGETS:
      b = accounting.calibrate_gcd(1.0, 1.0 / n**2, steps=T).selection_noise
      out[(clip, T)] = top / (b * delta_bar * np.log(p))
  return out


def main(names):
  print("| data set | " + " | ".join(f"clip {c}, T = {t}" for c in CLIPS for t in BUDGETS) + " |")
  print("|---" * (1 + len(CLIPS) * len(BUDGETS)) + "|")
  for name in names:
    r = ratios(name)
    print(f"| {name} | " + " | ".join(f"{r[(c, t)]:.2f}" for c in CLIPS for t in BUDGETS) + " |")


if __name__ == "__main__":
  main(sys.argv[1:] or ["log1", "log2", "square", "madelon_synth", "permeability_qsar", "dorothea_synth"])
