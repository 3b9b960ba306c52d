"""Host-side privacy accounting and noise calibration for DP-GCD, DP-CD and DP-SGD.

Everything here is NumPy / SciPy on the host (never JAX, never inside ``jit``). Two kinds of
functions: ``*_epsilon`` turns noise multipliers into the epsilon of an (epsilon, delta)-DP
guarantee; ``calibrate_*`` turns a budget into the smallest noise multipliers that meet it.

Neighbouring relation
---------------------
Replace-one: datasets ``D`` and ``D'`` of the same (public) size ``n`` differ in one record.
Every guarantee below is for this relation.

Sensitivities the multipliers refer to
--------------------------------------
Noise multipliers are in units of sensitivity: noise scale = multiplier * sensitivity.

* DP-GCD selection (``b`` for "laplace", ``beta`` for "gumbel"): ``Delta_bar``, the
  replace-one sensitivity of the normalized scores ``u_j = g_j / sqrt(M_j)``:
  ``Delta_bar = max_j Delta_j / sqrt(M_j)`` with ``Delta_j = 2 C_j / n``. Laplace scores use
  ``Z_j ~ Lap(b Delta_bar)``; Gumbel selection uses ``argmax_j |u_j| + b Delta_bar G_j``,
  ``G_j ~ Gumbel(0, 1)`` (i.e. ``beta = b Delta_bar``).
* DP-GCD / DP-CD update (``b'`` for "laplace", ``s`` for "gaussian"): ``Delta_j = 2 C_j / n``,
  the replace-one sensitivity of the clipped mean coordinate gradient ``g_j``. Noise is
  ``Lap(b' Delta_j)`` or ``N(0, (s Delta_j)^2)``.
* DP-SGD (``s``): ``C``, the l2 clipping norm of ONE example's gradient, i.e. the l2 change of
  the SUM of the sampled clipped gradients when one record is added or removed. The noise on
  the sum is ``N(0, (s C)^2 I)`` (divide by the expected batch size afterwards if wanted). This
  is dp_accounting's convention for ``PoissonSampledDpEvent(q, GaussianDpEvent(s))``. Replacing
  one record moves the sum by up to ``2 C``; the accounting below handles replace-one directly
  (do NOT also double the noise).

Per-step privacy costs
----------------------
* selection "laplace", multiplier ``b``: pure ``eps_sel = 2 / b`` (report-noisy-max argument,
  DESIGN section 4).
* selection "gumbel" (exponential mechanism), multiplier ``b``: ``eps_sel = 2 / b`` pure and
  ``eps_sel``-bounded-range, hence ``rho_sel = eps_sel^2 / 8`` zCDP (Cesar & Rogers 2021).
* update "laplace", multiplier ``b'``: pure ``eps_upd = 1 / b'``; its exact RDP curve is
  Mironov (2017, Prop. 6):
  ``r(a) = eps + log(1 + (a - 1) (exp((1 - 2a) eps) - 1) / (2a - 1)) / (a - 1)``.
* update "gaussian", multiplier ``s``: ``rho_upd = 1 / (2 s^2)`` (RDP ``a / (2 s^2)``); its
  privacy-loss distribution is ``N(mu^2 / 2, mu^2)`` with ``mu = 1 / s``.
* any eps-DP step is dominated by binary randomized response with parameter eps
  (Kairouz, Oh & Viswanath 2015), whose RDP is
  ``r(a) = log((e^{a eps} + e^{(1 - a) eps}) / (1 + e^eps)) / (a - 1)`` (<= min(eps, a eps^2/2)).

Composition routes (``method``)
-------------------------------
* ``"pure_pld"`` (DP-GCD, update "laplace"): exact optimal composition of the pure parts via
  the randomized-response privacy-loss distribution. With ``T1`` steps of ``eps1`` and ``T2``
  steps of ``eps2``, ``L = eps1 (2A - T1) + eps2 (2B - T2)``, ``A ~ Bin(T1, e^eps1 / (1 +
  e^eps1))``, ``B ~ Bin(T2, ...)`` under ``P``, the flipped binomials under ``Q``, and

  .. math:: \\delta(\\varepsilon) = E_P[(1 - e^{\\varepsilon - L})_+]
            = P(L > \\varepsilon) - e^{\\varepsilon} Q(L > \\varepsilon),

  summed over ``A`` with binomial survival functions of ``B`` (log space, vectorized, O(T)).
* ``"pld"`` (DP-GCD with update "gaussian", DP-CD): the same, with the Gaussian part exact:
  ``T`` Gaussian steps of multiplier ``s`` compose to ``mu``-GDP, ``mu = sqrt(T) / s``, with
  ``delta_G(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang 2018), and
  ``delta(eps) = E_A[delta_G(eps - eps1 (2A - T1))]`` for the randomized-response selection.
* ``"rdp"``: sum the per-step RDP curves (Gumbel: ``min(a eps^2 / 8, RR)``; Laplace selection:
  RR; Laplace update: Mironov; Gaussian: ``a / (2 s^2)``) and convert with

  .. math:: \\varepsilon = \\min_{\\alpha > 1} r(\\alpha) + \\log(1 - 1/\\alpha)
            - (\\log \\delta + \\log \\alpha) / (\\alpha - 1)

  (Canonne, Kamath & Steinke 2020, Prop. 12; dp_accounting's conversion), minimized over a
  dense log grid of orders in (1, 1e6] refined around the best order (every order is valid,
  so the result is a valid bound).
* ``"closed_form"`` (DP-GCD, update "laplace" only; for comparison, never chosen by "best"):
  each iteration is ``eps0 = eps_sel + eps_upd`` pure DP; Dwork, Rothblum & Vadhan (2010)
  advanced composition gives ``eps = sqrt(2 T log(1/delta)) eps0 + T eps0 (e^eps0 - 1)``
  (we report the min with basic composition ``T eps0``).
* ``"dp_accounting_pld"`` (DP-SGD): dp_accounting's PLD accountant with
  ``NeighboringRelation.REPLACE_ONE``: per step the pair
  ``(q N(C, .) + (1-q) N(0, .), q N(-C, .) + (1-q) N(0, .))`` (substitution with Poisson
  sampling), discretization 1e-4, pessimistic estimate. This relies on dp_accounting's
  one-dimensional substitution pair being the worst case for replace-one (as its
  documentation states); the RDP route below needs no such reduction.
* ``"dp_accounting_rdp"`` (DP-SGD): dp_accounting's RDP accountant does not support
  replace-one for Poisson sampling. We take its add/remove curve ``R(a)`` (Mironov, Talwar &
  Zhang 2019; it bounds both directions) for the composed mechanism and pass through the
  intermediate dataset ``D \\ {x}`` with the weak triangle inequality of Renyi divergence
  (Mironov 2017, Prop. 11): for orders ``a1, a2 > 1``, ``p = 1 + (a1 - 1) / a2``,
  ``alpha = a1 / p``:
  ``D_alpha(M(D) || M(D')) <= (a1 - 1) / (a1 - p) R(a1) + R(a2)``.
  Valid in any dimension; looser than the PLD route, but fast.

dp_accounting 0.6.0 pitfalls (relevant when cross-checking): ``PLDAccountant.compose(
RandomizedResponseDpEvent(...), count)`` ignores ``count`` (build the PLD with
``from_randomized_response(...).self_compose(count)`` instead), and its PLD of small per-step
epsilons is non-monotone at coarse discretization (1e-4); use 1e-5 or finer there.

``method="best"`` returns the minimum over the valid routes (all are upper bounds on the same
privacy profile) and calibration reports which one won.

Calibration
-----------
One scalar is bisected (in log space): the common multiplier (``selection_share=None``) or a
scale ``k`` with the ratio of the two multipliers fixed by the share. Feasibility (``epsilon
<= target``, or ``delta(epsilon_target) <= delta`` on the PLD routes) is monotone in the
scalar because each route is monotone in every multiplier (post-processing). The bracket end
that is returned is always feasible and within 0.1% (dp_accounting routes) or 0.02% (others)
of the smallest feasible scalar.

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
* Dwork, Rothblum, Vadhan. Boosting and Differential Privacy. FOCS 2010.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable

import numpy as np
from scipy import optimize
from scipy import special
from scipy import stats

from dpgcd_jax import _validate

SELECTIONS = ("laplace", "gumbel")
UPDATES = ("laplace", "gaussian")

# Relative precision of the calibration bisection (on the log of the scalar).
_REL_TOL = 2e-4
_REL_TOL_DP_ACCOUNTING = 1e-3
# dp_accounting PLD discretization for DP-SGD.
_PLD_DISCRETIZATION = 1e-4
# Orders for dp_accounting's RDP accountant (integers: exact and fast formulas there).
_SGD_RDP_ORDERS = np.array(
    list(range(2, 65)) + [72, 80, 96, 112, 128, 160, 192, 256, 384, 512], dtype=float)
# Dense grid of alpha - 1 for the RDP -> (epsilon, delta) conversion.
_ALPHA_GRID = 1.0 + np.logspace(-4, 6, 1500)


@dataclasses.dataclass(frozen=True)
class Calibration:
  """Result of a ``calibrate_*`` call; plugs into the solvers.

  Attributes:
    selection_noise: selection multiplier ``b`` (units of ``Delta_bar``); ``None`` for DP-CD
      and DP-SGD.
    update_noise: update multiplier (units of ``Delta_j`` for DP-GCD / DP-CD, of the clipping
      norm ``C`` for DP-SGD).
    epsilon: epsilon actually achieved at these multipliers (``<=`` the target).
    delta: the delta of the guarantee.
    steps: number of iterations accounted for.
    method: the composition route that produced ``epsilon`` (see the module docstring).
  """

  selection_noise: float | None
  update_noise: float
  epsilon: float
  delta: float
  steps: int
  method: str


# ----------------------------------------------------------------------------------------
# Validation helpers.
# ----------------------------------------------------------------------------------------


def _check_budget(epsilon: float, delta: float) -> None:
  _validate.check_number("epsilon", epsilon, low=0.0, low_open=True)
  _check_delta(delta)


def _check_delta(delta: float) -> None:
  _validate.check_number("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)


def _check_noise(name: str, x: float) -> float:
  _validate.check_positive(name, x, allow_zero=True, allow_inf=True)
  return float(x)


def _check_share(share: float | None) -> float | None:
  if share is None:
    return None
  _validate.check_number("selection_share", share, low=0.0, high=1.0, low_open=True,
                         high_open=True)
  return float(share)


def _check_rate(q: float) -> float:
  _validate.check_number("sampling_rate", q, low=0.0, high=1.0, low_open=True)
  return float(q)


def _gcd_methods(update: str) -> tuple[str, ...]:
  if update == "laplace":
    return ("best", "pure_pld", "rdp", "closed_form")
  return ("best", "pld", "rdp")


# ----------------------------------------------------------------------------------------
# RDP curves (vectorized over orders ``a > 1``) and the conversion to (epsilon, delta).
# ----------------------------------------------------------------------------------------


def _rr_rdp(eps: float, a: np.ndarray) -> np.ndarray:
  """RDP of binary randomized response with parameter eps (tight for any eps-DP step).

  .. math:: r(a) = \\frac{1}{a - 1} \\log \\frac{e^{a\\varepsilon} + e^{(1-a)\\varepsilon}}
            {1 + e^{\\varepsilon}} \\le \\min(\\varepsilon, a\\varepsilon^2 / 2).
  """
  if eps == 0.0:
    return np.zeros_like(a)
  if math.isinf(eps):
    return np.full_like(a, np.inf)
  r = (np.logaddexp(a * eps, (1.0 - a) * eps) - np.logaddexp(0.0, eps)) / (a - 1.0)
  return np.clip(r, 0.0, np.minimum(eps, a * eps * eps / 2.0))


def _br_rdp(eps: float, a: np.ndarray) -> np.ndarray:
  """RDP of an eps-bounded-range (and eps-DP) step: ``min(a eps^2 / 8, RR(eps))``."""
  if math.isinf(eps):
    return np.full_like(a, np.inf)
  return np.minimum(a * eps * eps / 8.0, _rr_rdp(eps, a))


def _laplace_rdp(eps: float, a: np.ndarray) -> np.ndarray:
  """Exact RDP of the Laplace mechanism with pure parameter eps = 1 / b (Mironov 2017).

  .. math:: r(a) = \\varepsilon + \\frac{1}{a - 1}\\log\\Big(1 + (a - 1)
            \\frac{e^{(1 - 2a)\\varepsilon} - 1}{2a - 1}\\Big).
  """
  if eps == 0.0:
    return np.zeros_like(a)
  if math.isinf(eps):
    return np.full_like(a, np.inf)
  r = eps + np.log1p((a - 1.0) * np.expm1((1.0 - 2.0 * a) * eps) / (2.0 * a - 1.0)) / (a - 1.0)
  return np.clip(r, 0.0, np.minimum(eps, a * eps * eps / 2.0))


def _gaussian_rdp(noise: float, a: np.ndarray) -> np.ndarray:
  """RDP of the Gaussian mechanism with multiplier ``s``: ``a / (2 s^2)``."""
  if noise == 0.0:
    return np.full_like(a, np.inf)
  return a / (2.0 * noise * noise)


def _rdp_conversion(a: np.ndarray, r: np.ndarray, delta: float) -> np.ndarray:
  """epsilon(a) = r + log(1 - 1/a) - (log delta + log a) / (a - 1), clipped at 0."""
  with np.errstate(invalid="ignore", over="ignore"):
    eps = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
  eps = np.where(np.isnan(eps), np.inf, eps)
  return np.maximum(eps, 0.0)


def _rdp_epsilon(curve: Callable[[np.ndarray], np.ndarray], delta: float) -> float:
  """Minimizes the RDP conversion over orders: dense log grid, then a zoomed grid."""
  a = _ALPHA_GRID
  eps = _rdp_conversion(a, curve(a), delta)
  i = int(np.argmin(eps))
  best = float(eps[i])
  if not math.isfinite(best):
    return math.inf
  lo, hi = a[max(i - 1, 0)], a[min(i + 1, a.size - 1)]
  a2 = np.linspace(lo, hi, 65)
  a2 = a2[a2 > 1.0]
  eps2 = _rdp_conversion(a2, curve(a2), delta)
  return float(min(best, np.min(eps2)))


# ----------------------------------------------------------------------------------------
# Exact privacy-loss distributions: randomized response groups and a Gaussian part.
# ----------------------------------------------------------------------------------------


def _rr_probability(eps: float) -> float:
  """P(randomized response keeps its input) = e^eps / (1 + e^eps)."""
  return special.expit(eps)


def _log_gaussian_delta(eps: np.ndarray, mu: float) -> np.ndarray:
  """log delta_G(eps) for mu-GDP (any real eps), vectorized, in log space.

  .. math:: \\delta_G(\\varepsilon) = \\Phi(-\\varepsilon/\\mu + \\mu/2)
            - e^{\\varepsilon}\\Phi(-\\varepsilon/\\mu - \\mu/2).
  """
  eps = np.asarray(eps, dtype=float)
  if mu == 0.0:
    with np.errstate(divide="ignore"):
      return np.where(eps < 0.0, np.log(-np.expm1(np.minimum(eps, 0.0))), -np.inf)
  l1 = special.log_ndtr(-eps / mu + mu / 2.0)
  l2 = eps + special.log_ndtr(-eps / mu - mu / 2.0)
  with np.errstate(divide="ignore", invalid="ignore"):
    out = l1 + np.log(-np.expm1(np.minimum(l2 - l1, 0.0)))
  return np.where(np.isnan(out), -np.inf, out)


@functools.lru_cache(maxsize=16)
def _rr_tables(eps: float, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Binomial tables of ``steps`` randomized responses with parameter eps.

  Returns:
    ``log P(A = a)`` under ``P`` (``A ~ Bin(steps, e^eps / (1 + e^eps))``) and, padded with
    ``-inf`` at index ``steps + 1``, ``log P(A >= a)`` under ``P`` and under ``Q`` (the flipped
    binomial, ``log Q(A = a) = log P(A = a) - eps (2a - steps)``), by cumulative log-sums.
  """
  a = np.arange(steps + 1)
  log_p = stats.binom.logpmf(a, steps, _rr_probability(eps))
  log_q = log_p - eps * (2.0 * a - steps)
  pad = np.array([-np.inf])
  ge_p = np.concatenate([np.logaddexp.accumulate(log_p[::-1])[::-1], pad])
  ge_q = np.concatenate([np.logaddexp.accumulate(log_q[::-1])[::-1], pad])
  for x in (log_p, ge_p, ge_q):
    x.setflags(write=False)
  return log_p, ge_p, ge_q


