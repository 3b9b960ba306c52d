"""Private greedy coordinate selection and the noisy coordinate gradient.

All quantities are in *normalized units*: a coordinate gradient `g_j` is compared
through `u_j = g_j / sqrt(M_j)`, whose replace-one sensitivity is at most
`Delta_bar = max_j Delta_j / sqrt(M_j)` with `Delta_j = 2 C_j / n` (clipping).

Greedy rules, each a score that is 1-Lipschitz in `u_j`, so that
every score has sensitivity `Delta_bar`:

- `"gs-s"`: `dist(-g_j, d psi_j(w_j)) / sqrt(M_j)` (with `psi = 0`: the
  Gauss-Southwell-Lipschitz rule `|g_j| / sqrt(M_j)`). Distance to a fixed set: 1-Lipschitz.
- `"gs-r"`: `sqrt(M_j) |w_j - prox_{psi_j / M_j}(w_j - g_j / M_j)|`. The prox is
  1-Lipschitz, so the score is `1 / sqrt(M_j)`-Lipschitz in `g_j`.
- `"gs-q"`: `sqrt(2 q_j)`, `q_j = -min_d [g_j d + M_j d^2 / 2 + psi_j(w_j + d) - psi_j(w_j)]`.
  `q_j` is convex in `g_j` with derivative `-d*`; the optimality condition and the
  convexity of `psi_j` give `q_j >= M_j d*^2 / 2`, hence
  `|d sqrt(2 q_j) / d g_j| = |d*| / sqrt(2 q_j) <= 1 / sqrt(M_j)`.

Selection mechanisms (noise multiplier `b` in units of `Delta_bar`):

- `"laplace"`, paper-faithful: `Z_j ~ Lap(b Delta_bar)` added to `u_j` *inside* the
  score for `"gs-s"` with no penalty or the l2 penalty (`j = argmax |u_j + Z_j|` when
  `psi = 0`). Privacy, `eps = 2 / b` (pure): the score is `|u_j + c_j|` with `c_j`
  public; given the other noises, j wins iff `Z_j` falls outside an interval whose end
  points move by at most `2 Delta_bar` between neighbours (`u_j` moves by `Delta_bar`,
  the others' maximum by at most `Delta_bar`); each tail probability changes by at most
  `exp(2 / b)`. Every other case (GS-r, GS-q, and GS-s with l1 / elastic net / box, whose
  scores plateau at 0 so that all-zero ties break the argument) uses report-noisy-max,
  `argmax_j score_j + Z_j`: `eps = 2 / b` for any scores of sensitivity `Delta_bar`
  (given the others, j wins iff `Z_j >= r*`, and `r*` moves by at most `2 Delta_bar`).
- `"gumbel"`, exponential mechanism: `j = argmax_j score_j + b Delta_bar G_j` with
  `G_j ~ Gumbel(0, 1)`, i.e. `P(j) ∝ exp(score_j / (b Delta_bar))`: `eps = 2 / b` and
  `eps`-bounded-range, hence `rho = eps^2 / 8`-zCDP.

Update noise (multiplier `s` in units of `Delta_j`) on the selected coordinate:
`"laplace"`: `Lap(s Delta_j)`, `eps = 1 / s`; `"gaussian"`: `N(0, (s Delta_j)^2)`,
`rho = 1 / (2 s^2)`. Both use fresh noise, independent of the selection.

Sparse features ([`dpgcd_jax.sparse`][]) run the same selection: the clipped gradient of all
`p` coordinates (O(nnz + p), a feature without stored entries has `g_j = 0` exactly) and the noise
of all `p` coordinates, drawn by the same sampler as for dense features. So the float law of the
released index is the same function of the scores for every data set, whichever features are
empty (no data-dependent switch to another sampler, [`dpgcd_jax.solvers.dp_gcd`][], "One path").

Floating point: the sensitivities above are those of exact scores. The float32 arithmetic from
the exact clipped mean (its one rounding is in `Delta_j`, [`dpgcd_jax.clipping`][]) to a score
adds `g_j = mean + l2 w_j`, the penalty's terms, the division by `sqrt(M_j)` (GS-r / GS-q: the
step `w_j - g_j / M_j`, the prox, the difference): each rounding moves a value by at most `u`
times its magnitude, which is bounded by public quantities (`w` is released), and a large
`l2 w_j` or `|w_j|` can make it exceed `Delta_bar` (as found for DP-FW). Every selection
therefore uses [`score_sensitivity`][dpgcd_jax.solvers.greedy.score_sensitivity], `Delta_bar`
plus `2 k u` times the largest public magnitude for `k` roundings on either neighbour, and
every update [`update_sensitivity`][dpgcd_jax.solvers.greedy.update_sensitivity]; the float
and the secure paths alike. The bound covers the built-in penalties (a user-written one whose
intermediates exceed `|prox(0)|` plus its subgradient at `w` is not covered). GS-q is covered
for its step `d` only: its score `sqrt(2 q_j)` takes a square root of a difference of terms
(`psi(w + d) - psi(w)`), and near `q_j = 0` a rounding `delta` moves the score by up to
`sqrt(2 delta)`, unbounded by `u` (the review measured 57 `Delta_bar` at n = 1e6 with an l1
penalty, and 6000 with a box, where `w + d` rounds outside it). So GS-q runs without noise
only: [`check_private_rule`][dpgcd_jax.solvers.greedy.check_private_rule] refuses it in private
runs and fits, and the kernel fails closed on a traced nonzero multiplier. GS-s (the default)
and GS-r are covered.

Floating-point-safe variants (`secure_noise=True`; `dpgcd_jax.mechanisms`,
`dpgcd_jax.discrete_noise`): selection `"discrete_laplace"` is report-noisy-max of the
scores snapped to a public power-of-two grid plus exact discrete Laplace noise, compared as
integers (`< 2 / b`-DP: the snapping raises the sensitivity to `ceil(Delta_bar / gran) + 1`
grid steps and the integer scale is rounded up to cover it); updates `"discrete_laplace"`
(`< 1 / b'`-DP) and `"discrete_gaussian"` (`< 1 / (2 s^2)`-zCDP) release
`(round(g_j / gran) + Z) gran`, a function of one integer. A sampler cap (probability
`< 3.5e-18` per draw) or an invalid multiplier makes the step NaN (fail closed); each draw's law is
within total variation `3.5e-18` of the exact one, and the fit's ledger charges its `p + 1` draws
per step to delta ([`DiscreteDraws`][dpgcd_jax.privacy.events.DiscreteDraws]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from dpgcd_jax import _validate
from dpgcd_jax import clipping
from dpgcd_jax import mechanisms
from dpgcd_jax import penalties

Array = jax.Array


def gs_s(g: Array, w: Array, M: Array, penalty: penalties.Penalty) -> Array:
  return penalty.subdiff_distance(w, g) / jnp.sqrt(M)


def gs_r(g: Array, w: Array, M: Array, penalty: penalties.Penalty) -> Array:
  return jnp.sqrt(M) * jnp.abs(w - penalty.prox(w - g / M, 1.0 / M))


def gs_q(g: Array, w: Array, M: Array, penalty: penalties.Penalty) -> Array:
  d = penalty.prox(w - g / M, 1.0 / M) - w
  model = g * d + 0.5 * M * d**2 + penalty.coordinate_values(w + d) - penalty.coordinate_values(w)
  return jnp.sqrt(2.0 * jnp.maximum(-model, 0.0))


RULES: dict[str, Callable[..., Array]] = {"gs-s": gs_s, "gs-r": gs_r, "gs-q": gs_q}


def selection_sensitivity(thresholds: Array, M: Array, num_examples: int | Array,
                          column_mask: Array | None = None) -> Array:
  """`Delta_bar = max_j (2 C_j / n) / sqrt(M_j)`: sensitivity of every normalized score.

  `column_mask`: the true coordinates of a padded problem (the max runs over them only).
  """
  normalized = clipping.mean_sensitivity(thresholds, num_examples) / jnp.sqrt(M)
  return jnp.max(normalized if column_mask is None else jnp.where(column_mask, normalized, 0.0))


SCORE_ROUNDINGS = {"gs-s": 4, "gs-r": 8, "gs-q": 8}  # float operations from the exact mean to a score
PRIVATE_RULES = ("gs-s", "gs-r")  # GS-q: non-private runs only (module docstring, "Floating point")


def check_private_rule(rule: str, *noises: Any) -> None:
  """Raises a ValueError naming `rule` for GS-q with noise (a concrete multiplier > 0, or a
  private fit: `noises` = (inf,)): its float score is not covered. Traced multipliers are
  checked in the kernel instead ([`select_checked`][dpgcd_jax.solvers.greedy.select_checked])."""
  concrete = [np.asarray(b) for b in noises if _validate.is_concrete(b)]
  if rule not in PRIVATE_RULES and any(np.any(b > 0) for b in concrete):
    raise ValueError(f"Expected rule in {PRIVATE_RULES} with noise (a private run): GS-q's float score takes a "
                     f"square root of a difference of rounded terms, which can move it by far more than its "
                     f"sensitivity between neighbours; it runs without noise only. Got rule={rule!r}.")


def mechanisms_run(selection: Any, update: Any, secure_noise: bool) -> tuple[Any, Any]:
  """The mechanisms actually run: their discrete counterparts when `secure_noise`."""
  if not isinstance(secure_noise, bool):
    raise ValueError(f"Expected secure_noise to be a bool, got secure_noise={secure_noise!r}.")
  return mechanisms.secure(selection, update) if secure_noise else (selection, update)


def check_options(selection: str, update: str, rule: str) -> None:
  """The mechanisms' names and the greedy rule are known (ValueErrors naming them)."""
  mechanisms.selection(selection)
  mechanisms.update(update)
  _validate.check_choice("rule", rule, tuple(RULES))


