"""Accounting benchmark: calibrated noise multipliers, the tighter routes, calibration times.

Prints markdown tables:
1. DP-GCD noise multipliers (units of sensitivity, selection and update equal) at
   epsilon = 1, delta = 1e-6 for T = 10, 100, 1000 and each variant, with the route that won,
   the RDP-only multiplier (the previous default for Gumbel), the advanced-composition closed
   form, the paper's ``4 sqrt(T log(1/delta)) / epsilon`` and the floor (2T Gaussians).
2. Gumbel + Gaussian against the lower bound no valid route can beat (the non-adaptive
   optimum, max over a common t), and Laplace + Laplace at epsilon 1 and 5 with the Laplace
   update as randomized response (before) and by its exact PLD (after).
3. Calibration wall time, cold (every cache cleared) and cached, for calibrate_sgd
   (T = 10, 100, 1000, q = 0.01) and calibrate_gcd.

Run: ``.venv/bin/python benchmarks/bench_accounting.py`` (``--old`` also times dp_accounting's
PLD route for DP-SGD, the previous default: seconds per call).
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np
from scipy import optimize
from scipy import special
from scipy import stats

from dpgcd_jax import privacy
from dpgcd_jax.privacy import _adapters
from dpgcd_jax.privacy import _br
from dpgcd_jax.privacy import _fft_pld
from dpgcd_jax.privacy import _laplace
from dpgcd_jax.privacy import _pld
from dpgcd_jax.privacy import _rdp
from dpgcd_jax.privacy import _routes
from dpgcd_jax.privacy import accounting
from dpgcd_jax.privacy import baseline_accounting
from dpgcd_jax.privacy import calibration

EPSILON, DELTA = 1.0, 1e-6
STEPS = (10, 100, 1000)
VARIANTS = (("laplace", "laplace"), ("laplace", "gaussian"), ("gumbel", "laplace"),
            ("gumbel", "gaussian"))


def clear_caches() -> None:
  """Every cache of the accounting (for cold timings)."""
  for fn in (accounting._calibrate_gcd, baseline_accounting._calibrate_cd,  # pylint: disable=protected-access
             baseline_accounting._calibrate_sgd, _routes.evaluate, _br.value_table,  # pylint: disable=protected-access
             _fft_pld.single, _fft_pld.composed, _laplace.laplace_pmf, _pld.rr_tables,
             _rdp._psg_envelope, _adapters._single, _adapters.composed):  # pylint: disable=protected-access
    fn.cache_clear()
  calibration._CACHE.clear()  # pylint: disable=protected-access


def paper_closed_form(steps: int) -> float:
  return 4.0 * math.sqrt(steps * math.log(1.0 / DELTA)) / EPSILON


def noise_table() -> str:
  rows = ["| T | selection + update | noise (best) | route | RDP only | closed form (DRV) "
          "| paper 4√(T log 1/δ)/ε | floor (2T Gaussians) |",
          "|---|---|---|---|---|---|---|---|"]
  for steps in STEPS:
    floor = privacy.calibrate_cd(EPSILON, DELTA, steps=2 * steps).update_noise
    for selection, update in VARIANTS:
      kw = dict(steps=steps, selection=selection, update=update)
      cal = privacy.calibrate_gcd(EPSILON, DELTA, **kw)
      rdp = privacy.calibrate_gcd(EPSILON, DELTA, method="rdp", **kw).update_noise
      closed = (f"{privacy.calibrate_gcd(EPSILON, DELTA, method='closed_form', **kw).update_noise:.1f}"
                if update == "laplace" else "n/a")
      rows.append(f"| {steps} | {selection} + {update} | {cal.update_noise:.2f} | {cal.method} "
                  f"| {rdp:.2f} | {closed} | {paper_closed_form(steps):.1f} | {floor:.1f} |")
  return "\n".join(rows)


def _non_adaptive_delta(eps_target, br_eps, steps, mu, ts):
  best, k = 0.0, np.arange(steps + 1)
  for t in ts:
    p = _br.p_br(t, br_eps)
    loss = k * (1.0 - t) * br_eps - (steps - k) * t * br_eps
    terms = stats.binom.logpmf(k, steps, p) + _pld.log_gaussian_delta(eps_target - loss, mu)
    best = max(best, float(np.exp(special.logsumexp(terms))))
  return best


def tighter_table() -> str:
  rows = ["| case | before | after | lower bound / note |", "|---|---|---|---|"]
  for steps in STEPS:
    kw = dict(steps=steps, selection="gumbel", update="gaussian")
    before = privacy.calibrate_gcd(EPSILON, DELTA, method="rdp", **kw).update_noise
    after = privacy.calibrate_gcd(EPSILON, DELTA, method="bounded_range", **kw).update_noise
    ts = np.linspace(0.3, 0.7, 41)
    lower = optimize.brentq(lambda s: _non_adaptive_delta(
        EPSILON, 2.0 / s, steps, math.sqrt(steps) / s, ts) - DELTA, 0.5 * before, before,  # noqa: B023
                            xtol=1e-3)
    rows.append(f"| gumbel + gaussian, T={steps}, eps=1 | {before:.2f} (rdp) | {after:.2f} "
                f"(bounded_range) | non-adaptive optimum {lower:.2f} |")
  for eps in (1.0, 5.0):
    rr = lambda s: _pld.pld_epsilon([(2.0 / s, 1000), (1.0 / s, 1000)], 0.0, DELTA) - eps  # noqa: B023
    before = optimize.brentq(rr, 10.0, 1000.0, xtol=1e-4)
    cal = privacy.calibrate_gcd(eps, DELTA, steps=1000)
    gain = 1.0 - _pld.pld_epsilon([(2.0 / before, 1000)], 0.0, DELTA, (1.0 / before, 1000)) / eps
    rows.append(f"| laplace + laplace, T=1000, eps={eps:g} | {before:.3f} (RR update) "
                f"| {cal.update_noise:.3f} (exact Laplace) | epsilon at the old noise: "
                f"-{100 * gain:.3f}% |")
  return "\n".join(rows)


def _timed(fn, cold: bool) -> float:
  if cold:
    clear_caches()
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def timing_table(old: bool) -> str:
  rows = ["| call | cold (s) | cached (s) |", "|---|---|---|"]
  cases = []
  for steps in STEPS:
    cases.append((f"calibrate_sgd T={steps} q=0.01",
                  lambda s=steps: privacy.calibrate_sgd(EPSILON, DELTA, steps=s,
                                                        sampling_rate=0.01)))
    if old:
      cases.append((f"calibrate_sgd T={steps} q=0.01 method=dp_accounting_pld (before)",
                    lambda s=steps: privacy.calibrate_sgd(EPSILON, DELTA, steps=s,
                                                          sampling_rate=0.01,
                                                          method="dp_accounting_pld")))
  for steps in STEPS:
    for selection, update in VARIANTS:
      cases.append((f"calibrate_gcd {selection}+{update} T={steps}",
                    lambda s=steps, a=selection, b=update: privacy.calibrate_gcd(
                        EPSILON, DELTA, steps=s, selection=a, update=b)))
  cases.append(("calibrate_cd T=10000", lambda: privacy.calibrate_cd(EPSILON, DELTA,
                                                                      steps=10_000)))
  for name, fn in cases:
    cold = min(_timed(fn, True) for _ in range(3 if "dp_accounting" not in name else 1))
    cached = _timed(fn, False)
    rows.append(f"| {name} | {cold:.3f} | {cached:.5f} |")
  return "\n".join(rows)


def main() -> None:
  old = "--old" in sys.argv
  print(f"## DP-GCD noise multipliers at epsilon={EPSILON}, delta={DELTA}\n")
  print(noise_table())
  print("\n## Tighter routes (multipliers, delta = 1e-6)\n")
  print(tighter_table())
  print("\n## Calibration time (best of 3 cold runs; then one cached call)\n")
  print(timing_table(old))


if __name__ == "__main__":
  main()