def _pld_delta(eps: float, groups: list[tuple[float, int]], mu: float) -> float:
  """Exact delta(eps) of RR groups ``[(eps_i, T_i)]`` (at most two) composed with mu-GDP.

  Args:
    eps: the epsilon at which to evaluate the privacy profile.
    groups: randomized-response steps, ``T_i`` steps of parameter ``eps_i`` (> 0, finite).
    mu: the GDP parameter of the Gaussian part (0 for none).

  Returns:
    ``delta(eps) = E_P[(1 - exp(eps - L))_+]``.
  """
  groups = [(e, t) for e, t in groups if e > 0.0 and t > 0]
  # Merge equal parameters.
  if len(groups) == 2 and groups[0][0] == groups[1][0]:
    groups = [(groups[0][0], groups[0][1] + groups[1][1])]
  if not groups:
    return float(np.exp(_log_gaussian_delta(np.array(eps), mu)))
  if mu > 0.0 and len(groups) > 1:
    raise NotImplementedError("at most one randomized-response group with a Gaussian part")
  # Index the outer sum by the group with fewer steps.
  groups.sort(key=lambda g: g[1])
  e1, t1 = groups[0]
  log_pa, ge_pa, ge_qa = _rr_tables(e1, t1)
  if len(groups) == 1 and mu == 0.0:
    # One group: P(A > x) - e^eps Q(A > x), with x the largest a whose loss is <= eps.
    i = min(max(math.floor((eps / e1 + t1) / 2.0) + 1, 0), t1 + 1)
    log_p, log_q = ge_pa[i], eps + ge_qa[i]
    if log_p == -np.inf:
      return 0.0
    return float(np.exp(log_p) * -np.expm1(min(log_q - log_p, 0.0)))
  # Outer sum over a: skip the a with P(A = a) < e^-700 (far tails). Each skipped term is at
  # most P(A = a), so adding the skipped mass keeps delta an upper bound.
  a = np.arange(t1 + 1)
  keep = log_pa > -700.0
  dropped = float(np.sum(np.exp(log_pa[~keep])))
  a, log_pa = a[keep], log_pa[keep]
  loss_a = e1 * (2.0 * a - t1)
  if len(groups) == 1:
    # RR group + Gaussian part: E_A[delta_G(eps - loss_A)].
    terms = log_pa + _log_gaussian_delta(eps - loss_a, mu)
    return float(np.exp(special.logsumexp(terms))) + dropped
  # Two RR groups: for each a, the survival functions of B beyond the loss threshold.
  e2, t2 = groups[1]
  _, ge_pb, ge_qb = _rr_tables(e2, t2)
  log_qa = log_pa - loss_a
  i = np.clip(np.floor(((eps - loss_a) / e2 + t2) / 2.0) + 1, 0, t2 + 1).astype(np.int64)
  t1_terms = log_pa + ge_pb[i]
  t2_terms = eps + log_qa + ge_qb[i]
  with np.errstate(divide="ignore", invalid="ignore"):
    terms = t1_terms + np.log(-np.expm1(np.minimum(t2_terms - t1_terms, 0.0)))
  terms = np.where(np.isnan(terms), -np.inf, terms)
  return float(np.exp(special.logsumexp(terms))) + dropped


