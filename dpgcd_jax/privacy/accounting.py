"""Noise calibration for DP-GCD, DP-CD and DP-SGD: thin wrappers over the privacy ledger.

Everything here is NumPy / SciPy on the host (never JAX, never inside `jit`). Each solver's
mechanisms are privacy events ([`dpgcd_jax.privacy.events`][]); one iteration's events go
into a [`Ledger`][dpgcd_jax.privacy.ledger.Ledger], which composes them by the best valid route;
[`calibrate`][dpgcd_jax.privacy.calibration.calibrate] bisects the noise scale. `*_epsilon` turns noise
multipliers into the epsilon of an (epsilon, delta)-DP guarantee; `calibrate_*` turns a
budget into the smallest noise multipliers that meet it. The string arguments
(`selection="gumbel"`, `update="gaussian"`...) are sugar for the events below.

Neighbouring relation
---------------------
Replace-one: datasets `D` and `D'` of the same (public) size `n` differ in one record.

Sensitivities the multipliers refer to
--------------------------------------
Noise multipliers are in units of sensitivity: noise scale = multiplier * sensitivity.

* DP-GCD selection (`b`): `Delta_bar = max_j Delta_j / sqrt(M_j)`, the replace-one
  sensitivity of the normalized scores `u_j = g_j / sqrt(M_j)`, `Delta_j = 2 C_j / n`.
  "laplace": `argmax_j |u_j + Z_j|`, `Z_j ~ Lap(b Delta_bar)`: `PureDp(2 / b)`
  (report-noisy-max). "gumbel": `argmax_j |u_j| + b Delta_bar G_j`,
  `G_j ~ Gumbel(0, 1)` (exponential mechanism): `BoundedRange(2 / b)`.
* DP-GCD / DP-CD update (`b'` for "laplace", `s` for "gaussian"): `Delta_j`, the
  replace-one sensitivity of the clipped mean coordinate gradient `g_j`. Noise
  `Lap(b' Delta_j)`: `Laplace(1 / b')`; `N(0, (s Delta_j)^2)`: `Gaussian(s)`.
* DP-SGD (`s`): `C`, the l2 clipping norm of ONE example's gradient; the noise on the SUM
  of the sampled clipped gradients is `N(0, (s C)^2 I)`: `PoissonSampledGaussian(s, q)`
  (dp_accounting's convention; the routes handle replace-one directly, do NOT double `s`).

Routes (`method`)
-------------------
A method is the name of one of the ledger's routes (see `dpgcd_jax.privacy._routes`; one
vocabulary for `method=` here, `route=` of the ledger and `Calibration.method`), or "best":

* `"pld"`: exact privacy-loss
  distributions on lattices aligned with the events: selection as randomized response
  (exact for report-noisy-max, an upper bound for Gumbel), the Laplace update by its exact
  PLD (`dpgcd_jax.privacy._laplace`), the Gaussian updates as one GDP part.
* `"bounded_range"` (Gumbel selection): the adaptive composition of the bounded-range
  selections by a Bellman recursion on an exact lattice (`dpgcd_jax.privacy._br`, where
  the theorem is stated), updates as fixed dominating pairs. In "best" up to about 2000 steps
  (cost ~1 s per evaluation there); by name beyond.
* `"rdp"`: RDP with the optimal conversion over a dense set of orders.
* `"dp_accounting_pld"`: dp_accounting's PLD (a cross-check; looser at long horizons).
* `"closed_form"` (Laplace update, for comparison only, never chosen by "best"): each
  iteration is `eps0 = eps_sel + eps_upd` pure DP and advanced composition (Dwork, Rothblum &
  Vadhan 2010) gives `eps = min(sqrt(2 T log(1/delta)) eps0 + T eps0 (e^eps0 - 1), T eps0)`.

`method="best"` returns the minimum over the valid routes (all are upper bounds on the
same privacy profile) and calibration reports which one won. At epsilon = 1, delta = 1e-6,
T = 1000 (equal multipliers): Gumbel + Gaussian 190.5 (RDP: 202.6; the non-adaptive optimum,
a lower bound for any valid route, 188.9), Laplace + Laplace 298.42 (randomized-response
update: 298.44). DP-SGD: see `dpgcd_jax.privacy.baseline_accounting`.

Calibration
-----------
One scalar is bisected in log space ([`dpgcd_jax.privacy.calibration.calibrate`][]): the common
multiplier (`selection_share=None`) or a scale `k` with the ratio of the two multipliers
fixed by the share. The returned multipliers are feasible and within 0.02% of the smallest
feasible ones; results are cached per (solver, steps, mechanisms, share, method, epsilon,
delta).

References
----------
* Mangold, Bellet, Salmon, Tommasi. High-Dimensional Private Empirical Risk Minimization by
  Greedy Coordinate Descent. AISTATS 2023.
* Kairouz, Oh, Viswanath. The Composition Theorem for Differential Privacy. ICML 2015.
* Mironov. Renyi Differential Privacy. CSF 2017.
* Mironov, Talwar, Zhang. Renyi Differential Privacy of the Sampled Gaussian Mechanism. 2019.
* Canonne, Kamath, Steinke. The Discrete Gaussian for Differential Privacy. NeurIPS 2020.
* Balle, Wang. Improving the Gaussian Mechanism for Differential Privacy. ICML 2018.
* Cesar, Rogers. Bounding, Concentrating, and Truncating. ALT 2021.
* Dong, Durfee, Rogers. Optimal Differential Privacy Composition for Exponential Mechanisms.
  ICML 2020.
* Dwork, Rothblum, Vadhan. Boosting and Differential Privacy. FOCS 2010.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from dpgcd_jax import _validate
from dpgcd_jax.privacy import _pld
from dpgcd_jax.privacy import _rdp
from dpgcd_jax.privacy import calibration
from dpgcd_jax.privacy import costs
from dpgcd_jax.privacy import events as ev
from dpgcd_jax.privacy import ledger as ledger_lib

# Historical private names (used by tests and notebooks).
_rr_rdp = _rdp.rr_rdp
_br_rdp = _rdp.br_rdp
_laplace_rdp = _rdp.laplace_rdp
_gaussian_rdp = _rdp.gaussian_rdp
_rdp_conversion = _rdp.rdp_conversion
_rdp_epsilon = _rdp.rdp_epsilon
_replace_from_add_remove = _rdp.replace_from_add_remove
_pld_delta = lambda eps, groups, mu: _pld.pld_delta(eps, groups, mu)
_pld_epsilon = lambda groups, mu, delta: _pld.pld_epsilon(groups, mu, delta)


@dataclasses.dataclass(frozen=True)
class Calibration:
  """Result of a `calibrate_*` call; plugs into the solvers.

  Attributes:
    selection_noise: selection multiplier `b` (units of `Delta_bar`); `None` for DP-CD
      and DP-SGD.
    update_noise: update multiplier (units of `Delta_j` for DP-GCD / DP-CD, of the clipping
      norm `C` for DP-SGD).
    epsilon: epsilon actually achieved at these multipliers (`<=` the target).
    delta: the delta of the guarantee.
    steps: number of iterations accounted for.
    method: the composition route that produced `epsilon` (see the module docstring).
    report: the [`PrivacyReport`][dpgcd_jax.privacy.ledger.PrivacyReport] (entries and total).
  """

  selection_noise: float | None
  update_noise: float
  epsilon: float
  delta: float
  steps: int
  method: str
  report: ledger_lib.PrivacyReport | None = None


# ----------------------------------------------------------------------------------------
# Validation and the mechanisms' events.
# ----------------------------------------------------------------------------------------


def check_budget(epsilon: float, delta: float) -> None:
  """ValueError naming `epsilon` / `delta` unless `epsilon > 0` and `0 < delta < 1`."""
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  check_delta(delta)


def check_delta(delta: float) -> None:
  _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)


def check_noise(name: str, x: float) -> float:
  _validate.check_positive(name, x, allow_zero=True, allow_inf=True)
  return float(x)


def check_share(share: float | None) -> float | None:
  if share is None:
    return None
  _validate.check_number("selection_share", share, low=0.0, high=1.0, low_open=True,
                         high_open=True)
  return float(share)


def check_rate(q: float) -> float:
  _validate.check_number("sampling_rate", q, low=0.0, high=1.0, low_open=True)
  return float(q)


def selection_event(selection: Any, noise: float) -> ev.PrivacyEvent:
  """The event of one DP-GCD selection with multiplier `b` (the mechanism's own `event`)."""
  return costs.selection(selection).event(noise)


def update_event(update: Any, noise: float) -> ev.PrivacyEvent:
  """The event of one DP-GCD / DP-CD coordinate update with multiplier `b'` or `s`."""
  return costs.update(update).event(noise)


def gcd_ledger(selection_noise: float, update_noise: float, *, steps: int,
               selection: str = "laplace", update: str = "laplace") -> ledger_lib.Ledger:
  """The ledger of `steps` DP-GCD iterations (one selection and one update each)."""
  return ledger_lib.Ledger.of(("selection", selection_event(selection, selection_noise), steps),
                              ("update", update_event(update, update_noise), steps))


def gcd_draws(selection: Any, update: Any, features: int | None, method: str = "best") -> int:
  """The discrete sampler draws of one DP-GCD iteration (the ledger's "sampler draws",
  [`Ledger.with_draws`][dpgcd_jax.privacy.ledger.Ledger.with_draws]): `features` (`p`, one noise per
  score) for a discrete selection and one for a discrete update; 0 with float noise. ValueError
  naming `features` when a discrete selection lacks it, or `method` when it is "closed_form" (a
  route that cannot charge the draws)."""
  discrete = lambda cost: bool(getattr(cost, "discrete", False))
  draws = int(discrete(costs.update(update)))
  if discrete(costs.selection(selection)):
    if features is None:
      raise ValueError("Expected features (the number of coordinates p, each drawing one discrete noise per "
                       f"selection) with the discrete selection {selection!r}, got features=None.")
    draws += _validate.check_int("features", features)
  if draws and method == "closed_form":
    raise ValueError(f"Expected a route that charges the sampler draws of discrete noise, got method={method!r}.")
  return draws


def _gcd_methods(update: str, selection: str = "gumbel") -> tuple[str, ...]:
  """The methods "best" chooses from (plus "best" and, for a Laplace update, closed_form).

  "bounded_range" needs a bounded-range selection ("gumbel").
  """
  names: tuple[str, ...] = ("best", "pld")
  if selection == "gumbel":
    names += ("bounded_range",)
  names += ("rdp", "closed_form") if update == "laplace" else ("rdp",)
  return names


def _gcd_valid_methods(update: str, selection: str) -> tuple[str, ...]:
  return _gcd_methods(update, selection) + ("dp_accounting_pld",)


def _closed_form(b_sel: float, b_upd: float, steps: int, delta: float) -> float:
  eps0 = (math.inf if b_sel == 0.0 else 2.0 / b_sel) + (
      math.inf if b_upd == 0.0 else 1.0 / b_upd)
  if math.isinf(eps0) or eps0 > 700.0:
    return math.inf if math.isinf(eps0) else steps * eps0
  adv = math.sqrt(2.0 * steps * math.log(1.0 / delta)) * eps0 + steps * eps0 * math.expm1(eps0)
  return min(adv, steps * eps0)


# ----------------------------------------------------------------------------------------
# DP-GCD.
# ----------------------------------------------------------------------------------------


def gcd_epsilon(
    selection_noise: float,
    update_noise: float,
    *,
    steps: int,
    delta: float,
    selection: str = "laplace",
    update: str = "laplace",
    method: str = "best",
    features: int | None = None,
) -> float:
  """Epsilon of `steps` DP-GCD iterations (one selection + one update each).

  Each iteration releases `selection_event(selection, b)` (`PureDp(2 / b)` for "laplace",
  `BoundedRange(2 / b)` for "gumbel") and `update_event(update, b')` (`Laplace(1 / b')`
  or `Gaussian(s)`); the ledger composes the `2 T` adaptive releases by `method`.

  Args:
    selection_noise: selection multiplier `b >= 0` (units of `Delta_bar`); 0 means no
      privacy (epsilon = inf), `inf` a free selection.
    update_noise: update multiplier `>= 0` (units of `Delta_j`).
    steps: number of iterations `T >= 1` (mechanism rounds, one selection and one update
      each; one iteration is one pass over the data, `passes=T` in `dp_gcd.run` / `fit`).
    delta: target delta in (0, 1).
    selection: "laplace" (report noisy max) or "gumbel" (exponential mechanism).
    update: "laplace" or "gaussian".
    method: "best" (min over the valid routes), or a route: "pld", "bounded_range"
      (selection "gumbel"), "rdp", "dp_accounting_pld" (cross-check), or "closed_form"
      (update "laplace"; for comparison only).
    features: `p`, needed with a discrete selection: the ledger charges the sampler draws of
      each iteration (`gcd_draws`: `p` for a discrete selection, one for a discrete update).

  Returns:
    The epsilon of the (epsilon, delta)-DP guarantee for replace-one neighbours.

  Raises:
    ValueError: for a bad argument (the message names it).

  Examples:
    >>> from dpgcd_jax.privacy import gcd_epsilon
    >>> round(gcd_epsilon(93.6, 93.6, steps=100, delta=1e-6), 3) <= 1.0
    True
  """
  b_sel = check_noise("selection_noise", selection_noise)
  b_upd = check_noise("update_noise", update_noise)
  steps = _validate.check_int("steps", steps)
  check_delta(delta)
  costs.selection(selection)  # ValueError naming it for an unknown mechanism
  costs.update(update)
  _validate.check_choice("method", method,
                         _gcd_valid_methods(costs.update(update).name, costs.selection(selection).name))
  draws = gcd_draws(selection, update, features, method)
  if method == "closed_form":
    return _closed_form(b_sel, b_upd, steps, float(delta))
  ledger = gcd_ledger(b_sel, b_upd, steps=steps, selection=selection, update=update).with_draws(draws, steps)
  return ledger.epsilon(float(delta), route=method)


def share_ratios(selection: str, update: str, share: float | None) -> tuple[float, float]:
  """Multipliers per unit of the bisected scale `k`: `b_sel = k r_sel`, `b_upd = k r_upd`.

  `share=None`: `b_sel = b_upd = k`. Otherwise, with update "laplace" (every part pure)
  `share = eps_sel / (eps_sel + eps_upd)` where `eps_sel = 2 / b_sel`, `eps_upd = 1 / b_upd`;
  with update "gaussian" `share = rho_sel / (rho_sel + rho_upd)` where `rho_sel =
  (2 / b_sel)^2 / 8` (Gumbel) or `(2 / b_sel)^2 / 2` (Laplace) and `rho_upd = 1 / (2 b_upd^2)`.
  """
  if share is None:
    return 1.0, 1.0
  if costs.update(update).name == "laplace":  # eps_sel = share / k, eps_upd = (1 - share) / k.
    return 2.0 / share, 1.0 / (1.0 - share)
  c_sel = costs.selection(selection).zcdp_per_unit  # rho_sel = c_sel / b_sel^2.
  return math.sqrt(c_sel / share), math.sqrt(0.5 / (1.0 - share))  # rho = 1 / k^2.


def calibrate_gcd(
    epsilon: float,
    delta: float,
    *,
    steps: int,
    selection: str = "laplace",
    update: str = "laplace",
    selection_share: float | None = None,
    method: str = "best",
    features: int | None = None,
) -> Calibration:
  """Smallest DP-GCD noise multipliers meeting (epsilon, delta)-DP over `steps` iterations.

  Bisection on one scalar `k`: `b_sel = k r_sel`, `b_upd = k r_upd` with the ratio fixed
  by `selection_share`:

  * `None`: equal multipliers, `b_sel = b_upd = k`.
  * a float in (0, 1), update "laplace" (every part pure): the share of the per-iteration pure
    cost `eps0 = eps_sel + eps_upd` given to selection, `eps_sel = share eps0` with
    `eps_sel = 2 / b_sel` and `eps_upd = 1 / b_upd`.
  * a float in (0, 1), update "gaussian": the share of the per-iteration zCDP cost
    `rho = rho_sel + rho_upd` given to selection, `rho_sel = share rho` with
    `rho_sel = (2 / b_sel)^2 / 8` (Gumbel) or `(2 / b_sel)^2 / 2` (Laplace) and
    `rho_upd = 1 / (2 b_upd^2)`.

  With `method="best"` each valid route is calibrated and the one needing the least noise
  wins; "closed_form" is used only when asked for.

  Args:
    epsilon: target epsilon > 0 (finite).
    delta: target delta in (0, 1).
    steps: number of iterations `T >= 1` (mechanism rounds, one selection and one update
      each; one iteration is one pass over the data, `passes=T` in `dp_gcd.run` / `fit`).
    selection: "laplace" or "gumbel".
    update: "laplace" or "gaussian".
    selection_share: see above.
    method: see [`gcd_epsilon`][dpgcd_jax.privacy.accounting.gcd_epsilon].
    features: `p`, needed with a discrete selection (as in `gcd_epsilon`): the calibrated ledger
      charges the sampler draws of the discrete mechanisms, so the multipliers suit a run that
      draws them (`dp_gcd.run(..., secure_noise=True)`, `transforms.dp_greedy_coordinate`).

  Returns:
    A [`Calibration`][dpgcd_jax.privacy.accounting.Calibration]; `gcd_epsilon` at its multipliers (same method) is
    `<= epsilon`,
    and multipliers 0.1% smaller would violate the target.

  Raises:
    ValueError: for a bad argument (the message names it).

  Examples:
    >>> from dpgcd_jax.privacy import calibrate_gcd
    >>> cal = calibrate_gcd(1.0, 1e-6, steps=100, selection="gumbel", update="gaussian")
    >>> round(cal.update_noise, 1) <= 64.1
    True
  """
  check_budget(epsilon, delta)
  steps = _validate.check_int("steps", steps)
  costs.selection(selection)  # ValueError naming it for an unknown mechanism
  costs.update(update)
  share = check_share(selection_share)
  _validate.check_choice("method", method,
                         _gcd_valid_methods(costs.update(update).name, costs.selection(selection).name))
  draws = gcd_draws(selection, update, features, method)
  return _calibrate_gcd(float(epsilon), float(delta), steps, selection, update, share, method, draws)


@functools.lru_cache(maxsize=256)
def _calibrate_gcd(epsilon, delta, steps, selection, update, share, method, draws) -> Calibration:
  r_sel, r_upd = share_ratios(selection, update, share)
  # Initial guess from zCDP: rho_step ~ c / k^2, eps ~ rho + 2 sqrt(rho log(1/delta)).
  rho_total = (epsilon / (2.0 * math.sqrt(math.log(1.0 / delta)) + 1.0)) ** 2
  guess = math.sqrt(2.0 * steps / rho_total) * max(r_sel, r_upd)
  factory = lambda k: gcd_ledger(k * r_sel, k * r_upd, steps=steps, selection=selection,
                                 update=update).with_draws(draws, steps)
  if method == "closed_form":
    k = calibration.bisect_scale(
        lambda k: _closed_form(k * r_sel, k * r_upd, steps, delta) <= epsilon, guess, calibration.REL_TOL)
    return Calibration(selection_noise=k * r_sel, update_noise=k * r_upd,
                       epsilon=_closed_form(k * r_sel, k * r_upd, steps, delta), delta=delta,
                       steps=steps, method="closed_form",
                       report=factory(k).report(delta).with_notes(
                           "calibrated by advanced composition (closed form)"))
  k, report = calibration.calibrate(factory, epsilon, delta, guess=guess, route=method,
                                   key=("gcd", steps, selection, update, share, draws))
  return Calibration(selection_noise=k * r_sel, update_noise=k * r_upd, epsilon=report.epsilon,
                     delta=delta, steps=steps, method=report.route,
                     report=report)
