"""Accounting of the baselines: DP-CD (Gaussian coordinate updates) and DP-SGD.

DP-CD: each update is `Gaussian(s)` on `g_j` (sensitivity `Delta_j`); `T` of them
compose exactly to `sqrt(T) / s`-GDP (the ledger's "pld" route).

DP-SGD: the noise on the SUM of the sampled clipped per-example gradients is `N(0, (s C)^2 I)`,
`C` the l2 clipping norm of one example's gradient: one step is the event
`PoissonSampledGaussian(s, q)` (dp_accounting's convention; replace-one is handled by the
routes, do NOT double `s`). Methods are the ledger's route names: `"fft_pld"`
(dp_accounting's `REPLACE_ONE` pair and pessimistic connect-the-dots discretization,
vectorized), `"dp_accounting_pld"` (dp_accounting itself, slower; the same bound to ~1e-4),
`"rdp"` (the add/remove curve of Mironov, Talwar & Zhang 2019 through the weak triangle
inequality). The secure step (`secure_noise=True`: discrete Gaussian noise on the exact integer
sum) is `PoissonSampledDiscreteGaussian(s, q)`, which only the `"rdp"` route claims (an
add/remove curve of Poisson subsampling from the discrete Gaussian's `a / (2 s^2)`: the binomial
expansion, a Taylor bound for the reverse direction and joint convexity; see the event).
"""

from __future__ import annotations

import functools
import math

from dpgcd_jax import _validate
from dpgcd_jax.privacy import calibration
from dpgcd_jax.privacy import events as ev
from dpgcd_jax.privacy import ledger as ledger_lib
from dpgcd_jax.privacy.accounting import Calibration
from dpgcd_jax.privacy.accounting import check_budget
from dpgcd_jax.privacy.accounting import check_delta
from dpgcd_jax.privacy.accounting import check_noise
from dpgcd_jax.privacy.accounting import check_rate

# DP-CD.

def cd_ledger(noise: float, *, steps: int, secure_noise: bool = False) -> ledger_lib.Ledger:
  """The ledger of `steps` DP-CD Gaussian coordinate updates as `dp_cd.run` draws them;
  `secure_noise`: discrete Gaussian updates (`DiscreteGaussian`, RDP route only) and their one
  sampler draw per step ([`Ledger.with_draws`][dpgcd_jax.privacy.ledger.Ledger.with_draws])."""
  if not isinstance(secure_noise, bool):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  event = ev.DiscreteGaussian(noise) if secure_noise else ev.Gaussian(noise)
  return ledger_lib.Ledger.of(("update", event, steps)).with_draws(int(secure_noise), steps)


def cd_epsilon(noise: float, *, steps: int, delta: float, method: str = "best") -> float:
  """Epsilon of `steps` DP-CD coordinate updates with Gaussian noise multiplier `s`.

  Each update is `Gaussian(s)` on `g_j` (sensitivity `Delta_j`). `T` of them compose
  exactly to `mu`-GDP with `mu = sqrt(T) / s` (route "pld", exact: `delta(eps) =
  Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`); route "rdp" converts `T a / (2 s^2)`.

  Args:
    noise: multiplier `s >= 0` (units of `Delta_j`).
    steps: number of coordinate updates `T >= 1` (`passes * p` for `dp_cd.run(passes=...)`).
    delta: target delta in (0, 1).
    method: "best" (= "pld", the exact value), "pld" or "rdp".

  Returns:
    The epsilon of the (epsilon, delta)-DP guarantee.

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  noise = check_noise("noise", noise)
  steps = _validate.check_int("steps", steps)
  check_delta(delta)
  _validate.check_choice("method", method, ("best", "pld", "rdp"))
  route = "pld" if method == "best" else method
  return cd_ledger(noise, steps=steps).epsilon(float(delta), route=route)


def calibrate_cd(epsilon: float, delta: float, *, steps: int, method: str = "best", secure_noise: bool = False
                 ) -> Calibration:
  """Smallest DP-CD Gaussian multiplier `s` meeting (epsilon, delta)-DP over `steps`.

  Args:
    epsilon: target epsilon > 0 (finite).
    delta: target delta in (0, 1).
    steps: number of coordinate updates `T >= 1` (`passes * p` for `dp_cd.run(passes=...)`).
    method: "best" (= "pld", exact), "pld" or "rdp"; with `secure_noise`, "best" or "rdp".
    secure_noise: the multiplier of `dp_cd.run(..., secure_noise=True)` (`cd_ledger`: discrete
      Gaussian updates, RDP route, and their sampler draws charged).

  Returns:
    A [`Calibration`][dpgcd_jax.privacy.Calibration] with `selection_noise=None`.

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  check_budget(epsilon, delta)
  steps = _validate.check_int("steps", steps)
  cd_ledger(1.0, steps=1, secure_noise=secure_noise)  # validates secure_noise
  _validate.check_choice("method", method, ("best", "rdp") if secure_noise else ("best", "pld", "rdp"))
  return _calibrate_cd(float(epsilon), float(delta), steps, method, secure_noise)