def _pld_epsilon(groups: list[tuple[float, int]], mu: float, delta: float) -> float:
  """Smallest eps with ``_pld_delta(eps) <= delta`` (root-finding, result feasible)."""
  if any(math.isinf(e) for e, _ in groups) or math.isinf(mu):
    return math.inf
  f = lambda e: _pld_delta(e, groups, mu) - delta
  if f(0.0) <= 0.0:
    return 0.0
  hi = sum(e * t for e, t in groups) + mu * mu / 2.0 + mu * math.sqrt(
      2.0 * math.log(1.0 / delta)) + 1e-3
  for _ in range(200):
    if f(hi) <= 0.0:
      break
    hi *= 2.0
  else:
    return math.inf
  root = optimize.brentq(f, 0.0, hi, xtol=1e-13, rtol=1e-13)
  # Make sure the returned value is on the feasible side.
  for _ in range(60):
    if f(root) <= 0.0:
      return float(root)
    root = min(root * (1.0 + 1e-12) + 1e-15, hi)
  return float(hi)


# ----------------------------------------------------------------------------------------
# DP-GCD.
# ----------------------------------------------------------------------------------------


def _selection_eps(selection_noise: float) -> float:
  return math.inf if selection_noise == 0.0 else 2.0 / selection_noise


def _update_eps(update_noise: float) -> float:
  return math.inf if update_noise == 0.0 else 1.0 / update_noise


