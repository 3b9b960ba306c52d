"""Accounting benchmark: calibrated noise multipliers and calibration throughput.

Prints two markdown tables:
1. DP-GCD noise multipliers (units of sensitivity, selection and update equal) at
   epsilon = 1, delta = 1e-6 for T = 10, 100, 1000, for each variant, with the route that won,
   our advanced-composition closed form, and the ratio to the paper's closed form
   ``4 sqrt(T log(1/delta)) / epsilon`` (the numbers in DESIGN.md's table), plus the floor
   (2T Gaussian updates, exact composition).
2. Calibrations per second for each route.

Run: ``.venv/bin/python benchmarks/bench_accounting.py``
"""

from __future__ import annotations

import math
import time
from typing import Callable

from dpgcd_jax import privacy

EPSILON, DELTA = 1.0, 1e-6
STEPS = (10, 100, 1000)
VARIANTS = (("laplace", "laplace"), ("laplace", "gaussian"), ("gumbel", "laplace"),
            ("gumbel", "gaussian"))


def paper_closed_form(steps: int) -> float:
  return 4.0 * math.sqrt(steps * math.log(1.0 / DELTA)) / EPSILON


def noise_table() -> str:
  rows = ["| T | selection + update | noise (best) | method | closed form (DRV) "
          "| paper 4√(T log 1/δ)/ε | best / paper | floor (2T Gaussians) |",
          "|---|---|---|---|---|---|---|---|"]
  for steps in STEPS:
    floor = privacy.calibrate_cd(EPSILON, DELTA, steps=2 * steps).update_noise
    paper = paper_closed_form(steps)
    for selection, update in VARIANTS:
      cal = privacy.calibrate_gcd(EPSILON, DELTA, steps=steps, selection=selection,
                                  update=update)
      if update == "laplace":
        closed = privacy.calibrate_gcd(EPSILON, DELTA, steps=steps, selection=selection,
                                       update=update, method="closed_form").update_noise
        closed_str = f"{closed:.1f}"
      else:
        closed_str = "n/a"
      rows.append(f"| {steps} | {selection} + {update} | {cal.update_noise:.1f} | {cal.method} "
                  f"| {closed_str} | {paper:.1f} | {cal.update_noise / paper:.3f} "
                  f"| {floor:.1f} |")
  return "\n".join(rows)


def rate(fn: Callable[[], object], min_time: float = 0.5, max_calls: int = 200) -> float:
  """Calls per second of fn (at least one call, about min_time seconds)."""
  fn()  # Warm-up (imports, caches).
  calls, start = 0, time.perf_counter()
  while calls < max_calls:
    fn()
    calls += 1
    if time.perf_counter() - start > min_time:
      break
  return calls / (time.perf_counter() - start)


def throughput_table() -> str:
  cases = []
  for steps in (100, 1000):
    for selection, update, method in [
        ("gumbel", "gaussian", "rdp"), ("laplace", "laplace", "rdp"),
        ("laplace", "laplace", "pure_pld"), ("laplace", "gaussian", "pld"),
        ("laplace", "laplace", "closed_form"), ("laplace", "laplace", "best"),
        ("gumbel", "gaussian", "best")]:
      cases.append((f"calibrate_gcd {selection}+{update} method={method}", steps,
                    lambda s=steps, a=selection, b=update, m=method: privacy.calibrate_gcd(
                        EPSILON, DELTA, steps=s, selection=a, update=b, method=m)))
    for method in ("pld", "rdp"):
      cases.append((f"calibrate_cd method={method}", steps,
                    lambda s=steps, m=method: privacy.calibrate_cd(EPSILON, DELTA, steps=s,
                                                                   method=m)))
  for method in ("dp_accounting_rdp", "dp_accounting_pld", "best"):
    cases.append((f"calibrate_sgd q=0.01 method={method}", 1000,
                  lambda m=method: privacy.calibrate_sgd(EPSILON, DELTA, steps=1000,
                                                         sampling_rate=0.01, method=m)))
  rows = ["| call | T | calibrations / s | ms / call |", "|---|---|---|---|"]
  for name, steps, fn in cases:
    r = rate(fn, min_time=0.5 if "sgd" not in name else 0.0, max_calls=200)
    rows.append(f"| {name} | {steps} | {r:.1f} | {1e3 / r:.1f} |")
  return "\n".join(rows)


def main() -> None:
  print(f"## DP-GCD noise multipliers at epsilon={EPSILON}, delta={DELTA}\n")
  print(noise_table())
  print("\n## Calibration throughput\n")
  print(throughput_table())


if __name__ == "__main__":
  main()