@functools.lru_cache(maxsize=256)
def _calibrate_cd(epsilon, delta, steps, method, secure_noise) -> Calibration:
  route = ("rdp" if secure_noise else "pld") if method == "best" else method
  guess = math.sqrt(steps) * (2.0 * math.sqrt(math.log(1.0 / delta)) + 1.0) / epsilon
  s, report = calibration.calibrate(lambda s: cd_ledger(s, steps=steps, secure_noise=secure_noise), epsilon, delta,
                                   guess=guess, route=route, key=("cd", steps, secure_noise))
  return Calibration(selection_noise=None, update_noise=s, epsilon=report.epsilon, delta=delta,
                     steps=steps, method=report.route, report=report)


# DP-SGD.

_SGD_METHODS = ("best", "fft_pld", "dp_accounting_pld", "rdp")
# The per-step total-variation distance of the library's Poisson sampler to exact Poisson(q):
# the bound `dpgcd_jax.sampling` proves (`MAX_STEP_TOTAL_VARIATION`, the same value; a test
# checks that they agree). The accounting never imports the sampler, so it is restated here.
POISSON_STEP_TOTAL_VARIATION = 2.0**-64


def sgd_ledger(noise: float, *, steps: int, sampling_rate: float,
               secure_noise: bool = False, features: int | None = None) -> ledger_lib.Ledger:
  """The ledger of `steps` DP-SGD steps as `dp_sgd.run` draws them: Poisson sampling + Gaussian
  noise on the sum ("step"), and the sampler's deviation from exact Poisson sampling, `T eta`
  with `eta = POISSON_STEP_TOTAL_VARIATION` (`events.TotalVariation`, charged at the ledger's
  epsilon). `secure_noise`: discrete Gaussian noise on the integer sum,
  `PoissonSampledDiscreteGaussian` (RDP route only, [`dpgcd_jax.solvers.dp_sgd`][]), and its
  `features` (`p`, required) discrete Gaussian draws per step
  ([`Ledger.with_draws`][dpgcd_jax.privacy.ledger.Ledger.with_draws])."""
  if not isinstance(secure_noise, bool):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  if secure_noise and features is None:
    raise ValueError("Expected features (the number of coordinates p, each drawing one discrete Gaussian per "
                     "step) with secure_noise=True, got features=None.")
  draws = _validate.check_int("features", features) if secure_noise else 0
  event = ev.PoissonSampledDiscreteGaussian if secure_noise else ev.PoissonSampledGaussian
  return ledger_lib.Ledger.of(("step", event(noise, sampling_rate), steps),
                              ("sampling (total variation)", ev.TotalVariation(steps * POISSON_STEP_TOTAL_VARIATION),
                               1)).with_draws(draws, steps)