def _gcd_epsilon_route(b_sel: float, b_upd: float, steps: int, delta: float, selection: str,
                       update: str, route: str) -> float:
  """epsilon of ``steps`` DP-GCD iterations by one composition route."""
  e_sel = _selection_eps(b_sel)
  if route == "rdp":
    sel_rdp = _rr_rdp if selection == "laplace" else _br_rdp
    if update == "laplace":
      e_upd = _update_eps(b_upd)
      curve = lambda a: steps * (sel_rdp(e_sel, a) + _laplace_rdp(e_upd, a))
    else:
      curve = lambda a: steps * (sel_rdp(e_sel, a) + _gaussian_rdp(b_upd, a))
    return _rdp_epsilon(curve, delta)
  if route == "pure_pld":
    return _pld_epsilon([(e_sel, steps), (_update_eps(b_upd), steps)], 0.0, delta)
  if route == "pld":
    mu = math.inf if b_upd == 0.0 else math.sqrt(steps) / b_upd
    return _pld_epsilon([(e_sel, steps)], mu, delta)
  if route == "closed_form":
    eps0 = e_sel + _update_eps(b_upd)
    if math.isinf(eps0):
      return math.inf
    adv = math.sqrt(2.0 * steps * math.log(1.0 / delta)) * eps0 + steps * eps0 * math.expm1(eps0)
    return min(adv, steps * eps0)
  raise ValueError(f"Unknown route {route!r}.")