def score_sensitivity(rule: str, thresholds: Array, M: Array, num_examples: int | Array, w: Array,
                      public_gradient: Array, penalty: penalties.Penalty,
                      column_mask: Array | None = None) -> Array:
  """`Delta_bar` widened by the float arithmetic between the exact clipped mean and the scores
  (module docstring, "Floating point"; [`dpgcd_jax.clipping.with_roundings`][]).

  `public_gradient`: the data-independent part added to the mean (`l2 w`). Each rounding moves
  a value by at most `u` times its magnitude, which is public: for GS-s at most
  `(C_j + |l2 w_j| + dist(0, d psi_j(w_j))) / sqrt(M_j)` (the built-in penalties add at most
  their subgradient at `w`), for GS-r and GS-q's step
  `sqrt(M_j) (2 |w_j| + (C_j + |l2 w_j|) / M_j + |prox(0)|)` (the prox is 1-Lipschitz).
  """
  base = selection_sensitivity(thresholds, M, num_examples, column_mask)
  gradient = thresholds + jnp.abs(public_gradient)
  if rule == "gs-s":
    size = (gradient + penalty.subdiff_distance(w, jnp.zeros_like(w))) / jnp.sqrt(M)
  else:
    size = jnp.sqrt(M) * (2.0 * jnp.abs(w) + gradient / M + jnp.abs(penalty.prox(jnp.zeros_like(w), 1.0 / M)))
  if column_mask is not None:
    size = jnp.where(column_mask, size, 0.0)
  return clipping.with_roundings(base, jnp.max(size), roundings=SCORE_ROUNDINGS[rule])