def sgd_epsilon(noise: float, *, steps: int, sampling_rate: float, delta: float,
                method: str = "best") -> float:
  """Epsilon of `steps` DP-SGD steps: Poisson sampling at rate `q` + Gaussian noise.

  The noise on the sum of clipped per-example gradients is `N(0, (s C)^2 I)` with `C` the
  per-example l2 clipping norm. Replace-one neighbours: dp_accounting's `REPLACE_ONE` pair
  and pessimistic discretization, vectorized here (route "fft_pld", `_fft_pld`) or through
  dp_accounting itself (route "dp_accounting_pld", slower), or the add/remove RDP curve turned
  into a replace-one bound by the weak triangle inequality (route "rdp").

  Args:
    noise: multiplier `s >= 0` (units of `C`).
    steps: number of steps `T >= 1` (`passes * (n // batch_size)` for `dp_sgd.run`).
    sampling_rate: Poisson sampling probability `q` in (0, 1].
    delta: target delta in (0, 1).
    method: "best" (min of "fft_pld" and "rdp"), "fft_pld", "dp_accounting_pld" or "rdp".

  Returns:
    The epsilon of the (epsilon, delta)-DP guarantee.

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  noise = check_noise("noise", noise)
  steps = _validate.check_int("steps", steps)
  q = check_rate(sampling_rate)
  check_delta(delta)
  _validate.check_choice("method", method, _SGD_METHODS)
  return sgd_ledger(noise, steps=steps, sampling_rate=q).epsilon(float(delta),
                                                                 route=method)


def calibrate_sgd(epsilon: float, delta: float, *, steps: int, sampling_rate: float,
                  method: str = "best", secure_noise: bool = False, features: int | None = None) -> Calibration:
  """Smallest DP-SGD multiplier `s` (units of `C`) meeting (epsilon, delta)-DP.

  `secure_noise=True`: the multiplier of the secure step (discrete Gaussian on the integer sum,
  `PoissonSampledDiscreteGaussian`), accounted by RDP only (`method` "best" or "rdp"); it needs
  `features`, `p`: the ledger charges the `p` discrete Gaussian draws of each step
  ([`Ledger.with_draws`][dpgcd_jax.privacy.ledger.Ledger.with_draws]), as `dp_sgd.fit` does.

  Args:
    epsilon: target epsilon > 0 (finite).
    delta: target delta in (0, 1).
    steps: number of steps `T >= 1` (`passes * (n // batch_size)` for `dp_sgd.run`).
    sampling_rate: Poisson sampling probability `q` in (0, 1].
    method: "best", "fft_pld", "dp_accounting_pld" or "rdp".

  Returns:
    A [`Calibration`][dpgcd_jax.privacy.Calibration] with `selection_noise=None`.

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  check_budget(epsilon, delta)
  steps = _validate.check_int("steps", steps)
  q = check_rate(sampling_rate)
  _validate.check_choice("method", method, ("best", "rdp") if secure_noise is True else _SGD_METHODS)
  sgd_ledger(1.0, steps=1, sampling_rate=q, secure_noise=secure_noise, features=features)  # validates them
  return _calibrate_sgd(float(epsilon), float(delta), steps, q, method, secure_noise, features)


@functools.lru_cache(maxsize=256)
def _calibrate_sgd(epsilon, delta, steps, q, method, secure_noise, features) -> Calibration:
  guess = q * math.sqrt(steps) * (2.0 * math.sqrt(math.log(1.0 / delta)) + 1.0) / epsilon
  s, report = calibration.calibrate(
      lambda s: sgd_ledger(s, steps=steps, sampling_rate=q, secure_noise=secure_noise, features=features),
      epsilon, delta, guess=max(guess, 0.5), route=method, key=("sgd", steps, q, secure_noise, features),
      rel_tol=calibration.REL_TOL)
  return Calibration(selection_noise=None, update_noise=s, epsilon=report.epsilon, delta=delta,
                     steps=steps, method=report.route, report=report)