def _gcd_routes(update: str, method: str) -> tuple[str, ...]:
  if method != "best":
    return (method,)
  return ("pure_pld", "rdp") if update == "laplace" else ("pld", "rdp")


def _gcd_best(b_sel: float, b_upd: float, steps: int, delta: float, selection: str,
              update: str, method: str) -> tuple[float, str]:
  best, best_route = math.inf, _gcd_routes(update, method)[0]
  for route in _gcd_routes(update, method):
    eps = _gcd_epsilon_route(b_sel, b_upd, steps, delta, selection, update, route)
    if eps < best:
      best, best_route = eps, route
  return best, best_route


def gcd_epsilon(
    selection_noise: float,
    update_noise: float,
    *,
    steps: int,
    delta: float,
    selection: str = "laplace",
    update: str = "laplace",
    method: str = "best",
) -> float:
  """Epsilon of ``steps`` DP-GCD iterations (one selection + one update each).

  Each iteration costs, per the module docstring, ``eps_sel = 2 / b`` (Laplace: pure; Gumbel:
  bounded range, ``rho_sel = eps_sel^2 / 8``) plus ``eps_upd = 1 / b'`` (Laplace) or
  ``rho_upd = 1 / (2 s^2)`` (Gaussian); the ``steps`` iterations are composed by ``method``.

  Args:
    selection_noise: selection multiplier ``b >= 0`` (units of ``Delta_bar``); 0 means no
      privacy (epsilon = inf), ``inf`` a free selection.
    update_noise: update multiplier ``>= 0`` (units of ``Delta_j``).
    steps: number of iterations ``T >= 1``.
    delta: target delta in (0, 1).
    selection: "laplace" (report noisy max) or "gumbel" (exponential mechanism).
    update: "laplace" or "gaussian".
    method: "best" (min over the valid routes), "pure_pld" (update "laplace"), "pld" (update
      "gaussian"), "rdp", or "closed_form" (update "laplace"; for comparison only).

  Returns:
    The epsilon of the (epsilon, delta)-DP guarantee for replace-one neighbours.

  Raises:
    ValueError: for a bad argument (the message names it).

  Examples:
    >>> from dpgcd_jax.privacy import gcd_epsilon
    >>> round(gcd_epsilon(93.6, 93.6, steps=100, delta=1e-6), 3) <= 1.0
    True
  """
  b_sel = _check_noise("selection_noise", selection_noise)
  b_upd = _check_noise("update_noise", update_noise)
  steps = _validate.check_int("steps", steps)
  _check_delta(delta)
  _validate.check_choice("selection", selection, SELECTIONS)
  _validate.check_choice("update", update, UPDATES)
  _validate.check_choice("method", method, _gcd_methods(update))
  return _gcd_best(b_sel, b_upd, steps, float(delta), selection, update, method)[0]


def _share_ratios(selection: str, update: str, share: float | None) -> tuple[float, float]:
  """Multipliers per unit of the bisected scale ``k``: ``b_sel = k r_sel``, ``b_upd = k r_upd``.

  ``share=None``: ``b_sel = b_upd = k``. Otherwise, with update "laplace" (every part pure)
  ``share = eps_sel / (eps_sel + eps_upd)`` where ``eps_sel = 2 / b_sel``, ``eps_upd = 1 / b_upd``;
  with update "gaussian" ``share = rho_sel / (rho_sel + rho_upd)`` where ``rho_sel =
  (2 / b_sel)^2 / 8`` (Gumbel) or ``(2 / b_sel)^2 / 2`` (Laplace) and ``rho_upd = 1 / (2 b_upd^2)``.
  """
  if share is None:
    return 1.0, 1.0
  if update == "laplace":  # eps_sel = share / k, eps_upd = (1 - share) / k.
    return 2.0 / share, 1.0 / (1.0 - share)
  c_sel = 0.5 if selection == "gumbel" else 2.0  # rho_sel = c_sel / b_sel^2.
  return math.sqrt(c_sel / share), math.sqrt(0.5 / (1.0 - share))  # rho = 1 / k^2.