def update_sensitivity(threshold_j: Array, num_examples: int | Array, public_gradient_j: Array) -> Array:
  """`Delta_j` widened by the one rounding of `mean + l2 w_j` (size `C_j + |l2 w_j|`, doubled
  for margin): the sensitivity of the released coordinate gradient."""
  return clipping.with_roundings(clipping.mean_sensitivity(threshold_j, num_examples),
                                 threshold_j + jnp.abs(public_gradient_j), roundings=2)


def masked_rule(rule: Callable[..., Array], column_mask: Array) -> Callable[..., Array]:
  """`rule` with the padded coordinates' scores at `-inf`: never selected.

  Every float selection adds finite noise to the scores (or to `g` inside the score) and takes
  the argmax, so a coordinate scored `-inf` cannot win; the true coordinates' scores, noise
  and argmax are those of the unpadded problem.
  """
  return lambda g, w, M, penalty: jnp.where(column_mask, rule(g, w, M, penalty), -jnp.inf)


def select(
    key: Array,
    g: Array,
    w: Array,
    M: Array,
    penalty: penalties.Penalty,
    multiplier: Array,
    sensitivity: Array,
    *,
    selection: Any,
    rule: str,
) -> Array:
  """Index of the coordinate chosen by the private greedy rule (see the module docstring).

  `selection`: a name or a mechanism object of `dpgcd_jax.mechanisms`.
  """
  j, _ = select_checked(key, g, w, M, penalty, multiplier, sensitivity, selection=selection,
                        rule=rule)
  return j