def _bisect_scale(feasible: Callable[[float], bool], guess: float, rel_tol: float,
                  step: float = 2.0) -> float:
  """Smallest ``k > 0`` with ``feasible(k)`` (monotone), up to ``rel_tol``; returns a feasible k.

  The bracket is found by moving from ``guess`` by factors of ``step``, then bisected in log
  space until ``hi / lo <= 1 + rel_tol``.
  """
  lo, hi = guess, guess
  if feasible(guess):
    lo = guess / step
    while feasible(lo):
      hi, lo = lo, lo / step
      if lo < 1e-300:
        return hi
  else:
    hi = guess * step
    while not feasible(hi):
      lo, hi = hi, hi * step
      if hi > 1e300:
        raise ValueError("Could not meet the privacy target with finite noise.")
  while hi / lo > 1.0 + rel_tol:
    mid = math.sqrt(lo * hi)
    if feasible(mid):
      hi = mid
    else:
      lo = mid
  return hi


def _finalize(eps_fn: Callable[[float], tuple[float, str]], k: float, target: float
              ) -> tuple[float, float, str]:
  """Safety net: nudges k up until the reported epsilon meets the target."""
  for _ in range(100):
    eps, route = eps_fn(k)
    if eps <= target:
      return k, eps, route
    k *= 1.0 + 1e-5
  raise RuntimeError("calibration failed to meet its target")  # pragma: no cover


def calibrate_gcd(
    epsilon: float,
    delta: float,
    *,
    steps: int,
    selection: str = "laplace",
    update: str = "laplace",
    selection_share: float | None = None,
    method: str = "best",
) -> Calibration:
  """Smallest DP-GCD noise multipliers meeting (epsilon, delta)-DP over ``steps`` iterations.

  Bisection on one scalar ``k``: ``b_sel = k r_sel``, ``b_upd = k r_upd`` with the ratio fixed
  by ``selection_share``:

  * ``None``: equal multipliers, ``b_sel = b_upd = k``.
  * a float in (0, 1), update "laplace" (every part pure): the share of the per-iteration pure
    cost ``eps0 = eps_sel + eps_upd`` given to selection, ``eps_sel = share eps0`` with
    ``eps_sel = 2 / b_sel`` and ``eps_upd = 1 / b_upd``. The same multipliers are then
    accounted by every route.
  * a float in (0, 1), update "gaussian": the share of the per-iteration zCDP cost
    ``rho = rho_sel + rho_upd`` given to selection, ``rho_sel = share rho`` with
    ``rho_sel = (2 / b_sel)^2 / 8`` (Gumbel) or ``(2 / b_sel)^2 / 2`` (Laplace) and
    ``rho_upd = 1 / (2 b_upd^2)``.

  With ``method="best"`` each valid route is calibrated and the one needing the least noise
  wins; "closed_form" is used only when asked for.

  Args:
    epsilon: target epsilon > 0 (finite).
    delta: target delta in (0, 1).
    steps: number of iterations ``T >= 1``.
    selection: "laplace" or "gumbel".
    update: "laplace" or "gaussian".
    selection_share: see above.
    method: see :func:`gcd_epsilon`.

  Returns:
    A :class:`Calibration`; ``gcd_epsilon`` at its multipliers (same method) is ``<= epsilon``,
    and multipliers 1% smaller would violate the target.

  Raises:
    ValueError: for a bad argument (the message names it).

  Examples:
    >>> from dpgcd_jax.privacy import calibrate_gcd
    >>> cal = calibrate_gcd(1.0, 1e-6, steps=100, selection="gumbel", update="gaussian")
    >>> cal.method, round(cal.update_noise, 1)
    ('rdp', 64.1)
  """
  _check_budget(epsilon, delta)
  steps = _validate.check_int("steps", steps)
  _validate.check_choice("selection", selection, SELECTIONS)
  _validate.check_choice("update", update, UPDATES)
  share = _check_share(selection_share)
  _validate.check_choice("method", method, _gcd_methods(update))
  epsilon, delta = float(epsilon), float(delta)
  r_sel, r_upd = _share_ratios(selection, update, share)
  # Initial guess from zCDP: rho_step ~ c / k^2, eps ~ rho + 2 sqrt(rho log(1/delta)).
  rho_total = (epsilon / (2.0 * math.sqrt(math.log(1.0 / delta)) + 1.0)) ** 2
  guess = math.sqrt(2.0 * steps / rho_total) * max(r_sel, r_upd)

  best = None
  for route in _gcd_routes(update, method):
    if route in ("pure_pld", "pld"):
      def feasible(k, route=route):
        b_sel, b_upd = k * r_sel, k * r_upd
        if route == "pure_pld":
          groups, mu = [(_selection_eps(b_sel), steps), (_update_eps(b_upd), steps)], 0.0
        else:
          groups, mu = [(_selection_eps(b_sel), steps)], math.sqrt(steps) / b_upd
        return _pld_delta(epsilon, groups, mu) <= delta
    else:
      def feasible(k, route=route):
        return _gcd_epsilon_route(k * r_sel, k * r_upd, steps, delta, selection, update,
                                  route) <= epsilon
    k = _bisect_scale(feasible, guess, _REL_TOL)
    if best is None or k < best[0]:
      best = (k, route)
    guess = k
  k, route = best
  eps_fn = lambda k: (_gcd_epsilon_route(k * r_sel, k * r_upd, steps, delta, selection, update,
                                         route), route)
  k, eps, route = _finalize(eps_fn, k, epsilon)
  if method == "best":  # Report the best bound at the chosen multipliers.
    eps, route = _gcd_best(k * r_sel, k * r_upd, steps, delta, selection, update, "best")
  return Calibration(selection_noise=k * r_sel, update_noise=k * r_upd, epsilon=eps,
                     delta=delta, steps=steps, method=route)


# ----------------------------------------------------------------------------------------
# DP-CD.
# ----------------------------------------------------------------------------------------


def _cd_route(noise: float, steps: int, delta: float, route: str) -> float:
  if route == "pld":
    mu = math.inf if noise == 0.0 else math.sqrt(steps) / noise
    return _pld_epsilon([], mu, delta)
  return _rdp_epsilon(lambda a: steps * _gaussian_rdp(noise, a), delta)


def cd_epsilon(noise: float, *, steps: int, delta: float, method: str = "best") -> float:
  """Epsilon of ``steps`` DP-CD coordinate updates with Gaussian noise multiplier ``s``.

  Each update is the Gaussian mechanism on ``g_j`` with sensitivity ``Delta_j``:
  ``rho = 1 / (2 s^2)``. ``T`` of them compose exactly to ``mu``-GDP with
  ``mu = sqrt(T) / s`` (route "pld", exact: ``delta(eps) = Phi(-eps/mu + mu/2) -
  e^eps Phi(-eps/mu - mu/2)``); route "rdp" converts ``T a / (2 s^2)``.

  Args:
    noise: multiplier ``s >= 0`` (units of ``Delta_j``).
    steps: number of coordinate updates ``T >= 1``.
    delta: target delta in (0, 1).
    method: "best" (= "pld", the exact value), "pld" or "rdp".

  Returns:
    The epsilon of the (epsilon, delta)-DP guarantee.

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  noise = _check_noise("noise", noise)
  steps = _validate.check_int("steps", steps)
  _check_delta(delta)
  _validate.check_choice("method", method, ("best", "pld", "rdp"))
  route = "pld" if method == "best" else method
  return _cd_route(noise, steps, float(delta), route)


def calibrate_cd(epsilon: float, delta: float, *, steps: int, method: str = "best"
                 ) -> Calibration:
  """Smallest DP-CD Gaussian multiplier ``s`` meeting (epsilon, delta)-DP over ``steps``.

  Bisection on ``s`` (exact GDP route by default, checking ``delta(epsilon) <= delta``).

  Args:
    epsilon: target epsilon > 0 (finite).
    delta: target delta in (0, 1).
    steps: number of coordinate updates ``T >= 1``.
    method: "best" (= "pld"), "pld" or "rdp".

  Returns:
    A :class:`Calibration` with ``selection_noise=None``.

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  _check_budget(epsilon, delta)
  steps = _validate.check_int("steps", steps)
  _validate.check_choice("method", method, ("best", "pld", "rdp"))
  epsilon, delta = float(epsilon), float(delta)
  route = "pld" if method == "best" else method
  if route == "pld":
    feasible = lambda s: _pld_delta(epsilon, [], math.sqrt(steps) / s) <= delta
  else:
    feasible = lambda s: _cd_route(s, steps, delta, "rdp") <= epsilon
  guess = math.sqrt(steps) * (2.0 * math.sqrt(math.log(1.0 / delta)) + 1.0) / epsilon
  s = _bisect_scale(feasible, guess, _REL_TOL)
  s, eps, route = _finalize(lambda s: (_cd_route(s, steps, delta, route), route), s, epsilon)
  return Calibration(selection_noise=None, update_noise=s, epsilon=eps, delta=delta,
                     steps=steps, method=route)


# ----------------------------------------------------------------------------------------
# DP-SGD (through dp_accounting).
# ----------------------------------------------------------------------------------------


def _sgd_pld(noise: float, steps: int, q: float, delta: float | None, eps: float | None
             ) -> float:
  """dp_accounting PLD, replace-one: epsilon at delta, or delta at eps."""
  import dp_accounting  # pylint: disable=g-import-not-at-top
  if noise == 0.0:
    return math.inf if eps is None else 1.0
  if math.isinf(noise):
    return 0.0
  acc = dp_accounting.pld.PLDAccountant(
      dp_accounting.NeighboringRelation.REPLACE_ONE,
      value_discretization_interval=_PLD_DISCRETIZATION)
  acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(noise)),
              steps)
  if eps is None:
    return float(acc.get_epsilon(delta))
  return float(acc.get_delta(eps))


def _sgd_rdp_curve(noise: float, steps: int, q: float) -> np.ndarray:
  """dp_accounting's composed add/remove RDP curve on ``_SGD_RDP_ORDERS``."""
  import dp_accounting  # pylint: disable=g-import-not-at-top
  acc = dp_accounting.rdp.RdpAccountant(list(_SGD_RDP_ORDERS))
  acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(noise)),
              steps)
  return np.asarray(acc.rdp, dtype=float)