def select_checked(key: Array, g: Array, w: Array, M: Array, penalty: penalties.Penalty,
                   multiplier: Array, sensitivity: Array, *, selection: Any,
                   rule: str, column_mask: Array | None = None) -> tuple[Array, Array]:
  """`(j, ok)`: [`select`][dpgcd_jax.solvers.greedy.select] and whether a discrete selection ran to completion.

  `ok` is always True for the float mechanisms (their failures show as NaN scores). GS-q with
  a nonzero multiplier fails closed (module docstring, "Floating point"): the multiplier
  becomes NaN, the index does not depend on the scores, and `ok` is False.
  """
  mechanism = mechanisms.selection(selection)
  covered = jnp.asarray(True)
  if rule not in PRIVATE_RULES:
    multiplier = jnp.where(multiplier == 0, multiplier, jnp.nan)
    covered = multiplier == 0
  if mechanisms.is_discrete(mechanism):
    if column_mask is not None:  # -inf has no integer on the grid: padded features are refused
      raise ValueError(f"Expected an unpadded problem (problem.columns None) with the discrete "
                       f"selection {mechanism.name!r}.")
    j, ok = mechanism.select(key, RULES[rule], g, w, M, penalty, multiplier, sensitivity, rule)
    return j, ok & covered
  scale = clipping.noise_scale(multiplier, sensitivity)
  if column_mask is None:
    return mechanism.select(key, RULES[rule], g, w, M, penalty, scale, rule), covered
  j = mechanism.select(key, masked_rule(RULES[rule], column_mask), g, w, M, penalty, scale, rule)
  # A padded index can win only through a NaN score (an infinite noise scale: -inf + inf); the
  # choice is then noise alone, and coordinate 0 (data-independent) is released instead.
  return jnp.where(column_mask[j], j, 0), covered


def privatize(key: Array, g_j: Array, multiplier: Array, sensitivity: Array, *, update: Any) -> Array:
  """`g_j` plus the update mechanism's noise of scale `multiplier * sensitivity`.

  A discrete mechanism returns `(round(g_j / gran) + Z) gran` instead (NaN when it fails).
  """
  mechanism = mechanisms.update(update)
  if mechanisms.is_discrete(mechanism):
    return mechanism.perturb(key, g_j, multiplier, sensitivity)
  scale = clipping.noise_scale(multiplier, sensitivity)
  return mechanism.perturb(key, g_j, scale)


def private_coordinate_step(
    key: Array,
    g: Array,
    w: Array,
    M: Array,
    thresholds: Array,
    num_examples: int | Array,
    penalty: penalties.Penalty,
    step_size: Array,
    selection_noise: Array,
    update_noise: Array,
    *,
    public_gradient: Array,
    selection: Any,
    update: Any,
    rule: str,
    column_mask: Array | None = None,
) -> tuple[Array, Array]:
  """The private kernel of one DP-GCD iteration, shared by the solver and the optax transform.

  From the clipped gradient `g` (thresholds `C_j`, `n` examples, `public_gradient` = `l2 w`
  its data-independent part, which sizes the roundings): select `j` privately,
  add update noise to `g_j` and take the proximal step
  `w_j <- prox_{gamma_j psi_j}(w_j - gamma_j (g_j + eta))`, `gamma_j = step_size / M_j`.

  Returns:
    `(j, new w_j)`. An invalid (negative or NaN) step size, or a discrete sampler that hit
    a cap, gives NaN (fail closed).
  """
  key_select, key_update = jax.random.split(key)
  j, ok = select_checked(key_select, g, w, M, penalty, selection_noise,
                         score_sensitivity(rule, thresholds, M, num_examples, w, public_gradient, penalty,
                                           column_mask),
                         selection=selection, rule=rule, column_mask=column_mask)
  return j, private_update(key_update, j, g[j], w, M, thresholds, num_examples, penalty, step_size, update_noise,
                           ok, public_gradient=public_gradient, update=update)


def private_update(key: Array, j: Array, g_j: Array, w: Array, M: Array, thresholds: Array,
                   num_examples: int | Array, penalty: penalties.Penalty, step_size: Array, update_noise: Array,
                   ok: Array | bool = True, *, public_gradient: Array, update: Any) -> Array:
  """The new `w_j` of [`private_coordinate_step`][dpgcd_jax.solvers.greedy.private_coordinate_step] once `j` is
  selected: `prox_{gamma_j psi_j}(w_j - gamma_j (g_j + eta))`; NaN when not `ok` (a failed
  discrete selection) or for an invalid step size (fail closed)."""
  sensitivity_j = update_sensitivity(thresholds[j], num_examples, public_gradient[j])
  noisy_g = privatize(key, g_j, update_noise, sensitivity_j, update=update)
  noisy_g = jnp.where(ok, noisy_g, jnp.nan)  # a failed discrete selection: fail closed
  gamma = jnp.where(step_size > 0, step_size / M[j], jnp.nan)
  return penalties.coordinate(penalty, j).prox(w[j] - gamma * noisy_g, gamma)