def _replace_from_add_remove(orders: np.ndarray, rdp: np.ndarray
                             ) -> tuple[np.ndarray, np.ndarray]:
  """Replace-one RDP from an add/remove curve by the weak triangle inequality.

  For orders ``a1, a2 > 1`` let ``p = 1 + (a1 - 1) / a2`` and ``alpha = a1 / p``; then
  (Mironov 2017, Prop. 11, with the intermediate dataset ``D \\ {x}``)
  ``D_alpha(M(D) || M(D')) <= (a1 - 1) / (a1 - p) R(a1) + R(a2)``.

  Returns:
    The orders ``alpha`` and bounds for every pair ``(a1, a2)`` (flattened).
  """
  a1, a2 = np.meshgrid(orders, orders, indexing="ij")
  r1, r2 = np.meshgrid(rdp, rdp, indexing="ij")
  p = 1.0 + (a1 - 1.0) / a2
  alpha = a1 / p
  with np.errstate(invalid="ignore"):
    bound = (a1 - 1.0) / (a1 - p) * r1 + r2
  return alpha.ravel(), np.where(np.isnan(bound), np.inf, bound).ravel()


def _sgd_rdp(noise: float, steps: int, q: float, delta: float) -> float:
  if noise == 0.0:
    return math.inf
  if math.isinf(noise):
    return 0.0
  alpha, bound = _replace_from_add_remove(_SGD_RDP_ORDERS, _sgd_rdp_curve(noise, steps, q))
  return float(np.min(_rdp_conversion(alpha, bound, delta)))


def _sgd_route(noise: float, steps: int, q: float, delta: float, route: str) -> float:
  if route == "dp_accounting_pld":
    return _sgd_pld(noise, steps, q, delta, None)
  return _sgd_rdp(noise, steps, q, delta)


_SGD_METHODS = ("best", "dp_accounting_pld", "dp_accounting_rdp")


def sgd_epsilon(noise: float, *, steps: int, sampling_rate: float, delta: float,
                method: str = "best") -> float:
  """Epsilon of ``steps`` DP-SGD steps: Poisson sampling at rate ``q`` + Gaussian noise.

  The noise on the sum of clipped per-example gradients is ``N(0, (s C)^2 I)`` with ``C`` the
  per-example l2 clipping norm (see "Sensitivities the multipliers refer to"). Accounting is
  for replace-one neighbours: dp_accounting's PLD accountant with ``REPLACE_ONE`` (route
  "dp_accounting_pld"), or its add/remove RDP curve turned into a replace-one bound by the
  weak triangle inequality (route "dp_accounting_rdp").

  Args:
    noise: multiplier ``s >= 0`` (units of ``C``).
    steps: number of steps ``T >= 1``.
    sampling_rate: Poisson sampling probability ``q`` in (0, 1].
    delta: target delta in (0, 1).
    method: "best" (min of both routes), "dp_accounting_pld" or "dp_accounting_rdp".

  Returns:
    The epsilon of the (epsilon, delta)-DP guarantee.

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  noise = _check_noise("noise", noise)
  steps = _validate.check_int("steps", steps)
  q = _check_rate(sampling_rate)
  _check_delta(delta)
  _validate.check_choice("method", method, _SGD_METHODS)
  routes = ("dp_accounting_pld", "dp_accounting_rdp") if method == "best" else (method,)
  return min(_sgd_route(noise, steps, q, float(delta), r) for r in routes)


def calibrate_sgd(epsilon: float, delta: float, *, steps: int, sampling_rate: float,
                  method: str = "best") -> Calibration:
  """Smallest DP-SGD multiplier ``s`` (units of ``C``) meeting (epsilon, delta)-DP.

  The RDP route is calibrated first (fast); with "best" its result brackets a bisection on
  the PLD route (``delta(epsilon) <= delta``, a few dp_accounting PLD evaluations, about a
  second each at long horizons).

  Args:
    epsilon: target epsilon > 0 (finite).
    delta: target delta in (0, 1).
    steps: number of steps ``T >= 1``.
    sampling_rate: Poisson sampling probability ``q`` in (0, 1].
    method: "best", "dp_accounting_pld" or "dp_accounting_rdp".

  Returns:
    A :class:`Calibration` with ``selection_noise=None``.

  Raises:
    ValueError: for a bad argument (the message names it).
  """
  _check_budget(epsilon, delta)
  steps = _validate.check_int("steps", steps)
  q = _check_rate(sampling_rate)
  _validate.check_choice("method", method, _SGD_METHODS)
  epsilon, delta = float(epsilon), float(delta)
  guess = q * math.sqrt(steps) * (2.0 * math.sqrt(math.log(1.0 / delta)) + 1.0) / epsilon
  guess = max(guess, 0.5)
  s_rdp = None
  if method in ("best", "dp_accounting_rdp"):
    s_rdp = _bisect_scale(lambda s: _sgd_rdp(s, steps, q, delta) <= epsilon, guess,
                          _REL_TOL_DP_ACCOUNTING)
    s, route = s_rdp, "dp_accounting_rdp"
  if method in ("best", "dp_accounting_pld"):
    feasible = lambda s: _sgd_pld(s, steps, q, None, epsilon) <= delta
    # The RDP solution is a close upper bracket: step down gently (a PLD evaluation gets
    # expensive at small noise).
    s_pld = _bisect_scale(feasible, s_rdp if s_rdp is not None else guess,
                          _REL_TOL_DP_ACCOUNTING, step=1.25)
    if s_rdp is None or s_pld < s_rdp:
      s, route = s_pld, "dp_accounting_pld"
  s, eps, route = _finalize(lambda s: (_sgd_route(s, steps, q, delta, route), route), s,
                            epsilon)
  if method == "best":
    eps = min(eps, sgd_epsilon(s, steps=steps, sampling_rate=q, delta=delta))
  return Calibration(selection_noise=None, update_noise=s, epsilon=eps, delta=delta,
                     steps=steps, method=route)
